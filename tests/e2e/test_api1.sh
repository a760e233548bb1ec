#!/usr/bin/env bash
# test_api1.sh — end-to-end tests of API v1 (docs/api.md "API v1"): fleet
# analytics over real profiles of several services.
#   1. capture real profiles from three goapp workloads (auth, search,
#      ingest: different hot functions), two captures each, POST them with
#      labels through API v0 to a real `profd serve`;
#   2. fleet top (by=function, value=flat and cum): ranking and values equal
#      `go tool pprof -top` (-cum) on all six CPU files merged by
#      `go tool pprof -proto`; per service the same against that service's
#      two files; every row's per-service breakdown equals the per-service
#      tables; by=service and by=function,service;
#   3. merge: format=pprof reads in go tool pprof as Go's merge does (-top),
#      format=top equals -top, format=folded equals `profd pprof folded` of
#      Go's merge, format=flamegraph adds up at every node, with and without
#      max_nodes, its root is the total;
#   4. labels, label values, types, profiles: what was posted;
#   5. bad queries: malformed selector, unknown type, regex that does not
#      compile, from > to, range over --max-query-range, over
#      --max-merge-profiles, bad n/by/value/format/si, mixed sample types
#      across services, unknown route, wrong method: 4xx JSON with a message
#      that points at the problem; the server stays up, no sanitizer report.
# Run: BUILD=build bash tests/e2e/test_api1.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

TOPARGS=(-top -nodecount=100000 -nodefraction=0 -edgefraction=0)
C=$T/cap
WL=(auth search ingest)

go_bins_from_build GOAPP # Go programs, not sanitized
need_built 1 "make && make build/goapp" "$PROFD" "$GOAPP"
need_cmds 1 go curl jq

SPID=
stop_all() { [ -n "$SPID" ] && kill -KILL "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null; }
eval "set -- $(trap -p EXIT)"
# shellcheck disable=SC2064 # lib.sh's command is expanded now, on purpose
trap "stop_all; ${3:-}" EXIT

# ---- 1. capture, serve, post ------------------------------------------------------------

declare -A cap_pid
for w in "${WL[@]}"; do
	for i in 1 2; do
		GOAPP_ARGS="-workload $w -service $w" "$ROOT/tests/e2e/capture.sh" "$GOAPP" "$C/$w$i" 2 \
			>"$T/capture-$w$i.log" 2>&1 &
		cap_pid[$w$i]=$!
	done
done
"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data" --retention 0 --max-merge-profiles 8 \
	--max-query-range 48h 2>"$T/serve.log" &
SPID=$!
PORT=$(wait_line "$T/serve.log" '.*listening on port \([0-9][0-9]*\).*')
if [ -z "$PORT" ]; then
	fail "setup: profd serve" "no 'listening on port' line: $(head -c 600 "$T/serve.log")"
	exit 1
fi
BASE=http://127.0.0.1:$PORT
ok "setup: profd serve on port $PORT (--max-merge-profiles 8 --max-query-range 48h)"
wait_captures || exit 1
ok "setup: captured 2 x 3 workloads (auth, search, ingest), cpu 2s each"
# From here on, a copy: what is uploaded and what go tool pprof merges are
# the same bytes even if a capture abandoned on a loaded machine (its
# background CPU fetch) still writes into the first directory.
cp -r "$C" "$T/cap.used"
C=$T/cap.used

post() { # post FILE SERVICE TYPE LABELS
	local code
	code=$(curl -sS -o "$T/post.out" -w '%{http_code}' --data-binary @"$1" \
		"$BASE/api/0/profiles?service=$2&type=$3&labels=$4")
	[ "$code" = 200 ] || { echo "POST $1 $2 $3: $code $(head -c 300 "$T/post.out")"; return 1; }
}
postfail=
for w in "${WL[@]}"; do
	for i in 1 2; do
		post "$C/$w$i/cpu.pb.gz" "$w" cpu "env=prod,version=1.$i" || postfail=1
	done
done
for i in 1 2; do post "$C/auth$i/heap.pb.gz" auth heap "env=prod,version=1.$i" || postfail=1; done
post "$C/search1/heap.pb.gz" cache heap "env=staging,version=2.0" || postfail=1
[ -z "$postfail" ] && ok "setup: POST 6 cpu (3 services) + 3 heap (auth, cache) profiles" ||
	fail "setup: POST" "see above"

# api PATH [PARAM=VALUE]...: GET $BASE/api/1/PATH with URL-encoded params;
# body in $T/b, status in CODE
api() {
	local p=$1 a=()
	shift
	for kv; do a+=(--data-urlencode "$kv"); done
	CODE=$(curl -sS -G -o "$T/b" -D "$T/h" -w '%{http_code}' "${a[@]}" "$BASE/api/1/$p" 2>"$T/curl.err")
}
# expect_400 NAME STATUS SUBSTRING PATH PARAMS...: a JSON error containing SUBSTRING
expect_err() {
	local name=$1 st=$2 want=$3
	shift 3
	api "$@"
	if [ "$CODE" != "$st" ]; then
		fail "$name" "status $CODE, want $st: $(head -c 400 "$T/b")"
	elif ! grep -qi '^content-type: application/json' "$T/h"; then
		fail "$name" "not JSON: $(grep -i content-type "$T/h")"
	elif [ "$(jq -r .code "$T/b")" != "$st" ] || ! jq -r .error "$T/b" | grep -qF -- "$want"; then
		fail "$name" "body $(head -c 500 "$T/b"), want code $st and '$want'"
	else
		ok "$name"
	fi
}

# pprof_rows FILE ARGS...: go tool pprof ARGS -top FILE as "flat cum name" lines in raw units
# (-unit=ns / -unit=B print exact integers), inline markers dropped
pprof_rows() {
	local f=$1
	shift
	go tool pprof "${TOPARGS[@]}" "$@" "$f" 2>"$T/pp.err" |
		awk '/^ *flat  *flat%/ { on = 1; next }
		     on { name = $6; for (i = 7; i <= NF; i++) name = name " " $i
		          sub(/ \((partial-)?inline\)$/, "", name)
		          f = $1; c = $4; sub(/[a-zA-Z]+$/, "", f); sub(/[a-zA-Z]+$/, "", c)
		          print f, c, name }'
}
pprof_total() { # the "of N total" of the header, raw units
	go tool pprof "${TOPARGS[@]}" "$@" 2>/dev/null | sed -n 's/^Showing nodes accounting for .* of \([0-9]*\)[a-zA-Z]* total$/\1/p'
}
same_rows() { # same_rows NAME WANT GOT
	if [ ! -s "$2" ]; then
		fail "$1" "no rows from go tool pprof: $(head -c 300 "$T/pp.err")"
	elif cmp -s "$2" "$3"; then
		ok "$1 ($(wc -l <"$2") rows)"
	else
		fail "$1" "$(diff "$2" "$3" | head -20)"
	fi
}

# Go's merges, the reference
PM=$T/merged
mkdir -p "$PM"
gomerge() { local out=$1; shift; go tool pprof -proto "$@" >"$out" 2>"$out.err"; }
ALLCPU=()
for w in "${WL[@]}"; do
	gomerge "$PM/$w.pb.gz" "$C/${w}1/cpu.pb.gz" "$C/${w}2/cpu.pb.gz"
	ALLCPU+=("$C/${w}1/cpu.pb.gz" "$C/${w}2/cpu.pb.gz")
done
gomerge "$PM/all.pb.gz" "${ALLCPU[@]}"
if [ -s "$PM/all.pb.gz" ]; then ok "setup: go tool pprof -proto merges"; else
	fail "setup: go tool pprof -proto" "$(head -c 300 "$PM/all.pb.gz.err")"
	exit 1
fi

# ---- 2. fleet top ------------------------------------------------------------------------

W=(from=now-1h to=now)
for value in flat cum; do
	cumarg=()
	[ "$value" = cum ] && cumarg=(-cum)
	api top "query=cpu{}" "${W[@]}" n=1000 "value=$value"
	if [ "$CODE" != 200 ]; then
		fail "top value=$value: 200" "$CODE $(head -c 400 "$T/b")"
		continue
	fi
	cp "$T/b" "$T/top-$value.json"
	pprof_rows "$PM/all.pb.gz" -unit=ns "${cumarg[@]}" >"$T/want"
	jq -r '.body.rows[] | "\(.flat) \(.cum) \(.name)"' "$T/b" >"$T/got"
	same_rows "fleet top value=$value: ranking, flat and cum = go tool pprof -top ${cumarg[*]} of the 6 files merged" \
		"$T/want" "$T/got"
	want_total=$(pprof_total -unit=ns "$PM/all.pb.gz")
	got_total=$(jq -r .body.total "$T/b")
	if [ -n "$want_total" ] && [ "$want_total" = "$got_total" ]; then
		ok "fleet top value=$value: total $got_total = go tool pprof's"
	else
		fail "fleet top value=$value: total" "got $got_total, go tool pprof $want_total"
	fi
	bad=$(jq -r '.body as $b | $b.rows[] |
		select(((.flat * 100 / $b.total) - .flat_pct | fabs) > 1e-9 or ((.cum * 100 / $b.total) - .cum_pct | fabs) > 1e-9
		       or ([.services[].flat] | add) != .flat or ([.services[].cum] | add) != .cum) | .name' "$T/b" | head -3)
	[ -z "$bad" ] && ok "fleet top value=$value: shares of the fleet total; per-service flat/cum add up to the row" ||
		fail "fleet top value=$value: shares and breakdown" "rows: $bad"
	# per service: the same query for one service = go tool pprof on its two files
	for w in "${WL[@]}"; do
		api top "query=cpu{service=\"$w\"}" "${W[@]}" n=1000 "value=$value"
		pprof_rows "$PM/$w.pb.gz" -unit=ns "${cumarg[@]}" >"$T/want"
		jq -r '.body.rows[] | "\(.flat) \(.cum) \(.name)"' "$T/b" >"$T/got"
		same_rows "top of service $w value=$value = go tool pprof -top ${cumarg[*]} of its 2 files merged" "$T/want" "$T/got"
		# and the fleet rows' breakdown for this service is that table
		pprof_rows "$PM/$w.pb.gz" -unit=ns | LC_ALL=C sort >"$T/want"
		jq -r --arg s "$w" '.body.rows[] | .name as $n | .services[] | select(.service == $s) |
			"\(.flat) \(.cum) \($n)"' "$T/top-$value.json" | LC_ALL=C sort >"$T/got"
		same_rows "fleet top value=$value: the breakdown for $w = its own -top" "$T/want" "$T/got"
	done
done
api top "query=cpu" "${W[@]}"
[ "$CODE" = 200 ] && [ "$(jq '.body.rows | length' "$T/b")" = 10 ] &&
	[ "$(jq -r '[.body.rows[] | "\(.flat) \(.cum) \(.name)"] | join("|")' "$T/b")" = \
		"$(head -10 <(jq -r '.body.rows[] | "\(.flat) \(.cum) \(.name)"' "$T/top-flat.json") | paste -sd'|')" ] &&
	ok "top defaults: n=10, by=function, value=flat (query=cpu = cpu{})" ||
	fail "top defaults" "$CODE $(head -c 300 "$T/b")"
api top "query=cpu{}" "${W[@]}" by=service
exp=$(for w in "${WL[@]}"; do echo "$(pprof_total -unit=ns "$PM/$w.pb.gz") $w"; done | sort -k1,1nr -k2 | paste -sd'|')
got=$(jq -r '[.body.rows[] | "\(.total) \(.service)"] | join("|")' "$T/b")
[ "$CODE" = 200 ] && [ "$exp" = "$got" ] && [ "$(jq '[.body.rows[].profiles] | add' "$T/b")" = 6 ] &&
	ok "top by=service: services ranked by total = each one's go tool pprof total ($got)" ||
	fail "top by=service" "want $exp, got $got ($CODE)"
api top "query=cpu{}" "${W[@]}" "by=function,service" n=1000 value=cum
jq -r '.body.rows[] | "\(.cum) \(.flat) \(.name) \(.service)"' "$T/b" >"$T/got"
jq -r '.body.rows[] | .name as $n | .services[] | "\(.cum) \(.flat) \($n) \(.service)"' "$T/top-cum.json" |
	LC_ALL=C sort -k1,1nr -k3,3 -k4,4 -s >"$T/want"
LC_ALL=C sort -k1,1nr -k3,3 -k4,4 -s "$T/got" >"$T/got.s"
if [ "$CODE" = 200 ] && cmp -s "$T/want" "$T/got.s" && sort -s -k1,1nr -c "$T/got" 2>/dev/null; then
	ok "top by=function,service value=cum: every (function, service) pair, ranked by cum"
else
	fail "top by=function,service" "$CODE $(diff "$T/want" "$T/got.s" | head -5)"
fi
api top "query=cpu{version=\"1.1\"}" "${W[@]}" n=1000
gomerge "$PM/v11.pb.gz" "$C/auth1/cpu.pb.gz" "$C/search1/cpu.pb.gz" "$C/ingest1/cpu.pb.gz"
pprof_rows "$PM/v11.pb.gz" -unit=ns >"$T/want"
jq -r '.body.rows[] | "\(.flat) \(.cum) \(.name)"' "$T/b" >"$T/got"
same_rows "top with a label matcher (version=\"1.1\": the 3 first captures) = go tool pprof" "$T/want" "$T/got"
api top "query=cpu{service=~\"auth|search\",version=~\"1\\\\..*\",pod!=\"x\"}" "${W[@]}" n=1000 si=samples
gomerge "$PM/as.pb.gz" "$C"/auth?/cpu.pb.gz "$C"/search?/cpu.pb.gz
pprof_rows "$PM/as.pb.gz" -sample_index=samples >"$T/want"
jq -r '.body.rows[] | "\(.flat) \(.cum) \(.name)"' "$T/b" >"$T/got"
same_rows "top with =~ != matchers and si=samples (auth, search) = go tool pprof -sample_index=samples" "$T/want" "$T/got"

# ---- 3. merge formats ----------------------------------------------------------------------

api merge "query=cpu{}" "${W[@]}"
cp "$T/b" "$T/srv.pb.gz"
if [ "$CODE" = 200 ] && grep -qi '^content-type: application/octet-stream' "$T/h"; then
	go tool pprof "${TOPARGS[@]}" "$T/srv.pb.gz" 2>&1 | grep -v '^Time:' >"$T/want"
	go tool pprof "${TOPARGS[@]}" "$PM/all.pb.gz" 2>&1 | grep -v '^Time:' >"$T/got"
	same_output "merge format=pprof (default): go tool pprof -top reads it as Go's merge of the 6 files" "$T/want" "$T/got"
else
	fail "merge format=pprof" "$CODE $(head -c 300 "$T/b")"
fi
api merge "query=cpu{}" "${W[@]}" format=top n=100000
pprof_rows "$PM/all.pb.gz" -unit=ns >"$T/want"
jq -r '.body.rows[] | "\(.flat) \(.cum) \(.name)"' "$T/b" >"$T/got"
same_rows "merge format=top = go tool pprof -top" "$T/want" "$T/got"
[ "$(jq -r '.body.unit + " " + .body.sample_type + " " + (.body.rows[0].unit)' "$T/b")" = "nanoseconds cpu nanoseconds" ] &&
	ok "merge format=top: unit and sample type" || fail "merge format=top: unit" "$(head -c 200 "$T/b")"
api merge "query=heap{service=\"auth\"}" "${W[@]}" format=top n=100000 sample_index=alloc_space value=cum
gomerge "$PM/authheap.pb.gz" "$C"/auth?/heap.pb.gz
pprof_rows "$PM/authheap.pb.gz" -sample_index=alloc_space -unit=B -cum >"$T/want"
jq -r '.body.rows[] | "\(.flat) \(.cum) \(.name)"' "$T/b" >"$T/got"
same_rows "merge heap format=top sample_index=alloc_space value=cum = go tool pprof -top -cum -sample_index=alloc_space" \
	"$T/want" "$T/got"
api merge "query=cpu{}" "${W[@]}" format=folded
cp "$T/b" "$T/got"
"$PROFD" pprof folded "$PM/all.pb.gz" >"$T/want" 2>&1
if [ "$CODE" = 200 ] && grep -qi '^content-type: text/plain' "$T/h"; then
	same_output "merge format=folded = profd pprof folded of Go's merge" "$T/want" "$T/got"
else
	fail "merge format=folded" "$CODE $(head -c 300 "$T/b")"
fi
tot=$(awk '{ s += $NF } END { printf "%.0f", s }' "$T/got")
[ "$tot" = "$(pprof_total -unit=ns "$PM/all.pb.gz")" ] && ok "merge format=folded: values add up to the total" ||
	fail "merge format=folded: total" "$tot"
# flamegraph: value = self + sum(children) at every node; root = total
flame_ok() {
	jq -e '[.. | objects | select(has("children")) | select(.value != .self + ([.children[].value] | add // 0))] | length == 0' "$T/b" >/dev/null
}
api merge "query=cpu{}" "${W[@]}" format=flamegraph
total=$(pprof_total -unit=ns "$PM/all.pb.gz")
if [ "$CODE" = 200 ] && flame_ok && [ "$(jq .body.root.value "$T/b")" = "$total" ] &&
	[ "$(jq -r .body.truncated "$T/b")" = false ] && [ "$(jq -r .body.root.name "$T/b")" = root ]; then
	ok "merge format=flamegraph: root = total ($total), every node = self + children, not truncated ($(jq .body.nodes "$T/b") nodes)"
else
	fail "merge format=flamegraph" "$CODE $(head -c 300 "$T/b")"
fi
full=$(jq .body.nodes "$T/b")
leaves=$(jq '[.. | objects | select(has("children")) | select(.children == []) | .self] | add' "$T/b")
[ "$leaves" -le "$total" ] && ok "merge format=flamegraph: self values add up within the total" || fail "flamegraph self" "$leaves"
api merge "query=cpu{}" "${W[@]}" format=flamegraph max_nodes=7
others=$(jq '[.. | objects | select(.other == true)] | length' "$T/b")
real=$(jq '[.. | objects | select(has("children")) | select(.other != true)] | length' "$T/b")
if [ "$CODE" = 200 ] && flame_ok && [ "$(jq .body.root.value "$T/b")" = "$total" ] && [ "$real" = 7 ] &&
	[ "$others" -ge 1 ] && [ "$(jq -r .body.truncated "$T/b")" = true ] && [ "$(jq .body.frames "$T/b")" = "$full" ]; then
	ok "merge format=flamegraph max_nodes=7: 7 frames kept, $others \"other\" nodes, totals preserved"
else
	fail "merge format=flamegraph max_nodes=7" "code $CODE real $real others $others: $(head -c 300 "$T/b")"
fi

# ---- 4. metadata ------------------------------------------------------------------------

api labels "${W[@]}"
[ "$(jq -c .body "$T/b")" = '["env","service","version"]' ] && ok "labels: env, service, version" ||
	fail "labels" "$(head -c 300 "$T/b")"
api labels/version/values "query=cpu"
[ "$(jq -c .body "$T/b")" = '["1.1","1.2"]' ] && ok "labels/version/values of cpu (default window): 1.1, 1.2" ||
	fail "labels/version/values" "$(head -c 300 "$T/b")"
api labels/service/values "${W[@]}"
[ "$(jq -c .body "$T/b")" = '["auth","cache","ingest","search"]' ] && ok "labels/service/values: 4 services" ||
	fail "labels/service/values" "$(head -c 300 "$T/b")"
api labels/env/values "query={service!~\"a.*|i.*|s.*\"}"
[ "$(jq -c .body "$T/b")" = '["staging"]' ] && ok "labels/env/values with a negative regex on service" ||
	fail "labels/env/values" "$(head -c 300 "$T/b")"
api types "${W[@]}"
[ "$(jq -c .body "$T/b")" = '[{"type":"cpu","profiles":6,"services":3},{"type":"heap","profiles":3,"services":2}]' ] &&
	ok "types: cpu 6 profiles / 3 services, heap 3 / 2" || fail "types" "$(head -c 300 "$T/b")"
api profiles "query=heap" "${W[@]}"
[ "$CODE" = 200 ] && [ "$(jq -r '[.body[].service] | sort | join(",")' "$T/b")" = auth,auth,cache ] &&
	[ "$(jq -r '[.body[].created_at] | . == sort' "$T/b")" = true ] &&
	ok "profiles query=heap: 3 profiles, ascending created_at" || fail "profiles" "$(head -c 300 "$T/b")"
api profiles "query=goroutine"
[ "$CODE" = 200 ] && [ "$(jq -c .body "$T/b")" = '[]' ] && ok "profiles with no match: 200 []" ||
	fail "profiles empty" "$CODE $(head -c 300 "$T/b")"
# id=: exactly the named profiles, whatever the range; sizes in the list; sample types in merges
api profiles "query=cpu{service=\"auth\"}" "${W[@]}"
ids=$(jq -r '[.body[].id] | join(",")' "$T/b")
id1=$(jq -r '.body[] | select(any(.labels[]; .key == "version" and .value == "1.1")) | .id' "$T/b") # auth1's
[ "$(jq -r '[.body[].size > 0] | all' "$T/b")" = true ] && ok "profiles: each with its stored size" || fail "profiles: size" "$(head -c 300 "$T/b")"
api merge format=top n=100000 "id=$id1" from=now-1m to=now-1m
pprof_rows "$C/auth1/cpu.pb.gz" -unit=ns >"$T/want.id"
[ "$CODE" = 200 ] && jq -r '.body.rows[] | "\(.flat) \(.cum) \(.name)"' "$T/b" >"$T/got.id"
if [ "$CODE" = 200 ] && [ "$(jq -r .body.profiles "$T/b")" = 1 ]; then same_rows "merge id=ONE (outside from/to): that profile's go tool pprof -top" "$T/want.id" "$T/got.id"
else fail "merge id=ONE" "$CODE $(head -c 300 "$T/b")"; fi
api merge format=flamegraph "id=$ids,$id1"
[ "$CODE" = 200 ] && [ "$(jq -r .body.profiles "$T/b")" = 2 ] && [ "$(jq -c '[.body.sample_types[].type]' "$T/b")" = '["samples","cpu"]' ] &&
	ok "merge id=A,B,A: 2 profiles (an id named twice counts once); sample_types listed" || fail "merge id=A,B" "$CODE $(head -c 300 "$T/b")"
expect_err "merge id= of another type than the query: 404 naming it" 404 "no profile $id1 matching heap" merge format=top query=heap "id=$id1"
expect_err "merge id=bad: 400" 400 'bad "id" "x1"' merge format=top id=x1
api labels
grep -q '^{"code":200,"body":\["env","service","version"\]}$' "$T/b" && ok "envelope: {\"code\":200,\"body\":...} as API v0" ||
	fail "envelope" "$(head -c 300 "$T/b")"

# ---- 5. bad queries ------------------------------------------------------------------------

expect_err "malformed selector: 400 pointing at the column" 400 "bad query \"cpu{service=\"auth\" version=\"1\"}\": at 19: expected ',' or '}' after a matcher, got 'v'" \
	top 'query=cpu{service="auth" version="1"}'
expect_err "unknown type: 400 naming it and the valid ones" 400 'unknown profile type "cpux" (valid: cpu, heap' top 'query=cpux{}'
expect_err "regex that does not compile: 400 with PCRE2's reason" 400 'bad query "cpu{version=~"1.("}": at 13: regex "1.(" does not compile: missing closing parenthesis' \
	top 'query=cpu{version=~"1.("}'
expect_err "from > to: 400" 400 '"from" after "to"' top query=cpu from=now to=now-1h
expect_err "range over --max-query-range: 400" 400 'range over the limit' top query=cpu from=now-49h to=now
expect_err "bad from: 400 in API v0's words" 400 'bad "from" timestamp "yesterday"' top query=cpu from=yesterday
expect_err "missing query on /top: 400" 400 'missing "query"' top
expect_err "missing query on /merge: 400" 400 'missing "query"' merge
expect_err "over --max-merge-profiles: 413 naming it" 413 'more than 8 profiles match: over the limit of profiles per query (--max-merge-profiles)' \
	profiles 'query={}'
expect_err "mixed sample types across services: 400 naming both" 400 'services "cache" (inuse_space/bytes) and "search" (cpu/nanoseconds) have different sample types' \
	top 'query={service=~"cache|search"}'
# the message is about two services: not prefixed with one of them (it was 'service "search": services ...')
if jq -r .error "$T/b" | grep -q '^services "cache"'; then ok "mixed sample types across services: the message starts with the two services"; else fail "mixed sample types across services: the message starts with the two services" "$(head -c 300 "$T/b")"; fi
expect_err "mixed types within a service: 400 naming it" 400 'service "auth": incompatible profiles' top 'query={service="auth"}'
expect_err "bad n: 400" 400 'bad "n" "0": want an integer in [1, 1000]' top query=cpu n=0
expect_err "bad by: 400" 400 'bad "by" "pod"' top query=cpu by=pod
expect_err "bad value: 400" 400 'bad "value" "self": want flat or cum' top query=cpu value=self
expect_err "bad sample_index: 400 listing the types" 400 'bad "si" "bytes": the profiles have sample types' top query=cpu si=bytes
expect_err "bad format: 400" 400 'bad "format" "svg"' merge query=cpu format=svg
expect_err "bad max_nodes: 400" 400 'bad "max_nodes" "-1"' merge query=cpu format=flamegraph max_nodes=-1
expect_err "merge with no match: 404 saying so" 404 'no profiles match goroutine{} in' merge query=goroutine{}
expect_err "unknown route: 404" 404 'no API v1 route /api/1/nope' nope
code=$(curl -sS -o "$T/b" -D "$T/h" -w '%{http_code}' -X POST "$BASE/api/1/top?query=cpu")
[ "$code" = 405 ] && grep -qi '^allow: GET, HEAD' "$T/h" && ok "POST /api/1/top: 405 with Allow" || fail "405" "$code"
code=$(curl -sS -o /dev/null -w '%{http_code}' "$BASE/healthz")
[ "$code" = 200 ] && ok "server alive after the bad queries" || fail "server alive" "$code"
curl -sS "$BASE/metrics" >"$T/metrics"
grep -q '^profd_http_requests_total{route="api1_top",code="400"} [1-9]' "$T/metrics" &&
	grep -q '^profd_http_requests_total{route="api1_merge",code="400"} [1-9]' "$T/metrics" &&
	grep -q '^profd_http_requests_total{route="api1",code="404"} 1$' "$T/metrics" &&
	ok "/metrics counts API v1 requests by route (api1_top, api1_merge; api1 = unknown routes)" ||
	fail "/metrics api1 routes" "$(grep 'route="api1' "$T/metrics" | head -5)"
n=$(awk '$1 == "profd_http_request_duration_seconds_count{route=\"api1_top\"}" {print $2}' "$T/metrics")
inf=$(awk '$1 == "profd_http_request_duration_seconds_bucket{route=\"api1_top\",le=\"+Inf\"}" {print $2}' "$T/metrics")
[ -n "$n" ] && [ "$n" -ge 5 ] && [ "$n" = "$inf" ] && ok "/metrics: request duration histogram per route ($n api1_top requests)" ||
	fail "/metrics duration histogram" "count '$n', +Inf '$inf'"
if grep -q '^profd_build_info{version="[0-9.]*",commit="[0-9a-f]*",build_time="[0-9T:Z-]*"} 1$' "$T/metrics" &&
	grep -Eq '^process_resident_memory_bytes [1-9][0-9]{5,}$' "$T/metrics" && grep -Eq '^process_open_fds [1-9]' "$T/metrics" &&
	grep -Eq '^process_cpu_seconds_total [0-9.]+$' "$T/metrics" && grep -Eq '^process_max_fds [1-9]' "$T/metrics"; then
	ok "/metrics: profd_build_info and process_* (cpu, memory, fds)"
else fail "/metrics: build_info, process_*" "$(grep -E '^(profd_build_info|process_)' "$T/metrics")"; fi
if command -v promtool >/dev/null; then
	check "/metrics passes promtool check metrics" promtool check metrics <"$T/metrics"
fi

# last (it adds a service and a type): a pushed delta profile (values 60 and -40): format=top's percentages are of
# pprof's 100 % (the sum of |v|: 100), as go tool pprof -top prints them
python3 - "$T/neg.pb" <<'PY'
import sys
def vi(v):
    o = b""
    while True:
        b, v = v & 0x7F, v >> 7
        if v: o += bytes([b | 0x80])
        else: return o + bytes([b])
def f(n, p): return vi(n << 3 | 2) + vi(len(p)) + p
neg = (1 << 64) - 40  # -40 as a varint
b = f(1, b"\x08\x01\x10\x02")  # sample_type samples/count
b += f(2, b"\x08\x01\x10" + vi(60)) + f(2, b"\x08\x02\x10" + vi(neg))
for i in (1, 2):
    b += f(4, b"\x08" + vi(i) + f(4, b"\x08" + vi(i) + b"\x10\x01"))  # location i: function i
    b += f(5, b"\x08" + vi(i) + b"\x10" + vi(2 + i))  # function i: name string 2+i
for s in [b"", b"samples", b"count", b"main.grew", b"main.shrank"]:
    b += f(6, s)
open(sys.argv[1], "wb").write(b)
PY
code=$(curl -sS -o "$T/b" -w '%{http_code}' --data-binary @"$T/neg.pb" "$BASE/api/0/profiles?service=negdelta&type=other")
api merge 'query=other{service="negdelta"}' "${W[@]}" format=top normalize=false
got=$(jq -r '[.body.total, (.body.rows[] | "\(.name)=\(.flat)/\(.flat_pct)")] | join(" ")' "$T/b" 2>/dev/null)
want_pct=$(go tool pprof -top "$T/neg.pb" 2>/dev/null | awk '$NF ~ /^main\./ { printf "%s%s=%s", sep, $NF, $2; sep = " " }')
if [ "$code" = 200 ] && [ "$got" = "100 main.grew=60/60 main.shrank=-40/-40" ] && [ "$want_pct" = "main.grew=60.00% main.shrank=40.00%" ]; then
	ok "merge format=top of a delta with negative values: percentages of pprof's total ($want_pct)"
else
	fail "merge format=top, negative values" "post $code; got '$got'; go tool pprof -top: '$want_pct'"
fi

# a profile with drop_frames/keep_frames (as legacy C++/Java profiles and protobuf profiles made from them carry):
# go tool pprof prunes those frames before every view (RemoveUninteresting), so must top, series and flame graph
python3 - "$T/drop.pb" <<'PY'
import sys
def vi(v):
    o = b""
    while True:
        b, v = v & 0x7F, v >> 7
        o += bytes([b | (0x80 if v else 0)])
        if not v:
            return o
def f(n, p):  # length-delimited field n
    return vi(n << 3 | 2) + vi(len(p)) + p
def u(n, v):  # varint field n
    return vi(n << 3) + vi(v)
strs = [b""]
def s(x):
    x = x.encode()
    if x not in strs:
        strs.append(x)
    return strs.index(x)
fns = ["main", "user.Alloc", "tcmalloc::Alloc", "malloc", "user.Other", "operator new(unsigned long)", "user.Inl",
       "user.X", "runtime.panic", "user.P", "runtime.mallocgc", "user.Q", ".malloc(unsigned long)", "user.R"]
b = f(1, u(1, s("samples")) + u(2, s("count"))) + f(1, u(1, s("cpu")) + u(2, s("nanoseconds")))
for st, v in [([3, 4, 2, 1], 100), ([4, 5, 1], 50), ([4, 1], 10), ([6, 1], 7), ([4], 3), ([8, 4, 1], 5),
              ([9, 10, 1], 1000), ([11, 12, 1], 2000), ([13, 14, 1], 4000)]:
    b += f(2, f(1, b"".join(vi(x) for x in st)) + f(2, vi(1) + vi(v)))
for i in range(1, len(fns) + 1):
    lines = f(4, u(1, 6) + u(2, 1)) + f(4, u(1, 7) + u(2, 2)) if i == 6 else f(4, u(1, i) + u(2, 1))
    b += f(4, u(1, i) + u(3, 0x100 * i) + lines)
    b += f(5, u(1, i) + u(2, s(fns[i - 1])) + u(4, s("f.go")))
b += u(7, s(r"malloc|tcmalloc::.*|operator new.*|runtime\..*")) + u(8, s(r"runtime\.panic"))
b += f(11, u(1, s("cpu")) + u(2, s("nanoseconds"))) + u(12, 10000000) + u(10, 10 ** 10)
for x in strs:
    b += f(6, x)
open(sys.argv[1], "wb").write(b)
PY
code=$(curl -sS -o "$T/b" -w '%{http_code}' --data-binary @"$T/drop.pb" "$BASE/api/0/profiles?service=dropfr&type=cpu")
pprof_rows "$T/drop.pb" -unit=ns >"$T/want"
api top 'query=cpu{service="dropfr"}' "${W[@]}" n=1000 normalize=false
jq -r '.body.rows[] | "\(.flat) \(.cum) \(.name)"' "$T/b" >"$T/got" 2>/dev/null
[ "$code" = 200 ] || fail "setup: POST a profile with drop_frames" "$code"
same_rows "top of a profile with drop_frames/keep_frames = go tool pprof -top (frames pruned as pprof prunes them)" "$T/want" "$T/got"
api series 'query=cpu{service="dropfr"}' "${W[@]}" by=function step=24h normalize=false
jq -r '.body.series[] | "\(.points[0][1]) \(.labels.function)"' "$T/b" 2>/dev/null | LC_ALL=C sort >"$T/got"
awk '{ print $1, $3 }' "$T/want" | LC_ALL=C sort >"$T/want.s"
same_rows "series by=function of a profile with drop_frames = go tool pprof -top's flat" "$T/want.s" "$T/got"

kill -TERM "$SPID"
wait "$SPID"
rc=$?
SPID=
if grep -q "Sanitizer\|runtime error" "$T/serve.log"; then
	fail "server: no sanitizer report" "$(grep -m1 -A20 "Sanitizer\|runtime error" "$T/serve.log" | head -c 2000)"
else
	ok "server: no sanitizer report in its log"
fi
[ "$rc" -eq 0 ] && ok "server: SIGTERM: exit 0" || fail "server: SIGTERM" "exit $rc"
