#!/usr/bin/env bash
# test_api1_norm.sh — end-to-end tests of API v1's normalisation (docs/api.md
# "Normalisation") on real profiles: three instances of one Go service
# (examples/goapp, service "web"), each scraped several times:
#   A: 3 heap, 3 goroutine, 3 allocs (cumulative=true), 2 cpu (1 s)
#   B: 2 heap, 2 goroutine, 2 allocs (cumulative=true), 1 cpu
#   C: 1 allocs (cumulative=true): a single snapshot, left out
# posted with instance labels and created_at times in two 5-minute steps.
# tests/e2e/norm_check.py then checks /api/1/top, /merge, /series and /diff
# against values computed independently with go tool pprof on the same
# files (per-instance averages, -base deltas, raw sums, durations read from
# the protobuf), normalize=false, and the bad parameters.
# Run: BUILD=build bash tests/e2e/test_api1_norm.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

CHECK=$ROOT/tests/e2e/norm_check.py
GA=$GOAPP
[ -x "$GA" ] || GA=$ROOT/build/goapp # a Go program, not sanitized
unset PROFD_COLLECTOR
PIDS=()
stop_all() {
	local p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	PIDS=()
}
prev_trap=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
# shellcheck disable=SC2064 # expanded now on purpose: lib.sh's command
trap "stop_all; $prev_trap" EXIT

need_built 0 "make $BUILD/profd $BUILD/goapp" "$PROFD" "$GA"
need_cmds 0 go curl python3

# instance NAME NHEAP NCPU NALLOCS: goapp on a free port; NHEAP heap and goroutine
# snapshots and NALLOCS allocs snapshots 0.5 s apart, NCPU CPU profiles of 1 s
# (in parallel); files in $T/NAME/, its address in $T/NAME/addr
instance() {
	local name=$1 nh=$2 nc=$3 na=$4 dir=$T/$1 addr= k
	mkdir -p "$dir"
	"$GA" -addr 127.0.0.1:0 -service web -workload mixed 2>"$dir/goapp.log" &
	local pid=$!
	for ((k = 0; k < 200; k++)); do
		addr=$(sed -n 's/^goapp: listening on \(.*\)$/\1/p' "$dir/goapp.log" | head -n1)
		[ -n "$addr" ] && break
		sleep 0.05
	done
	echo "$addr" >"$dir/addr"
	sleep 0.5
	(for ((k = 0; k < nc; k++)); do
		curl -sSf --max-time 30 -o "$dir/cpu$k.pb.gz" "http://$addr/debug/pprof/profile?seconds=1" || break
	done) &
	local cpid=$!
	local n=$((nh > na ? nh : na))
	for ((k = 0; k < n; k++)); do
		[ "$k" -lt "$nh" ] && curl -sSf --max-time 30 -o "$dir/heap$k.pb.gz" "http://$addr/debug/pprof/heap"
		[ "$k" -lt "$nh" ] && curl -sSf --max-time 30 -o "$dir/goroutine$k.pb.gz" "http://$addr/debug/pprof/goroutine"
		[ "$k" -lt "$na" ] && curl -sSf --max-time 30 -o "$dir/allocs$k.pb.gz" "http://$addr/debug/pprof/allocs"
		sleep 0.5
	done
	wait "$cpid"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}
instance A 3 2 3 &
instance B 2 1 2 &
instance C 0 0 1 &
wait
missing=
for f in A/heap0 A/heap2 A/goroutine2 A/allocs2 A/cpu1 B/heap1 B/goroutine1 B/allocs1 B/cpu0 C/allocs0; do
	[ -s "$T/$f.pb.gz" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
	fail "setup: profiles from 3 goapp instances" "missing:$missing: $(tail -c 300 "$T"/A/goapp.log)"
	exit 0
fi
ok "setup: 3 instances of goapp (service web): heap, goroutine, allocs snapshots and cpu profiles"

# created_at: two 5-minute steps from T0 (a multiple of 300 s, 30 minutes ago)
STEP=300
T0=$(( ($(date +%s) - 1800) / STEP * STEP ))
M=$T/manifest
{
	for k in 0 1 2; do
		echo "$T/A/heap$k.pb.gz web heap $(cat "$T/A/addr") 0 $((T0 + 10 + 10 * k))"
		echo "$T/A/goroutine$k.pb.gz web goroutine $(cat "$T/A/addr") 0 $((T0 + 10 + 10 * k))"
	done
	for k in 0 1; do
		echo "$T/B/heap$k.pb.gz web heap $(cat "$T/B/addr") 0 $((T0 + 11 + 10 * k))"
		echo "$T/B/goroutine$k.pb.gz web goroutine $(cat "$T/B/addr") 0 $((T0 + 11 + 10 * k))"
	done
	# allocs: A in step 1 (twice) and step 2, B once in each, C once
	echo "$T/A/allocs0.pb.gz web allocs $(cat "$T/A/addr") 1 $((T0 + 10))"
	echo "$T/A/allocs1.pb.gz web allocs $(cat "$T/A/addr") 1 $((T0 + 20))"
	echo "$T/A/allocs2.pb.gz web allocs $(cat "$T/A/addr") 1 $((T0 + STEP + 100))"
	echo "$T/B/allocs0.pb.gz web allocs $(cat "$T/B/addr") 1 $((T0 + 15))"
	echo "$T/B/allocs1.pb.gz web allocs $(cat "$T/B/addr") 1 $((T0 + STEP + 110))"
	echo "$T/C/allocs0.pb.gz web allocs $(cat "$T/C/addr") 1 $((T0 + 12))"
	echo "$T/A/cpu0.pb.gz web cpu $(cat "$T/A/addr") 0 $((T0 + 40))"
	echo "$T/A/cpu1.pb.gz web cpu $(cat "$T/A/addr") 0 $((T0 + 50))"
	echo "$T/B/cpu0.pb.gz web cpu $(cat "$T/B/addr") 0 $((T0 + 41))"
} >"$M"

: >"$T/serve.log"
"$PROFD" serve --addr 127.0.0.1:0 --retention 0 --data-dir "$T/data" 2>"$T/serve.log" &
PIDS+=($!)
PORT=$(wait_line "$T/serve.log" '.*listening on port \([0-9][0-9]*\).*')
if [ -z "$PORT" ]; then
	fail "setup: profd serve" "no 'listening on port' line: $(head -c 600 "$T/serve.log")"
	exit 0
fi
URL=http://127.0.0.1:$PORT
check "setup: post the $(wc -l <"$M") profiles (instance labels, cumulative=true on allocs)" python3 "$CHECK" post "$URL" "$M"

FROM=$(date -u -d "@$T0" +%Y-%m-%dT%H:%M:%SZ)
TO=$(date -u -d "@$((T0 + 2 * STEP - 1))" +%Y-%m-%dT%H:%M:%SZ)
python3 "$CHECK" check "$URL" "$M" "$FROM" "$TO" "$STEP" 2>&1

stop_all
if grep -q "Sanitizer\|runtime error" "$T/serve.log"; then
	fail "server: no sanitizer report" "$(grep -m1 -A20 "Sanitizer\|runtime error" "$T/serve.log" | head -c 2000)"
else
	ok "server: no sanitizer report in its log"
fi
