#!/usr/bin/env bash
# soak.sh — a collector's memory, descriptors and threads over a long run of
# steady traffic (`make soak`; SOAK_SECONDS, default 300).
#
# A fresh `profd serve` (data dir on tmpfs when there is one; retention and
# rollups every 10 s, at most 8 day files open, so that those paths run
# many times) takes uploads of real scrapes of examples/goapp (the 6 types)
# at SOAK_RATE a second (default 100), each one re-dated to now (2 % of them
# 1 to 40 days back: day files made, closed and dropped) and with its
# function names given the current build as a suffix, a new build every
# SOAK_DEPLOY uploads (default 1,000): 20 services deployed every ~10 s, the
# store meeting new symbols all along. Meanwhile two clients ask what the
# web UI and scripts ask, without pause: lists, single profiles, merges
# (pprof, top, flame graph), fleet top, series, labels, diff of the last two
# builds, rollouts, regressions, the UI page, /metrics, and DELETEs now and
# then (bench/soak.py has the list).
#
# Every 30 s a line: uploads, queries, errors, the collector's VmRSS and VmHWM
# (KiB), descriptors, threads. At the end every route is asked SOAK_PROBE
# times (default 5) alone, the load stopped (what a quiet collector answers
# with that data), then the queriers' answers per route (median, 90th
# percentile). Any answer a sound request should not get (a 5xx, no answer)
# is an error; the script exits 1 on any, or if the
# collector dies. PROFD_BASE=path/to/another/profd runs the same soak with
# that binary first, for a before/after in one run. SOAK_STORE=clickhouse
# puts the collector on a ClickHouse 18.16 started here (tests/e2e/
# clickhouse.sh; a fresh database per run) instead of the embedded store;
# ClickHouse's own RSS is printed at the end of each run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SECONDS_=${SOAK_SECONDS:-300}
DATA=$PWD/$BUILD/bench-data
. bench/goapp.sh
for b in profd loadgen goapp; do
	[ -x "$BUILD/$b" ] || { echo "soak: $BUILD/$b missing (make $BUILD/$b)" >&2; exit 1; }
done
STORE=${SOAK_STORE:-sqlite}
case $STORE in
sqlite) ;;
clickhouse)
	# shellcheck source=tests/e2e/lib.sh
	source tests/e2e/lib.sh
	# shellcheck source=tests/e2e/clickhouse.sh
	source tests/e2e/clickhouse.sh
	ch_available || { echo "soak: SOAK_STORE=clickhouse: clickhouse-server not installed (make deps)" >&2; exit 1; }
	;;
*) echo "soak: SOAK_STORE=$STORE: want sqlite or clickhouse" >&2; exit 1 ;;
esac
TMPBASE=${TMPDIR:-/tmp}
if [ -d /dev/shm ] && [ -w /dev/shm ]; then TMPBASE=/dev/shm; fi
WORK=$(mktemp -d "$TMPBASE/profd-soak.XXXXXX")
GPID= SPID=
# shellcheck disable=SC2154 # T: set by lib.sh when sourced
trap '[ -n "$GPID" ] && kill "$GPID" 2>/dev/null; [ -n "$SPID" ] && kill "$SPID" 2>/dev/null
	declare -F ch_cleanup >/dev/null && ch_cleanup; rm -rf "$WORK" ${T:+"$T"}' EXIT
if [ "$STORE" = clickhouse ]; then
	ch_start soak >/dev/null || { echo "soak: clickhouse-server did not start" >&2; exit 1; }
fi

# the profiles: make bench's scrapes if it made them, else 200 rounds now
SCRAPES=$DATA/scrapes
if ! ls "$SCRAPES"/.done-* >/dev/null 2>&1; then
	SCRAPES=$DATA/soak-scrapes
	if [ ! -f "$SCRAPES/.done" ]; then
		echo "soak: scraping examples/goapp (200 rounds of the 6 types, cpu 1 s each: ~4 min), once" >&2
		rm -rf "$SCRAPES"
		scrape_goapp "$BUILD" "$WORK" "$SCRAPES" 200 cpu,heap,allocs,goroutine,block,mutex 250ms || exit 1
		touch "$SCRAPES/.done"
	fi
fi

results=$PWD/$BUILD/bench-results.md
run() { # name binary; 1 on an error answer or a collector that died
	local rc=0
	local dir=$WORK/$1
	mkdir -p "$dir"
	local store=()
	if [ "$STORE" = clickhouse ]; then
		ch_q soak "CREATE DATABASE soak_$1" >/dev/null || exit 1
		# shellcheck disable=SC2154 # CH_HTTP_soak: set by ch_start
		store=(--store "clickhouse://127.0.0.1:$CH_HTTP_soak/soak_$1")
	fi
	"$2" serve --addr 127.0.0.1:0 --data-dir "$dir/data" --retention-interval 10s --rollup-interval 10s \
		--max-open-partitions 8 "${store[@]}" 2>"$dir/log" &
	SPID=$!
	local port=
	for _ in $(seq 200); do
		port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$dir/log" | head -n1)
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || { echo "soak: $1: the collector did not start: $(tail -3 "$dir/log")" >&2; exit 1; }
	echo
	echo "### soak, $1 ($2), store $STORE: ${SECONDS_} s, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo
	echo '```'
	python3 bench/soak.py "http://127.0.0.1:$port" "$SPID" "$SECONDS_" "$SCRAPES" --every 30 \
		--rate "${SOAK_RATE:-100}" --deploy-every "${SOAK_DEPLOY:-1000}" \
		--probe "${SOAK_PROBE:-5}" || rc=1
	echo '```'
	# shellcheck disable=SC2154 # CH_PID_soak: set by ch_start
	[ "$STORE" = clickhouse ] && awk '$1 == "VmRSS:" || $1 == "VmHWM:" { printf "ClickHouse %s %s KiB\n", $1, $2 }' \
		"/proc/$CH_PID_soak/status"
	kill "$SPID"
	wait "$SPID" || rc=1
	SPID=
	return $rc
}
rc=0
if [ -n "${PROFD_BASE:-}" ]; then
	run base "$PROFD_BASE" > >(tee -a "$results") || rc=1
fi
run profd "$PWD/$BUILD/profd" > >(tee -a "$results") || rc=1
sleep 0.2 # tee's last lines
exit $rc
