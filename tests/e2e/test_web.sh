#!/usr/bin/env bash
# test_web.sh — how `profd serve` serves the web UI's files (docs/ui.md
# "Serving"); the page itself is tested in a real browser by test_ui.sh.
#   1. every file of web/ is served from the binary (no file is read at run
#      time: the server runs from another directory), byte for byte, at /
#      (index.html) and /ui/FILE, gzip'd when asked (same bytes once
#      inflated), with its Content-Type, the UI's CSP, nosniff, an ETag
#      (If-None-Match: 304), HEAD without a body, 405 for POST; names that
#      could leave the directory, hidden and unknown files are 404 JSON;
#   2. --tokens: the page and its files need no token, the API still does
#      and its answers are Cache-Control: no-store;
#      a page's fetch (Sec-Fetch-Mode: cors) is not offered Basic (the
#      browser's own password dialog would cover the page's token form),
#      other clients are;
#   3. --web-prefix /profd: PREFIX is redirected to PREFIX/ with its query,
#      index.html gets <base href="/profd/">, the API answers under the
#      prefix and without it; a bad prefix is a usage error (exit 2);
#   4. --web-dir: files read on every request (an edit shows at once);
#      --no-ui: GET / is a 404; /metrics counts route="ui";
#   5. the API the page calls, with profiles an uploader made hostile
#      (tests/e2e/hostile_prof.py): a diff of 40,000 locations that differ
#      by function only answers at once; a NUL in a name does not cut a
#      folded answer short.
# Run: BUILD=build bash tests/e2e/test_web.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_built 1 make "$PROFD"
need_cmds 1 curl python3
kill_started_on_exit

WEB=$ROOT/web
mapfile -t FILES < <(cd "$WEB" && find . -maxdepth 2 -type f \( -name '*.html' -o -name '*.css' -o -name '*.js' -o -name '*.svg' -o -name '*.png' \) | sed 's|^\./||' | grep -E '^[^/]+$|^[^/]+/[^/]+\.(js|css)$' | sort)
CSP="default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; base-uri 'self'; form-action 'none'; frame-ancestors 'none'"

# start NAME ARGS...: profd serve in $T/run-NAME (not the source tree); sets URL
start() {
	local name=$1
	shift
	mkdir -p "$T/run-$name"
	(cd "$T/run-$name" && exec "$PROFD" serve --addr 127.0.0.1:0 --data-dir data "$@") 2>"$T/serve-$name.log" &
	local pid=$!
	local port
	port=$(serve_port "$T/serve-$name.log" "$pid")
	if [ -z "$port" ]; then
		fail "setup: serve $name" "$(head -c 600 "$T/serve-$name.log")"
		exit 1
	fi
	URL=http://127.0.0.1:$port
}

# hdr FILE NAME: the value of header NAME in a curl -D dump
hdr() { tr -d '\r' <"$1" | sed -n "s/^$2: //Ip" | tail -1; }

# ---- 1. the embedded files ---------------------------------------------------------------
if [ ! -f "$WEB/index.html" ]; then
	fail "web/index.html exists" "no web/index.html in the source tree"
	exit 1
fi
start plain
bad=
for f in "${FILES[@]}"; do
	u=$URL/ui/$f
	[ "$f" = index.html ] && u=$URL/
	code=$(curl -s -D "$T/h" -o "$T/body" -w '%{http_code}' "$u")
	[ "$code" = 200 ] || { bad+="$f: $code; "; continue; }
	cmp -s "$T/body" "$WEB/$f" || bad+="$f: other bytes; "
	case $f in
	*.html) want='text/html; charset=utf-8' ;; *.js) want='text/javascript; charset=utf-8' ;;
	*.css) want='text/css; charset=utf-8' ;; *.svg) want='image/svg+xml' ;; *.png) want='image/png' ;;
	esac
	[ "$(hdr "$T/h" Content-Type)" = "$want" ] || bad+="$f: type $(hdr "$T/h" Content-Type); "
	[ "$(hdr "$T/h" Content-Security-Policy)" = "$CSP" ] || bad+="$f: csp; "
	[ "$(hdr "$T/h" X-Content-Type-Options)" = nosniff ] || bad+="$f: nosniff; "
	# gzip'd on request, the same bytes inflated
	curl -s -H 'Accept-Encoding: gzip' -D "$T/hz" -o "$T/body.gz" "$u"
	[ "$(hdr "$T/hz" Content-Encoding)" = gzip ] || bad+="$f: not gzip'd; "
	gzip -dc <"$T/body.gz" | cmp -s - "$WEB/$f" || bad+="$f: gzip differs; "
	# revalidation
	etag=$(hdr "$T/h" ETag)
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$u")
	[ -n "$etag" ] && [ "$code" = 304 ] || bad+="$f: etag '$etag' -> $code; "
done
if [ -z "$bad" ] && [ "${#FILES[@]}" -ge 2 ]; then ok "web: all ${#FILES[@]} files of web/ served from the binary, byte for byte, gzip, types, CSP, ETag"
else fail "web: files served from the binary" "${bad:-only ${#FILES[@]} files}"; fi

code=$(curl -s -o "$T/b" -w '%{http_code} %{size_download}' -I "$URL/")
expect "web: HEAD / is 200 without a body" "200 0" "$code"
code=$(curl -s -o "$T/b" -w '%{http_code}' -X POST "$URL/")
expect "web: POST / is 405" 405 "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Accept-Encoding: gzip;q=0' -D "$T/h" "$URL/")
if [ "$code" = 200 ] && [ -z "$(hdr "$T/h" Content-Encoding)" ]; then ok "web: gzip;q=0 is honoured"
else fail "web: gzip;q=0 is honoured" "$code $(hdr "$T/h" Content-Encoding)"; fi
bad=
for p in '/ui/%2e%2e/Makefile' '/ui/..%2fMakefile' '/ui/.hidden' '/ui/missing.js' '/ui/' '/ui/views/../index.html' '/ui//index.html'; do
	code=$(curl -s --path-as-is -o "$T/b" -w '%{http_code} %{content_type}' "$URL$p")
	[ "$code" = "404 application/json" ] || bad+="$p: $code; "
done
if [ -z "$bad" ]; then ok "web: escaping, hidden and unknown names are 404 JSON"; else fail "web: bad names" "$bad"; fi

# ---- 2. tokens ------------------------------------------------------------------------------
TOK=0123456789abcdef0123456789abcdef
printf '%s read ui\n' "$TOK" >"$T/tokens"
chmod 600 "$T/tokens"
start tok --tokens "$T/tokens"
codes=$(for u in / /ui/"${FILES[1]}"; do curl -s -o /dev/null -w '%{http_code} ' "$URL$u"; done)
expect "web: tokens on: the page and its files need no token" "200 200 " "$codes"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/1/types")
expect "web: tokens on: the API still needs one" 401 "$code"
code=$(curl -s -o /dev/null -D "$T/h" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$URL/api/1/types")
expect "web: tokens on: the API with the read token" 200 "$code"
expect "web: tokens on: what it answers is kept by no cache" no-store "$(hdr "$T/h" Cache-Control)"
curl -s -o /dev/null -D "$T/h" "$URL/"
expect "web: the page is revalidated, not no-store" no-cache "$(hdr "$T/h" Cache-Control)"
curl -s -o /dev/null -D "$T/h" -H 'Sec-Fetch-Mode: cors' "$URL/api/1/types"
expect "web: a page's fetch is offered Bearer only (no browser password dialog)" 'Bearer realm="profd"' "$(hdr "$T/h" WWW-Authenticate)"
curl -s -o /dev/null -D "$T/h" "$URL/api/1/types"
expect "web: other clients are offered Basic too" 'Bearer realm="profd", Basic realm="profd"' "$(hdr "$T/h" WWW-Authenticate)"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/")
expect "web: tokens on: POST / is still refused" 401 "$code"

# ---- 3. prefix ------------------------------------------------------------------------------
start pfx --web-prefix /profd
out=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$URL/profd?query=cpu%7B%7D&from=now-6h")
expect "web: PREFIX is redirected to PREFIX/ with its query" "308 $URL/profd/?query=cpu%7B%7D&from=now-6h" "$out"
curl -s "$URL/profd/" >"$T/idx"
if grep -q '<base href="/profd/">' "$T/idx" && [ "$(wc -c <"$T/idx")" -gt "$(wc -c <"$WEB/index.html")" ]; then ok "web: index.html under a prefix has <base href=\"/profd/\">"
else fail "web: <base> under a prefix" "$(head -c 300 "$T/idx")"; fi
curl -s -H 'Accept-Encoding: gzip' "$URL/profd/" | gzip -dc | cmp -s - "$T/idx"
check "web: its gzip is the same page" test $? = 0
codes=$(for u in /profd/api/0/version /api/0/version /profd/ui/"${FILES[1]}" /ui/"${FILES[1]}" /profdx/ /profd/nope; do curl -s -o /dev/null -w '%{http_code} ' "$URL$u"; done)
expect "web: under the prefix and without it (an ingress that strips)" "200 200 200 200 404 404 " "$codes"
for p in profd /profd/ /a/../b '/a b' ; do
	expect_exit "web: --web-prefix '$p' is a usage error" 2 'web-prefix' "$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/x" --web-prefix "$p"
done

# ---- 4. --web-dir, --no-ui, metrics -------------------------------------------------------------
mkdir -p "$T/wd"
cp "$WEB/index.html" "$T/wd/"
start dir --web-dir "$T/wd"
curl -s "$URL/" | cmp -s - "$T/wd/index.html"
check "web: --web-dir serves the directory's file" test $? = 0
echo '<!-- edited -->' >>"$T/wd/index.html"
if curl -s "$URL/" | grep -q 'edited'; then ok "web: --web-dir: an edit shows at the next request"; else fail "web: --web-dir edit" "not seen"; fi
expect_exit "web: --web-dir that is missing is a usage error" 2 'web-dir' "$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/x" --web-dir "$T/none"
expect_exit "web: --no-ui with --web-dir is a usage error" 2 'no-ui' "$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/x" --no-ui --web-dir "$T/wd"
start noui --no-ui
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/")
expect "web: --no-ui: GET / is 404" 404 "$code"
URL0=$URL
start m
for _ in 1 2 3; do curl -s -o /dev/null "$URL/"; done
n=$(curl -s "$URL/metrics" | sed -n 's/^profd_http_requests_total{route="ui",code="200"} \([0-9]*\)$/\1/p')
expect "web: /metrics counts the page's requests (route=\"ui\")" 3 "$n"
: "$URL0"

# ---- 5. the API the page calls, with profiles an uploader chose ------------------------------
start hostile
python3 "$ROOT/tests/e2e/hostile_prof.py" wide "$T/wide.pb.gz" 40000
code=$(curl -s -o "$T/b" -w '%{http_code}' --data-binary @"$T/wide.pb.gz" "$URL/api/0/profiles?service=wide&type=cpu")
expect "web: POST a profile of 40,000 functions at one address and line" 200 "$code"
# the Diff view's request: the merger once chained all such locations in one
# hash bucket (ten minutes of a worker's CPU for 60,000)
q=$(printf 'cpu{service="wide"}' | python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.stdin.read(), safe=""))')
out=$(curl -s -o "$T/b" --max-time 10 -w '%{http_code}' "$URL/api/1/diff?base=$q&target=$q&format=top&n=10")
expect "web: the diff of it answers at once (not quadratic in its locations)" 200 "$out"
python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import hostile_prof as h
open(sys.argv[2], "wb").write(h.build([(["main", "a\0b"], 1), (["main", "zz"], 2)]))' "$ROOT/tests/e2e" "$T/nul.pb.gz"
curl -s -o /dev/null --data-binary @"$T/nul.pb.gz" "$URL/api/0/profiles?service=nul&type=cpu"
curl -s "$URL/api/1/merge?query=cpu%7Bservice%3D%22nul%22%7D&format=folded" >"$T/folded"
expect "web: a NUL in a function name does not cut the folded answer short" "$(printf 'main;a:b 1\nmain;zz 2')" "$(cat "$T/folded")"
# a range all before the retention (2001, the UI's absolute from/to) is empty,
# as any range without profiles: the top of nothing, a diff's 404 saying why
out=$(for u in "top?query=cpu&from=1000000000&to=1000003600" "diff?base=cpu&target=cpu&from=1000000000&to=1000003600&format=top"; do
	curl -s -o "$T/b" -w '%{http_code} ' "$URL/api/1/$u"; grep -o '"error":"[^"]*' "$T/b"; done)
expect "web: a range older than the retention is an empty range, not \"from\" after \"to\"" "200 404 \"error\":\"base: no profiles match cpu: \\" "$(echo $out)"
no_sanitizer "web: no sanitizer report" "$T"/serve-*.log
