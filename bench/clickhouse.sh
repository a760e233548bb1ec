#!/usr/bin/env bash
# clickhouse.sh — the ClickHouse store backend in `make bench` (issue 13):
# one ClickHouse 18.16 (Debian's) started here on loopback by
# tests/e2e/clickhouse.sh, and bench/serve.sh's 200 large generated CPU
# profiles (13 MB gzip'd), in one run:
#
#   (a) ingest: `profd serve` pinned to core 0, loadgen (CONNS keep-alive
#       connections) on core 1, a fresh store per round: the embedded store
#       (data dir under $BUILD) and ClickHouse (a fresh database; ClickHouse
#       itself unpinned). Wall time, MB/s of gzip'd input, the collector's
#       CPU time (what "per collector core" means) and ClickHouse's.
#   (b) merge of the 200 through the API (GET /api/0/profiles/merge), on a
#       freshly started collector and again warm, from each store, beside
#       go tool pprof -proto on the same files; go tool pprof -top of the
#       ClickHouse merge must equal Go's (checked once).
#
# Results: Markdown on stdout, appended to $BUILD/bench-results.md.
# Env: ROUNDS (default 3), BUILD (default build), CONNS (default 8).
# Skipped (exit 0, with a line saying so) without clickhouse-server.
set -uo pipefail
# shellcheck disable=SC2154 # CH_HTTP_bench, CH_PID_bench: set by ch_start
cd "$(dirname "$0")/.." || exit 1
export BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-8}
DATA=$PWD/$BUILD/bench-data
LOADGEN=$PWD/$BUILD/loadgen
# shellcheck source=tests/e2e/lib.sh
source tests/e2e/lib.sh
# shellcheck source=tests/e2e/clickhouse.sh
source tests/e2e/clickhouse.sh
if ! ch_available; then
	echo "bench: ClickHouse store skipped: clickhouse-server not installed (make deps)"
	exit 0
fi
PPROF=$(go env GOROOT)/pkg/tool/$(go env GOOS)_$(go env GOARCH)/pprof
for b in profd loadgen gen; do
	[ -x "$BUILD/$b" ] || { echo "bench: $BUILD/$b missing (make $BUILD/$b)" >&2; exit 1; }
done
if [ ! -f "$DATA/large/.done-200" ]; then
	rm -rf "$DATA/large"
	"$BUILD/gen" -kind large -n 200 -seed 1 -o "$DATA/large" >/dev/null
	touch "$DATA/large/.done-200"
fi
FILES=("$DATA"/large/*.pb.gz)
TICK=$(getconf CLK_TCK)
cp "$BUILD/profd" "$T/profd"
P=$T/profd
results=$BUILD/bench-results.md
out() { tee -a "$results"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { awk -v c="$1" '{print $c}' "$2" | median; }
now() { date +%s.%N; }
cpu_of() { awk -v t="$TICK" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat"; }

ch_start bench >/dev/null || { echo "bench: clickhouse-server did not start" >&2; exit 1; }
CHPID=$CH_PID_bench
CHURL=clickhouse://127.0.0.1:$CH_HTTP_bench

SPID='' SPORT=''
start() { # CPULIST STORE-ARGS...: profd serve; sets SPID, SPORT
	local cpus=$1
	shift
	: >"$T/serve.log"
	if [ -n "$cpus" ]; then
		taskset -c "$cpus" "$P" serve -q --retention 0 --addr 127.0.0.1:0 "$@" 2>"$T/serve.log" &
	else
		"$P" serve -q --retention 0 --addr 127.0.0.1:0 "$@" 2>"$T/serve.log" &
	fi
	SPID=$!
	SPORT=$(serve_port "$T/serve.log" "$SPID")
	[ -n "$SPORT" ] || { echo "bench: profd serve did not start: $(cat "$T/serve.log")" >&2; exit 1; }
}
stop() {
	kill -TERM "$SPID"
	wait "$SPID" 2>/dev/null
	SPID=
}

echo
echo "ClickHouse store bench: $ROUNDS rounds, medians; $(nproc) CPUs; ClickHouse $(ch_q bench 'SELECT version()'); $(date -u +%Y-%m-%dT%H:%MZ)" | out

# ---- (a) ingest ---------------------------------------------------------------
: >"$T/ing-sqlite"
: >"$T/ing-ch"
for r in $(seq "$ROUNDS"); do
	for store in sqlite ch; do
		if [ "$store" = sqlite ]; then
			rm -rf "$BUILD/bench-chs-data"
			start 0 --data-dir "$PWD/$BUILD/bench-chs-data"
		else
			ch_q bench "DROP DATABASE IF EXISTS ing" >/dev/null
			ch_q bench "CREATE DATABASE ing" >/dev/null
			start 0 --store "$CHURL/ing"
		fi
		c0=$(cpu_of "$SPID") h0=$(cpu_of "$CHPID")
		line=$(taskset -c 1 "$LOADGEN" post -c "$CONNS" -url "http://127.0.0.1:$SPORT" -service bench -type cpu "${FILES[@]}") ||
			{ echo "bench: ingest into $store failed" >&2; exit 1; }
		c1=$(cpu_of "$SPID") h1=$(cpu_of "$CHPID")
		stop
		echo "$line" | awk -v c="$(awk -v a="$c0" -v b="$c1" 'BEGIN{print b-a}')" -v h="$(awk -v a="$h0" -v b="$h1" 'BEGIN{print b-a}')" '{
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			print v["seconds"], v["bytes"], c, h }' >>"$T/ing-$store"
	done
done
{
	echo
	echo "Ingest of the 200 large CPU profiles: collector pinned to core 0, loadgen ($CONNS connections) on core 1, fresh store per round"
	echo
	echo "| store | wall | MB/s (gz) | collector CPU | MB/s per collector CPU-s | ClickHouse CPU |"
	echo "|---|---|---|---|---|---|"
} | out
for store in sqlite ch; do
	f=$T/ing-$store
	awk -v l="$([ $store = ch ] && echo ClickHouse || echo 'embedded (SQLite)')" -v w="$(col 1 "$f")" -v b="$(col 2 "$f")" \
		-v c="$(col 3 "$f")" -v h="$(col 4 "$f")" -v ch="$store" 'BEGIN {
		printf "| %s | %.3f s | %.1f | %.3f s | %.1f | %s |\n", l, w, b / 1e6 / w, c, b / 1e6 / c,
			(ch == "ch" ? sprintf("%.3f s", h) : "–") }' | out
done
echo "Target (ClickHouse): >= 20 MB/s of gzip input per collector core." | out

# ---- (b) merge ------------------------------------------------------------------
ch_q bench "DROP DATABASE IF EXISTS mrg" >/dev/null
ch_q bench "CREATE DATABASE mrg" >/dev/null
rm -rf "$BUILD/bench-chs-merge"
start "" --store "$CHURL/mrg"
"$LOADGEN" post -c "$CONNS" -url "http://127.0.0.1:$SPORT" -service big -type cpu "${FILES[@]}" >/dev/null
stop
start "" --data-dir "$PWD/$BUILD/bench-chs-merge"
"$LOADGEN" post -c "$CONNS" -url "http://127.0.0.1:$SPORT" -service big -type cpu "${FILES[@]}" >/dev/null
stop
MURL="/api/0/profiles/merge?service=big&type=cpu&from=0&to=now"
: >"$T/m-ch"
: >"$T/m-sqlite"
: >"$T/m-go"
for r in $(seq "$ROUNDS"); do
	for store in ch sqlite; do
		if [ $store = ch ]; then start "" --store "$CHURL/mrg"; else start "" --data-dir "$PWD/$BUILD/bench-chs-merge"; fi
		t0=$(now)
		code=$(curl -sS -o "$T/m-$store.pb.gz" -w '%{http_code}' "http://127.0.0.1:$SPORT$MURL")
		t1=$(now)
		code2=$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$SPORT$MURL")
		t2=$(now)
		[ "$code" = 200 ] && [ "$code2" = 200 ] || { echo "bench: merge from $store answered $code/$code2" >&2; exit 1; }
		stop
		awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { print b - a, c - b }' >>"$T/m-$store"
	done
	t0=$(now)
	"$PPROF" -proto -output "$T/go.pb.gz" "${FILES[@]}" 2>/dev/null
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >>"$T/m-go"
done
topn() { "$PPROF" -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$1" 2>/dev/null | tail -n +2; }
topn "$T/m-ch.pb.gz" >"$T/ch.top"
topn "$T/go.pb.gz" >"$T/go.top"
cmp -s "$T/ch.top" "$T/go.top" || { echo "bench: the ClickHouse merge differs from Go's in -top" >&2; diff "$T/ch.top" "$T/go.top" | head >&2; exit 1; }
g=$(col 1 "$T/m-go")
{
	echo
	echo "Merge of the 200 large CPU profiles through the API (fresh collector per round, unpinned) vs go tool pprof -proto on the files; -top of the ClickHouse merge identical to Go's"
	echo
	echo "| store | 1st on a fresh collector | warm | go tool pprof -proto | speed-up (1st) | speed-up (warm) |"
	echo "|---|---|---|---|---|---|"
} | out
for store in ch sqlite; do
	awk -v l="$([ $store = ch ] && echo ClickHouse || echo 'embedded (SQLite)')" -v a="$(col 1 "$T/m-$store")" -v w="$(col 2 "$T/m-$store")" -v g="$g" 'BEGIN {
		printf "| %s | %.3f s | %.3f s | %.3f s | %.1fx | %.1fx |\n", l, a, w, g, g / a, g / w }' | out
done
echo "Target (ClickHouse): merge >= 30x faster than go tool pprof -proto." | out
rm -rf "$BUILD/bench-chs-data" "$BUILD/bench-chs-merge"
