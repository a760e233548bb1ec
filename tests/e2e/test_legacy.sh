#!/usr/bin/env bash
# test_legacy.sh — Go's legacy profile formats (lib/pprof/legacy.c), judged by
# Google's own parser (the oracle: profile.Parse of Debian's
# golang-github-google-pprof-dev) and by `go tool pprof`:
#   1. every file of Debian's pprof testdata that profile.Parse accepts:
#      profd's `pprof convert` output parses (oracle) to exactly what Go parses
#      from the original (p.String()), and `go tool pprof -raw` prints the same
#   2. merges of legacy with protobuf profiles of the same kind (live goapp
#      ?debug=1 and ?debug=0 captures, and testdata pairs) equal profile.Merge
#   3. live examples/goapp ?debug=1 heap, allocs, block, mutex, goroutine:
#      `profd pprof info|top`, and through a running `profd serve`: POST,
#      list, GET by id, merge — `go tool pprof -top` of profd's answer equals
#      `go tool pprof -top` of the text file; threadcreate?debug=1 (whose "N @"
#      line without addresses Go refuses) is refused by both; a Java heapz
#      file POSTed and read back
#   4. non-profiles (HTML, JSON, text, a ?debug=2 goroutine dump, binary) are
#      refused by `profd pprof info` and POST with a message saying what they are
# Run: BUILD=build bash tests/e2e/test_legacy.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

need_built 1 "make BUILD=$BUILD $BUILD/profd $BUILD/goapp $BUILD/oracle" "$PROFD" "$GOAPP" "$ORACLE"
need_cmds 1 go curl
kill_started_on_exit

PPROF=/usr/share/gocode/src/github.com/google/pprof
TOP=(-top -nodecount=100000 -nodefraction=0 -edgefraction=0)
profd() { timeout 60 "$PROFD" "$@"; }

# same_go NAME FILE CONV: profd's conversion CONV of FILE is what Go makes of it:
# p.String() and go tool pprof -raw of Go's own conversion (oracle convert:
# Parse + Write) and of CONV are identical. Go's conversion, not FILE itself, is
# the reference: Go's protobuf decoder drops numeric labels of value 0 without
# a unit, so even Go's own round trip loses the "bytes:[0]" labels its legacy
# heap parser gives to samples whose counts are 0; everything else of FILE's
# parse is kept (checked below on files without such samples).
same_go() {
	if ! "$ORACLE" convert "$2" "$T/.go.pb.gz" 2>"$T/.err"; then
		fail "$1" "oracle convert $2: $(head -c 300 "$T/.err")"
		return
	fi
	same_parse "$1: profile.Parse of profd's output = of Go's" "$T/.go.pb.gz" "$3"
	same_report "$1: go tool pprof -raw" "$T/.go.pb.gz" "$3" -raw
}

# same_parse NAME A B: the oracle parses A and B to the same p.String()
same_parse() {
	if ! "$ORACLE" check "$2" >"$T/.pa" 2>&1; then
		fail "$1" "oracle refuses $2: $(head -c 300 "$T/.pa")"
	elif ! "$ORACLE" check "$3" >"$T/.pb" 2>&1; then
		fail "$1" "oracle refuses $3: $(head -c 300 "$T/.pb")"
	else
		same_output "$1" "$T/.pa" "$T/.pb"
	fi
}

# same_report NAME A B ARGS...: go tool pprof ARGS prints the same for A and B.
# Normalised: nothing but the "Local symbolization failed for X" and "Some
# binary filenames not available" warnings' order-free set, which go tool
# pprof prints to stderr (merged here) in map order.
same_report() {
	local name=$1 a=$2 b=$3
	shift 3
	go_pprof "$@" "$a" | sort_warnings >"$T/.ra"
	go_pprof "$@" "$b" | sort_warnings >"$T/.rb"
	if [ ! -s "$T/.ra" ]; then fail "$name" "go tool pprof $* $a printed nothing"; return; fi
	same_output "$name" "$T/.ra" "$T/.rb"
}
sort_warnings() { awk '/^Local symbolization failed|^Some binary filenames/ { w[n++] = $0; next } { print } END { for (i = 0; i < n; i++) print w[i] | "sort" }'; }

# ---- 1. Debian's testdata ------------------------------------------------------------
accepted=0
for f in "$PPROF"/profile/testdata/* "$PPROF"/internal/driver/testdata/*; do
	"$ORACLE" check "$f" >/dev/null 2>&1 || continue # expected outputs, not profiles
	accepted=$((accepted + 1))
	rel=${f#"$PPROF"/}
	out=$T/conv-$(echo "$rel" | tr / _).pb.gz
	if ! profd pprof convert "$f" "$out" 2>"$T/.err"; then
		fail "testdata $rel: profd pprof convert" "$(head -c 400 "$T/.err")"
		continue
	fi
	same_go "testdata $rel" "$f" "$out"
	if ! grep -q 'bytes:\[0\]' <("$ORACLE" check "$f"); then
		same_parse "testdata $rel: profile.Parse of profd's output = profile.Parse of the file" "$f" "$out"
		same_report "testdata $rel: go tool pprof -raw of the file" "$f" "$out" -raw
	fi
done
[ "$accepted" -ge 19 ] && ok "testdata: $accepted files accepted by profile.Parse" ||
	fail "testdata: profile.Parse accepts >= 19 files" "only $accepted (is golang-github-google-pprof-dev installed?)"

# legacy + legacy of one kind, and legacy + its protobuf conversion
lm() { # lm NAME FILE...: profd pprof merge = oracle merge (profile.Merge)
	local name=$1
	shift
	if ! profd pprof merge -o "$T/.m-profd.pb.gz" "$@" 2>"$T/.err"; then
		fail "$name" "profd pprof merge: $(head -c 400 "$T/.err")"
		return
	fi
	if ! "$ORACLE" merge "$T/.m-go.pb.gz" "$@" 2>"$T/.err"; then
		fail "$name" "oracle merge: $(head -c 400 "$T/.err")"
		return
	fi
	same_parse "$name: = profile.Merge" "$T/.m-go.pb.gz" "$T/.m-profd.pb.gz"
	same_report "$name: go tool pprof -raw" "$T/.m-go.pb.gz" "$T/.m-profd.pb.gz" -raw
	# the path of large inputs (decoded whole by another thread): the same bytes
	if PROFD_MERGE_PIPE_MIN=0 profd pprof merge -j 2 -o "$T/.m-pipe.pb.gz" "$@" 2>"$T/.err"; then
		same_output "$name: piped, the same bytes" "$T/.m-profd.pb.gz" "$T/.m-pipe.pb.gz"
	else
		fail "$name: piped" "$(head -c 400 "$T/.err")"
	fi
}
D=$PPROF/profile/testdata
lm "merge testdata cpu (2 legacy CPU files + a protobuf)" "$D/cppbench.cpu" "$D/gobench.cpu" "$T/conv-profile_testdata_go.crc32.cpu.pb.gz"
lm "merge testdata heap (legacy + protobuf of it)" "$D/cppbench.heap" "$T/conv-profile_testdata_cppbench.heap.pb.gz"
lm "merge testdata contention (C++ legacy, 2 files)" "$D/cppbench.contention" "$PPROF/internal/driver/testdata/cppbench.small.contention"

# the fuzz corpus (hand-written seeds of Go's and Java's formats, a maps section
# with $attr, glog and brief lines, refusals; and what fuzzing found that adds
# coverage): profd accepts exactly what Go accepts, and agrees. Inputs on which
# the two disagree would be kept apart, in tests/fuzz/legacy-divergent (none is
# now: see its README).
for f in "$ROOT"/tests/fuzz/corpus/legacy/*; do
	n=${f##*/}
	if "$ORACLE" check "$f" >/dev/null 2>&1; then
		if profd pprof convert "$f" "$T/seed.pb.gz" 2>"$T/.err"; then
			same_go "seed $n" "$f" "$T/seed.pb.gz"
		else
			fail "seed $n: accepted like profile.Parse" "$(head -c 300 "$T/.err")"
		fi
	else
		expect_exit "seed $n: refused like profile.Parse" 1 . profd pprof info "$f"
	fi
done

# ---- 3. live goapp ?debug=1 captures -----------------------------------------------------
start_goapp app auth
# shellcheck disable=SC2154 # PORT_app is set by start_goapp
G=http://127.0.0.1:$PORT_app/debug/pprof
sleep 2 # let the workload fill the block, mutex and heap profiles
L=$T/live
mkdir -p "$L"
for t in heap allocs block mutex goroutine threadcreate; do
	curl -sS --max-time 30 -o "$L/$t.txt" "$G/$t?debug=1" || fail "capture $t?debug=1" "curl failed"
	curl -sS --max-time 30 -o "$L/$t.pb.gz" "$G/$t" || fail "capture $t" "curl failed"
done
curl -sS --max-time 30 -o "$L/goroutine2.txt" "$G/goroutine?debug=2"
# the endpoints that answer no profile
curl -sS --max-time 30 -o "$L/trace.bin" "$G/trace?seconds=1"
curl -sS --max-time 30 -o "$L/symbol.txt" "$G/symbol"
curl -sS --max-time 30 -o "$L/cmdline.bin" "$G/cmdline"

for t in heap allocs block mutex goroutine; do
	case $t in heap | allocs) kind=heap ;; block | mutex) kind=block/mutex ;; *) kind=$t ;; esac
	profd pprof info "$L/$t.txt" >"$T/.info" 2>&1
	if grep -q "^kind: *$kind\$" "$T/.info"; then ok "live $t?debug=1: profd pprof info says kind $kind"; else fail "live $t?debug=1: info" "$(head -c 400 "$T/.info")"; fi
	if grep -Eq "^file: .*, [a-z ]*profile, legacy format\)\$" "$T/.info"; then ok "live $t?debug=1: profd pprof info names the legacy format"; else fail "live $t?debug=1: info names the format" "$(head -1 "$T/.info")"; fi
	profd pprof info "$L/$t.pb.gz" >"$T/.info" 2>&1
	if grep -Eq "^file: .*\(.*, gzip\)\$" "$T/.info"; then ok "live $t: profd pprof info says gzip'd protobuf"; else fail "live $t: info format" "$(head -1 "$T/.info")"; fi
	if profd pprof convert "$L/$t.txt" "$L/$t.conv.pb.gz" 2>"$T/.err"; then
		same_go "live $t?debug=1" "$L/$t.txt" "$L/$t.conv.pb.gz"
	else
		fail "live $t?debug=1: convert" "$(head -c 400 "$T/.err")"
	fi
	# profd's own top table is go tool pprof's
	same_report "live $t?debug=1: go tool pprof -top of the text = of profd's convert" "$L/$t.txt" "$L/$t.conv.pb.gz" "${TOP[@]}"
	lm "live merge $t: ?debug=1 text + ?debug=0 protobuf" "$L/$t.txt" "$L/$t.pb.gz"
done
# Go 1.19 writes threadcreate?debug=1 as "N @" without addresses: profile.Parse refuses it
if "$ORACLE" check "$L/threadcreate.txt" >/dev/null 2>&1; then
	check "live threadcreate?debug=1: accepted like profile.Parse does" profd pprof convert "$L/threadcreate.txt" "$L/threadcreate.conv.pb.gz"
else
	expect_exit "live threadcreate?debug=1: refused with a line number, as profile.Parse refuses it, saying why" 1 \
		'threadcreate profile, line [0-9]+: malformed line "[0-9]+ @": a count without a stack, .*debug=0' profd pprof info "$L/threadcreate.txt"
fi

# through a collector
"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data" 2>"$T/serve.log" &
port=$(wait_line "$T/serve.log" '.*listening on port \([0-9][0-9]*\).*')
[ -n "$port" ] || { fail "setup: profd serve" "$(head -c 400 "$T/serve.log")"; exit 1; }
B=http://127.0.0.1:$port
declare -A IDS
for t in heap allocs block mutex goroutine; do
	# heap and allocs texts are the same format (Go cannot tell them apart either): declare the type
	code=$(curl -sS -o "$T/.b" -w '%{http_code}' --data-binary "@$L/$t.txt" "$B/api/0/profiles?service=legacy&type=$t")
	id=$(sed -n 's/^{"code":200,"body":{"id":"\([0-9a-v]\{20\}\)",.*/\1/p' "$T/.b")
	if [ "$code" = 200 ] && [ -n "$id" ]; then ok "POST $t?debug=1 text: 200"; else fail "POST $t?debug=1 text" "$code $(head -c 300 "$T/.b")"; continue; fi
	IDS[$t]=$id
	# also without a type: inferred from the text (block/mutex by their header)
	code=$(curl -sS -o "$T/.b" -w '%{http_code}' --data-binary "@$L/$t.txt" "$B/api/0/profiles?service=inferred")
	want=$t
	[ "$t" = allocs ] && want=heap
	if grep -q "\"type\":\"$want\"" "$T/.b"; then ok "POST $t?debug=1 text without type: stored as $want"; else fail "POST $t text without type" "$code $(head -c 300 "$T/.b")"; fi
done
# profd load: the type read from each text (heap for heap/allocs: the same text)
if PROFD_COLLECTOR=$B profd load --service loaded "$L/heap.txt" "$L/block.txt" "$L/mutex.txt" "$L/goroutine.txt" >"$T/.load" 2>&1; then
	curl -sS "$B/api/0/profiles?service=loaded&from=now-1h&to=now%2B1h" -o "$T/.ll"
	got=$(grep -o '"type":"[a-z]*"' "$T/.ll" | sort | tr -d '\n')
	expect "profd load of 4 texts: types inferred" '"type":"block""type":"goroutine""type":"heap""type":"mutex"' "$got"
else
	fail "profd load of legacy texts" "$(head -c 400 "$T/.load")"
fi
# a Java heapz file (Debian's testdata) on the same path: no Go kind (no period
# type), so stored as "other"; GET answers what go tool pprof makes of the file
code=$(curl -sS -o "$T/.b" -w '%{http_code}' --data-binary "@$D/java.heap" "$B/api/0/profiles?service=java")
id=$(sed -n 's/^{"code":200,"body":{"id":"\([0-9a-v]\{20\}\)",.*/\1/p' "$T/.b")
if [ "$code" = 200 ] && [ -n "$id" ] && grep -q '"type":"other"' "$T/.b"; then
	ok "POST Java heapz text: 200, stored as type other"
	curl -sS -o "$L/java.heap.get.pb.gz" "$B/api/0/profiles/$id"
	same_report "GET Java heapz by id: go tool pprof -top = -top of the text file" "$D/java.heap" "$L/java.heap.get.pb.gz" "${TOP[@]}"
else
	fail "POST Java heapz text" "$code $(head -c 300 "$T/.b")"
fi
curl -sS "$B/api/0/profiles?service=legacy&from=now-1h&to=now%2B1h" -o "$T/.list"
n=$(grep -o '"id":"' "$T/.list" | wc -l)
expect "list: the 5 uploaded legacy profiles" 5 "$n"
for t in "${!IDS[@]}"; do
	curl -sS -o "$L/$t.get.pb.gz" "$B/api/0/profiles/${IDS[$t]}"
	same_report "GET $t by id: go tool pprof -top = -top of the text file" "$L/$t.txt" "$L/$t.get.pb.gz" "${TOP[@]}"
	curl -sS -o "$L/$t.merge.pb.gz" "$B/api/0/profiles/merge?service=legacy&type=$t&from=now-1h&to=now%2B1h"
	same_report "merge $t (one legacy profile): go tool pprof -top = -top of the text file" "$L/$t.txt" "$L/$t.merge.pb.gz" "${TOP[@]}"
done
# legacy and protobuf of one kind in one merge
code=$(curl -sS -o "$T/.b" -w '%{http_code}' --data-binary "@$L/heap.pb.gz" "$B/api/0/profiles?service=legacy&type=heap")
expect "POST heap protobuf next to the legacy one: 200" 200 "$code"
curl -sS -o "$L/heap.merge2.pb.gz" "$B/api/0/profiles/merge?service=legacy&type=heap&from=now-1h&to=now%2B1h"
"$ORACLE" merge "$L/heap.go2.pb.gz" "$L/heap.pb.gz" "$L/heap.txt"
# Normalised: the Time line. Legacy profiles have no time; profile.Merge's doc
# says the result's time is "the earliest nonzero one", which profd does, but
# its code takes a 0 that comes after a nonzero time (here: protobuf, then
# legacy, the store's order), so Go's merged profile has no time at all.
go_pprof "${TOP[@]}" "$L/heap.go2.pb.gz" | grep -v '^Time:' >"$T/.ta"
go_pprof "${TOP[@]}" "$L/heap.merge2.pb.gz" | grep -v '^Time:' >"$T/.tb"
same_output "API merge of legacy + protobuf heap: go tool pprof -top = profile.Merge's (but Time)" "$T/.ta" "$T/.tb"

# ---- 4. non-profiles -----------------------------------------------------------------------
N=$T/non
mkdir -p "$N"
printf '<!DOCTYPE html>\n<html><head><title>Login</title></head><body>sign in</body></html>\n' >"$N/page.html"
printf '{"code":401,"error":"unauthorized"}\n' >"$N/err.json"
printf 'hello world\nthis is not a profile\n' >"$N/text.txt"
head -c 3000 /dev/urandom | tr -d '\n\r\t -~' | head -c 2000 >"$N/random.bin"
printf '\x00\x01\x02\x03garbage' >>"$N/random.bin"
cp "$L/goroutine2.txt" "$N/goroutine-debug2.txt"
cp "$L/trace.bin" "$L/symbol.txt" "$L/cmdline.bin" "$N/"
declare -A WANT=([page.html]='an HTML page' [err.json]='is JSON' [text.txt]='text that is not a profile \(first line: .{0,2}hello world'
	[random.bin]='bytes of binary data that is neither protobuf nor a legacy profile' [goroutine-debug2.txt]='goroutine dump \(debug=2'
	[trace.bin]='a Go execution trace \([0-9]+ bytes, from /debug/pprof/trace' [symbol.txt]='/debug/pprof/symbol.s answer'
	[cmdline.bin]='a command line, arguments separated by NUL bytes .*/debug/pprof/cmdline')
for f in page.html err.json text.txt random.bin goroutine-debug2.txt trace.bin symbol.txt cmdline.bin; do
	"$ORACLE" check "$N/$f" >/dev/null 2>&1 && fail "non-profile $f" "the oracle accepts it"
	expect_exit "profd pprof info $f: refused, says what it is" 1 "${WANT[$f]}" profd pprof info "$N/$f"
	# a protobuf error may follow as "; read as protobuf: ..." (a first byte
	# that is a Profile tag), never instead of the description
	if sed 's/; read as protobuf: .*//' "$T/.err" | grep -q "field\|wire type"; then fail "profd pprof info $f: no protobuf field error" "$(cat "$T/.err")"; fi
	code=$(curl -sS -o "$T/.b" -w '%{http_code}' --data-binary "@$N/$f" "$B/api/0/profiles?service=bad&type=heap")
	if [ "$code" = 400 ] && grep -Eq "${WANT[$f]}" "$T/.b"; then ok "POST $f: 400, says what it is"; else fail "POST $f" "$code $(head -c 300 "$T/.b")"; fi
done
# noise whose first byte is a Profile tag (field 1, wire type 3): described
# as binary data, with the protobuf decoder's reading after it
{ printf '\x0b'; head -c 2000 /dev/urandom; } >"$N/tagnoise.bin"
expect_exit "profd pprof info tagnoise.bin: binary data, and how protobuf read it" 1 \
	'bytes of binary data that is neither protobuf nor a legacy profile \(starts with 0b .*\); read as protobuf: .*wire type 3' \
	profd pprof info "$N/tagnoise.bin"
# gzip'd non-profile: the same message after gunzip
gzip -c "$N/page.html" >"$N/page.html.gz"
expect_exit "profd pprof info page.html.gz: refused as HTML after gunzip" 1 'an HTML page' profd pprof info "$N/page.html.gz"
# a damaged protobuf keeps its protobuf error
head -c 200 "$L/heap.pb.gz" | gzip -dc 2>/dev/null | head -c 150 >"$N/trunc.pb"
# (cut inside a field: "offset"/"truncated"; on a field boundary: the
# string table is missing)
expect_exit "truncated protobuf: still a protobuf error" 1 'offset|truncated|string_table' profd pprof info "$N/trunc.pb"
no_sanitizer "no sanitizer reports" "$T/serve.log"

# ---- 5. huge values ----------------------------------------------------------------------
# Counts near 2^63: heap sampling-rate scaling and contention scaling that
# overflow (Go's int64(f) gives MinInt64), sums that wrap, a stack repeated
# with values that wrap to opposite signs. `profd pprof top` of each file
# prints what `go tool pprof -top` prints of it (go tool pprof merges even
# one source: pprof's total is the sum of |value| over the merged samples),
# for every sample index; but the "Showing" line, which profd words apart.
H=$T/huge
mkdir -p "$H"
M=9223372036854775807
printf 'heap profile: 3: 3 [3: 3] @ heap/1048576\n1: %s [1: %s] @ 0x1 0x2\n1: %s [1: %s] @ 0x1 0x3\n1: %s [1: %s] @ 0x4\n' \
	$M $M $M $M $M $M >"$H/heap-scale-overflow"
printf 'heap profile: 3: 3 [3: 3] @ heap/1048576\n1: 4611686018427387904 [1: 4611686018427387904] @ 0x1 0x2\n1: 4611686018427387904 [1: 4611686018427387903] @ 0x1 0x3\n' >"$H/heap-sum-wraps"
printf -- '--- contention:\ncycles/second=1\nsampling period=1000000000\n%s %s @ 0x1 0x2\n%s %s @ 0x1 0x2\n' $M $M $M $M >"$H/contention-scale-overflow"
printf 'goroutine profile: total 3\n%s @ 0x1 0x2\n%s @ 0x1 0x2\n5 @ 0x7\n' $M $M >"$H/goroutine-repeated-stack-wraps"
for f in "$H"/*; do
	n=${f##*/}
	"$ORACLE" check "$f" >/dev/null 2>&1 || { fail "huge $n" "the oracle refuses it"; continue; }
	for i in 0 1; do
		# (no -nodecount: with one, pprof's makeNodeSet drops a node whose
		# cum is MinInt64, as |MinInt64| < 0; without, -top shows all)
		go_pprof -top -nodefraction=0 -edgefraction=0 -sample_index=$i "$f" | grep -v '^Main binary filename\|^Showing' >"$T/.ga"
		grep -q 'outside the range' "$T/.ga" && continue
		profd pprof top -n 0 -i $i "$f" >"$T/.gb" 2>&1
		grep -v '^Showing' "$T/.gb" >"$T/.gc"
		same_output "huge $n: profd pprof top -i $i = go tool pprof -top" "$T/.ga" "$T/.gc"
	done
done
# the same files through the collector, twice each (labels v=1 and v=2):
# every merge format, series, fleet top and diff answer without a sanitizer
# report (sums that wrap are pprof's int64 sums, never signed overflow)
for f in "$H"/*; do
	for v in 1 2; do
		code=$(curl -sS -o "$T/.b" -w '%{http_code}' --data-binary "@$f" "$B/api/0/profiles?service=huge&labels=v=$v")
		[ "$code" = 200 ] || fail "POST huge ${f##*/}" "$code $(head -c 300 "$T/.b")"
	done
done
bad=""
for t in heap block goroutine; do
	W="from=now-1h&to=now%2B1h"
	Q="$t%7Bservice%3D%22huge%22%7D" # TYPE{service="huge"}
	D2="base=$t%7Bservice%3D%22huge%22,v%3D%221%22%7D&target=$t%7Bservice%3D%22huge%22,v%3D%222%22%7D&$W"
	for u in "api/1/merge?query=$Q&$W&format=top" "api/1/merge?query=$Q&$W&format=folded" \
		"api/1/merge?query=$Q&$W&format=flamegraph" "api/1/series?query=$Q&$W" \
		"api/1/series?query=$Q&$W&by=service,function" "api/1/top?query=$Q&$W" \
		"api/1/diff?$D2&format=top" "api/1/diff?$D2&format=flamegraph" "api/1/diff?$D2&normalize=true&format=top"; do
		code=$(curl -sS -o "$T/.b" -w '%{http_code}' "$B/$u")
		[ "$code" = 200 ] || bad="$bad $code:$u"
	done
done
expect "huge values through merge, series, top and diff: all 200" "" "$bad"
no_sanitizer "huge values: no sanitizer reports" "$T/serve.log"
