#!/usr/bin/env bash
# test_tls.sh — `profd serve --tls-cert/--tls-key [--tls-client-ca]` (issue 12,
# part 3) with certificates made here by openssl (a CA, the server's, one
# for another host, an expired one, a client's):
#   1. curl --cacert and profd's clients (--cacert; --insecure only when
#      asked) against the TLS port; without the CA they refuse, with a hint
#   2. plain HTTP to the TLS port fails cleanly, the server stays up;
#      TLS 1.1 is refused
#   3. a wrong-host and an expired certificate are refused by the clients
#   4. SIGHUP re-reads the certificate (new handshakes get the new one); a
#      broken pair is refused and the one in force kept
#   5. --tls-client-ca: no client certificate 403, one from another CA 403,
#      one of the CA made for servers only (serverAuth) 403, the right one 200
#   6. start: a key that is not the certificate's, missing files, flags alone
# Run: BUILD=build bash tests/e2e/test_tls.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
kill_started_on_exit
need_built 0 "make $BUILD/profd $BUILD/goapp" "$PROFD" "$GOAPP"
need_cmds 0 curl openssl jq

K=$T/pki
mkdir -p "$K"
umask 077
ossl() { openssl "$@" >>"$K/openssl.log" 2>&1; }
# ca NAME: a self-signed CA
ca() { ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$K/$1.key" -out "$K/$1.pem" -days 3 -subj "/CN=$1"; }
# leaf NAME CA SAN DAYS [client|server]: a certificate signed by CA (with
# that extended key usage)
leaf() {
	ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$K/$1.key" -out "$K/$1.csr" -subj "/CN=$1"
	{ [ -n "$3" ] && echo "subjectAltName=$3"; [ -n "${5:-}" ] && echo "extendedKeyUsage=${5}Auth"; } >"$K/$1.ext"
	ossl x509 -req -in "$K/$1.csr" -CA "$K/$2.pem" -CAkey "$K/$2.key" -CAcreateserial -out "$K/$1.pem" -days "$4" -extfile "$K/$1.ext"
}
ca ca
ca otherca
leaf server ca "DNS:localhost,IP:127.0.0.1" 3
leaf server2 ca "DNS:localhost,IP:127.0.0.1" 3
leaf wronghost ca "DNS:other.example" 3
leaf expired ca "DNS:localhost,IP:127.0.0.1" -1
leaf client ca "" 3 client
leaf strangerclient otherca "" 3 client
leaf serveronly ca "DNS:other.example" 3 server
if [ -s "$K/server.pem" ] && [ -s "$K/expired.pem" ] && [ -s "$K/client.pem" ]; then ok "setup: openssl made the CA and the certificates"; else fail "setup: openssl made the certificates" "$(tail -5 "$K/openssl.log")"; exit 0; fi

start_server() { # NAME ARGS...: sets SPID PORT URL SLOG
	local name=$1 port=''
	shift
	SLOG=$T/srv-$name.log
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data-$name" "$@" 2>"$SLOG" &
	SPID=$!
	port=$(serve_port "$SLOG" "$SPID")
	[ -n "$port" ] || { fail "setup: start $name" "$(head -c 400 "$SLOG")"; exit 0; }
	PORT=$port
	URL=https://127.0.0.1:$port
}
stop_server() { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; }

C=$T/cap
mkdir -p "$C"
if ! tests/e2e/capture.sh "$GOAPP" "$C" 1 >"$T/capture.log" 2>&1; then
	fail "setup: capture goapp profiles" "$(tail -5 "$T/capture.log")"
	exit 0
fi

# ---- 1. clients ------------------------------------------------------------------------------
start_server main --tls-cert "$K/server.pem" --tls-key "$K/server.key"
code=$(curl -s -o "$T/b" -w '%{http_code}' --cacert "$K/ca.pem" --data-binary @"$C/cpu.pb.gz" "$URL/api/0/profiles?service=tls&type=cpu")
expect "curl --cacert: POST over TLS 200" 200 "$code"
code=$(curl -s -o "$T/b" -w '%{http_code}' --cacert "$K/ca.pem" "https://localhost:$PORT/api/0/services")
expect "curl --cacert by name (localhost): 200" 200 "$code"
curl -s -o /dev/null "$URL/api/0/services"
expect "curl without the CA: refused (exit 60, not trusted)" 60 "$?"
check "profd get services --cacert" "$PROFD" get services --collector "$URL" --cacert "$K/ca.pem"
grep -q tls "$T/.out" && ok "... lists the service" || fail "... lists the service" "$(head -c 300 "$T/.out")"
expect_exit "profd get services without --cacert: exit 1, hints --cacert" 1 'cacert FILE names the CA' \
	"$PROFD" get services --collector "$URL"
check "profd get services --insecure" "$PROFD" get services --collector "$URL" --insecure
check "profd load --cacert" "$PROFD" load --collector "$URL" --cacert "$K/ca.pem" --service tlsload "$C/heap.pb.gz"
check "profd merge --cacert" "$PROFD" merge --collector "$URL" --cacert "$K/ca.pem" --service tls --type cpu -O "$T/m.pb.gz"
if go_pprof -top "$T/m.pb.gz" >"$T/top" && grep -q flat% "$T/top"; then ok "... the merge go tool pprof reads"; else fail "... the merge go tool pprof reads" "$(head -3 "$T/top")"; fi
start_goapp app auth
check "profd scrape --once --collector-cacert" "$PROFD" scrape --once --collector "$URL" --collector-cacert "$K/ca.pem" \
	--target "http://127.0.0.1:$PORT_app/debug/pprof" --service scraped --types heap
code=$(curl -s -o "$T/b" -w '%{http_code}' --cacert "$K/ca.pem" "$URL/api/0/profiles?service=scraped&from=now-1h&to=now%2B1m")
expect "... the scraped profile is there" 200 "$code"

# ---- 2. plain HTTP, old TLS --------------------------------------------------------------------
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/api/0/services")
expect "plain HTTP to the TLS port: no HTTP answer" 000 "$code"
curl -s -m 5 -o /dev/null --cacert "$K/ca.pem" --tlsv1.1 --tls-max 1.1 "$URL/healthz"
rc=$?
if [ "$rc" -ne 0 ]; then ok "TLS 1.1 refused (curl exit $rc)"; else fail "TLS 1.1 refused" "curl succeeded"; fi
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$K/ca.pem" --tlsv1.2 --tls-max 1.2 "$URL/healthz")
expect "TLS 1.2 accepted" 200 "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$K/ca.pem" "$URL/healthz")
expect "the server is still up after those" 200 "$code"
stop_server

# ---- 3. certificates a client must refuse -------------------------------------------------------
start_server wronghost --tls-cert "$K/wronghost.pem" --tls-key "$K/wronghost.key"
curl -s -o /dev/null --cacert "$K/ca.pem" "$URL/healthz"
expect "curl refuses a certificate for another host (exit 60)" 60 "$?"
expect_exit "profd get refuses a certificate for another host" 1 '(certificate|SSL)' \
	"$PROFD" get services --collector "$URL" --cacert "$K/ca.pem"
stop_server
start_server expired --tls-cert "$K/expired.pem" --tls-key "$K/expired.key"
curl -s -o /dev/null --cacert "$K/ca.pem" "$URL/healthz"
expect "curl refuses an expired certificate (exit 60)" 60 "$?"
expect_exit "profd get refuses an expired certificate" 1 '(certificate|SSL|expired)' \
	"$PROFD" get services --collector "$URL" --cacert "$K/ca.pem"
stop_server

# ---- 4. SIGHUP --------------------------------------------------------------------------------
cp "$K/server.pem" "$K/live.pem"
cp "$K/server.key" "$K/live.key"
start_server reload --tls-cert "$K/live.pem" --tls-key "$K/live.key"
subject() { openssl s_client -connect "127.0.0.1:$PORT" -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -subject 2>/dev/null | sed 's/.*CN *= *//'; }
expect "before SIGHUP: the first certificate" server "$(subject)"
cp "$K/server2.pem" "$K/live.pem"
cp "$K/server2.key" "$K/live.key"
kill -HUP "$SPID"
for _ in $(seq 50); do grep -q 'TLS certificate reloaded' "$SLOG" && break; sleep 0.1; done
check "SIGHUP: the reload is logged with the new subject" grep -q 'TLS certificate reloaded" subject="CN=server2"' "$SLOG"
expect "after SIGHUP: new handshakes get the new certificate" server2 "$(subject)"
cp "$K/server.key" "$K/live.key" # the wrong key for server2.pem
kill -HUP "$SPID"
for _ in $(seq 50); do grep -q 'TLS certificate not reloaded' "$SLOG" && break; sleep 0.1; done
check "SIGHUP with a mismatched pair: refused, logged" grep -q 'TLS certificate not reloaded, the one in force is kept.*is not the key of the certificate' "$SLOG"
expect "... the certificate in force stays" server2 "$(subject)"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$K/ca.pem" "$URL/healthz")
expect "... and serves" 200 "$code"
stop_server

# ---- 5. client certificates -----------------------------------------------------------------
start_server mtls --tls-cert "$K/server.pem" --tls-key "$K/server.key" --tls-client-ca "$K/ca.pem"
code=$(curl -s -o "$T/b" -w '%{http_code}' --cacert "$K/ca.pem" "$URL/api/0/services")
if [ "$code" = 403 ] && grep -q 'client certificate is required' "$T/b"; then ok "--tls-client-ca: no client certificate: 403 saying so"; else fail "--tls-client-ca: no client certificate: 403" "code $code: $(head -c 200 "$T/b")"; fi
code=$(curl -s -o "$T/b" -w '%{http_code}' --cacert "$K/ca.pem" --cert "$K/strangerclient.pem" --key "$K/strangerclient.key" "$URL/api/0/services")
if [ "$code" = 403 ] || [ "$code" = 000 ]; then ok "--tls-client-ca: a certificate of another CA is refused ($code)"; else fail "--tls-client-ca: a certificate of another CA is refused" "code $code: $(head -c 200 "$T/b")"; fi
code=$(curl -s -o "$T/b" -w '%{http_code}' --cacert "$K/ca.pem" --cert "$K/serveronly.pem" --key "$K/serveronly.key" "$URL/api/0/services")
if [ "$code" = 403 ] && grep -q 'purpose\."}' "$T/b"; then ok "--tls-client-ca: a server's certificate of the CA (serverAuth only) is no client's: 403"; else fail "--tls-client-ca: a server-only certificate of the CA is refused" "code $code: $(head -c 200 "$T/b")"; fi
code=$(curl -s -o "$T/b" -w '%{http_code}' --cacert "$K/ca.pem" --cert "$K/client.pem" --key "$K/client.key" --data-binary @"$C/cpu.pb.gz" "$URL/api/0/profiles?service=mtls&type=cpu")
expect "--tls-client-ca: the right client certificate: 200" 200 "$code"
stop_server

# ---- 6. start -----------------------------------------------------------------------------------
expect_exit "a key that is not the certificate's: exit 1" 1 'is not the key of the certificate' \
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/d6" --tls-cert "$K/server.pem" --tls-key "$K/client.key"
expect_exit "a missing certificate file: exit 1, names it" 1 "tls-cert.*$K/none.pem" \
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/d6" --tls-cert "$K/none.pem" --tls-key "$K/server.key"
expect_exit "--tls-cert without --tls-key: usage error" 2 'go together' \
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/d6" --tls-cert "$K/server.pem"
expect_exit "--tls-client-ca alone: usage error" 2 'needs --tls-cert' \
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/d6" --tls-client-ca "$K/ca.pem"
no_sanitizer "no sanitizer reports" "$T"/srv-*.log
