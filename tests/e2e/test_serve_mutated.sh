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
# parameter that aborted the collector).
# MUT_SEEDS=N (default 100) rounds of every route.
# Run: BUILD=build bash tests/e2e/test_serve_mutated.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

unset PROFD_COLLECTOR
GA=$GOAPP
[ -x "$GA" ] || GA=$ROOT/build/goapp # a Go program, not sanitized
need_built 0 "make $BUILD/profd $BUILD/goapp" "$PROFD" "$GA"
need_cmds 0 python3
kill_started_on_exit
C=$T/cap
for k in 1 2; do
	"$ROOT/tests/e2e/capture.sh" "$GA" "$C/$k" 1 >"$T/capture-$k.log" 2>&1 &
	capk[k]=$!
done
for k in 1 2; do
	wait "${capk[k]}" || { fail "setup: capture $k" "$(tail -c 400 "$T/capture-$k.log")"; exit 0; }
done

"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data" 2>"$T/serve.log" &
SPID=$!
port=$(serve_port "$T/serve.log" "$SPID")
[ -n "$port" ] || { fail "setup: serve" "$(head -c 400 "$T/serve.log")"; exit 0; }
URL=http://127.0.0.1:$port
for m in 50 40; do
	"$PROFD" load --service goapp -l version=1.0 --created-at "now-${m}m" --collector "$URL" "$C/1/cpu.pb.gz" "$C/1/heap.pb.gz" >/dev/null 2>"$T/load.err" ||
		{ fail "setup: load" "$(head -c 400 "$T/load.err")"; exit 0; }
done
for m in 20 10; do
	"$PROFD" load --service goapp -l version=1.1 --created-at "now-${m}m" --collector "$URL" "$C/2/cpu.pb.gz" "$C/2/heap.pb.gz" >/dev/null 2>"$T/load.err" ||
		{ fail "setup: load" "$(head -c 400 "$T/load.err")"; exit 0; }
done

python3 "$ROOT/tests/e2e/mutclient.py" "$URL" "${MUT_SEEDS:-100}" "$C/1/cpu.pb.gz" >"$T/mut.out" 2>&1
rc=$?
summary=$(tail -1 "$T/mut.out")
if [ "$rc" = 0 ] && [[ $summary =~ ^([0-9]+)\ requests,\ 0\ failures$ ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]; then
	ok "damaged requests: $summary (every answer a 2xx or a 4xx/503 with its error, /healthz answering)"
else
	fail "damaged requests" "exit $rc: $(grep -m3 '^FAIL' "$T/mut.out" | cut -c1-400) $summary"
fi
codes=$(grep -o ' code=[0-9]*' "$T/serve.log" | sort | uniq -c | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2}')
if grep -q ' code=200' "$T/serve.log" && grep -q ' code=400' "$T/serve.log"; then
	ok "damaged requests: both answered and refused ones ($codes)"
else
	fail "damaged requests: a mix of answers" "$codes"
fi
kill -TERM "$SPID" 2>/dev/null
wait "$SPID"
expect "the collector exits 0 on SIGTERM after them" 0 "$?"
no_sanitizer "the collector's log: no sanitizer report" "$T/serve.log"
