#!/usr/bin/env bash
# test_store_faults.sh — the store under damaged files, a full disk and a
# low file-descriptor limit (issue 11, items 4, 5, 7), on real profiles
# captured from examples/goapp:
#   a. disk full (root only: a small tmpfs; otherwise a visible skip):
#      uploads until 507 (the cause in the JSON), every 200'd id still
#      fetchable, /readyz says it cannot write; DELETE frees space and
#      writes resume, /readyz is ready again
#   b. damaged day files: bytes overwritten in one day's profile rows, page
#      1 of another overwritten, a third truncated to zero length: the
#      other days still answer (services, list, merge, API v1 top), answers
#      say "partial" with the skipped days (X-Profd-Partial for pprof),
#      /metrics counts the quarantined partitions, /readyz lists them, a
#      damaged profile is a clear 500 (never another profile's values), and
#      `profd store check` exits 1 naming each damaged file (0 when clean)
#   c. a 256-descriptor limit (prlimit --nofile=256): uploads on 200
#      distinct past days all succeed, /api/0/services works, a restart
#      works; a profile far in the future is a 400
#   d. a day file the collector may not open (root only: the collector runs
#      as nobody): skipped as a damaged day, the log says why, a chown ends it
# Run: BUILD=build bash tests/e2e/test_store_faults.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

need_built 1 "make BUILD=$BUILD $BUILD/profd $BUILD/goapp" "$PROFD" "$GOAPP"
need_cmds 1 curl python3 sqlite3 prlimit jq
kill_started_on_exit
PRE=

C=$T/cap
mkdir -p "$C"
if ! tests/e2e/capture.sh "$GOAPP" "$C" 1 >"$T/capture.log" 2>&1; then
	fail "setup: capture" "$(tail -3 "$T/capture.log")"
	exit 1
fi

# start_server NAME DIR ARGS...: profd serve on a free port (stderr in
# $T/srv-NAME.log); sets SPID, SURL. Prefix with PRE (e.g. prlimit ...).
start_server() {
	local name=$1 dir=$2 port=''
	shift 2
	SLOG=$T/srv-$name.log
	: >"$SLOG"
	$PRE "$PROFD" serve -q --addr 127.0.0.1:0 --data-dir "$dir" --rollup-interval 0 "$@" 2>"$SLOG" &
	SPID=$!
	port=$(serve_port "$SLOG" "$SPID")
	[ -n "$port" ] || { SURL=http://127.0.0.1:1; return 1; }
	SURL=http://127.0.0.1:$port
}
stop_server() {
	kill -TERM "$SPID" 2>/dev/null
	wait "$SPID" 2>/dev/null
}
# req OUT CURL_ARGS...: status code, body in OUT
req() {
	local out=$1
	shift
	curl -sS -m 30 -o "$out" -w '%{http_code}' "$@" 2>>"$T/curl.err"
}
post() { req "$3" --data-binary "@$1" "$SURL/api/0/profiles?$2"; }
json_id() { grep -o '"id":"[0-9a-v]\{20\}"' "$1" | head -1 | cut -d'"' -f4; }

# ---- a. disk full ---------------------------------------------------------------------------
if [ "$(id -u)" != 0 ]; then
	echo "ok - disk full # skip not root (needs mount -t tmpfs)"
elif ! mkdir -p "$T/full" || ! mount -t tmpfs -o size=3m tmpfs "$T/full" 2>"$T/mount.err"; then
	echo "ok - disk full # skip cannot mount a tmpfs: $(head -1 "$T/mount.err")"
else
	start_server full "$T/full/data" || fail "disk full: start" "$(tail -3 "$SLOG")"
	: >"$T/acked"
	got507=no
	for ((i = 0; i < 3000; i++)); do
		code=$(post "$C/heap.pb.gz" "service=full&type=heap&labels=n=$i" "$T/a.out")
		if [ "$code" = 200 ]; then
			json_id "$T/a.out" >>"$T/acked"
		elif [ "$code" = 507 ]; then
			got507=yes
			break
		else
			fail "disk full: upload $i" "HTTP $code $(head -c 300 "$T/a.out")"
			break
		fi
	done
	expect "disk full: an upload is refused with 507" yes "$got507"
	if grep -q 'disk is full' "$T/a.out"; then ok "disk full: the 507 says why"; else fail "disk full: the 507 says why" "$(cat "$T/a.out")"; fi
	nacked=$(wc -l <"$T/acked")
	lost=0
	while read -r id; do
		[ "$(req /dev/null "$SURL/api/0/profiles/$id")" = 200 ] || lost=$((lost + 1))
	done <"$T/acked"
	expect "disk full: every acknowledged profile ($nacked) is fetchable" 0 "$lost"
	code=$(req "$T/ready" "$SURL/readyz")
	if [ "$code" = 503 ] && grep -q 'cannot write' "$T/ready"; then ok "disk full: /readyz says it cannot write"
	else fail "disk full: /readyz says it cannot write" "$code $(cat "$T/ready")"; fi
	code=$(req "$T/ready.json" "$SURL/readyz?format=json")
	if [ "$code" = 503 ] && [ "$(jq -r '"\(.ready) \(.writable)"' "$T/ready.json")" = "false false" ] &&
		jq -r .write_error "$T/ready.json" | grep -q 'disk is full'; then ok "disk full: /readyz?format=json: not ready, not writable, why"
	else fail "disk full: /readyz?format=json" "$code $(cat "$T/ready.json")"; fi
	# free space: delete half of what was stored, then writes resume
	n=0
	while read -r id; do
		n=$((n + 1))
		[ $((n % 2)) = 0 ] && continue
		req /dev/null -X DELETE "$SURL/api/0/profiles/$id" >/dev/null
	done <"$T/acked"
	resumed=no
	for ((i = 0; i < 20; i++)); do
		code=$(post "$C/heap.pb.gz" "service=full&type=heap&labels=after=$i" "$T/a.out")
		[ "$code" = 200 ] && { resumed=yes; break; }
		sleep 0.2
	done
	expect "disk full: after DELETE, writes resume" yes "$resumed"
	code=$(req "$T/ready" "$SURL/readyz")
	expect "disk full: /readyz is ready again after a write" 200 "$code"
	stop_server
	umount "$T/full" 2>/dev/null
fi

# ---- b. damaged day files -----------------------------------------------------------------
D=$T/dmg
start_server dmg "$D" --retention 9000h || fail "damaged: start" "$(tail -3 "$SLOG")"
day_ts() { date -u -d "$1 12:00" +%s; } # unix seconds at noon of day $1
for day in 2026-01-10 2026-01-11 2026-01-12 2026-01-13; do
	for k in 1 2 3; do
		code=$(post "$C/cpu.pb.gz" "service=svc$k&type=cpu&created_at=$(($(day_ts $day) + k))" "$T/b.out")
		[ "$code" = 200 ] || fail "damaged: upload $day" "$code $(cat "$T/b.out")"
		[ "$day" = 2026-01-10 ] && [ "$k" = 2 ] && bad_id=$(json_id "$T/b.out")
	done
done
check "damaged: store check is clean before damage" "$PROFD" store check --data-dir "$D"
stop_server
# day 1: 64 bytes overwritten inside a profile row's sample block (what made
# profiles come back with another's values); day 2: page 1; day 3: emptied
python3 - "$D/profd-20260110.db" "$bad_id" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rowid, blk = db.execute("SELECT rowid, block FROM profiles WHERE service = 'svc2'").fetchone()  # bad_id's: svc2's one profile of the day
b = bytearray(blk)
for i in range(12, min(len(b), 76)):
    b[i] ^= 0xA5
db.execute("UPDATE profiles SET block = ? WHERE rowid = ?", (bytes(b), rowid))
db.commit()
EOF
python3 -c "
import sys
with open(sys.argv[1], 'r+b') as f:
    f.seek(100); f.write(b'\xff' * 3000)
" "$D/profd-20260111.db"
: >"$D/profd-20260112.db"

"$PROFD" store check --data-dir "$D" >"$T/check.out" 2>&1
expect "damaged: store check exits 1" 1 "$?"
for f in profd-20260110.db profd-20260111.db profd-20260112.db; do
	if grep -q "^$f: " "$T/check.out"; then ok "damaged: store check names $f"; else fail "damaged: store check names $f" "$(cat "$T/check.out")"; fi
done
if grep -q "^profd-20260113.db" "$T/check.out"; then fail "damaged: store check leaves the good day alone" "$(cat "$T/check.out")"; else ok "damaged: store check leaves the good day alone"; fi
if grep -q "$bad_id" "$T/check.out"; then ok "damaged: store check names the damaged profile"; else fail "damaged: store check names the damaged profile" "$(cat "$T/check.out")"; fi

start_server dmg2 "$D" --retention 9000h || fail "damaged: restart" "$(tail -3 "$SLOG")"
code=$(req "$T/svc.json" "$SURL/api/0/services")
expect "damaged: /api/0/services answers" 200 "$code"
if grep -q '"svc1"' "$T/svc.json" && grep -q '"partial":true' "$T/svc.json" &&
	grep -q '"skipped_days":\["2026-01-11","2026-01-12"\]' "$T/svc.json"; then
	ok "damaged: services are partial, naming the skipped days"
else fail "damaged: services are partial, naming the skipped days" "$(cat "$T/svc.json")"; fi
code=$(req "$T/list.json" "$SURL/api/0/profiles?service=svc1&type=cpu&from=2026-01-10T00:00:00Z&to=2026-01-14T00:00:00Z")
n=$(grep -o '"id":' "$T/list.json" | wc -l)
if [ "$code" = 200 ] && [ "$n" = 2 ] && grep -q '"partial":true' "$T/list.json"; then ok "damaged: list answers the good days, partial"
else fail "damaged: list answers the good days, partial" "$code $n $(head -c 400 "$T/list.json")"; fi
# the damaged profile: a clear error, never values
code=$(req "$T/bad.out" "$SURL/api/0/profiles/$bad_id")
expect "damaged: the damaged profile is a 500" 500 "$code"
grep -q "profd-20260110.db" "$T/srv-dmg2.log" && grep -q "$bad_id" "$T/srv-dmg2.log" &&
	ok "damaged: the log names the file and the profile" || fail "damaged: the log names the file and the profile" "$(tail -5 "$T/srv-dmg2.log")"
# merges over the range skip the damaged days and say so
code=$(curl -sS -m 30 -D "$T/merge.h" -o "$T/merge.pb.gz" -w '%{http_code}' \
	"$SURL/api/0/profiles/merge?service=svc2&type=cpu&from=2026-01-09T00:00:00Z&to=2026-01-14T00:00:00Z")
if [ "$code" = 200 ] && grep -qi '^X-Profd-Partial: 2026-01-10, 2026-01-11, 2026-01-12' "$T/merge.h"; then ok "damaged: v0 merge answers with X-Profd-Partial"
else fail "damaged: v0 merge answers with X-Profd-Partial" "$code $(cat "$T/merge.h")"; fi
code=$(req "$T/top.json" "$SURL/api/1/top?query=cpu&from=2026-01-09T00:00:00Z&to=2026-01-14T00:00:00Z")
if [ "$code" = 200 ] && grep -q '"partial":true' "$T/top.json"; then ok "damaged: /api/1/top answers, partial"
else fail "damaged: /api/1/top answers, partial" "$code $(head -c 400 "$T/top.json")"; fi
code=$(curl -sS -m 30 -D "$T/m1.h" -o /dev/null -w '%{http_code}' \
	"$SURL/api/1/merge?query=cpu%7Bservice%3D%22svc3%22%7D&from=2026-01-09T00:00:00Z&to=2026-01-14T00:00:00Z")
if [ "$code" = 200 ] && grep -qi '^X-Profd-Partial:' "$T/m1.h"; then ok "damaged: /api/1/merge answers, X-Profd-Partial"
else fail "damaged: /api/1/merge answers, X-Profd-Partial" "$code $(cat "$T/m1.h")"; fi
curl -sS "$SURL/metrics" >"$T/metrics"
if grep -q '^profd_store_quarantined_partitions 3$' "$T/metrics"; then ok "damaged: /metrics counts 3 quarantined partitions"
else fail "damaged: /metrics counts 3 quarantined partitions" "$(grep quarantined "$T/metrics")"; fi
code=$(req "$T/ready" "$SURL/readyz")
if [ "$code" = 200 ] && grep -q 'quarantined: profd-20260112.db: zero-length' "$T/ready"; then ok "damaged: /readyz lists the quarantined days"
else fail "damaged: /readyz lists the quarantined days" "$code $(cat "$T/ready")"; fi
code=$(req "$T/ready.json" "$SURL/readyz?format=json")
if [ "$code" = 200 ] && [ "$(jq -r '"\(.ready) \(.writable) \(.quarantined_count) " + ([.quarantined[].file] | sort | join(","))' "$T/ready.json")" = \
	"true true 3 profd-20260110.db,profd-20260111.db,profd-20260112.db" ] &&
	jq -r '.quarantined[] | select(.file == "profd-20260112.db") | .reason' "$T/ready.json" | grep -q zero-length; then
	ok "damaged: /readyz?format=json: ready, writable, the 3 quarantined days with their reasons"
else fail "damaged: /readyz?format=json" "$code $(cat "$T/ready.json")"; fi
# a write to a damaged day is refused; the empty file is not written over
code=$(post "$C/cpu.pb.gz" "service=svc1&type=cpu&created_at=$(day_ts 2026-01-12)" "$T/b.out")
size=$(stat -c %s "$D/profd-20260112.db")
if [ "$code" = 500 ] && [ "$size" = 0 ]; then ok "damaged: a write to a damaged day is refused, the file kept"
else fail "damaged: a write to a damaged day is refused, the file kept" "$code size=$size"; fi
stop_server

# ---- c. file descriptors --------------------------------------------------------------------
F=$T/fd
PRE="prlimit --nofile=256:256 --"
start_server fd "$F" --retention 9000h || fail "fd limit: start" "$(tail -3 "$SLOG")"
now=$(date +%s)
bad=0
for ((i = 1; i <= 200; i++)); do
	code=$(post "$C/cpu.pb.gz" "service=fd$((i % 3))&type=cpu&created_at=$((now - i * 86400))" "$T/c.out")
	[ "$code" = 200 ] || { bad=$((bad + 1)); echo "$code $(head -c 200 "$T/c.out")" >>"$T/fd.err"; }
done
expect "fd limit: 200 uploads on 200 distinct days succeed" 0 "$bad"
[ "$bad" = 0 ] || head -3 "$T/fd.err"
code=$(req "$T/svc.json" "$SURL/api/0/services")
expect "fd limit: /api/0/services" 200 "$code"
grep -q '"fd0","fd1","fd2"' "$T/svc.json" && ok "fd limit: every service listed" || fail "fd limit: every service listed" "$(cat "$T/svc.json")"
code=$(post "$C/cpu.pb.gz" "service=fd0&type=cpu&created_at=$((now + 30 * 86400))" "$T/c.out")
if [ "$code" = 400 ] && grep -q 'future' "$T/c.out"; then ok "fd limit: a profile 30 days ahead is a 400"
else fail "fd limit: a profile 30 days ahead is a 400" "$code $(cat "$T/c.out")"; fi
nfd=$(ls "/proc/$SPID/fd" 2>/dev/null | wc -l)
[ "$nfd" -lt 256 ] && ok "fd limit: $nfd descriptors open" || fail "fd limit: descriptors bounded" "$nfd"
stop_server
start_server fd2 "$F" --retention 9000h || fail "fd limit: restart" "$(tail -3 "$SLOG")"
code=$(req "$T/svc.json" "$SURL/api/0/services")
expect "fd limit: /api/0/services after a restart" 200 "$code"
code=$(req "$T/list.json" "$SURL/api/0/profiles?service=fd1&type=cpu&from=$((now - 201 * 86400))&to=$now")
n=$(grep -o '"id":' "$T/list.json" | wc -l)
expect "fd limit: a list over 200 days after the restart" "200 67" "$code $n"
stop_server
PRE=

# ---- d. a day file the collector may not open (root only: run as nobody) ---------------------
# Before, every query touching it failed (services, lists, stats: 500
# "unable to open database file"); it is skipped as a damaged day is, and a
# chmod ends it.
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || ! setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$PROFD"; then
	echo "ok - permissions # skip not root, or nobody cannot run $PROFD"
else
	P=$(mktemp -d /tmp/profd-perm.XXXXXX) # $T is 700: nobody cannot reach into it
	chmod 755 "$P"
	chown 65534 "$P"
	PRE="setpriv --reuid=65534 --regid=65534 --clear-groups"
	start_server perm "$P" --retention 9000h || fail "permissions: start" "$(tail -3 "$SLOG")"
	for day in 2026-01-10 2026-01-11; do
		code=$(post "$C/cpu.pb.gz" "service=p$day&type=cpu&created_at=$(day_ts $day)" "$T/d.out")
		[ "$code" = 200 ] || fail "permissions: upload $day" "$code $(cat "$T/d.out")"
	done
	stop_server
	chown 0 "$P/profd-20260110.db"
	chmod 600 "$P/profd-20260110.db"
	start_server perm2 "$P" --retention 9000h || fail "permissions: restart" "$(tail -3 "$SLOG")"
	code=$(req "$T/svc.json" "$SURL/api/0/services")
	if [ "$code" = 200 ] && grep -q '"p2026-01-11"' "$T/svc.json" && grep -q '"skipped_days":\["2026-01-10"\]' "$T/svc.json"; then
		ok "permissions: a day file it may not open is skipped, the other days answer"
	else fail "permissions: a day file it may not open is skipped" "$code $(cat "$T/svc.json")"; fi
	grep -q 'profd-20260110.db is damaged: cannot open: Permission denied' "$SLOG" &&
		ok "permissions: the log says why" || fail "permissions: the log says why" "$(tail -3 "$SLOG")"
	chown 65534 "$P/profd-20260110.db"
	code=$(req "$T/svc.json" "$SURL/api/0/services")
	if [ "$code" = 200 ] && grep -q '"p2026-01-10","p2026-01-11"\]}' "$T/svc.json"; then ok "permissions: a chown ends the quarantine"
	else fail "permissions: a chown ends the quarantine" "$code $(cat "$T/svc.json")"; fi
	stop_server
	PRE=
	rm -rf "$P"
fi
