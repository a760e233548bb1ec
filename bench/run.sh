#!/usr/bin/env bash
# run.sh — `make bench`: profd against the real alternative, same inputs,
# same run, alternating, medians of ROUNDS runs.
#
#   (a) merge of 1,000 small CPU profiles (~6 KB gz each)
#   (b) merge of 200 large CPU profiles (~65 KB gz, ~1,450 functions each)
#   (c) merge of real profiles captured from examples/goapp (7 types)
#   (d), (e) the second shape (issue 18): 1,000 small (~6 KB) and 200 large
#       (~75 KB, ~3,600 samples) CPU profiles with stacks up to 64 deep,
#       a third of the locations inlined and many distinct leaf functions
#       (bench/gen -kind deepsmall, deep)
# profd: `profd pprof merge`; Go: the pprof tool behind `go tool pprof -proto`
# (run directly, which spares Go the `go` wrapper's startup). Wall time from
# the shell, peak RSS from /usr/bin/time. Then the codec alone: decode
# throughput of raw protobuf on one core (bench_codec), and the sample
# blocks of each set as one series, the store's own against a model-coded
# prototype: bytes and decode time (bench_blocks). Then the collector
# over HTTP (bench/serve.sh: ingest rate, merge through the API, storage);
# the ClickHouse store beside the embedded one (bench/clickhouse.sh);
# the scraper against many targets (bench/scrape.sh); last, fleet analytics
# over a simulated day of 150 pods, with and without rollups (bench/fleet.sh).
#
# Results: a Markdown table on stdout and in $BUILD/bench-results.md.
# Env: ROUNDS (default 5), BUILD (default build), MERGE_ONLY=1 (stop after
# the file merges, the codec and the floor), TARGETS_ONLY=1 (then only the
# collector and fleet analytics without go tool pprof: what issue 18's
# targets are measured by; make bench-targets).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-5}
PROFD=$PWD/$BUILD/profd
DATA=$PWD/$BUILD/bench-data
export HOME=$PWD/$BUILD/gohome PPROF_TMPDIR=$PWD/$BUILD/gohome/pprof
mkdir -p "$HOME" "$DATA"
PPROF=$(go env GOROOT)/pkg/tool/$(go env GOOS)_$(go env GOARCH)/pprof
[ -x "$PPROF" ] || { echo "bench: go's pprof tool not found at $PPROF" >&2; exit 1; }

gen() { # kind n dir
	if [ ! -f "$3/.done-$2" ]; then
		rm -rf "$3"
		"$BUILD/gen" -kind "$1" -n "$2" -seed 1 -o "$3" >/dev/null
		touch "$3/.done-$2"
	fi
}
gen small 1000 "$DATA/small"
gen large 200 "$DATA/large"
gen deepsmall 1000 "$DATA/deepsmall"
gen deep 200 "$DATA/deep"
# shellcheck source=bench/goapp.sh
. bench/goapp.sh
goapp_captures "$BUILD" "$DATA" || { echo "bench: capturing examples/goapp failed" >&2; exit 1; }

# time_cmd OUT CMD...: wall seconds and peak RSS (KB) of one run, appended to OUT
time_cmd() {
	local out=$1
	shift
	local t0 t1
	t0=$(date +%s.%N)
	/usr/bin/time -f "%M" -o "$out.rss" "$@" >/dev/null 2>"$out.err" || {
		echo "bench: failed: $* ($(tail -3 "$out.err"))" >&2
		exit 1
	}
	t1=$(date +%s.%N)
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}') $(cat "$out.rss")" >>"$out"
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

results=$BUILD/bench-results.md
# shellcheck source=bench/targets.sh
. bench/targets.sh
: >"$TARGETS"
declare -A GOW PDW GOR PDR # per set label: the medians of go tool pprof -proto and of profd, s and peak RSS KB
{
	echo "| input | files | input size | profd merge | go tool pprof -proto | speed-up | profd peak RSS | pprof peak RSS | RSS ratio |"
	echo "|---|---|---|---|---|---|---|---|---|"
} >"$results"

bench_set() { # label files...
	local label=$1
	shift
	local tmp
	tmp=$(mktemp -d)
	for _ in $(seq "$ROUNDS"); do
		time_cmd "$tmp/profd" "$PROFD" pprof merge -q -o "$tmp/p.pb.gz" "$@"
		time_cmd "$tmp/go" "$PPROF" -proto -output "$tmp/g.pb.gz" "$@"
	done
	# sanity: both merges must read the same in go tool pprof -top (profd's
	# output goes through pprof -proto too, which drops samples without a
	# stack, as it did for Go's own output: see docs/pprof-tools.md)
	"$PPROF" -proto -output "$tmp/pp.pb.gz" "$tmp/p.pb.gz" 2>/dev/null
	"$PPROF" -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$tmp/pp.pb.gz" 2>/dev/null | tail -n +2 >"$tmp/pt"
	"$PPROF" -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$tmp/g.pb.gz" 2>/dev/null | tail -n +2 >"$tmp/gt"
	if ! cmp -s "$tmp/pt" "$tmp/gt"; then
		echo "bench: $label: merged profiles differ in go tool pprof -top" >&2
		exit 1
	fi
	local pw gw pr gr size
	pw=$(awk '{print $1}' "$tmp/profd" | median)
	gw=$(awk '{print $1}' "$tmp/go" | median)
	pr=$(awk '{print $2}' "$tmp/profd" | median)
	gr=$(awk '{print $2}' "$tmp/go" | median)
	size=$(du -cb "$@" | tail -1 | awk '{ if ($1 >= 1e6) printf "%.1f MB", $1/1e6; else printf "%.0f KB", $1/1e3 }')
	GOW[$label]=$gw PDW[$label]=$pw GOR[$label]=$gr PDR[$label]=$pr
	awk -v l="$label" -v n=$# -v s="$size" -v pw="$pw" -v gw="$gw" -v pr="$pr" -v gr="$gr" 'BEGIN {
		printf "| %s | %d | %s | %.3f s | %.3f s | %.1fx | %.1f MB | %.1f MB | 1/%.0f |\n", l, n, s, pw, gw, gw / pw,
			pr / 1024, gr / 1024, gr / pr }' | tee -a "$results"
	rm -rf "$tmp"
}

echo "profd bench: $ROUNDS rounds each, medians; $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%MZ)"
echo
cat "$results"
bench_set "(a) small CPU" "$DATA"/small/*.pb.gz
bench_set "(b) large CPU" "$DATA"/large/*.pb.gz
for t in cpu heap goroutine; do
	bench_set "(c) goapp $t" "$DATA"/goapp/run*/"$t".pb.gz
done
bench_set "(d) deep shape, small" "$DATA"/deepsmall/*.pb.gz
bench_set "(e) deep shape, large" "$DATA"/deep/*.pb.gz

echo
echo "Codec alone, one core ($BUILD/bench_codec, median of 9):"
for set in small large deepsmall deep; do
	"$BUILD/bench_codec" -r 9 -j "$(nproc)" "$DATA/$set"/*.pb.gz >"$DATA/codec-$set.txt"
	awk -v s="$set" '
		/^raw_bytes/ {raw=$2} /^gz_bytes/ {gz=$2}
		/^decode_raw_MBps/ {d=$2} /^gunzip_raw_MBps/ {g=$2} /^encode_raw_MBps/ {e=$2}
		/^merge_decoded_median_s/ {m=$2}
		END {printf "  %-9s: %.1f MB raw protobuf (%.1f MB gz): decode %.0f MB/s, gunzip %.0f MB/s, encode %.0f MB/s, merge of decoded %.3f s\n", s, raw/1e6, gz/1e6, d, g, e, m}' \
		"$DATA/codec-$set.txt" | tee -a "$results"
done

# The floor of any file merge on this machine: reading the inputs alone
# (each file inflated and every protobuf field looked at, nothing kept, no
# output written), on as many threads as profd merges with; then the same
# with every file read from the page cache on each pass, as a merge of
# files must, plus the start of a process (profd --version) and the result
# written (encoded and gzip'd at level 6 on as many threads, in memory).
# Go's time over that is the most any merge could be faster than go tool
# pprof -proto here.
starts=$(mktemp)
for _ in $(seq 21); do time_cmd "$starts" "$PROFD" --version; done
start=$(awk '{print $1}' "$starts" | median)
rm -f "$starts" "$starts.rss" "$starts.err"
echo
echo "The floor of a file merge here ($BUILD/bench_codec, medians of 9): reading alone (inflate + every field walked, nothing kept, no output); then also the files read from the page cache, a process started ($start s) and the merged result written (encoded, gzip level 6):"
echo "| input | floor, 1 thread | floor, $(nproc) threads | + files read, process start, result written | go tool pprof -proto | at most | profd merge | profd |" | tee -a "$results"
echo "|---|---|---|---|---|---|---|---|" | tee -a "$results"
for set in small large deepsmall deep; do
	case $set in
	small) label="(a) small CPU" ;; large) label="(b) large CPU" ;;
	deepsmall) label="(d) deep shape, small" ;; deep) label="(e) deep shape, large" ;;
	esac
	awk -v l="$label" -v gw="${GOW[$label]}" -v pw="${PDW[$label]}" -v st="$start" '
		/^floor_read_1t_median_s/ {f1=$2} /^floor_read_jt_median_s/ {fj=$2} /^floor_files_jt_median_s/ {ff=$2}
		/^write_merged_jt_median_s/ {w=$2}
		END {printf "| %s | %.3f s | %.3f s | %.3f s | %.3f s | %.0fx | %.3f s | %.1fx |\n", l, f1, fj, ff + st + w, gw, gw / (ff + st + w), pw, gw / pw}' \
		"$DATA/codec-$set.txt" | tee -a "$results"
	read -r most speed rss met < <(awk -v gw="${GOW[$label]}" -v pw="${PDW[$label]}" -v gr="${GOR[$label]}" -v pr="${PDR[$label]}" -v st="$start" '
		/^floor_files_jt_median_s/ {ff=$2} /^write_merged_jt_median_s/ {w=$2}
		END {printf "%.0f %.1f %.0f %s\n", gw / (ff + st + w), gw / pw, gr / pr, (gw >= 50 * pw && gr >= 10 * pr) ? "yes" : "no"}' "$DATA/codec-$set.txt")
	target_add "profd pprof merge vs go tool pprof -proto" "$label" "${speed}x, RSS 1/$rss" ">= 50x, RSS <= 1/10" "$met" \
		"reading the files, a process start and writing the result allow at most ${most}x here"
done
[ -z "${MERGE_ONLY:-}" ] || { target_print | tee -a "$results"; exit 0; }
if [ -n "${TARGETS_ONLY:-}" ]; then # make bench-targets: what the targets are measured by
	BUILD=$BUILD ROUNDS=$ROUNDS bench/serve.sh
	BUILD=$BUILD ROUNDS=$ROUNDS GO_ROUNDS=${GO_ROUNDS:-0} bench/fleet.sh
	target_print | tee -a "$results"
	exit 0
fi

echo
echo "Sample blocks of one series, the store's against a model-coded prototype ($BUILD/bench_blocks, best of 5):"
for set in small large deepsmall deep; do
	"$BUILD/bench_blocks" -r 5 "$DATA/$set"/*.pb.gz | sed "s/^/  $set: /" | tee -a "$results"
done

# The collector over HTTP: ingest, merge through the API, storage (appends
# its tables to $results).
BUILD=$BUILD ROUNDS=$ROUNDS bench/serve.sh

# The ClickHouse store beside the embedded one: ingest and merge of the 200
# large profiles (appends its tables to $results; skipped without ClickHouse).
BUILD=$BUILD ROUNDS=$ROUNDS bench/clickhouse.sh

# The scraper against many loopback targets (appends its table to $results).
BUILD=$BUILD ROUNDS=$ROUNDS bench/scrape.sh

# Fleet analytics: a simulated day of 150 pods, top and series with and
# without rollups, against go tool pprof (appends its tables to $results).
BUILD=$BUILD ROUNDS=$ROUNDS bench/fleet.sh

# The web UI: the flame graph of a 100,000-node profile in headless Chromium
# (first render, hover and zoom per frame) and the page weight (appends its
# tables to $results; skipped without chromium or npm).
bash bench/ui.sh | tee -a "$results"

target_print | tee -a "$results"
