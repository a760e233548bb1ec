#!/usr/bin/env bash
# test_logs.sh — the logs of profd serve and profd scrape (docs/operations.md
# "Logs"): logfmt by default; --log-format json gives one JSON object per
# line, every line (start, request log, warnings, errors, shutdown), with
# values escaped so that a hostile URI cannot break a line; --log-level
# drops the lines below it (the request log is info); bad values exit 2.
# Run: BUILD=build bash tests/e2e/test_logs.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_built 1 make "$PROFD"
need_cmds 1 curl jq python3
kill_started_on_exit

# run_serve NAME ARGS...: a collector until stop_serve; log in $T/NAME.log
run_serve() {
	local name=$1
	shift
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data-$name" "$@" 2>"$T/$name.log" &
	SPID=$!
	PORT=$(serve_port "$T/$name.log" "$SPID")
	[ -n "$PORT" ] || { fail "setup: serve $name" "$(head -c 300 "$T/$name.log")"; exit 1; }
}
stop_serve() { kill -TERM "$SPID" && wait "$SPID" 2>/dev/null; }
# raw GET of a path as given (quotes, backslashes: what curl would not send); METHOD= another method
raw_get() {
	python3 - "$PORT" "$1" "${METHOD:-GET}" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
m = sys.argv[3].encode("latin-1")
s.sendall(m + b" " + sys.argv[2].encode("latin-1") + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
while s.recv(65536):
    pass
EOF
}
HOSTILE='/api/0/version?x="a\b"c'

run_serve json --log-format json --data-dir "$T/data dir"
curl -s -o /dev/null "http://127.0.0.1:$PORT/api/0/version"
raw_get "$HOSTILE"
METHOD='X"=level=error' raw_get /api/0/version # the method is the client's too
raw_get '/api/0/services?u=ÿþ' # sent as latin-1: the bytes ff fe, not UTF-8
curl -s -o /dev/null --data-binary 'not a profile' "http://127.0.0.1:$PORT/api/0/profiles?service=a&type=cpu"
sleep 0.2
stop_serve
# a tokens file whose error quotes a name (reloaded with a mistake on SIGHUP)
TOK=$(printf '%040d' 7)
printf '%s read alice\n' "$TOK" >"$T/tokens" && chmod 600 "$T/tokens"
run_serve hup --log-format json --tokens "$T/tokens"
printf '%s read alice\n%s write bob\n' "$TOK" "$TOK" >"$T/tokens"
kill -HUP "$SPID"
sleep 0.3
stop_serve
bad=$(while IFS= read -r l; do jq -e . >/dev/null 2>&1 <<<"$l" || echo "$l"; done <"$T/json.log")
[ -z "$bad" ] && [ "$(wc -l <"$T/json.log")" -ge 6 ] && ok "json: every line of the log is a JSON object ($(wc -l <"$T/json.log") lines)" ||
	fail "json: lines" "${bad:-only $(wc -l <"$T/json.log") lines}"
expect "json: the start line has its fields" "info 127.0.0.1:0" \
	"$(jq -r 'select((.msg // "") | test("listening on port")) | "\(.level) \(.addr)"' "$T/json.log")"
expect "json: a request line: method, uri, code" "GET /api/0/version 200" \
	"$(jq -r 'select(.uri == "/api/0/version" and .method == "GET") | "\(.method) \(.uri) \(.code)"' "$T/json.log")"
expect "json: a hostile URI comes back as it was sent" "$HOSTILE" "$(jq -r 'select((.uri // "") | startswith("/api/0/version?")) | .uri' "$T/json.log")"
expect "json: bytes that are not UTF-8 are U+FFFD, the line still UTF-8 JSON" "/api/0/services?u=\ufffd\ufffd" \
	"$(python3 -c '
import json, sys
for l in open(sys.argv[1], "rb"):
    try:
        u = json.loads(l.decode("utf-8")).get("uri", "")
    except ValueError as e:
        print("not UTF-8 JSON:", e, l[:200]); continue
    if u.startswith("/api/0/services?u="):
        print(u.encode("ascii", "backslashreplace").decode())' "$T/json.log")"
expect "json: the refused upload" "400" "$(jq -r 'select(.method == "POST") | .code' "$T/json.log")"
expect "json: the warning has its level" "warn" "$(jq -r 'select((.msg // "") | test("no --tokens")) | .level' "$T/json.log")"
expect "json: a hostile method comes back as it was sent, the line's own level kept" 'X"=level=error 405 info' \
	"$(jq -r 'select((.method // "") | startswith("X")) | "\(.method) \(.code) \(.level // "info")"' "$T/json.log")"
expect "json: a data dir with a space is one value" "$T/data dir" \
	"$(jq -r 'select((.msg // "") | test("listening on port")) | .data_dir' "$T/json.log")"
expect "json: an error quoting a name is one value (SIGHUP, tokens)" "error|$T/tokens:2: the same token as \"alice\"" \
	"$(jq -r 'select((.msg // "") | test("SIGHUP")) | "\(.level)|\(.error)"' "$T/hup.log")"
expect "json: the shutdown" "stopped" "$(jq -r 'select(.msg == "stopped") | .msg' "$T/json.log")"

run_serve plain
raw_get "$HOSTILE"
METHOD=$'X"=level=error\x01' raw_get /api/0/version
sleep 0.2
stop_serve
if grep -q '^ts=[0-9T:.-]*Z level=info msg="profd .* listening on port' "$T/plain.log" &&
	grep -Fq 'uri="/api/0/version?x=\"a\\b\"c"' "$T/plain.log"; then ok "logfmt (the default): quoted and escaped as before"
else fail "logfmt" "$(head -c 600 "$T/plain.log")"; fi
check "logfmt: a hostile method is quoted and escaped (a plain one is not)" \
	grep -Fq 'method="X\"=level=error\x01" uri="/api/0/version"' "$T/plain.log"

"$PROFD" serve --addr "127.0.0.1:$PORT" --data-dir "$T/data-warn" --log-level warn 2>"$T/warn.log" &
SPID=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.05; done
curl -s -o /dev/null "http://127.0.0.1:$PORT/api/0/version"
sleep 0.2
stop_serve
if grep -q 'level=warn msg="no --tokens' "$T/warn.log" && ! grep -q 'level=info\|uri=' "$T/warn.log"; then
	ok "--log-level warn: the warning, no info line, no request line"
else fail "--log-level warn" "$(head -c 600 "$T/warn.log")"; fi

# the scraper too (a dead target: warnings and its summary)
"$PROFD" scrape --once --target 127.0.0.1:1 --service dead --types heap --collector http://127.0.0.1:1 \
	--log-format json >"$T/scrape.out" 2>"$T/scrape.log"
bad=$(while IFS= read -r l; do jq -e . >/dev/null 2>&1 <<<"$l" || echo "$l"; done <"$T/scrape.log")
[ -z "$bad" ] && [ -s "$T/scrape.log" ] && jq -e 'select(.level == "warn" or .level == "error")' "$T/scrape.log" >/dev/null &&
	ok "json: profd scrape's log lines too ($(wc -l <"$T/scrape.log"))" || fail "json: scrape" "${bad:-$(head -c 300 "$T/scrape.log")}"

expect_exit "--log-format yaml: exit 2" 2 "log-format: want logfmt or json" "$PROFD" serve --log-format yaml
expect_exit "--log-level loud: exit 2" 2 "log-level: want debug, info, warn or error" "$PROFD" scrape --log-level loud --once --target x:1
no_sanitizer "logs: no sanitizer report" "$T"/*.log
