#!/usr/bin/env bash
# run.sh — the one test command (`make test` runs it): unit tests (cmocka),
# fuzz-corpus replay, end-to-end tests. Ends with one line
# "N passed, N failed"; exits non-zero if anything failed or nothing ran.
#   tests/run.sh [unit|replay|e2e]...   (default: all)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
passed=0 failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
want() { [ $# -eq 0 ] && return 0; for w in $SELECT; do [ "$w" = "$1" ] && return 0; done; return 1; }
SELECT="${*:-unit replay e2e}"

count_cmocka() { # parse cmocka's summary lines from $log
	local p f
	p=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | awk '{s+=$NF} END {print s+0}')
	f=$(grep -Eo '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$(NF-1)} END {print s+0}')
	passed=$((passed + p)); failed=$((failed + f))
}

if want unit; then
	echo "== unit tests"
	for t in "$BUILD"/tests/test_*; do
		[ -x "$t" ] || continue
		: >"$log"
		"$t" 2>&1 | tee -a "$log"
		rc=${PIPESTATUS[0]}
		count_cmocka
		if [ "$rc" -ne 0 ] && ! grep -q '^\[  FAILED  \]' "$log"; then
			echo "not ok - $(basename "$t") crashed (exit $rc)"; failed=$((failed + 1))
		fi
	done
fi

if want replay; then
	echo "== fuzz corpus replay"
	for r in "$BUILD"/tests/replay_*; do
		[ -x "$r" ] || continue
		name=${r##*/replay_}
		if out=$("$r" tests/fuzz/corpus/"$name" 2>&1); then
			echo "ok - replay $name: $out"; passed=$((passed + 1))
		else
			echo "not ok - replay $name: $(echo "$out" | tail -20)"; failed=$((failed + 1))
		fi
	done
fi

if want e2e; then
	echo "== end-to-end tests"
	for s in tests/e2e/test_*.sh; do
		[ -f "$s" ] || continue
		echo "# $s"
		bash "$s" 2>&1 | tee "$log"
		p=$(grep -c '^ok - ' "$log"); f=$(grep -c '^not ok - ' "$log")
		passed=$((passed + p)); failed=$((failed + f))
	done
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
