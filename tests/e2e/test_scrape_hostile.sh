#!/usr/bin/env bash
# test_scrape_hostile.sh — targets that try to misuse the scraper (issue 12,
# part 6), served by a small Python HTTP server on loopback:
#   1. a target whose /debug/pprof/heap redirects to the collector's own API:
#      the redirect is not followed, the target is reported failed with where
#      it pointed, nothing of the collector's answer is stored
#   2. a target serving 8 M tiny samples in a 73 KB gzip: refused as over the
#      memory limit, and the scraper's peak RSS stays small
#   3. a real goapp target beside them is scraped and stored as usual
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
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/redirect/"):
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:%s/api/0/services" % cport)
            self.end_headers()
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
kill "$SPID"
wait "$SPID" 2>/dev/null
no_sanitizer "no sanitizer reports" "$SLOG" "$T/err"
