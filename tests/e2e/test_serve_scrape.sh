#!/usr/bin/env bash
# test_serve_scrape.sh — end-to-end test of `profd serve --scrape`: the
# scrape loop inside the collector, writing to the store directly, against a
# real Go service (build/goapp):
#   1. cpu and heap profiles of the target are listed by the collector's API
#      within a few seconds; allocs (a delta) from the second round; a merge
#      reads in go tool pprof -top
#   2. the scraper's counters are on the collector's /metrics
#   3. SIGTERM: the scraper stops first, exit 0
#   3b. --target-ca passes through: an https:// target (python3 ssl in front
#      of the goapp, a self-signed certificate for 127.0.0.1) is stored; a
#      name the certificate does not hold is a certificate error
#   4. usage errors: --scrape with --collector or --once; serve --help
# Run: BUILD=build bash tests/e2e/test_serve_scrape.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

t_start=$SECONDS
kill_started_on_exit

GA=$GOAPP
[ -x "$GA" ] || GA=$ROOT/build/goapp
if [ ! -x "$GA" ]; then
	fail "setup" "no goapp binary (make -s $BUILD/goapp)"
	exit 0
fi

"$GA" -addr 127.0.0.1:0 -workload auth -cpu-load 0.2 2>"$T/goapp.log" &
GA_ADDR=$(wait_line "$T/goapp.log" '^goapp: listening on \(.*\)$')
if [ -z "$GA_ADDR" ]; then
	fail "setup: goapp" "$(cat "$T/goapp.log")"
	exit 0
fi

"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data" --retention 0 -q \
	--scrape --target "http://$GA_ADDR" --service svc -L env=e2e --interval 2s --cpu-duration 1s \
	--types cpu,heap,allocs 2>"$T/srv.log" &
SPID=$!
port=$(wait_line "$T/srv.log" '.*listening on port \([0-9][0-9]*\).*')
if [ -z "$port" ]; then
	fail "setup: serve --scrape" "$(cat "$T/srv.log")"
	exit 0
fi
SURL=http://127.0.0.1:$port
ok "setup: serve --scrape on $SURL, goapp $GA_ADDR"

# count TYPE: stored profiles of svc of that type
count() {
	curl -sS "$SURL/api/0/profiles?service=svc&type=$1&from=0&to=now" | grep -o '"id":"[0-9a-v]*"' | wc -l
}

# ---- 1. profiles land in the store --------------------------------------------------------------
t0=$SECONDS
for ((i = 0; i < 100; i++)); do
	[ "$(count cpu)" -ge 1 ] && [ "$(count heap)" -ge 1 ] && [ "$(count allocs)" -ge 1 ] && break
	sleep 0.2
done
ncpu=$(count cpu) nheap=$(count heap) nallocs=$(count allocs)
if [ "$ncpu" -ge 1 ] && [ "$nheap" -ge 1 ]; then
	ok "store: cpu ($ncpu) and heap ($nheap) profiles listed after $((SECONDS - t0)) s"
else
	fail "store: cpu and heap listed" "cpu=$ncpu heap=$nheap; $(tail -5 "$T/srv.log")"
fi
if [ "$nallocs" -ge 1 ]; then
	ok "store: allocs delta from the second round ($nallocs)"
else
	fail "store: allocs delta" "none after $((SECONDS - t0)) s; $(tail -5 "$T/srv.log")"
fi
list=$(curl -sS "$SURL/api/0/profiles?service=svc&from=0&to=now")
if grep -q '"key":"env","value":"e2e"' <<<"$list" && grep -q '"key":"instance","value":"'"$GA_ADDR"'"' <<<"$list"; then
	ok "store: labels env and instance"
else
	fail "store: labels" "$(head -c 400 <<<"$list")"
fi
curl -sS -o "$T/merged.pb.gz" "$SURL/api/0/profiles/merge?service=svc&type=cpu&from=0&to=now"
top=$(go_pprof -top "$T/merged.pb.gz")
if grep -q "flat%" <<<"$top" && grep -q "main\." <<<"$top"; then
	ok "merge: go tool pprof -top reads the merged cpu profile"
else
	fail "merge: go tool pprof -top" "$(head -c 600 <<<"$top")"
fi

# ---- 2. /metrics ------------------------------------------------------------------------------------
m=$(curl -sS "$SURL/metrics")
if grep -q '^profd_store_profiles' <<<"$m" && grep -q '^profd_scrape_scrapes_total{type="cpu",result="ok"} [1-9]' <<<"$m" &&
	grep -q '^profd_scrape_stored_total{result="ok"} [1-9]' <<<"$m" && grep -q '^profd_scrape_target_up{target="http://'"$GA_ADDR"'/debug/pprof",service="svc"} 1' <<<"$m"; then
	ok "metrics: the scraper's series on the collector's /metrics"
else
	fail "metrics" "$(grep '^profd_scrape' <<<"$m" | head -20)"
fi

# ---- 3. SIGTERM ---------------------------------------------------------------------------------
kill -TERM $SPID
rc=0
wait $SPID || rc=$?
if [ "$rc" = 0 ] && grep -q 'component=scrape msg="stopped" stored=' "$T/srv.log" && grep -q 'msg="stopped"$' "$T/srv.log"; then
	ok "SIGTERM: scraper stopped, then the server; exit 0"
else
	fail "SIGTERM" "exit $rc; $(tail -5 "$T/srv.log")"
fi
if grep -q "Sanitizer\|runtime error" "$T/srv.log"; then
	fail "no sanitizer report" "$(grep -A5 "Sanitizer\|runtime error" "$T/srv.log" | head -20)"
else
	ok "no sanitizer report"
fi

# ---- 3b. an https:// target with --target-ca (the flags pass through to the scraper) ---------------
if command -v openssl >/dev/null && command -v python3 >/dev/null; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/t.key" -out "$T/t.pem" -days 2 \
		-subj "/CN=target" -addext "subjectAltName=IP:127.0.0.1" >"$T/openssl.log" 2>&1
	# a TLS front (python3 ssl) to the goapp's pprof endpoints
	python3 "$ROOT/tests/tools/tls_front.py" "$GA_ADDR" "$T/t.pem" "$T/t.key" >"$T/front.log" 2>&1 &
	FP=$(wait_line "$T/front.log" '^listening on \([0-9]*\)$')
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data-tls" --retention 0 -q --scrape --types heap --interval 1s \
		--target "https://127.0.0.1:$FP" --service tls-ca --target-ca "$T/t.pem" \
		--target "https://localhost:$FP" --service tls-none 2>"$T/srv-tls.log" &
	SPID=$!
	port=$(wait_line "$T/srv-tls.log" '.*listening on port \([0-9][0-9]*\).*')
	for ((i = 0; i < 50; i++)); do
		n=$(curl -sS "http://127.0.0.1:$port/api/0/profiles?service=tls-ca&type=heap&from=0&to=now" | grep -c '"id"')
		[ "$n" -ge 1 ] && grep -q "target https://localhost:$FP/debug/pprof type heap: TLS: " "$T/srv-tls.log" && break
		sleep 0.2
	done
	if [ "${n:-0}" -ge 1 ]; then ok "tls: serve --scrape --target-ca: the https:// target's heap is stored"; else fail "tls: serve --scrape --target-ca" "$(tail -5 "$T/srv-tls.log")"; fi
	# one --target-ca for all targets: localhost is not in the certificate (IP:127.0.0.1 only)
	if grep -q "target https://localhost:$FP/debug/pprof type heap: TLS: the target's certificate is not trusted" "$T/srv-tls.log"; then
		ok "tls: serve --scrape: a name the certificate does not hold is refused, with a certificate error"
	else
		fail "tls: serve --scrape: wrong name" "$(grep localhost "$T/srv-tls.log" | head -3)"
	fi
	kill -TERM $SPID
	wait $SPID 2>/dev/null
else
	ok "tls: openssl or python3 missing # SKIP"
fi
expect_exit "usage: --scrape --target-ca FILE that cannot be read: exit 1" 1 "target-ca $T/nope.pem" \
	"$PROFD" serve --data-dir "$T/u" --scrape --target-ca "$T/nope.pem" --target h:1 --service s

# ---- 4. usage -------------------------------------------------------------------------------------
expect_exit "usage: --scrape --collector" 2 "not with serve --scrape: profiles go straight to the store" \
	"$PROFD" serve --data-dir "$T/u" --scrape --target h:1 --service s --collector http://h:2
expect_exit "usage: --scrape --once" 2 "not with serve --scrape: profiles go straight to the store" \
	"$PROFD" serve --data-dir "$T/u" --scrape --once --target h:1 --service s
expect_exit "usage: --scrape without targets" 2 "no targets" "$PROFD" serve --data-dir "$T/u" --scrape
printf 'scrape_configs:\n  - service: s\n    interval: 1x\n    static_configs: [{targets: [h:1]}]\n' >"$T/bad.yaml"
expect_exit "usage: --scrape --config with a bad YAML config: FILE:LINE:COLUMN" 2 \
	"profd serve: --config $T/bad.yaml:3:15: scrape_configs\[0\]\.interval: time: unknown unit" \
	"$PROFD" serve --data-dir "$T/u" --scrape --config "$T/bad.yaml"
"$PROFD" serve --help >"$T/help" 2>&1
if grep -q -- "--scrape" "$T/help"; then ok "usage: serve --help mentions --scrape"; else fail "usage: serve --help" "$(head -5 "$T/help")"; fi
echo "# test_serve_scrape.sh took $((SECONDS - t_start)) s"
