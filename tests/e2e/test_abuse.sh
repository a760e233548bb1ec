#!/usr/bin/env bash
# test_abuse.sh — bad clients cannot take the collector down (issue 12, part
# 4): while they are held, a probe from another address (GET /healthz and a
# POST of a real profile, in turn) must get every answer (tests/e2e/abuse.py):
#   1. 1,000 idle connections (from 20 loopback addresses)
#   2. 300 slowloris connections (a header byte a second)
#   3. 20 clients that ask for a big merge and never read it
#   4. one address over --max-connections-per-ip: the surplus is refused,
#      the others still answered
#   5. --max-concurrent-merges 1 and 8 merges at once: 503 + Retry-After for
#      the surplus, the rest 200
# Latencies are printed, not asserted (docs/benchmarks.md has the figures).
# Run: BUILD=build bash tests/e2e/test_abuse.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
kill_started_on_exit
need_built 0 "make $BUILD/profd $BUILD/goapp" "$PROFD" "$GOAPP"
need_cmds 0 curl python3
ABUSE=$ROOT/tests/e2e/abuse.py
SECS=${ABUSE_SECONDS:-3}

start_server() { # NAME ARGS...: sets SPID PORT URL SLOG
	local name=$1 port=''
	shift
	SLOG=$T/srv-$name.log
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data-$name" --retention 0 "$@" 2>"$SLOG" &
	SPID=$!
	port=$(serve_port "$SLOG" "$SPID")
	[ -n "$port" ] || { fail "setup: start $name" "$(head -c 400 "$SLOG")"; exit 0; }
	PORT=$port
	URL=http://127.0.0.1:$port
}

C=$T/cap
mkdir -p "$C"
if ! tests/e2e/capture.sh "$GOAPP" "$C" 1 >"$T/capture.log" 2>&1; then
	fail "setup: capture goapp profiles" "$(tail -5 "$T/capture.log")"
	exit 0
fi
# a service to merge: 240 uploads of the goapp's CPU profile (a merge of them takes a few
# milliseconds: with 40, merges had become fast enough that 8 sent at once did not overlap,
# seen in CI), 8 at a time
start_server main -q
ups=()
for i in $(seq 240); do
	curl -s -o /dev/null -w '%{http_code}\n' --data-binary @"$C/cpu.pb.gz" \
		"$URL/api/0/profiles?service=big&type=cpu&created_at=$((1700000000 + i))" >"$T/up$i" &
	ups+=($!)
	if [ ${#ups[@]} -eq 8 ]; then
		wait "${ups[@]}" # these uploads (a bare wait would wait for the server too)
		ups=()
	fi
done
[ ${#ups[@]} -eq 0 ] || wait "${ups[@]}"
n=$(cat "$T"/up* | grep -c '^200$')
rm -f "$T"/up*
expect "setup: 240 profiles of service big" 240 "$n"

probe() { # NAME MODE N [ENV...]
	local name=$1 mode=$2 count=$3
	shift 3
	if env "$@" python3 "$ABUSE" "$PORT" "$C/cpu.pb.gz" "$mode" "$count" "$SECS" "$SPID" >"$T/abuse.out" 2>"$T/abuse.err"; then
		ok "$name: every probe answered ($(cat "$T/abuse.out"))"
	else
		fail "$name" "$(cat "$T/abuse.out") $(head -5 "$T/abuse.err")"
	fi
	LINE=$(cat "$T/abuse.out")
}
probe "1,000 idle connections held" idle 1000
expect "... all 1,000 were held open" "held=1000" "$(echo "$LINE" | grep -o 'held=[0-9]*')"
probe "300 slowloris connections held" slowloris 300
expect "... all 300 were held open" "held=300" "$(echo "$LINE" | grep -o 'held=[0-9]*')"
probe "20 clients not reading big merges" stalled 20
probe "300 connections from one address (cap 64)" idle 300 MAX_PER_IP=1000
expect "... 64 held, the rest refused" "held=64 refused=236" "$(echo "$LINE" | grep -o 'held=[0-9]* refused=[0-9]*')"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/healthz")
expect "alive afterwards" 200 "$code"
kill "$SPID"
wait "$SPID" 2>/dev/null

# ---- merges ----------------------------------------------------------------------------------
cp -r "$T/data-main" "$T/data-merges"
start_server merges --max-concurrent-merges 1
# 8 at once until some overlap (up to 10 rounds: a merge of 240 profiles takes a few
# milliseconds). One curl with 8 parallel transfers, which it starts together: 8 curl processes started
# one after another spread their requests over more than a merge takes.
for round in $(seq 10); do
	args=()
	for i in $(seq 8); do # -D is one file for all transfers: -i, the head split off below
		rm -f "$T/r$i"
		args+=(-o "$T/r$i" "$URL/api/0/profiles/merge?service=big&type=cpu&from=0&to=now")
	done
	curl -s -i -Z --parallel-immediate --parallel-max 8 "${args[@]}"
	python3 - "$T" <<'EOF'
import os, sys
for i in range(1, 9): # rI -> hI (head), mI (body), cI (status, 000 if no answer)
    f = lambda x: os.path.join(sys.argv[1], "%s%d" % (x, i))
    d = open(f("r"), "rb").read() if os.path.exists(f("r")) else b""
    h, _, b = d.partition(b"\r\n\r\n")
    open(f("h"), "wb").write(h + b"\r\n")
    open(f("m"), "wb").write(b)
    l = h.split(b"\r\n")[0].split()
    open(f("c"), "w").write((l[1].decode() if len(l) > 1 else "000") + "\n")
EOF
	codes=$(cat "$T"/c[1-8] | sort | uniq -c | tr -s ' ' | tr '\n' ',')
	n503=$(cat "$T"/c[1-8] | grep -c '^503$')
	n200=$(cat "$T"/c[1-8] | grep -c '^200$')
	echo "# round $round: 8 merges at once, cap 1: $codes"
	[ "$n503" -ge 1 ] && break
done
if [ "$n503" -ge 1 ] && [ $((n503 + n200)) -eq 8 ]; then ok "8 merges at once over a cap of 1: some 503, the rest 200"; else fail "8 merges at once over a cap of 1: some 503" "$codes"; fi
f=$(grep -l '^503$' "$T"/c[1-8] | head -1)
if [ -n "$f" ]; then
	i=${f##*/c}
	check "... the 503 has Retry-After" grep -qi '^retry-after: ' "$T/h$i"
	check "... and names the flag" grep -q 'max-concurrent-merges' "$T/m$i"
fi
kill "$SPID"
wait "$SPID" 2>/dev/null
no_sanitizer "no sanitizer reports" "$T"/srv-*.log
