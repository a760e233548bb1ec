#!/usr/bin/env bash
# demo.sh — `make demo`: profd's main job, end to end, on this machine.
#
# Starts the collector (`profd serve`, embedded SQLite store, zero config)
# and examples/goapp (a real Go service serving net/http/pprof) as three
# services with different workloads; collects their profiles every few
# seconds the way the scraper will, pushing each one to the collector over
# profefe's API (POST /api/0/profiles); then asks the collector: services,
# profile list, merged CPU profile per service and for the fleet, hottest
# functions; and prints the URLs go tool pprof opens.
#   DEMO_ROUNDS (default 3), DEMO_DIR (default build/demo), DEMO_KEEP=1
#   leaves the collector running at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PROFD=$PWD/$BUILD/profd
OUT=${DEMO_DIR:-$PWD/$BUILD/demo}
ROUNDS=${DEMO_ROUNDS:-3}
rm -rf "$OUT"
mkdir -p "$OUT/files"
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

# push FILE SERVICE TYPE: POST a profile to the collector, as profefe's agent does
push() {
	local code
	code=$(curl -sS -o "$OUT/last-post.json" -w '%{http_code}' --data-binary "@$1" \
		"$API/api/0/profiles?service=$2&type=$3&labels=version=1.0,workload=$2")
	[ "$code" = 200 ] || { echo "demo: POST $1 failed ($code): $(cat "$OUT/last-post.json")" >&2; exit 1; }
}

echo "demo: collecting $ROUNDS rounds of cpu (2 s), heap, allocs and goroutine profiles, pushing each to the collector..."
for r in $(seq "$ROUNDS"); do
	cpus=()
	for svc in auth search ingest; do
		base="http://${addr[$svc]}/debug/pprof"
		curl -sf -o "$OUT/files/$svc-cpu-$r.pb.gz" "$base/profile?seconds=2" &
		cpus+=($!)
		for t in heap allocs goroutine; do
			curl -sf -o "$OUT/files/$svc-$t-$r.pb.gz" "$base/$t"
			push "$OUT/files/$svc-$t-$r.pb.gz" "$svc" "$t"
		done
	done
	for p in "${cpus[@]}"; do wait "$p"; done
	for svc in auth search ingest; do push "$OUT/files/$svc-cpu-$r.pb.gz" "$svc" cpu; done
	echo "demo:   round $r/$ROUNDS stored"
done

echo
echo "== GET /api/0/services"
curl -sS "$API/api/0/services"
echo "== GET /api/0/profiles?service=auth&type=cpu&from=now-1h&to=now (ids and times)"
curl -sS "$API/api/0/profiles?service=auth&type=cpu&from=now-1h&to=now" |
	grep -o '"id":"[^"]*"\|"created_at":"[^"]*"' | paste - - | sed 's/^/  /'

# The collector merges on stored ids, never re-parsing pprof; the fleet view
# merges the three services' merges locally.
for svc in auth search ingest; do
	curl -sSf -o "$OUT/$svc-cpu-merged.pb.gz" "$API/api/0/profiles/merge?service=$svc&type=cpu&from=now-1h&to=now"
done
"$PROFD" pprof merge -q -o "$OUT/fleet-cpu.pb.gz" "$OUT"/{auth,search,ingest}-cpu-merged.pb.gz

echo
echo "== service auth: hottest functions over the last hour (merged by the collector)"
"$PROFD" pprof top -n 8 "$OUT/auth-cpu-merged.pb.gz"
echo
echo "== the fleet's 10 hottest functions (CPU, all services, all rounds)"
"$PROFD" pprof top -n 10 "$OUT/fleet-cpu.pb.gz"
echo
echo "== collector metrics (excerpt)"
curl -sS "$API/metrics" | grep -E '^profd_(profiles_ingested_total\{type="cpu"\}|store_profiles|store_disk_bytes|ingest_received_bytes_total|merges_total) '

echo
echo "Open the merged profile with go tool pprof, straight from the collector:"
echo "  go tool pprof -top '$API/api/0/profiles/merge?service=auth&type=cpu&from=now-1h&to=now'"
echo "  go tool pprof -http=127.0.0.1:8080 '$API/api/0/profiles/merge?service=search&type=cpu&from=now-1h&to=now'"
if [ "${DEMO_KEEP:-0}" = 1 ]; then
	echo "The collector keeps running (pid $serve_pid); stop it with: kill $serve_pid"
else
	echo "(The demo stops the collector now; the profiles stay in $OUT/data. To query them again:"
	echo "  $BUILD/profd serve --data-dir $OUT/data      # then use http://localhost:10100/api/0/... as above"
	echo " or rerun with DEMO_KEEP=1 to leave it running.)"
fi
