#!/usr/bin/env bash
# test_badinput.sh — hostile and broken input through the real CLI: every
# case must end in one clear line on stderr and exit 1 (or, for inputs that
# happen to stay valid, exit 0 with a profile Google's library accepts);
# never a crash, a hang or a sanitizer report (run under SANITIZE=1 too).
#   truncated files (gzip and raw, every prefix of a small profile and sampled
#   prefixes of a real one), wrong magic, bit flips, gzip bombs (10 GB behind
#   10 MB; 1 MB behind 1 KB with a trailer that lies), ids pointing nowhere,
#   string indexes out of range, wire-format damage.
# Run: BUILD=build bash tests/e2e/test_badinput.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

profd() { timeout 60 "$PROFD" "$@"; }
GZBOMB=$ROOT/$BUILD/gzbomb

# A hand-written raw profile: sample_type samples/count, one sample at
# location LOC with value 1, location 1 -> function 1 named by string FN.
# Strings: 0 "", 1 samples, 2 count, 3 main.
mkprof() { # LOC FN OUT
	local loc fn
	loc=$(printf '\\x%02x' "$1")
	fn=$(printf '\\x%02x' "$2")
	printf '\x0a\x04\x08\x01\x10\x02'"\x12\x04\x08${loc}\x10\x01"'\x22\x06\x08\x01\x22\x02\x08\x01'"\x2a\x04\x08\x01\x10${fn}"'\x32\x00\x32\x07samples\x32\x05count\x32\x04main' >"$3"
}

# bad NAME REGEX FILE: profd must exit 1 with a message matching REGEX, for
# every command that reads a profile
bad() {
	local name=$1 re=$2 f=$3
	expect_exit "$name: info exits 1" 1 "$re" profd pprof info "$f"
	expect_exit "$name: merge exits 1, no output" 1 "$re" profd pprof merge -o "$T/out.pb.gz" "$f" "$f"
	[ ! -e "$T/out.pb.gz" ] || { fail "$name: merge left an output file" "$T/out.pb.gz"; rm -f "$T/out.pb.gz"; }
	expect_exit "$name: top exits 1" 1 "$re" profd pprof top "$f"
}

# survive NAME FILE: exit 0 or 1, never anything else; stderr is one line on
# failure; a success must re-encode to something Google's parser accepts
survive() {
	local name=$1 f=$2
	profd pprof convert "$f" "$T/sv.pb.gz" >"$T/.out" 2>"$T/.err"
	local rc=$?
	if grep -q "Sanitizer\|runtime error" "$T/.err"; then
		fail "$name" "sanitizer: $(head -c 400 "$T/.err")"
		return
	fi
	case $rc in
	0)
		if "$ORACLE" check "$T/sv.pb.gz" >/dev/null 2>"$T/.oerr"; then
			survived_ok=$((survived_ok + 1))
		else
			fail "$name" "profd accepted it, Google's parser rejects the re-encoding: $(head -c 300 "$T/.oerr")"
			return
		fi
		;;
	1)
		if [ "$(wc -l <"$T/.err")" -ne 1 ] || ! grep -q '^profd: ' "$T/.err"; then
			fail "$name" "error is not one 'profd: ...' line: $(head -c 300 "$T/.err")"
			return
		fi
		survived_err=$((survived_err + 1))
		;;
	*)
		fail "$name" "exit $rc: $(head -c 300 "$T/.err")"
		return
		;;
	esac
	rm -f "$T/sv.pb.gz"
}

# ---- the hand-written profile is valid; its broken siblings are not ----------------
mkprof 1 3 "$T/good.pb"
if profd pprof convert "$T/good.pb" "$T/good.pb.gz" 2>"$T/.err" && "$ORACLE" check "$T/good.pb.gz" >/dev/null; then
	ok "hand-written profile is valid (profd and Google's parser agree)"
else
	fail "hand-written profile is valid" "$(head -c 300 "$T/.err")"
fi
mkprof 9 3 "$T/dangling-loc.pb"
bad "sample location id pointing nowhere" 'location id 9 not found' "$T/dangling-loc.pb"
if "$ORACLE" check "$T/dangling-loc.pb" >/dev/null 2>&1; then
	fail "Google's parser also rejects the dangling location id" "it accepted it"
else
	ok "Google's parser also rejects the dangling location id"
fi
mkprof 1 99 "$T/bad-string.pb"
bad "function name string index out of range" 'string index 99 out of range' "$T/bad-string.pb"
# location -> function id 7 that does not exist
printf '\x0a\x04\x08\x01\x10\x02\x12\x04\x08\x01\x10\x01\x22\x06\x08\x01\x22\x02\x08\x07\x2a\x04\x08\x01\x10\x03\x32\x00\x32\x07samples\x32\x05count\x32\x04main' >"$T/dangling-fn.pb"
bad "location line function id pointing nowhere" 'function id 7 not found' "$T/dangling-fn.pb"
# string_table[0] not empty
printf '\x0a\x04\x08\x01\x10\x02\x32\x01x\x32\x07samples\x32\x05count' >"$T/str0.pb"
bad "string_table[0] not empty" "string_table\\[0\\] must be" "$T/str0.pb"
# a length that runs past the end
printf '\x0a\x04\x08\x01\x10\x02\x12\x7f\x08\x01' >"$T/overrun.pb"
bad "field length past the end" 'runs past the end' "$T/overrun.pb"
# wire type 3 (start group), rejected as upstream does
printf '\x0b\x32\x00' >"$T/group.pb"
bad "unknown wire type 3" 'unknown wire type 3' "$T/group.pb"
# a varint of 11 bytes
printf '\x48\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x32\x00' >"$T/longvarint.pb"
bad "overlong varint" 'bad varint' "$T/longvarint.pb"
# two profiles glued together
{ cat "$T/good.pb"; printf '\x48\x01'; cat "$T/good.pb"; printf '\x48\x01'; } >"$T/glued.pb"
bad "concatenated profiles" 'concatenated profiles' "$T/glued.pb"
: >"$T/empty.pb"
bad "empty file" 'empty input' "$T/empty.pb"

# ---- wrong magic and truncation of real profiles ------------------------------------
"$ROOT/tests/e2e/capture.sh" "$GOAPP" "$T/cap" 1 >/dev/null 2>"$T/.caperr" || { fail "capture" "$(tail -5 "$T/.caperr")"; exit 0; }
real=$T/cap/heap.pb.gz
gzip -dc "$real" >"$T/heap.pb"
printf 'this is not a profile at all, it is text\n' >"$T/text.pb"
bad "text file: says it is text, not a protobuf field error" 'text that is not a profile \(first line: "this is not a profile' "$T/text.pb"
{ printf '\x1f\x8c'; tail -c +3 "$real"; } >"$T/magic.pb.gz"
bad "gzip with a wrong second magic byte (not gzip, not protobuf)" 'profile|field|wire|varint|offset' "$T/magic.pb.gz"
size=$(stat -c %s "$real")
for cut in 1 2 10 18 $((size / 3)) $((size / 2)) $((size - 9)) $((size - 1)); do
	head -c "$cut" "$real" >"$T/trunc.pb.gz"
	# (one byte is not even gzip's two-byte magic: it is read as protobuf)
	bad "gzip truncated to $cut of $size bytes" 'decompressing profile|corrupt or truncated|truncated|wire type' "$T/trunc.pb.gz"
done
rsize=$(stat -c %s "$T/heap.pb")
for cut in 3 100 $((rsize / 2)) $((rsize - 1)); do
	head -c "$cut" "$T/heap.pb" >"$T/trunc.pb"
	# (where the cut falls depends on the capture: inside a length or tag
	# ("bad length varint", "truncated ... tag"), inside a field ("runs past
	# the end"), or between two fields, which leaves a well-formed prefix
	# without the string table that Go writes last)
	bad "raw protobuf truncated to $cut of $rsize bytes" 'truncated|past the end|varint|not found|missing|values|string_table' "$T/trunc.pb"
done
# every prefix of the small hand-written profile, raw and gzip
survived_ok=0 survived_err=0
glen=$(stat -c %s "$T/good.pb")
for cut in $(seq 0 $((glen - 1))); do
	head -c "$cut" "$T/good.pb" >"$T/p.pb"
	survive "prefix $cut of the hand-written profile" "$T/p.pb"
done
ok "every prefix of a ${glen}-byte profile: $survived_ok decoded, $survived_err clear errors, no crash"

# ---- bit flips -------------------------------------------------------------------------
survived_ok=0 survived_err=0
flip() { # FILE OFFSET BIT OUT
	local b
	b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	{ head -c "$2" "$1"; printf "\\x$(printf %02x $((b ^ (1 << $3))))"; tail -c +$(($2 + 2)) "$1"; } >"$4"
}
for off in $(seq 0 $((glen - 1))); do
	for bit in 0 3 7; do
		flip "$T/good.pb" "$off" "$bit" "$T/f.pb"
		survive "bit $bit of byte $off flipped (hand-written)" "$T/f.pb"
	done
done
step=$((rsize / 150 + 1))
for off in $(seq 0 "$step" $((rsize - 1))); do
	flip "$T/heap.pb" "$off" $((off % 8)) "$T/f.pb"
	survive "bit flipped at byte $off of a real heap profile" "$T/f.pb"
done
ok "bit flips: $survived_ok still valid (re-encoding accepted by Google's parser), $survived_err clear errors, no crash"

# ---- gzip bombs --------------------------------------------------------------------------
if "$GZBOMB" 10240 "$T/bomb.gz"; then
	bsize=$(stat -c %s "$T/bomb.gz")
	start=$(date +%s)
	expect_exit "gzip bomb ($bsize bytes inflating to 10 GiB): exit 1 at the decompressed-size cap" 1 \
		'exceeds the [0-9]+-byte limit.*gzip bomb' profd pprof info "$T/bomb.gz"
	end=$(date +%s)
	if [ $((end - start)) -le 20 ]; then ok "gzip bomb refused in $((end - start)) s"; else fail "gzip bomb refused quickly" "$((end - start)) s"; fi
	expect_exit "gzip bomb in a merge: exit 1 naming the file" 1 "bomb.gz" profd pprof merge -o "$T/x.pb.gz" "$real" "$T/bomb.gz"
else
	fail "gzbomb generator" "failed"
fi
"$GZBOMB" 1 "$T/small-bomb.gz"
expect_exit "1 KB gzip of 1 MiB of zeros: inflated, then refused as neither protobuf nor legacy" 1 \
	'1048576 bytes of binary data that is neither protobuf nor a legacy profile' \
	profd pprof info "$T/small-bomb.gz"
"$GZBOMB" 1 "$T/lying-bomb.gz" --isize 4000000000
expect_exit "1 KB gzip whose trailer claims 4 GB: refused (size check), nothing allocated for the claim" 1 \
	'corrupt or truncated' profd pprof info "$T/lying-bomb.gz"
