#!/usr/bin/env bash
# demo.sh — `make demo`: profd's main job today, end to end, on this machine.
#
# Starts examples/goapp (a real Go service serving net/http/pprof) as three
# services with different workloads, collects their profiles every few
# seconds the way a scraper does, merges each service's CPU profiles and the
# fleet's into one pprof, prints the hottest functions, and shows how to open
# the results with go tool pprof. (The collector with its embedded store,
# `profd serve`, is the next milestone; this demo will then push to it.)
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
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

declare -A addr
for svc in auth search ingest; do
	: >"$OUT/$svc.log"
	"$BUILD/goapp" -addr 127.0.0.1:0 -service "$svc" -workload "$svc" -cpu-load 0.3 2>"$OUT/$svc.log" &
	pids+=($!)
done
for svc in auth search ingest; do
	for _ in $(seq 100); do
		a=$(sed -n 's/^goapp: listening on //p' "$OUT/$svc.log" | head -1)
		[ -n "$a" ] && break
		sleep 0.1
	done
	[ -n "$a" ] || { echo "demo: $svc did not start: $(cat "$OUT/$svc.log")" >&2; exit 1; }
	addr[$svc]=$a
	echo "demo: service $svc serving pprof on http://$a/debug/pprof/"
done

echo "demo: collecting $ROUNDS rounds of cpu (2 s), heap and goroutine profiles from each service..."
for r in $(seq "$ROUNDS"); do
	cpus=()
	for svc in auth search ingest; do
		base="http://${addr[$svc]}/debug/pprof"
		curl -sf -o "$OUT/$svc-cpu-$r.pb.gz" "$base/profile?seconds=2" &
		cpus+=($!)
		curl -sf -o "$OUT/$svc-heap-$r.pb.gz" "$base/heap"
		curl -sf -o "$OUT/$svc-goroutine-$r.pb.gz" "$base/goroutine"
	done
	for p in "${cpus[@]}"; do wait "$p"; done
	echo "demo:   round $r/$ROUNDS done"
done
ls "$OUT"/*.pb.gz | wc -l | xargs echo "demo: profiles collected:"

echo
echo "== one profile, described"
"$PROFD" pprof info "$OUT/auth-cpu-1.pb.gz"

for svc in auth search ingest; do
	"$PROFD" pprof merge -q -o "$OUT/$svc-cpu-merged.pb.gz" "$OUT/$svc"-cpu-*.pb.gz
done
"$PROFD" pprof merge -q -o "$OUT/fleet-cpu.pb.gz" "$OUT"/*-cpu-[0-9]*.pb.gz
# heap is a cumulative counter since process start: merge only the latest
# snapshot of each service, never several rounds of the same one
"$PROFD" pprof merge -q -o "$OUT/fleet-heap.pb.gz" "$OUT"/*-heap-"$ROUNDS".pb.gz

echo
echo "== the fleet's 10 hottest functions (CPU, all services, all rounds merged)"
"$PROFD" pprof top -n 10 "$OUT/fleet-cpu.pb.gz"
echo
echo "== the fleet's biggest allocators since start (alloc_space, latest heap of each service)"
"$PROFD" pprof top -n 5 --sample-index alloc_space "$OUT/fleet-heap.pb.gz"
echo
echo "== hottest stacks of service auth (folded, for flamegraph.pl)"
"$PROFD" pprof folded "$OUT/auth-cpu-merged.pb.gz" | sort -t' ' -k2 -nr | head -3 | cut -c1-160

echo
echo "Open them with go tool pprof, for example:"
echo "  go tool pprof -top $OUT/fleet-cpu.pb.gz"
echo "  go tool pprof -http=127.0.0.1:8080 $OUT/search-cpu-merged.pb.gz"
echo "Live (while a service runs): go tool pprof http://${addr[auth]}/debug/pprof/profile?seconds=5"
