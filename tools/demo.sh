#!/usr/bin/env bash
# demo.sh — `make demo`: profd's main job, end to end, on this machine.
#
# Starts the collector (`profd serve`, embedded SQLite store, zero config)
# and examples/goapp (a real Go service serving net/http/pprof) as three
# services with different workloads; scrapes them a few rounds with
# `profd scrape --once` (which pushes each profile to the collector over
# profefe's API, POST /api/0/profiles); then asks the collector with the
# client commands: services, types, profiles, hottest functions per service
# and for the fleet (profd get / top / merge); and prints the URLs go tool
# pprof opens, and the web UI's.
#   DEMO_ROUNDS (default 3), DEMO_DIR (default build/demo), DEMO_KEEP=1
#   leaves the collector running at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PROFD=$PWD/$BUILD/profd
OUT=${DEMO_DIR:-$PWD/$BUILD/demo}
ROUNDS=${DEMO_ROUNDS:-3}
rm -rf "$OUT"
mkdir -p "$OUT"
export HOME=${HOME:-/tmp} PPROF_TMPDIR=$OUT/pprof-tmp

pids=()
serve_pid=
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	if [ -n "$serve_pid" ] && [ "${DEMO_KEEP:-0}" != 1 ]; then kill -TERM "$serve_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

# wait_line FILE SED-EXPR: print the first match of SED-EXPR in FILE (10 s)
wait_line() {
	local v=""
	for _ in $(seq 100); do
		v=$(sed -n "$2" "$1" | head -1)
		[ -n "$v" ] && break
		sleep 0.1
	done
	echo "$v"
}

"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$OUT/data" 2>"$OUT/serve.log" &
serve_pid=$!
port=$(wait_line "$OUT/serve.log" 's/.*listening on port \([0-9]*\).*/\1/p')
[ -n "$port" ] || { echo "demo: the collector did not start: $(cat "$OUT/serve.log")" >&2; exit 1; }
API=http://127.0.0.1:$port
echo "demo: collector (profd serve) on $API, store in $OUT/data, request log in $OUT/serve.log"

declare -A addr
for svc in auth search ingest; do
	"$BUILD/goapp" -addr 127.0.0.1:0 -service "$svc" -workload "$svc" -cpu-load 0.3 2>"$OUT/$svc.log" &
	pids+=($!)
done
for svc in auth search ingest; do
	a=$(wait_line "$OUT/$svc.log" 's/^goapp: listening on //p')
	[ -n "$a" ] || { echo "demo: $svc did not start: $(cat "$OUT/$svc.log")" >&2; exit 1; }
	addr[$svc]=$a
	echo "demo: service $svc serving pprof on http://$a/debug/pprof/"
done

# The scraper (profd scrape) pulls every target's /debug/pprof endpoints and
# pushes each profile to the collector over profefe's API v0, exactly as it
# would for pods it finds through the Kubernetes API. --state-dir keeps the
# last allocs snapshot per target, so from the second round on, what is
# stored is what was allocated between two scrapes (go tool pprof -base).
targets=()
for svc in auth search ingest; do
	targets+=(--target "http://${addr[$svc]}/debug/pprof" --service "$svc" -L version=1.0 -L workload="$svc")
done
echo "demo: $ROUNDS scrape rounds (profd scrape --once): cpu (2 s), heap, allocs, goroutine of every service..."
for r in $(seq "$ROUNDS"); do
	"$PROFD" scrape --once --collector "$API" --types cpu,heap,allocs,goroutine --cpu-duration 2s \
		--state-dir "$OUT/scrape-state" "${targets[@]}" >"$OUT/scrape-$r.txt" 2>"$OUT/scrape-$r.log" || {
		echo "demo: scrape round $r failed:" >&2
		cat "$OUT/scrape-$r.txt" "$OUT/scrape-$r.log" >&2
		exit 1
	}
	echo "demo:   round $r/$ROUNDS stored"
done
echo "== the last round's summary (profd scrape --once)"
sed 's/^/  /' "$OUT/scrape-$ROUNDS.txt"

export PROFD_COLLECTOR=$API
echo
echo "== profd get services"
"$PROFD" get services
echo
echo "== profd get types   (per service: profiles stored in the last hour)"
"$PROFD" get types
echo
echo "== profd get profiles --service auth --type cpu"
"$PROFD" get profiles --service auth --type cpu

# The collector merges on stored ids, never re-parsing pprof.
echo
echo "== profd merge --service auth --type cpu -O $OUT/auth-cpu-merged.pb.gz"
"$PROFD" merge --service auth --type cpu -O "$OUT/auth-cpu-merged.pb.gz"
echo
echo "== service auth: hottest functions over the last hour (profd top --service auth)"
"$PROFD" top --service auth --limit 8
echo
echo "== the fleet's 10 hottest functions (profd top --all: CPU, every service, every round)"
"$PROFD" top --all --limit 10
echo
echo "== collector metrics (excerpt)"
curl -sS "$API/metrics" | grep -E '^profd_(profiles_ingested_total\{type="cpu"\}|store_profiles|store_disk_bytes|ingest_received_bytes_total|merges_total) '

echo
echo "Open the merged profile with go tool pprof, straight from the collector:"
echo "  go tool pprof -top '$("$PROFD" merge --service auth --type cpu --print-url)'"
echo "  go tool pprof -http=127.0.0.1:8080 '$API/api/0/profiles/merge?service=search&type=cpu&from=now-1h&to=now'"
echo
echo "Look at it in the browser (flame graph, top table, timeline, diff, fleet, profiles; docs/ui.md):"
echo "  $API/?query=cpu%7Bservice%3D%22auth%22%7D&from=now-1h&to=now"
code=$(curl -s -o /dev/null -w '%{http_code}' "$API/")
[ "$code" = 200 ] || { echo "demo: the web UI did not answer: HTTP $code" >&2; exit 1; }
if [ "${DEMO_KEEP:-0}" = 1 ]; then
	echo "The collector keeps running (pid $serve_pid), its UI at $API/; stop it with: kill $serve_pid"
else
	echo "(The demo stops the collector now; the profiles stay in $OUT/data. To query them again:"
	echo "  $BUILD/profd serve --data-dir $OUT/data      # then http://localhost:10100/ (the UI) and /api/0/... as above"
	echo " or rerun with DEMO_KEEP=1 to leave it running.)"
fi
