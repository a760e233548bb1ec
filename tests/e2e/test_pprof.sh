#!/usr/bin/env bash
# test_pprof.sh — end-to-end tests of `profd pprof merge|top|folded|info|convert`
# on real profiles captured from the example Go service (build/goapp), checked
# against `go tool pprof` and the oracle (Google's profile package):
#   1. capture 3 independent sets of the 7 profile types
#   2. convert (gzip and --raw) round-trips: go tool pprof prints the same
#   3. merge of 3 files and of 1 file, per type: same as profile.Merge (oracle)
#      and as `go tool pprof -proto` (see the note on empty stacks there)
#   4. merge of 10 files: same as go tool pprof -proto; values are sums
#   5. incompatible inputs are refused; units of one kind (ms, ns) are converted
#   6. top: names, order, flat% and cum% exactly as go tool pprof computes them,
#      and the table text identical to go tool pprof -top
#   7. folded: format, totals, consistency with top
#   8. info: kind and label keys
#   9. usage errors and exit codes
#  10. --skip-bad
#  11. parallel merges (-j): byte-identical output for any thread count,
#      errors reported for the first bad file in input order
# Run: BUILD=build bash tests/e2e/test_pprof.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

TYPES="cpu heap allocs block mutex goroutine threadcreate"
TOP=(-top -nodecount=100000 -nodefraction=0 -edgefraction=0)
C=$T/cap # capture sets: $C/1 $C/2 $C/3

# ---- helpers ------------------------------------------------------------------------

# profd ARGS...: run profd, killed after 60 s so that a hang fails a check
# (exit 124) instead of stopping the whole suite
profd() { timeout 60 "$PROFD" "$@"; }

# same_report NAME A B ARGS...: `go tool pprof ARGS` prints the same for profiles
# A and B (both runs must succeed; -top/-raw output must not be empty).
same_report() {
	local name=$1 a=$2 b=$3
	shift 3
	if ! go_pprof "$@" "$a" >"$T/.ra"; then
		fail "$name" "go tool pprof $* $a failed: $(head -c 400 "$T/.ra")"
		return
	fi
	if ! go_pprof "$@" "$b" >"$T/.rb"; then
		fail "$name" "go tool pprof $* $b failed: $(head -c 400 "$T/.rb")"
		return
	fi
	case " $* " in
	*" -top "* | *" -raw "*)
		if [ ! -s "$T/.ra" ]; then
			fail "$name" "go tool pprof $* printed nothing"
			return
		fi
		;;
	esac
	same_output "$name" "$T/.ra" "$T/.rb"
}

# empty_stacks FILE: print the number of samples without locations (from the
# oracle's dump of the parsed profile); fails if the oracle rejects FILE.
empty_stacks() {
	"$ORACLE" check "$1" >"$T/.chk" 2>&1 || return 1
	awk '/^Samples:/ { s = 1; next } /^Locations/ { s = 0 }
	     s && /^ *-?[0-9]+( +-?[0-9]+)*: *$/ { n++ } END { print n + 0 }' "$T/.chk"
}

# col_sums FILE: the sum of each sample value column, space separated (exact
# integers), over all samples as parsed by the oracle. (Not go tool pprof -raw:
# that prints the profile after its pipeline, which merges duplicate samples
# and drops samples without locations.)
col_sums() {
	"$ORACLE" check "$1" 2>&1 | awk '/^Samples:/ { s = 1; next } /^Locations/ { s = 0 }
	s { i = index($0, ":"); if (!i) next; v = substr($0, 1, i - 1)
	    if (v !~ /^ *-?[0-9]+( +-?[0-9]+)* *$/) next
	    n = split(v, a, " "); for (j = 1; j <= n; j++) t[j] += a[j]; if (n > nc) nc = n }
	END { for (j = 1; j <= nc; j++) printf "%s%.0f", (j > 1 ? " " : ""), t[j]; print "" }'
}

# scale_sums K "A B ..." and add_sums "A B" "C D": vector arithmetic on col_sums
scale_sums() { echo "$2" | awk -v k="$1" '{ for (j = 1; j <= NF; j++) printf "%s%.0f", (j > 1 ? " " : ""), k * $j; print "" }'; }
add_sums() {
	printf '%s\n%s\n' "$1" "$2" | awk 'NR == 1 { for (j = 1; j <= NF; j++) a[j] = $j; next }
	{ for (j = 1; j <= NF; j++) printf "%s%.0f", (j > 1 ? " " : ""), a[j] + $j; print "" }'
}

# top_rows: the rows of a `go tool pprof -top` or `profd pprof top` report as
# "name<TAB>col1<TAB>col4" (flat and cum), with pprof's " (inline)" and
# " (partial-inline)" suffixes removed (the exact table, suffixes included,
# is compared separately).
top_rows() {
	awk '/^ *flat +flat% +sum% +cum +cum%/ { s = 1; next }
	s { n = $0; sub(/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+  /, "", n); sub(/ \((partial-)?inline\)$/, "", n)
	    print n "\t" $1 "\t" $4 }'
}

# go_top_expect OUT UNIT PPROF_ARGS... FILES: go tool pprof's rows with exact
# values (-unit=UNIT prints integers) as "name<TAB>flat<TAB>cum<TAB>total".
go_top_expect() {
	local out=$1 unit=$2
	shift 2
	go_pprof "${TOP[@]}" -unit="$unit" "$@" >"$out.go" || return 1
	local tot
	tot=$(sed -n 's/^Showing nodes accounting for .* of \(-\{0,1\}[0-9][0-9]*\)[a-zA-Z]* total$/\1/p' "$out.go")
	[ -n "$tot" ] || return 1
	top_rows <"$out.go" | awk -F'\t' -v t="$tot" '{ f = $2; c = $3; sub(/[a-zA-Z]+$/, "", f); sub(/[a-zA-Z]+$/, "", c)
		print $1 "\t" f "\t" c "\t" t }' >"$out"
}

# pct_check EXPECTED GOT: compare go_top_expect rows with profd_top_got rows:
# names and order exact; each percentage must be exactly what the exact values
# give, printed either as "%.2f%%" or as pprof's measurement.Percentage does
# ("100%", "%.2f%%" from 1%, "%.2g%%" below). Prints the first difference.
pct_check() {
	awk -F'\t' '
	function ppct(v, t, r) { r = t ? v / t * 100 : 0; if (r < 0) r = -r
		if (r >= 99.95 && r <= 100.05) return "100%"
		if (r >= 1) return sprintf("%.2f%%", r)
		return sprintf("%.2g%%", r) }
	function fpct(v, t) { return sprintf("%.2f%%", t ? 100 * v / t : 0) }
	NR == FNR { en[FNR] = $1; ef[FNR] = $2; ec[FNR] = $3; et = $4; n = FNR; next }
	bad { next }
	{ m = FNR
	  if (FNR > n) { print "extra row " FNR ": " $0; bad = 1; next }
	  if ($1 != en[FNR]) { print "row " FNR ": function " $1 ", want " en[FNR]; bad = 1; next }
	  if ($2 != fpct(ef[FNR], et) && $2 != ppct(ef[FNR], et)) { print "row " FNR " (" $1 "): flat% " $2 ", want " ppct(ef[FNR], et) " (" ef[FNR] "/" et ")"; bad = 1; next }
	  if ($3 != fpct(ec[FNR], et) && $3 != ppct(ec[FNR], et)) { print "row " FNR " (" $1 "): cum% " $3 ", want " ppct(ec[FNR], et) " (" ec[FNR] "/" et ")"; bad = 1; next } }
	END { if (!bad && m != n) print m + 0 " rows, want " n }' "$1" "$2"
}

# profd_top_got OUT ARGS...: profd pprof top ARGS as "name<TAB>flat%<TAB>cum%"
profd_top_got() {
	local out=$1
	shift
	profd pprof top "$@" >"$out.profd" 2>&1 || return 1
	# columns 2 and 5 of profd's rows are flat% and cum%
	awk '/^ *flat +flat% +sum% +cum +cum%/ { s = 1; next }
	s { n = $0; sub(/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+  /, "", n); sub(/ \((partial-)?inline\)$/, "", n)
	    print n "\t" $2 "\t" $5 }' "$out.profd" >"$out"
}

# ---- 0. prerequisites ------------------------------------------------------------------

for b in "$PROFD" "$GOAPP" "$ORACLE"; do
	if [ ! -x "$b" ]; then
		fail "setup: $b exists" "not built; run: make && make build/goapp build/oracle"
		exit 1
	fi
done
if ! command -v go >/dev/null; then
	fail "setup: go in PATH" "go tool pprof is needed"
	exit 1
fi

# ---- 1. capture 3 independent sets ----------------------------------------------------------

declare -a cap_pid
for i in 1 2 3; do
	"$ROOT/tests/e2e/capture.sh" "$GOAPP" "$C/$i" 1 >"$T/capture$i.log" 2>&1 &
	cap_pid[i]=$!
done
# A failed capture is retried (twice, alone): capture.sh reads goapp.log
# while the background goapp's shell may not have created it yet, which
# happens now and then on a loaded machine. The retry is shown in the name.
capfail=0
for i in 1 2 3; do
	retried=
	if ! wait "${cap_pid[i]}"; then
		for r in 1 2; do
			retried=" (retry $r after: $(grep -m1 . "$T/capture$i.log"))"
			rm -rf "${C:?}/$i"
			if "$ROOT/tests/e2e/capture.sh" "$GOAPP" "$C/$i" 1 >"$T/capture$i.log" 2>&1; then break; fi
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
		ok "setup: capture set $i from goapp (7 types, cpu 1s)$retried"
	fi
done
if [ "$capfail" -ne 0 ]; then
	fail "setup" "profile capture failed, the other checks cannot run"
	exit 1
fi
# The oracle (profile.Parse + CheckValid) must accept all 21 inputs, and the
# empty-stack counts are needed below.
declare -A EMPTY
bad=
for i in 1 2 3; do
	for t in $TYPES; do
		if n=$(empty_stacks "$C/$i/$t.pb.gz"); then EMPTY[$i/$t]=$n; else bad="$bad $i/$t"; fi
	done
done
if [ -z "$bad" ]; then ok "setup: oracle accepts all 21 captured profiles"; else fail "setup: oracle accepts all 21 captured profiles" "rejected:$bad: $(head -c 300 "$T/.chk")"; fi

# ---- 2. convert round-trip ------------------------------------------------------------------

R=$T/rt
mkdir -p "$R"
for t in $TYPES; do
	in=$C/1/$t.pb.gz
	if ! profd pprof convert "$in" "$R/$t.pb.gz" 2>"$T/.err" || ! profd pprof convert --raw "$in" "$R/$t.pb" 2>>"$T/.err"; then
		fail "convert $t" "$(head -c 400 "$T/.err")"
		continue
	fi
	gz=$(head -c 2 "$R/$t.pb.gz" | od -An -tx1 | tr -d ' \n')
	rawmagic=$(head -c 2 "$R/$t.pb" | od -An -tx1 | tr -d ' \n')
	if [ "$gz" = 1f8b ] && [ "$rawmagic" != 1f8b ]; then ok "convert $t: gzip output is gzip, --raw output is not"; else fail "convert $t: gzip output is gzip, --raw output is not" "magic $gz / $rawmagic"; fi
	for out in "$R/$t.pb.gz" "$R/$t.pb"; do
		f=${out##*/}
		same_report "convert $t -> $f: go tool pprof -raw identical" "$in" "$out" -raw
		same_report "convert $t -> $f: go tool pprof -top identical" "$in" "$out" "${TOP[@]}"
	done
	"$ORACLE" check "$in" >"$T/.oa" 2>&1
	"$ORACLE" check "$R/$t.pb" >"$T/.ob" 2>&1
	same_output "convert $t: oracle dump identical (ids and order kept)" "$T/.oa" "$T/.ob"
done
if go_pprof -tags "$C/1/cpu.pb.gz" >"$T/.tags" && grep -q 'handler:' "$T/.tags" &&
	grep -Eq '^ +[0-9.]+[a-z]* *\( *[0-9.]+%\): (auth|search|ingest)$' "$T/.tags"; then
	ok "convert cpu: input carries pprof labels (handler), so labels round-trip is exercised"
else
	fail "convert cpu: input carries pprof labels (handler), so labels round-trip is exercised" "go tool pprof -tags: $(head -c 300 "$T/.tags")"
fi
same_report "convert cpu: go tool pprof -tags identical" "$C/1/cpu.pb.gz" "$R/cpu.pb" -tags

# ---- 3. merge vs profile.Merge (oracle) and go tool pprof -proto --------------------------------
# Known, documented difference: `go tool pprof -proto` drops samples without
# locations (a side effect of its focus filter, FilterSamplesByName), which
# real goroutine and threadcreate profiles have; profile.Merge and profd keep
# them. So the oracle comparison is strict for all types, and the go tool
# pprof -proto comparison is strict when no input has an empty stack, and
# otherwise made after passing profd's result through `go tool pprof -proto`
# (the same filter).

STRICT=" "
# merge_compare LABEL TYPE FILES...
merge_compare() {
	local label=$1 t=$2
	shift 2
	local d=$T/merge/$label
	mkdir -p "$d"
	if ! profd pprof merge -o "$d/m.pb.gz" "$@" 2>"$d/err"; then
		fail "merge $label: profd pprof merge" "$(head -c 400 "$d/err")"
		return
	fi
	if ! "$ORACLE" merge "$d/o.pb.gz" "$@" >"$d/oerr" 2>&1; then
		fail "merge $label: oracle merge" "$(head -c 400 "$d/oerr")"
		return
	fi
	if ! go_pprof -proto -output="$d/g.pb.gz" "$@" >"$d/gerr"; then
		fail "merge $label: go tool pprof -proto" "$(head -c 400 "$d/gerr")"
		return
	fi
	"$ORACLE" check "$d/m.pb.gz" >"$d/m.dump" 2>&1
	"$ORACLE" check "$d/o.pb.gz" >"$d/o.dump" 2>&1
	same_output "merge $label: oracle dump identical to oracle merge (same ids, order, values)" "$d/m.dump" "$d/o.dump"
	same_report "merge $label: -raw identical to oracle (profile.Merge)" "$d/m.pb.gz" "$d/o.pb.gz" -raw
	same_report "merge $label: -top identical to oracle (profile.Merge)" "$d/m.pb.gz" "$d/o.pb.gz" "${TOP[@]}"
	same_report "merge $label: -tags identical to oracle (profile.Merge)" "$d/m.pb.gz" "$d/o.pb.gz" -tags
	local empty=0 f n
	for f; do
		n=$(empty_stacks "$f") || {
			fail "merge $label: oracle check $f" "$(head -c 300 "$T/.chk")"
			return
		}
		empty=$((empty + n))
	done
	if [ "$empty" -eq 0 ]; then
		STRICT="$STRICT$label "
		same_report "merge $label: -top identical to go tool pprof -proto" "$d/m.pb.gz" "$d/g.pb.gz" "${TOP[@]}"
		same_report "merge $label: -tags identical to go tool pprof -proto" "$d/m.pb.gz" "$d/g.pb.gz" -tags
	else
		if ! go_pprof -proto -output="$d/m2.pb.gz" "$d/m.pb.gz" >"$d/gerr2"; then
			fail "merge $label: go tool pprof -proto of profd's merge" "$(head -c 400 "$d/gerr2")"
			return
		fi
		local why="inputs have $empty empty-stack sample(s), compared after go tool pprof -proto's filter"
		same_report "merge $label: -top identical to go tool pprof -proto ($why)" "$d/m2.pb.gz" "$d/g.pb.gz" "${TOP[@]}"
		same_report "merge $label: -tags identical to go tool pprof -proto ($why)" "$d/m2.pb.gz" "$d/g.pb.gz" -tags
	fi
	# values: the merge keeps every sample (including empty stacks), so each
	# column's total is the sum of the inputs' totals
	local want="" got s
	for f; do
		s=$(col_sums "$f")
		if [ -z "$want" ]; then want=$s; else want=$(add_sums "$want" "$s"); fi
	done
	got=$(col_sums "$d/m.pb.gz")
	if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "merge $label: column totals = sum of inputs ($got)"; else fail "merge $label: column totals = sum of inputs" "got '$got', want '$want'"; fi
}

for t in $TYPES; do
	merge_compare "$t-x3" "$t" "$C/1/$t.pb.gz" "$C/2/$t.pb.gz" "$C/3/$t.pb.gz"
	merge_compare "$t-x1" "$t" "$C/1/$t.pb.gz"
done
missing=
for t in cpu heap allocs block mutex; do
	for k in x3 x1; do
		case $STRICT in *" $t-$k "*) ;; *) missing="$missing $t-$k" ;; esac
	done
done
if [ -z "$missing" ]; then ok "merge: cpu heap allocs block mutex compared strictly with go tool pprof -proto"; else fail "merge: cpu heap allocs block mutex compared strictly with go tool pprof -proto" "not strict (empty-stack samples?):$missing"; fi

# ---- 4. merge of 10 files ---------------------------------------------------------------------

D=$T/many
mkdir -p "$D"
many=()
for k in 1 2 3 4 5 6 7 8 9 10; do
	cp "$C/$(((k - 1) % 3 + 1))/cpu.pb.gz" "$D/cpu$k.pb.gz"
	many+=("$D/cpu$k.pb.gz")
done
if profd pprof merge -o "$D/m.pb.gz" "${many[@]}" 2>"$T/.err" && go_pprof -proto -output="$D/g.pb.gz" "${many[@]}" >"$T/.gerr"; then
	same_report "merge 10 cpu files: -top identical to go tool pprof -proto" "$D/m.pb.gz" "$D/g.pb.gz" "${TOP[@]}"
	same_report "merge 10 cpu files: -tags identical to go tool pprof -proto" "$D/m.pb.gz" "$D/g.pb.gz" -tags
	s1=$(col_sums "$C/1/cpu.pb.gz") s2=$(col_sums "$C/2/cpu.pb.gz") s3=$(col_sums "$C/3/cpu.pb.gz")
	want=$(add_sums "$(add_sums "$(scale_sums 4 "$s1")" "$(scale_sums 3 "$s2")")" "$(scale_sums 3 "$s3")")
	got=$(col_sums "$D/m.pb.gz")
	if [ "$got" = "$want" ]; then ok "merge 10 cpu files: totals = 4*set1 + 3*set2 + 3*set3 ($got)"; else fail "merge 10 cpu files: totals = 4*set1 + 3*set2 + 3*set3" "got '$got', want '$want'"; fi
	profd pprof top -n 0 "${many[@]}" >"$T/.ta" 2>&1
	profd pprof top -n 0 "$D/m.pb.gz" >"$T/.tb" 2>&1
	same_output "top of 10 files = top of their merge" "$T/.ta" "$T/.tb"
else
	fail "merge 10 cpu files" "$(head -c 400 "$T/.err" "$T/.gerr")"
fi
# 3 copies of one file: the info totals line triples
if profd pprof merge -o "$D/m3.pb.gz" "$D/cpu1.pb.gz" "$D/cpu4.pb.gz" "$D/cpu7.pb.gz" 2>"$T/.err"; then
	one=$(profd pprof info "$C/1/cpu.pb.gz" | sed -n 's/^totals: .* samples=\([0-9]*\) .*/\1/p')
	three=$(profd pprof info "$D/m3.pb.gz" | sed -n 's/^totals: .* samples=\([0-9]*\) .*/\1/p')
	if [ -n "$one" ] && [ "$one" -gt 0 ] && [ "$three" = $((3 * one)) ]; then ok "merge 3 copies: info samples total = 3 x $one"; else fail "merge 3 copies: info samples total = 3x single" "single '$one', merged '$three'"; fi
	want=$(scale_sums 3 "$(col_sums "$C/1/cpu.pb.gz")")
	got=$(col_sums "$D/m3.pb.gz")
	if [ "$got" = "$want" ]; then ok "merge 3 copies: samples and cpu ns = 3x single ($got)"; else fail "merge 3 copies: samples and cpu ns = 3x single" "got '$got', want '$want'"; fi
	if go_pprof -proto -output="$D/g3.pb.gz" "$D/cpu1.pb.gz" "$D/cpu4.pb.gz" "$D/cpu7.pb.gz" >"$T/.gerr"; then
		same_report "merge 3 copies: -top identical to go tool pprof -proto" "$D/m3.pb.gz" "$D/g3.pb.gz" "${TOP[@]}"
	else
		fail "merge 3 copies: -top identical to go tool pprof -proto" "$(head -c 300 "$T/.gerr")"
	fi
else
	fail "merge 3 copies" "$(head -c 400 "$T/.err")"
fi

# ---- 5. incompatible inputs -----------------------------------------------------------------

# incompatible NAME A B KIND_A KIND_B
incompatible() {
	local name=$1 a=$2 b=$3 ka=$4 kb=$5 out=$T/incompat.pb.gz
	rm -f "$out"
	profd pprof merge -o "$out" "$a" "$b" >"$T/.out" 2>"$T/.err"
	local rc=$?
	if [ "$rc" -ne 1 ]; then
		fail "$name" "exit $rc, want 1: $(head -c 300 "$T/.err")"
	elif ! grep -q -- "$ka" "$T/.err" || ! grep -q -- "$kb" "$T/.err"; then
		fail "$name" "message does not name both '$ka' and '$kb': $(head -c 300 "$T/.err")"
	elif [ -e "$out" ]; then
		fail "$name" "output file was created"
	else
		ok "$name"
	fi
}
incompatible "merge cpu + heap: exit 1, names both kinds, no output" "$C/1/cpu.pb.gz" "$C/1/heap.pb.gz" cpu heap
incompatible "merge goroutine + threadcreate: exit 1, names both kinds, no output" "$C/1/goroutine.pb.gz" "$C/1/threadcreate.pb.gz" goroutine threadcreate

# Units of one kind are not an incompatibility to go tool pprof: it converts
# every input to the finest unit (measurement.ScaleProfiles) and merges; so
# does profd (merge, top, folded). Inputs from tests/e2e/craft_prof.py: CPU
# profiles in seconds, milliseconds and nanoseconds (finest last, so that the
# sums so far are converted too), and one whose cpu column is in bytes.
U=$T/units
mkdir -p "$U"
craft() { python3 "$ROOT/tests/e2e/craft_prof.py" cpu "$@"; }
craft "$U/s.pb.gz" seconds 1 2 1 && craft "$U/ms.pb.gz" milliseconds 10 30 5 &&
	craft "$U/ns.pb.gz" nanoseconds 10000000 10000000 2500000 && craft "$U/bytes.pb.gz" bytes 1 1 2 ||
	fail "setup: craft_prof.py" "python3 failed"
if profd pprof merge -o "$U/m.pb.gz" "$U/s.pb.gz" "$U/ms.pb.gz" "$U/ns.pb.gz" 2>"$T/.err" &&
	go tool pprof -proto "$U/s.pb.gz" "$U/ms.pb.gz" "$U/ns.pb.gz" >"$U/g.pb.gz" 2>"$T/.gerr"; then
	same_report "merge of s, ms and ns profiles: -raw identical to go tool pprof -proto (values in ns)" "$U/m.pb.gz" "$U/g.pb.gz" -raw
	if go_pprof -raw "$U/m.pb.gz" | grep -q '^samples/count cpu/nanoseconds' &&
		go_pprof -raw "$U/m.pb.gz" | grep -q '^ *3 2040000000: '; then
		ok "merge of s, ms and ns profiles: cpu/nanoseconds, main.a = 2 s + 30 ms + 10 ms"
	else
		fail "merge of s, ms and ns profiles: cpu/nanoseconds, main.a = 2 s + 30 ms + 10 ms" "$(go_pprof -raw "$U/m.pb.gz" | head -12)"
	fi
else
	fail "merge of s, ms and ns profiles: as go tool pprof -proto" "$(head -c 300 "$T/.err" "$T/.gerr")"
fi
go_pprof "${TOP[@]}" "$U/ns.pb.gz" "$U/ms.pb.gz" | sed -n '/flat%/,$p' >"$T/.gtop"
profd pprof top -n 0 "$U/ns.pb.gz" "$U/ms.pb.gz" 2>&1 | sed -n '/flat%/,$p' >"$T/.ptop"
if [ -s "$T/.gtop" ]; then same_output "top of ns and ms profiles: the table go tool pprof -top prints" "$T/.gtop" "$T/.ptop"; else fail "top of ns and ms profiles" "go tool pprof printed no table"; fi
incompatible "merge cpu/nanoseconds + cpu/bytes: exit 1 (go tool pprof: incompatible types)" "$U/ns.pb.gz" "$U/bytes.pb.gz" "cpu/nanoseconds" "cpu/bytes"
# a period that overflows int64 once in ns (2^62 hours): Go's int64() of it is MinInt64 on
# amd64, which the merge's max passes over; profd's the same, without a cast C leaves undefined
craft "$U/hours.pb.gz" hours 4611686018427387904 1 2 || fail "setup: craft_prof.py" "python3 failed"
for order in "hours ns" "ns hours"; do
	a=${order% *} b=${order#* }
	if profd pprof merge -o "$U/p.pb.gz" "$U/$a.pb.gz" "$U/$b.pb.gz" 2>"$T/.err" &&
		go tool pprof -proto "$U/$a.pb.gz" "$U/$b.pb.gz" >"$U/gp.pb.gz" 2>"$T/.gerr"; then
		expect "merge of $a and $b whose period overflows in ns: the period go tool pprof -proto gives" \
			"$(go_pprof -raw "$U/gp.pb.gz" | grep '^Period:')" "$(go_pprof -raw "$U/p.pb.gz" | grep '^Period:')"
	else
		fail "merge of $a and $b whose period overflows in ns" "$(head -c 300 "$T/.err" "$T/.gerr")"
	fi
done

# ---- 6. top -------------------------------------------------------------------------------

# top_compare NAME UNIT "PROFD ARGS" "PPROF ARGS" FILES...
top_compare() {
	local name=$1 unit=$2 pa=$3 ga=$4
	shift 4
	# shellcheck disable=SC2086 # the argument strings are word-split on purpose
	if ! go_top_expect "$T/.exp" "$unit" $ga "$@"; then
		fail "$name" "go tool pprof failed: $(head -c 300 "$T/.exp.go")"
		return
	fi
	# shellcheck disable=SC2086
	if ! profd_top_got "$T/.got" -n 0 $pa "$@"; then
		fail "$name" "profd pprof top failed: $(head -c 300 "$T/.got.profd")"
		return
	fi
	local n
	n=$(wc -l <"$T/.exp")
	if [ "$n" -eq 0 ]; then
		fail "$name: names, order, flat%, cum%" "go tool pprof printed no rows"
	elif ! grep -q "^Showing $n of $n functions" "$T/.got.profd"; then
		fail "$name: names, order, flat%, cum%" "want 'Showing $n of $n functions': $(grep Showing "$T/.got.profd")"
	else
		local why
		why=$(pct_check "$T/.exp" "$T/.got")
		if [ -z "$why" ]; then ok "$name: names, order, flat%, cum% ($n rows)"; else fail "$name: names, order, flat%, cum%" "$why"; fi
	fi
	# profd prints the table the way go tool pprof does: compare the text of
	# the column header and rows (default units)
	# shellcheck disable=SC2086
	go_pprof "${TOP[@]}" $ga "$@" | sed -n '/^ *flat  *flat%  *sum%  *cum  *cum%/,$p' >"$T/.gotext"
	sed -n '/^ *flat  *flat%  *sum%  *cum  *cum%/,$p' "$T/.got.profd" >"$T/.profdtext"
	if [ -s "$T/.gotext" ]; then same_output "$name: table text identical" "$T/.gotext" "$T/.profdtext"; else fail "$name: table text identical" "go tool pprof printed no table"; fi
}
for i in 1 2 3; do
	top_compare "top cpu set $i vs go tool pprof -top" ns "" "" "$C/$i/cpu.pb.gz"
done
top_compare "top cpu --cum vs go tool pprof -top -cum" ns "--cum" "-cum" "$C/1/cpu.pb.gz"
top_compare "top heap -i alloc_space vs go tool pprof -sample_index=alloc_space" B "-i alloc_space" "-sample_index=alloc_space" "$C/1/heap.pb.gz"
top_compare "top heap --sample-index inuse_space vs go tool pprof -sample_index=inuse_space" B "--sample-index inuse_space" "-sample_index=inuse_space" "$C/1/heap.pb.gz"
top_compare "top heap (default index) vs go tool pprof" B "" "" "$C/1/heap.pb.gz"
top_compare "top heap --cum -i alloc_space vs go tool pprof -cum -sample_index=alloc_space" B "--cum -i alloc_space" "-cum -sample_index=alloc_space" "$C/1/heap.pb.gz"
top_compare "top block -i delay vs go tool pprof -sample_index=delay" ns "-i delay" "-sample_index=delay" "$C/1/block.pb.gz"
top_compare "top of 3 cpu files vs go tool pprof -top of the 3 files" ns "" "" "$C/1/cpu.pb.gz" "$C/2/cpu.pb.gz" "$C/3/cpu.pb.gz"
# a function whose values sum to 0 (main.main over main.a 5 ns and main.b
# -5 ns, as in a delta) is no node of pprof's graph: no row
craft "$U/zero.pb.gz" nanoseconds 1 5 -5 || fail "setup: craft_prof.py" "python3 failed"
top_compare "top of a profile whose main.main sums to 0 vs go tool pprof -top" ns "" "" "$U/zero.pb.gz"
# the header's duration as go tool pprof's says it (100ns, 10ms, 30.13s, 2hrs)
for d in 100 10000000 30130000000 7200000000000; do
	craft "$U/dur.pb.gz" nanoseconds 1 5 5 "$d" || fail "setup: craft_prof.py" "python3 failed"
	g=$(go_pprof -top "$U/dur.pb.gz" | sed -n 's/^Duration: \([^,]*\),.*/\1/p')
	p=$(profd pprof top "$U/dur.pb.gz" | sed -n 's/^Duration: //p')
	if [ -n "$g" ] && [ "$g" = "$p" ]; then ok "top header: duration of $d ns is '$g' as go tool pprof says"; else fail "top header: duration of $d ns as go tool pprof says" "go '$g', profd '$p'"; fi
done

# --cum really sorts by cum: the cum% column is non-increasing, and the order
# is not the flat order
profd_top_got "$T/.cumrows" -n 0 --cum "$C/1/cpu.pb.gz"
profd_top_got "$T/.flatrows" -n 0 "$C/1/cpu.pb.gz"
cut -f3 "$T/.cumrows" | tr -d '%' >"$T/.cum"
if [ -s "$T/.cum" ] && sort -g -r -c "$T/.cum" 2>/dev/null && ! cmp -s "$T/.cumrows" "$T/.flatrows"; then ok "top --cum: cum% column is non-increasing, order differs from flat"; else fail "top --cum: cum% column is non-increasing, order differs from flat" "$(head -5 "$T/.cumrows" | tr '\n' ' ')"; fi
# -n 5: 5 rows, the first 5 of -n 0
profd pprof top -n 5 "$C/1/cpu.pb.gz" >"$T/.t5" 2>&1
profd pprof top -n 0 "$C/1/cpu.pb.gz" >"$T/.t0" 2>&1
top_rows <"$T/.t5" >"$T/.r5"
top_rows <"$T/.t0" | head -5 >"$T/.r0"
if [ "$(wc -l <"$T/.r5")" -eq 5 ] && cmp -s "$T/.r5" "$T/.r0" && grep -q '^Showing 5 of ' "$T/.t5"; then ok "top -n 5: 5 rows, the first 5 of -n 0"; else fail "top -n 5: 5 rows, the first 5 of -n 0" "$(head -c 400 "$T/.t5")"; fi
# default -n is 20
profd pprof top "$C/1/cpu.pb.gz" >"$T/.t20" 2>&1
n=$(top_rows <"$T/.t20" | wc -l)
all=$(top_rows <"$T/.t0" | wc -l)
want=$((all < 20 ? all : 20))
if [ "$n" -eq "$want" ]; then ok "top: 20 rows by default"; else fail "top: 20 rows by default" "got $n rows (of $all)"; fi
# the sample type line names what pprof calls Type
st=$(sed -n 's/^Sample type: //p' "$T/.t0")
[ -n "$st" ] || st=$(sed -n 's/^Type: //p' "$T/.t0")
gt=$(go_pprof "${TOP[@]}" "$C/1/cpu.pb.gz" | sed -n 's/^Type: //p')
if [ -n "$st" ] && [ "$st" = "$gt" ]; then ok "top: sample type $st = go tool pprof's Type"; else fail "top: sample type = go tool pprof's Type" "profd '$st', pprof '$gt'"; fi
expect_exit "top -i nosuch: exit 2, lists the sample types" 2 'nosuch.*cpu/nanoseconds' profd pprof top -i nosuch "$C/1/cpu.pb.gz"

# ---- 7. folded -------------------------------------------------------------------------------

F=$T/folded
mkdir -p "$F"
if profd pprof folded "$C/1/cpu.pb.gz" >"$F/cpu" 2>"$T/.err" && [ -s "$F/cpu" ]; then
	badl=$(grep -cvE '^[^;]+(;[^;]+)* [0-9]+$' "$F/cpu")
	if [ "$badl" -eq 0 ]; then ok "folded cpu: every line is 'frame;frame;... VALUE'"; else fail "folded cpu: every line is 'frame;frame;... VALUE'" "$badl bad lines: $(grep -vE '^[^;]+(;[^;]+)* [0-9]+$' "$F/cpu" | head -3)"; fi
	dups=$(sed 's/ [0-9]*$//' "$F/cpu" | sort | uniq -d | wc -l)
	if [ "$dups" -eq 0 ] && LC_ALL=C sort -c "$F/cpu" 2>/dev/null; then ok "folded cpu: sorted, each stack once"; else fail "folded cpu: sorted, each stack once" "$dups duplicate stacks or unsorted"; fi
	sum=$(awk '{ s += $NF } END { printf "%.0f", s }' "$F/cpu")
	tot=$(go_pprof "${TOP[@]}" -unit=ns "$C/1/cpu.pb.gz" | sed -n 's/^Showing nodes accounting for .* of \([0-9]*\)ns total$/\1/p')
	want=$(col_sums "$C/1/cpu.pb.gz" | awk '{ print $2 }')
	# (go tool pprof's total leaves out samples without locations; folded keeps them)
	[ "${EMPTY[1/cpu]}" -eq 0 ] || tot=$want
	if [ -n "$tot" ] && [ "$sum" = "$tot" ] && [ "$sum" = "$want" ]; then ok "folded cpu: values sum to the cpu total ($sum ns)"; else fail "folded cpu: values sum to the cpu total" "sum $sum, go tool pprof total '$tot', oracle sum '$want'"; fi
	# flat per function from folded (sum over lines by leaf) = go tool pprof's
	# exact flat values
	awk '{ v = $NF; s = $0; sub(/ [0-9]+$/, "", s); n = split(s, a, ";"); f[a[n]] += v }
		END { for (k in f) if (f[k]) printf "%s\t%.0f\n", k, f[k] }' "$F/cpu" | LC_ALL=C sort >"$F/leaf"
	go_top_expect "$F/goflat" ns "$C/1/cpu.pb.gz"
	awk -F'\t' '$2 != 0 { print $1 "\t" $2 }' "$F/goflat" | LC_ALL=C sort >"$F/goflat.sorted"
	if [ -s "$F/leaf" ] && cmp -s "$F/leaf" "$F/goflat.sorted"; then ok "folded cpu: per-leaf sums = go tool pprof flat values for every function"; else fail "folded cpu: per-leaf sums = go tool pprof flat values for every function" "$(diff "$F/leaf" "$F/goflat.sorted" | head -6)"; fi
	# the leaf of the heaviest stack is among the top rows (default 20) of profd top
	max=$(awk '{ if ($NF + 0 > m) m = $NF + 0 } END { printf "%.0f", m }' "$F/cpu")
	leaves=$(awk -v m="$max" '$NF + 0 == m { s = $0; sub(/ [0-9]+$/, "", s); n = split(s, a, ";"); print a[n] }' "$F/cpu")
	found=
	while IFS= read -r l; do
		if top_rows <"$T/.t20" | cut -f1 | grep -qxF -- "$l"; then found=$l; fi
	done <<<"$leaves"
	if [ -n "$found" ]; then ok "folded cpu: leaf of the heaviest stack ($found) is in profd pprof top"; else fail "folded cpu: leaf of the heaviest stack is in profd pprof top" "leaves '$leaves' not in: $(top_rows <"$T/.t20" | cut -f1 | head -5 | tr '\n' ' ')"; fi
else
	fail "folded cpu" "$(head -c 400 "$T/.err")"
fi
if profd pprof folded --sample-index samples "$C/1/cpu.pb.gz" >"$F/cpus" 2>"$T/.err"; then
	sum=$(awk '{ s += $NF } END { printf "%.0f", s }' "$F/cpus")
	want=$(col_sums "$C/1/cpu.pb.gz" | awk '{ print $1 }')
	if [ -n "$want" ] && [ "$want" -gt 0 ] && [ "$sum" = "$want" ]; then ok "folded --sample-index samples: values sum to the sample count ($sum)"; else fail "folded --sample-index samples: values sum to the sample count" "sum $sum, want '$want'"; fi
else
	fail "folded --sample-index samples" "$(head -c 400 "$T/.err")"
fi
# empty stacks are kept (as "[no stack]"), so goroutine totals stay right; use
# the capture set with the most empty-stack goroutine samples
g=1
for i in 2 3; do [ "${EMPTY[$i/goroutine]}" -gt "${EMPTY[$g/goroutine]}" ] && g=$i; done
if profd pprof folded "$C/$g/goroutine.pb.gz" >"$F/gor" 2>"$T/.err"; then
	sum=$(awk '{ s += $NF } END { printf "%.0f", s }' "$F/gor")
	want=$(col_sums "$C/$g/goroutine.pb.gz")
	if [ "$sum" = "$want" ]; then ok "folded goroutine: values sum to the goroutine count ($sum, incl. ${EMPTY[$g/goroutine]} empty-stack samples)"; else fail "folded goroutine: values sum to the goroutine count" "sum $sum, want '$want'"; fi
else
	fail "folded goroutine" "$(head -c 400 "$T/.err")"
fi
# folded of 3 files = folded of their merge
profd pprof folded "$C/1/cpu.pb.gz" "$C/2/cpu.pb.gz" "$C/3/cpu.pb.gz" >"$F/three" 2>&1
profd pprof folded "$T/merge/cpu-x3/m.pb.gz" >"$F/merged" 2>&1
if [ -s "$F/three" ]; then same_output "folded of 3 files = folded of their merge" "$F/three" "$F/merged"; else fail "folded of 3 files = folded of their merge" "no output"; fi

# ---- 8. info ---------------------------------------------------------------------------------

declare -A KIND=([cpu]=cpu [heap]=heap [allocs]=allocs [block]=block/mutex [mutex]=block/mutex
	[goroutine]=goroutine [threadcreate]=threadcreate)
for t in $TYPES; do
	if profd pprof info "$C/2/$t.pb.gz" >"$T/.info" 2>&1; then
		k=$(sed -n 's/^kind: *//p' "$T/.info")
		if [ "$k" = "${KIND[$t]}" ]; then ok "info $t: kind $k"; else fail "info $t: kind ${KIND[$t]}" "got '$k'"; fi
	else
		fail "info $t" "$(head -c 300 "$T/.info")"
	fi
done
profd pprof info "$C/1/cpu.pb.gz" >"$T/.info" 2>&1
if grep -Eq '^  handler: [0-9]+ distinct values? on [0-9]+ samples' "$T/.info"; then ok "info cpu: lists label key handler"; else fail "info cpu: lists label key handler" "$(sed -n '/^labels/,$p' "$T/.info" | head -5)"; fi
ns=$(sed -n 's/^samples: *//p' "$T/.info")
gs=$("$ORACLE" check "$C/1/cpu.pb.gz" 2>&1 | awk '/^Samples:/ { s = 1; next } /^Locations/ { s = 0 } s && /^ *-?[0-9]+( +-?[0-9]+)*: /' | wc -l)
if [ -n "$ns" ] && [ "$ns" = "$gs" ]; then ok "info cpu: sample count $ns = oracle's"; else fail "info cpu: sample count = oracle's" "info '$ns', oracle $gs"; fi
tl=$(sed -n 's/^totals: *//p' "$T/.info")
want=$(col_sums "$C/1/cpu.pb.gz" | awk '{ print "samples=" $1 }')
case " $tl " in *" $want "*) ok "info cpu: totals line has $want" ;; *) fail "info cpu: totals line has $want" "got '$tl'" ;; esac
if grep -q '^labels: *none' <(profd pprof info "$C/1/threadcreate.pb.gz"); then ok "info threadcreate: labels none"; else fail "info threadcreate: labels none" "$(profd pprof info "$C/1/threadcreate.pb.gz" 2>&1 | grep -A2 labels)"; fi

# ---- 9. usage and CLI errors ------------------------------------------------------------------

expect_exit "merge without files: exit 2" 2 'no input files' profd pprof merge -o "$T/none.pb.gz"
expect_exit "top -n abc: exit 2" 2 'abc' profd pprof top -n abc x
expect_exit "unknown pprof subcommand: exit 2" 2 "unknown command 'frobnicate'" profd pprof frobnicate
expect_exit "pprof without subcommand: exit 2" 2 'Usage:' profd pprof
expect_exit "convert with one argument: exit 2" 2 'IN and OUT' profd pprof convert "$C/1/cpu.pb.gz"
expect_exit "merge --level 13: exit 2" 2 'level' profd pprof merge --level 13 -o "$T/l.pb.gz" "$C/1/cpu.pb.gz"
expect_exit "merge --bogus-option: exit 2" 2 '.' profd pprof merge --bogus-option "$C/1/cpu.pb.gz"
for c in merge top folded info convert; do
	profd pprof $c --help >"$T/.out" 2>"$T/.err"
	rc=$?
	if [ "$rc" -eq 0 ] && grep -q "^Usage: profd pprof $c" "$T/.out"; then ok "$c --help: exit 0, Usage: on stdout"; else fail "$c --help: exit 0, Usage: on stdout" "exit $rc: $(head -c 200 "$T/.out" "$T/.err")"; fi
done
nf=$T/does-not-exist.pb.gz
expect_exit "merge missing file: exit 1 naming it" 1 "$nf" profd pprof merge -o "$T/x.pb.gz" "$C/1/cpu.pb.gz" "$nf"
expect_exit "top missing file: exit 1 naming it" 1 "$nf" profd pprof top "$nf"
expect_exit "folded missing file: exit 1 naming it" 1 "$nf" profd pprof folded "$nf"
expect_exit "info missing file: exit 1 naming it" 1 "$nf" profd pprof info "$nf"
expect_exit "convert missing file: exit 1 naming it" 1 "$nf" profd pprof convert "$nf" "$T/x.pb"
# (merge to a terminal is refused: not tested, no tty here)
# merge to stdout (not a terminal) = merge -o
if profd pprof merge "$C/1/cpu.pb.gz" "$C/2/cpu.pb.gz" "$C/3/cpu.pb.gz" >"$T/stdout.pb.gz" 2>"$T/.err"; then
	same_output "merge to stdout = merge -o (byte for byte)" "$T/stdout.pb.gz" "$T/merge/cpu-x3/m.pb.gz"
else
	fail "merge to stdout = merge -o" "$(head -c 300 "$T/.err")"
fi
if profd pprof merge --raw -o "$T/mraw.pb" "$C/1/cpu.pb.gz" "$C/2/cpu.pb.gz" "$C/3/cpu.pb.gz" 2>"$T/.err"; then
	same_report "merge --raw: -raw identical to gzip merge" "$T/mraw.pb" "$T/merge/cpu-x3/m.pb.gz" -raw
else
	fail "merge --raw" "$(head -c 300 "$T/.err")"
fi

# ---- 10. --skip-bad ------------------------------------------------------------------------------

bad=$T/garbage.pb.gz
printf 'this is not a profile\n\001\002\003' >"$bad"
good=("$C/1/cpu.pb.gz" "$C/2/cpu.pb.gz")
rm -f "$T/sb.pb.gz"
profd pprof merge --skip-bad -o "$T/sb.pb.gz" "${good[0]}" "$bad" "${good[1]}" >"$T/.out" 2>"$T/.err"
rc=$?
if [ "$rc" -eq 0 ] && grep -qF "$bad" "$T/.err" && grep -q 'skip' "$T/.err" && [ -s "$T/sb.pb.gz" ]; then
	ok "merge --skip-bad with a garbage file: exit 0, warns naming it"
	if profd pprof merge -o "$T/sb2.pb.gz" "${good[@]}" 2>"$T/.err2"; then
		same_report "merge --skip-bad: result = merge of the good files" "$T/sb.pb.gz" "$T/sb2.pb.gz" -raw
	else
		fail "merge --skip-bad: result = merge of the good files" "$(head -c 300 "$T/.err2")"
	fi
else
	fail "merge --skip-bad with a garbage file: exit 0, warns naming it" "exit $rc, output $(stat -c %s "$T/sb.pb.gz" 2>/dev/null || echo missing): $(head -c 300 "$T/.err")"
fi
rm -f "$T/nsb.pb.gz"
expect_exit "merge with a garbage file, no --skip-bad: exit 1 naming it" 1 "$bad" profd pprof merge -o "$T/nsb.pb.gz" "${good[0]}" "$bad" "${good[1]}"
if [ ! -e "$T/nsb.pb.gz" ]; then ok "merge with a garbage file: no output written"; else fail "merge with a garbage file: no output written" "$T/nsb.pb.gz exists"; fi
expect_exit "merge --skip-bad with only garbage: exit 1" 1 'none of the' profd pprof merge --skip-bad -o "$T/nsb.pb.gz" "$bad" "$bad"
expect_exit "top --skip-bad with a garbage file: exit 0" 0 "$bad" profd pprof top --skip-bad "${good[0]}" "$bad"

# ---- 11. parallel merges ---------------------------------------------------------------
# The inputs are cut into one run per thread and the partial results merged;
# the output must not depend on the number of threads, byte for byte.
many=()
for r in 1 2 3 4 5 6 7 8; do for k in 1 2 3; do many+=("$C/$k/cpu.pb.gz"); done; done
if profd pprof merge -j 1 -o "$T/j1.pb.gz" "${many[@]}" 2>"$T/.err"; then
	for j in 2 3 8; do
		if profd pprof merge -j "$j" -o "$T/j$j.pb.gz" "${many[@]}" 2>"$T/.err"; then
			same_output "merge of ${#many[@]} files: -j $j output byte-identical to -j 1" "$T/j1.pb.gz" "$T/j$j.pb.gz"
		else
			fail "merge of ${#many[@]} files: -j $j" "$(head -c 300 "$T/.err")"
		fi
	done
	same_report "merge -j 1 of ${#many[@]} files = oracle profile.Merge" "$T/j1.pb.gz" \
		"$( "$ORACLE" merge "$T/jo.pb.gz" "${many[@]}" && echo "$T/jo.pb.gz")" -raw
else
	fail "merge -j 1 of ${#many[@]} files" "$(head -c 300 "$T/.err")"
fi
heaps=()
for r in 1 2 3 4 5 6; do for k in 1 2 3; do heaps+=("$C/$k/heap.pb.gz"); done; done
profd pprof top -j 1 -n 0 "${heaps[@]}" >"$T/tj1.txt" 2>&1
profd pprof top -j 4 -n 0 "${heaps[@]}" >"$T/tj4.txt" 2>&1
same_output "top over ${#heaps[@]} heap files: -j 4 = -j 1" "$T/tj1.txt" "$T/tj4.txt"
# a bad file late in the input and another in the middle: the error names the
# first one in input order, whichever thread finds it first
mixed=("${many[@]}")
mixed[20]=$bad
mixed[13]=$C/1/heap.pb.gz
expect_exit "merge -j 3: first bad input in order is reported (incompatible heap at #13)" 1 "$C/1/heap.pb.gz" \
	profd pprof merge -j 3 -o "$T/jm.pb.gz" "${mixed[@]}"

# ---- 12. piped runs ------------------------------------------------------------------------
# Large inputs (a mean of 32 KiB or more) are merged by fewer runs, each with
# threads decoding its files ahead of the merge; PROFD_MERGE_PIPE_MIN=0 takes
# that path for these small files. Same contract: the output of -j 1, byte for
# byte, the first bad input in order reported, --skip-bad skipping.
for j in 2 3 4 8; do
	if PROFD_MERGE_PIPE_MIN=0 profd pprof merge -j "$j" -o "$T/pj$j.pb.gz" "${many[@]}" 2>"$T/.err"; then
		same_output "piped merge of ${#many[@]} files: -j $j output byte-identical to -j 1" "$T/j1.pb.gz" "$T/pj$j.pb.gz"
	else
		fail "piped merge of ${#many[@]} files: -j $j" "$(head -c 300 "$T/.err")"
	fi
done
PROFD_MERGE_PIPE_MIN=0 profd pprof top -j 4 -n 0 "${heaps[@]}" >"$T/ptj4.txt" 2>&1
same_output "piped top over ${#heaps[@]} heap files: -j 4 = -j 1" "$T/tj1.txt" "$T/ptj4.txt"
for j in 2 4; do
	PROFD_MERGE_PIPE_MIN=0 expect_exit "piped merge -j $j: first bad input in order is reported (incompatible heap at #13)" 1 \
		"$C/1/heap.pb.gz" profd pprof merge -j "$j" -o "$T/pjm.pb.gz" "${mixed[@]}"
done
# the garbage file alone (#20): its own message, named
late=("${many[@]}")
late[20]=$bad
PROFD_MERGE_PIPE_MIN=0 expect_exit "piped merge -j 2: a garbage file late in the input is reported by name" 1 "$bad" \
	profd pprof merge -j 2 -o "$T/pjm.pb.gz" "${late[@]}"
if [ ! -e "$T/pjm.pb.gz" ]; then ok "piped merge with a bad input: no output written"; else fail "piped merge with a bad input: no output written" "$T/pjm.pb.gz exists"; fi
# --skip-bad: the merge of the other files, as the runs make it
profd pprof merge -j 2 --skip-bad -o "$T/sbr.pb.gz" "${late[@]}" 2>"$T/.err"
if PROFD_MERGE_PIPE_MIN=0 profd pprof merge -j 2 --skip-bad -o "$T/sbp.pb.gz" "${late[@]}" 2>"$T/.err" &&
	grep -qF "$bad" "$T/.err" && grep -q 'skipped' "$T/.err"; then
	same_output "piped merge --skip-bad: warns, output byte-identical to the runs' merge" "$T/sbr.pb.gz" "$T/sbp.pb.gz"
else
	fail "piped merge --skip-bad" "$(head -c 300 "$T/.err")"
fi
