#!/usr/bin/env bash
# test_serve_mutated.sh — the collector against its own requests with damaged
# parameters: tests/e2e/mutclient.py sends every route of API v0 and v1
# (list, merge, top, series, diff, rollouts, regressions, labels, types,
# /metrics/profiles, DELETE, and uploads of a real profile) with one to
# three parameters changed per seed (odd values, repeated, left out,
# unknown ones added) to a `profd serve` holding real profiles of
# examples/goapp (two versions, cpu and heap). Every answer must be one a
# server gives a bad request (never a 500 or no answer; a 4xx of the API
# with its error text), /healthz must answer at once throughout, the
# collector must exit 0 on SIGTERM, its log without a sanitizer report
# (BUILD=build-san: the first run found a signed overflow in an integer
# parameter that aborted the collector). Then the same against a collector
# on the ClickHouse store (its SQL is built from those parameters), when
# clickhouse-server is installed.
# MUT_SEEDS=N (default 100) rounds of every route; MUT_CH_SEEDS (default
# 30) on ClickHouse.
# Run: BUILD=build bash tests/e2e/test_serve_mutated.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=clickhouse.sh
source "$(dirname "$0")/clickhouse.sh"

unset PROFD_COLLECTOR
GA=$GOAPP
[ -x "$GA" ] || GA=$ROOT/build/goapp # a Go program, not sanitized
need_built 0 "make $BUILD/profd $BUILD/goapp" "$PROFD" "$GA"
need_cmds 0 python3
kill_started_on_exit
C=$T/cap
capture_sets "$C" 2

# mutate LABEL SEEDS STORE...: a collector on STORE (serve's flags), loaded with
# the captures, then mutclient.py's damaged requests; its checks prefixed LABEL
mutate() {
	local label=$1 seeds=$2 log=$T/serve-$1.log spid port url m rc summary codes
	shift 2
	"$PROFD" serve --addr 127.0.0.1:0 "$@" 2>"$log" &
	spid=$!
	port=$(serve_port "$log" "$spid")
	[ -n "$port" ] || { fail "$label: setup: serve" "$(head -c 400 "$log")"; return; }
	url=http://127.0.0.1:$port
	for m in 50 40; do
		"$PROFD" load --service goapp -l version=1.0 --created-at "now-${m}m" --collector "$url" "$C/1/cpu.pb.gz" "$C/1/heap.pb.gz" >/dev/null 2>"$T/load.err" ||
			{ fail "$label: setup: load" "$(head -c 400 "$T/load.err")"; return; }
	done
	for m in 20 10; do
		"$PROFD" load --service goapp -l version=1.1 --created-at "now-${m}m" --collector "$url" "$C/2/cpu.pb.gz" "$C/2/heap.pb.gz" >/dev/null 2>"$T/load.err" ||
			{ fail "$label: setup: load" "$(head -c 400 "$T/load.err")"; return; }
	done
	python3 "$ROOT/tests/e2e/mutclient.py" "$url" "$seeds" "$C/1/cpu.pb.gz" >"$T/mut-$label.out" 2>&1
	rc=$?
	summary=$(tail -1 "$T/mut-$label.out")
	if [ "$rc" = 0 ] && [[ $summary =~ ^([0-9]+)\ requests,\ 0\ failures$ ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]; then
		ok "$label: damaged requests: $summary (every answer a 2xx or a 4xx/503 with its error, /healthz answering)"
	else
		fail "$label: damaged requests" "exit $rc: $(grep -m3 '^FAIL' "$T/mut-$label.out" | cut -c1-400) $summary"
	fi
	codes=$(grep -o ' code=[0-9]*' "$log" | sort | uniq -c | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2}')
	if grep -q ' code=200' "$log" && grep -q ' code=400' "$log"; then
		ok "$label: damaged requests: both answered and refused ones ($codes)"
	else
		fail "$label: damaged requests: a mix of answers" "$codes"
	fi
	kill -TERM "$spid" 2>/dev/null
	wait "$spid"
	expect "$label: the collector exits 0 on SIGTERM after them" 0 "$?"
	no_sanitizer "$label: the collector's log: no sanitizer report" "$log"
}

mutate embedded "${MUT_SEEDS:-100}" --data-dir "$T/data"

if ! ch_available; then
	ok "clickhouse: damaged requests # SKIP clickhouse-server not installed (make deps)"
elif ! ch_start one; then
	fail "clickhouse: setup: clickhouse-server" "did not start"
else
	ch_q one "CREATE DATABASE mut" >/dev/null
	# shellcheck disable=SC2154 # CH_HTTP_one: set by ch_start
	mutate clickhouse "${MUT_CH_SEEDS:-30}" --store "clickhouse://127.0.0.1:$CH_HTTP_one/mut"
	ch_stop one
fi
