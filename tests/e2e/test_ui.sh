#!/usr/bin/env bash
# test_ui.sh — the web UI (web/) in a real browser: headless Chromium driven
# by playwright-core (tests/ui/, a test-only node package) against a real
# `profd serve` holding real profiles.
#   1. capture real profiles from three goapp workloads (auth, search,
#      ingest), two captures each, POST them through API v0 as two versions
#      (version=1.0 and 1.1, five minutes apart: a rollout; heap too);
#   2. the expected top table: `go tool pprof -top` of Go's merge
#      (`go tool pprof -proto`) of the six CPU files, raw values;
#   3. tests/ui/ui_test.mjs: every view loads without a console error or a
#      failed request; the top table equals go tool pprof's; the flame graph
#      is drawn, hover, zoom, search, sandwich, "other"; diff colours; the
#      fleet and its series; regressions (= the API's, a row opens its diff);
#      profiles (open one by id, download, diff two); a copied
#      URL reproduces the view; back/forward; themes; a phone width;
#   4. the same server with --tokens: the page asks for a read token, works
#      with it, and shows the API's message without one or with a bad one;
#   5. the same server with --web-prefix /profd: the page under /profd/ makes
#      every request under /profd/;
#   6. another store, of profiles whose service names, labels, function and
#      file names are markup, script, quotes, U+2028, a newline, invalid
#      UTF-8 (tests/e2e/hostile_prof.py): every view shows them as text,
#      none runs, and the fleet's service buttons escape them (a service
#      named with a control character is refused at upload).
# Screenshots of every view go to ${UI_SHOTS:-$BUILD/ui-shots} (UI_DOCS=1 also
# copies them into docs/ui/). Without chromium or npm: one skipped check.
# Run: BUILD=build bash tests/e2e/test_ui.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

TOPARGS=(-top -nodecount=100000 -nodefraction=0 -edgefraction=0 -unit=ns) # -unit=ns: exact integers
UI=$ROOT/tests/ui
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
C=$T/cap
WL=(auth search ingest)

if [ ! -x "$CHROMIUM" ]; then
	ok "ui # skip no chromium at $CHROMIUM (apt-get install chromium)"
	exit 0
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	ok "ui # skip no node/npm (apt-get install nodejs npm)"
	exit 0
fi
if [ ! -d "$UI/node_modules/playwright-core" ]; then
	if ! npm ci --prefix "$UI" --no-audit --no-fund >"$T/npm.log" 2>&1; then
		fail "setup: npm ci tests/ui" "$(tail -c 600 "$T/npm.log")"
		exit 1
	fi
fi
go_bins_from_build GOAPP # Go programs, not sanitized
need_built 1 "make && make build/goapp" "$PROFD" "$GOAPP"
need_cmds 1 go curl jq

SPID=
stop_serve() { [ -n "$SPID" ] && kill -KILL "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null; SPID=; }
eval "set -- $(trap -p EXIT)"
# shellcheck disable=SC2064 # lib.sh's command is expanded now, on purpose
trap "stop_serve; ${3:-}" EXIT

# serve ARGS...: profd serve on a free port (its UI: built in, or the
# source tree's web/ when the binary's copy is stale or UI_WEB_DIR=1); sets BASE
WEBARGS=()
serve() {
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "${DATA:-$T/data}" --retention 0 "${WEBARGS[@]}" "$@" 2>>"$T/serve.log" &
	SPID=$!
	local port
	port=$(serve_port "$T/serve.log" "$SPID")
	if [ -z "$port" ]; then
		fail "setup: profd serve $*" "no 'listening on port' line: $(tail -c 600 "$T/serve.log")"
		exit 1
	fi
	BASE=http://127.0.0.1:$port
	: >"$T/serve.log" # the next serve's port line is the only one
}

# ---- 1. capture, serve, post --------------------------------------------------------------

declare -A cap_pid
for w in "${WL[@]}"; do
	for i in 1 2; do
		GOAPP_ARGS="-workload $w -service $w" "$ROOT/tests/e2e/capture.sh" "$GOAPP" "$C/$w$i" 2 \
			>"$T/capture-$w$i.log" 2>&1 &
		cap_pid[$w$i]=$!
	done
done
[ "${UI_WEB_DIR:-0}" = 1 ] && WEBARGS=(--web-dir "$ROOT/web")
serve
if [ ${#WEBARGS[@]} -eq 0 ]; then
	stale=
	for f in index.html app.js flame.js style.css; do
		u=ui/$f
		[ "$f" = index.html ] && u=
		curl -sS "$BASE/$u" -o "$T/served" 2>/dev/null
		cmp -s "$T/served" "$ROOT/web/$f" || stale="$stale $f"
	done
	if [ -n "$stale" ]; then # the binary's copy of web/ is older than the tree: test the tree
		echo "# the UI built into $PROFD differs from web/ ($stale): serving web/ with --web-dir"
		stop_serve
		WEBARGS=(--web-dir "$ROOT/web")
		serve
	fi
fi
ok "setup: profd serve at $BASE (UI: ${WEBARGS[*]:-built in})"
wait_captures || exit 1
cp -r "$C" "$T/cap.used" # what is uploaded and what go tool pprof merges: the same bytes
C=$T/cap.used

post() { # post FILE SERVICE TYPE LABELS CREATED_AT
	local code
	code=$(curl -sS -o "$T/post.out" -w '%{http_code}' --data-binary @"$1" \
		"$BASE/api/0/profiles?service=$2&type=$3&labels=$4&created_at=$5")
	[ "$code" = 200 ] || { echo "# POST $1 $2 $3: $code $(head -c 300 "$T/post.out")"; return 1; }
}
# version 1.0 ten minutes ago, 1.1 five minutes later: a rollout per service
# (the regressions view), both inside the UI's default range (the last hour)
now=$(date +%s)
AT=($((now - 600)) $((now - 300)))
postfail=
for w in "${WL[@]}"; do
	for i in 1 2; do
		post "$C/$w$i/cpu.pb.gz" "$w" cpu "env=prod,version=1.$((i - 1))" "${AT[i - 1]}" || postfail=1
	done
done
for i in 1 2; do post "$C/auth$i/heap.pb.gz" auth heap "env=prod,version=1.$((i - 1))" "${AT[i - 1]}" || postfail=1; done
if [ -n "$postfail" ]; then
	fail "setup: POST" "see above"
	exit 1
fi
ok "setup: POST 6 cpu profiles (auth, search, ingest x version 1.0 at now-10m, 1.1 at now-5m) + 2 heap"

# ---- 2. what go tool pprof says ------------------------------------------------------------

go tool pprof -proto "$C"/*/cpu.pb.gz >"$T/all.pb.gz" 2>"$T/merge.err"
go tool pprof "${TOPARGS[@]}" "$T/all.pb.gz" 2>"$T/pp.err" |
	awk '/^ *flat  *flat%/ { on = 1; next }
	     on { name = $6; for (i = 7; i <= NF; i++) name = name " " $i
	          sub(/ \((partial-)?inline\)$/, "", name)
	          f = $1; c = $4; sub(/[a-zA-Z]+$/, "", f); sub(/[a-zA-Z]+$/, "", c)
	          print f "\t" c "\t" name }' >"$T/rows.tsv"
total=$(go tool pprof "${TOPARGS[@]}" "$T/all.pb.gz" 2>/dev/null |
	sed -n 's/^Showing nodes accounting for .* of \([0-9]*\)[a-zA-Z]* total$/\1/p')
if [ ! -s "$T/rows.tsv" ] || [ -z "$total" ]; then
	fail "setup: go tool pprof -top of the merged files" "$(head -c 400 "$T/merge.err" "$T/pp.err")"
	exit 1
fi
jq -R -s --argjson total "$total" \
	'{total: $total, rows: [split("\n")[] | select(length > 0) | split("\t") | {flat: (.[0] | tonumber), cum: (.[1] | tonumber), name: .[2]}]}' \
	"$T/rows.tsv" >"$T/expect.json"
ok "setup: go tool pprof -top of Go's merge: $(jq '.rows | length' "$T/expect.json") functions, total $total"

# ---- 3, 4. the browser ---------------------------------------------------------------------

SHOTS=${UI_SHOTS:-$ROOT/$BUILD/ui-shots} # kept after the run (CI keeps them as files)
mkdir -p "$SHOTS"
READ=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
ADMIN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '# test tokens\n%s read ui-reader\n%s read,write,admin ops\n' "$READ" "$ADMIN" >"$T/tokens"
chmod 600 "$T/tokens"

run_node() { # run_node PHASE BASE: the node test's TAP lines
	jq -n --arg base "$2" --arg phase "$1" --arg shots "$SHOTS" --arg chromium "$CHROMIUM" --arg read "$READ" \
		--slurpfile expect "$T/expect.json" \
		'{base: $base, phase: $phase, shots: $shots, chromium: $chromium, readToken: $read, expect: $expect[0]}' >"$T/ui-$1.json"
	node "$UI/ui_test.mjs" "$T/ui-$1.json" 2>"$T/node-$1.err"
	local rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
		fail "ui: $1: the node test ran" "exit $rc: $(tail -c 800 "$T/node-$1.err")"
	fi
}
run_node open "$BASE"
stop_serve
serve --tokens "$T/tokens"
ok "setup: profd serve --tokens at $BASE"
run_node tokens "$BASE"
stop_serve
serve --web-prefix /profd
ok "setup: profd serve --web-prefix /profd at $BASE"
run_node prefix "$BASE"
stop_serve

# ---- 6. hostile strings --------------------------------------------------------------------
X="<img src=x onerror=\"window.__xss=1;document.title='XSS'\">"
python3 "$ROOT/tests/e2e/hostile_prof.py" names "$T/hostile.pb.gz" "$X" '</script><script>window.__xss=2</script>' \
	'javascript:window.__xss=3' $'u\u2028v"\'w' "$(printf 'L%.0s' {1..5000})" $'bad\xff\xfeutf8'
DATA=$T/hostile-data serve
enc() { jq -rn --arg s "$1" '$s | @uri'; }
postfail=
for v in 1 2; do # a rollout (regressions) of a service named with markup
	post "$T/hostile.pb.gz" "$(enc "$X")" cpu "$(enc "version=$v$X,env=javascript:window.__xss=4")" "${AT[v - 1]}" || postfail=1
done
# a service with a control character is refused by the store (8eadb6f); one
# with a quote and a backslash is what the fleet's selector must escape
if post "$T/hostile.pb.gz" "$(enc $'nl\nsvc')" cpu "$(enc 'version=1')" "${AT[1]}" >/dev/null; then
	fail "setup: a service named with a newline is refused" "stored"
else
	ok "setup: a service named with a newline is refused ($(head -c 120 "$T/post.out"))"
fi
post "$T/hostile.pb.gz" "$(enc 'q"uo\te')" cpu "$(enc 'version=1')" "${AT[1]}" || postfail=1
post "$T/hostile.pb.gz" "$(enc '../../x y/z')" cpu "$(enc 'version=1')" "${AT[1]}" || postfail=1
if [ -n "$postfail" ]; then fail "setup: POST hostile profiles" "see above"; else ok "setup: POST hostile profiles at $BASE"; fi
run_node hostile "$BASE"
stop_serve

if [ "${UI_DOCS:-0}" = 1 ]; then
	mkdir -p "$ROOT/docs/ui"
	cp "$SHOTS"/*.png "$ROOT/docs/ui/" && ok "ui: screenshots copied into docs/ui/"
fi
