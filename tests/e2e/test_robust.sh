#!/usr/bin/env bash
# test_robust.sh — a careless or hostile client against a real `profd serve`
# (issue 11): every answer right or a clear refusal, as JSON.
#   1. the declared type is checked (a CPU profile as heap = 400 naming both),
#      no type = inferred; fleet merges keep working
#   2. parameters: NUL bytes (%00), invalid UTF-8, times a profile id cannot
#      hold (past 2106, before 1970) at ingest and in queries
#   3. framing: two Content-Length headers, Content-Length with chunking
#      (request smuggling behind a proxy), URI and headers over the limits:
#      400/414/431 as the JSON envelope, not the library's HTML
#   4. memory: a ~100 KB gzip of 8 M tiny samples is refused at once (413)
#      and the collector's peak RSS stays small; an upload that would pass
#      --max-ingest-memory is a 503 with Retry-After; with -q the error is
#      still logged; nothing acknowledged is lost
# Run: BUILD=build bash tests/e2e/test_robust.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
kill_started_on_exit
need_built 0 "make $BUILD/profd $BUILD/goapp" "$PROFD" "$GOAPP"
need_cmds 0 curl python3 jq

# start_server NAME DIR ARGS...: profd serve on a free port; sets SPID, SURL, SLOG
start_server() {
	local name=$1 dir=$2 port=''
	shift 2
	SLOG=$T/srv-$name.log
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$dir" "$@" 2>"$SLOG" &
	SPID=$!
	port=$(serve_port "$SLOG" "$SPID")
	[ -n "$port" ] || { fail "setup: start $name" "$(head -c 400 "$SLOG")"; exit 0; }
	SURL=http://127.0.0.1:$port
	SPORT=$port
}

# post NAME WANT_CODE QUERY FILE [REGEX]: POST FILE, check the code (and the
# JSON error against REGEX)
post() {
	local name=$1 want=$2 q=$3 f=$4 re=${5:-}
	local code
	code=$(curl -s -o "$T/.body" -w '%{http_code}' --data-binary @"$f" "$SURL/api/0/profiles?$q")
	if [ "$code" != "$want" ]; then
		fail "$name" "code $code, want $want: $(head -c 300 "$T/.body")"
	elif [ -n "$re" ] && ! grep -Eq -- "$re" "$T/.body"; then
		fail "$name" "body does not match /$re/: $(head -c 300 "$T/.body")"
	elif [ "$want" != 200 ] && ! jq -e ".code == $want and (.error | type == \"string\")" "$T/.body" >/dev/null 2>&1; then
		fail "$name" "not the JSON error envelope: $(head -c 300 "$T/.body")"
	else
		ok "$name"
	fi
}

# get NAME WANT_CODE PATH [REGEX]
get() {
	local name=$1 want=$2 path=$3 re=${4:-}
	local code
	code=$(curl -s -g -o "$T/.body" -w '%{http_code}' "$SURL$path")
	if [ "$code" != "$want" ]; then
		fail "$name" "code $code, want $want: $(head -c 300 "$T/.body")"
	elif [ -n "$re" ] && ! grep -Eq -- "$re" "$T/.body"; then
		fail "$name" "body does not match /$re/: $(head -c 300 "$T/.body")"
	else
		ok "$name"
	fi
}

# raw NAME WANT_CODE REQUEST_FILE: send the bytes as they are, read the answer
raw() {
	local name=$1 want=$2 req=$3
	python3 - "$SPORT" "$req" >"$T/.raw" 2>&1 <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(open(sys.argv[2], "rb").read())
data = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
        if b"\r\n\r\n" in data:
            head, _, body = data.partition(b"\r\n\r\n")
            cl = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if cl and len(body) >= int(cl[0].split(b":")[1]):
                break
except socket.timeout:
    pass
sys.stdout.write(data.decode("latin-1"))
EOF
	local status ctype
	status=$(head -1 "$T/.raw" | awk '{print $2}')
	ctype=$(grep -i '^content-type:' "$T/.raw" | head -1 | tr -d '\r')
	if [ "$status" != "$want" ]; then
		fail "$name" "status '$status', want $want: $(head -c 300 "$T/.raw")"
	elif ! echo "$ctype" | grep -qi 'application/json'; then
		fail "$name" "not JSON ($ctype): $(head -c 300 "$T/.raw")"
	else
		ok "$name"
	fi
}

# ---- profiles --------------------------------------------------------------------------------

C=$T/cap
mkdir -p "$C"
if ! tests/e2e/capture.sh "$GOAPP" "$C" 1 >"$T/capture.log" 2>&1; then
	fail "setup: capture goapp profiles" "$(tail -5 "$T/capture.log")"
	exit 0
fi
ok "setup: captured the goapp's profiles"

start_server main "$T/data"

# ---- 1. declared type ---------------------------------------------------------------------------
post "cpu profile declared heap: 400 naming both" 400 "service=auth&type=heap" "$C/cpu.pb.gz" \
	'declared type \\"heap\\" but the profile is a cpu profile'
post "heap profile declared cpu: 400" 400 "service=auth&type=cpu" "$C/heap.pb.gz" 'is a heap profile'
post "goroutine profile declared mutex: 400" 400 "service=auth&type=mutex" "$C/goroutine.pb.gz" 'goroutine profile'
post "cpu profile without a type: stored" 200 "service=auth" "$C/cpu.pb.gz"
expect "its type was inferred: cpu" cpu "$(jq -r .body.type "$T/.body")"
post "heap profile without a type: stored as heap" 200 "service=auth" "$C/heap.pb.gz"
expect "its type was inferred: heap" heap "$(jq -r .body.type "$T/.body")"
post "heap profile declared heap: stored" 200 "service=auth&type=heap" "$C/heap.pb.gz"
get "heap merge of the service works" 200 "/api/0/profiles/merge?service=auth&type=heap&from=now-1h&to=now%2B1m"
go_pprof -top "$T/.body" >"$T/top.txt" 2>&1 && grep -q "inuse_space" "$T/top.txt"
check "the merge is a heap profile go tool pprof reads" grep -q "inuse_space" "$T/top.txt"
get "fleet top of heap works" 200 "/api/1/top?query=heap&from=now-1h&to=now%2B1m"

# ---- 2. parameters ------------------------------------------------------------------------------
post "service with %00: 400" 400 "service=a%00b&type=cpu" "$C/cpu.pb.gz" 'parameter \\"service\\" contains a NUL byte'
post "label value with %00: 400" 400 "service=a&type=cpu&labels=k=v%2500x" "$C/cpu.pb.gz" ''
post "labels with a raw NUL: 400" 400 "service=a&type=cpu&labels=k%00=v" "$C/cpu.pb.gz" 'NUL byte'
post "service with a newline and an escape sequence: 400" 400 "service=a%0A%1B%5B31mb&type=cpu" "$C/cpu.pb.gz" 'control characters .byte 0x0a at 1.'
post "service with a tab: 400" 400 "service=a%09b&type=cpu" "$C/cpu.pb.gz" 'control characters'
post "service not UTF-8: 400" 400 "service=a%FFb&type=cpu" "$C/cpu.pb.gz" 'not valid UTF-8'
post "label value not UTF-8: 400" 400 "service=a&type=cpu&labels=k=%C3%28" "$C/cpu.pb.gz" 'not valid UTF-8'
post "service in UTF-8 (café): stored" 200 "service=caf%C3%A9&type=cpu" "$C/cpu.pb.gz"
get "... and listed" 200 "/api/0/services" 'café'
get "query with %00: 400" 400 "/api/0/profiles?service=auth%00x&type=cpu&from=now-1h&to=now" 'NUL byte'
# MHD decodes the path to a C string: %00 would end it early (a path no proxy rule names)
get "path with %00 (/api/0/services%00.png): 400, not the route before it" 400 "/api/0/services%00.png" 'path contains a NUL byte'
code=$(curl -s -o "$T/.body" -w '%{http_code}' --data-binary @"$C/cpu.pb.gz" "$SURL/api/0/profiles%00/x?service=nulpath&type=cpu")
expect "POST /api/0/profiles%00/x: 400" 400 "$code"
slashes=$(printf '%%2F%.0s' $(seq 800))
get "path with %00 after 2 KB of %2F (past the logged URI): 400" 400 "/api/0/services$slashes%00" 'NUL byte'
get "... nothing stored under the %00 path" 404 "/api/0/profiles?service=nulpath&from=now-1h&to=now%2B1m"
post "created_at past 2106: 400" 400 "service=t&type=cpu&created_at=2106-02-07T06:28:16Z" "$C/cpu.pb.gz" \
	'after 2106-02-07T06:28:15Z'
post "created_at in 2262: 400" 400 "service=t&type=cpu&created_at=2262-04-11T00:00:00Z" "$C/cpu.pb.gz" 'after 2106'
post "created_at before 1970: 400" 400 "service=t&type=cpu&created_at=-100" "$C/cpu.pb.gz" ''
get "nothing of those was stored" 200 "/api/0/services"
if jq -e '.body | index("t") or index("a") or index("a\u0000b")' "$T/.body" >/dev/null; then
	fail "refused uploads stored nothing" "$(cat "$T/.body")"
else
	ok "refused uploads stored nothing"
fi
get "query to past 2106: 400" 400 "/api/0/profiles?service=auth&from=now-1h&to=2200-01-01T00:00:00Z" 'after 2106'
get "API v1 from past 2106: 400" 400 "/api/1/profiles?query=cpu&from=2107-01-01T00:00:00Z&to=2107-01-02T00:00:00Z" \
	'after 2106'

# ---- 3. framing ---------------------------------------------------------------------------------
body=$C/cpu.pb.gz
n=$(stat -c %s "$body")
{
	printf 'POST /api/0/profiles?service=smug&type=cpu HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nContent-Length: 5\r\n\r\n' "$n"
	cat "$body"
} >"$T/req1"
raw "two different Content-Length headers: 400 JSON" 400 "$T/req1"
{
	printf 'POST /api/0/profiles?service=smug&type=cpu HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nContent-Length: %d\r\n\r\n' "$n" "$n"
	cat "$body"
} >"$T/req2"
raw "two equal Content-Length headers: 400 JSON" 400 "$T/req2"
{
	printf 'POST /api/0/profiles?service=smug&type=cpu HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n'
	printf '%x\r\n' "$n"
	cat "$body"
	printf '\r\n0\r\n\r\n'
} >"$T/req3"
raw "Content-Length with chunking: 400 JSON" 400 "$T/req3"
get "no smuggled profile was stored" 404 "/api/0/profiles?service=smug&from=now-1h&to=now%2B1m"
long=$(head -c 20000 /dev/zero | tr '\0' a)
printf 'GET /api/0/services?x=%s HTTP/1.1\r\nHost: x\r\n\r\n' "$long" >"$T/req4"
raw "URI of 20 KB: 414 JSON" 414 "$T/req4"
{
	printf 'GET /api/0/services HTTP/1.1\r\nHost: x\r\n'
	for i in $(seq 1 20); do printf 'X-Filler-%d: %s\r\n' "$i" "${long:0:2000}"; done
	printf '\r\n'
} >"$T/req5"
raw "headers of 40 KB: 431 JSON" 431 "$T/req5"
get "the server still answers" 200 "/api/0/services"
printf 'GET http://localhost:%s/api/0/version HTTP/1.1\r\nHost: localhost\r\n\r\n' "$SPORT" >"$T/req7"
raw "a request line in absolute form (RFC 9112 3.2.2): served" 200 "$T/req7"
check "... as its path" grep -q '"version"' "$T/.raw"
# query parameters: over 512, a 413 JSON. Past ~950 libmicrohttpd used to run out
# of the connection's memory before profd saw the request and the client got no
# answer at all (the request stayed "in flight" until the connection closed): now
# every count, up to what the 16 KiB URI cap allows, gets its 413
printf 'GET /api/0/services?%s HTTP/1.1\r\nHost: x\r\n\r\n' "$(printf 'x=1&%.0s' $(seq 1 599))y=1" >"$T/req6"
raw "600 query parameters: 413 JSON" 413 "$T/req6"
check "... naming the limit" grep -q '600 query parameters: over the limit of 512' "$T/.raw"
for n in 1200 4000; do
	printf 'GET /api/0/services?%s HTTP/1.1\r\nHost: x\r\n\r\n' "$(printf 'x=1&%.0s' $(seq 2 $n))y=1" >"$T/req6"
	raw "$n query parameters: 413 JSON" 413 "$T/req6"
	check "... naming the count and the limit" grep -q "bad request: $n query parameters: over the limit of 512" "$T/.raw"
done
for ((k = 0; k < 100; k++)); do # (the server's thread finishes a request a moment after its answer)
	curl -s "$SURL/metrics" | grep -q '^profd_http_requests_in_flight 1$' && break
	sleep 0.1
done
get "... none left in flight (only this /metrics)" 200 "/metrics" '^profd_http_requests_in_flight 1$'
check "... each logged as a 413" test "$(grep -c 'uri="/api/0/services?x=1&x=1.* code=413 ' "$SLOG")" = 3
get "the server still answers" 200 "/api/0/services"
# an upload with a bad parameter and no Expect: 100-continue: the client is already
# sending its body, so the 400 comes after it (answered before, the unread body ends
# in a reset: a Go client reported "broken pipe", not the 400), and the connection
# stays usable
noexpect() { # QUERY BYTES: POST BYTES zeros without Expect, then GET /api/0/version on the connection
	python3 "$ROOT/tests/e2e/rawpost.py" "$SPORT" "$1" "$2" >"$T/.noexpect" 2>&1
}
noexpect "type=cpu" $((4 << 20))
if grep -q 'HTTP/1.1 400' "$T/.noexpect" && grep -q 'missing \\"service\\"' "$T/.noexpect" && grep -q 'HTTP/1.1 200' "$T/.noexpect" && ! grep -q 'failed' "$T/.noexpect"; then
	ok "4 MiB upload without service and without Expect: the 400 after the body, then the next request on the connection"
else
	fail "4 MiB upload without service and without Expect" "$(head -c 500 "$T/.noexpect")"
fi
# the same for a body over --max-body (32 MiB): the 413, not a reset (a Go client, the
# profefe agent among them, reported "broken pipe" and retried)
noexpect "service=big&type=cpu" $((33 << 20))
if grep -q 'HTTP/1.1 413' "$T/.noexpect" && grep -q 'max-body' "$T/.noexpect" && grep -q 'HTTP/1.1 200' "$T/.noexpect" && ! grep -q 'failed' "$T/.noexpect"; then
	ok "33 MiB upload without Expect: the 413 after the body, then the next request on the connection"
else
	fail "33 MiB upload without Expect: the 413" "$(head -c 500 "$T/.noexpect")"
fi

# the same for a refusal from the request line: 600 query parameters on an upload
noexpect "service=x&type=cpu$(printf '&x=1%.0s' $(seq 1 600))" $((1 << 20))
if grep -q 'HTTP/1.1 413' "$T/.noexpect" && grep -q '602 query parameters' "$T/.noexpect" && grep -q 'HTTP/1.1 200' "$T/.noexpect" && ! grep -q 'failed' "$T/.noexpect"; then
	ok "1 MiB upload of 602 query parameters without Expect: the 413 after the body, then the next request"
else
	fail "1 MiB upload of 602 query parameters without Expect: the 413" "$(head -c 500 "$T/.noexpect")"
fi

# ---- 4. memory -----------------------------------------------------------------------------------
python3 "$ROOT/tests/tools/tiny_samples.py" "$T/tiny.pb.gz"
tsz=$(stat -c %s "$T/tiny.pb.gz")
t0=$(date +%s%N)
post "8 M tiny samples in $tsz bytes of gzip: 413 (memory)" 413 "service=bomb&type=cpu" "$T/tiny.pb.gz" 'memory'
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
echo "# 8 M-sample refusal took $ms ms"
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$SPID/status")
echo "# collector peak RSS after it: $((hwm / 1024)) MiB"
if [ "$hwm" -lt $((400 * 1024)) ]; then ok "collector peak RSS stays under 400 MiB ($((hwm / 1024)) MiB)"; else fail "collector peak RSS stays under 400 MiB" "$((hwm / 1024)) MiB"; fi
get "metrics count the refusal" 200 "/metrics" 'profd_profiles_rejected_total\{reason="too_large"\} [1-9]'
post "a real profile after it: stored" 200 "service=auth&type=cpu" "$C/cpu.pb.gz"

# the shared budget: a body that would pass it is a 503 with Retry-After; -q
# still logs the error
kill "$SPID"
wait "$SPID" 2>/dev/null
start_server budget "$T/data2" -q --max-ingest-memory 2MiB --max-upload-memory 1MiB
head -c 3000000 /dev/urandom >"$T/big.bin"
code=$(curl -s -D "$T/.hdr" -o "$T/.body" -w '%{http_code}' --data-binary @"$T/big.bin" "$SURL/api/0/profiles?service=b&type=cpu")
expect "upload over --max-ingest-memory: 503" 503 "$code"
check "... with Retry-After" grep -qi '^retry-after: [0-9]' "$T/.hdr"
check "... as the JSON envelope naming the flag" grep -q 'max-ingest-memory' "$T/.body"
post "a normal upload right after: stored" 200 "service=b&type=cpu" "$C/cpu.pb.gz"
id=$(jq -r .body.id "$T/.body")
sleep 0.2
check "-q: the 503 is still logged as an error" grep -q 'level=error code=503' "$SLOG"
if grep -q 'method=POST' "$SLOG"; then fail "-q: no access lines" "$(grep -m1 method= "$SLOG")"; else ok "-q: no access lines"; fi
get "the acknowledged profile is there" 200 "/api/0/profiles/$id"
kill "$SPID"
wait "$SPID" 2>/dev/null
no_sanitizer "no sanitizer reports" "$T"/srv-*.log
