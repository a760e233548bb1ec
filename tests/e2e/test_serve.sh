#!/usr/bin/env bash
# test_serve.sh — end-to-end tests of `profd serve` (HTTP API v0, docs/api.md)
# with real processes: profiles captured from the example Go service
# (build/goapp) are POSTed to a real server, read back with curl and with
# `go tool pprof URL`, and compared with what go tool pprof and the oracle
# (Google's profile package) make of the uploaded files.
#   1. end to end: POST (service/type/labels/created_at), services, list with
#      type/labels/from/to/limit filters, get by id, id1+id2, merge (cpu heap
#      allocs block mutex against go tool pprof -proto; goroutine and
#      threadcreate against the oracle, see the note there)
#   2. profefe compatibility, byte for byte where the contract fixes it:
#      envelopes, metadata field order, created_at format, status codes,
#      headers, the agent's and kube-profefe's label encodings, ignored
#      parameters, trailing slashes, 405 + Allow, HEAD, JSON escaping, DELETE
#   3. bad input: every case a 4xx with a JSON message, nothing stored, server
#      alive; gzip bomb, body caps (Content-Length and chunked), merge cap
#   4. /healthz, /readyz, /metrics (values and a strict text-format checker)
#   5. clean shutdown, no sanitizer report in the servers' logs
# Servers: A (--retention 200000h so that 2019 timestamps are kept,
# --max-body 1MiB), B (--retention 0, --max-merge-profiles 2).
# Run: BUILD=build bash tests/e2e/test_serve.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

T0=$(date +%s%N)
TYPES="cpu heap allocs block mutex goroutine threadcreate"
STRICT_TYPES="cpu heap allocs block mutex"
TOP=(-top -nodecount=100000 -nodefraction=0 -edgefraction=0)
C=$T/cap # capture sets: $C/1 $C/2 $C/3

# goapp and the oracle are Go programs, not sanitized: take them from build/
# when $BUILD does not have them
go_bins_from_build GOAPP ORACLE # Go programs, not sanitized

declare -A SPID SPORT
stop_servers() {
	local n
	for n in "${!SPID[@]}"; do
		kill -KILL "${SPID[$n]}" 2>/dev/null
		wait "${SPID[$n]}" 2>/dev/null
	done
}
# chain lib.sh's EXIT trap (removes $T) after stopping the servers
eval "set -- $(trap -p EXIT)"
# shellcheck disable=SC2064 # lib.sh's command is expanded now, on purpose
trap "stop_servers; ${3:-}" EXIT

elapsed() { echo "$((($(date +%s%N) - T0) / 1000000))ms"; }

# start_server NAME ARGS...: profd serve on a free port; SPORT[NAME] is set
# when its first stderr line says where it listens (10 s at most)
start_server() {
	local name=$1 port='' i
	shift
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data-$name" "$@" 2>"$T/serve-$name.log" &
	SPID[$name]=$!
	for ((i = 0; i < 200; i++)); do
		port=$(sed -n 's/.*listening on port \([0-9][0-9]*\).*/\1/p' "$T/serve-$name.log" | head -n1)
		[ -n "$port" ] && break
		kill -0 "${SPID[$name]}" 2>/dev/null || break
		sleep 0.05
	done
	if [ -z "$port" ]; then
		fail "setup: start server $name" "no 'listening on port' line: $(head -c 600 "$T/serve-$name.log")"
		return 1
	fi
	SPORT[$name]=$port
	ok "setup: server $name listening on port $port ($*)"
}

# stop_server NAME: SIGTERM, exit 0 after "stopped", no sanitizer report
stop_server() {
	local name=$1 pid=${SPID[$1]} i rc
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 200; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		unset "SPID[$name]"
		fail "server $name: stops on SIGTERM" "still running 10 s after SIGTERM (killed)"
		return
	fi
	wait "$pid"
	rc=$?
	unset "SPID[$name]"
	local log=$T/serve-$name.log
	if grep -q "Sanitizer\|runtime error" "$log"; then
		fail "server $name: no sanitizer report in its log" "$(grep -m1 -A30 "Sanitizer\|runtime error" "$log" | grep -v '^ *0x\|^Shadow\|^  [A-Z]' | head -c 2500)"
	else
		ok "server $name: no sanitizer report in its log"
	fi
	if [ "$rc" -eq 0 ] && tail -n1 "$log" | grep -q 'msg="stopped"'; then
		ok "server $name: SIGTERM: exit 0, last log line 'stopped'"
	else
		fail "server $name: SIGTERM: exit 0, last log line 'stopped'" "exit $rc, last line: $(tail -n1 "$log" | head -c 300)"
	fi
}

# call METHOD URL [CURL ARGS...]: one request to $BASE; body in $T/b,
# headers in $T/h, status in CODE
BASE=
call() {
	local m=$1 u=$2
	shift 2
	: >"$T/b"
	: >"$T/h"
	if [ "$m" = HEAD ]; then
		CODE=$(curl -sS --max-time 60 -I -o /dev/null -D "$T/h" -w '%{http_code}' "$@" "$BASE$u" 2>"$T/curl.err")
	else
		CODE=$(curl -sS --max-time 60 -X "$m" -o "$T/b" -D "$T/h" -w '%{http_code}' "$@" "$BASE$u" 2>"$T/curl.err")
	fi
	[ -n "$CODE" ] && [ "$CODE" != 000 ] || CODE="(no answer: $(head -c 200 "$T/curl.err"))"
}

# hdr NAME: the last value of response header NAME (case-insensitive)
hdr() { tr -d '\r' <"$T/h" | awk -v n="$(echo "$1" | tr '[:upper:]' '[:lower:]')" 'BEGIN { FS = ": " } tolower($1) == n { v = substr($0, length($1) + 3) } END { print v }'; }

# expect_json NAME STATUS BODY: status, Content-Type application/json and the
# body exactly BODY plus one newline (Go's json.Encoder)
expect_json() {
	local name=$1 st=$2
	printf '%s\n' "$3" >"$T/want"
	if [ "$CODE" != "$st" ]; then
		fail "$name" "status $CODE, want $st: $(head -c 400 "$T/b")"
	elif [ "$(hdr Content-Type)" != application/json ]; then
		fail "$name" "Content-Type '$(hdr Content-Type)', want application/json"
	elif ! cmp -s "$T/b" "$T/want"; then
		fail "$name" "body $(head -c 600 "$T/b"), want $(head -c 600 "$T/want")"
	else
		ok "$name"
	fi
}

# expect_error NAME STATUS SUBSTRING: a JSON error: status, Content-Type
# application/json, no Content-Disposition, body exactly
# {"code":STATUS,"error":"..."} and a newline, the raw JSON message contains
# SUBSTRING
expect_error() {
	local name=$1 st=$2 sub=$3
	if [ "$CODE" != "$st" ]; then
		fail "$name" "status $CODE, want $st: $(head -c 400 "$T/b")"
	elif [ "$(hdr Content-Type)" != application/json ]; then
		fail "$name" "Content-Type '$(hdr Content-Type)', want application/json (body $(head -c 200 "$T/b"))"
	elif [ -n "$(hdr Content-Disposition)" ]; then
		fail "$name" "Content-Disposition '$(hdr Content-Disposition)' sent with an error"
	elif [ "$(wc -l <"$T/b")" -ne 1 ] || ! tail -c1 "$T/b" | od -An -c | grep -q '\\n' ||
		! grep -Eq "^\{\"code\":$st,\"error\":\"([^\"\\\\]|\\\\.)+\"\}$" "$T/b"; then
		fail "$name" "body is not {\"code\":$st,\"error\":\"...\"}\\n: $(head -c 400 "$T/b")"
	elif ! grep -qF -- "$sub" "$T/b"; then
		fail "$name" "message does not contain '$sub': $(head -c 400 "$T/b")"
	else
		ok "$name"
	fi
}
NOTHING='{"code":404,"error":"nothing found"}'

# expect_pprof NAME FILENAME: a profile answer: 200, octet-stream,
# Content-Disposition attachment; filename="FILENAME", gzip body
expect_pprof() {
	local name=$1 fn=$2 magic
	magic=$(head -c 2 "$T/b" | od -An -tx1 | tr -d ' \n')
	if [ "$CODE" != 200 ]; then
		fail "$name" "status $CODE: $(head -c 400 "$T/b")"
	elif [ "$(hdr Content-Type)" != application/octet-stream ]; then
		fail "$name" "Content-Type '$(hdr Content-Type)', want application/octet-stream"
	elif [ "$(hdr Content-Disposition)" != "attachment; filename=\"$fn\"" ]; then
		fail "$name" "Content-Disposition '$(hdr Content-Disposition)', want 'attachment; filename=\"$fn\"'"
	elif [ "$magic" != 1f8b ]; then
		fail "$name" "body is not gzip (magic '$magic')"
	else
		ok "$name"
	fi
}

# gp OUT ARGS...: go tool pprof ARGS >OUT (stderr apart: it says "Fetching
# profile over HTTP" for URLs); fails if pprof fails, or prints nothing for
# -top/-raw/-traces (-tags prints nothing for a profile without labels)
gp() {
	local out=$1
	shift
	go tool pprof "$@" >"$out" 2>"$out.err" || return 1
	case " $* " in *" -tags "*) ;; *) [ -s "$out" ] ;; esac
}

# same_pprof NAME A B ARGS...: go tool pprof ARGS prints the same for A and B
# (files or URLs)
same_pprof() {
	local name=$1 a=$2 b=$3
	shift 3
	if ! gp "$T/.pa" "$@" "$a"; then
		fail "$name" "go tool pprof $* $a: $(head -c 400 "$T/.pa.err")"
	elif ! gp "$T/.pb" "$@" "$b"; then
		fail "$name" "go tool pprof $* $b: $(head -c 400 "$T/.pb.err")"
	else
		same_output "$name" "$T/.pa" "$T/.pb"
	fi
}

# same_traces NAME A B: go tool pprof -traces prints the same samples for A
# and B (every sample: values, string and numeric labels, the whole stack by
# function name and line), in any order. The server stores samples sorted by
# stack (lib/store/sqlite.c), so the sample order, and with it the location
# ids of -raw, can differ from the upload; the profile is the same.
canon_traces() {
	awk '/^-----------\+/ { n++; if (b != "") print "B" b; b = ""; next }
	!n { print "A" $0; next } { b = b "|" $0 } END { if (b != "") print "B" b }' "$1" >"$1.c"
	{ grep '^A' "$1.c"; grep '^B' "$1.c" | LC_ALL=C sort; } >"$1"
}
same_traces() {
	local name=$1 a=$2 b=$3
	if ! gp "$T/.ta" -traces "$a"; then
		fail "$name" "go tool pprof -traces $a: $(head -c 400 "$T/.ta.err")"
	elif ! gp "$T/.tb" -traces "$b"; then
		fail "$name" "go tool pprof -traces $b: $(head -c 400 "$T/.tb.err")"
	else
		canon_traces "$T/.ta"
		canon_traces "$T/.tb"
		same_output "$name" "$T/.ta" "$T/.tb"
	fi
}

# JSON of metadata: meta ID TYPE SERVICE LABELS_JSON CREATED_AT
meta() {
	local l=
	[ -n "$4" ] && l=",\"labels\":$4"
	printf '{"id":"%s","type":"%s","service":"%s"%s,"created_at":"%s"}' "$1" "$2" "$3" "$l" "$5"
}
# list_json META...: the envelope of a list answer
list_json() {
	local IFS=,
	printf '{"code":200,"body":[%s]}' "$*"
}

# post_ok NAME FILE QUERY TYPE SERVICE LABELS_JSON CREATED_AT: POST FILE, the
# answer must be exactly the metadata; sets ID (empty on failure)
declare -A POSTED
post_ok() {
	local name=$1 f=$2 q=$3 ty=$4 svc=$5 lj=$6 at=$7
	ID=
	call POST "/api/0/profiles?$q" --data-binary "@$f"
	local id
	id=$(sed -n 's/^{"code":200,"body":{"id":"\([0-9a-v]\{20\}\)",.*/\1/p' "$T/b")
	if [ -z "$id" ]; then
		fail "$name" "status $CODE: $(head -c 400 "$T/b")"
		return 1
	fi
	POSTED[$BASE $ty]=$((${POSTED[$BASE $ty]:-0} + 1))
	local want
	want=$(meta "$id" "$ty" "$svc" "$lj" "$at")
	if [ -z "$at" ]; then # created_at unknown in advance: take it from the answer
		at=$(sed -n 's/.*"created_at":"\([^"]*\)"}}$/\1/p' "$T/b")
		want=$(meta "$id" "$ty" "$svc" "$lj" "$at")
	fi
	expect_json "$name" 200 "{\"code\":200,\"body\":$want}"
	ID=$id
}

# metric NAME_WITH_LABELS: its value in $T/metrics
metric() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print "absent" }' "$T/metrics"; }

# ---- 0. prerequisites ------------------------------------------------------------------

for b in "$PROFD" "$GOAPP" "$ORACLE"; do
	if [ ! -x "$b" ]; then
		fail "setup: $b exists" "not built; run: make && make build/goapp build/oracle"
		exit 1
	fi
done
for c in go curl gzip; do
	if ! command -v "$c" >/dev/null; then
		fail "setup: $c in PATH" "needed by this test"
		exit 1
	fi
done

# ---- 1. capture 3 sets (different workloads), start the servers ------------------------

WL=([1]=auth [2]=search [3]=ingest)
declare -a cap_pid
for i in 1 2 3; do
	GOAPP_ARGS="-workload ${WL[i]}" "$ROOT/tests/e2e/capture.sh" "$GOAPP" "$C/$i" 1 >"$T/capture$i.log" 2>&1 &
	cap_pid[i]=$!
done
# meanwhile: a gzip bomb (300 MiB of zeros in ~300 KB) and an oversized body
(head -c 300M /dev/zero | gzip -9 >"$T/bomb.gz") &
bomb_pid=$!
head -c 2M /dev/urandom >"$T/big.bin"
start_server A --retention 200000h --max-body 1MiB || exit 1
start_server B --retention 0 --max-merge-profiles 2 || exit 1

capfail=0
for i in 1 2 3; do
	retried=
	if ! wait "${cap_pid[i]}"; then
		for r in 1 2; do # capture.sh can fail on a loaded machine: retry alone
			retried=" (retry $r after: $(grep -m1 . "$T/capture$i.log"))"
			rm -rf "${C:?}/$i"
			if GOAPP_ARGS="-workload ${WL[i]}" "$ROOT/tests/e2e/capture.sh" "$GOAPP" "$C/$i" 1 >"$T/capture$i.log" 2>&1; then break; fi
			retried=failed
		done
		if [ "$retried" = failed ]; then
			fail "setup: capture set $i from goapp" "capture.sh failed 3 times: $(tail -c 600 "$T/capture$i.log")"
			capfail=1
			continue
		fi
	fi
	missing=
	for t in $TYPES; do [ -s "$C/$i/$t.pb.gz" ] || missing="$missing $t"; done
	if [ -n "$missing" ]; then
		fail "setup: capture set $i from goapp" "missing profiles:$missing"
		capfail=1
	else
		ok "setup: capture set $i from goapp (-workload ${WL[i]}, 7 types, cpu 1s)$retried"
	fi
done
wait "$bomb_pid"
if [ "$capfail" -ne 0 ]; then
	fail "setup" "profile capture failed, the other checks cannot run"
	exit 1
fi
echo "# captured, $(elapsed)"

# ---- 2. end to end on server A ------------------------------------------------------------

BASE=http://127.0.0.1:${SPORT[A]}
S=api
LBL=([1]='version=1.0,dc=fra' [2]='version=1.1,dc=fra' [3]='version=1.0,dc=ams')
LJ=([1]='[{"key":"dc","value":"fra"},{"key":"version","value":"1.0"}]'
	[2]='[{"key":"dc","value":"fra"},{"key":"version","value":"1.1"}]'
	[3]='[{"key":"dc","value":"ams"},{"key":"version","value":"1.0"}]')
AT=([1]=2019-05-30T11:49:00 [2]=2019-05-30T11:50:00 [3]=2019-05-30T11:51:00)
declare -A ID_OF M_OF # set/type -> id, metadata JSON (placeholders if the POST failed)
nstored=0
for i in 1 2 3; do
	for t in $TYPES; do
		ID_OF[$i/$t]=post-of-$i-$t-failed
		M_OF[$i/$t]="{\"post of $i/$t\":\"failed\"}"
		if post_ok "POST set $i $t (labels ${LBL[i]}, created_at ${AT[i]}): 200, exact metadata" "$C/$i/$t.pb.gz" \
			"service=$S&type=$t&labels=${LBL[i]}&created_at=${AT[i]}" "$t" "$S" "${LJ[i]}" "${AT[i]}Z"; then
			ID_OF[$i/$t]=$ID
			M_OF[$i/$t]=$(meta "$ID" "$t" "$S" "${LJ[i]}" "${AT[i]}Z")
			nstored=$((nstored + 1))
		fi
	done
done
if [ "$nstored" -ne 21 ]; then
	fail "setup: 21 profiles stored" "only $nstored (the checks that use the others fail too)"
fi
# a second service, no labels, created_at from the pprof's time_nanos
post_ok "POST without labels nor created_at: created_at is the pprof's time, no labels field" \
	"$C/1/cpu.pb.gz" "service=web&type=cpu" cpu web "" ""
tn=$("$ORACLE" check "$C/1/cpu.pb.gz" 2>/dev/null | sed -n 's/^Time: \(....-..-.. ..:..:..\).*/\1/p' | tr ' ' T)
if [ -n "$tn" ] && grep -q "\"created_at\":\"${tn}Z\"" "$T/b"; then ok "POST: created_at = the pprof's time_nanos (${tn}Z)"; else fail "POST: created_at = the pprof's time_nanos" "pprof time '$tn', answer $(head -c 300 "$T/b")"; fi
echo "# posted, $(elapsed)"

call GET /api/0/services
expect_json "GET /api/0/services: exact sorted list" 200 '{"code":200,"body":["api","web"]}'

W="from=2019-05-30T00:00:00&to=2019-05-31T00:00:00"
# list_check NAME QUERY KEY...: list answer is exactly the metadata of KEYs
list_check() {
	local name=$1 q=$2 k m=()
	shift 2
	for k; do m+=("${M_OF[$k]}"); done
	call GET "/api/0/profiles?$q"
	expect_json "$name" 200 "$(list_json "${m[@]}")"
}
list_check "list type=cpu: 3 profiles, ascending created_at" "service=$S&type=cpu&$W" 1/cpu 2/cpu 3/cpu
list_check "list type=heap: heap only (allocs is another series)" "service=$S&type=heap&$W" 1/heap 2/heap 3/heap
list_check "list type=allocs" "service=$S&type=allocs&$W" 1/allocs 2/allocs 3/allocs
# list_set_check NAME QUERY KEY...: list answer holds exactly the metadata of
# KEYs, ascending created_at (the order of equal times is not specified)
list_set_check() {
	local name=$1 q=$2 k
	shift 2
	for k; do echo "${M_OF[$k]}"; done | sort >"$T/want.set"
	call GET "/api/0/profiles?$q"
	sed -n 's/^{"code":200,"body":\[\(.*\)\]}$/\1/p' "$T/b" | sed 's/},{"id"/}\n{"id"/g' >"$T/got.list"
	sort "$T/got.list" >"$T/got.set"
	if [ "$CODE" != 200 ] || [ "$(hdr Content-Type)" != application/json ]; then
		fail "$name" "status $CODE, Content-Type '$(hdr Content-Type)': $(head -c 300 "$T/b")"
	elif ! cmp -s "$T/want.set" "$T/got.set"; then
		fail "$name" "$(diff "$T/want.set" "$T/got.set" | head -c 600)"
	elif ! sed 's/.*"created_at":"\([^"]*\)"}$/\1/' "$T/got.list" | sort -c 2>/dev/null; then
		fail "$name" "not ascending by created_at"
	else
		ok "$name"
	fi
}
ALL=()
for i in 1 2 3; do for t in $TYPES; do ALL+=("$i/$t"); done; done
list_set_check "list without type: all 21 profiles, ascending created_at" "service=$S&$W" "${ALL[@]}"
list_check "list labels=version=1.0: sets 1 and 3" "service=$S&type=cpu&$W&labels=version=1.0" 1/cpu 3/cpu
list_check "list labels=dc=fra,version=1.0 (AND): set 1" "service=$S&type=cpu&$W&labels=dc=fra,version=1.0" 1/cpu
list_check "list labels=version=1.1,dc=fra (AND, any order): set 2" "service=$S&type=cpu&$W&labels=version=1.1,dc=fra" 2/cpu
list_set_check "list labels=dc=fra without type: 14 profiles of sets 1, 2" "service=$S&$W&labels=dc=fra" "${ALL[@]:0:14}"
call GET "/api/0/profiles?service=$S&type=cpu&$W&labels=version=2.0"
expect_json "list with a non-matching label: 404 nothing found" 404 "$NOTHING"
call GET "/api/0/profiles?service=$S&type=cpu&$W&labels=version=1.0,dc=xxx"
expect_json "list labels where only one of two matches (AND): 404" 404 "$NOTHING"
call GET "/api/0/profiles?service=nosuch&$W"
expect_json "list of an unknown service: 404 nothing found" 404 "$NOTHING"

# windows: [from, to], both ends inclusive, ns resolution, every time format
list_check "window [11:49:00, 11:50:00]: both ends inclusive" "service=$S&type=cpu&from=${AT[1]}&to=${AT[2]}" 1/cpu 2/cpu
list_check "window from == to: the profile at that instant" "service=$S&type=cpu&from=${AT[2]}&to=${AT[2]}" 2/cpu
list_check "window from 1 ns after a profile excludes it (RFC3339 with ns)" \
	"service=$S&type=cpu&from=2019-05-30T11:49:00.000000001Z&to=2019-05-30T11:51:00Z" 2/cpu 3/cpu
list_check "window to 1 ns before a profile excludes it" \
	"service=$S&type=cpu&from=0&to=2019-05-30T11:50:59.999999999Z" 1/cpu 2/cpu
u3=$(date -ud "${AT[3]}" +%s)
list_check "window in unix seconds ($u3)" "service=$S&type=cpu&from=$u3&to=$u3" 3/cpu
list_check "window in RFC3339 with an offset (13:50:00+02:00)" \
	"service=$S&type=cpu&from=2019-05-30T13:50:00%2B02:00&to=2019-05-30T13:50:00%2B02:00" 2/cpu
list_check "window from 11:50:00 to now" "service=$S&type=cpu&from=${AT[2]}&to=now" 2/cpu 3/cpu
call GET "/api/0/profiles?service=$S&type=cpu&from=2019-05-30T11:51:01&to=2019-05-30T12:00:00"
expect_json "window after every profile: 404 nothing found" 404 "$NOTHING"
call GET "/api/0/profiles?service=$S&type=cpu&from=2019-05-30T11:48:00&to=2019-05-30T11:48:59"
expect_json "window before every profile: 404 nothing found" 404 "$NOTHING"

# limit: newest N, ascending
list_check "limit=2: the newest 2, ascending" "service=$S&type=cpu&$W&limit=2" 2/cpu 3/cpu
list_check "limit=1: the newest" "service=$S&type=cpu&$W&limit=1" 3/cpu
list_check "limit=0: no limit" "service=$S&type=cpu&$W&limit=0" 1/cpu 2/cpu 3/cpu
list_check "limit=5 over the count: all" "service=$S&type=cpu&$W&limit=5" 1/cpu 2/cpu 3/cpu
list_check "limit=1 with a label filter: the newest match" "service=$S&type=heap&$W&labels=dc=fra&limit=1" 2/heap

# get by id: go tool pprof reads the URL as the uploaded file (-top, -tags,
# -traces in any sample order, the -raw header); the oracle finds the same
# column totals (which include the samples without a stack)
col_sums() {
	"$ORACLE" check "$1" 2>&1 | awk '/^Samples:/ { s = 1; next } /^Locations/ { s = 0 }
	s { i = index($0, ":"); if (!i) next; v = substr($0, 1, i - 1)
	    if (v !~ /^ *-?[0-9]+( +-?[0-9]+)* *$/) next
	    n = split(v, a, " "); for (j = 1; j <= n; j++) t[j] += a[j]; if (n > nc) nc = n }
	END { for (j = 1; j <= nc; j++) printf "%s%.0f", (j > 1 ? " " : ""), t[j]; print "" }'
}
raw_head() { gp "$1" -raw "$2" && sed -i '/^Samples:/,$d' "$1"; }
GB=$T/getbyid
mkdir -p "$GB"
for t in $TYPES; do
	i=1
	[ "$t" = heap ] || [ "$t" = goroutine ] && i=2
	id=${ID_OF[$i/$t]} f=$C/$i/$t.pb.gz u="$BASE/api/0/profiles/${ID_OF[$i/$t]}"
	same_pprof "get $t by id: go tool pprof -top URL = -top of the uploaded file" "$u" "$f" "${TOP[@]}"
	same_traces "get $t by id: go tool pprof -traces URL = -traces of the uploaded file (any order)" "$u" "$f"
	if raw_head "$GB/$t.a" "$u" && raw_head "$GB/$t.b" "$f"; then
		same_output "get $t by id: -raw header (types, period, time, duration) = the file's" "$GB/$t.a" "$GB/$t.b"
	else
		fail "get $t by id: -raw header = the file's" "$(cat "$GB/$t.a.err" "$GB/$t.b.err" 2>/dev/null | head -c 300)"
	fi
	curl -sS -o "$GB/$t.pb.gz" "$u"
	got=$(col_sums "$GB/$t.pb.gz") want=$(col_sums "$f")
	if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "get $t by id: oracle column totals = the file's ($got)"; else fail "get $t by id: oracle column totals = the file's" "got '$got', want '$want'"; fi
done
same_pprof "get cpu by id: go tool pprof -tags URL = -tags of the uploaded file" "$BASE/api/0/profiles/${ID_OF[3/cpu]}" "$C/3/cpu.pb.gz" -tags
call GET "/api/0/profiles/${ID_OF[1/cpu]}"
expect_pprof "get by id: 200, octet-stream, Content-Disposition filename = id, gzip" "${ID_OF[1/cpu]}"

# id1+id2 and merge vs go tool pprof -proto of the uploaded files
PM=$T/proto
mkdir -p "$PM"
proto() { # OUT FILES...: go tool pprof -proto FILES > OUT
	local out=$1
	shift
	go tool pprof -proto "$@" >"$out" 2>"$out.err"
}
for t in $STRICT_TYPES; do
	proto "$PM/$t-12.pb.gz" "$C/1/$t.pb.gz" "$C/2/$t.pb.gz"
	proto "$PM/$t-123.pb.gz" "$C/1/$t.pb.gz" "$C/2/$t.pb.gz" "$C/3/$t.pb.gz"
done
proto "$PM/cpu-13.pb.gz" "$C/1/cpu.pb.gz" "$C/3/cpu.pb.gz"
proto "$PM/cpu-23.pb.gz" "$C/2/cpu.pb.gz" "$C/3/cpu.pb.gz"
ids12="${ID_OF[1/cpu]}+${ID_OF[2/cpu]}"
same_pprof "get id1+id2 (cpu): -top = go tool pprof -proto of the 2 files" "$BASE/api/0/profiles/$ids12" "$PM/cpu-12.pb.gz" "${TOP[@]}"
same_pprof "get id1+id2 (cpu): -tags = go tool pprof -proto of the 2 files" "$BASE/api/0/profiles/$ids12" "$PM/cpu-12.pb.gz" -tags
same_pprof "get id1+id2 (heap): -top = go tool pprof -proto of the 2 files" "$BASE/api/0/profiles/${ID_OF[1/heap]}+${ID_OF[2/heap]}" "$PM/heap-12.pb.gz" "${TOP[@]}"
call GET "/api/0/profiles/$ids12"
expect_pprof "get id1+id2: 200, octet-stream, filename = \"id1+id2\"" "$ids12"

for t in $STRICT_TYPES; do
	u="$BASE/api/0/profiles/merge?service=$S&type=$t&$W"
	same_pprof "merge $t (3 profiles): -top = go tool pprof -proto of the 3 files" "$u" "$PM/$t-123.pb.gz" "${TOP[@]}"
	same_pprof "merge $t (3 profiles): -tags = go tool pprof -proto of the 3 files" "$u" "$PM/$t-123.pb.gz" -tags
	same_traces "merge $t (3 profiles): -traces = go tool pprof -proto of the 3 files (any order)" "$u" "$PM/$t-123.pb.gz"
done
same_pprof "merge heap with -sample_index=alloc_space: -top = go tool pprof -proto" \
	"$BASE/api/0/profiles/merge?service=$S&type=heap&$W" "$PM/heap-123.pb.gz" "${TOP[@]}" -sample_index=alloc_space
same_pprof "merge cpu labels=version=1.0: -top = go tool pprof -proto of sets 1, 3" \
	"$BASE/api/0/profiles/merge?service=$S&type=cpu&$W&labels=version=1.0" "$PM/cpu-13.pb.gz" "${TOP[@]}"
same_pprof "merge cpu limit=2: -top = go tool pprof -proto of the newest 2 (sets 2, 3)" \
	"$BASE/api/0/profiles/merge?service=$S&type=cpu&$W&limit=2" "$PM/cpu-23.pb.gz" "${TOP[@]}"
same_pprof "merge cpu window [11:49:00, 11:50:00]: -top = go tool pprof -proto of sets 1, 2" \
	"$BASE/api/0/profiles/merge?service=$S&type=cpu&from=${AT[1]}&to=${AT[2]}" "$PM/cpu-12.pb.gz" "${TOP[@]}"
same_traces "merge matching one profile (labels dc=fra,version=1.0): -traces = that file's" \
	"$BASE/api/0/profiles/merge?service=$S&type=cpu&$W&labels=dc=fra,version=1.0" "$C/1/cpu.pb.gz"
call GET "/api/0/profiles/merge?service=$S&type=cpu&$W"
expect_pprof "merge: 200, octet-stream, Content-Disposition filename = type, gzip" cpu
cp "$T/b" "$T/merge-cpu.pb.gz"
call GET "/api/0/profiles/merge?service=$S&type=cpu&$W&seconds=30&instance_id=x&foo=bar"
if [ "$CODE" = 200 ] && cmp -s <(gzip -dc "$T/b") <(gzip -dc "$T/merge-cpu.pb.gz"); then ok "merge: seconds, instance_id and unknown parameters ignored (same profile)"; else fail "merge: seconds, instance_id and unknown parameters ignored" "status $CODE or a different profile"; fi

# goroutine and threadcreate: `go tool pprof -proto` drops samples without
# locations (its focus filter), which these profiles have; the reference is
# the oracle (profile.Merge), compared with go tool pprof -traces and -top and
# on the column totals (which count the empty stacks too).
for t in goroutine threadcreate; do
	call GET "/api/0/profiles/merge?service=$S&type=$t&$W"
	if [ "$CODE" != 200 ]; then
		fail "merge $t (3 profiles)" "status $CODE: $(head -c 300 "$T/b")"
		continue
	fi
	cp "$T/b" "$PM/srv-$t.pb.gz"
	if ! "$ORACLE" merge "$PM/or-$t.pb.gz" "$C/1/$t.pb.gz" "$C/2/$t.pb.gz" "$C/3/$t.pb.gz" >"$T/.oerr" 2>&1; then
		fail "merge $t: oracle merge" "$(head -c 300 "$T/.oerr")"
		continue
	fi
	if "$ORACLE" check "$PM/srv-$t.pb.gz" >/dev/null 2>"$T/.oerr"; then ok "merge $t: the oracle (profile.Parse + CheckValid) accepts the server's merge"; else fail "merge $t: the oracle accepts the server's merge" "$(head -c 300 "$T/.oerr")"; fi
	same_traces "merge $t (3 profiles): -traces = oracle profile.Merge (any order)" "$PM/srv-$t.pb.gz" "$PM/or-$t.pb.gz"
	same_pprof "merge $t (3 profiles): -top = oracle profile.Merge" "$PM/srv-$t.pb.gz" "$PM/or-$t.pb.gz" "${TOP[@]}"
	got=$(col_sums "$PM/srv-$t.pb.gz") want=$(col_sums "$PM/or-$t.pb.gz")
	if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "merge $t: totals = oracle's, empty stacks included ($got)"; else fail "merge $t: totals = oracle's" "got '$got', want '$want'"; fi
done

# merge without type
call GET "/api/0/profiles/merge?service=$S&$W"
expect_error "merge without type over mixed types: 400 JSON error" 400 "sample types"
call GET "/api/0/profiles/merge?service=$S&$W&labels=dc=fra,version=1.0"
expect_error "merge without type over 7 types of one set: 400 JSON error" 400 "sample types"
call GET "/api/0/profiles/merge?service=web&from=0&to=now"
if [ "$CODE" = 200 ] && [ "$(hdr Content-Type)" = application/octet-stream ]; then
	cp "$T/b" "$T/web.pb.gz"
	same_traces "merge without type, all matches one type: 200, -traces = the file's" "$T/web.pb.gz" "$C/1/cpu.pb.gz"
else
	fail "merge without type, all matches one type: 200" "status $CODE: $(head -c 300 "$T/b")"
fi
call GET "/api/0/profiles/${ID_OF[1/cpu]}+${ID_OF[1/heap]}"
expect_error "get id1+id2 of different sample types (cpu+heap): 400 JSON error" 400 "sample types"
call GET "/api/0/profiles/merge?service=$S&type=cpu&$W&labels=version=9"
expect_json "merge with no match: 404 nothing found" 404 "$NOTHING"
echo "# end to end done, $(elapsed)"

# ---- 3. profefe compatibility ---------------------------------------------------------

# the agent escapes each label key and value, then the query string again
post_ok "POST labels=version%3D1.0.0%252Bbuild (profefe agent): value 1.0.0+build" "$C/1/cpu.pb.gz" \
	"service=agent&type=cpu&labels=version%3D1.0.0%252Bbuild&created_at=2019-05-30T12:00:00" \
	cpu agent '[{"key":"version","value":"1.0.0+build"}]' 2019-05-30T12:00:00Z
AGENT_M=$(meta "$ID" cpu agent '[{"key":"version","value":"1.0.0+build"}]' 2019-05-30T12:00:00Z)
call GET "/api/0/profiles?service=agent&$W&labels=version%3D1.0.0%252Bbuild"
expect_json "list with the agent's encoding finds it" 200 "$(list_json "$AGENT_M")"
call GET "/api/0/profiles?service=agent&$W&labels=version=1.0.0%2Bbuild"
expect_json "list labels=version=1.0.0%2Bbuild (decoded twice: '+' is a space): 404" 404 "$NOTHING"
post_ok "POST labels=,namespace=ops,pod=p-1&instance_id=x (kube-profefe): leading comma skipped, instance_id ignored" \
	"$C/2/heap.pb.gz" "service=kube&type=heap&instance_id=i-123&labels=,namespace=ops,pod=p-1&created_at=2019-05-30T12:00:00" \
	heap kube '[{"key":"namespace","value":"ops"},{"key":"pod","value":"p-1"}]' 2019-05-30T12:00:00Z
KUBE_M=$(meta "$ID" heap kube '[{"key":"namespace","value":"ops"},{"key":"pod","value":"p-1"}]' 2019-05-30T12:00:00Z)
call GET "/api/0/profiles?service=kube&$W&labels=,namespace=ops&instance_id=other"
expect_json "list labels=,namespace=ops&instance_id=other (kube-profefe)" 200 "$(list_json "$KUBE_M")"
# kube-profefe's GetProfiles always sends a type: "unknown" (profefe's name of no
# type) for --profile-type unknown or one it does not know; profefe read it as every type
call GET "/api/0/profiles?from=2019-05-30T00%3A00%3A00&service=kube&to=2019-05-31T00%3A00%3A00&type=unknown"
expect_json "list type=unknown (kubectl profefe get profiles): every type" 200 "$(list_json "$KUBE_M")"
call GET "/api/0/profiles/merge?service=kube&$W&type=unknown"
if [ "$CODE" = 200 ] && [ "$(hdr Content-Disposition)" = 'attachment; filename="merge"' ]; then ok "merge type=unknown: every type"; else fail "merge type=unknown: every type" "status $CODE: $(head -c 300 "$T/b")"; fi
post_ok "POST labels with spaces, a=b=c, a key without '=', sorted by key" "$C/3/mutex.pb.gz" \
	"service=lbl&type=mutex&labels=%20zz%20=%201%20,a=b=c,novalue&created_at=2019-05-30T12:00:00" \
	mutex lbl '[{"key":"a","value":"b=c"},{"key":"novalue","value":""},{"key":"zz","value":"1"}]' 2019-05-30T12:00:00Z
post_ok "POST escapes as Go: <>& as \\u003c \\u003e \\u0026, a quote in a label" "$C/3/block.pb.gz" \
	"service=a%3Cb%3E%26c&type=block&labels=q=say%2522hi%2522&created_at=2019-05-30T12:00:00" \
	block 'a\u003cb\u003e\u0026c' '[{"key":"q","value":"say\"hi\""}]' 2019-05-30T12:00:00Z
post_ok "POST type=%20cpu%20: the type is trimmed" "$C/3/cpu.pb.gz" \
	"service=trim&type=%20cpu%20&created_at=2019-05-30T12:00:00" cpu trim "" 2019-05-30T12:00:00Z
post_ok "POST an uncompressed profile (raw profile.proto)" <(gzip -dc "$C/2/cpu.pb.gz") \
	"service=raw&type=cpu&created_at=2019-05-30T12:00:00" cpu raw "" 2019-05-30T12:00:00Z
same_traces "get of an uncompressed upload: -traces = the file's" "$BASE/api/0/profiles/$ID" "$C/2/cpu.pb.gz"
post_ok "POST created_at in RFC3339 with an offset and a fraction: stored in UTC, truncated to seconds" "$C/3/cpu.pb.gz" \
	"service=tz&type=cpu&created_at=2019-05-30T13:49:02.75%2B02:00" cpu tz "" 2019-05-30T11:49:02Z
post_ok "POST a cpu profile without a type: the type is inferred" "$C/3/cpu.pb.gz" \
	"service=slash&created_at=2019-05-30T12:00:00" cpu slash "" 2019-05-30T12:00:00Z
call POST "/api/0/profiles/?service=slash&type=allocs&created_at=2019-05-30T12:00:01" --data-binary "@$C/3/allocs.pb.gz"
if [ "$CODE" = 200 ]; then ok "POST /api/0/profiles/ (trailing slash): 200"; POSTED[$BASE allocs]=$((${POSTED[$BASE allocs]:-0} + 1)); else fail "POST /api/0/profiles/ (trailing slash): 200" "status $CODE: $(head -c 300 "$T/b")"; fi
up=$(curl -sS -o "$T/b" -w '%{http_code}' -H 'Expect: 100-continue' --data-binary "@$C/1/cpu.pb.gz" "$BASE/api/0/profiles?service=trim&type=cpu&created_at=2019-05-30T12:00:00")
if [ "$up" = 200 ]; then ok "POST with Expect: 100-continue and good parameters: 200"; POSTED[$BASE cpu]=$((${POSTED[$BASE cpu]:-0} + 1)); else fail "POST with Expect: 100-continue and good parameters: 200" "status $up: $(head -c 200 "$T/b")"; fi

call GET "/api/0/profiles/?service=$S&type=cpu&$W&limit=1"
expect_json "GET /api/0/profiles/ (trailing slash) = /api/0/profiles" 200 "$(list_json "${M_OF[3/cpu]}")"
call GET "/api/0/profiles?service=$S&type=cpu&type=heap&$W&limit=1"
expect_json "repeated parameter: the first value wins (type=cpu&type=heap)" 200 "$(list_json "${M_OF[3/cpu]}")"
call GET "/api/0/profiles?service=$S&type=&$W&limit=1&labels=dc=ams"
if [ "$CODE" = 200 ] && grep -q "\"created_at\":\"${AT[3]}Z\"" "$T/b"; then ok "type= (empty) means all types"; else fail "type= (empty) means all types" "status $CODE: $(head -c 300 "$T/b")"; fi
call GET "/api/0/services/"
expect_json "GET /api/0/services/ (trailing slash)" 200 \
	'{"code":200,"body":["a\u003cb\u003e\u0026c","agent","api","kube","lbl","raw","slash","trim","tz","web"]}'
call GET "/api/0/profiles/${ID_OF[2/cpu]}/"
expect_pprof "GET /api/0/profiles/{id}/ (trailing slash)" "${ID_OF[2/cpu]}"
call GET "/api/0/profiles/merge/?service=$S&type=cpu&$W"
expect_pprof "GET /api/0/profiles/merge/ (trailing slash) is the merge" cpu

call HEAD "/api/0/services"
if [ "$CODE" = 200 ] && [ "$(hdr Content-Type)" = application/json ]; then ok "HEAD /api/0/services: 200 application/json"; else fail "HEAD /api/0/services: 200 application/json" "status $CODE, Content-Type '$(hdr Content-Type)'"; fi
call HEAD "/api/0/profiles/${ID_OF[1/cpu]}"
if [ "$CODE" = 200 ] && [ "$(hdr Content-Type)" = application/octet-stream ]; then ok "HEAD /api/0/profiles/{id}: 200 octet-stream"; else fail "HEAD /api/0/profiles/{id}: 200 octet-stream" "status $CODE, Content-Type '$(hdr Content-Type)'"; fi
call HEAD "/api/0/profiles?service=$S&$W"
if [ "$CODE" = 200 ]; then ok "HEAD /api/0/profiles (list): 200"; else fail "HEAD /api/0/profiles (list): 200" "status $CODE"; fi
call HEAD "/healthz"
if [ "$CODE" = 200 ]; then ok "HEAD /healthz: 200"; else fail "HEAD /healthz: 200" "status $CODE"; fi

# 405 with Allow
# allow_check NAME METHOD URL ALLOW
allow_check() {
	call "$2" "$3"
	expect_json "$1: 405 JSON" 405 '{"code":405,"error":"method not allowed"}'
	if [ "$(hdr Allow)" = "$4" ]; then ok "$1: Allow: $4"; else fail "$1: Allow: $4" "Allow '$(hdr Allow)'"; fi
}
allow_check "PUT /api/0/profiles" PUT /api/0/profiles "GET, HEAD, POST"
allow_check "PATCH /api/0/profiles/" PATCH /api/0/profiles/ "GET, HEAD, POST"
allow_check "POST /api/0/profiles/merge" POST "/api/0/profiles/merge?service=$S&$W" "GET, HEAD"
allow_check "PUT /api/0/profiles/{id}" PUT "/api/0/profiles/${ID_OF[1/cpu]}" "GET, HEAD, DELETE"
allow_check "POST /api/0/services" POST /api/0/services "GET, HEAD"
allow_check "DELETE /api/0/version" DELETE /api/0/version "GET, HEAD"
# 404 on unknown paths
for p in /api/0/profilesXYZ /api/0/nothing /api/0/ /api/0/services/x "/api/0/profiles/${ID_OF[1/cpu]}/x"; do
	call GET "$p"
	expect_json "GET $p: 404 nothing found" 404 "$NOTHING"
done
call POST "/api/0/profilesXYZ?service=x&type=cpu" --data-binary "@$C/1/cpu.pb.gz"
expect_json "POST /api/0/profilesXYZ: 404 nothing found (not an id, not stored)" 404 "$NOTHING"

call GET /api/0/version
if [ "$CODE" = 200 ] && [ "$(hdr Content-Type)" = application/json ] &&
	grep -Eq '^\{"code":200,"body":\{"version":"[^"]+","commit":"[^"]*","build_time":"[^"]*"\}\}$' "$T/b"; then
	ok "GET /api/0/version: version, commit, build_time in this order"
else
	fail "GET /api/0/version: version, commit, build_time in this order" "status $CODE: $(head -c 300 "$T/b")"
fi
bt=$(sed -n 's/.*"build_time":"\([^"]*\)".*/\1/p' "$T/b")
if [[ $bt =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$ ]]; then ok "GET /api/0/version: build_time is RFC3339 (docs/api.md)"; else fail "GET /api/0/version: build_time is RFC3339 (docs/api.md)" "build_time '$bt'"; fi
if git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1; then
	cm=$(sed -n 's/.*"commit":"\([^"]*\)".*/\1/p' "$T/b")
	if [[ $cm =~ ^[0-9a-f]{7,40}$ ]]; then ok "GET /api/0/version: commit is a git sha ($cm)"; else fail "GET /api/0/version: commit is a git sha" "commit '$cm'"; fi
fi

# DELETE
post_ok "POST a profile to delete" "$C/2/cpu.pb.gz" "service=zdel&type=cpu&created_at=2019-05-30T12:00:00" \
	cpu zdel "" 2019-05-30T12:00:00Z
DEL_ID=$ID
call DELETE "/api/0/profiles/$DEL_ID"
expect_json "DELETE /api/0/profiles/{id}: {\"code\":200}" 200 '{"code":200}'
call GET "/api/0/profiles/$DEL_ID"
expect_error "GET a deleted id: 404 naming it" 404 "$DEL_ID"
call GET "/api/0/profiles?service=zdel&$W"
expect_json "list after DELETE: 404 nothing found" 404 "$NOTHING"
call DELETE "/api/0/profiles/$DEL_ID"
expect_error "DELETE it again: 404 naming it" 404 "$DEL_ID"
call GET /api/0/services
if [ "$CODE" = 200 ] && ! grep -q '"zdel"' "$T/b"; then ok "services after the last profile of a service is deleted: not listed"; else fail "services after the last profile of a service is deleted: not listed" "status $CODE: $(head -c 300 "$T/b")"; fi
echo "# compatibility done, $(elapsed)"

# ---- 4. bad input on server A: 4xx JSON, nothing stored, server alive -------------------

call GET /metrics
cp "$T/b" "$T/metrics"
STORED0=$(metric profd_store_profiles)
declare -A REJ=([bad_request]=0 [malformed]=0 [empty]=0 [too_large]=0 [too_old]=0)
# bad_post NAME STATUS SUBSTRING REASON QUERY CURL_ARGS...
bad_post() {
	local name=$1 st=$2 sub=$3 reason=$4 q=$5
	shift 5
	call POST "/api/0/profiles?$q" "$@"
	expect_error "$name" "$st" "$sub"
	REJ[$reason]=$((REJ[$reason] + 1))
}
Q="service=bad&type=cpu"
head -c 4096 /dev/urandom >"$T/random.bin"
head -c 1000 "$C/1/cpu.pb.gz" >"$T/trunc.gz"
# a valid profile without samples: sample_type samples/count, string table only
printf '\x0a\x04\x08\x01\x10\x02\x32\x00\x32\x07samples\x32\x05count' >"$T/empty.pb"
gzip -c "$T/empty.pb" >"$T/empty.pb.gz"
if "$ORACLE" check "$T/empty.pb" >/dev/null 2>&1; then ok "setup: the sample-less profile is valid pprof (oracle)"; else fail "setup: the sample-less profile is valid pprof (oracle)" "rejected"; fi
bad_post "POST random bytes: 400 malformed profile" 400 'malformed profile' malformed "$Q" --data-binary "@$T/random.bin"
bad_post "POST a truncated gzip: 400 malformed profile" 400 'malformed profile' malformed "$Q" --data-binary "@$T/trunc.gz"
bad_post "POST a legacy contention text profile as cpu: 400 naming its type" 400 \
	'declared type \"cpu\" but the profile is a block/mutex profile' bad_request "$Q" \
	--data-binary $'--- contention:\ncycles/second=1000\n1 1 @ 0x1 0x2\n'
bad_post "POST an empty body: 400" 400 'empty' empty "$Q" --data-binary ''
bad_post "POST without a body: 400" 400 'empty' empty "$Q"
# a bad parameter is answered before the body: with Expect: 100-continue (curl
# sends it for big bodies) nothing is uploaded for a 400 (--expect100-timeout: after
# its default 1 s curl sends the body anyway, as it may on a loaded machine)
head -c 900000 /dev/urandom >"$T/900k.bin"
up=$(curl -sS -o "$T/b" -w '%{http_code} %{size_upload}' --expect100-timeout 30 -H 'Expect: 100-continue' --data-binary "@$T/900k.bin" "$BASE/api/0/profiles?type=cpu")
REJ[bad_request]=$((REJ[bad_request] + 1))
if [ "$up" = "400 0" ] && grep -q 'missing \\"service\\"' "$T/b"; then ok "POST with Expect: 100-continue and no service: 400 before the body (0 bytes uploaded)"; else fail "POST with Expect: 100-continue and no service: 400 before the body" "status and bytes uploaded '$up': $(head -c 200 "$T/b")"; fi
bad_post "POST a profile without samples (raw): 400 malformed profile: profile is empty: no samples" 400 \
	'malformed profile: profile is empty: no samples' empty "$Q" --data-binary "@$T/empty.pb"
bad_post "POST a profile without samples (gzip): 400 malformed profile: profile is empty: no samples" 400 \
	'malformed profile: profile is empty: no samples' empty "$Q" --data-binary "@$T/empty.pb.gz"
bsz=$(stat -c %s "$T/bomb.gz")
bad_post "POST a gzip bomb ($bsz bytes -> 300 MiB): 413 naming the 64 MiB per-upload memory cap" 413 \
	'the memory limit of 64 MiB per profile caps it' too_large "$Q" --data-binary "@$T/bomb.gz"
bad_post "POST 2 MiB over --max-body 1MiB (Content-Length): 413 naming the limit" 413 '1048576' too_large "$Q" --data-binary "@$T/big.bin"
bad_post "POST 2 MiB over --max-body 1MiB (chunked): 413 naming the limit" 413 '1048576' too_large "$Q" \
	-H 'Transfer-Encoding: chunked' --data-binary "@$T/big.bin"
bad_post "POST chunked, a valid profile followed by 2 MiB: 413" 413 'max-body' too_large "$Q" \
	-H 'Transfer-Encoding: chunked' --data-binary @<(cat "$C/1/cpu.pb.gz" "$T/big.bin")
bad_post "POST without service: 400 missing \"service\"" 400 'bad request: missing \"service\"' bad_request \
	"type=cpu" --data-binary "@$C/1/cpu.pb.gz"
call POST "/api/0/profiles?type=cpu" --data-binary "@$C/1/cpu.pb.gz"
expect_json "POST without service: exact envelope" 400 '{"code":400,"error":"bad request: missing \"service\""}'
REJ[bad_request]=$((REJ[bad_request] + 1))
VALID='(valid: cpu, heap, block, mutex, goroutine, threadcreate, allocs, other)'
bad_post "POST a cpu profile as type allocs: 400 naming both types" 400 \
	'declared type \"allocs\" but the profile is a cpu profile [samples/count cpu/nanoseconds]' \
	bad_request "service=bad&type=allocs" --data-binary "@$C/1/cpu.pb.gz"
bad_post "POST an allocs profile as type cpu: 400 naming both types" 400 \
	'declared type \"cpu\" but the profile is an allocs profile [alloc_objects/count' \
	bad_request "service=bad&type=cpu" --data-binary "@$C/1/allocs.pb.gz"
bad_post "POST type=CPU: 400 unknown profile type (case-sensitive)" 400 "bad request: unknown profile type \\\"CPU\\\" $VALID" \
	bad_request "service=bad&type=CPU" --data-binary "@$C/1/cpu.pb.gz"
bad_post "POST type=trace: 400 not supported" 400 'bad request: profile type \"trace\" is not supported: profd stores pprof profiles only' \
	bad_request "service=bad&type=trace" --data-binary "@$C/1/cpu.pb.gz"
bad_post "POST created_at=2019-05-30 11:49:02: 400 bad timestamp" 400 'bad request: bad \"created_at\" timestamp' \
	bad_request "$Q&created_at=2019-05-30%2011:49:02" --data-binary "@$C/1/cpu.pb.gz"
bad_post "POST labels=k=%zz: 400 invalid URL escape" 400 'bad request: bad \"labels\" \"k=%zz\": invalid URL escape \"%zz\"' \
	bad_request "$Q&labels=k=%25zz" --data-binary "@$C/1/cpu.pb.gz"
bad_post "POST labels=k=%00 (NUL): 400" 400 'bad request: bad \"labels\"' \
	bad_request "$Q&labels=k=%2500" --data-binary "@$C/1/cpu.pb.gz"
bad_post "POST labels=k=%ff once decoded twice (not UTF-8): 400, not stored as a value answers show as U+FFFD" 400 \
	'bad request: bad \"labels\" \"k=%ff\": a label value is not valid UTF-8 once decoded' \
	bad_request "$Q&labels=k=%25ff" --data-binary "@$C/1/cpu.pb.gz"
long=$(head -c 8193 /dev/zero | tr '\0' x)
bad_post "POST a service of 128 bytes: 400 naming the store's limit" 400 'bad request: service must be 1..127 bytes' \
	malformed "service=${long:0:128}&type=cpu" --data-binary "@$C/1/cpu.pb.gz"
bad_post "POST a service with a control character: 400" 400 'bad request: service must not contain control characters (byte 0x01 at 1)' \
	malformed "service=a%01b&type=cpu" --data-binary "@$C/1/cpu.pb.gz"
bad_post "POST a service of 8193 bytes: 413 (parameter cap)" 413 '8192' bad_request "service=$long&type=cpu" --data-binary "@$C/1/cpu.pb.gz"
many=$(for k in $(seq 1 65); do printf 'k%d=v,' "$k"; done)
bad_post "POST 65 labels: 413 (label cap)" 413 '64' bad_request "$Q&labels=${many%,}" --data-binary "@$C/1/cpu.pb.gz"
bad_post "POST created_at older than the retention window: 400, not stored" 400 'retention' too_old \
	"$Q&created_at=1970-01-02T00:00:00" --data-binary "@$C/1/cpu.pb.gz"

# GET errors (list, merge, get)
# bad_get NAME STATUS SUBSTRING URL
bad_get() {
	call GET "$4"
	expect_error "$1" "$2" "$3"
}
L="/api/0/profiles?service=$S"
for r in list merge; do
	[ $r = list ] && P=$L || P="/api/0/profiles/merge?service=$S"
	bad_get "$r without from: 400 missing \"from\"" 400 'bad request: missing \"from\"' "$P&to=now"
	bad_get "$r with from= (empty means absent): 400 missing \"from\"" 400 'bad request: missing \"from\"' "$P&from=&to=now"
	bad_get "$r without to: 400 missing \"to\"" 400 'bad request: missing \"to\"' "$P&from=0"
	bad_get "$r without service: 400" 400 'bad request: missing \"service\"' "${P%%\?*}?$W"
	bad_get "$r type=CPU: 400 unknown profile type" 400 "bad request: unknown profile type \\\"CPU\\\" $VALID" "$P&$W&type=CPU"
	bad_get "$r type=trace: 400 (profefe's merge said 405)" 400 'profile type \"trace\" is not supported' "$P&$W&type=trace"
	bad_get "$r limit=abc: 400 strconv.Atoi" 400 'bad request: bad \"limit\" \"abc\": strconv.Atoi: parsing \"abc\": invalid syntax' "$P&$W&limit=abc"
	bad_get "$r limit=-1: 400" 400 'bad request: bad \"limit\" \"-1\": must be \u003e= 0' "$P&$W&limit=-1"
	bad_get "$r from > to: 400" 400 'bad request: \"from\" after \"to\" (from 2019-05-30T12:00:00Z, to 2019-05-30T11:00:00Z)' \
		"$P&from=2019-05-30T12:00:00&to=2019-05-30T11:00:00"
done
call GET "$L&from=2019-05-30%2011:49:02&to=now"
expect_json "list from=2019-05-30 11:49:02: exact error text" 400 \
	'{"code":400,"error":"bad request: bad \"from\" timestamp \"2019-05-30 11:49:02\": time in unsupported format \"2019-05-30 11:49:02\" (want 2006-01-02T15:04:05 in UTC, RFC3339, unix seconds or now-1h)"}'
bad_get "list to=2019-13-01T00:00:00: month out of range" 400 'bad request: bad \"to\" timestamp \"2019-13-01T00:00:00\": time in unsupported format \"2019-13-01T00:00:00\": month out of range' "$L&from=0&to=2019-13-01T00:00:00"
bad_get "list from=now-1x: unknown unit" 400 'bad request: bad \"from\" timestamp \"now-1x\": time: unknown unit \"x\" in duration \"-1x\"' "$L&from=now-1x&to=now"
bad_get "list from=1h (bare duration): 400 with a hint" 400 'now-1h' "$L&from=1h&to=now"
bad_get "list from=now+1h (a '+' is a space in a URL): 400 with a hint" 400 'now%2B1h' "$L&from=now+1h&to=now"
bad_get "list from in milliseconds: 400 out of range" 400 'milliseconds' "$L&from=1559216942000&to=now"
# API v1 over a window wholly older than the retention window (from is moved to its start,
# past to): nothing, not an error about a from/to the client never sent
call GET "/api/1/top?query=cpu&from=100&to=1000"
if [ "$CODE" = 200 ] && [ "$(jq -r .body.profiles "$T/b")" = 0 ]; then ok "API v1 top of a window older than retention: 200, 0 profiles"; else fail "API v1 top of a window older than retention: 200, 0 profiles" "status $CODE: $(head -c 300 "$T/b")"; fi
bad_get "API v1 diff of a window older than retention: 404 saying so" 404 'is older than the retention window' \
	"/api/1/diff?base=cpu&target=cpu&from=100&to=1000"
bad_get "list labels=k=%zz: 400 invalid URL escape" 400 'invalid URL escape' "$L&$W&labels=k=%25zz"
bad_get "list with a label value of 8193 bytes: 413" 413 '8192' "$L&$W&labels=k=$long"
bad_get "list with 65 labels: 413" 413 '64' "$L&$W&labels=${many%,}"
bad_get "merge type=CPU after the query: still 400 (not profefe's 405)" 400 'unknown profile type' "/api/0/profiles/merge?service=$S&$W&type=CPU"
NOID=bpc00mript33iv4net00
bad_get "get an unknown id: 404 naming it" 404 "$NOID" "/api/0/profiles/$NOID"
bad_get "get a malformed id: 404 naming it" 404 'not-an-id' "/api/0/profiles/not-an-id"
bad_get "get id1+unknown: 404 naming the unknown one" 404 "$NOID" "/api/0/profiles/${ID_OF[1/cpu]}+$NOID"
bad_get "get id1++id2: 400 empty id" 400 'empty profile id' "/api/0/profiles/${ID_OF[1/cpu]}++${ID_OF[2/cpu]}"
# 200 ids (a 4 KiB path, under the 16 KiB URI cap): the merge, not a 404 (paths over
# 2 KiB were "nothing found"); go tool pprof reads it
ids=${ID_OF[1/cpu]}
for ((i = 1; i < 200; i++)); do ids+="+${ID_OF[$((i % 2 + 1))/cpu]}"; done
call GET "/api/0/profiles/$ids"
expect_pprof "get 200 ids joined by '+' (a 4 KiB path): their merge" "${ids:0:150}"
if gp "$T/many.top" -top "$BASE/api/0/profiles/$ids"; then ok "go tool pprof -top of 200 ids"; else fail "go tool pprof -top of 200 ids" "$(head -c 300 "$T/many.top.err")"; fi
bad_get "get id1+ (trailing +): 400 empty id" 400 'empty profile id' "/api/0/profiles/${ID_OF[1/cpu]}+"
call DELETE "/api/0/profiles/${ID_OF[1/cpu]}+${ID_OF[2/cpu]}"
expect_error "DELETE id1+id2: 400" 400 'bad request' 
call DELETE "/api/0/profiles/$NOID"
expect_error "DELETE an unknown id: 404" 404 "$NOID"

call GET /healthz
if [ "$CODE" = 200 ]; then ok "server A alive after the bad input (/healthz 200)"; else fail "server A alive after the bad input (/healthz 200)" "status $CODE"; fi
call GET /metrics
cp "$T/b" "$T/metrics"
STORED1=$(metric profd_store_profiles)
if [ "$STORED1" = "$STORED0" ]; then ok "bad input: nothing stored (profd_store_profiles still $STORED1)"; else fail "bad input: nothing stored" "profd_store_profiles $STORED0 -> $STORED1"; fi
call GET "/api/0/profiles?service=bad&from=0&to=now%2B1h"
expect_json "bad input: list of service 'bad' is 404" 404 "$NOTHING"
call GET /api/0/services
if [ "$CODE" = 200 ] && ! grep -q '"bad"\|"x"' "$T/b"; then ok "bad input: no new service"; else fail "bad input: no new service" "$(head -c 300 "$T/b")"; fi
echo "# bad input done, $(elapsed)"

# ---- 5. server B: merge cap, empty store, --retention 0 ---------------------------------

BASE=http://127.0.0.1:${SPORT[B]}
call GET /api/0/services
expect_json "B: GET /api/0/services on an empty store: 404 nothing found" 404 "$NOTHING"
call GET "/api/0/profiles?service=api&from=0&to=now"
expect_json "B: list on an empty store: 404 nothing found" 404 "$NOTHING"
call GET /readyz
if [ "$CODE" = 200 ] && [ "$(tr -d '\n' <"$T/b")" = ok ]; then ok "B: /readyz 200 ok"; else fail "B: /readyz 200 ok" "status $CODE: $(head -c 100 "$T/b")"; fi
# A real threadcreate profile starts with a sample without a stack; as the
# first profile of a partition (B is empty) it must be stored like any other
post_ok "B: POST a threadcreate profile (first sample has no stack) into an empty partition" \
	"$C/1/threadcreate.pb.gz" "service=tc&type=threadcreate" threadcreate tc "" ""
TC_ID=$ID
B_IDS=()
for i in 1 2 3; do
	post_ok "B: POST set $i cpu (created_at from the pprof)" "$C/$i/cpu.pb.gz" "service=api&type=cpu" cpu api "" ""
	B_IDS+=("$ID")
done
call GET "/api/0/profiles?service=api&from=0&to=now"
n=$(grep -o '"id":"[0-9a-v]*"' "$T/b" | wc -l)
if [ "$CODE" = 200 ] && [ "$n" -eq 3 ]; then ok "B: list with --retention 0 (forever): 3 profiles"; else fail "B: list with --retention 0: 3 profiles" "status $CODE, $n ids"; fi
call GET "/api/0/profiles/merge?service=api&type=cpu&from=0&to=now"
expect_error "B: merge of 3 with --max-merge-profiles 2: 413 naming the limit" 413 'more than 2 profiles match'
if grep -qF -- '--max-merge-profiles' "$T/b"; then ok "B: the 413 names --max-merge-profiles"; else fail "B: the 413 names --max-merge-profiles" "$(head -c 300 "$T/b")"; fi
call GET "/api/0/profiles/merge?service=api&type=cpu&from=0&to=now&limit=2"
if [ "$CODE" = 200 ] && [ "$(hdr Content-Type)" = application/octet-stream ]; then ok "B: merge with limit=2 (at the cap): 200"; else fail "B: merge with limit=2 (at the cap): 200" "status $CODE: $(head -c 300 "$T/b")"; fi
call GET "/api/0/profiles/$(
	IFS=+
	echo "${B_IDS[*]}"
)"
expect_error "B: get id1+id2+id3 with --max-merge-profiles 2: 413 naming the limit" 413 '--max-merge-profiles'
# last on B: reading by id with --retention 0 (forever)
call GET "/api/0/profiles/${B_IDS[0]}"
expect_pprof "B: get by id with --retention 0 (forever): 200" "${B_IDS[0]}"
if [ -n "$TC_ID" ]; then
	call GET "/api/0/profiles/$TC_ID"
	cp "$T/b" "$T/tc.pb.gz"
	got=$(col_sums "$T/tc.pb.gz") want=$(col_sums "$C/1/threadcreate.pb.gz")
	if [ "$CODE" = 200 ] && [ -n "$got" ] && [ "$got" = "$want" ]; then ok "B: get the threadcreate profile back: oracle column totals = the file's ($got)"; else fail "B: get the threadcreate profile back: oracle column totals = the file's" "status $CODE, got '$got', want '$want'"; fi
fi
call GET /healthz
if [ "$CODE" = 200 ]; then ok "B: alive after get by id (/healthz 200)"; else fail "B: alive after get by id (/healthz 200)" "status $CODE"; fi
echo "# server B done, $(elapsed)"

# ---- 6. /healthz, /readyz, /metrics on server A ---------------------------------------

BASE=http://127.0.0.1:${SPORT[A]}
for p in /healthz /readyz; do
	call GET "$p"
	if [ "$CODE" = 200 ] && [ "$(tr -d '\n' <"$T/b")" = ok ] && [[ "$(hdr Content-Type)" == text/plain* ]]; then ok "GET $p: 200 text/plain ok"; else fail "GET $p: 200 text/plain ok" "status $CODE, Content-Type '$(hdr Content-Type)': $(head -c 100 "$T/b")"; fi
done
call GET /metrics
cp "$T/b" "$T/metrics"
if [ "$CODE" = 200 ] && [ "$(hdr Content-Type)" = "text/plain; version=0.0.4; charset=utf-8" ]; then ok "GET /metrics: 200 text/plain; version=0.0.4"; else fail "GET /metrics: 200 text/plain; version=0.0.4" "status $CODE, Content-Type '$(hdr Content-Type)'"; fi
for t in $TYPES; do
	v=$(metric "profd_profiles_ingested_total{type=\"$t\"}")
	if [ "$v" = "${POSTED[$BASE $t]:-0}" ]; then ok "metrics: profd_profiles_ingested_total{type=\"$t\"} = $v posted"; else fail "metrics: profd_profiles_ingested_total{type=\"$t\"} = ${POSTED[$BASE $t]:-0} posted" "got $v"; fi
done
for r in bad_request malformed empty too_large too_old; do
	v=$(metric "profd_profiles_rejected_total{reason=\"$r\"}")
	if [ "$v" = "${REJ[$r]}" ]; then ok "metrics: profd_profiles_rejected_total{reason=\"$r\"} = ${REJ[$r]} refused"; else fail "metrics: profd_profiles_rejected_total{reason=\"$r\"} = ${REJ[$r]} refused" "got $v"; fi
done
np=0
for t in $TYPES; do np=$((np + ${POSTED[$BASE $t]:-0})); done
v=$(metric 'profd_http_requests_total{route="post_profile",code="200"}')
if [ "$v" = "$np" ]; then ok "metrics: requests{route=post_profile,code=200} = $np"; else fail "metrics: requests{route=post_profile,code=200} = $np" "got $v"; fi
v=$(metric profd_store_profiles)
if [ "$v" = "$((np - 1))" ]; then ok "metrics: profd_store_profiles = posted - deleted ($v)"; else fail "metrics: profd_store_profiles = posted - deleted ($((np - 1)))" "got $v"; fi
v=$(metric profd_merges_total)
if [ "$v" != absent ] && [ "$v" -gt 10 ]; then ok "metrics: profd_merges_total moved ($v)"; else fail "metrics: profd_merges_total moved" "got $v"; fi

# prom_check FILE: every line is valid Prometheus text exposition 0.0.4
prom_check() {
	awk '
	function fam(n) { if (n ~ /_bucket$/ && types[substr(n, 1, length(n) - 7)] == "histogram") return substr(n, 1, length(n) - 7)
	                  if (n ~ /_(sum|count)$/) { b = n; sub(/_(sum|count)$/, "", b); if (types[b] == "histogram" || types[b] == "summary") return b }
	                  return n }
	function bad(why) { print "line " NR ": " why ": " $0; err = 1; exit 1 }
	/^# HELP / { if ($0 !~ /^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* [^ ].*$/) bad("bad HELP"); if (help[$3]++) bad("second HELP"); if (seen[$3]) bad("HELP after samples"); next }
	/^# TYPE / { if ($0 !~ /^# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped)$/) bad("bad TYPE")
	             if ($3 in types) bad("second TYPE"); if (seen[$3]) bad("TYPE after samples"); types[$3] = $4
	             if ($4 == "counter" && $3 !~ /_total$/) bad("counter not named *_total"); next }
	/^#/ { bad("comment that is neither HELP nor TYPE") }
	{ if ($0 !~ /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\[\\"n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\[\\"n])*")*\})? ([-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]Inf|NaN)( -?[0-9]+)?$/) bad("bad sample line")
	  n = $0; sub(/[{ ].*/, "", n); f = fam(n)
	  if (!(f in types)) bad("sample without a TYPE for " f)
	  if (!(f in help)) bad("sample without a HELP for " f)
	  seen[f] = 1
	  if (series[$1]++) bad("duplicate series")
	  if (types[f] == "counter" && $2 < 0) bad("negative counter")
	  # a histogram series is its family and labels without le: buckets cumulative, +Inf = _count, per series
	  if (n ~ /_bucket$/) { if ($1 !~ /le="/) bad("bucket without le"); k = $1; sub(/_bucket/, "", k); sub(/,?le="[^"]*"/, "", k); sub(/\{\}$/, "", k); sub(/\{,/, "{", k)
	                        if (k == lastb && $2 < lastv) bad("buckets not cumulative"); lastb = k; lastv = $2; if ($1 ~ /le="\+Inf"/) inf[k] = $2 }
	  if (types[f] == "histogram" && n == f "_count") { k = $1; sub(/_count/, "", k); cnt[k] = $2 }
	  nl++ }
	END { if (err) exit 1
	      for (h in types) if (types[h] == "histogram" && seen[h]) { ok = 0; for (k in inf) if (index(k, h) == 1) ok = 1; if (!ok) { print "histogram " h " without le=\"+Inf\""; exit 1 } }
	      for (k in inf) if (inf[k] != cnt[k]) { print "histogram " k ": +Inf bucket " inf[k] " != _count " cnt[k]; exit 1 }
	      for (k in cnt) if (!(k in inf)) { print "histogram " k ": _count without a +Inf bucket"; exit 1 }
	      if (nl < 10) { print "only " nl " samples"; exit 1 } }' "$1" >"$T/.prom" 2>&1 || return 1
	[ -z "$(tail -c1 "$1")" ] || { echo "no final newline" >"$T/.prom"; return 1; }
}
if prom_check "$T/metrics"; then ok "metrics A: valid Prometheus text ($(wc -l <"$T/metrics") lines)"; else fail "metrics A: valid Prometheus text" "$(head -c 400 "$T/.prom")"; fi
printf '# TYPE x_total counter\nx_total{a="1} 3\n' >"$T/badprom"
if ! prom_check "$T/badprom"; then ok "metrics: the text checker rejects a broken line"; else fail "metrics: the text checker rejects a broken line" "accepted"; fi
BASE=http://127.0.0.1:${SPORT[B]}
call GET /metrics
if [ "$CODE" = 200 ]; then
	cp "$T/b" "$T/metricsB"
	if prom_check "$T/metricsB"; then ok "metrics B: valid Prometheus text"; else fail "metrics B: valid Prometheus text" "$(head -c 400 "$T/.prom")"; fi
else
	fail "metrics B: valid Prometheus text" "status $CODE"
fi

# ---- 7. shutdown ---------------------------------------------------------------------------

stop_server A
stop_server B
echo "# done in $(elapsed)"
