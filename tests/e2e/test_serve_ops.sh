#!/usr/bin/env bash
# test_serve_ops.sh — end-to-end tests of `profd serve` operations, on real
# profiles captured from the example Go service (build/goapp) and a few
# hand-written ones:
#   0. setup: capture the 7 profile types; the server must store each, and
#      hand-written edge cases (first sample without a stack, exactly 64
#      functions/locations, no mapping) must be stored and served back
#   1. durability: 40 profiles, merges fetched, a late burst, kill -9 right
#      after the last 200, restart: everything listed, merges byte-identical
#      (decompressed), profiles by id equal to their uploads
#   2. concurrency: 8 writers x 25 POSTs with 4 readers (list, merge,
#      get-by-id) running meanwhile: no failed request, no lost profile
#   3. retention: --retention 10000h then 48h on the same data dir (day files
#      dropped, disk space reclaimed, old profiles 404, recent ones kept,
#      metrics), POSTs older than the window refused, and a partition that
#      expires while the server runs (--retention-interval 1s)
#   4. graceful shutdown: SIGTERM during a slow upload (it completes, is
#      stored, exit 0), --shutdown-timeout, SIGINT
#   5. startup errors: port in use, data dir in use, bad data dir, bad
#      flags, --help
# Every server log is checked for errors and sanitizer reports.
# Run: BUILD=build bash tests/e2e/test_serve_ops.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

TYPES="cpu heap allocs block mutex goroutine threadcreate"
C=$T/cap # the captured profiles: $C/<type>.pb.gz

# ---- helpers ----------------------------------------------------------------------------

# on exit, stop whatever this script started and is still running: its
# background jobs only (TERM first, so that capture.sh stops its goapp)
kill_started() {
	local p left
	left=$(jobs -rp)
	[ -n "$left" ] || return 0
	for p in $left; do kill "$p" 2>/dev/null; done
	sleep 0.3
	for p in $(jobs -rp); do kill -9 "$p" 2>/dev/null; done
	return 0
}
# chain with lib.sh's trap (which removes $T)
prev_trap=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
# shellcheck disable=SC2064 # expanded now on purpose: lib.sh's command
trap "kill_started; $prev_trap" EXIT

# start_server NAME DIR ARGS...: start `profd serve` on a free port with its
# stderr in $T/srv-NAME.log; sets SPID, SURL, SLOG. Fails (returns 1) if the
# server does not say "listening on port N" within 10 s.
nsrv=0
start_server() {
	local name=$1 dir=$2 port='' i
	shift 2
	nsrv=$((nsrv + 1))
	SLOG=$T/srv-$nsrv-$name.log
	: >"$SLOG"
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$dir" "$@" 2>"$SLOG" &
	SPID=$!
	for ((i = 0; i < 200; i++)); do
		port=$(sed -n 's/.*listening on port \([0-9][0-9]*\).*/\1/p' "$SLOG" | head -1)
		[ -n "$port" ] && break
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.05
	done
	if [ -z "$port" ]; then
		SURL=http://127.0.0.1:1
		return 1
	fi
	SURL=http://127.0.0.1:$port
}

# stop_server PID SIG [SECONDS]: send SIG, wait up to SECONDS (default 20)
# for the exit; sets RC to the exit status (or "hung", then the process is
# killed). Not in a subshell: only this shell can wait for its children.
stop_server() {
	local pid=$1 sig=$2 max=${3:-20} i
	kill "-$sig" "$pid" 2>/dev/null
	for ((i = 0; i < max * 20; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		RC=hung
		return
	fi
	wait "$pid" 2>/dev/null
	RC=$?
}

# req OUT CURL_ARGS... URL: run curl, body to OUT; prints the HTTP status
# (000 when the connection failed)
req() {
	local out=$1
	shift
	curl -sS -m 30 -o "$out" -w '%{http_code}' "$@" 2>>"$T/curl.err"
}

# post FILE QUERY OUT: POST FILE to $SURL/api/0/profiles?QUERY; prints the status
post() { req "$3" --data-binary "@$1" "$SURL/api/0/profiles?$2"; }

# json_ids FILE: the profile ids in a JSON answer, one a line
json_ids() { grep -o '"id":"[0-9a-v]\{20\}"' "$1" 2>/dev/null | cut -d'"' -f4; }

# is_gzip FILE: starts with the gzip magic
is_gzip() { [ "$(head -c 2 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 1f8b ]; }

# norm_raw FILE: `go tool pprof -raw FILE` made independent of what the
# store may renumber or reorder: each sample is printed with its locations
# spelled out (address, mapping, frames) instead of location ids, samples
# sorted (a sample and its labels as one unit), mappings sorted, no ids
norm_raw() {
	go_pprof -raw "$1" | awk '
	/^Samples:/ { sec = 1; hdr[++nh] = $0; next }
	/^Locations/ { sec = 2; next }
	/^Mappings/ { sec = 3; next }
	sec == 0 { hdr[++nh] = $0; next }
	sec == 1 && /^ *-?[0-9]+( +-?[0-9]+)*:/ { samp[++ns] = $0; next }
	sec == 1 && ns == 0 { hdr[++nh] = $0; next }
	sec == 1 { samp[ns] = samp[ns] "\001" $0; next }
	sec == 2 && /^ +[0-9]+: / { id = $1; sub(/:$/, "", id); l = $0; sub(/^ +[0-9]+: /, "", l); loc[id] = l; next }
	sec == 2 { l = $0; sub(/^ +/, "", l); loc[id] = loc[id] " / " l; next }
	sec == 3 && /^[0-9]+: / { id = $1; sub(/:$/, "", id); l = $0; sub(/^[0-9]+: /, "", l); map[id] = l; next }
	END {
		for (i = 1; i <= nh; i++) print hdr[i]
		for (i = 1; i <= ns; i++) {
			n = split(samp[i], parts, "\001"); c = index(parts[1], ":")
			out = substr(parts[1], 1, c); m = split(substr(parts[1], c + 1), ids, " ")
			for (j = 1; j <= m; j++) {
				l = loc[ids[j]]
				if (match(l, /M=[0-9]+/)) l = substr(l, 1, RSTART - 1) "M=[" map[substr(l, RSTART + 2, RLENGTH - 2)] "]" substr(l, RSTART + RLENGTH)
				out = out "\001    " l
			}
			for (j = 2; j <= n; j++) out = out "\001" parts[j]
			print out | "LC_ALL=C sort"
		}
		close("LC_ALL=C sort")
		for (k in map) print "mapping " map[k] | "LC_ALL=C sort"
	}' | tr '\001' '\n'
}

# same_profile NAME A B: the two profiles are the same for go tool pprof
# (-raw, samples in any order; output must not be empty)
same_profile() {
	norm_raw "$2" >"$T/.na"
	norm_raw "$3" >"$T/.nb"
	if ! grep -q '^Samples:' "$T/.na"; then
		fail "$1" "go tool pprof -raw $2: $(head -c 300 "$T/.na" 2>/dev/null)"
	else
		same_output "$1" "$T/.na" "$T/.nb"
	fi
}

# col_sums FILE: the sum of each sample value column (oracle's dump), as in
# test_pprof.sh
col_sums() {
	"$ORACLE" check "$1" 2>&1 | awk '/^Samples:/ { s = 1; next } /^Locations/ { s = 0 }
	s { i = index($0, ":"); if (!i) next; v = substr($0, 1, i - 1)
	    if (v !~ /^ *-?[0-9]+( +-?[0-9]+)* *$/) next
	    n = split(v, a, " "); for (j = 1; j <= n; j++) t[j] += a[j]; if (n > nc) nc = n }
	END { for (j = 1; j <= nc; j++) printf "%s%.0f", (j > 1 ? " " : ""), t[j]; print "" }'
}
scale_sums() { echo "$2" | awk -v k="$1" '{ for (j = 1; j <= NF; j++) printf "%s%.0f", (j > 1 ? " " : ""), k * $j; print "" }'; }

# metric URL NAME: the value of a metric without labels
metric() { curl -sS -m 10 "$1/metrics" 2>/dev/null | awk -v n="$2" '$1 == n { print $2 }'; }

# day_file TS: the day file of unix time TS
day_file() { echo "profd-$(date -u -d "@$1" +%Y%m%d).db"; }

# log_clean NAME LOG: the server log holds no error, warning, 5xx answer,
# aborted request or sanitizer report (but the start's warning that no
# --tokens were given, which these servers run without)
log_clean() {
	local bad
	bad=$(grep -E 'level=(error|warn)|code=5[0-9][0-9]|aborted=true|Sanitizer|runtime error|LeakSanitizer' "$2" |
		grep -v 'msg="no --tokens: ' | head -5)
	if [ -z "$bad" ]; then ok "$1"; else fail "$1" "$bad"; fi
}

# start_fail NAME CODE REGEX ARGS...: `profd serve ARGS` must exit CODE
# (within 10 s) with stderr matching REGEX; a usage error (2) must also hint
# at --help. A server that starts listening instead is a failure (killed).
start_fail() {
	local name=$1 code=$2 re=$3 pid i rc
	shift 3
	: >"$T/sf.err"
	"$@" >"$T/sf.out" 2>"$T/sf.err" &
	pid=$!
	for ((i = 0; i < 200; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		grep -q 'listening on port' "$T/sf.err" && break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		local why="still running after 10 s"
		grep -q 'listening on port' "$T/sf.err" && why="it started and listens: $(grep -m1 'listening on port' "$T/sf.err")"
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		fail "$name" "want exit $code, but $why"
		return
	fi
	wait "$pid"
	rc=$?
	if [ "$rc" -ne "$code" ]; then
		fail "$name" "exit $rc, want $code; stderr: $(head -c 400 "$T/sf.err" 2>/dev/null)"
	elif ! grep -Eq -- "$re" "$T/sf.err"; then
		fail "$name" "stderr does not match /$re/: $(head -c 400 "$T/sf.err" 2>/dev/null)"
	elif [ "$code" -eq 2 ] && [ "${HINT:-1}" = 1 ] && ! grep -q "profd serve --help" "$T/sf.err"; then
		fail "$name" "no hint to run 'profd serve --help': $(head -c 400 "$T/sf.err" 2>/dev/null)"
	elif grep -q "Sanitizer\|runtime error" "$T/sf.err"; then
		fail "$name" "sanitizer report: $(head -c 600 "$T/sf.err" 2>/dev/null)"
	else
		ok "$name"
	fi
}

# ---- 0. setup -----------------------------------------------------------------------------

for b in "$PROFD" "$GOAPP" "$ORACLE"; do
	if [ ! -x "$b" ]; then
		fail "setup: $b exists" "not built; run: make && make $BUILD/goapp $BUILD/oracle"
		exit 1
	fi
done
for c in curl go; do
	if ! command -v "$c" >/dev/null; then
		fail "setup: $c in PATH" "needed by this test"
		exit 1
	fi
done

# the capture runs while the startup errors (section 5, no profile needed) are checked
"$ROOT/tests/e2e/capture.sh" "$GOAPP" "$C" 1 >"$T/capture.log" 2>&1 &
cap_pid=$!

# ---- 5. startup errors ------------------------------------------------------------------------

# --help: exit 0 on stdout, every option of the option table documented
"$PROFD" serve --help >"$T/help.out" 2>"$T/help.err"
rc=$?
opts=$(grep -o '{"[a-z-]*", *\(required\|no\|optional\)_argument' "$ROOT/src/cmd_serve.c" | cut -d'"' -f2)
[ -n "$opts" ] || opts="addr data-dir retention retention-interval max-body max-decompressed max-samples max-merge-profiles timeout max-connections gzip-level shutdown-timeout quiet help"
missing=
for o in $opts; do grep -q -- "--$o\b" "$T/help.out" || missing="$missing --$o"; done
if [ "$rc" -eq 0 ] && grep -q '^Usage: profd serve' "$T/help.out" && [ -z "$missing" ] && [ ! -s "$T/help.err" ]; then
	ok "serve --help: exit 0, usage on stdout, all $(echo "$opts" | wc -w) options documented"
else
	fail "serve --help: exit 0, usage on stdout, all options documented" "exit $rc, undocumented:${missing:- none}; stderr: $(head -c 200 "$T/help.err" 2>/dev/null)"
fi

start_fail "serve --retention abc: exit 2 naming the flag" 2 'retention.*abc' "$PROFD" serve --retention abc --data-dir "$T/u1"
start_fail "serve --max-body -1: exit 2 naming the flag" 2 'max-body.*-1' "$PROFD" serve --max-body -1 --data-dir "$T/u1"
start_fail "serve --no-such-option: exit 2" 2 'no-such-option|unknown option' "$PROFD" serve --no-such-option --data-dir "$T/u1"
start_fail "serve --retention-interval 500ms: exit 2 (minimum 1s)" 2 'retention-interval' "$PROFD" serve --retention-interval 500ms --data-dir "$T/u1"
start_fail "serve with a stray argument: exit 2" 2 "unexpected argument 'stray'" "$PROFD" serve stray --data-dir "$T/u1"
HINT=0 start_fail "serve --addr 127.0.0.1:99999: exit 2, bad port" 2 'port must be 0\.\.65535' "$PROFD" serve --addr 127.0.0.1:99999 --data-dir "$T/u2"
if [ ! -e "$T/u1" ] && [ ! -e "$T/u2" ]; then ok "usage errors: the data dir is not created"; else fail "usage errors: the data dir is not created" "created: $(for d in "$T"/u1 "$T"/u2; do [ -e "$d" ] && printf '%s ' "$d"; done)(the store is opened before --addr is validated)"; fi

# data dir problems: exit 1 with a message naming the path
touch "$T/afile"
start_fail "--data-dir is a regular file: exit 1" 1 "$T/afile.*(directory|Not a directory)" "$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/afile"
touch "$T/xfile"
chmod 755 "$T/xfile"
start_fail "--data-dir is an executable file: exit 1" 1 "$T/xfile.*(directory|Not a directory)" "$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/xfile"
start_fail "--data-dir whose parent does not exist: exit 1" 1 "$T/nope/sub.*No such file" "$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/nope/sub"
mkdir -p "$T/ro"
if [ "$(id -u)" -ne 0 ]; then
	chmod 555 "$T/ro"
	start_fail "--data-dir not writable: exit 1" 1 "$T/ro.*(writable|Permission denied)" "$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/ro"
elif command -v setpriv >/dev/null; then
	# root writes anywhere: run the server as nobody on a directory owned by root
	chmod 711 "$T"
	start_fail "--data-dir not writable (run as nobody): exit 1" 1 "$T/ro.*(writable|Permission denied)" \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/ro"
	chmod 700 "$T"
else
	ok "--data-dir not writable: exit 1 # skip: running as root without setpriv"
fi

# port in use: by another program (goapp), and by another profd
: >"$T/goapp.log"
"$GOAPP" -addr 127.0.0.1:0 2>"$T/goapp.log" &
gpid=$!
gport=
for ((i = 0; i < 200; i++)); do
	gport=$(sed -n 's/^goapp: listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$T/goapp.log" | head -1)
	[ -n "$gport" ] && break
	sleep 0.05
done
if [ -n "$gport" ]; then
	start_fail "port in use (by goapp): exit 1, address in use" 1 "127\.0\.0\.1:$gport.*[Aa]ddress already in use" \
		"$PROFD" serve --addr "127.0.0.1:$gport" --data-dir "$T/port1"
else
	fail "port in use (by goapp)" "goapp did not start: $(head -c 300 "$T/goapp.log" 2>/dev/null)"
fi
kill "$gpid" 2>/dev/null
wait "$gpid" 2>/dev/null
if start_server first "$T/port2"; then
	p1=$SPID
	start_fail "port in use (by another profd): exit 1, address in use" 1 "[Aa]ddress already in use" \
		"$PROFD" serve --addr "${SURL#http://}" --data-dir "$T/port3"
	# one process per data dir: two would each cache the store and drop
	# each other's files
	start_fail "second server on the same --data-dir: exit 1, data dir in use" 1 "$T/port2.*(in use|locked)" \
		"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/port2"
	stop_server "$p1" INT
	rc=$RC
	if [ "$rc" = 0 ] && grep -q 'SIGINT: shutting down' "$SLOG" && grep -q 'msg="stopped"' "$SLOG"; then
		ok "SIGINT: exit 0, log says shutting down and stopped"
	else
		fail "SIGINT: exit 0, log says shutting down and stopped" "exit $rc: $(tail -c 300 "$SLOG")"
	fi
else
	fail "port in use (by another profd)" "first server did not start: $(head -c 300 "$SLOG" 2>/dev/null)"
fi

# ---- 0 (cont.). the captured profiles ------------------------------------------------------

if ! wait "$cap_pid"; then
	# capture.sh can fail now and then on a loaded machine: retry once, alone
	rm -rf "$C"
	"$ROOT/tests/e2e/capture.sh" "$GOAPP" "$C" 1 >"$T/capture.log" 2>&1
fi
missing=
for t in $TYPES; do [ -s "$C/$t.pb.gz" ] || missing="$missing $t"; done
if [ -n "$missing" ]; then
	fail "setup: capture the 7 profile types from goapp" "missing:$missing: $(tail -c 400 "$T/capture.log")"
	exit 1
fi
ok "setup: capture the 7 profile types from goapp"

# Which types the server stores: each must be. The durability and
# concurrency sections then use the types whose capture has no sample
# without a stack (real goroutine and threadcreate profiles often have
# some), so that the empty-stack checks here stay the only ones about them.
start_server probe "$T/probe" || { fail "setup: server starts" "$(head -c 400 "$SLOG" 2>/dev/null)"; exit 1; }
ACC=()
refused=
skipped=
for t in $TYPES; do
	code=$(post "$C/$t.pb.gz" "service=probe&type=$t" "$T/probe.$t.json")
	[ "$code" = 200 ] || refused="$refused $t: $code $(head -c 200 "$T/probe.$t.json" 2>/dev/null)"
	n=$("$ORACLE" check "$C/$t.pb.gz" 2>/dev/null | awk '/^Samples:/ { s = 1; next } /^Locations/ { s = 0 }
	     s && /^ *-?[0-9]+( +-?[0-9]+)*: *$/ { n++ } END { print n + 0 }')
	if [ "$code" = 200 ] && [ "$n" -eq 0 ]; then ACC+=("$t"); elif [ "$n" -gt 0 ]; then skipped="$skipped $t"; fi
done
if [ -z "$refused" ]; then
	ok "POST of each of the 7 captured profile types: 200"
else
	fail "POST of each of the 7 captured profile types: 200" "refused:$refused; log: $(grep -m1 'level=error' "$SLOG")"
fi
# Hand-written profiles (independent of the capture). Strings: "" samples
# count main; sample_type samples/count; location 1 -> function 1 "main".
# nostack: the first sample has no location (value 5), as in Go's
# threadcreate profiles, then one at location 1 (mapping 1).
# nomap: one sample at location 1, no mapping at all (valid pprof).
strs='\x32\x00\x32\x07samples\x32\x05count\x32\x04main'
# shellcheck disable=SC2059 # the format is the profile
printf '\x0a\x04\x08\x01\x10\x02\x12\x02\x10\x05\x12\x04\x08\x01\x10\x01\x1a\x02\x08\x01\x22\x08\x08\x01\x10\x01\x22\x02\x08\x01\x2a\x04\x08\x01\x10\x03'"$strs" >"$T/nostack.pb"
# shellcheck disable=SC2059
printf '\x0a\x04\x08\x01\x10\x02\x12\x04\x08\x01\x10\x01\x22\x06\x08\x01\x22\x02\x08\x01\x2a\x04\x08\x01\x10\x03'"$strs" >"$T/nomap.pb"
# post_back NAME FILE SUMS [QUERY]: POST FILE, then GET it by id: 200 and
# the same column totals (the server must survive both)
post_back() {
	local name=$1 f=$2 want=$3 q=${4:-} code id got
	if ! kill -0 "$SPID" 2>/dev/null; then # killed by the previous check
		wait "$SPID" 2>/dev/null
		start_server probe "$T/probe"
	fi
	rm -f "$T/pb.json" "$T/pb.back"
	code=$(post "$f" "service=probe&type=other$q" "$T/pb.json")
	id=$(json_ids "$T/pb.json")
	if [ "$code" != 200 ] || [ -z "$id" ]; then
		fail "$name" "POST status $code: $(head -c 200 "$T/pb.json" 2>/dev/null); log: $(grep 'level=error' "$SLOG" | tail -1)"
		return
	fi
	code=$(req "$T/pb.back" "$SURL/api/0/profiles/$id")
	got=$(col_sums "$T/pb.back")
	if [ "$code" = 200 ] && [ "$got" = "$want" ]; then
		ok "$name"
	elif kill -0 "$SPID" 2>/dev/null; then
		fail "$name" "GET by id: status $code, column totals '$got', want '$want'"
	else
		wait "$SPID"
		fail "$name" "the server died on GET by id (status $code, server exit status $?) $(grep -m1 -E 'ERROR: AddressSanitizer|runtime error' "$SLOG" | head -c 300)"
	fi
}
# (into a day partition of its own: the bug it catches shows only where no
# empty stack has been stored yet, e.g. not after a goroutine profile with one)
post_back "POST of a profile whose first sample has an empty stack (into a new day file): 200, read back whole" "$T/nostack.pb" 6 "&created_at=$(($(date +%s) - 5 * 86400))"
# wide: one sample, a stack of exactly 64 locations, 64 functions (f1..f64)
# and 1 mapping: the server's arrays of functions and locations are then
# exactly full (they grow 64, 128, ...), which catches reads past their end
wide() {
	local i fmt='\x0a\x04\x08\x01\x10\x02\x12\x44\x0a\x40'
	for ((i = 1; i <= 64; i++)); do fmt="$fmt$(printf '\\x%02x' "$i")"; done
	fmt="$fmt"'\x10\x01\x1a\x02\x08\x01'
	for ((i = 1; i <= 64; i++)); do fmt="$fmt"'\x22\x08\x08'"$(printf '\\x%02x' "$i")"'\x10\x01\x22\x02\x08'"$(printf '\\x%02x' "$i")"; done
	for ((i = 1; i <= 64; i++)); do fmt="$fmt"'\x2a\x04\x08'"$(printf '\\x%02x\\x10\\x%02x' "$i" $((i + 3)))"; done
	fmt="$fmt$strs"
	for ((i = 1; i <= 64; i++)); do fmt="$fmt$(printf '\\x32\\x%02x' $((${#i} + 1)))f$i"; done
	# shellcheck disable=SC2059 # the format is the profile
	printf "$fmt"
}
wide >"$T/wide.pb"
post_back "POST and GET of a profile with exactly 64 functions and locations: 200, read back whole" "$T/wide.pb" 1
post_back "POST of a profile without mappings: 200, read back whole" "$T/nomap.pb" 1
stop_server "$SPID" TERM >/dev/null
[ -n "$skipped" ] && echo "# captured profiles with empty-stack samples, not used below:$skipped"
case " ${ACC[*]} " in *" cpu "*) ;; *) ACC=() ;; esac
case " ${ACC[*]} " in *" heap "*) ;; *)
	fail "setup" "cpu and heap profiles must be accepted for the other checks to run"
	exit 1
	;;
esac
NACC=${#ACC[@]}

# ---- 3b. a partition that expires while the server runs (started now, checked later) -----------
# The profile is created 1 s before a day boundary E; the retention is set so
# that the window's start (now - retention) crosses E 5 s after the start:
# the POST is inside the window, then the whole day falls out of it and the
# 1 s retention timer must drop its file.
now=$(date +%s)
E=$(((now / 86400 - 3) * 86400))
RET=$((now - E + 5))
RI_FILE=$(day_file $((E - 1)))
ri_ok=
if start_server ri "$T/ri" --retention "${RET}s" --retention-interval 1s; then
	RI_PID=$SPID RI_URL=$SURL RI_LOG=$SLOG
	code=$(post "$C/cpu.pb.gz" "service=ri&type=cpu&created_at=$((E - 1))" "$T/ri.json")
	RI_ID=$(json_ids "$T/ri.json")
	if [ "$code" = 200 ] && [ -n "$RI_ID" ] && [ -e "$T/ri/$RI_FILE" ]; then
		ri_ok=1
		ok "retention timer: POST of a profile 4 s inside the window, 1 s before a day's end: 200, day file $RI_FILE created"
	else
		fail "retention timer: POST inside the window" "status $code: $(head -c 300 "$T/ri.json" 2>/dev/null); files: $(cd "$T/ri" && echo *)"
	fi
else
	fail "retention timer: server starts" "$(head -c 300 "$SLOG" 2>/dev/null)"
fi

# ---- 1. durability ----------------------------------------------------------------------------

D=$T/dur
K=40
if start_server dur "$D"; then
	now=$(date +%s)
	declare -A DID # seq -> id
	declare -A DTYPE
	bad=
	for ((i = 1; i <= K; i++)); do
		t=${ACC[$(((i - 1) % NACC))]}
		DTYPE[$i]=$t
		code=$(post "$C/$t.pb.gz" "service=dur&type=$t&labels=seq=$i,batch=dur&created_at=$((now - 60 * i))" "$T/d.json")
		id=$(json_ids "$T/d.json")
		if [ "$code" = 200 ] && [ -n "$id" ]; then DID[$i]=$id; else bad="$bad #$i($t): $code $(head -c 200 "$T/d.json" 2>/dev/null)"; fi
	done
	if [ -z "$bad" ]; then ok "durability: $K POSTs (${ACC[*]}) answered 200 with an id"; else fail "durability: $K POSTs answered 200" "$bad"; fi
	mkdir -p "$T/before" "$T/after"
	bad=
	for t in "${ACC[@]}"; do
		code=$(req "$T/before/$t.pb.gz" "$SURL/api/0/profiles/merge?service=dur&type=$t&from=0&to=now")
		[ "$code" = 200 ] && is_gzip "$T/before/$t.pb.gz" || bad="$bad $t:$code"
	done
	if [ -z "$bad" ]; then ok "durability: merge per type before the kill: 200, gzip"; else fail "durability: merge per type before the kill" "$bad"; fi
	code=$(req "$T/before.list" "$SURL/api/0/profiles?service=dur&from=0&to=now")
	json_ids "$T/before.list" | sort >"$T/before.ids"
	# a late burst, then kill -9 as soon as the last one is acknowledged
	late=()
	for ((i = 1; i <= 5; i++)); do
		t=${ACC[$((i % NACC))]}
		code=$(post "$C/$t.pb.gz" "service=dur-late&type=$t&labels=n=$i" "$T/l.json")
		id=$(json_ids "$T/l.json")
		[ "$code" = 200 ] && [ -n "$id" ] && late+=("$id:$t")
	done
	kill -9 "$SPID"
	wait "$SPID" 2>/dev/null
	if [ "${#late[@]}" -eq 5 ]; then ok "durability: late burst of 5 POSTs answered 200, then kill -9"; else fail "durability: late burst of 5 POSTs answered 200" "${#late[@]} of 5: $(head -c 200 "$T/l.json" 2>/dev/null)"; fi
	log_clean "durability: server log before the kill is clean" "$SLOG"

	if start_server dur-restart "$D"; then
		code=$(req "$T/after.list" "$SURL/api/0/profiles?service=dur&from=0&to=now")
		json_ids "$T/after.list" | sort >"$T/after.ids"
		printf '%s\n' "${DID[@]}" | sort >"$T/posted.ids"
		n=$(wc -l <"$T/after.ids")
		if [ "$code" = 200 ] && [ "$n" -eq "$K" ] && cmp -s "$T/after.ids" "$T/posted.ids"; then
			ok "durability: after kill -9 and restart, all $K profiles listed (same ids)"
		else
			fail "durability: after kill -9 and restart, all $K profiles listed" "status $code, $n listed; missing: $(comm -13 "$T/after.ids" "$T/posted.ids" | head -3 | tr '\n' ' ')"
		fi
		# labels kept: seq=i finds the i-th profile
		bad=
		for i in 1 7 $K; do
			code=$(req "$T/s.json" "$SURL/api/0/profiles?service=dur&from=0&to=now&labels=seq=$i")
			[ "$code" = 200 ] && [ "$(json_ids "$T/s.json")" = "${DID[$i]}" ] || bad="$bad seq=$i:$code"
		done
		if [ -z "$bad" ]; then ok "durability: label queries after restart find the right profile"; else fail "durability: label queries after restart" "$bad"; fi
		bad=
		for t in "${ACC[@]}"; do
			code=$(req "$T/after/$t.pb.gz" "$SURL/api/0/profiles/merge?service=dur&type=$t&from=0&to=now")
			if [ "$code" != 200 ]; then
				bad="$bad $t: status $code"
			elif ! cmp -s <(gzip -dc <"$T/before/$t.pb.gz") <(gzip -dc <"$T/after/$t.pb.gz"); then
				bad="$bad $t: differs"
			fi
		done
		if [ -z "$bad" ]; then ok "durability: merge of each type after restart byte-identical (decompressed) to before the kill"; else fail "durability: merges after restart identical to before the kill" "$bad"; fi
		# the server read the newest days' symbols before it listened (pd_store_warm): the
		# merges just made took every symbol from that cache, none from the day file
		st=$(metric "$SURL" 'profd_store_symbol_reads_total{source="store"}')
		ca=$(metric "$SURL" 'profd_store_symbol_reads_total{source="cache"}')
		if [ "$st" = 0 ] && [ -n "$ca" ] && [ "$ca" -gt 0 ]; then
			ok "durability: the merges after restart took their $ca symbols from what the server read at start"
		else fail "durability: symbols from the start's read" "store=$st cache=$ca"; fi
		same_profile "durability: cpu merge after restart = before (go tool pprof -raw)" "$T/before/cpu.pb.gz" "$T/after/cpu.pb.gz"
		# the merge is the sum of its inputs: N copies of each captured file
		ncpu=0
		for ((i = 1; i <= K; i++)); do [ "${DTYPE[$i]}" = cpu ] && ncpu=$((ncpu + 1)); done
		want=$(scale_sums "$ncpu" "$(col_sums "$C/cpu.pb.gz")")
		got=$(col_sums "$T/after/cpu.pb.gz")
		if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "durability: cpu merge after restart = $ncpu x the cpu capture ($got)"; else fail "durability: cpu merge after restart = $ncpu x the cpu capture" "got '$got', want '$want'"; fi
		for i in 1 2 $((NACC > 5 ? 6 : NACC)); do
			t=${DTYPE[$i]}
			code=$(req "$T/g$i.pb.gz" "$SURL/api/0/profiles/${DID[$i]}")
			if [ "$code" = 200 ]; then
				same_profile "durability: $t profile by id after restart = its upload (go tool pprof -raw)" "$C/$t.pb.gz" "$T/g$i.pb.gz"
			else
				fail "durability: $t profile by id after restart" "status $code: $(head -c 200 "$T/g$i.pb.gz" 2>/dev/null)"
			fi
		done
		code=$(req "$T/late.list" "$SURL/api/0/profiles?service=dur-late&from=0&to=now")
		json_ids "$T/late.list" | sort >"$T/late.ids"
		printf '%s\n' "${late[@]%%:*}" | sort >"$T/late.want"
		if [ "$code" = 200 ] && cmp -s "$T/late.ids" "$T/late.want"; then ok "durability: the late burst (acknowledged just before kill -9) is all there"; else fail "durability: the late burst is all there" "status $code, $(wc -l <"$T/late.ids") of 5"; fi
		last=x:cpu
		[ "${#late[@]}" -gt 0 ] && last=${late[${#late[@]} - 1]}
		code=$(req "$T/last.pb.gz" "$SURL/api/0/profiles/${last%%:*}")
		if [ "$code" = 200 ]; then
			same_profile "durability: last profile before kill -9, by id = its upload" "$C/${last#*:}.pb.gz" "$T/last.pb.gz"
		else
			fail "durability: last profile before kill -9, by id" "status $code"
		fi
		code=$(post "$C/cpu.pb.gz" "service=dur&type=cpu&labels=seq=after" "$T/a.json")
		if [ "$code" = 200 ]; then ok "durability: the store takes new profiles after the restart"; else fail "durability: the store takes new profiles after the restart" "status $code: $(head -c 200 "$T/a.json" 2>/dev/null)"; fi
		stop_server "$SPID" TERM
		rc=$RC
		if [ "$rc" = 0 ]; then ok "durability: restarted server exits 0 on SIGTERM"; else fail "durability: restarted server exits 0 on SIGTERM" "exit $rc"; fi
		log_clean "durability: restarted server's log is clean" "$SLOG"
	else
		fail "durability: restart on the same data dir" "$(head -c 400 "$SLOG" 2>/dev/null)"
	fi
else
	fail "durability: server starts" "$(head -c 400 "$SLOG" 2>/dev/null)"
fi

# ---- 2. concurrency ---------------------------------------------------------------------------

W=8 PER=25 R=4
CD=$T/conc
mkdir -p "$CD"
if start_server conc "$T/concdata"; then
	# seeded first, so that every reader answer must be a 200 (never 404)
	code=$(post "$C/cpu.pb.gz" "service=conc&type=cpu&labels=phase=seed" "$CD/seed.json")
	SEED=$(json_ids "$CD/seed.json")
	if [ "$code" = 200 ] && [ -n "$SEED" ]; then ok "concurrency: seed profile stored"; else fail "concurrency: seed profile stored" "status $code"; fi
	writer() { # w
		local w=$1 j t code
		for ((j = 1; j <= PER; j++)); do
			t=${ACC[$(((w + j) % NACC))]}
			code=$(req "$CD/w$w.json" --data-binary "@$C/$t.pb.gz" "$SURL/api/0/profiles?service=conc&type=$t&labels=phase=w,writer=$w,n=$j")
			echo "$code $t" >>"$CD/w$w.codes"
			if [ "$code" = 200 ]; then json_ids "$CD/w$w.json" >>"$CD/w$w.ids"; else echo "POST w$w #$j: $code $(head -c 200 "$CD/w$w.json" 2>/dev/null)" >>"$CD/fail"; fi
		done
	}
	reader() { # r: list, merge, get-by-id (a freshly acknowledged id) until the writers are done
		local r=$1 it=0 prev=0 code n id f
		while [ ! -e "$CD/done" ] || [ "$it" -lt 2 ]; do
			it=$((it + 1))
			code=$(req "$CD/r$r.list" "$SURL/api/0/profiles?service=conc&from=0&to=now")
			n=$(json_ids "$CD/r$r.list" | wc -l)
			echo "list $code" >>"$CD/r$r.codes"
			if [ "$code" != 200 ]; then
				echo "list r$r: $code $(head -c 200 "$CD/r$r.list" 2>/dev/null)" >>"$CD/fail"
			elif [ "$n" -lt "$prev" ]; then
				echo "list r$r: $n profiles, fewer than the $prev seen before" >>"$CD/fail"
			fi
			prev=$n
			code=$(req "$CD/r$r.merge" "$SURL/api/0/profiles/merge?service=conc&type=cpu&from=0&to=now")
			echo "merge $code" >>"$CD/r$r.codes"
			if [ "$code" != 200 ] || ! is_gzip "$CD/r$r.merge"; then echo "merge r$r: $code $(head -c 200 "$CD/r$r.merge" 2>/dev/null)" >>"$CD/fail"; fi
			f=$CD/w$(((r + it) % W + 1)).ids
			id=$(tail -n 1 "$f" 2>/dev/null)
			[ "${#id}" -eq 20 ] || id=$SEED
			code=$(req "$CD/r$r.get" "$SURL/api/0/profiles/$id")
			echo "get $code" >>"$CD/r$r.codes"
			if [ "$code" != 200 ] || ! is_gzip "$CD/r$r.get"; then echo "get r$r $id: $code $(head -c 200 "$CD/r$r.get" 2>/dev/null)" >>"$CD/fail"; fi
		done
	}
	t0=$SECONDS
	rpids=() wpids=()
	for ((r = 1; r <= R; r++)); do
		reader "$r" &
		rpids+=($!)
	done
	for ((w = 1; w <= W; w++)); do
		writer "$w" &
		wpids+=($!)
	done
	for p in "${wpids[@]}"; do wait "$p"; done
	touch "$CD/done"
	for p in "${rpids[@]}"; do wait "$p"; done
	el=$((SECONDS - t0))
	n200=$(cat "$CD"/w*.codes 2>/dev/null | grep -c '^200 ')
	if [ "$n200" -eq $((W * PER)) ]; then ok "concurrency: $W writers x $PER POSTs with $R readers: all $((W * PER)) answered 200 (${el}s)"; else fail "concurrency: all $((W * PER)) POSTs answered 200" "$n200 did; $(grep -m3 POST "$CD/fail" 2>/dev/null)"; fi
	nl=$(cat "$CD"/r*.codes | grep -c '^list ')
	nm=$(cat "$CD"/r*.codes | grep -c '^merge ')
	ng=$(cat "$CD"/r*.codes | grep -c '^get ')
	rf=$(grep -v '^POST' "$CD/fail" 2>/dev/null | head -3)
	if [ -z "$rf" ] && [ "$nl" -ge $((2 * R)) ]; then ok "concurrency: every reader answer was 200 ($nl lists, $nm merges, $ng gets; lists never shrank)"; else fail "concurrency: every reader answer was 200" "$rf"; fi
	cat "$CD"/w*.ids 2>/dev/null | sort >"$CD/posted"
	code=$(req "$CD/final.list" "$SURL/api/0/profiles?service=conc&from=0&to=now&labels=phase=w")
	json_ids "$CD/final.list" | sort >"$CD/listed"
	nu=$(sort -u "$CD/posted" | wc -l)
	if [ "$code" = 200 ] && [ "$(wc -l <"$CD/listed")" -eq $((W * PER)) ] && [ "$nu" -eq $((W * PER)) ] && cmp -s "$CD/posted" "$CD/listed"; then
		ok "concurrency: final list has exactly the $((W * PER)) acknowledged ids (all distinct)"
	else
		fail "concurrency: final list has exactly the $((W * PER)) acknowledged ids" "status $code, $(wc -l <"$CD/listed") listed, $nu distinct acknowledged; missing: $(comm -23 "$CD/posted" "$CD/listed" | head -3 | tr '\n' ' ')"
	fi
	# the cpu merge is the sum of every cpu profile stored
	ncpu=$(($(cat "$CD"/w*.codes | grep -c '^200 cpu$') + 1))
	code=$(req "$CD/final.merge" "$SURL/api/0/profiles/merge?service=conc&type=cpu&from=0&to=now")
	want=$(scale_sums "$ncpu" "$(col_sums "$C/cpu.pb.gz")")
	got=$(col_sums "$CD/final.merge")
	if [ "$code" = 200 ] && [ "$got" = "$want" ]; then ok "concurrency: final cpu merge = $ncpu x the cpu capture"; else fail "concurrency: final cpu merge = $ncpu x the cpu capture" "status $code, got '$got', want '$want'"; fi
	code=$(req "$CD/healthz" "$SURL/healthz")
	if [ "$code" = 200 ] && kill -0 "$SPID" 2>/dev/null; then ok "concurrency: server alive afterwards (/healthz 200)"; else fail "concurrency: server alive afterwards" "status $code"; fi
	stop_server "$SPID" TERM
	rc=$RC
	if [ "$rc" = 0 ]; then ok "concurrency: server exits 0 on SIGTERM"; else fail "concurrency: server exits 0 on SIGTERM" "exit $rc"; fi
	log_clean "concurrency: server log free of errors" "$SLOG"
else
	fail "concurrency: server starts" "$(head -c 400 "$SLOG" 2>/dev/null)"
fi

# ---- 3. retention -----------------------------------------------------------------------------

RD=$T/ret
if start_server ret-long "$RD" --retention 10000h; then
	now=$(date +%s)
	declare -A RID RTS
	bad=
	# name type age-in-seconds
	while read -r name t age; do
		RTS[$name]=$((now - age))
		code=$(post "$C/$t.pb.gz" "service=ret&type=$t&labels=name=$name&created_at=${RTS[$name]}" "$T/r.json")
		RID[$name]=$(json_ids "$T/r.json")
		[ "$code" = 200 ] && [ -n "${RID[$name]}" ] || bad="$bad $name:$code"
	done <<EOF
o10a cpu $((240 * 3600))
o10b heap $((240 * 3600))
o3a cpu $((72 * 3600))
o3b heap $((72 * 3600))
p49 cpu $((49 * 3600))
p47 cpu $((47 * 3600))
r1 cpu 60
r2 heap 0
EOF
	if [ -z "$bad" ]; then ok "retention: 8 profiles 10 days, 3 days, 49 h, 47 h old and recent stored under --retention 10000h"; else fail "retention: 8 profiles stored under --retention 10000h" "$bad"; fi
	stop_server "$SPID" TERM
	rc=$RC
	if [ "$rc" = 0 ]; then ok "retention: first server exits 0 on SIGTERM"; else fail "retention: first server exits 0 on SIGTERM" "exit $rc"; fi
	log_clean "retention: first server's log is clean" "$SLOG"
	F10=$(day_file "${RTS[o10a]}") F3=$(day_file "${RTS[o3a]}") FNOW=$(day_file "${RTS[r2]}") F47=$(day_file "${RTS[p47]}")
	if [ -e "$RD/$F10" ] && [ -e "$RD/$F3" ] && [ -e "$RD/$FNOW" ] && [ -e "$RD/$F47" ]; then
		ok "retention: one day file per UTC day ($F10, $F3, $F47, $FNOW)"
	else
		fail "retention: one day file per UTC day" "want $F10 $F3 $F47 $FNOW, have: $(cd "$RD" && echo *)"
	fi
	dropped_bytes=$(cat "$RD/$F10" "$RD/$F10"-wal "$RD/$F3" "$RD/$F3"-wal 2>/dev/null | wc -c)
	# without the -shm files (SQLite's WAL index, 32 KB of shared memory
	# made when a day file is opened: the server opens the newest days at start)
	du_before=$(du -sb --exclude='*-shm' "$RD" | cut -f1)
	if start_server ret-48h "$RD" --retention 48h; then
		U=$SURL
		gone=
		for f in "$F10" "$F3"; do for x in "" -wal -shm; do [ -e "$RD/$f$x" ] && gone="$gone $f$x"; done; done
		if [ -z "$gone" ] && [ -e "$RD/$FNOW" ] && [ -e "$RD/$F47" ]; then
			ok "retention: restart with 48h deletes $F10 and $F3 (and -wal/-shm), keeps $F47 and $FNOW"
		else
			fail "retention: restart with 48h deletes the expired day files only" "left:${gone:- none}; files: $(cd "$RD" && echo *)"
		fi
		du_after=$(du -sb --exclude='*-shm' "$RD" | cut -f1)
		if [ "$du_after" -lt "$du_before" ] && [ $((du_before - du_after)) -ge $((dropped_bytes * 9 / 10)) ]; then
			ok "retention: disk space reclaimed (du -sb $du_before -> $du_after, dropped files $dropped_bytes bytes)"
		else
			fail "retention: disk space reclaimed" "du -sb $du_before -> $du_after, dropped files were $dropped_bytes bytes"
		fi
		if grep -q 'dropped 2 day partition' "$SLOG"; then ok "retention: log says 2 day partitions dropped"; else fail "retention: log says 2 day partitions dropped" "$(grep -m2 retention "$SLOG")"; fi
		code=$(req "$T/ret.list" "$U/api/0/profiles?service=ret&from=0&to=now")
		json_ids "$T/ret.list" | sort >"$T/ret.ids"
		printf '%s\n' "${RID[p47]}" "${RID[r1]}" "${RID[r2]}" | sort >"$T/ret.want"
		if [ "$code" = 200 ] && cmp -s "$T/ret.ids" "$T/ret.want"; then
			ok "retention: list (from=0) has exactly the 47 h old and recent profiles"
		else
			fail "retention: list (from=0) has exactly the 47 h old and recent profiles" "status $code: $(head -c 400 "$T/ret.list" 2>/dev/null)"
		fi
		bad=
		for name in o10a o10b o3a o3b p49; do
			code=$(req "$T/r404.json" "$U/api/0/profiles/${RID[$name]}")
			grep -q '^{"code":404,"error":".*not found' "$T/r404.json" && [ "$code" = 404 ] || bad="$bad $name:$code"
		done
		if [ -z "$bad" ]; then ok "retention: expired profiles by id: 404 JSON (10 d, 3 d, 49 h old; 49 h may share a kept day file)"; else fail "retention: expired profiles by id: 404 JSON" "$bad"; fi
		bad=
		for name in p47 r1 r2; do
			code=$(req "$T/r200" "$U/api/0/profiles/${RID[$name]}")
			[ "$code" = 200 ] || bad="$bad $name:$code"
		done
		if [ -z "$bad" ]; then ok "retention: kept profiles by id: 200"; else fail "retention: kept profiles by id: 200" "$bad"; fi
		code=$(req "$T/rm.cpu" "$U/api/0/profiles/merge?service=ret&type=cpu&from=0&to=now")
		want=$(scale_sums 2 "$(col_sums "$C/cpu.pb.gz")")
		got=$(col_sums "$T/rm.cpu")
		if [ "$code" = 200 ] && [ "$got" = "$want" ]; then ok "retention: cpu merge (from=0) = the 2 kept cpu profiles"; else fail "retention: cpu merge (from=0) = the 2 kept cpu profiles" "status $code, got '$got', want '$want'"; fi
		code=$(req "$T/rm.ids" "$U/api/0/profiles/${RID[p47]}+${RID[r1]}")
		if [ "$code" = 200 ]; then same_profile "retention: cpu merge = merge by ids of the kept ones" "$T/rm.ids" "$T/rm.cpu"; else fail "retention: merge by ids of the kept ones" "status $code"; fi
		code=$(req "$T/rm.heap" "$U/api/0/profiles/merge?service=ret&type=heap&from=0&to=now")
		got=$(col_sums "$T/rm.heap")
		want=$(col_sums "$C/heap.pb.gz")
		if [ "$code" = 200 ] && [ "$got" = "$want" ]; then ok "retention: heap merge (from=0) = the recent heap profile only"; else fail "retention: heap merge (from=0) = the recent heap profile only" "status $code, got '$got', want '$want'"; fi
		v=$(metric "$U" profd_retention_dropped_partitions_total)
		if [ -n "$v" ] && [ "$v" -ge 2 ]; then ok "retention: /metrics profd_retention_dropped_partitions_total = $v (>= 2)"; else fail "retention: /metrics profd_retention_dropped_partitions_total >= 2" "got '$v' (the 2 partitions dropped at startup are not counted)"; fi
		# an upload older than the window is refused and not stored
		old=$((now - 100 * 3600))
		FOLD=$(day_file "$old")
		code=$(curl -sS -m 30 -o "$T/old.json" -D "$T/old.hdr" -w '%{http_code}' --data-binary "@$C/cpu.pb.gz" "$U/api/0/profiles?service=ret&type=cpu&created_at=$old")
		if [ "$code" = 400 ] && grep -q '^{"code":400,"error":"bad request: .*older than the retention window' "$T/old.json" && grep -qi '^content-type: application/json' "$T/old.hdr"; then
			ok "retention: POST with created_at 100 h ago under 48h: 400 JSON 'older than the retention window'"
		else
			fail "retention: POST with created_at 100 h ago: 400 JSON" "status $code: $(head -c 300 "$T/old.json" 2>/dev/null)"
		fi
		code=$(req "$T/ret.list2" "$U/api/0/profiles?service=ret&from=0&to=now")
		if [ "$code" = 200 ] && [ "$(json_ids "$T/ret.list2" | wc -l)" -eq 3 ]; then ok "retention: the refused profile is not listed"; else fail "retention: the refused profile is not listed" "status $code: $(head -c 300 "$T/ret.list2" 2>/dev/null)"; fi
		if [ ! -e "$RD/$FOLD" ]; then ok "retention: the refused upload leaves no day file ($FOLD)"; else fail "retention: the refused upload leaves no day file" "$FOLD created ($(cat "$RD/$FOLD"* | wc -c) bytes with -wal/-shm): the profile is stored, then removed, in a partition outside the window"; fi
		v=$(metric "$U" 'profd_profiles_rejected_total{reason="too_old"}')
		if [ "$v" = 1 ]; then ok "retention: /metrics counts the refusal as too_old"; else fail "retention: /metrics counts the refusal as too_old" "got '$v'"; fi
		stop_server "$SPID" TERM
		rc=$RC
		if [ "$rc" = 0 ]; then ok "retention: server exits 0 on SIGTERM"; else fail "retention: server exits 0 on SIGTERM" "exit $rc"; fi
		log_clean "retention: server log is clean" "$SLOG"
	else
		fail "retention: restart with --retention 48h" "$(head -c 400 "$SLOG" 2>/dev/null)"
	fi
else
	fail "retention: server starts" "$(head -c 400 "$SLOG" 2>/dev/null)"
fi

# ---- 3b (cont.). the partition expired while the server ran ----------------------------------

if [ -n "$ri_ok" ]; then
	# the window passes E at now + 5 s; the timer runs every second
	for ((i = 0; i < 200; i++)); do
		[ -e "$T/ri/$RI_FILE" ] || break
		sleep 0.05
	done
	if [ ! -e "$T/ri/$RI_FILE" ] && [ ! -e "$T/ri/$RI_FILE-wal" ]; then ok "retention timer: $RI_FILE deleted while the server runs"; else fail "retention timer: day file deleted while the server runs" "still there: $(cd "$T/ri" && echo *)"; fi
	v=$(metric "$RI_URL" profd_retention_dropped_partitions_total)
	if [ "$v" = 1 ]; then ok "retention timer: /metrics profd_retention_dropped_partitions_total = 1"; else fail "retention timer: /metrics dropped partitions = 1" "got '$v'"; fi
	code=$(req "$T/ri2.json" "$RI_URL/api/0/profiles/$RI_ID")
	code2=$(req "$T/ri3.json" "$RI_URL/api/0/profiles?service=ri&from=0&to=now")
	if [ "$code" = 404 ] && [ "$code2" = 404 ]; then ok "retention timer: the expired profile is gone (by id and list: 404)"; else fail "retention timer: the expired profile is gone" "by id $code, list $code2"; fi
	stop_server "$RI_PID" TERM
	rc=$RC
	if [ "$rc" = 0 ]; then ok "retention timer: server exits 0 on SIGTERM"; else fail "retention timer: server exits 0 on SIGTERM" "exit $rc"; fi
	log_clean "retention timer: server log is clean" "$RI_LOG"
elif [ -n "${RI_PID:-}" ]; then
	stop_server "$RI_PID" TERM >/dev/null
fi

# ---- 4. graceful shutdown -----------------------------------------------------------------------

# a large real profile: bench/gen's (60 KB) if built, else the raw cpu capture
BIG=$T/big.pb.gz
GEN=$ROOT/$BUILD/gen
[ -x "$GEN" ] || GEN=$ROOT/build/gen
if [ -x "$GEN" ] && "$GEN" -kind large -n 1 -o "$T/gen" >/dev/null 2>&1 && [ -s "$T/gen/p0000.pb.gz" ]; then
	cp "$T/gen/p0000.pb.gz" "$BIG"
else
	"$PROFD" pprof convert --raw "$C/cpu.pb.gz" "$BIG"
fi
size=$(stat -c %s "$BIG")

# slow_upload OUT SECONDS: POST $BIG at a rate that takes SECONDS, in
# the background (sets UPID); returns once the server has the request
slow_upload() {
	local out=$1 secs=$2 i
	curl -sS -m 60 --limit-rate $((size / secs)) -o "$out" -w '%{http_code}' --data-binary "@$BIG" \
		"$SURL/api/0/profiles?service=slow&type=cpu&created_at=now" >"$out.code" 2>"$out.err" &
	UPID=$!
	for ((i = 0; i < 100; i++)); do
		[ "$(metric "$SURL" profd_http_requests_in_flight)" = 2 ] && break # the upload and this /metrics
		sleep 0.05
	done
	sleep 0.3
}

SD=$T/shut
if start_server shut "$SD"; then
	slow_upload "$T/slow.json" 3
	kill -TERM "$SPID"
	if kill -0 "$UPID" 2>/dev/null; then ok "shutdown: SIGTERM sent while a $size-byte upload is in flight (3 s at $((size / 3)) B/s)"; else fail "shutdown: SIGTERM sent while an upload is in flight" "the upload was over already: $(cat "$T/slow.json.code")"; fi
	wait "$UPID"
	code=$(cat "$T/slow.json.code")
	SLOW_ID=$(json_ids "$T/slow.json")
	if [ "$code" = 200 ] && [ -n "$SLOW_ID" ]; then ok "shutdown: the in-flight upload completes with 200 after SIGTERM"; else fail "shutdown: the in-flight upload completes with 200 after SIGTERM" "status $code: $(head -c 200 "$T/slow.json" "$T/slow.json.err" 2>/dev/null)"; fi
	stop_server "$SPID" TERM 20
	rc=$RC
	if [ "$rc" = 0 ] && grep -q 'SIGTERM: shutting down' "$SLOG" && grep -q 'msg="stopped"' "$SLOG"; then ok "shutdown: server exits 0, log says shutting down and stopped"; else fail "shutdown: server exits 0, log says shutting down and stopped" "exit $rc: $(tail -c 300 "$SLOG")"; fi
	if grep -q 'method=POST uri="/api/0/profiles?service=slow.* code=200 ' "$SLOG" && ! grep -q 'aborted=true' "$SLOG"; then ok "shutdown: request log has the upload with code=200, nothing aborted"; else fail "shutdown: request log has the upload with code=200" "$(grep 'service=slow' "$SLOG" | head -2)"; fi
	log_clean "shutdown: server log is clean" "$SLOG"
	if start_server shut-restart "$SD"; then
		code=$(req "$T/slow.pb.gz" "$SURL/api/0/profiles/${SLOW_ID:-none}")
		if [ "$code" = 200 ]; then same_profile "shutdown: the upload is stored (after restart, by id = the file sent)" "$BIG" "$T/slow.pb.gz"; else fail "shutdown: the upload is stored (after restart, by id)" "status $code"; fi
		stop_server "$SPID" TERM >/dev/null
	else
		fail "shutdown: restart" "$(head -c 300 "$SLOG" 2>/dev/null)"
	fi
else
	fail "shutdown: server starts" "$(head -c 400 "$SLOG" 2>/dev/null)"
fi

# --shutdown-timeout: an upload slower than it is cut, the server still exits
if start_server shut-timeout "$T/shut2" --shutdown-timeout 1s; then
	slow_upload "$T/slow2.json" 20
	t0=$(date +%s%N)
	stop_server "$SPID" TERM 10
	rc=$RC
	ms=$((($(date +%s%N) - t0) / 1000000))
	if [ "$rc" = 0 ] && [ "$ms" -lt 5000 ] && grep -q 'still running at the shutdown timeout' "$SLOG"; then
		ok "shutdown: --shutdown-timeout 1s with a 20 s upload: exit 0 after ${ms} ms, warns about the request"
	else
		fail "shutdown: --shutdown-timeout 1s with a 20 s upload" "exit $rc after $ms ms: $(tail -c 300 "$SLOG")"
	fi
	wait "$UPID"
	code=$(cat "$T/slow2.json.code")
	if [ "$code" != 200 ]; then ok "shutdown: the cut upload is not acknowledged (status $code)"; else fail "shutdown: the cut upload is not acknowledged" "got 200"; fi
	if ! grep -Eq 'Sanitizer|runtime error' "$SLOG"; then ok "shutdown: no sanitizer report after the cut upload"; else fail "shutdown: no sanitizer report after the cut upload" "$(grep -m3 -E 'Sanitizer|runtime error' "$SLOG")"; fi
else
	fail "shutdown: --shutdown-timeout server starts" "$(head -c 400 "$SLOG" 2>/dev/null)"
fi

# ---- every server log --------------------------------------------------------------------------

bad=$(grep -lE 'Sanitizer|runtime error' "$T"/srv-*.log 2>/dev/null | sed 's|.*/||' | tr '\n' ' ')
if [ -z "$bad" ]; then ok "no sanitizer report in any of the $nsrv server logs"; else fail "no sanitizer report in any server log" "$bad: $(grep -hm2 -E 'Sanitizer|runtime error' "$T"/srv-*.log | head -c 400)"; fi
