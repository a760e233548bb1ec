#!/usr/bin/env bash
# test_rollups.sh — end-to-end: `profd serve` builds hourly rollups
# (--rollup-interval) and GET /api/1/top and /api/1/series answer from
# them the same as from the profiles (rollups=false forces the selection
# path):
#   1. real CPU profiles of examples/goapp (two workloads) posted as two
#      services over three past hours; after the first pass "rollups" is
#      true and every top answer (by function, service, pair; flat and cum;
#      ranges with partial hours) equals the one without rollups;
#   2. every series answer too (JSON points: a function regex by=function,
#      by service summed, one function; totals; steps of 1h, 2h, 90m with
#      partial hours at the edges; cum, sample_index, cores,
#      normalize=false), the Prometheus and InfluxDB texts byte for byte
#      (and of the documented shape); label matchers and steps under 1h
#      take the selection path ("rollups": false);
#   3. a late profile in a rolled-up hour and a removal: still equal (the
#      stale rollup is not used), and equal again after the next pass;
#   4. restart without passes (--rollup-interval 0): the rollups are used;
#   5. bad "rollups" value: 400 (top and series).
# Run: BUILD=build bash tests/e2e/test_rollups.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

GA=$GOAPP
[ -x "$GA" ] || GA=$ROOT/build/goapp # a Go program, not sanitized
SPID=
stop_serve() {
	[ -n "$SPID" ] || return 0
	kill -TERM "$SPID" 2>/dev/null
	wait "$SPID" 2>/dev/null
	SPID=
}
prev_trap=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
# shellcheck disable=SC2064 # expanded now on purpose: lib.sh's command
trap "stop_serve; $prev_trap" EXIT

for b in "$PROFD" "$GA"; do
	if [ ! -x "$b" ]; then
		fail "setup: $b exists" "not built; run: make $BUILD/profd $BUILD/goapp"
		exit 0
	fi
done
for c in curl jq; do
	if ! command -v "$c" >/dev/null; then
		fail "setup: $c in PATH" "needed by this test"
		exit 0
	fi
done

# start_serve ARGS...: profd serve on a free port (log $T/serve.log); sets PORT, SPID
start_serve() {
	: >"$T/serve.log"
	"$PROFD" serve --addr 127.0.0.1:0 --retention 0 --data-dir "$T/data" -q "$@" 2>"$T/serve.log" &
	SPID=$!
	PORT=
	for ((k = 0; k < 200; k++)); do
		PORT=$(sed -n 's/.*listening on port \([0-9][0-9]*\).*/\1/p' "$T/serve.log" | head -n1)
		[ -n "$PORT" ] && return 0
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.05
	done
	fail "setup: profd serve $*" "no 'listening on port' line: $(head -c 600 "$T/serve.log")"
	exit 0
}

# wait_pass N: until the log shows N rollup passes that built something
wait_pass() {
	for ((k = 0; k < 300; k++)); do
		[ "$(grep -c 'component=rollup msg="built' "$T/serve.log")" -ge "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

# ---- profiles ----------------------------------------------------------------------------------

capture() { # WORKLOAD DIR: 3 CPU profiles of 1 s
	local dir=$2 addr= k
	mkdir -p "$dir"
	"$GA" -addr 127.0.0.1:0 -workload "$1" 2>"$dir/goapp.log" &
	local pid=$!
	for ((k = 0; k < 200; k++)); do
		addr=$(sed -n 's/^goapp: listening on \(.*\)$/\1/p' "$dir/goapp.log" | head -n1)
		[ -n "$addr" ] && break
		sleep 0.05
	done
	sleep 0.3
	for k in 0 1 2; do
		curl -sSf --max-time 30 -o "$dir/cpu$k.pb.gz" "http://$addr/debug/pprof/profile?seconds=1" || break
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}
capture auth "$T/a" &
capture search "$T/b" &
wait
for f in a/cpu0 a/cpu1 a/cpu2 b/cpu0 b/cpu1 b/cpu2; do
	if [ ! -s "$T/$f.pb.gz" ]; then
		fail "setup: 6 CPU profiles from goapp" "missing $f: $(tail -c 300 "$T/a/goapp.log" "$T/b/goapp.log")"
		exit 0
	fi
done
ok "setup: 6 CPU profiles (1 s) from goapp -workload auth / search"

start_serve --rollup-interval 1s
URL=http://127.0.0.1:$PORT
now=$(date +%s)
H0=$(((now - 4 * 3600) / 3600 * 3600)) # three whole past hours from H0
post() { # FILE SERVICE UNIX -> id
	curl -sS --data-binary "@$1" "$URL/api/0/profiles?service=$2&type=cpu&labels=pod=$2-1&created_at=$3" |
		jq -r '.body.id // empty'
}
nposted=0
for h in 0 1 2; do
	for k in 0 1 2; do
		t=$((H0 + h * 3600 + k * 1000 + 7))
		id=$(post "$T/a/cpu$k.pb.gz" api "$t")
		[ -n "$id" ] && nposted=$((nposted + 1))
		[ "$h$k" = 11 ] && REMOVE=$id
		id=$(post "$T/b/cpu$k.pb.gz" db "$((t + 60))")
		[ -n "$id" ] && nposted=$((nposted + 1))
	done
done
if [ "$nposted" = 18 ]; then ok "setup: 18 profiles posted over 3 past hours"; else fail "setup: post" "$nposted of 18"; fi
if wait_pass 1; then ok "serve: a rollup pass built the hours"; else fail "serve: rollup pass" "$(tail -5 "$T/serve.log")"; fi

FROM=$(date -u -d "@$H0" +%Y-%m-%dT%H:%M:%SZ)
TO=$(date -u -d "@$((H0 + 3 * 3600))" +%Y-%m-%dT%H:%M:%SZ)
MID=$(date -u -d "@$((H0 + 1800))" +%Y-%m-%dT%H:%M:%SZ) # partial first hour
Q=$(jq -rn --arg v 'cpu{}' '$v|@uri')
QS=$(jq -rn --arg v 'cpu{service=~"a.*|db"}' '$v|@uri')
# The first pass can run while the 18 profiles are still being posted (a
# loaded CI machine stretches the posting past the 1 s interval: seen once),
# and the hours it built before the last posts are stale until the next
# pass: wait until the answer comes from rollups (at most 10 s), so that
# the comparisons below are about rollups, not about when the pass ran.
for ((k = 0; k < 200; k++)); do
	[ "$(curl -sS "$URL/api/1/top?query=$Q&from=$FROM&to=$TO&n=1" | jq -r '.body.rollups')" = true ] && break
	sleep 0.05
done

# same_top NAME PARAMS WANT_ROLLUPS: the answer with rollups = the one without
same_top() {
	local a=$T/top-a.json b=$T/top-b.json
	curl -sS -o "$a" "$URL/api/1/top?$2"
	curl -sS -o "$b" "$URL/api/1/top?$2&rollups=false"
	local ra rb
	ra=$(jq -r '.body.rollups' "$a")
	rb=$(jq -r '.body.rollups' "$b")
	if [ "$(jq .code "$a")" != 200 ] || [ "$(jq '.body.rows | length' "$a")" = 0 ]; then
		fail "$1" "$(head -c 400 "$a")"
	elif [ "$ra" != "$3" ] || [ "$rb" != false ]; then
		fail "$1" "rollups: $ra and $rb, want $3 and false"
	elif cmp -s <(jq -S 'del(.body.rollups)' "$a") <(jq -S 'del(.body.rollups)' "$b"); then
		ok "$1"
	else
		fail "$1" "$(diff <(jq -S 'del(.body.rollups)' "$a") <(jq -S 'del(.body.rollups)' "$b") | head -20)"
	fi
}
same_top "top over 3 whole hours: from rollups, = without" "query=$Q&from=$FROM&to=$TO&n=50" true
same_top "top by service, cum" "query=$Q&from=$FROM&to=$TO&by=service&value=cum" true
same_top "top by function,service" "query=$Q&from=$FROM&to=$TO&by=function,service&n=100" true
same_top "top with service matchers" "query=$QS&from=$FROM&to=$TO&n=50" true
same_top "top from mid-hour: edges from profiles" "query=$Q&from=$MID&to=$TO&n=50" true
profiles=$(jq .body.profiles "$T/top-a.json")
if [ "$profiles" = 14 ]; then ok "top from mid-hour counts 14 profiles"; else fail "profiles from mid-hour" "$profiles"; fi

# ---- series ------------------------------------------------------------------------------------

# same_series NAME PARAMS WANT_ROLLUPS [NPOINTS]: the JSON with rollups = the one without
# (rollups=false: the selection path); NPOINTS: points of the first series
same_series() {
	local a=$T/ser-a.json b=$T/ser-b.json ra rb np
	curl -sS -o "$a" "$URL/api/1/series?$2"
	curl -sS -o "$b" "$URL/api/1/series?$2&rollups=false"
	ra=$(jq -r '.body.rollups' "$a")
	rb=$(jq -r '.body.rollups' "$b")
	np=$(jq '.body.series[0].points | length' "$a")
	if [ "$(jq .code "$a")" != 200 ] || [ "$(jq '.body.series | length' "$a")" = 0 ]; then
		fail "$1" "$(head -c 400 "$a")"
	elif [ "$ra" != "$3" ] || [ "$rb" != false ]; then
		fail "$1" "rollups: $ra and $rb, want $3 and false"
	elif [ -n "${4:-}" ] && [ "$np" != "$4" ]; then
		fail "$1" "$np points, want $4: $(head -c 400 "$a")"
	elif cmp -s <(jq -S 'del(.body.rollups)' "$a") <(jq -S 'del(.body.rollups)' "$b"); then
		ok "$1"
	else
		fail "$1" "$(diff <(jq -S 'del(.body.rollups)' "$a") <(jq -S 'del(.body.rollups)' "$b") | head -20)"
	fi
}
# same_text NAME PARAMS LINE_RE: format=prometheus|influx with rollups = without, byte for byte,
# every line matching LINE_RE (grep -E)
same_text() {
	local a=$T/ser-a.txt b=$T/ser-b.txt bad
	curl -sS -o "$a" "$URL/api/1/series?$2"
	curl -sS -o "$b" "$URL/api/1/series?$2&rollups=false"
	bad=$(grep -Evc -- "$3" "$a")
	if [ ! -s "$a" ] || [ "$bad" != 0 ]; then
		fail "$1" "$bad lines not of the shape /$3/: $(grep -Ev -- "$3" "$a" | head -c 400)"
	else
		same_output "$1" "$a" "$b"
	fi
}
re_escape() { sed 's/[][\.*^$()+?{}|]/\\&/g'; }
enc() { jq -rn --arg v "$1" '$v|@uri'; }
curl -sS -o "$T/top-api.json" "$URL/api/1/top?query=$(enc 'cpu{service="api"}')&from=$FROM&to=$TO&n=1"
F1=$(jq -r '.body.rows[0].name // empty' "$T/top-api.json")
FRE=$(enc 'runtime\..*')
F1RE=$(enc "$(printf %s "$F1" | re_escape)")
TO2=$(date -u -d "@$((H0 + 2 * 3600 + 1500))" +%Y-%m-%dT%H:%M:%SZ) # partial last hour
S="query=$Q&from=$FROM&to=$TO"
same_series "series: function regex, by service,function, 1h steps" "$S&step=1h&function=$FRE" true 3
same_series "series: totals per service, 1h steps" "$S&step=1h" true 3
same_series "series: every function over the fleet (by=function, n=20)" "$S&step=1h&by=function&n=20" true 3
same_series "series: total of the fleet (by=type)" "$S&step=1h&by=type" true 3
same_series "series: regex summed per service, flat" "$S&step=1h&function=$FRE&by=service" true 3
same_series "series: regex summed per service, cum" "$S&step=1h&function=$FRE&by=service&value=cum" true 3
same_series "series: one function ($F1) per service, cum" "$S&step=1h&function=$F1RE&by=service&value=cum" true 3
same_series "series: one function over the fleet, by=function" "$S&step=1h&function=$F1RE&by=function" true 3
same_series "series: from mid-hour to a partial hour, 1h steps" \
	"query=$Q&from=$MID&to=$TO2&step=1h&function=$FRE" true 3
same_series "series: 2h steps with partial hours" "query=$Q&from=$MID&to=$TO2&step=2h&function=$FRE" true
same_series "series: 90m steps, totals" "query=$Q&from=$MID&to=$TO&step=90m" true
same_series "series: service matcher, sample_index=samples" \
	"query=$QS&from=$FROM&to=$TO&step=1h&function=$FRE&si=samples" true 3
same_series "series: unit=cores" "$S&step=1h&function=$F1RE&unit=cores" true 3
same_series "series: normalize=false, totals" "$S&step=1h&normalize=false" true 3
same_series "series: label matcher: the selection path" \
	"query=$(enc 'cpu{pod="api-1"}')&from=$FROM&to=$TO&step=1h&function=$FRE" false 3
same_series "series: 30m steps: the selection path" "$S&step=30m" false 6
n=$(jq '[.body.series[].points[][1]] | add' "$T/ser-a.json")
curl -sS -o "$T/top-all.json" "$URL/api/1/top?query=$Q&from=$FROM&to=$TO&by=service"
if [ "$n" = "$(jq .body.total "$T/top-all.json")" ]; then
	ok "series: the steps' totals add up to top's total"
else
	fail "series: totals add up" "$n vs $(jq .body.total "$T/top-all.json")"
fi
same_text "series: format=prometheus, same text" "$S&step=1h&function=$FRE&format=prometheus" \
	'^(# (HELP|TYPE) profd_profile_value .*|profd_profile_value\{service="[a-z]+",type="cpu",sample_type="cpu",unit="nanoseconds",function="[^"]+"\} -?[0-9]+ [0-9]+000)$'
same_text "series: format=influx, same text" "$S&step=1h&function=$FRE&format=influx" \
	'^profd_profile,function=[^ ]+,sample_type=cpu,service=[a-z]+,type=cpu,unit=nanoseconds value=-?[0-9]+i [0-9]+000000000$'
same_text "series: format=prometheus cores, same text" "$S&step=1h&function=$F1RE&by=service&unit=cores&format=prometheus" \
	'^(# (HELP|TYPE) profd_profile_value .*|profd_profile_value\{service="[a-z]+",type="cpu",sample_type="cpu",unit="cores"\} [0-9.e+-]+ [0-9]+000)$'

# ---- late profile, removal ----------------------------------------------------------------------

post "$T/b/cpu2.pb.gz" api "$((H0 + 3600 + 1500))" >/dev/null
same_top "late profile: stale rollup not used, = without" "query=$Q&from=$FROM&to=$TO&n=50" true
same_series "late profile: series = without" "$S&step=1h&function=$FRE" true 3
if wait_pass 2; then
	same_top "late profile: rebuilt by the next pass" "query=$Q&from=$FROM&to=$TO&n=50" true
	same_series "late profile: series after the next pass" "$S&step=1h&function=$FRE" true 3
else
	fail "late profile: next pass" "$(tail -5 "$T/serve.log")"
fi
curl -sS -X DELETE -o /dev/null "$URL/api/0/profiles/$REMOVE"
same_top "removal: = without" "query=$Q&from=$FROM&to=$TO&n=50" true
if wait_pass 3; then
	same_top "removal: rebuilt" "query=$Q&from=$FROM&to=$TO&n=50" true
	n=$(jq .body.profiles "$T/top-a.json")
	if [ "$n" = 18 ]; then ok "after a late profile and a removal: 18 profiles"; else fail "profiles" "$n"; fi
else
	fail "removal: next pass" "$(tail -5 "$T/serve.log")"
fi

# ---- restart, bad value ---------------------------------------------------------------------------

stop_serve
start_serve --rollup-interval 0
URL=http://127.0.0.1:$PORT
same_top "restart without passes: the stored rollups are used" "query=$Q&from=$FROM&to=$TO&n=50" true
same_series "restart: series from the stored rollups" "$S&step=1h&function=$FRE" true 3
code=$(curl -sS -o "$T/bad.json" -w '%{http_code}' "$URL/api/1/top?query=$Q&from=$FROM&to=$TO&rollups=maybe")
if [ "$code" = 400 ] && grep -q 'bad \\"rollups\\"' "$T/bad.json"; then
	ok "rollups=maybe: 400 naming the parameter"
else
	fail "rollups=maybe" "$code $(head -c 300 "$T/bad.json")"
fi
code=$(curl -sS -o "$T/bad.json" -w '%{http_code}' "$URL/api/1/series?$S&step=1h&rollups=maybe")
if [ "$code" = 400 ] && grep -q 'bad \\"rollups\\"' "$T/bad.json"; then
	ok "series rollups=maybe: 400 naming the parameter"
else
	fail "series rollups=maybe" "$code $(head -c 300 "$T/bad.json")"
fi
stop_serve
if grep -q "Sanitizer\|runtime error" "$T/serve.log"; then
	fail "collector: no sanitizer report" "$(grep -m1 -A20 "Sanitizer\|runtime error" "$T/serve.log" | head -c 1500)"
else
	ok "collector: no sanitizer report"
fi
