# lib.sh — helpers for the end-to-end tests (bash). Source it from a
# tests/e2e/test_*.sh script. Every check prints one TAP-style line,
# "ok - NAME" or "not ok - NAME: why", which tests/run.sh counts.
#
# Provides: $PROFD $GOAPP $ORACLE $BUILD $T (a fresh temp dir, removed on
# exit), go_pprof (go tool pprof with HOME/PPROF_TMPDIR set), ok/fail/check,
# expect, expect_exit, same_output, no_sanitizer, wait_line, need_built,
# need_cmds, start_goapp, and kill_started_on_exit (for scripts that start
# servers in the background).
set -u
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROFD=$ROOT/$BUILD/profd
GOAPP=$ROOT/$BUILD/goapp
ORACLE=$ROOT/$BUILD/oracle
T=$(mktemp -d "${TMPDIR:-/tmp}/profd-e2e.XXXXXX")
export HOME=$T/home PPROF_TMPDIR=$T/home/pprof
mkdir -p "$HOME"
trap '[ -n "${KEEP_T:-}" ] || rm -rf "$T"' EXIT # KEEP_T=1: keep it (debugging)

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

# expect NAME WANT GOT: ok if the strings are equal
expect() {
	if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "want '$2', got '$3'"; fi
}

# no_sanitizer NAME FILE...: ok unless a file has a sanitizer report
no_sanitizer() {
	local name=$1
	shift
	if grep -l "Sanitizer\|runtime error" "$@" >/dev/null 2>&1; then
		fail "$name" "$(grep -h -A5 "Sanitizer\|runtime error" "$@" | head -20)"
	else
		ok "$name"
	fi
}

# wait_line FILE REGEX: the first capture of sed REGEX in FILE, waiting up to 10 s
wait_line() {
	local f=$1 re=$2 v='' i
	for ((i = 0; i < 200; i++)); do
		v=$(sed -n "s/$re/\1/p" "$f" 2>/dev/null | head -1)
		[ -n "$v" ] && break
		sleep 0.05
	done
	echo "$v"
}

# serve_port LOG PID: the port `profd serve` (PID) says in LOG it listens on,
# waiting up to 10 s; empty if it exited or never said
serve_port() {
	local log=$1 pid=$2 port='' i
	for ((i = 0; i < 200; i++)); do
		port=$(sed -n 's/.*listening on port \([0-9][0-9]*\).*/\1/p' "$log" | head -1)
		[ -n "$port" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "$port"
}

# serve_smoke LABEL LOG PID HEAP [CMD...]: the `profd serve --addr 127.0.0.1:0` started in the
# background (PID, its stderr in LOG; a release archive's, in an empty root) takes an upload
# of the heap profile HEAP, merges it back and serves the UI, then exits 0 on SIGTERM. With
# CMD (the archive's profd, run in its root), `CMD get services` lists the upload's service:
# a client command, which loads libcurl (dlopen, lib/util/pddl.h) from the archive
serve_smoke() {
	local label=$1 log=$2 pid=$3 heap=$4 port code m ui
	shift 4
	port=$(serve_port "$log" "$pid")
	if [ -z "$port" ]; then
		fail "$label: serve in the empty root" "$(head -c 600 "$log")"
		return
	fi
	code=$(curl -s -o "$T/post" -w '%{http_code}' --data-binary "@$heap" "http://127.0.0.1:$port/api/0/profiles?service=dist&type=heap&created_at=$(date +%s)")
	m=$(curl -s -o "$T/merged.pb.gz" -w '%{http_code}' "http://127.0.0.1:$port/api/0/profiles/merge?service=dist&type=heap&from=now-1h&to=now")
	ui=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")
	if [ "$code" = 200 ] && [ "$m" = 200 ] && "$PROFD" pprof info "$T/merged.pb.gz" >/dev/null 2>&1 && [ "$ui" = 200 ]; then
		ok "$label: serve in the empty root: an upload stored, merged back, the UI"
	else fail "$label: serve" "post $code $(head -c 200 "$T/post"), merge $m, ui $ui"; fi
	if [ $# -gt 0 ]; then
		local got
		got=$("$@" get services --collector "http://127.0.0.1:$port" 2>&1)
		if [[ $got == *dist* ]]; then ok "$label: in the empty root, a client command (libcurl loaded from the archive) lists the service"
		else fail "$label: in the empty root, profd get services" "$(echo "$got" | head -c 400)"; fi
	fi
	kill -TERM "$pid" && wait "$pid" 2>/dev/null
	expect "$label: serve exits 0 on SIGTERM" 0 "$?"
}

# kill_started: stop this shell's background jobs (TERM, then KILL)
kill_started() {
	local p
	for p in $(jobs -rp); do kill "$p" 2>/dev/null; done
	sleep 0.2
	for p in $(jobs -rp); do kill -9 "$p" 2>/dev/null; done
	return 0
}

# kill_started_on_exit: kill_started before the EXIT trap already set
kill_started_on_exit() {
	local prev
	prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
	# shellcheck disable=SC2064 # expanded now on purpose
	trap "kill_started; $prev" EXIT
}

# exit_within PID SECONDS: wait for background job PID to end, at most
# SECONDS (then kill -KILL it); EXIT_RC is its exit status, or "hung"
exit_within() {
	local pid=$1 i
	EXIT_RC=hung
	for ((i = 0; i < $2 * 20; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			EXIT_RC=$?
			return 0
		fi
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null
}

# canned NAME RULE...: start tests/e2e/cannedsrv.py (a server answering from
# rules: "METHOD PATH-PREFIX" STATUS BODY, see its header) in the background;
# CANNED_URL is its base, CANNED_PID its pid (kill it when done)
canned() {
	local pf=$T/$1.port k
	shift
	python3 "$ROOT/tests/e2e/cannedsrv.py" "$pf" "$@" >/dev/null 2>&1 &
	CANNED_PID=$!
	for ((k = 0; k < 200; k++)); do [ -s "$pf" ] && break; sleep 0.05; done
	CANNED_URL=http://127.0.0.1:$(cat "$pf")
}

# go_bins_from_build VAR...: Go programs ($GOAPP, $ORACLE...) are not
# sanitized: where $BUILD lacks one, take it from build/
go_bins_from_build() {
	local v
	for v; do
		if [ ! -x "${!v}" ] && [ -x "$ROOT/build/$(basename "${!v}")" ]; then
			printf -v "$v" '%s' "$ROOT/build/$(basename "${!v}")"
		fi
	done
}

# wait_captures: wait for the capture.sh jobs of the associative array cap_pid
# (NAME -> pid; NAME a workload and a digit, captured into $C/NAME); one that
# failed (a loaded machine) is retried once alone; 1 if one still fails
wait_captures() {
	local k w bad=0
	for k in "${!cap_pid[@]}"; do
		if ! wait "${cap_pid[$k]}"; then
			w=${k%?}
			rm -rf "${C:?}/$k"
			GOAPP_ARGS="-workload $w -service $w" "$ROOT/tests/e2e/capture.sh" "$GOAPP" "$C/$k" 2 \
				>"$T/capture-$k.log" 2>&1 || { fail "setup: capture $k" "$(tail -c 400 "$T/capture-$k.log")"; bad=1; }
		fi
	done
	return $bad
}

# capture_sets DIR N: N captures of every type from goapp ($GA, else $GOAPP;
# 1 s of CPU) into DIR/1 .. DIR/N, at once; a failed one is a failed setup
# check, and the script exits
capture_sets() {
	local dir=$1 n=$2 k
	local -a pids=()
	for ((k = 1; k <= n; k++)); do
		"$ROOT/tests/e2e/capture.sh" "${GA:-$GOAPP}" "$dir/$k" 1 >"$T/capture-$k.log" 2>&1 &
		pids[k]=$!
	done
	for ((k = 1; k <= n; k++)); do
		wait "${pids[k]}" || { fail "setup: capture $k" "$(tail -c 400 "$T/capture-$k.log")"; exit 0; }
	done
}

# need_built CODE HINT FILE...: each FILE must be an executable, else a
# failed setup check naming HINT (how to build it) and exit CODE
need_built() {
	local code=$1 hint=$2 b
	shift 2
	for b in "$@"; do
		if [ ! -x "$b" ]; then
			fail "setup: $b exists" "not built; run: $hint"
			exit "$code"
		fi
	done
}

# need_cmds CODE CMD...: each CMD must be in PATH, else a failed setup check
# and exit CODE (NEED_WHY: what to say instead of "needed by this test")
need_cmds() {
	local code=$1 c
	shift
	for c in "$@"; do
		if ! command -v "$c" >/dev/null; then
			fail "setup: $c in PATH" "${NEED_WHY:-needed by this test}"
			exit "$code"
		fi
	done
}

# start_goapp NAME WORKLOAD [ARGS...]: examples/goapp ($GA, else $GOAPP) on a
# free port in the background, log $T/goapp-NAME.log; sets PORT_<NAME>
start_goapp() {
	local name=$1 wl=$2 a
	shift 2
	"${GA:-$GOAPP}" -addr 127.0.0.1:0 -workload "$wl" -cpu-load 0.1 "$@" 2>"$T/goapp-$name.log" &
	a=$(wait_line "$T/goapp-$name.log" '^goapp: listening on \(.*\)$')
	[ -n "$a" ] || fail "setup: goapp $name" "$(cat "$T/goapp-$name.log")"
	printf -v "PORT_$name" %s "${a##*:}"
}
