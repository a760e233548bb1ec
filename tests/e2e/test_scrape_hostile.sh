#!/usr/bin/env bash
# test_scrape_hostile.sh — targets that try to misuse the scraper (issue 12,
# part 6), served by a small Python HTTP server on loopback:
#   1. a target whose /debug/pprof/heap redirects to the collector's own API:
#      the redirect is not followed, the target is reported failed with where
#      it pointed, nothing of the collector's answer is stored
#   2. a target serving 8 M tiny samples in a 73 KB gzip: refused as over the
#      memory limit, and the scraper's peak RSS stays small
#   3. a real goapp target beside them is scraped and stored as usual
#   4. targets whose answers hold a secret (SECRET-MARKER-123 in HTML, JSON,
#      text, a broken legacy profile, a 404, a 500): the table, the log,
#      /targets and /metrics never show it, and say what each answer was
#      (an HTML page, JSON, text; its size)
#   5. a collector that answers 201 instead of 200: the profile is delivered,
#      not sent again and again
# Run: BUILD=build bash tests/e2e/test_scrape_hostile.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
kill_started_on_exit
need_built 0 "make $BUILD/profd $BUILD/goapp" "$PROFD" "$GOAPP"
need_cmds 0 curl python3 jq

SLOG=$T/srv.log
"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data" 2>"$SLOG" &
SPID=$!
CPORT=$(wait_line "$SLOG" '.*listening on port \([0-9][0-9]*\).*')
[ -n "$CPORT" ] || { fail "setup: collector" "$(head -c 300 "$SLOG")"; exit 0; }

python3 "$ROOT/tests/tools/tiny_samples.py" "$T/bomb.pb.gz"
# the hostile target: /redirect/debug/pprof/* -> the collector; /bomb/debug/pprof/* -> the bomb
python3 - "$CPORT" "$T/bomb.pb.gz" >"$T/target.log" 2>&1 <<'EOF' &
import http.server, sys
cport, bomb = sys.argv[1], open(sys.argv[2], "rb").read()
M = b"SECRET-MARKER-123"
SECRETS = {
    "secret-html": (b"<!DOCTYPE html>\n<html><body>Sign in. session=" + M + b"</body></html>\n", "text/html", 200),
    "secret-json": (b'{"token": "' + M + b'"}', "application/json", 200),
    "secret-text": (b"password: " + M + b"\n", "text/plain", 200),
    "secret-legacy": (b"--- mutex:\ncycles/second=1\n1 99999999999999999999999 @ 0x1 " + M + b"\n", "text/plain", 200),
    "secret-404": (b"no such page, but here is " + M + b"\n", "text/plain", 404),
    "secret-500": (b"<html><body>" + M + b"</body></html>", "text/html", 500),
}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/redirect/"):
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:%s/api/0/services" % cport)
            self.end_headers()
        elif self.path.startswith("/secret-"):
            # answers that hold a secret: the scraper must say what they are, never show them
            kind = self.path.split("/")[1]
            body, ctype, code = SECRETS[kind]
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path.startswith("/bomb/"):
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(bomb)))
            self.end_headers()
            self.wfile.write(bomb)
        else:
            self.send_response(404)
            self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print("listening on %d" % s.server_address[1], flush=True)
s.serve_forever()
EOF
HPORT=$(wait_line "$T/target.log" '^listening on \([0-9]*\)$')
[ -n "$HPORT" ] || { fail "setup: hostile target" "$(cat "$T/target.log")"; exit 0; }
start_goapp app auth

/usr/bin/time -f '%M' -o "$T/rss" "$PROFD" scrape --once --collector "http://127.0.0.1:$CPORT" --types heap \
	--target "http://127.0.0.1:$HPORT/redirect/debug/pprof" --service redirected \
	--target "http://127.0.0.1:$HPORT/bomb/debug/pprof" --service bomb \
	--target "http://127.0.0.1:$PORT_app/debug/pprof" --service real >"$T/out" 2>"$T/err"
rc=$?
expect "scrape --once with failing targets: exit 1" 1 "$rc"
all=$(cat "$T/out" "$T/err")
if grep -q 'a redirect to http://127.0.0.1:'"$CPORT"'/api/0/services, not followed' <<<"$all"; then ok "the redirect is reported with where it pointed, not followed"; else fail "the redirect is reported, not followed" "$(head -c 600 <<<"$all")"; fi
if grep -q 'over the limit of 64 MiB per profile' <<<"$all"; then ok "the 8 M-sample target is refused over the memory limit"; else fail "the 8 M-sample target is refused over the memory limit" "$(head -c 600 <<<"$all")"; fi
rss=$(tail -1 "$T/rss")
if [ "$rss" -lt $((300 * 1024)) ]; then ok "the scraper's peak RSS stays under 300 MiB ($((rss / 1024)) MiB)"; else fail "the scraper's peak RSS stays under 300 MiB" "$((rss / 1024)) MiB"; fi
code=$(curl -s -o "$T/b" -w '%{http_code}' "http://127.0.0.1:$CPORT/api/0/services")
expect "services answer" 200 "$code"
expect "only the real target's profile was stored" '["real"]' "$(jq -c .body "$T/b")"

# ---- 4. a target's answer is never echoed (issue 12 item 6) -----------------------------------------
H=http://127.0.0.1:$HPORT
SECRET_TARGETS=(--types heap,goroutine
	--target "$H/secret-html/debug/pprof" --service s-html --target "$H/secret-json/debug/pprof" --service s-json
	--target "$H/secret-text/debug/pprof" --service s-text --target "$H/secret-legacy/debug/pprof" --service s-legacy
	--target "$H/secret-404/debug/pprof" --service s-404 --target "$H/secret-500/debug/pprof" --service s-500)
"$PROFD" scrape --once --collector "http://127.0.0.1:$CPORT" "${SECRET_TARGETS[@]}" >"$T/sec.out" 2>"$T/sec.err"
rc=$?
# continuously too: /targets and /metrics once every target was scraped
"$PROFD" scrape --collector "http://127.0.0.1:$CPORT" --interval 2s "${SECRET_TARGETS[@]}" --listen 127.0.0.1:0 2>"$T/sec2.err" &
SCR=$!
MPORT=$(wait_line "$T/sec2.err" '.*metrics listening on port \([0-9][0-9]*\).*')
for ((i = 0; i < 100; i++)); do
	curl -sS "http://127.0.0.1:$MPORT/targets" >"$T/sec.targets" 2>/dev/null
	[ "$(grep -c "not a pprof profile\|HTTP [45]0[04] from" "$T/sec.targets")" -ge 12 ] && break
	sleep 0.1
done
curl -sS "http://127.0.0.1:$MPORT/metrics" >"$T/sec.metrics" 2>/dev/null
kill -TERM $SCR
wait $SCR 2>/dev/null
grep -q "secret-500.*HTTP 500 from" "$T/sec.targets" && ok "secrets: /targets shows every target's error" ||
	fail "secrets: /targets" "$(head -c 600 "$T/sec.targets")"
expect "secrets: scrape --once exit 1" 1 "$rc"
if grep -l "SECRET-MARKER" "$T/sec.out" "$T/sec.err" "$T/sec2.err" "$T/sec.targets" "$T/sec.metrics" >/dev/null; then
	fail "secrets: no target body in the table, the log, /targets, /metrics" "$(grep -h "SECRET-MARKER" "$T/sec.out" "$T/sec.err" "$T/sec2.err" "$T/sec.targets" "$T/sec.metrics" | head -5)"
else
	ok "secrets: no target body in the table, the log, /targets, /metrics"
fi
# msg TARGET TYPE REGEX: the summary's error line of the target's type matches
msg() {
	if grep -q -- "target $H/$1/debug/pprof type $2: $3" "$T/sec.out" && grep -q -- "target $H/$1/debug/pprof type $2: $3" "$T/sec.err"; then
		ok "secrets: $1 is described as $4 (table and log)"
	else
		fail "secrets: $1 described" "$(grep "$1" "$T/sec.out" "$T/sec.err" | head -4)"
	fi
}
msg secret-html heap "not a pprof profile (got text/html): the body is an HTML page (77 bytes) — a login or error page" "an HTML page with its size"
msg secret-json heap "not a pprof profile (got application/json): the body is JSON (30 bytes)" "JSON with its size"
msg secret-text goroutine "not a pprof profile (got text/plain): the body is text (28 bytes) in none of the profile formats" "text with its size"
msg secret-legacy heap "not a pprof profile (got text/plain): the body is text (77 bytes): contention profile, line 3: malformed (Go.s profile.Parse refuses it too; the line is not shown" "a legacy profile's bad line, by number"
msg secret-404 heap "HTTP 404 from $H/secret-404/debug/pprof/heap, with text (44 bytes)" "an HTTP 404 with text of its size"
msg secret-500 heap "HTTP 500 from $H/secret-500/debug/pprof/heap, with an HTML page (43 bytes)" "an HTTP 500 with an HTML page of its size"
# ---- 5. a collector that answers 201 Created: delivered, never sent again ---------------------------
python3 - "$T/c201.port" "$T/c201.count" >/dev/null 2>&1 <<'EOF' &
import http.server, os, sys
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global n
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        n += 1
        open(sys.argv[2], "w").write(str(n))
        b = b'{"code":201,"body":{"id":"x"}}'
        self.send_response(201); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1] + ".tmp", "w").write(str(s.server_address[1])); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.serve_forever()
EOF
C201=$!
for ((k = 0; k < 200; k++)); do [ -s "$T/c201.port" ] && break; sleep 0.05; done
"$PROFD" scrape --once --collector "http://127.0.0.1:$(cat "$T/c201.port")" --flush-timeout 3s --types heap,goroutine \
	--target "http://127.0.0.1:$PORT_app/debug/pprof" --service real >"$T/c201.out" 2>"$T/c201.err"
rc=$?
sleep 0.2
expect "a collector answering 201: exit 0, each profile posted once" "0 2" "$rc $(cat "$T/c201.count" 2>/dev/null)"
kill "$C201" 2>/dev/null
wait "$C201" 2>/dev/null
kill "$SPID"
wait "$SPID" 2>/dev/null
no_sanitizer "no sanitizer reports" "$SLOG" "$T/err" "$T/sec.err" "$T/sec2.err" "$T/c201.err"
