#!/usr/bin/env bash
# soak_scrape.sh — a scraper's memory, descriptors and threads while the pods
# it discovers come and go (`make soak-scrape`; SOAK_SECONDS, default 300).
#
# The test Kubernetes API server (tests/kubeapi) holds SOAK_PODS (default 150)
# pods annotated profefe.com/enable, each pointing at one loopback target of
# bench/targets (real examples/goapp profiles, SOAK_PORTS ports, default 300);
# bench/soak_scrape.py replaces SOAK_CHURN pods a second (default 4: the
# whole set every ~40 s, as rolling updates do, new ReplicaSets and version
# labels now and then) and cuts the API server's watches every 60 s (every
# 5th time after a compaction: 410 Gone, a full list). `profd scrape -A`
# (all 7 types, SOAK_INTERVAL, default 10 s, CPU profiles of 2 s) pushes to
# a fresh `profd serve` on tmpfs (retention and rollups every 10 s).
#
# Every 30 s a line: pods added and deleted, the scraper's known targets, ok
# and failed scrapes, drops from its queue, the scraper's VmRSS and VmHWM
# (KiB), descriptors, threads, and the collector's VmRSS and VmHWM. Exit 1
# if the scraper or the collector dies, or the scraper exits non-zero at the
# end. PROFD_BASE=path/to/another/profd runs the same soak with that binary
# (scraper and collector) first, for a before/after in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SECONDS_=${SOAK_SECONDS:-300}
DATA=$PWD/$BUILD/bench-data
for b in profd targets kubeapi goapp; do
	[ -x "$BUILD/$b" ] || { echo "soak: $BUILD/$b missing (make $BUILD/$b)" >&2; exit 1; }
done
TMPBASE=${TMPDIR:-/tmp}
if [ -d /dev/shm ] && [ -w /dev/shm ]; then TMPBASE=/dev/shm; fi
WORK=$(mktemp -d "$TMPBASE/profd-soak-scrape.XXXXXX")
PIDS=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	set +e
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

# wait_line FILE SED-EXPR: the first match of a sed -n expression in FILE (10 s)
wait_line() {
	local v
	for _ in $(seq 200); do
		# the file may not be made yet (|| true: under pipefail a missing file would end the script)
		v=$(sed -n "$2" "$1" 2>/dev/null | head -n1 || true)
		[ -n "$v" ] && { echo "$v"; return 0; }
		sleep 0.05
	done
	echo "soak: nothing matched $2 in $1: $(tail -3 "$1" 2>&1)" >&2
	return 1
}

# the same captures as bench/run.sh and bench/scrape.sh
# shellcheck source=bench/goapp.sh
. bench/goapp.sh
goapp_captures "$BUILD" "$DATA" || { echo "bench: capturing examples/goapp failed" >&2; exit 1; }

"$BUILD/targets" -n "${SOAK_PORTS:-300}" -profiles "$(echo "$DATA"/goapp/run{1,2,3,4,5} | tr ' ' ,)" \
	-ports-file "$WORK/ports" 2>"$WORK/targets.log" &
PIDS+=($!)
wait_line "$WORK/targets.log" 's/^targets: listening on \([0-9]*\) ports$/\1/p' >/dev/null

results=$PWD/$BUILD/bench-results.md
run() { # name binary
	local dir=$WORK/$1 rc=0
	mkdir -p "$dir"
	"$BUILD/kubeapi" -kubeconfig "$dir/kubeconfig" -cert-dir "$dir/certs" -bookmark-interval 5s \
		2>"$dir/kubeapi.log" &
	local kpid=$!
	PIDS+=("$kpid")
	local api
	api=$(wait_line "$dir/kubeapi.log" 's/^kubeapi: listening on \(https:.*\)$/\1/p')
	"$2" serve -q --addr 127.0.0.1:0 --data-dir "$dir/data" --retention-interval 10s --rollup-interval 10s \
		--max-open-partitions 8 2>"$dir/serve.log" &
	local cpid=$!
	PIDS+=("$cpid")
	local cport
	cport=$(wait_line "$dir/serve.log" 's/.*listening on port \([0-9]*\).*/\1/p')
	"$2" scrape -q --kubeconfig "$dir/kubeconfig" -A --collector "http://127.0.0.1:$cport" \
		--interval "${SOAK_INTERVAL:-10}s" --cpu-duration 2s --listen 127.0.0.1:0 2>"$dir/scrape.log" &
	local spid=$!
	PIDS+=("$spid")
	local mport
	mport=$(wait_line "$dir/scrape.log" 's/.*metrics listening on port \([0-9]*\).*/\1/p')
	echo
	echo "### soak of the scraper, $1 ($2): ${SECONDS_} s, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo
	echo '```'
	python3 bench/soak_scrape.py "$api" "$dir/certs" "$WORK/ports" "$spid" "http://127.0.0.1:$mport" "$cpid" \
		"$SECONDS_" --pods "${SOAK_PODS:-150}" --churn "${SOAK_CHURN:-4}" --every "${SOAK_EVERY:-30}" || rc=1
	echo '```'
	kill "$spid" 2>/dev/null || true
	wait "$spid" || { echo "soak: profd scrape exited $?: $(tail -3 "$dir/scrape.log")"; rc=1; }
	kill "$cpid" "$kpid" 2>/dev/null || true
	wait "$cpid" || { echo "soak: profd serve exited $?: $(tail -3 "$dir/serve.log")"; rc=1; }
	wait "$kpid" 2>/dev/null || true
	grep -c 'level=error' "$dir/scrape.log" | sed 's/^/scraper error lines: /'
	return $rc
}
rc=0
if [ -n "${PROFD_BASE:-}" ]; then
	run base "$PROFD_BASE" > >(tee -a "$results") || rc=1
fi
run profd "$PWD/$BUILD/profd" > >(tee -a "$results") || rc=1
sleep 0.2 # tee's last lines
exit $rc
