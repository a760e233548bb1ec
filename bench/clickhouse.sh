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
#   (c) fleet top (FLEET=0 skips it): bench/fleet.sh's day of a 150-pod
#       fleet (bench/gen -fleet -seed 1: 21,600 CPU profiles, generated once
#       into $BUILD/bench-data/fleet) loaded into a fresh ClickHouse
#       database (loadgen post -fleet, 8 connections); a collector with
#       --rollup-interval 1s builds the 360 hourly rollups (its log line's
#       time); then GET /api/1/top?query=cpu{}&from=<day>&to=<day+24h>&n=10
#       ROUNDS times each: from the rollups, from the profiles (range
#       merges before any rollup: a second database, a copy of the first's
#       profiles and symbols) and the selection path (rollups=false); the
#       three answers (total, rows) must be equal.
#   (b2) the same 200 on two shards (SHARDS=0 skips it): ZooKeeper and
#       two more ClickHouse servers, cluster "two"; two collectors (one per
#       shard) ingesting half each at once, then the merge through one of
#       them, against the same go tool pprof -proto time.
#   OLD_PROFD=PATH (optional): another profd binary (e.g. a build of the
#       previous commit: git worktree add /tmp/old HEAD && make -C /tmp/old
#       BUILD=b) measured in the same rounds as "ClickHouse (OLD_PROFD)",
#       for a before/after of the same run.
#
# Results: Markdown on stdout, appended to $BUILD/bench-results.md.
# Env: ROUNDS (default 3), BUILD (default build), CONNS (default 8), OLD_PROFD.
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
STORES="sqlite ch"
if [ -n "${OLD_PROFD:-}" ]; then
	cp "$OLD_PROFD" "$T/profd-old" || exit 1
	STORES="sqlite chold ch"
fi
label() { case $1 in sqlite) echo 'embedded (SQLite)' ;; ch) echo ClickHouse ;; chold) echo 'ClickHouse (OLD_PROFD)' ;; esac; }
results=$BUILD/bench-results.md
out() { tee -a "$results"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { awk -v c="$1" '{print $c}' "$2" | median; }
now() { date +%s.%N; }
inserts() { ch_q bench "SELECT toUInt64(sum(value)) FROM system.events WHERE event = 'InsertQuery'"; }
cpu_of() { awk -v t="$TICK" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat"; }

ch_start bench >/dev/null || { echo "bench: clickhouse-server did not start" >&2; exit 1; }
CHPID=$CH_PID_bench
CHURL=clickhouse://127.0.0.1:$CH_HTTP_bench

SPID='' SPORT=''
start() { # CPULIST STORE-ARGS...: profd serve ($PB, default $P); sets SPID, SPORT
	local cpus=$1
	shift
	: >"$T/serve.log"
	if [ -n "$cpus" ]; then
		taskset -c "$cpus" "${PB:-$P}" serve -q --retention 0 --addr 127.0.0.1:0 "$@" 2>"$T/serve.log" &
	else
		"${PB:-$P}" serve -q --retention 0 --addr 127.0.0.1:0 "$@" 2>"$T/serve.log" &
	fi
	SPID=$!
	local t0
	t0=$(now)
	SPORT=$(serve_port "$T/serve.log" "$SPID")
	[ -n "$SPORT" ] || { echo "bench: profd serve did not start: $(cat "$T/serve.log")" >&2; exit 1; }
	START_S=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }') # to listening: open, schema, warm-up
}
stop() {
	kill -TERM "$SPID"
	wait "$SPID" 2>/dev/null
	SPID=
}

echo
echo "ClickHouse store bench: $ROUNDS rounds, medians; $(nproc) CPUs; ClickHouse $(ch_q bench 'SELECT version()'); $(date -u +%Y-%m-%dT%H:%MZ)" | out

# ---- (a) ingest ---------------------------------------------------------------
for store in $STORES; do : >"$T/ing-$store"; done
for r in $(seq "$ROUNDS"); do
	for store in $STORES; do
		PB=$P
		[ "$store" = chold ] && PB=$T/profd-old
		if [ "$store" = sqlite ]; then
			rm -rf "$BUILD/bench-chs-data"
			start 0 --data-dir "$PWD/$BUILD/bench-chs-data"
		else
			ch_q bench "DROP DATABASE IF EXISTS ing" >/dev/null
			ch_q bench "CREATE DATABASE ing" >/dev/null
			start 0 --store "$CHURL/ing"
		fi
		c0=$(cpu_of "$SPID") h0=$(cpu_of "$CHPID") i0=$(inserts)
		line=$(taskset -c 1 "$LOADGEN" post -c "$CONNS" -url "http://127.0.0.1:$SPORT" -service bench -type cpu "${FILES[@]}") ||
			{ echo "bench: ingest into $store failed" >&2; exit 1; }
		c1=$(cpu_of "$SPID") h1=$(cpu_of "$CHPID") i1=$(inserts)
		stop
		echo "$line" | awk -v c="$(awk -v a="$c0" -v b="$c1" 'BEGIN{print b-a}')" -v h="$(awk -v a="$h0" -v b="$h1" 'BEGIN{print b-a}')" '{
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			print v["seconds"], v["bytes"], c, h, '"$((i1 - i0))"' }' >>"$T/ing-$store"
	done
done
{
	echo
	echo "Ingest of the 200 large CPU profiles: collector pinned to core 0, loadgen ($CONNS connections) on core 1, fresh store per round"
	echo
	echo "| store | wall | MB/s (gz) | collector CPU | MB/s per collector CPU-s | ClickHouse CPU | INSERTs |"
	echo "|---|---|---|---|---|---|---|"
} | out
for store in $STORES; do
	f=$T/ing-$store
	awk -v l="$(label "$store")" -v w="$(col 1 "$f")" -v b="$(col 2 "$f")" \
		-v c="$(col 3 "$f")" -v h="$(col 4 "$f")" -v i="$(col 5 "$f")" -v ch="$store" 'BEGIN {
		printf "| %s | %.3f s | %.1f | %.3f s | %.1f | %s | %s |\n", l, w, b / 1e6 / w, c, b / 1e6 / c,
			(ch != "sqlite" ? sprintf("%.3f s", h) : "–"), (ch != "sqlite" ? i : "–") }' | out
done
PB=
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
# merge_twice NAME: the merge from the collector on $SPORT, first and warm;
# the answer into $T/m-NAME.pb.gz, the two times (curl's time_total: connect
# to last byte, not curl's own start, as bench/serve.sh) appended to $T/m-NAME
merge_twice() {
	local code code2 a b
	read -r code a < <(curl -sS -o "$T/m-$1.pb.gz" -w '%{http_code} %{time_total}\n' "http://127.0.0.1:$SPORT$MURL")
	read -r code2 b < <(curl -sS -o "$T/m-$1-warm.pb.gz" -w '%{http_code} %{time_total}\n' "http://127.0.0.1:$SPORT$MURL")
	[ "$code" = 200 ] && [ "$code2" = 200 ] || { echo "bench: merge from $1 answered $code/$code2" >&2; exit 1; }
	cmp -s "$T/m-$1.pb.gz" "$T/m-$1-warm.pb.gz" || { echo "bench: the warm merge from $1 differs from the first" >&2; exit 1; }
	echo "$a $b $START_S" >>"$T/m-$1"
}
MSTORES="ch sqlite"
[ -n "${OLD_PROFD:-}" ] && MSTORES="chold ch sqlite"
for store in $MSTORES go; do : >"$T/m-$store"; done
for r in $(seq "$ROUNDS"); do
	for store in $MSTORES; do
		PB=$P
		[ "$store" = chold ] && PB=$T/profd-old
		if [ $store = sqlite ]; then start "" --data-dir "$PWD/$BUILD/bench-chs-merge"; else start "" --store "$CHURL/mrg"; fi
		merge_twice "$store"
		stop
	done
	PB=
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
	echo "| store | collector start (to listening) | 1st on a fresh collector | warm | go tool pprof -proto | speed-up (1st) | speed-up (warm) |"
	echo "|---|---|---|---|---|---|---|"
} | out
for store in $MSTORES; do
	awk -v l="$(label "$store")" -v a="$(col 1 "$T/m-$store")" -v w="$(col 2 "$T/m-$store")" -v st="$(col 3 "$T/m-$store")" -v g="$g" 'BEGIN {
		printf "| %s | %.3f s | %.3f s | %.3f s | %.3f s | %.1fx | %.1fx |\n", l, st, a, w, g, g / a, g / w }' | out
done
echo "Target (ClickHouse): merge >= 30x faster than go tool pprof -proto." | out
rm -rf "$BUILD/bench-chs-data" "$BUILD/bench-chs-merge"

# ---- (b2) the same on two shards ------------------------------------------------
# ZooKeeper and two more ClickHouse servers (s1, s2: cluster "two", one
# replica each), tables ON CLUSTER (ReplicatedReplacingMergeTree *_local +
# Distributed); collector X writes through s1, Y through s2, half the files
# each; ingest wall and CPU as (a) (both collectors unpinned, loadgen as
# two clients at once), then the merge through X as (b).
if [ "${SHARDS:-1}" != 0 ] && zk_available; then
	if ! zk_start || ! ch_start s1 --shard 01 --replica a --zk "$ZK_PORT" --cluster "two=s1;s2" ||
		! ch_start s2 --shard 02 --replica a --zk "$ZK_PORT" --cluster "two=s1;s2"; then
		echo "bench: ZooKeeper or the two shards did not start" >&2
		exit 1
	fi
	HALF=$((${#FILES[@]} / 2))
	: >"$T/m-two"
	: >"$T/ing-two"
	for r in $(seq "$ROUNDS"); do
		db=two$r # a database per round: replicated tables keep their paths in ZooKeeper
		ch_q s1 "CREATE DATABASE $db ON CLUSTER two" >/dev/null || { echo "bench: CREATE DATABASE ON CLUSTER failed" >&2; exit 1; }
		start "" --store "clickhouse://127.0.0.1:$CH_HTTP_s1/$db?cluster=two"
		XPID=$SPID XPORT=$SPORT
		start "" --store "clickhouse://127.0.0.1:$CH_HTTP_s2/$db?cluster=two"
		YPID=$SPID YPORT=$SPORT
		cx0=$(cpu_of "$XPID") cy0=$(cpu_of "$YPID")
		t0=$(now)
		"$LOADGEN" post -c "$((CONNS / 2))" -url "http://127.0.0.1:$XPORT" -service big -type cpu "${FILES[@]:0:HALF}" >"$T/two-x" &
		LX=$!
		"$LOADGEN" post -c "$((CONNS / 2))" -url "http://127.0.0.1:$YPORT" -service big -type cpu "${FILES[@]:HALF}" >"$T/two-y" ||
			{ echo "bench: ingest through Y failed" >&2; exit 1; }
		wait "$LX" || { echo "bench: ingest through X failed" >&2; exit 1; }
		t1=$(now)
		cx1=$(cpu_of "$XPID") cy1=$(cpu_of "$YPID")
		b=$(cat "$T/two-x" "$T/two-y" | sed -n 's/.*bytes=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s}')
		kill -TERM "$YPID"
		wait "$YPID" 2>/dev/null
		awk -v a="$t0" -v b="$t1" -v n="$b" -v c="$(awk -v a="$cx0" -v b="$cx1" -v c="$cy0" -v d="$cy1" 'BEGIN{print b - a + d - c}')" \
			'BEGIN { print b - a, n, c }' >>"$T/ing-two"
		SPID=$XPID SPORT=$XPORT
		stop
		start "" --store "clickhouse://127.0.0.1:$CH_HTTP_s1/$db?cluster=two"
		merge_twice two
		stop
	done
	topn "$T/m-two.pb.gz" >"$T/two.top"
	cmp -s "$T/two.top" "$T/go.top" || { echo "bench: the two-shard merge differs from Go's in -top" >&2; diff "$T/two.top" "$T/go.top" | head >&2; exit 1; }
	rows1=$(ch_q s1 "SELECT count() FROM $db.profiles_local") rows2=$(ch_q s2 "SELECT count() FROM $db.profiles_local")
	{
		echo
		echo "Two shards (cluster two: s1, s2, one replica each, ZooKeeper): collectors X (s1) and Y (s2) each given half the 200 files at once, $((CONNS / 2)) connections each; then the merge through X (fresh collector, then warm); -top identical to Go's; profiles per shard after the last round: $rows1 / $rows2"
		echo
		echo "| ingest wall | MB/s (gz) | collectors' CPU | MB/s per collector CPU-s | merge, 1st | merge, warm | speed-up (1st / warm) vs go tool pprof -proto |"
		echo "|---|---|---|---|---|---|---|"
		awk -v w="$(col 1 "$T/ing-two")" -v b="$(col 2 "$T/ing-two")" -v c="$(col 3 "$T/ing-two")" \
			-v a="$(col 1 "$T/m-two")" -v m="$(col 2 "$T/m-two")" -v g="$g" 'BEGIN {
			printf "| %.3f s | %.1f | %.3f s | %.1f | %.3f s | %.3f s | %.1fx / %.1fx |\n", w, b / 1e6 / w, c, b / 1e6 / c, a, m, g / a, g / m }'
	} | out
	ch_stop s1
	ch_stop s2
	zk_stop
else
	echo "bench: the two-shard rows skipped (SHARDS=0, or zookeeper not installed)" | out
fi

# ---- (c) fleet top --------------------------------------------------------------
[ "${FLEET:-1}" = 0 ] && exit 0
FL=$DATA/fleet
if [ ! -f "$FL/.done-v1" ]; then
	echo "bench: generating the fleet's day (21,600 profiles), once" >&2
	rm -rf "$FL"
	"$BUILD/gen" -fleet -seed 1 -o "$FL" >"$DATA/fleet-gen.txt"
	touch "$FL/.done-v1"
fi
ch_q bench "DROP DATABASE IF EXISTS fleet" >/dev/null
ch_q bench "CREATE DATABASE fleet" >/dev/null
FURL="$CHURL/fleet"
start "" --store "$FURL" --rollup-interval 0
t0=$(now)
fline=$("$LOADGEN" post -c "$CONNS" -url "http://127.0.0.1:$SPORT" -fleet "$FL" -type cpu) ||
	{ echo "bench: loading the fleet into ClickHouse failed" >&2; exit 1; }
t1=$(now)
stop
# the same rows, without rollups, in a second database (tables made by a collector)
ch_q bench "DROP DATABASE IF EXISTS fleetraw" >/dev/null
ch_q bench "CREATE DATABASE fleetraw" >/dev/null
start "" --store "$CHURL/fleetraw" --rollup-interval 0
stop
for t in profiles symbols; do ch_q bench "INSERT INTO fleetraw.$t SELECT * FROM fleet.$t" >/dev/null; done
: >"$T/serve-roll.log"
"$P" serve --retention 0 --max-merge-profiles 100000 --addr 127.0.0.1:0 --store "$FURL" --rollup-interval 1s 2>"$T/serve-roll.log" &
SPID=$!
SPORT=$(serve_port "$T/serve-roll.log" "$SPID")
for _ in $(seq 1200); do
	grep -q 'component=rollup' "$T/serve-roll.log" && break
	sleep 0.5
done
rline=$(grep -m1 'component=rollup' "$T/serve-roll.log")
[[ $rline == *built* ]] || { echo "bench: no rollups built: $rline" >&2; exit 1; }
RPORT=$SPORT RPID=$SPID
start "" --store "$CHURL/fleetraw" --rollup-interval 0 --max-merge-profiles 100000
TQ="/api/1/top?query=cpu%7B%7D&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z&n=10"
: >"$T/ft"
for r in $(seq "$ROUNDS"); do
	t0r=$(now)
	curl -sS -o "$T/ft-roll.json" "http://127.0.0.1:$RPORT$TQ"
	t1r=$(now)
	curl -sS -o "$T/ft-raw.json" "http://127.0.0.1:$SPORT$TQ"
	t2r=$(now)
	curl -sS -o "$T/ft-sel.json" "http://127.0.0.1:$SPORT$TQ&rollups=false"
	t3r=$(now)
	awk -v a="$t0r" -v b="$t1r" -v c="$t2r" -v d="$t3r" 'BEGIN { print b - a, c - b, d - c }' >>"$T/ft"
done
stop
kill -TERM "$RPID"
wait "$RPID" 2>/dev/null
[ "$(jq -r .body.rollups "$T/ft-roll.json")" = true ] || { echo "bench: the fleet top did not use rollups" >&2; exit 1; }
for f in raw sel; do
	cmp -s <(jq -c '.body | {total, rows}' "$T/ft-roll.json") <(jq -c '.body | {total, rows}' "$T/ft-$f.json") ||
		{ echo "bench: the fleet top from rollups differs from $f" >&2; exit 1; }
done
{
	echo
	echo "Fleet top over a day of 150 pods (21,600 CPU profiles, $(echo "$fline" | sed -n 's/.*bytes=\([0-9]*\).*/\1/p' | awk '{printf "%.0f MB", $1 / 1e6}') gzip'd) on ClickHouse: GET /api/1/top?query=cpu{}&n=10 over the day (unpinned); the three answers identical"
	echo
	echo "| | time |"
	echo "|---|---|"
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "| load (loadgen post -fleet, %s connections) | %.1f s |\n", "'"$CONNS"'", b - a }'
	echo "| rollups built by one collector ($(echo "$rline" | sed -n 's/.*built \([0-9]*\) hourly.*/\1/p') hours) | $(echo "$rline" | sed -n 's/.*seconds=\([0-9.]*\).*/\1/p') s |"
	echo "| top from the rollups | $(col 1 "$T/ft") s |"
	echo "| top from the profiles (range merges, no rollup built) | $(col 2 "$T/ft") s |"
	echo "| top by the selection path (rollups=false) | $(col 3 "$T/ft") s |"
} | out
echo "Target (ClickHouse): fleet top over the day < 1 s." | out
