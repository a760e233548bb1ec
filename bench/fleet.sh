#!/usr/bin/env bash
# fleet.sh — fleet analytics (issue 6; `make bench` runs it after the
# scraper): one simulated day of a fleet on the embedded store, with and
# without rollups, against `go tool pprof` on the same files.
#
#   Data: bench/gen -fleet -seed 1: 150 pods over 15 services (three
#   workloads, own binaries and packages, shared runtime/stdlib/platform
#   frames), 6 CPU profiles per pod per hour for 24 h of 2026-01-01 =
#   21,600 profiles (~14 KB gz each), kept in $BUILD/bench-data/fleet. Loaded
#   once over HTTP (loadgen post -fleet: service and pod=... label per file,
#   and version=1.0, or 1.1 from hour 8 for auth, 12 for billing, 16 for cart:
#   three rollouts) into $BUILD/bench-data/fleet-store (--rollup-interval 0:
#   no rollups).
#   Each run copies that data dir twice: "raw" (never rolled up) and
#   "rollups" (a server started on it with --rollup-interval 1s builds
#   every hour's rollup in its first pass: the time is the server's own log
#   line).
#   Then two servers at once (unpinned, --retention 0,
#   --max-merge-profiles 100000), queried alternately, ROUNDS rounds:
#     top     GET /api/1/top?query=cpu{}&from=<day>&to=<day+24h>&n=10
#             (on "raw" with rollups=false: the selection path, as before
#             rollups existed)
#     series  GET /api/1/series?query=cpu{}&function=<F>&step=1h&from..to
#             (one function over the day: 24 points per service; on "raw"
#             with rollups=false: the selection path, a merge per service
#             and hour; on "rollups": the function tables per service-hour)
#     regressions GET /api/1/regressions?query=cpu{}&from..to (the report of
#             the three rollouts: on "raw" with rollups=false each version's
#             profiles merged, on "rollups" the versions' hours' function
#             tables)
#   wall time by curl; both answers must agree (rows, totals). Then the
#   store alone, in process (bench_fleet, servers stopped): top from
#   profiles, from range merges with rollups, from the rollups' function
#   tables, and the series from merges vs from function tables.
#   Last, the same question answered by Go's pprof (the tool behind `go tool
#   pprof`, called directly) on the 21,600 files: -proto merge of every file,
#   then -top of the merged profile; wall time and peak RSS (/usr/bin/time),
#   GO_ROUNDS rounds (0: skipped, ~3 min a round); its top 10 must name the
#   same functions as the API.
#
# Results: Markdown on stdout, appended to $BUILD/bench-results.md.
# Env: ROUNDS (default 5), GO_ROUNDS (default 3), BUILD (default build),
#      FN (series function, default runtime.mallocgc).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
# shellcheck source=bench/targets.sh
. bench/targets.sh
ROUNDS=${ROUNDS:-5}
GO_ROUNDS=${GO_ROUNDS:-3}
FN=${FN:-runtime.mallocgc}
DATA=$PWD/$BUILD/bench-data
export HOME=$PWD/$BUILD/gohome PPROF_TMPDIR=$PWD/$BUILD/gohome/pprof
mkdir -p "$HOME" "$DATA"
PPROF=$(go env GOROOT)/pkg/tool/$(go env GOOS)_$(go env GOARCH)/pprof
[ -x "$PPROF" ] || { echo "bench: go's pprof tool not found at $PPROF" >&2; exit 1; }
for b in profd loadgen gen bench_fleet; do
	[ -x "$BUILD/$b" ] || { echo "bench: $BUILD/$b missing (make $BUILD/$b)" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "bench: jq missing" >&2; exit 1; }

FROM=2026-01-01T00:00:00Z
TO=2026-01-02T00:00:00Z # inclusive: the day's 24 whole hours (and nothing at 00:00 of the next day)
FROM_NS=$(date -u -d "$FROM" +%s)000000000
TO_NS=$(date -u -d "$TO" +%s)000000000

WORK=$(mktemp -d "$PWD/$BUILD/bench-fleet.XXXXXX")
cp "$BUILD/profd" "$WORK/profd"
PROFD=$WORK/profd
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { awk -v c="$1" '{print $c}' "$2" | median; }
results=$BUILD/bench-results.md
out() { tee -a "$results"; }

# start NAME DATADIR ARGS...: sets PORT_<NAME>, PID_<NAME>; log in $WORK/NAME.log
start() {
	local name=$1 dir=$2 log=$WORK/$1.log port= pid
	shift 2
	"$PROFD" serve --retention 0 --max-merge-profiles 100000 --addr 127.0.0.1:0 --data-dir "$dir" "$@" 2>"$log" &
	pid=$!
	PIDS+=("$pid")
	for _ in $(seq 400); do
		port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$log" | head -n1)
		[ -n "$port" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	[ -n "$port" ] || { echo "bench: profd serve did not start: $(cat "$log")" >&2; exit 1; }
	printf -v "PORT_$name" %s "$port"
	printf -v "PID_$name" %s "$pid"
}
stop() { # NAME: SIGTERM, must exit 0
	local v="PID_$1" rc=0
	kill -TERM "${!v}"
	wait "${!v}" || rc=$?
	[ "$rc" = 0 ] || { echo "bench: profd serve ($1) exited $rc: $(tail -3 "$WORK/$1.log")" >&2; exit 1; }
}

# ---- data -------------------------------------------------------------------------

FLEET=$DATA/fleet
if [ ! -f "$FLEET/.done-v1" ]; then
	echo "bench: generating the fleet's day (21,600 profiles), once" >&2
	rm -rf "$FLEET"
	"$BUILD/gen" -fleet -seed 1 -o "$FLEET" >"$DATA/fleet-gen.txt"
	touch "$FLEET/.done-v1"
fi
STORE=$DATA/fleet-store
if [ ! -f "$STORE/.done-v6" ]; then
	echo "bench: loading the fleet into a data dir, once" >&2
	rm -rf "$STORE"
	start load "$STORE" -q --rollup-interval 0
	"$BUILD/loadgen" post -c 8 -url "http://127.0.0.1:$PORT_load" -fleet "$FLEET" -type cpu \
		-rollouts auth=8,billing=12,cart=16 >"$DATA/fleet-load.txt"
	stop load
	touch "$STORE/.done-v6"
fi
nfiles=$(find "$FLEET" -name '*.pb.gz' | wc -l)
gz_bytes=$(find "$FLEET" -name '*.pb.gz' -printf '%s\n' | awk '{s += $1} END {print s}')

cp -r "$STORE" "$WORK/raw"
cp -r "$STORE" "$WORK/rollups"
rm -f "$WORK/raw/.done-v6" "$WORK/rollups/.done-v6"
raw_bytes=$(du -sb "$WORK/raw" | cut -f1)

# ---- rollups, built by the server ------------------------------------------------------

start build "$WORK/rollups" -q --rollup-interval 1s
for _ in $(seq 1200); do
	grep -q 'component=rollup' "$WORK/build.log" && break
	sleep 0.1
done
build_line=$(grep 'component=rollup' "$WORK/build.log" | head -n1)
[ -n "$build_line" ] || { echo "bench: no rollup pass in $(cat "$WORK/build.log")" >&2; exit 1; }
stop build
built=$(echo "$build_line" | sed -n 's/.*built \([0-9]*\) hourly.*/\1/p')
build_s=$(echo "$build_line" | sed -n 's/.*seconds=\([0-9.]*\).*/\1/p')
roll_bytes=$(du -sb "$WORK/rollups" | cut -f1)

# ---- through the API -----------------------------------------------------------------

start raw "$WORK/raw" -q --rollup-interval 0
start roll "$WORK/rollups" -q --rollup-interval 0
enc() { jq -rn --arg v "$1" '$v|@uri'; }
TOPQ="/api/1/top?query=$(enc 'cpu{}')&from=$FROM&to=$TO&n=10"
REGQ="/api/1/regressions?query=$(enc 'cpu{}')&from=$FROM&to=$TO&n=10"
SERQ="/api/1/series?query=$(enc 'cpu{}')&function=$(enc "${FN//./\\.}")&step=1h&from=$FROM&to=$TO"
get() { # PORT PATH OUT -> seconds
	local code t
	read -r code t < <(curl -sS -o "$3" -w '%{http_code} %{time_total}\n' "http://127.0.0.1:$1$2")
	[ "$code" = 200 ] || { echo "bench: GET $2 answered $code: $(head -c 300 "$3")" >&2; exit 1; }
	echo "$t"
}
: >"$WORK/api"
for _ in $(seq "$ROUNDS"); do
	a=$(get "$PORT_raw" "$TOPQ&rollups=false" "$WORK/top-raw.json")
	b=$(get "$PORT_roll" "$TOPQ" "$WORK/top-roll.json")
	c=$(get "$PORT_raw" "$SERQ&rollups=false" "$WORK/ser-raw.json")
	d=$(get "$PORT_roll" "$SERQ" "$WORK/ser-roll.json")
	e=$(get "$PORT_raw" "$REGQ&rollups=false" "$WORK/reg-raw.json")
	f=$(get "$PORT_roll" "$REGQ" "$WORK/reg-roll.json")
	echo "$a $b $c $d $e $f" >>"$WORK/api"
done
stop raw
stop roll
# the same answers (the rollups flag aside)
norm() { jq -S 'del(.body.rollups, .body.merges, .body.raw, .body.rollup_hours) | if .body.comparisons then .body.comparisons[] |= (del(.base.rollup_hours, .target.rollup_hours)) else . end' "$1"; }
for q in top ser reg; do
	if ! cmp -s <(norm "$WORK/$q-raw.json") <(norm "$WORK/$q-roll.json"); then
		echo "bench: $q answers differ with and without rollups" >&2
		diff <(norm "$WORK/$q-raw.json") <(norm "$WORK/$q-roll.json") | head -20 >&2
		exit 1
	fi
done
profiles=$(jq '.body.profiles' "$WORK/top-raw.json")
[ "$profiles" = "$nfiles" ] || { echo "bench: top covered $profiles profiles, not $nfiles" >&2; exit 1; }
used=$(jq -r '.body.rollups // "absent"' "$WORK/top-roll.json")
series_used=$(jq -r '.body.rollups // "absent"' "$WORK/ser-roll.json")
npoints=$(jq '[.body.series[].points | length] | add' "$WORK/ser-roll.json")
nrollouts=$(jq '.body.comparisons | length' "$WORK/reg-roll.json")
reg_hours=$(jq '.body.rollup_hours' "$WORK/reg-roll.json")
[ "$nrollouts" = 3 ] || { echo "bench: the report has $nrollouts comparisons, not 3" >&2; exit 1; }
nseries=$(jq '.body.series | length' "$WORK/ser-roll.json")

# ---- the store alone ------------------------------------------------------------------

"$BUILD/bench_fleet" -d "$WORK/rollups" -from "$FROM_NS" -to "$TO_NS" -r "$ROUNDS" -fn "$FN" >"$WORK/store"
sv() { awk -v k="$1" '$1 == k {print $2}' "$WORK/store"; }

# ---- go tool pprof ---------------------------------------------------------------------

: >"$WORK/go"
for _ in $(seq "$GO_ROUNDS"); do # GO_ROUNDS=0: no rounds, no check
	t0=$(now)
	(cd "$FLEET" && /usr/bin/time -f %M -o "$WORK/go.rss" "$PPROF" -proto -output "$WORK/merged.pb.gz" \
		*/*/*.pb.gz >/dev/null 2>"$WORK/go.err") || { echo "bench: pprof -proto failed: $(tail -3 "$WORK/go.err")" >&2; exit 1; }
	t1=$(now)
	/usr/bin/time -f %M -o "$WORK/top.rss" "$PPROF" -top -nodecount=10 "$WORK/merged.pb.gz" >"$WORK/go.top" 2>/dev/null
	t2=$(now)
	echo "$(awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {print b - a, c - b, c - a}') $(cat "$WORK/go.rss") $(cat "$WORK/top.rss")" >>"$WORK/go"
done
# pprof's top 10 names the same functions, in the same order, as the API's
[ "$GO_ROUNDS" -gt 0 ] && awk 'f && NF {print $NF} /flat%/ {f = 1}' "$WORK/go.top" | head -10 >"$WORK/go.names"
jq -r '.body.rows[].name' "$WORK/top-roll.json" >"$WORK/api.names"
if [ "$GO_ROUNDS" -gt 0 ] && ! cmp -s "$WORK/go.names" "$WORK/api.names"; then
	echo "bench: go tool pprof -top and /api/1/top name other functions" >&2
	paste "$WORK/go.names" "$WORK/api.names" >&2
	exit 1
fi

# ---- report -----------------------------------------------------------------------------

top_raw=$(col 1 "$WORK/api") top_roll=$(col 2 "$WORK/api") ser_raw=$(col 3 "$WORK/api") ser_roll=$(col 4 "$WORK/api")
reg_raw=$(col 5 "$WORK/api") reg_roll=$(col 6 "$WORK/api")
go_merge=$(col 1 "$WORK/go") go_top=$(col 2 "$WORK/go") go_all=$(col 3 "$WORK/go")
go_rss=$(col 4 "$WORK/go") go_top_rss=$(col 5 "$WORK/go")
{
	echo
	echo "Fleet analytics: $nfiles CPU profiles ($(awk -v b="$gz_bytes" 'BEGIN {printf "%.0f MB", b / 1e6}') gzip'd) of 150 pods / 15 services over one day; $ROUNDS rounds (go: $GO_ROUNDS), medians; $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%MZ)"
	echo
	echo "| data dir | without rollups | with rollups | rollups built | build time (server, first pass) |"
	echo "|---|---|---|---|---|"
	awk -v r="$raw_bytes" -v w="$roll_bytes" -v n="$built" -v s="$build_s" 'BEGIN {
		printf "| on disk | %.1f MB | %.1f MB (+%.1f MB) | %d | %.2f s |\n", r / 1e6, w / 1e6, (w - r) / 1e6, n, s }'
	echo
	echo "| question | API, no rollups | API, rollups | speed-up | go tool pprof -proto + -top | vs API with rollups | pprof peak RSS |"
	echo "|---|---|---|---|---|---|---|"
	awk -v a="$top_raw" -v b="$top_roll" -v g="$go_all" -v gm="$go_merge" -v gt="$go_top" -v r="$go_rss" -v u="$used" 'BEGIN {
		if (g == "") printf "| fleet top 10 of the day (rollups: %s) | %.3f s | %.3f s | %.1fx | not run (GO_ROUNDS=0) | — | — |\n", u, a, b, a / b
		else printf "| fleet top 10 of the day (rollups: %s) | %.3f s | %.3f s | %.1fx | %.1f s (%.1f + %.1f) | %.0fx | %.2f GB |\n",
			u, a, b, a / b, g, gm, gt, g / b, r / 1048576 }'
	awk -v a="$ser_raw" -v b="$ser_roll" -v u="$series_used" -v f="$FN" -v ns="$nseries" -v np="$npoints" 'BEGIN {
		printf "| series of %s, 1h steps, %d series / %d points (rollups: %s) | %.3f s | %.3f s | %.1fx | — | — | — |\n", f, ns, np, u, a, b, a / b }'
	awk -v a="$reg_raw" -v b="$reg_roll" -v n="$nrollouts" -v h="$reg_hours" 'BEGIN {
		printf "| regression report of the day, %d rollouts (%d hours from rollups) | %.3f s | %.3f s | %.1fx | — | — | — |\n", n, h, a, b, a / b }'
	echo
	echo "The store alone (bench_fleet, in process, $ROUNDS rounds):"
	echo
	echo "| fleet top from profiles | from range merges (rollups) | from rollup function tables | series from merges | series from function tables |"
	echo "|---|---|---|---|---|"
	echo "| $(sv top_raw_s) s | $(sv top_rollup_s) s | $(sv top_fn_s) s | $(sv series_raw_s) s | $(sv series_rollup_s) s |"
	echo "Targets: fleet top < 1 s with rollups, < 5 s without; series of one function over the day < 1 s; the regression report < 1 s from rollups."
} | out
# issue 18: the fleet top stays fast
target_add "fleet top 10 of a day through the API" "$nfiles profiles, rollups: $used" "$(printf '%.3f s' "$top_roll")" "< 0.2 s" \
	"$(target_met "$top_roll < 0.2")" "without rollups: $(printf '%.3f s' "$top_raw")"
