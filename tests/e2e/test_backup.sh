#!/usr/bin/env bash
# test_backup.sh — `profd store backup` / `restore` (docs/operations: the
# embedded store's backups), on real profiles:
#   1. a collector takes uploads over three days, continuously (a loader
#      records every acknowledged id); `profd store backup` runs in the
#      middle of it;
#   2. every profile acknowledged before the backup started is in it: the
#      backup restored into a fresh directory and served, each of them comes
#      back byte for byte as the original collector serves it, and a merge of
#      them equals; the backup verifies (store check);
#   3. refusals: a backup into a non-empty directory (2), a restore over a day
#      the directory has (2, naming it; --force replaces it), a damaged backup
#      (1, naming the file, nothing restored), a restore into a running
#      collector's directory or onto itself (2); a restore --force whose copy
#      fails leaves the day it was to replace whole, with its -wal.
# Run: BUILD=build bash tests/e2e/test_backup.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
go_bins_from_build GOAPP # Go programs, not sanitized
need_built 1 "make && make build/goapp" "$PROFD" "$GOAPP"
need_cmds 1 curl jq python3
kill_started_on_exit

"$ROOT/tests/e2e/capture.sh" "$GOAPP" "$T/cap" 1 >"$T/capture.log" 2>&1 || { fail "setup: capture" "$(tail -3 "$T/capture.log")"; exit 1; }

# serve NAME DIR: a collector on DIR; sets URL_<NAME>
serve() {
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$2" --retention 0 --max-future-skew 0 -q 2>"$T/serve-$1.log" &
	local pid=$! port
	port=$(serve_port "$T/serve-$1.log" "$pid")
	[ -n "$port" ] || { fail "setup: serve $1" "$(head -c 400 "$T/serve-$1.log")"; exit 1; }
	printf -v "URL_$1" '%s' "http://127.0.0.1:$port"
	printf -v "PID_$1" '%s' "$pid"
}
serve a "$T/data"

# the loader: cpu, heap, allocs, goroutine of the capture, round robin, over three days
# (2026-03-01..03), every acknowledged id appended to $T/acked
DAY0=$(date -u -d 2026-03-01T00:00:00Z +%s)
: >"$T/acked"
(
	i=0
	while [ ! -e "$T/stop" ]; do
		for t in cpu heap allocs goroutine; do
			ts=$((DAY0 + (i % 3) * 86400 + i))
			id=$(curl -s --data-binary "@$T/cap/$t.pb.gz" "$URL_a/api/0/profiles?service=svc$((i % 2))&type=$t&created_at=$ts" |
				jq -r 'select(.code == 200) | .body.id')
			[ -n "$id" ] && echo "$id $t" >>"$T/acked"
			i=$((i + 1))
		done
	done
) &
LOADER=$!
for _ in $(seq 300); do [ "$(wc -l <"$T/acked")" -ge 60 ] && break; sleep 0.05; done
cp "$T/acked" "$T/acked-before" # every id here was acknowledged before the backup starts
"$PROFD" store backup --data-dir "$T/data" "$T/bk" >"$T/bk.out" 2>&1
rc=$?
sleep 0.3
touch "$T/stop"
wait "$LOADER"
nb=$(wc -l <"$T/acked-before") na=$(wc -l <"$T/acked")
if [ "$rc" = 0 ] && grep -q '^backed up 3 day files (.* profiles) to .*: verified$' "$T/bk.out" && [ "$na" -gt "$nb" ]; then
	ok "backup during ingest: 3 day files, verified ($nb uploads acknowledged before it, $na in all)"
else fail "backup during ingest" "rc $rc, $nb/$na acked: $(head -c 600 "$T/bk.out")"; fi
[ -f "$T/bk/BACKUP" ] && [ "$(stat -c %a "$T/bk")" = 700 ] && ok "backup: a BACKUP note, the directory mode 700" ||
	fail "backup: note and mode" "$(ls -la "$T/bk")"
check "backup: store check on the backup is clean" "$PROFD" store check --data-dir "$T/bk"

# ---- restore and compare ------------------------------------------------------------------
"$PROFD" store restore --data-dir "$T/restored" "$T/bk" >"$T/rs.out" 2>&1
rs=$?
grep -q '^restored 3 day files' "$T/rs.out" && [ "$rs" = 0 ] && ok "restore into a new directory" || fail "restore" "rc $rs $(cat "$T/rs.out")"
serve b "$T/restored"
missing=0 differ=0
while read -r id _; do
	a=$(curl -s -o "$T/a.pb.gz" -w '%{http_code}' "$URL_a/api/0/profiles/$id")
	b=$(curl -s -o "$T/b.pb.gz" -w '%{http_code}' "$URL_b/api/0/profiles/$id")
	if [ "$b" != 200 ]; then missing=$((missing + 1))
	elif [ "$a" != 200 ] || ! cmp -s "$T/a.pb.gz" "$T/b.pb.gz"; then differ=$((differ + 1)); fi
done <"$T/acked-before"
expect "restored: every profile acknowledged before the backup is there, byte for byte ($nb)" "0 missing, 0 differ" "$missing missing, $differ differ"
ids=$(awk '$2 == "cpu" {print $1}' "$T/acked-before" | head -40 | paste -sd, -)
ca=$(curl -s -o "$T/ma.pb.gz" -w '%{http_code}' "$URL_a/api/1/merge?id=$ids&query=cpu")
cb=$(curl -s -o "$T/mb.pb.gz" -w '%{http_code}' "$URL_b/api/1/merge?id=$ids&query=cpu")
if [ "$ca" = 200 ] && [ "$cb" = 200 ] && cmp -s "$T/ma.pb.gz" "$T/mb.pb.gz"; then ok "restored: a merge of their cpu profiles ($(tr , '\n' <<<"$ids" | wc -l)) is the same profile"
else fail "restored: merge" "$ca $cb"; fi
after=$(comm -13 <(sort "$T/acked-before") <(sort "$T/acked") | head -1 | cut -d' ' -f1)
[ -n "$after" ] && ok "the loader kept uploading while the backup ran (e.g. $after)" || fail "uploads during the backup" "none after"
kill "$PID_b" 2>/dev/null && wait "$PID_b" 2>/dev/null

# ---- refusals -------------------------------------------------------------------------------
expect_exit "backup into a non-empty directory: exit 2" 2 'is not empty' "$PROFD" store backup --data-dir "$T/data" "$T/bk"
expect_exit "restore over a day the directory has: exit 2 naming it" 2 'already has profd-20260301.db.*--force' \
	"$PROFD" store restore --data-dir "$T/restored" "$T/bk"
check "restore --force replaces the days" "$PROFD" store restore --force --data-dir "$T/restored" "$T/bk"
cp -r "$T/bk" "$T/bk-bad"
python3 - "$T/bk-bad/profd-20260302.db" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
for i in range(len(b) // 2, len(b) // 2 + 4096):
    b[i] ^= 0x5a
open(p, 'wb').write(b)
EOF
expect_exit "restore of a damaged backup: exit 1 naming the file, nothing restored" 1 'profd-20260302.db' \
	"$PROFD" store restore --data-dir "$T/fresh" "$T/bk-bad"
[ ! -e "$T/fresh/profd-20260301.db" ] && ok "damaged backup: not one day restored" || fail "damaged backup" "$(ls "$T/fresh")"
# a restore is refused into the directory of a running collector (it
# would replace the files the collector writes: what it acknowledged after
# would be lost) and onto the backup itself (it dropped the -wal files)
expect_exit "restore --force into a running collector's directory: exit 2" 2 'in use by a running profd' \
	"$PROFD" store restore --force --data-dir "$T/data" "$T/bk"
expect_exit "restore of a directory onto itself: exit 2" 2 'the data directory itself' \
	"$PROFD" store restore --force --data-dir "$T/bk" "$T/bk"
# a restore --force whose copy fails leaves the day it was to replace whole,
# the commits in its -wal included (they were removed before the copy)
serve w "$T/w"
: >"$T/w-acked"
for i in 1 2 3 4 5 6; do
	id=$(curl -s --data-binary "@$T/cap/heap.pb.gz" "$URL_w/api/0/profiles?service=w&type=heap&created_at=$((DAY0 + 100 + i))" |
		jq -r 'select(.code == 200) | .body.id')
	[ -n "$id" ] && echo "$id" >>"$T/w-acked"
	[ "$i" = 2 ] && "$PROFD" store backup -q --data-dir "$T/w" "$T/wbk2" >/dev/null 2>&1
done
{ kill -9 "$PID_w" && wait "$PID_w"; } 2>/dev/null
[ -s "$T/w/profd-20260301.db-wal" ] && ok "kill -9: the day's newest commits are in its -wal" || fail "kill -9: -wal" "$(ls -la "$T/w")"
mkdir "$T/w/profd-20260301.db.tmp" # the copy cannot be written
expect_exit "restore --force whose copy fails: exit 1" 1 'profd-20260301.db' \
	"$PROFD" store restore --force --data-dir "$T/w" "$T/wbk2"
rmdir "$T/w/profd-20260301.db.tmp"
serve w2 "$T/w"
missing=0
while read -r id; do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL_w2/api/0/profiles/$id")" = 200 ] || missing=$((missing + 1))
done <"$T/w-acked"
expect "a failed restore --force loses none of the day's $(wc -l <"$T/w-acked") acknowledged profiles" 0 "$missing"
kill "$PID_w2" 2>/dev/null && wait "$PID_w2" 2>/dev/null
# a day whose -wal (left by a kill -9) is damaged before a later commit: not
# backed up (SQLite would copy the day without those commits, and the copy
# would verify)
serve v "$T/v"
for i in $(seq 12); do
	curl -s -o /dev/null --data-binary "@$T/cap/heap.pb.gz" "$URL_v/api/0/profiles?service=v&type=heap&created_at=$((DAY0 + 200 + i))"
done
{ kill -9 "$PID_v" && wait "$PID_v"; } 2>/dev/null
python3 - "$T/v/profd-20260301.db-wal" <<'EOF'
import os, sys
p = sys.argv[1]
with open(p, 'r+b') as f:
    f.seek(os.path.getsize(p) // 2)
    f.write(b'\x5a' * 64)
EOF
expect_exit "backup of a day whose -wal is damaged: exit 1 naming it" 1 'profd-20260301.db: its -wal is damaged' \
	"$PROFD" store backup --data-dir "$T/v" "$T/vbk"
mkdir -p "$T/fresh0"
expect_exit "backup of a directory without day files: exit 1" 1 'nothing to back up' "$PROFD" store backup --data-dir "$T/fresh0" "$T/x"
no_sanitizer "backup: no sanitizer report" "$T"/serve-*.log "$T/bk.out" "$T/rs.out"
