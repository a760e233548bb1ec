# lib.sh — helpers for the end-to-end tests (bash). Source it from a
# tests/e2e/test_*.sh script. Every check prints one TAP-style line,
# "ok - NAME" or "not ok - NAME: why", which tests/run.sh counts.
#
# Provides: $PROFD $GOAPP $ORACLE $BUILD $T (a fresh temp dir, removed on
# exit), go_pprof (go tool pprof with HOME/PPROF_TMPDIR set), ok/fail/check,
# expect_exit, same_output.
set -u
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROFD=$ROOT/$BUILD/profd
GOAPP=$ROOT/$BUILD/goapp
ORACLE=$ROOT/$BUILD/oracle
T=$(mktemp -d "${TMPDIR:-/tmp}/profd-e2e.XXXXXX")
export HOME=$T/home PPROF_TMPDIR=$T/home/pprof
mkdir -p "$HOME"
trap 'rm -rf "$T"' EXIT

ok() { echo "ok - $1"; }
fail() { echo "not ok - $1: $2"; }

# check NAME CMD...: ok if CMD succeeds
check() {
	local name=$1
	shift
	if "$@" >"$T/.out" 2>&1; then ok "$name"; else fail "$name" "$(head -c 600 "$T/.out")"; fi
}

go_pprof() { go tool pprof "$@" 2>&1; }

# same_output NAME A B: ok if files A and B are identical, else show a diff
same_output() {
	if cmp -s "$2" "$3"; then ok "$1"; else fail "$1" "$(diff "$2" "$3" | head -20)"; fi
}

# expect_exit NAME CODE REGEX CMD...: CMD must exit with CODE and its stderr
# must match REGEX (grep -E)
expect_exit() {
	local name=$1 code=$2 re=$3
	shift 3
	"$@" >"$T/.out" 2>"$T/.err"
	local rc=$?
	if [ "$rc" -ne "$code" ]; then
		fail "$name" "exit $rc, want $code; stderr: $(head -c 400 "$T/.err")"
	elif ! grep -Eq -- "$re" "$T/.err"; then
		fail "$name" "stderr does not match /$re/: $(head -c 400 "$T/.err")"
	elif grep -q "Sanitizer\|runtime error" "$T/.err"; then
		fail "$name" "sanitizer report: $(head -c 600 "$T/.err")"
	else
		ok "$name"
	fi
}
