#!/usr/bin/env bash
# robust.sh — what the memory budget costs and saves (issue 11), side by side
# with another build of profd when PROFD_BASE names one (e.g. the previous
# commit's build/profd):
#   (a) the hostile upload: a ~73 KB gzip of 8 M tiny samples (one location,
#       one value each) POSTed once to a fresh collector: answer, wall time,
#       the collector's peak RSS (VmHWM) after it;
#   (b) ingest rate, unchanged?: the 1,000 small and the 200 large generated
#       CPU profiles (bench/gen, as bench/serve.sh) POSTed by bench/loadgen
#       over 8 connections, server pinned to core 0 and loadgen to core 1,
#       data dir on tmpfs when there is one (fsync would dominate); binaries
#       alternate round by round; medians of ROUNDS (default 5) of MB/s per
#       server CPU-second.
# Results: a Markdown table on stdout, appended to $BUILD/bench-results.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-5}
DATA=$PWD/$BUILD/bench-data
LOADGEN=$PWD/$BUILD/loadgen
for b in profd loadgen gen; do
	[ -x "$BUILD/$b" ] || { echo "bench: $BUILD/$b missing (make $BUILD/$b)" >&2; exit 1; }
done
WORK=$(mktemp -d "$PWD/$BUILD/bench-robust.XXXXXX")
trap 'kill $(jobs -rp) 2>/dev/null; rm -rf "$WORK"' EXIT
cp "$BUILD/profd" "$WORK/new"
bins="new"
if [ -n "${PROFD_BASE:-}" ]; then
	cp "$PROFD_BASE" "$WORK/base"
	bins="base new"
fi
SCRATCH=$WORK
if [ -d /dev/shm ] && [ -w /dev/shm ]; then SCRATCH=$(mktemp -d /dev/shm/profd-robust.XXXXXX); fi
results=$PWD/$BUILD/bench-results.md
out() { tee -a "$results"; }

for k in small:1000 large:200; do
	n=${k#*:} kind=${k%:*}
	if [ ! -f "$DATA/$kind/.done-$n" ]; then
		rm -rf "${DATA:?}/$kind"
		"$BUILD/gen" -kind "$kind" -n "$n" -seed 1 -o "$DATA/$kind" >/dev/null
		touch "$DATA/$kind/.done-$n"
	fi
done
python3 tests/tools/tiny_samples.py "$WORK/tiny.pb.gz"

# start BIN DIR [CPU]: sets SPID SPORT
start() {
	local bin=$1 dir=$2 cpu=${3:-} log=$WORK/srv.log i port=''
	rm -rf "$dir"
	if [ -n "$cpu" ]; then
		taskset -c "$cpu" "$WORK/$bin" serve -q --addr 127.0.0.1:0 --data-dir "$dir" --retention 0 2>"$log" &
	else
		"$WORK/$bin" serve -q --addr 127.0.0.1:0 --data-dir "$dir" --retention 0 2>"$log" &
	fi
	SPID=$!
	for ((i = 0; i < 200; i++)); do
		port=$(sed -n 's/.*listening on port \([0-9][0-9]*\).*/\1/p' "$log" | head -1)
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || { echo "bench: $bin did not start: $(cat "$log")" >&2; exit 1; }
	SPORT=$port
}
stop() { kill "$SPID"; wait "$SPID" 2>/dev/null || true; }
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$SPID/stat"; }
hwm_mb() { awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$SPID/status"; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

{
	echo
	echo "Robustness: the hostile upload and the ingest rate ($ROUNDS rounds, medians; $(date -u +%Y-%m-%dT%H:%MZ))"
	echo
	echo "| binary | 8 M tiny samples ($(stat -c %s "$WORK/tiny.pb.gz") B gzip): answer | wall | collector peak RSS | ingest small: MB/s per server CPU-s | ingest large: MB/s per server CPU-s |"
	echo "|---|---|---|---|---|---|"
} | out
for b in $bins; do
	start "$b" "$SCRATCH/d-$b"
	t0=$(date +%s%N)
	code=$(curl -s -o "$WORK/ans" -w '%{http_code}' --data-binary @"$WORK/tiny.pb.gz" \
		"http://127.0.0.1:$SPORT/api/0/profiles?service=bomb&type=cpu")
	t1=$(date +%s%N)
	echo "$b $code $(((t1 - t0) / 1000000)) $(hwm_mb)" >"$WORK/bomb-$b"
	stop
done
for r in $(seq "$ROUNDS"); do
	for b in $bins; do
		for set in small large; do
			start "$b" "$SCRATCH/d-$b" 0
			c0=$(cpu_s)
			line=$(taskset -c 1 "$LOADGEN" post -c 8 -url "http://127.0.0.1:$SPORT" -service bench -type cpu "$DATA/$set"/*.pb.gz)
			c1=$(cpu_s)
			stop
			echo "$line" | awk -v c0="$c0" -v c1="$c1" '{c = c1 - c0; for (i = 1; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]} printf "%.2f\n", v["bytes"] / 1e6 / c}' >>"$WORK/rate-$b-$set"
		done
	done
done
for b in $bins; do
	read -r _ code ms hwm <"$WORK/bomb-$b"
	printf '| %s | %s | %s ms | %s MB | %s | %s |\n' "$b" "$code" "$ms" "$hwm" \
		"$(median <"$WORK/rate-$b-small")" "$(median <"$WORK/rate-$b-large")" | out
done
for b in $bins; do
	echo "  $b rounds: small $(tr '\n' ' ' <"$WORK/rate-$b-small")| large $(tr '\n' ' ' <"$WORK/rate-$b-large")" | out
done
[ "$SCRATCH" != "$WORK" ] && rm -rf "$SCRATCH"
