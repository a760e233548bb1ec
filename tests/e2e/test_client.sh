#!/usr/bin/env bash
# test_client.sh — end-to-end tests of the collector commands (`profd get`,
# `merge`, `load`, `top`) and of the kubectl plugin packaging, against a real
# collector (`profd serve`) holding real profiles of the example Go service:
#   1. load: every Go type inferred from the profile itself (cpu heap allocs
#      block mutex goroutine threadcreate; gzip'd and raw), --type override,
#      --created-at, labels, -o json, one bad file among good ones (exit 1,
#      the good ones stored), the stored profiles = the files (go tool pprof)
#   2. get services|profiles|types: tables, -o json (= the collector's data),
#      -o name, time ranges (default last hour excludes an old profile;
#      relative, RFC3339, unix seconds), labels, empty results
#   3. merge -o FILE / -o - / --print-url: go tool pprof -top identical to
#      `go tool pprof -proto` of the same files, for all seven types; the
#      printed URL opened by go tool pprof
#   4. top --service / --all: the table = go tool pprof -top of the
#      -proto-merged files (rows, order, values); -n; -i; normalised heap
#      (two snapshots of one instance average to one) and --raw; the cores
#      line; label values escaped in the selector; a collector without API
#      v1 (a proxy answering 404 on /api/1/*): merged here
#   5. faults and usage: collector down (one line, exit 1), HTTP errors,
#      bad flags (exit 2), --help of every command
#   6. the kubectl plugin: kubectl-profd symlink found by `kubectl plugin
#      list`, `kubectl profd ...` through real kubectl (no cluster needed),
#      its name in usage lines; make install (DESTDIR); the krew manifest
#      (deploy/krew/profd.yaml and the generated one) checked as krew does
# Run: BUILD=build bash tests/e2e/test_client.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

TYPES="cpu heap allocs block mutex goroutine threadcreate"
STRICT_TYPES="cpu heap allocs block mutex"
TOP=(-top -nodecount=100000 -nodefraction=0 -edgefraction=0)
C=$T/cap
unset PROFD_COLLECTOR

GA=$GOAPP
[ -x "$GA" ] || GA=$ROOT/build/goapp # a Go program, not sanitized
SPID=
stop_server() {
	if [ -n "$SPID" ]; then
		kill -TERM "$SPID" 2>/dev/null
		wait "$SPID" 2>/dev/null
		SPID=
	fi
}
prev_trap=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
# shellcheck disable=SC2064 # expanded now on purpose: lib.sh's command
trap "stop_server; $prev_trap" EXIT

need_built 0 "make $BUILD/profd $BUILD/goapp" "$PROFD" "$GA"
need_cmds 0 go curl gzip python3

# run NAME ARGS...: profd ARGS, stdout in $T/o, stderr in $T/e, status in RC;
# a sanitizer report fails NAME
run() {
	local name=$1
	shift
	"$PROFD" "$@" >"$T/o" 2>"$T/e"
	RC=$?
	if grep -q "Sanitizer\|runtime error" "$T/e"; then
		fail "$name: no sanitizer report" "$(head -c 1500 "$T/e")"
	fi
}
# expect_ok NAME ARGS...: exit 0, nothing on stderr unless allowed by the caller
expect_ok() {
	local name=$1
	shift
	run "$name" "$@"
	if [ "$RC" -ne 0 ]; then
		fail "$name" "exit $RC: $(head -c 600 "$T/e")"
		return 1
	fi
	return 0
}
# one_line NAME CODE REGEX ARGS...: exit CODE, stderr exactly one line matching REGEX
one_line() {
	local name=$1 code=$2 re=$3
	shift 3
	run "$name" "$@"
	if [ "$RC" -ne "$code" ]; then
		fail "$name" "exit $RC, want $code; stderr: $(head -c 400 "$T/e")"
	elif [ "$(wc -l <"$T/e")" -ne 1 ]; then
		fail "$name" "want one line on stderr, got $(wc -l <"$T/e"): $(head -c 600 "$T/e")"
	elif ! grep -Eq -- "$re" "$T/e"; then
		fail "$name" "stderr does not match /$re/: $(head -c 400 "$T/e")"
	else
		ok "$name"
	fi
}
# json_eq NAME A B: the JSON values in files A and B are equal
json_eq() {
	if python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' "$2" "$3" 2>"$T/.je"; then
		ok "$1"
	else
		fail "$1" "$(head -c 300 "$T/.je") A=$(head -c 300 "$2") B=$(head -c 300 "$3")"
	fi
}
# gp OUT ARGS...: go tool pprof ARGS >OUT (stderr apart); fails if it fails or prints nothing
gp() {
	local out=$1
	shift
	go tool pprof "$@" >"$out" 2>"$out.err" && [ -s "$out" ]
}
# same_pprof NAME A B ARGS...: go tool pprof ARGS prints the same for A and B
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
proto() { # OUT FILES...: go tool pprof -proto FILES > OUT
	local out=$1
	shift
	go tool pprof -proto "$@" >"$out" 2>"$out.err"
}
# table_col FILE N: column N (1-based, 3+ spaces apart) of every row but the header
table_col() { awk -v n="$2" 'NR > 1 { split($0, a, /   +/); print a[n] }' "$1"; }

# ---- 0. capture two sets of real profiles, start a collector ----------------------------

WL=([1]=auth [2]=search)
for i in 1 2; do
	GOAPP_ARGS="-workload ${WL[i]}" "$ROOT/tests/e2e/capture.sh" "$GA" "$C/$i" 1 >"$T/capture$i.log" 2>&1 &
	eval "cap$i=\$!"
done
"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data" --retention 0 -q 2>"$T/serve.log" &
SPID=$!
port=
for ((k = 0; k < 200; k++)); do
	port=$(sed -n 's/.*listening on port \([0-9][0-9]*\).*/\1/p' "$T/serve.log" | head -n1)
	[ -n "$port" ] && break
	kill -0 "$SPID" 2>/dev/null || break
	sleep 0.05
done
if [ -z "$port" ]; then
	fail "setup: profd serve" "no 'listening on port' line: $(head -c 600 "$T/serve.log")"
	exit 0
fi
URL=http://127.0.0.1:$port
ok "setup: collector listening on port $port"
for i in 1 2; do
	pid=cap$i
	if ! wait "${!pid}"; then # a loaded machine: try once more, alone
		rm -rf "${C:?}/$i"
		GOAPP_ARGS="-workload ${WL[i]}" "$ROOT/tests/e2e/capture.sh" "$GA" "$C/$i" 1 >"$T/capture$i.log" 2>&1
	fi
	missing=
	for t in $TYPES; do [ -s "$C/$i/$t.pb.gz" ] || missing="$missing $t"; done
	if [ -n "$missing" ]; then
		fail "setup: capture set $i" "missing:$missing: $(tail -c 400 "$T/capture$i.log")"
		exit 0
	fi
	ok "setup: capture set $i from goapp (-workload ${WL[i]}, 7 types)"
done
export PROFD_COLLECTOR=$URL

# ---- 1. load --------------------------------------------------------------------------

files1=() files2=()
for t in $TYPES; do
	files1+=("$C/1/$t.pb.gz")
	files2+=("$C/2/$t.pb.gz")
done
# load_check NAME SERVICE LABELS SET: load the 7 files of SET, every type inferred
load_check() {
	local name=$1 svc=$2 lbl=$3 set=$4 t bad=
	local -n fl=files$set
	if ! expect_ok "$name" load --service "$svc" -l "$lbl" "${fl[@]}"; then return; fi
	[ -s "$T/e" ] && bad="stderr: $(head -c 300 "$T/e")"
	for t in $TYPES; do
		if ! awk -v f="$C/$set/$t.pb.gz" -v t="$t" -v u="$URL/api/0/profiles/" '
			$1 == f && $2 == t && length($3) == 20 && $3 ~ /^[0-9a-v]+$/ && $5 == u $3 { found = 1 } END { exit !found }' "$T/o"; then
			bad="$bad; no row '$C/$set/$t.pb.gz $t ID ... $URL/api/0/profiles/ID'"
		fi
	done
	if ! head -1 "$T/o" | grep -Eq '^FILE +TYPE +ID +CREATED \(UTC\) +URL$'; then bad="$bad; header: $(head -1 "$T/o")"; fi
	if [ "$(wc -l <"$T/o")" -ne 8 ]; then bad="$bad; $(wc -l <"$T/o") lines, want 8"; fi
	if [ -z "$bad" ]; then ok "$name"; else fail "$name" "$bad: $(head -c 800 "$T/o")"; fi
	cp "$T/o" "$T/load-$svc-$set.out"
}
load_check "load 7 files: every type inferred from the profile (block vs mutex by stacks), id and URL per file" \
	auth version=1.0,dc=fra 1
load_check "load set 2 into another service" search version=2.0 2
load_check "load set 1 into service both" both version=1.0 1
load_check "load set 2 into service both" both version=2.0 2

# the stored profile reads as the file: go tool pprof -top of its URL
id_cpu=$(awk -v f="$C/1/cpu.pb.gz" '$1 == f { print $3 }' "$T/load-auth-1.out")
same_pprof "load: the stored cpu profile (its URL) = the file, go tool pprof -top" "$URL/api/0/profiles/$id_cpu" "$C/1/cpu.pb.gz" "${TOP[@]}"
id_mutex=$(awk -v f="$C/1/mutex.pb.gz" '$1 == f { print $3 }' "$T/load-auth-1.out")
same_pprof "load: the stored mutex profile = the file, go tool pprof -top" "$URL/api/0/profiles/$id_mutex" "$C/1/mutex.pb.gz" "${TOP[@]}"

# raw (not gzip'd) profiles are typed too; stdin
gzip -dc "$C/1/heap.pb.gz" >"$T/heap.pb"
gzip -dc "$C/1/block.pb.gz" >"$T/block.pb"
if expect_ok "load raw protobuf files" load --service rawsvc "$T/heap.pb" "$T/block.pb" &&
	grep -q "^$T/heap.pb  *heap " "$T/o" && grep -q "^$T/block.pb  *block " "$T/o"; then
	ok "load raw protobuf files: heap and block inferred"
else
	fail "load raw protobuf files: heap and block inferred" "$(head -c 500 "$T/o") $(head -c 300 "$T/e")"
fi
if expect_ok "load - (stdin)" load --service stdinsvc - <"$C/1/goroutine.pb.gz" && grep -Eq '^- +goroutine ' "$T/o"; then
	ok "load - (stdin): goroutine inferred"
else
	fail "load - (stdin): goroutine inferred" "$(head -c 400 "$T/o")"
fi
# --type overrides the inferred type
if expect_ok "load --type" load --service override --type heap "$C/1/allocs.pb.gz" && grep -q " heap " "$T/o" &&
	curl -sS "$URL/api/0/profiles?service=override&from=0&to=now" | grep -q '"type":"heap"'; then
	ok "load --type heap of an allocs profile: stored as heap"
else
	fail "load --type heap of an allocs profile: stored as heap" "$(head -c 400 "$T/o")"
fi
# --created-at: an old profile (outside the default range)
OLD=2019-05-30T11:49:00Z
if expect_ok "load --created-at" load --service auth --created-at "$OLD" -l version=0.9 "$C/2/cpu.pb.gz" &&
	grep -q " $OLD " "$T/o"; then
	ok "load --created-at $OLD: stored with that time"
else
	fail "load --created-at $OLD: stored with that time" "$(head -c 400 "$T/o") $(head -c 300 "$T/e")"
fi
# -o json: the collector's metadata plus file and url
if expect_ok "load -o json" load --service jsonsvc -l k=v -o json "$C/1/threadcreate.pb.gz" &&
	python3 - "$T/o" "$URL" "$C/1/threadcreate.pb.gz" <<'EOF'; then
import json, sys
v = json.load(open(sys.argv[1]))
m = v[0]
assert len(v) == 1 and m["type"] == "threadcreate" and m["service"] == "jsonsvc", v
assert m["labels"] == [{"key": "k", "value": "v"}], v
assert m["url"] == sys.argv[2] + "/api/0/profiles/" + m["id"] and m["file"] == sys.argv[3], v
EOF
	ok "load -o json: metadata, file and url"
else
	fail "load -o json: metadata, file and url" "$(head -c 500 "$T/o")"
fi
# bad files among good ones
head -c 3000 /dev/urandom >"$T/garbage.pb.gz"
run "load with bad files" load --service mixed "$T/garbage.pb.gz" "$C/1/cpu.pb.gz" "$T/nosuch.pb.gz" "$C/1/heap.pb.gz"
n_ok=$(grep -c "^$C/1/" "$T/o")
if [ "$RC" -eq 1 ] && [ "$n_ok" -eq 2 ] && grep -q "garbage.pb.gz: not a pprof profile" "$T/e" &&
	grep -q "nosuch.pb.gz: .*; not loaded" "$T/e" && grep -q "2 of 4 files loaded, 2 failed" "$T/e" &&
	[ "$(wc -l <"$T/e")" -eq 3 ]; then
	ok "load: 2 bad files among 4: one line each + a summary, exit 1, the 2 good ones stored"
else
	fail "load: 2 bad files among 4" "exit $RC, $n_ok rows; stderr: $(head -c 600 "$T/e")"
fi
n=$(curl -sS "$URL/api/0/profiles?service=mixed&from=0&to=now" | grep -o '"id"' | wc -l)
if [ "$n" -eq 2 ]; then ok "load: the collector holds the 2 good files of the mixed load"; else fail "load: the collector holds the 2 good files" "$n profiles"; fi

# ---- 2. get ---------------------------------------------------------------------------

if expect_ok "get services" get services; then
	printf 'SERVICE\nauth\nboth\njsonsvc\nmixed\noverride\nrawsvc\nsearch\nstdinsvc\n' >"$T/want"
	same_output "get services: table of every service, sorted" "$T/want" "$T/o"
fi
curl -sS "$URL/api/0/services" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["body"]))' >"$T/api.json"
expect_ok "get services -o json" get services -o json && json_eq "get services -o json = the collector's body" "$T/api.json" "$T/o"
if expect_ok "get services -o name" get services -o name; then
	if [ "$(head -1 "$T/o")" = auth ] && ! grep -q SERVICE "$T/o"; then ok "get services -o name: names only"; else fail "get services -o name: names only" "$(head -3 "$T/o")"; fi
fi

# get profiles: the last hour by default: the 7 of set 1, not the 2019 one
if expect_ok "get profiles --service auth" get profiles --service auth; then
	hdr_ok=$(head -1 "$T/o" | grep -Ec '^ID +TYPE +SERVICE +CREATED \(UTC\) +LABELS$')
	types=$(table_col "$T/o" 2 | sort | tr '\n' ' ')
	lbls=$(table_col "$T/o" 5 | sort -u | tr '\n' ' ')
	want_types=$(echo "$TYPES" | tr ' ' '\n' | sort | tr '\n' ' ')
	if [ "$hdr_ok" -eq 1 ] && [ "$(wc -l <"$T/o")" -eq 8 ] && [ "$types" = "$want_types" ] &&
		[ "$lbls" = "dc=fra,version=1.0 " ] && ! grep -q 2019- "$T/o"; then
		ok "get profiles: default range = last hour: 7 rows (the 2019 profile left out), types, labels"
	else
		fail "get profiles: default range = last hour" "$(head -c 900 "$T/o")"
	fi
fi
# the JSON is the collector's list for the same query
from=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ) to=$(date -u -d '+1 minute' +%Y-%m-%dT%H:%M:%SZ)
curl -sS "$URL/api/0/profiles?service=auth&from=$from&to=$to" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["body"]))' >"$T/api.json"
expect_ok "get profiles -o json" get profiles --service auth --from "$from" --to "$to" -o json &&
	json_eq "get profiles -o json = the collector's list (RFC3339 --from/--to)" "$T/api.json" "$T/o"
# count_rows NAME WANT ARGS...: get profiles ARGS prints WANT rows (0: a note on stderr, exit 0)
count_rows() {
	local name=$1 want=$2
	shift 2
	run "$name" get profiles "$@"
	local n
	n=$(($(wc -l <"$T/o") - 1))
	[ "$n" -lt 0 ] && n=0
	if [ "$RC" -ne 0 ]; then
		fail "$name" "exit $RC: $(head -c 300 "$T/e")"
	elif [ "$n" -ne "$want" ]; then
		fail "$name" "$n rows, want $want: $(head -c 600 "$T/o") $(head -c 200 "$T/e")"
	elif [ "$want" -eq 0 ] && ! grep -q '^No .*profiles found' "$T/e"; then
		fail "$name" "no 'No ... profiles found' note: $(head -c 300 "$T/e")"
	else
		ok "$name"
	fi
}
count_rows "get profiles --type cpu: 1 row" 1 --service auth --type cpu
count_rows "get profiles --from 2019-05-30T00:00:00Z --to 2019-05-31T00:00:00Z: the old profile" 1 --service auth --from 2019-05-30T00:00:00Z --to 2019-05-31T00:00:00Z
count_rows "get profiles --from 0 --to now: 8 rows" 8 --service auth --from 0 --to now
count_rows "get profiles --from -30m (relative)" 7 --service auth --from -30m
count_rows "get profiles --from now-2h --to now-1h: none (note on stderr, exit 0)" 0 --service auth --from now-2h --to now-1h
count_rows "get profiles --from/--to in unix seconds" 7 --service auth --from "$(date -d '-1 hour' +%s)" --to "$(($(date +%s) + 60))"
count_rows "get profiles --from 1559216000 --to 1559217000 (unix, 2019)" 1 --service auth --from 1559216000 --to 1559217000
count_rows "get profiles -l version=2.0 (service both): set 2" 7 --service both -l version=2.0
count_rows "get profiles -l version=1.0 -l dc=fra (AND): none in both" 0 --service both -l version=1.0 -l dc=fra
count_rows "get profiles -l dc=fra,version=1.0 (AND, one -l): auth" 7 --service auth -l dc=fra,version=1.0
count_rows "get profiles --type mutex --limit 1 (service both): newest 1" 1 --service both --type mutex --limit 1
count_rows "get profiles without --service: every service" 35
if expect_ok "get profiles -o name" get profiles --service both --type cpu -o name &&
	[ "$(grep -Ec '^[0-9a-v]{20}$' "$T/o")" -eq 2 ] && [ "$(wc -l <"$T/o")" -eq 2 ]; then
	ok "get profiles -o name: the 2 ids"
else
	fail "get profiles -o name: the 2 ids" "$(head -c 300 "$T/o")"
fi

# get types
if expect_ok "get types --service both" get types --service both; then
	bad=
	head -1 "$T/o" | grep -Eq '^SERVICE +TYPE +PROFILES +FIRST \(UTC\) +LAST \(UTC\)$' || bad="header $(head -1 "$T/o")"
	[ "$(wc -l <"$T/o")" -eq 8 ] || bad="$bad; $(wc -l <"$T/o") lines"
	for t in $TYPES; do grep -Eq "^both +$t +2 +20..-..-..T..:..:..Z +20..-..-..T..:..:..Z$" "$T/o" || bad="$bad; no row for $t"; done
	if [ -z "$bad" ]; then ok "get types: 7 types, 2 profiles each, first and last"; else fail "get types" "$bad: $(head -c 600 "$T/o")"; fi
fi
if expect_ok "get types -o json" get types --service auth --from 2019-01-01T00:00:00Z -o json && python3 - "$T/o" <<'EOF'; then
import json, sys
v = {r["type"]: r for r in json.load(open(sys.argv[1]))}
assert set(v) == {"cpu", "heap", "allocs", "block", "mutex", "goroutine", "threadcreate"}, v
assert v["cpu"]["profiles"] == 2 and v["cpu"]["first"] == "2019-05-30T11:49:00Z", v["cpu"]
assert all(r["profiles"] == 1 and r["service"] == "auth" for t, r in v.items() if t != "cpu"), v
EOF
	ok "get types -o json --from 2019: cpu 2 (first 2019-05-30T11:49:00Z), the others 1"
else
	fail "get types -o json --from 2019" "$(head -c 600 "$T/o")"
fi
if expect_ok "get types (all services)" get types && [ "$(table_col "$T/o" 1 | sort -u | wc -l)" -eq 8 ]; then
	ok "get types without --service: rows of all 8 services"
else
	fail "get types without --service: rows of all 8 services" "$(head -c 600 "$T/o")"
fi
if expect_ok "get types -o name" get types -o name; then
	if [ "$(sort "$T/o" | tr '\n' ' ')" = "allocs block cpu goroutine heap mutex threadcreate " ]; then ok "get types -o name: the 7 types present"; else fail "get types -o name" "$(head -c 300 "$T/o")"; fi
fi

# ---- 3. merge -------------------------------------------------------------------------

PM=$T/pm
mkdir -p "$PM"
for t in $TYPES; do proto "$PM/$t-12.pb.gz" "$C/1/$t.pb.gz" "$C/2/$t.pb.gz"; done
for t in $STRICT_TYPES; do
	if expect_ok "merge $t" merge --service both --type "$t" -O "$PM/m-$t.pb.gz"; then
		same_pprof "merge $t -o FILE: go tool pprof -top = go tool pprof -proto of the same 2 files" "$PM/m-$t.pb.gz" "$PM/$t-12.pb.gz" "${TOP[@]}"
	fi
done
# goroutine, threadcreate: `go tool pprof -proto` drops samples without
# locations (its focus filter), which these profiles have: compare after
# passing profd's merge through the same filter
for t in goroutine threadcreate; do
	if expect_ok "merge $t" merge --service both --type "$t" -O "$PM/m-$t.pb.gz"; then
		proto "$PM/mf-$t.pb.gz" "$PM/m-$t.pb.gz"
		same_pprof "merge $t -o FILE: go tool pprof -top = go tool pprof -proto of the same 2 files (empty stacks filtered alike)" \
			"$PM/mf-$t.pb.gz" "$PM/$t-12.pb.gz" "${TOP[@]}"
	fi
done
if expect_ok "merge summary" merge --service both --type cpu -O "$PM/s.pb.gz" && grep -Eq '^profd merge: wrote .*s\.pb\.gz \(.*, [0-9]+ samples\): cpu profiles of service "both" between' "$T/e"; then
	ok "merge: one summary line on stderr"
else
	fail "merge: one summary line on stderr" "$(head -c 300 "$T/e")"
fi
leftover=$(find "$PM" -name '*.tmp*' | head -3)
if [ -z "$leftover" ]; then ok "merge -o: no temporary files left"; else fail "merge -o: no temporary files left" "$leftover"; fi
# -o - to stdout (a pipe), -q
if "$PROFD" merge --service both --type heap -O - -q >"$PM/stdout.pb.gz" 2>"$T/e" && [ ! -s "$T/e" ]; then
	same_pprof "merge -o - -q: stdout is the profile, go tool pprof -top = -proto of the files" "$PM/stdout.pb.gz" "$PM/heap-12.pb.gz" "${TOP[@]}" -sample_index=alloc_space
else
	fail "merge -O - -q" "$(head -c 300 "$T/e")"
fi
# labels and the time range select the profiles merged
if expect_ok "merge -l version=1.0" merge --service both --type cpu -l version=1.0 -O "$PM/v1.pb.gz"; then
	proto "$PM/cpu-1.pb.gz" "$C/1/cpu.pb.gz"
	same_pprof "merge -l version=1.0: only set 1 (go tool pprof -top)" "$PM/v1.pb.gz" "$PM/cpu-1.pb.gz" "${TOP[@]}"
fi
if expect_ok "merge --from 2019" merge --service auth --type cpu --from 2019-05-30T11:49:00Z --to 2019-05-30T11:49:00Z -O "$PM/old.pb.gz"; then
	proto "$PM/cpu-old.pb.gz" "$C/2/cpu.pb.gz"
	same_pprof "merge --from = --to = the old profile's time: only it" "$PM/old.pb.gz" "$PM/cpu-old.pb.gz" "${TOP[@]}"
fi
# --print-url: opened by go tool pprof
if expect_ok "merge --print-url" merge --service both --type cpu --from -1h --print-url; then
	u=$(cat "$T/o")
	case $u in
	"$URL/api/0/profiles/merge?service=both&type=cpu&from="*"&to="*) ok "merge --print-url: the merge URL on the collector ($u)" ;;
	*) fail "merge --print-url: the merge URL" "$u" ;;
	esac
	same_pprof "merge --print-url: go tool pprof -top URL = go tool pprof -proto of the files" "$u" "$PM/cpu-12.pb.gz" "${TOP[@]}"
fi
if expect_ok "merge --print-url with labels" merge --service both --type cpu -l 'version=1.0' --print-url; then
	same_pprof "merge --print-url -l version=1.0: go tool pprof -top URL = set 1" "$(cat "$T/o")" "$PM/cpu-1.pb.gz" "${TOP[@]}"
fi
one_line "merge with nothing in the range: one line, exit 1" 1 'merge: no cpu profiles of service "both" between .*; see what there is with `profd get types --service both' \
	merge --service both --type cpu --from now-3h --to now-2h -O "$PM/none.pb.gz"
if [ ! -e "$PM/none.pb.gz" ]; then ok "merge with nothing: no file written"; else fail "merge with nothing: no file written" "$PM/none.pb.gz exists"; fi
one_line "merge of incompatible types (--type other over nothing): exit 1" 1 'no other profiles' \
	merge --service both --type other -O "$PM/none.pb.gz"
one_line "merge -O into a missing directory: one line, exit 1" 1 'merge: .*nodir' \
	merge --service both --type cpu -O "$T/nodir/x.pb.gz"

# ---- 3b. one meaning per flag (issue 17): -n namespace, --limit, -o FORMAT / -O FILE, --query ----

# in a window of their own (2021-03-01 10:00), out of the other sections' last hour
W=(--from 2021-03-01T09:00:00Z --to 2021-03-01T11:00:00Z)
expect_ok "load nsapp prod" load --service nsapp -l namespace=prod --created-at 2021-03-01T10:00:00Z "$C/1/cpu.pb.gz" >/dev/null
expect_ok "load nsapp dev" load --service nsapp -l namespace=dev --created-at 2021-03-01T10:00:01Z "$C/2/cpu.pb.gz" >/dev/null
nprof() { run "$1" "${@:2}" -o json; if [ "$RC" -eq 0 ]; then jq -r '.profiles' "$T/o"; else echo "exit $RC: $(head -c 200 "$T/e")"; fi; }
expect "top -n prod: the namespace (1 of the 2 profiles)" 1 "$(nprof "top -n prod" top --service nsapp -n prod "${W[@]}")"
expect "top --namespace dev" 1 "$(nprof "top --namespace dev" top --service nsapp --namespace dev "${W[@]}")"
expect "top without -n: both" 2 "$(nprof "top nsapp" top --service nsapp "${W[@]}")"
expect "top --query SELECTOR" 2 "$(nprof "top --query" top --query 'cpu{service="nsapp"}' "${W[@]}")"
expect "top --query with -n" 1 "$(nprof "top --query -n" top --query 'cpu{service=~"ns.*"}' -n prod "${W[@]}")"
run "top -n 3 (the old count)" top --service nsapp -n 3 "${W[@]}"
if [ "$RC" -eq 0 ] && grep -q 'warning: -n 3 as a row count is deprecated.*--limit 3' "$T/e" && grep -q '^Showing 3 of ' "$T/o"; then
	ok "top -n 3: still the row count, with a warning naming --limit"
else fail "top -n 3" "exit $RC: $(head -c 300 "$T/e")"; fi
run "top --limit 4" top --service nsapp --limit 4 "${W[@]}"
if [ "$RC" -eq 0 ] && [ ! -s "$T/e" ] && grep -q '^Showing 4 of ' "$T/o"; then ok "top --limit 4"; else fail "top --limit 4" "exit $RC: $(head -c 300 "$T/e")"; fi
if expect_ok "get profiles -n dev" get profiles --service nsapp -n dev "${W[@]}" && [ "$(grep -c ' nsapp ' "$T/o")" = 1 ] && grep -q 'namespace=dev' "$T/o"; then
	ok "get profiles -n dev: the dev profile only"
else fail "get profiles -n dev" "$(head -c 300 "$T/o")"; fi
# load takes -n as every other command does (docs/cli.md: "-n is the namespace in every command")
if expect_ok "load -n qa" load --service nsload -n qa --created-at 2021-03-01T10:00:02Z "$C/1/cpu.pb.gz" &&
	expect_ok "get profiles -n qa" get profiles --service nsload -n qa "${W[@]}" && grep -q 'namespace=qa' "$T/o"; then
	ok "load -n qa: stored with the label namespace=qa"
else fail "load -n qa" "$(head -c 300 "$T/o")"; fi
if expect_ok "merge -n prod -O" merge --service nsapp --type cpu -n prod "${W[@]}" -O "$PM/ns-prod.pb.gz" &&
	expect_ok "merge --query -O" merge --query 'cpu{service="nsapp",namespace="prod"}' "${W[@]}" -O "$PM/ns-q.pb.gz"; then
	same_pprof "merge -n prod = merge --query of the same profile (go tool pprof -top)" "$PM/ns-prod.pb.gz" "$PM/ns-q.pb.gz" "${TOP[@]}"
	same_pprof "merge -n prod = the prod profile (go tool pprof -top)" "$PM/ns-prod.pb.gz" "$C/1/cpu.pb.gz" "${TOP[@]}"
fi
run "merge -o FILE (the old spelling)" merge --service nsapp --type cpu "${W[@]}" -o "$PM/ns-old.pb.gz"
if [ "$RC" -eq 0 ] && [ -s "$PM/ns-old.pb.gz" ] && grep -q 'warning: -o FILE is deprecated.*-O ' "$T/e"; then
	ok "merge -o FILE: still the file, with a warning naming -O"
else fail "merge -o FILE" "exit $RC: $(head -c 300 "$T/e")"; fi
run "diff -n prod -o json" diff --base 'cpu{service="nsapp"}' --target 'cpu{service="nsapp"}' -n prod "${W[@]}" -o json
if [ "$RC" -eq 0 ] && [ "$(jq -r '.base.query' "$T/o")" = 'cpu{service="nsapp",namespace="prod"}' ] && [ "$(jq -r '.target.profiles' "$T/o")" = 1 ]; then
	ok "diff -n prod: both sides in the namespace; -o json"
else fail "diff -n prod -o json" "exit $RC: $(head -c 300 "$T/o") $(head -c 300 "$T/e")"; fi
# usage NAME REGEX ARGS...: exit 2, the first stderr line matches REGEX, the
# second (and last) is the hint to run --help
usage() {
	local name="usage: $1: exit 2, one line + the --help hint" re=$2
	shift 2
	run "$name" "$@"
	if [ "$RC" -ne 2 ]; then
		fail "$name" "exit $RC: $(head -c 400 "$T/e")"
	elif [ "$(wc -l <"$T/e")" -ne 2 ] || ! head -1 "$T/e" | grep -Eq -- "$re" ||
		! sed -n 2p "$T/e" | grep -Eq "^Run 'profd [a-z ]+ --help' for usage\.$"; then
		fail "$name" "stderr: $(head -c 400 "$T/e")"
	else
		ok "$name"
	fi
}
usage "top -o yaml" "top: -o: want table or json" top --all -o yaml
usage "top --query with --service" "top: --query SELECTOR already says" top --query cpu --service a
usage "merge --query with --type" "merge: --query SELECTOR already says" merge --query cpu --type cpu -O x
usage "top -n a,b" "namespace" top --all -n a,b

# ---- 4. top ---------------------------------------------------------------------------

# top_compare NAME PPROF_ARGS FILE PROFD_ARGS...: profd top's table (from the
# column header on) = go tool pprof -top of FILE, and "Showing N of N"
top_compare() {
	local name=$1 ga=$2 f=$3
	shift 3
	# shellcheck disable=SC2086 # ga is word-split on purpose
	if ! gp "$T/.gt" "${TOP[@]}" $ga "$f"; then
		fail "$name" "go tool pprof: $(head -c 300 "$T/.gt.err")"
		return
	fi
	run "$name" top --limit 0 "$@"
	if [ "$RC" -ne 0 ]; then
		fail "$name" "exit $RC: $(head -c 300 "$T/e")"
		return
	fi
	sed -n '/^ *flat  *flat%  *sum%  *cum  *cum%/,$p' "$T/.gt" >"$T/.gtt"
	sed -n '/^ *flat  *flat%  *sum%  *cum  *cum%/,$p' "$T/o" >"$T/.ptt"
	local n=$(($(wc -l <"$T/.gtt") - 1))
	if [ "$n" -le 0 ]; then
		fail "$name" "go tool pprof printed no rows"
	elif ! grep -q "^Showing $n of $n functions" "$T/o"; then
		# which functions differ, and the totals (seen once under ASan, not reproduced)
		awk 'NR > 1 {print $NF}' "$T/.gtt" | sort >"$T/.gtf"
		awk 'NR > 1 {print $NF}' "$T/.ptt" | sort >"$T/.ptf"
		fail "$name" "want 'Showing $n of $n functions': $(grep Showing "$T/o"); go: $(grep -m1 'Showing' "$T/.gt"); only profd: $(comm -13 "$T/.gtf" "$T/.ptf" | tr '\n' ' '); only go: $(comm -23 "$T/.gtf" "$T/.ptf" | tr '\n' ' ')"
	else
		same_output "$name ($n rows: functions, order, flat, flat%, sum%, cum, cum%)" "$T/.gtt" "$T/.ptt"
	fi
}
top_compare "top --service both (cpu) = go tool pprof -top of the -proto merge" "" "$PM/cpu-12.pb.gz" --service both
top_compare "top --service both --type heap -i alloc_space = go tool pprof -top -sample_index=alloc_space" \
	"-sample_index=alloc_space" "$PM/heap-12.pb.gz" --service both --type heap -i alloc_space
top_compare "top --service both --type mutex --cum = go tool pprof -top -cum" "-cum" "$PM/mutex-12.pb.gz" --service both --type mutex --cum
# --all: the cpu profiles of every service: auth (set 1), both (1, 2), search (2), mixed (1); nsapp and nsload (3b) have profiles in another hour only
proto "$PM/cpu-all.pb.gz" "$C/1/cpu.pb.gz" "$C/1/cpu.pb.gz" "$C/2/cpu.pb.gz" "$C/2/cpu.pb.gz" "$C/1/cpu.pb.gz"
top_compare "top --all = go tool pprof -top of the -proto merge of every service's cpu files" "" "$PM/cpu-all.pb.gz" --all
if grep -q '^Profiles: cpu, 4 of 10 services: auth, both, mixed, search$' "$T/o" && grep -q '^Type: cpu$' "$T/o" &&
	grep -Eq '^Range: 20..-..-..T..:..:..Z to 20..-..-..T..:..:..Z \(UTC\)$' "$T/o"; then
	ok "top --all: header names the type, the services used and the range"
else
	fail "top --all: header" "$(head -5 "$T/o")"
fi
if expect_ok "top default -n" top --all; then
	rows=$(sed -n '/^ *flat  *flat%/,$p' "$T/o" | tail -n +2 | wc -l)
	if [ "$rows" -eq 10 ] && grep -q '^Showing 10 of ' "$T/o"; then ok "top: 10 rows by default"; else fail "top: 10 rows by default" "$rows rows"; fi
fi
proto "$PM/cpu-22.pb.gz" "$C/2/cpu.pb.gz" "$C/2/cpu.pb.gz"
top_compare "top --all -l version=2.0 = go tool pprof -top of set 2's cpu twice" "" "$PM/cpu-22.pb.gz" --all -l version=2.0
one_line "top with nothing in the range: one line, exit 1" 1 'top: no cpu profiles of any service between' top --all --from now-3h --to now-2h
one_line "top -i nosuch: the sample types, exit 2" 2 "no sample type 'nosuch' in the cpu profiles; they have \[samples/count cpu/nanoseconds\]" top --service both -i nosuch
# normalisation (API v1, docs/api.md "Normalisation"): two snapshots of one instance (the same
# heap file twice) average to the file itself; --raw sums them
if expect_ok "load 2 heap snapshots of one instance" load --service gauge -l instance=h:1 "$C/1/heap.pb.gz" "$C/1/heap.pb.gz"; then
	top_compare "top --type heap (normalised): 2 snapshots of one source = their average = go tool pprof -top of the file" \
		"" "$C/1/heap.pb.gz" --service gauge --type heap
	if grep -q "^Normalized: each source's snapshots averaged (1 sources, 2 profiles); --raw sums them$" "$T/o"; then
		ok "top --type heap: the header says the snapshots were averaged"
	else
		fail "top --type heap: the header says the snapshots were averaged" "$(head -6 "$T/o")"
	fi
	proto "$PM/heap-11.pb.gz" "$C/1/heap.pb.gz" "$C/1/heap.pb.gz"
	top_compare "top --type heap --raw = go tool pprof -top of the 2 snapshots merged (summed)" "" "$PM/heap-11.pb.gz" \
		--service gauge --type heap --raw
	if grep -q '^Normalized: no (--raw): the profiles summed as they are$' "$T/o"; then ok "top --raw: the header says so"; else
		fail "top --raw: the header says so" "$(head -6 "$T/o")"
	fi
fi
if expect_ok "top cpu: cores" top --service both &&
	grep -Eq '^Cores: [0-9]+\.[0-9]{3} \(CPU time / profiled wall time x processes, per service\)$' "$T/o" &&
	! grep -q '^Normalized:' "$T/o"; then
	ok "top (cpu): a Cores line, no Normalized line (cpu is summed)"
else
	fail "top (cpu): a Cores line" "$(head -6 "$T/o")"
fi
# the selector escapes label values: quote, backslash, blank
if expect_ok 'load -l note=a"b\c d' load --service esc -l 'note=a"b\c d' "$C/1/cpu.pb.gz"; then
	top_compare 'top -l note=a"b\c d: the value escaped in the selector = go tool pprof -top of the file' "" \
		"$C/1/cpu.pb.gz" --service esc -l 'note=a"b\c d'
	one_line 'top -l note=a"b (another value): nothing, exit 1' 1 \
		'^profd top: no cpu profiles of service "esc" between .* with labels note=a"b; see what there is' \
		top --service esc -l 'note=a"b'
fi
# a collector without API v1 (profefe: 404 on /api/1/*): API v0 passes through a proxy
python3 - "$URL" "$T/proxy.port" "$T/proxy.log" >/dev/null 2>&1 <<'EOF' &
import http.server, os, sys, urllib.request, urllib.error
up, portf, logf = sys.argv[1], sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        open(logf, "a").write(self.path.split("?")[0] + "\n")
        if not self.path.startswith("/api/0/"):
            self.send_response(404); self.send_header("Content-Type", "text/plain; charset=utf-8"); self.end_headers()
            self.wfile.write(b"404 page not found\n")
            return
        try:
            r = urllib.request.urlopen(up + self.path, timeout=60)
            code, body, ct = r.status, r.read(), r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            code, body, ct = e.code, e.read(), e.headers.get("Content-Type", "")
        self.send_response(code); self.send_header("Content-Type", ct); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(portf + ".tmp", "w").write(str(s.server_address[1])); os.rename(portf + ".tmp", portf)
s.serve_forever()
EOF
PROXY_PID=$!
for ((k = 0; k < 200; k++)); do [ -s "$T/proxy.port" ] && break; sleep 0.05; done
PROXY=http://127.0.0.1:$(cat "$T/proxy.port")
top_compare "top via a collector without API v1 (404 on /api/1/top): merged here, = go tool pprof -top" "" "$PM/cpu-12.pb.gz" \
	--service both --collector "$PROXY"
if grep -qx /api/1/top "$T/proxy.log" && grep -qx /api/0/profiles/merge "$T/proxy.log"; then
	ok "top without API v1: /api/1/top asked first (404), then /api/0/profiles/merge"
else
	fail "top without API v1: /api/1/top first, then API v0" "$(sort "$T/proxy.log" | uniq -c | head)"
fi
top_compare "top --type heap without API v1: the snapshots summed (= go tool pprof -top of both)" "" "$PM/heap-11.pb.gz" \
	--service gauge --type heap --collector "$PROXY"
if grep -q '^Normalized: no: the collector has no API v1 (GET /api/1/top); the profiles summed as they are$' "$T/o"; then
	ok "top --type heap without API v1: the header says the snapshots are summed"
else
	fail "top --type heap without API v1: the header" "$(head -6 "$T/o")"
fi
# every service's cpu: auth (set 1), both (1, 2), search (2), mixed (1), esc (1)
proto "$PM/cpu-all2.pb.gz" "$C/1/cpu.pb.gz" "$C/1/cpu.pb.gz" "$C/2/cpu.pb.gz" "$C/2/cpu.pb.gz" "$C/1/cpu.pb.gz" "$C/1/cpu.pb.gz"
top_compare "top --all without API v1 = go tool pprof -top of every service's cpu files" "" "$PM/cpu-all2.pb.gz" \
	--all --collector "$PROXY"
top_compare "top --all (API v1) = the same" "" "$PM/cpu-all2.pb.gz" --all
kill "$PROXY_PID" 2>/dev/null
wait "$PROXY_PID" 2>/dev/null

# ---- 5. faults and usage --------------------------------------------------------------

dead=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
DEAD=http://127.0.0.1:$dead
for cmd in "get services" "get profiles --service a" "get types" "merge --service a --type cpu -O $T/x.pb.gz" \
	"load --service a $C/1/cpu.pb.gz" "top --all"; do
	# shellcheck disable=SC2086 # cmd is word-split on purpose
	one_line "collector down: $cmd: one line, exit 1" 1 \
		"^profd ${cmd%% --*}: cannot reach the collector at $DEAD \(connection refused\); is \`profd serve\` running\? set --collector or \\\$PROFD_COLLECTOR$" \
		$cmd --collector "$DEAD"
done
PROFD_COLLECTOR=$DEAD one_line "collector down via \$PROFD_COLLECTOR" 1 "cannot reach the collector at $DEAD" get services
PROFD_COLLECTOR=127.0.0.1:$port expect_ok "\$PROFD_COLLECTOR as host:port" get services && ok "\$PROFD_COLLECTOR=host:port works"
# shellcheck disable=SC2016 # backquotes in the expected message
one_line "--collector unknown host: one line, exit 1" 1 'cannot reach the collector at http://nosuch.invalid:10100 \(.*\); is `profd serve` running' \
	get services --collector http://nosuch.invalid:10100
# not a collector (a plain web server: 404 in HTML), and one that never
# answers (accepts, reads nothing): both started here, on free ports
python3 - "$T/other.port" >/dev/null 2>&1 <<'EOF' &
import http.server, os, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(404); self.send_header("Content-Type", "text/html"); self.end_headers()
        self.wfile.write(b"<html><body>404 page not found</body></html>\n")
    def log_message(self, *a): pass
s = socketserver.TCPServer(("127.0.0.1", 0), H)
open(sys.argv[1] + ".tmp", "w").write(str(s.server_address[1])); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.timeout = 30
s.handle_request()
EOF
OTHER_PID=$!
python3 - "$T/hang.port" >/dev/null 2>&1 <<'EOF' &
import os, socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1])); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
conns = [s.accept()[0]]
time.sleep(20)
EOF
HANG_PID=$!
for ((k = 0; k < 200; k++)); do [ -s "$T/other.port" ] && [ -s "$T/hang.port" ] && break; sleep 0.05; done
one_line "--collector not a collector (a web server's 404 page): exit 1, says so" 1 \
	"answered 404: <html><body>404 page not found</body></html> \(is this a profd or profefe collector\? check --collector\)" \
	get services --collector "http://127.0.0.1:$(cat "$T/other.port")"
one_line "--timeout: a collector that never answers: one line, exit 1" 1 \
	"the collector at http://127.0.0.1:[0-9]+ did not answer within 0.5s; try a larger --timeout" \
	get services --collector "http://127.0.0.1:$(cat "$T/hang.port")" --timeout 500ms
kill "$OTHER_PID" "$HANG_PID" 2>/dev/null
wait "$OTHER_PID" "$HANG_PID" 2>/dev/null
# a server answering 200 with API v0's envelope around the wrong shape: an error
# naming what is wrong, never an empty list or an empty table with exit 0
canned shape 'GET /api/0/profiles?' 200 '{"code":200,"body":[1,{"a":1}]}' 'GET /' 200 '{"code":200,"body":{"a":1}}'
SHAPE=$CANNED_URL SHAPE_PID=$CANNED_PID
one_line "a 200 of another shape: get services fails, exit 1" 1 \
	"^profd get services: listing the services: the collector's answer is not a JSON array of service names$" \
	get services --collector "$SHAPE"
one_line "a 200 of another shape: get types fails, exit 1" 1 "not a JSON array of service names$" get types --collector "$SHAPE"
one_line "a 200 of another shape: get profiles fails, exit 1" 1 "entry that is not a profile .*: item 0$" \
	get profiles --service a --collector "$SHAPE"
one_line "a 200 of another shape: top says so, not 'no profiles'" 1 "^profd top: the collector's answer is not an API v1 top" \
	top --service a --collector "$SHAPE"
one_line "a 200 of another shape: diff fails, exit 1" 1 "^profd diff: the collector's answer is not an API v1 diff" \
	diff --base cpu --target cpu --collector "$SHAPE"
if [ -s "$T/o" ]; then fail "a 200 of another shape: diff prints no table" "$(head -c 300 "$T/o")"; else ok "a 200 of another shape: diff prints no table"; fi
one_line "a 200 that is not a profile: diff -O fails, exit 1" 1 "^profd diff: the collector's answer is not a valid profile: not a profile: the body is JSON" \
	diff --base cpu --target cpu --collector "$SHAPE" -O "$T/shape.pb.gz"
if [ -e "$T/shape.pb.gz" ]; then fail "a 200 that is not a profile: diff -O writes no file" "$(head -c 100 "$T/shape.pb.gz")"; else ok "a 200 that is not a profile: diff -O writes no file"; fi
kill "$SHAPE_PID" 2>/dev/null
wait "$SHAPE_PID" 2>/dev/null
# an API v1 top or diff whose rows are garbled (a value of another kind): an error naming
# the row, not a table of zeros
canned rows 'GET /api/1/top' 200 '{"code":200,"body":{"sample_type":"cpu","unit":"nanoseconds","total":100,"functions":2,"profiles":1,"services":[{"service":"a"}],"rows":[{"name":"f","flat":10,"cum":10},{"name":"g","flat":"90","cum":90}]}}' \
	'GET /api/1/diff' 200 '{"code":200,"body":{"sample_type":"cpu","unit":"nanoseconds","total":100,"functions":1,"rows":[{"name":{},"delta_flat":1,"delta_cum":1}]}}'
one_line "a top whose row holds a string for a number: exit 1, names the row" 1 \
	'^profd top: the collector.s answer is not an API v1 top: row 1 has no integer "flat"' \
	top --service a --collector "$CANNED_URL"
one_line "a diff whose row has no name: exit 1, names the row" 1 \
	'^profd diff: the collector.s answer is not an API v1 diff: row 0 has no "name"' \
	diff --base cpu --target cpu --collector "$CANNED_URL"
kill "$CANNED_PID" 2>/dev/null
wait "$CANNED_PID" 2>/dev/null
# an empty or HTML answer to the regression report's table is not "no regressions"
canned regr 'GET /api/1/regressions' 200 '' 'GET /' 404 '{"code":404,"error":"no rule"}'
one_line "regressions: a 200 with an empty body: exit 1, says so" 1 \
	'^profd regressions: the collector at http://127.0.0.1:[0-9]+ answered 200 with an empty body, not a regression report' \
	regressions --collector "$CANNED_URL"
kill "$CANNED_PID" 2>/dev/null
wait "$CANNED_PID" 2>/dev/null
# a server's error text and a body that is not JSON reach a terminal escaped: an ESC
# sequence (clear the screen), a C1 CSI and a newline (a forged line) are shown, not obeyed
canned esc 'GET /api/0/services' 400 '{"code":400,"error":"bad \\u001b[2J \\u009b31m thing\\nforged: line"}' \
	'GET /' 200 '\x1b]0;pwn\x07 \xc2\x9b2J not json\nforged'
one_line "a server's error with control characters: escaped on one line, exit 1" 1 \
	'answered 400: bad \\x1b\[2J \\u009b31m thing\\nforged: line$' \
	get services --collector "$CANNED_URL"
one_line "a body that is not JSON, with control characters: escaped on one line, exit 1" 1 \
	'is not API v0 JSON: \\x1b\]0;pwn\\x07 \\u009b2J not json\\nforged$' \
	get profiles --service a --collector "$CANNED_URL"
kill "$CANNED_PID" 2>/dev/null
wait "$CANNED_PID" 2>/dev/null
# load: the id and time the collector answers, and a body without an id, are shown escaped
canned loadesc 'POST /api/0/profiles?service=y' 200 '\x1b]0;pwn\x07 no id\nforged' \
	'POST /api/0/profiles' 200 '{"code":200,"body":{"id":"ab\\u001b[2Jc\\nforged","created_at":"2026-01-01T00:00:00Z\\u0007"}}'
run "load: a collector's id with control characters" load --service x "$C/1/cpu.pb.gz" --collector "$CANNED_URL"
if [ "$RC" = 0 ] && ! grep -q $'[\e\a]' "$T/o" && grep -qF 'ab\x1b[2Jc\nforged' "$T/o" && grep -qF '2026-01-01T00:00:00Z\x07' "$T/o"; then
	ok "load: a collector's id and time with control characters are shown escaped in the table"
else fail "load: a collector's id with control characters" "exit $RC: $(cat -A "$T/o" | head -c 400)"; fi
one_line "load: a collector's answer without an id, with control characters: escaped on one line, exit 1" 1 \
	'has no profile id: \\x1b\]0;pwn\\x07 no id\\nforged$' \
	load --service y "$C/1/cpu.pb.gz" --collector "$CANNED_URL"
kill "$CANNED_PID" 2>/dev/null
wait "$CANNED_PID" 2>/dev/null
# get: a service name, a time and ids with control characters (a collector that is not
# profd: it refuses them) are escaped in every table and in -o name; -o json keeps them
canned getesc 'GET /api/0/services' 200 '{"code":200,"body":["a\\u001b[2Jb\\nforged"]}' \
	'GET /api/0/profiles' 200 '{"code":200,"body":[{"id":"i\\u001bd","type":"cpu","service":"a\\u001b[2Jb\\nforged","created_at":"2026-12-06T18:00:00Z\\u0007","labels":[]}]}'
for g in "services" "types --from 2026-12-06T00:00:00Z" "services -o name" "profiles -o name --from 2026-12-06T00:00:00Z"; do
	# shellcheck disable=SC2086 # the words on purpose
	run "get $g" get $g --collector "$CANNED_URL"
	if [ "$RC" = 0 ] && ! grep -q $'[\e\a]' "$T/o" && grep -qF -e 'a\x1b[2Jb\nforged' -e 'i\x1bd' "$T/o"; then
		ok "get $g: the collector's control characters are shown escaped"
	else fail "get $g: escaped" "exit $RC: $(cat -A "$T/o" | head -c 400)"; fi
done
run "get services -o json" get services -o json --collector "$CANNED_URL"
expect "get services -o json: the name as the collector sent it" $'a\e[2Jb\nforged' "$(jq -r '.[0]' "$T/o")"
kill "$CANNED_PID" 2>/dev/null
wait "$CANNED_PID" 2>/dev/null
# an HTTP error: a profile without samples (go tool pprof -focus matching nothing) is refused
go tool pprof -proto -focus=NoSuchFunctionAnywhere "$C/1/cpu.pb.gz" >"$T/empty.pb.gz" 2>/dev/null
one_line "load refused by the collector (400): one line with the server's message, exit 1" 1 \
	"^profd load: $T/empty.pb.gz \(as cpu\): the collector at $URL answered 400: malformed profile: profile is empty: no samples$" \
	load --service x "$T/empty.pb.gz"

usage "load --type CPU: names the valid types" 'unknown profile type "CPU" \(valid: cpu, heap' load --service x --type CPU "$C/1/cpu.pb.gz"
usage "get without a resource" 'get: what to get\? services, profiles or types' get
usage "get an unknown resource" "get: unknown resource 'pods'" get pods
usage "get services --service" 'does not apply' get services --service a
# the hint is the command line's spelling (now+1h), not a URL's (now%2B1h, which --from refuses)
usage "--from 1h (bare duration)" '--from: bad "from" timestamp "1h".* now-1h \(past\) or now\+1h \(future\)$' get profiles --service a --from 1h
usage "--from after --to" '--from now \(.*\) is after --to -1h' get profiles --service a --from now --to -1h
usage "--to garbage" '--to: bad "to" timestamp "yesterday"' get profiles --service a --to yesterday
usage "-o xml" "-o: want table, json or name, got 'xml'" get services -o xml
usage "unknown option" "^profd get: unknown option '--bogus'$" get services --bogus
usage "a flag without its value" "^profd merge: option '--type' needs a value$" merge --service a --type
usage "an unknown short option" "^profd top: unknown option '-x'$" top --all -x
usage "-l without =" '-l: want KEY=VALUE' get profiles --service a -l version
usage "--collector ftp://" 'only http:// and https://' get services --collector ftp://x
usage "--timeout 0" '--timeout must be at least 1ms' get services --timeout 0s
usage "merge without --type" 'merge: --type is required' merge --service a -O x
usage "merge without --service" 'merge: --service is required' merge --type cpu -O x
usage "merge --print-url and -O" 'choose one' merge --service a --type cpu --print-url -O x
usage "merge --type trace" 'trace' merge --service a --type trace -O x
usage "load without files" 'load: no files to load' load --service a
usage "load without --service" 'load: --service is required' load "$C/1/cpu.pb.gz"
usage "load --created-at garbage" '--created-at: bad "created-at" timestamp' load --service a --created-at x "$C/1/cpu.pb.gz"
usage "top without --service or --all" 'top: --service NAME, --all \(every service\) or --query' top
usage "top --service and --all" 'choose one' top --service a --all
usage "top --limit -1" '--limit needs a count' top --all --limit -1
for c in get merge load top; do
	if expect_ok "$c --help" "$c" --help && grep -q '^Usage: profd '"$c" "$T/o" && grep -q '^Examples:' "$T/o" &&
		grep -q '^Exit codes:' "$T/o" && grep -q -- '--collector URL' "$T/o"; then
		ok "$c --help: usage, --collector, examples, exit codes"
	else
		fail "$c --help" "$(head -c 300 "$T/o")"
	fi
done
if expect_ok "profd --help" --help && grep -Eq '^  get +list what a collector has' "$T/o" && grep -Eq '^  top ' "$T/o" &&
	grep -Eq '^  merge ' "$T/o" && grep -Eq '^  load ' "$T/o"; then
	ok "profd --help lists get, merge, load, top"
else
	fail "profd --help lists get, merge, load, top" "$(head -c 600 "$T/o")"
fi

# ---- 5b. an uploader's strings on a terminal ---------------------------------------------
# A function name and a label value with ESC sequences (retitle, clear the screen) and a
# newline (a forged row): tables show them escaped, -o json gives them back as they are.
TE=$'main.\e]0;pwn\a\e[2Jx\nforged'
python3 "$ROOT/tests/e2e/hostile_prof.py" names "$T/term.pb.gz" "$TE" >/dev/null
for v in 1 2; do
	curl -s -o /dev/null --data-binary "@$T/term.pb.gz" \
		"$URL/api/0/profiles?service=termesc&type=cpu&labels=version=$v%1b%5b31m"
done
esc_free() { # NAME WANT: the output has no control byte but newlines, and shows WANT
	if ! LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$T/o" && grep -qF -- "$2" "$T/o"; then
		ok "$1"
	else
		fail "$1" "$(head -c 600 "$T/o" | cat -v)"
	fi
}
expect_ok "top: a hostile name" top --service termesc &&
	esc_free "top: control bytes in a function name are escaped" 'main.\x1b]0;pwn\x07\x1b[2Jx\nforged'
expect_ok "get profiles: a hostile label" get profiles --service termesc &&
	esc_free "get profiles: control bytes in a label value are escaped" 'version=1\x1b[31m'
expect_ok "diff: a hostile name" diff --base 'cpu{service="termesc",version="1\x1b[31m"}' \
	--target 'cpu{service="termesc"}' &&
	esc_free "diff: control bytes in a function name are escaped" 'main.\x1b]0;pwn'
expect_ok "regressions: a hostile version" regressions --query 'cpu{service="termesc"}' &&
	esc_free "regressions: control bytes in a version are escaped" '1\x1b[31m -> 2\x1b[31m'
expect_ok "top -o json: a hostile name" top --service termesc -o json &&
	expect "top -o json: the name as it was uploaded" "$TE" "$(jq -r '.rows[0].name' "$T/o")"

# ---- 6. the kubectl plugin, make install, krew -----------------------------------------

mkdir -p "$T/bin"
ln -s "$PROFD" "$T/bin/kubectl-profd"
if expect_ok "argv[0] kubectl-profd" --help 2>/dev/null && "$T/bin/kubectl-profd" --help >"$T/o" 2>&1 &&
	grep -q "^Usage: kubectl profd <command>" "$T/o" && grep -q 'help about a command: kubectl profd help merge$' "$T/o" &&
	! grep -q 'help about a command: profd help' "$T/o"; then
	ok "as kubectl-profd: usage says 'kubectl profd' (the command list too)"
else
	fail "as kubectl-profd: usage says 'kubectl profd'" "$(head -c 300 "$T/o")"
fi
"$T/bin/kubectl-profd" get --help >"$T/o" 2>&1
if grep -q '^Usage: kubectl profd get services' "$T/o" && grep -q '^  kubectl profd get profiles --service auth' "$T/o" &&
	! grep -q 'kubectl kubectl' "$T/o"; then
	ok "as kubectl-profd: get --help says 'kubectl profd get'"
else
	fail "as kubectl-profd: get --help says 'kubectl profd get'" "$(head -c 400 "$T/o")"
fi
"$T/bin/kubectl-profd" get pods >/dev/null 2>"$T/e"
if [ $? -eq 2 ] && grep -q "^kubectl profd get: unknown resource 'pods'" "$T/e" && grep -q "^Run 'kubectl profd get --help'" "$T/e"; then
	ok "as kubectl-profd: usage errors say 'kubectl profd get'"
else
	fail "as kubectl-profd: usage errors say 'kubectl profd get'" "$(head -c 300 "$T/e")"
fi
"$T/bin/kubectl-profd" get services --collector "$DEAD" >/dev/null 2>"$T/e"
if [ $? -eq 1 ] && grep -q "^kubectl profd get services: cannot reach the collector at $DEAD (connection refused)" "$T/e"; then
	ok "as kubectl-profd: errors start with 'kubectl profd get services:'"
else
	fail "as kubectl-profd: errors start with 'kubectl profd get services:'" "$(head -c 300 "$T/e")"
fi

KUBECTL=$(command -v kubectl || true)
if [ -z "$KUBECTL" ]; then
	ok "kubectl plugin list / kubectl profd # SKIP kubectl not installed"
else
	KV=$(timeout 20 kubectl version --client 2>/dev/null | head -n1)
	PATH="$T/bin:$PATH" timeout 30 kubectl plugin list >"$T/o" 2>"$T/e"
	if grep -qx "$T/bin/kubectl-profd" "$T/o"; then
		ok "kubectl plugin list shows $T/bin/kubectl-profd ($KV)"
	else
		fail "kubectl plugin list shows kubectl-profd" "$(head -c 400 "$T/o") $(head -c 300 "$T/e")"
	fi
	"$PROFD" get services >"$T/direct" 2>&1
	# kubectl passes the plugin's arguments verbatim (flags included); no cluster is needed
	if PATH="$T/bin:$PATH" timeout 30 kubectl profd get services --collector "$URL" >"$T/o" 2>"$T/e"; then
		same_output "kubectl profd get services --collector URL (real kubectl) = profd get services" "$T/direct" "$T/o"
	else
		fail "kubectl profd get services (real kubectl)" "$(head -c 400 "$T/e")"
	fi
	PATH="$T/bin:$PATH" PROFD_COLLECTOR=$URL timeout 60 kubectl profd top --service both --limit 0 >"$T/o" 2>"$T/e"
	sed -n '/^ *flat  *flat%  *sum%  *cum  *cum%/,$p' "$T/o" >"$T/.ptt"
	gp "$T/.gt" "${TOP[@]}" "$PM/cpu-12.pb.gz"
	sed -n '/^ *flat  *flat%  *sum%  *cum  *cum%/,$p' "$T/.gt" >"$T/.gtt"
	same_output "kubectl profd top --service both (env collector) = go tool pprof -top" "$T/.gtt" "$T/.ptt"
	PATH="$T/bin:$PATH" timeout 30 kubectl profd merge --type cpu --service both -O "$PM/k.pb.gz" 2>"$T/e" >/dev/null
	if [ -s "$PM/k.pb.gz" ]; then
		same_pprof "kubectl profd merge -o FILE = go tool pprof -proto" "$PM/k.pb.gz" "$PM/cpu-12.pb.gz" "${TOP[@]}"
	else
		fail "kubectl profd merge -O FILE" "$(head -c 300 "$T/e")"
	fi
	PATH="$T/bin:$PATH" timeout 30 kubectl profd get bogus >/dev/null 2>"$T/e"
	rc=$?
	if [ "$rc" -eq 2 ] && grep -q "^kubectl profd get: unknown resource 'bogus'" "$T/e"; then
		ok "kubectl profd: a usage error exits 2 through kubectl"
	else
		fail "kubectl profd: a usage error exits 2 through kubectl" "exit $rc: $(head -c 300 "$T/e")"
	fi
fi

# make install into a DESTDIR: profd and the kubectl-profd link (the binary is not rebuilt: -o)
if make -s -C "$ROOT" -o "$BUILD/profd" BUILD="$BUILD" PREFIX=/usr DESTDIR="$T/dest" install >"$T/o" 2>&1 &&
	[ -x "$T/dest/usr/bin/profd" ] && [ "$(readlink "$T/dest/usr/bin/kubectl-profd")" = profd ] &&
	"$T/dest/usr/bin/kubectl-profd" --help 2>&1 | grep -q '^Usage: kubectl profd'; then
	ok "make install PREFIX=/usr DESTDIR=...: bin/profd and bin/kubectl-profd -> profd"
else
	fail "make install DESTDIR" "$(head -c 400 "$T/o") $(ls -l "$T/dest/usr/bin" 2>&1)"
fi
if [ -n "$KUBECTL" ] && PATH="$T/dest/usr/bin:$PATH" timeout 30 kubectl plugin list 2>/dev/null | grep -qx "$T/dest/usr/bin/kubectl-profd"; then
	ok "kubectl plugin list finds the installed kubectl-profd"
elif [ -n "$KUBECTL" ]; then
	fail "kubectl plugin list finds the installed kubectl-profd" "$(PATH="$T/dest/usr/bin:$PATH" kubectl plugin list 2>&1 | head -c 300)"
fi
make -s -C "$ROOT" PREFIX=/usr DESTDIR="$T/dest" uninstall >/dev/null 2>&1
if [ ! -e "$T/dest/usr/bin/profd" ] && [ ! -L "$T/dest/usr/bin/kubectl-profd" ]; then
	ok "make uninstall removes both"
else
	fail "make uninstall removes both" "$(ls -l "$T/dest/usr/bin")"
fi

# krew: the committed manifest, then the generated archive + manifest, installed as krew would
if ! python3 -c 'import yaml' 2>/dev/null; then
	ok "krew manifest checks # SKIP python3-yaml not installed (tools/deps.sh installs it)"
else
	if python3 "$ROOT/tests/e2e/krew_check.py" "$ROOT/deploy/krew/profd.yaml" >"$T/o" 2>&1; then
		ok "deploy/krew/profd.yaml: a valid krew v1alpha2 Plugin (krew's validation rules)"
	else
		fail "deploy/krew/profd.yaml: a valid krew Plugin" "$(head -c 600 "$T/o")"
	fi
	# a broken copy must be caught (the checker checks)
	sed 's/^kind: Plugin/kind: Plug/; s/^  version: v0.1.0/  version: 0.1/' "$ROOT/deploy/krew/profd.yaml" >"$T/profd.yaml"
	if ! python3 "$ROOT/tests/e2e/krew_check.py" "$T/profd.yaml" >"$T/o" 2>&1 && grep -q "kind 'Plug'" "$T/o" && grep -q "spec.version 0.1 is not" "$T/o"; then
		ok "krew check catches a wrong kind and a version without 'v'"
	else
		fail "krew check catches a wrong kind and a version" "$(head -c 300 "$T/o")"
	fi
	ver=$(sed -n 's/^  version: v//p' "$ROOT/deploy/krew/profd.yaml")
	pver=$("$PROFD" version | awk '{ print $2 }')
	if [ "$ver" = "$pver" ]; then ok "krew manifest version v$ver = profd version"; else fail "krew manifest version = profd version" "v$ver vs $pver"; fi
	KB=$T/krewbuild
	mkdir -p "$KB"
	cp "$PROFD" "$KB/profd"
	if (cd "$ROOT" && tools/krew.sh "$KB" https://releases.test/profd/v0.1.0) >"$T/o" 2>&1; then
		arch=$(sed -n 's/.*profd_linux_\([a-z0-9]*\)\.tar\.gz .*/\1/p' "$T/o")
		if python3 "$ROOT/tests/e2e/krew_check.py" "$KB/krew/profd.yaml" "$KB/krew/profd_linux_$arch.tar.gz" >"$T/c" 2>&1; then
			ok "make krew: archive + manifest (uri, sha256 of the archive, bin in it) valid for linux/$arch"
		else
			fail "make krew: generated manifest" "$(head -c 600 "$T/c")"
		fi
		# what krew install does: unpack into the store, link bin/kubectl-profd to the bin
		mkdir -p "$T/krew/store/profd/v$ver" "$T/krew/bin"
		tar -xzf "$KB/krew/profd_linux_$arch.tar.gz" -C "$T/krew/store/profd/v$ver"
		kbin=$(sed -n 's/^    bin: //p' "$KB/krew/profd.yaml")
		ln -s "$T/krew/store/profd/v$ver/$kbin" "$T/krew/bin/kubectl-profd"
		if [ -n "$KUBECTL" ] && PATH="$T/krew/bin:$PATH" timeout 30 kubectl profd get services --collector "$URL" >"$T/o" 2>"$T/e"; then
			same_output "the krew archive installed as krew does: kubectl profd get services works" "$T/direct" "$T/o"
		elif [ -n "$KUBECTL" ]; then
			fail "the krew archive installed as krew does" "$(head -c 300 "$T/e")"
		fi
	else
		fail "make krew (tools/krew.sh)" "$(head -c 600 "$T/o")"
	fi
fi

# ---- the collector stops: the next command says so in one line --------------------------

stop_server
one_line "collector stopped: get services: one line, exit 1" 1 "cannot reach the collector at $URL \(connection refused\)" get services
if grep -q "Sanitizer\|runtime error" "$T/serve.log"; then
	fail "collector log: no sanitizer report" "$(grep -m1 -A20 "Sanitizer\|runtime error" "$T/serve.log" | head -c 1500)"
else
	ok "collector log: no sanitizer report"
fi
