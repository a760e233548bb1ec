#!/usr/bin/env bash
# test_clickhouse.sh — the ClickHouse store backend (issue 13) on Debian's
# ClickHouse 18.16, started here on free loopback ports (clickhouse.sh):
#   1. the store conformance suite: tests/unit/test_store.c's backend-
#      independent tests with PD_TEST_STORE (each in its own database)
#   2. two `profd serve --store clickhouse://...` (A and B) on one database:
#      real examples/goapp CPU and heap profiles uploaded to A are listed,
#      fetched and merged identically from B; go tool pprof -top and -tags of
#      B's merge equal those of Go's own merge of the same files
#      16 concurrent uploads are batched: fewer INSERTs than uploads,
#      each acknowledged one listed
#   3. kill -9 of A right after its acknowledgements: every acknowledged
#      upload is listed and fetched from B
#   4. retention: B restarted with --retention drops the old days'
#      partitions in ClickHouse (system.parts), keeps today's
#   5. ClickHouse stopped: uploads 503 naming ClickHouse (nothing stored),
#      /readyz 503; restarted: ready again, uploads 200, nothing lost
#   6. bad --store values exit 2 naming the problem; a schema newer than
#      the binary is refused at start
#   7. ClickHouse answering errors (tests/e2e/chfault.py in front of it):
#      a proxy's 503 page, out of memory, disk full, an answer cut short:
#      503 / 507 naming the cause, nothing stored; ClickHouse not answering:
#      /metrics within seconds; recovered after
# Run: BUILD=build bash tests/e2e/test_clickhouse.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=clickhouse.sh
source "$(dirname "$0")/clickhouse.sh"

ch_require "ClickHouse store backend"
need_built 0 "make test" "$PROFD" "$GOAPP" "$ROOT/$BUILD/tests/test_store"
need_cmds 0 curl jq python3
kill_started_on_exit

if ch_start one; then ok "setup: clickhouse-server on 127.0.0.1:$CH_HTTP_one"; else
	fail "setup: clickhouse-server" "did not start"
	exit 0
fi
CHURL=clickhouse://127.0.0.1:$CH_HTTP_one

# ---- 1. conformance --------------------------------------------------------------
if PD_TEST_STORE=$CHURL "$ROOT/$BUILD/tests/test_store" >"$T/conf.log" 2>&1; then
	ok "conformance: $(grep -o '[0-9]* test(s)' "$T/conf.log" | tail -1) of the store suite pass on ClickHouse"
else
	fail "conformance suite on ClickHouse" "$(grep -E 'FAILED|ERROR|LINE' "$T/conf.log" | head -10)"
fi
grep -q "^\[  PASSED  \] 18 test(s)" "$T/conf.log" || fail "conformance: all 18 backend-independent tests ran" "$(tail -3 "$T/conf.log")"

# ---- 2. two collectors, one ClickHouse ----------------------------------------------
ch_q one "CREATE DATABASE shared" >/dev/null
# serve NAME ARGS...: profd serve on the shared database; sets PORT_NAME, PID_NAME
serve() {
	local name=$1 pid port
	shift
	"$PROFD" serve --addr 127.0.0.1:0 --store "$CHURL/shared" "$@" >"$T/serve-$name.log" 2>&1 &
	pid=$!
	port=$(serve_port "$T/serve-$name.log" "$pid")
	printf -v "PORT_$name" %s "$port"
	printf -v "PID_$name" %s "$pid"
	[ -n "$port" ]
}
if serve A --retention 0 && serve B --retention 0; then ok "setup: collectors A ($PORT_A) and B ($PORT_B) on one database"; else
	fail "setup: two collectors" "$(cat "$T/serve-A.log" "$T/serve-B.log" | head -10)"
	exit 0
fi
A=http://127.0.0.1:$PORT_A B=http://127.0.0.1:$PORT_B

start_goapp g mixed
G=http://127.0.0.1:$PORT_g/debug/pprof
mkdir -p "$T/p"
for i in 1 2 3; do
	curl -sS --max-time 20 -o "$T/p/cpu$i.pb.gz" "$G/profile?seconds=1" &
	c1=$!
	curl -sS --max-time 20 -o "$T/p/heap$i.pb.gz" "$G/heap"
	wait "$c1"
done
ids=()
for f in "$T"/p/cpu*.pb.gz "$T"/p/heap*.pb.gz; do
	t=$(basename "$f" | sed 's/[0-9]*\.pb\.gz//')
	id=$(curl -sS --data-binary "@$f" "$A/api/0/profiles?service=goapp&type=$t&labels=env=test,file=$(basename "$f")" | jq -r '.body.id // empty')
	[ -n "$id" ] && ids+=("$id")
done
expect "upload: 6 live goapp profiles (3 cpu, 3 heap) acknowledged by A" 6 "${#ids[@]}"
listed=$(curl -sS "$B/api/0/profiles?service=goapp&type=cpu&from=0&to=now" | jq -r '.body | length')
expect "list: B sees A's 3 cpu profiles" 3 "$listed"
expect "list: B filters by label (file=cpu2.pb.gz)" 1 \
	"$(curl -sS "$B/api/0/profiles?service=goapp&type=cpu&labels=file=cpu2.pb.gz&from=0&to=now" | jq -r '.body | length')"
expect "services: B lists goapp" '["goapp"]' "$(curl -sS "$B/api/0/services" | jq -c .body)"
# /metrics' store gauges from ClickHouse (a refresh it waits up to 0.5 s for)
expect "metrics: B counts the 6 profiles in ClickHouse (profd_store_profiles)" 6 \
	"$(curl -sS "$B/metrics" | sed -n 's/^profd_store_profiles //p')"
# fetch: each profile from B reads like the uploaded file
topn() { go_pprof -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$@" | tail -n +2; }
bad=0
for i in 1 2 3; do
	id=$(curl -sS "$B/api/0/profiles?service=goapp&type=cpu&labels=file=cpu$i.pb.gz&from=0&to=now" | jq -r '.body[0].id')
	curl -sS -o "$T/got$i.pb.gz" "$B/api/0/profiles/$id"
	topn "$T/got$i.pb.gz" >"$T/got$i.top"
	topn "$T/p/cpu$i.pb.gz" >"$T/want$i.top"
	cmp -s "$T/got$i.top" "$T/want$i.top" || bad=$((bad + 1))
done
expect "get: go tool pprof -top of each cpu profile fetched from B equals the uploaded file's" 0 "$bad"
# merge: B's merge equals Go's merge of the same files
for t in cpu heap; do
	curl -sS -o "$T/m-$t.pb.gz" "$B/api/0/profiles/merge?service=goapp&type=$t&from=0&to=now"
	go_pprof -proto -output "$T/go-$t.pb.gz" "$T"/p/"$t"*.pb.gz >/dev/null
	topn "$T/m-$t.pb.gz" >"$T/m-$t.top"
	topn "$T/go-$t.pb.gz" >"$T/go-$t.top"
	if [ -s "$T/m-$t.top" ] && cmp -s "$T/m-$t.top" "$T/go-$t.top"; then
		ok "merge $t: go tool pprof -top of B's merge equals Go's merge of the files ($(wc -l <"$T/m-$t.top") lines)"
	else
		fail "merge $t: -top equal to Go's" "$(diff "$T/m-$t.top" "$T/go-$t.top" | head -10)"
	fi
	go_pprof -tags "$T/m-$t.pb.gz" >"$T/m-$t.tags"
	go_pprof -tags "$T/go-$t.pb.gz" >"$T/go-$t.tags"
	same_output "merge $t: go tool pprof -tags equal to Go's merge" "$T/m-$t.tags" "$T/go-$t.tags"
done
# B again: its symbols now come from the collector's cache of read symbols
# (clickhouse.c: symc), not from ClickHouse: the same bytes; a heap merge
# met other symbols in between, and a cpu merge of a narrower range asks
# for a part of them
curl -sS -o "$T/m2-cpu.pb.gz" "$B/api/0/profiles/merge?service=goapp&type=cpu&from=0&to=now"
same_output "merge cpu again from B (symbols from its cache): byte-identical to its first" "$T/m-cpu.pb.gz" "$T/m2-cpu.pb.gz"
# a range inside one day holding no whole hour is read without asking
# ClickHouse which days have rows (clickhouse.c: one_day): the seconds of
# the 3 cpu uploads give the same bytes, a range of none of them a 404
secs=$(curl -sS "$B/api/0/profiles?service=goapp&type=cpu&from=0&to=now" | jq -r '.body[].created_at' |
	while read -r c; do date -u -d "$c" +%s; done | sort -n)
s0=$(head -n1 <<<"$secs") s1=$(tail -n1 <<<"$secs")
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
curl -sS -o "$T/m4-cpu.pb.gz" "$B/api/0/profiles/merge?service=goapp&type=cpu&from=$(iso "$s0")&to=$(iso $((s1 + 1)))"
same_output "merge cpu over the uploads' seconds only (one day, no whole hour): byte-identical to from=0" \
	"$T/m-cpu.pb.gz" "$T/m4-cpu.pb.gz"
# a merge of a selection by label (ids, not a range) of one service and type: its rows found
# through the sort key's prefix (clickhouse.c: ch_merge_of), the same profile as the range's
curl -sS -o "$T/m5-cpu.pb.gz" -G "$B/api/1/merge" --data-urlencode 'query=cpu{service="goapp",env="test"}' -d from=now-1h
topn "$T/m5-cpu.pb.gz" >"$T/m5-cpu.top"
if [ -s "$T/m5-cpu.top" ] && cmp -s "$T/m5-cpu.top" "$T/m-cpu.top"; then
	ok "merge of cpu{service=\"goapp\",env=\"test\"} (by ids of one service): go tool pprof -top equals the range merge's"
else fail "merge by ids of one service" "$(diff "$T/m5-cpu.top" "$T/m-cpu.top" | head -5)"; fi
expect "merge cpu over 10 minutes before the uploads (one day, no whole hour): 404" 404 \
	"$(curl -sS -o /dev/null -w '%{http_code}' "$B/api/0/profiles/merge?service=goapp&type=cpu&from=$(iso $((s0 - 660)))&to=$(iso $((s0 - 60)))")"
# the same merge from A and from B
curl -sS -o "$T/mA.pb.gz" "$A/api/0/profiles/merge?service=goapp&type=cpu&from=0&to=now"
topn "$T/mA.pb.gz" >"$T/mA.top"
same_output "merge: A and B answer the same" "$T/mA.top" "$T/m-cpu.top"
# a collector started now (C) has read the newest days' symbols at start
# (pd_store_warm): its first merge takes every symbol from that cache, none
# from ClickHouse, and answers B's bytes
sym_reads() { curl -sS "$1/metrics" | sed -n "s/^profd_store_symbol_reads_total{source=\"$2\"} //p"; }
if serve C --retention 0; then
	C=http://127.0.0.1:$PORT_C
	curl -sS -o "$T/mC.pb.gz" "$C/api/0/profiles/merge?service=goapp&type=cpu&from=0&to=now"
	same_output "fresh collector C: its first merge is byte-identical to B's" "$T/m-cpu.pb.gz" "$T/mC.pb.gz"
	st=$(sym_reads "$C" store) ca=$(sym_reads "$C" cache)
	if [ "$st" = 0 ] && [ -n "$ca" ] && [ "$ca" -gt 0 ]; then
		ok "fresh collector C: the first merge took its $ca symbols from what C read at start, none from ClickHouse"
	else fail "fresh collector C: symbols from the start's read" "store=$st cache=$ca"; fi
	kill "$PID_C"
	wait "$PID_C" 2>/dev/null
else fail "setup: collector C" "$(head -5 "$T/serve-C.log")"; fi
# a profile's size (/api/1/profiles) counts its header and block, as the
# embedded store's does
expect "stored_bytes is the header's and the block's bytes, on every goapp row" 0 \
	"$(ch_q one "SELECT count() FROM shared.profiles WHERE service = 'goapp' AND stored_bytes != length(header) + length(block)")"
# a retried INSERT writes its rows again: until ClickHouse merges them away
# the rows are there twice, and the merges, a single profile (all read
# without FINAL, a row seen twice skipped) and the list must not count them
# twice
ids=$(curl -sS "$B/api/0/profiles?service=goapp&type=cpu&from=0&to=now" | jq -r '[.body[].id] | join("+")')
curl -sS -o "$T/ids1.pb.gz" "$B/api/0/profiles/$ids"
ch_q one "INSERT INTO shared.profiles SELECT * FROM shared.profiles WHERE service = 'goapp'" >/dev/null
expect "retried INSERT: goapp's profile rows are there twice" 12 \
	"$(ch_q one "SELECT count() FROM shared.profiles WHERE service = 'goapp'")"
curl -sS -o "$T/m3-cpu.pb.gz" "$B/api/0/profiles/merge?service=goapp&type=cpu&from=0&to=now"
same_output "retried INSERT: the merge from B is byte-identical to before" "$T/m-cpu.pb.gz" "$T/m3-cpu.pb.gz"
curl -sS -o "$T/ids2.pb.gz" "$B/api/0/profiles/$ids"
if [[ $ids == *+*+* ]] && [ -s "$T/ids1.pb.gz" ]; then
	same_output "retried INSERT: the merge of the 3 cpu ids (GET id1+id2+id3) is byte-identical to before" \
		"$T/ids1.pb.gz" "$T/ids2.pb.gz"
else fail "retried INSERT: the merge of the cpu ids" "ids '$ids'"; fi
bad=0
for i in 1 2 3; do
	id=$(curl -sS "$B/api/0/profiles?service=goapp&type=cpu&labels=file=cpu$i.pb.gz&from=0&to=now" | jq -r '.body[0].id')
	curl -sS -o "$T/got$i-again.pb.gz" "$B/api/0/profiles/$id"
	cmp -s "$T/got$i.pb.gz" "$T/got$i-again.pb.gz" || bad=$((bad + 1))
done
expect "retried INSERT: each cpu profile fetched by its id is byte-identical to before" 0 "$bad"
expect "retried INSERT: B still lists 3 cpu profiles" 3 \
	"$(curl -sS "$B/api/0/profiles?service=goapp&type=cpu&from=0&to=now" | jq -r '.body | length')"
# symbols are stored once: a second upload of the same file adds no symbol rows
before=$(ch_q one "SELECT count() FROM shared.symbols FINAL")
curl -sS -o /dev/null --data-binary "@$T/p/cpu1.pb.gz" "$B/api/0/profiles?service=dup&type=cpu"
ch_q one "OPTIMIZE TABLE shared.symbols FINAL" >/dev/null 2>&1 || true
after=$(ch_q one "SELECT count() FROM shared.symbols FINAL")
expect "dedup: the same profile through the other collector adds no symbol" "$before" "$after"

# batched inserts: 16 concurrent uploads share INSERTs (one symbols and one
# profiles INSERT per batch, not two per upload), and each 200 is stored
i0=$(ch_q one "SELECT toUInt64(sum(value)) FROM system.events WHERE event = 'InsertQuery'")
bp=()
for i in $(seq 1 16); do
	curl -sS -o "$T/b$i.json" -w '%{http_code}\n' --data-binary "@$T/p/heap$(((i % 3) + 1)).pb.gz" \
		"$A/api/0/profiles?service=batch&type=heap&labels=n=$i" >"$T/b$i.code" &
	bp+=("$!")
done
wait "${bp[@]}"
i1=$(ch_q one "SELECT toUInt64(sum(value)) FROM system.events WHERE event = 'InsertQuery'")
expect "batch: 16 concurrent uploads: all 200" 16 "$(cat "$T"/b*.code | grep -c '^200$')"
expect "batch: ... all 16 listed" 16 "$(curl -sS "$B/api/0/profiles?service=batch&type=heap&from=0&to=now" | jq '.body | length')"
if [ $((i1 - i0)) -lt 16 ]; then ok "batch: ... in $((i1 - i0)) INSERTs (fewer than one per upload)"; else
	fail "batch: concurrent uploads share INSERTs" "$((i1 - i0)) INSERTs for 16 uploads"
fi

# a regressions report on ClickHouse reads its sides ahead, 8 comparisons at a time on 4 threads
# (pd_store_read_ahead): 6 rollouts of crafted profiles (main.a 90 % then 10 % of the CPU, in
# turn), in order; then a service whose CPU is in milliseconds, a comparison that fails after
# them: a 400 naming it, and the sides read ahead given back (collector R stopped: the sanitizer
# check at the end reads its log)
python3 "$ROOT/tests/e2e/craft_prof.py" cpu "$T/odd.pb.gz" nanoseconds 10000000 9000000000 1000000000 0 900 100 &&
	python3 "$ROOT/tests/e2e/craft_prof.py" cpu "$T/even.pb.gz" nanoseconds 10000000 1000000000 9000000000 0 100 900 &&
	python3 "$ROOT/tests/e2e/craft_prof.py" cpu "$T/ms.pb.gz" milliseconds 10 9000 1000 0 900 100 ||
	fail "regressions: craft_prof.py" "python3 failed"
rt0=$(($(date +%s) - 1800))
for v in 1 2 3 4 5 6 7; do
	f=$T/even.pb.gz
	[ $((v % 2)) = 1 ] && f=$T/odd.pb.gz
	for k in 1 2; do
		curl -sS -o /dev/null --data-binary "@$f" \
			"$A/api/0/profiles?service=rollout&type=cpu&labels=version=v$v&created_at=$((rt0 + 100 * v + k))"
	done
done
if serve R --retention 0 --rollup-interval 0; then
	R=http://127.0.0.1:$PORT_R
	got=$(curl -sS -G "$R/api/1/regressions" --data-urlencode 'query=cpu{service="rollout"}' -d from=now-1h |
		jq -c '[.body.comparisons[] | [.from, .to, .base.profiles, .target.profiles]]')
	expect "regressions on ClickHouse: 6 rollouts in order, each side its version's two profiles" \
		'[["v1","v2",2,2],["v2","v3",2,2],["v3","v4",2,2],["v4","v5",2,2],["v5","v6",2,2],["v6","v7",2,2]]' "$got"
	for v in 1 2 3; do
		curl -sS -o /dev/null --data-binary "@$T/ms.pb.gz" \
			"$A/api/0/profiles?service=rollout-ms&type=cpu&labels=version=v$v&created_at=$((rt0 + 1000 + v))"
	done
	code=$(curl -sS -o "$T/regr-ms.json" -w '%{http_code}' -G "$R/api/1/regressions" \
		--data-urlencode 'query=cpu{service=~"rollout.*"}' -d from=now-1h)
	if [ "$code" = 400 ] && jq -r .error "$T/regr-ms.json" | grep -q '^service rollout-ms: its rates are'; then
		ok "regressions on ClickHouse: the 7th of 8 comparisons fails: 400 naming rollout-ms"
	else fail "regressions on ClickHouse: a comparison that fails" "$code $(head -c 300 "$T/regr-ms.json")"; fi
	# a selection over several services is one query (clickhouse.c: find_services): the
	# same profiles as a list of each service, and the same labels and types
	want=$(for s in rollout rollout-ms; do
		curl -sS "$R/api/0/profiles?service=$s&type=cpu&from=0&to=now" | jq -r '.body[] | .service + " " + .id'
	done | sort)
	got=$(curl -sS -G "$R/api/1/profiles" --data-urlencode 'query=cpu{service=~"rollout.*"}' -d from=now-1h |
		jq -r '.body[] | .service + " " + .id' | sort)
	if [ "$(wc -l <<<"$want")" = 17 ] && [ "$got" = "$want" ]; then
		ok "selection over 2 services on ClickHouse: the 17 profiles of the two services' lists"
	else fail "selection over 2 services on ClickHouse" "want $(wc -l <<<"$want"), got $(wc -l <<<"$got"): $(diff <(echo "$want") <(echo "$got") | head -5)"; fi
	expect "labels over 2 services on ClickHouse: version's values" '["v1","v2","v3","v4","v5","v6","v7"]' \
		"$(curl -sS -G "$R/api/1/labels/version/values" --data-urlencode 'query=cpu{service=~"rollout.*"}' -d from=now-1h | jq -c '.body')"
	kill -TERM "$PID_R"
	wait "$PID_R"
	expect "regressions on ClickHouse: collector R exits 0 on SIGTERM" 0 "$?"
else fail "setup: collector R" "$(head -5 "$T/serve-R.log")"; fi

# ---- 3. kill -9 after the acknowledgements -------------------------------------------------
acked=()
for i in $(seq 1 20); do
	f=$T/p/heap$(((i % 3) + 1)).pb.gz
	id=$(curl -sS --data-binary "@$f" "$A/api/0/profiles?service=crash&type=heap&labels=n=$i" | jq -r '.body.id // empty')
	[ -n "$id" ] && acked+=("$id")
done
kill -9 "$PID_A"
wait "$PID_A" 2>/dev/null
listed=$(curl -sS "$B/api/0/profiles?service=crash&type=heap&from=0&to=now" | jq -r '.body[].id' | sort)
missing=0
for id in "${acked[@]}"; do
	grep -qx "$id" <<<"$listed" || missing=$((missing + 1))
	code=$(curl -sS -o /dev/null -w '%{http_code}' "$B/api/0/profiles/$id")
	[ "$code" = 200 ] || missing=$((missing + 1))
done
expect "kill -9 of A: all ${#acked[@]} acknowledged uploads listed and fetched from B" "0 20" "$missing ${#acked[@]}"

# ---- 4. retention ---------------------------------------------------------------------
old=$(date -u -d '-45 days' +%Y-%m-%dT12:00:00Z)
oldday=${old%%T*}
code=$(curl -sS -o "$T/old.json" -w '%{http_code}' --data-binary "@$T/p/cpu1.pb.gz" "$B/api/0/profiles?service=old&type=cpu&created_at=$old")
expect "retention: a profile of $oldday stored (retention 0)" 200 "$code"
parts() { ch_q one "SELECT DISTINCT toString(partition) FROM system.parts WHERE active AND database = 'shared' AND table IN ('profiles', 'symbols') ORDER BY toString(partition)" | tr '\n' ' '; }
p0=$(parts)
[[ $p0 == *"$oldday"* ]] && ok "retention: ClickHouse has a partition $oldday" || fail "retention: partition $oldday" "$p0"
kill "$PID_B"
wait "$PID_B" 2>/dev/null
serve B --retention 720h || fail "retention: B restarts with --retention 720h" "$(tail -3 "$T/serve-B.log")"
B=http://127.0.0.1:$PORT_B
p1=$(parts)
if [[ $p1 != *"$oldday"* ]] && [[ $p1 == *"$(date -u +%Y-%m-%d)"* ]]; then
	ok "retention: DROP PARTITION took $oldday, today's partition stays ($p1)"
else
	fail "retention: partitions after the restart" "before: $p0 after: $p1"
fi
expect "retention: the old profile is gone" 404 "$(curl -sS -o /dev/null -w '%{http_code}' "$B/api/0/profiles/$(jq -r .body.id "$T/old.json")")"

# ---- 5. ClickHouse down, then back ----------------------------------------------------------
n0=$(curl -sS "$B/api/0/profiles?service=goapp&from=0&to=now" | jq -r '.body | length')
ch_stop one
code=$(curl -sS -o "$T/down.json" -w '%{http_code}' --max-time 40 --data-binary "@$T/p/cpu1.pb.gz" "$B/api/0/profiles?service=goapp&type=cpu")
if [ "$code" = 503 ] && grep -q "ClickHouse at" "$T/down.json"; then ok "down: an upload is 503 naming ClickHouse ($(jq -r .error "$T/down.json" | head -c 120))"; else
	fail "down: upload 503" "$code $(head -c 300 "$T/down.json")"
fi
code=$(curl -sS -o "$T/ready.txt" -w '%{http_code}' --max-time 10 "$B/readyz")
if [ "$code" = 503 ] && grep -q "ClickHouse" "$T/ready.txt"; then ok "down: /readyz 503 with the cause"; else fail "down: /readyz" "$code $(cat "$T/ready.txt")"; fi
expect "down: /healthz still 200 (the process is alive)" 200 "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$B/healthz")"
ch_restart one || fail "setup: ClickHouse restart" "see $T/ch-one/log"
code=000
for _ in $(seq 1 40); do
	code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "$B/readyz")
	[ "$code" = 200 ] && break
	sleep 0.5
done
expect "back: /readyz 200 again, without a restart of profd" 200 "$code"
code=$(curl -sS -o /dev/null -w '%{http_code}' --data-binary "@$T/p/cpu1.pb.gz" "$B/api/0/profiles?service=goapp&type=cpu")
expect "back: uploads are 200 again" 200 "$code"
expect "back: nothing lost, nothing half-written (one more profile than before)" "$((n0 + 1))" \
	"$(curl -sS "$B/api/0/profiles?service=goapp&from=0&to=now" | jq -r '.body | length')"

# ---- 6. usage -----------------------------------------------------------------------------------
expect_exit "--store with another scheme: exit 2" 2 'want sqlite or clickhouse://' "$PROFD" serve --store postgres://x/y
expect_exit "--store without a database: exit 2" 2 'no /DATABASE' "$PROFD" serve --store clickhouse://127.0.0.1:1
expect_exit "--store with an unknown parameter: exit 2" 2 'unknown or bad parameter' "$PROFD" serve --store "$CHURL/x?foo=1"
expect_exit "--store-password-file without ClickHouse: exit 2" 2 'need --store clickhouse' "$PROFD" serve --store-password-file /dev/null
expect_exit "--store on a closed port: exit 1, names ClickHouse" 1 'ClickHouse at http://127.0.0.1:1/x' "$PROFD" serve --addr 127.0.0.1:0 --store clickhouse://127.0.0.1:1/x
ch_q one "CREATE DATABASE future" >/dev/null
ch_q one "CREATE TABLE future.profd_schema (version UInt32) ENGINE = MergeTree ORDER BY version" >/dev/null
ch_q one "INSERT INTO future.profd_schema VALUES (99)" >/dev/null
expect_exit "a database of a newer schema: refused at start" 2 'schema version 99, newer than this profd knows' \
	"$PROFD" serve --addr 127.0.0.1:0 --store "$CHURL/future"
# ---- 7. ClickHouse answering errors (chfault.py: a proxy that fails on demand) -----------
# a load balancer's 503 page, ClickHouse out of memory or out of disk, an
# answer cut short: each upload is refused with ClickHouse's words and the
# status a client acts on (503: try again; 507: the disk is full), never
# 413 (the client's upload too large) or a 200; then, the proxy passing
# again, the same collector answers
echo pass >"$T/chmode"
python3 "$ROOT/tests/e2e/chfault.py" "$CH_HTTP_one" "$T/chmode" >"$T/chfault.log" 2>&1 &
FPORT=$(wait_line "$T/chfault.log" '^chfault: listening on \([0-9]*\)$')
# (one libmicrohttpd worker: an upload the store holds must not hold the
# worker's other connections, /metrics below; it did, when the upload's
# store work ran on the worker: /metrics waited out the 30 s with it)
if [ -n "$FPORT" ] && CHURL=clickhouse://127.0.0.1:$FPORT serve F --retention 0 --threads 1; then
	F=http://127.0.0.1:$PORT_F
	# fault MODE: upload status, its Retry-After, the error; then a list's status and error
	fault() {
		echo "$1" >"$T/chmode"
		curl -sS -D "$T/f.hdr" -o "$T/f.json" -w '%{http_code}' --data-binary "@$T/p/cpu1.pb.gz" \
			"$F/api/0/profiles?service=fault&type=cpu"
		printf ' %s ' "$(sed -n 's/^Retry-After: *\([0-9]*\).*/\1/ip' "$T/f.hdr")"
		jq -r .error "$T/f.json" | head -c 200
		printf ' | '
		curl -sS -o "$T/fl.json" -w '%{http_code} ' "$F/api/0/profiles?service=goapp&from=0&to=now"
		jq -r .error "$T/fl.json" | head -c 200
	}
	# fault_is MODE GLOB OK FAIL: fault MODE's line matches the glob pattern GLOB
	fault_is() {
		local fr
		fr=$(fault "$1")
		# shellcheck disable=SC2053 # $2 is a glob pattern on purpose
		if [[ $fr == $2 ]]; then ok "$3"; else fail "$4" "$fr"; fi
	}
	fault_is page503 '503 1 *HTTP 503: <!DOCTYPE html>*| 503 *HTTP 503*' \
		"errors: a 12 KB 503 page in front of ClickHouse: upload and list 503 with Retry-After, naming it" \
		"errors: a 503 page: 503"
	fault_is code241 '503 1 *Code: 241*| 503 *Code: 241*' \
		"errors: ClickHouse out of memory (Code: 241): 503, try again" "errors: Code 241: 503"
	fault_is code243 '507  *Code: 243*| 507 *Code: 243*' \
		"errors: ClickHouse's disk full (Code: 243): 507, as on the embedded store" "errors: Code 243: 507"
	fault_is cut '*| 503 *transfer closed*' "errors: an answer cut short: 503, not a shorter list" \
		"errors: a cut answer: 503"
	# ClickHouse not answering: an upload fails after the request timeout
	# (30 s), and those that arrived meanwhile with it, not one timeout
	# later each (and a pile of them behind); /metrics still answers
	# within seconds (Prometheus gives up after 10 s), with the
	# collector's own counters
	# (a look at ClickHouse that answered: /readyz then has an answer to give)
	echo pass >"$T/chmode"
	expect "errors: the proxy passing: /readyz 200" 200 "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$F/readyz")"
	echo hang >"$T/chmode"
	hp=()
	for i in 1 2 3 4; do
		curl -sS -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 100 --data-binary "@$T/p/cpu1.pb.gz" \
			"$F/api/0/profiles?service=hang&type=cpu&labels=n=$i" >"$T/hang$i.txt" &
		hp+=("$!")
		[ "$i" = 1 ] && sleep 1
	done
	# a read held by ClickHouse too: it held the worker's other connections
	# (/metrics below waited out its 30 s) while reads ran on the worker
	curl -sS -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 100 \
		"$F/api/0/profiles?service=goapp&from=0&to=now" >"$T/readhang.txt" &
	hp+=("$!")
	sleep 0.5
	t0=$(date +%s%N)
	code=$(curl -sS -o "$T/fm.txt" -w '%{http_code}' --max-time 60 "$F/metrics")
	ms=$((($(date +%s%N) - t0) / 1000000))
	# (the store's stats are waited for 0.5 s: /metrics runs on a worker, whose
	# other connections, /healthz among them, wait with it; it took the stats'
	# 5 s bound before)
	if [ "$code" = 200 ] && [ "$ms" -lt 2500 ] && grep -q '^profd_ingest_received_bytes_total ' "$T/fm.txt"; then
		ok "errors: ClickHouse not answering: /metrics 200 in $ms ms, with the collector's counters"
	else fail "errors: /metrics while ClickHouse hangs" "$code in $ms ms"; fi
	# the 4 uploads and the list, each on an offload thread the store holds (on a
	# loaded machine, one may still be on its way)
	check "errors: ... which count the requests ClickHouse holds on the offload threads (4 or 5)" \
		grep -Eq '^profd_http_offload_busy [45]$' "$T/fm.txt"
	check "... none waiting for a thread" grep -q '^profd_http_offload_waiting 0$' "$T/fm.txt"
	check "... of 16 threads (--threads 1)" grep -q '^profd_http_offload_threads 16$' "$T/fm.txt"
	# /readyz: its SELECT 1 (2 s bound) on a thread of its own, waited 0.5 s: the
	# probe (on the worker, like /healthz) answers at once with the last look's
	# answer, and turns 503 once a look failed
	t0=$(date +%s%N)
	code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$F/readyz")
	ms=$((($(date +%s%N) - t0) / 1000000))
	if [ "$ms" -lt 1500 ]; then ok "errors: ClickHouse not answering: /readyz answers in $ms ms ($code)"; else
		fail "errors: /readyz while ClickHouse hangs: within 1.5 s" "$code in $ms ms"
	fi
	for _ in $(seq 1 20); do
		code=$(curl -sS -o "$T/fr.txt" -w '%{http_code}' --max-time 10 "$F/readyz")
		[ "$code" = 503 ] && break
		sleep 0.5
	done
	if [ "$code" = 503 ] && grep -q 'ClickHouse' "$T/fr.txt"; then ok "errors: ... and turns 503 naming ClickHouse"; else
		fail "errors: /readyz while ClickHouse hangs: 503" "$code $(cat "$T/fr.txt")"
	fi
	wait "${hp[@]}"
	fr=$(cat "$T"/hang*.txt | awk '$1 == 503 && $2 < 45 { n++ } END { print n + 0 }')
	if [ "$fr" = 4 ]; then ok "errors: ClickHouse not answering: 4 uploads (1 s apart) all 503 within 45 s"; else
		fail "errors: uploads while ClickHouse hangs: 503 within 45 s" "$(cat "$T"/hang*.txt | tr '\n' ' ')"
	fi
	if awk '$1 == 503 && $2 < 45 { ok = 1 } END { exit !ok }' "$T/readhang.txt"; then
		ok "errors: ClickHouse not answering: a list 503 within 45 s"
	else fail "errors: a list while ClickHouse hangs: 503 within 45 s" "$(cat "$T/readhang.txt")"; fi
	sleep 1.2 # the Retry-After (1 s): a batch that got no answer fails those within it at once
	fault_is pass '200 *| 200 *' "errors: the proxy passing again: the same collector uploads and lists" \
		"errors: recovered"
	expect "errors: the failed uploads stored nothing (the cut one's answer was empty: stored)" 2 \
		"$(curl -sS "$F/api/0/profiles?service=fault&from=0&to=now" | jq '.body | length')"
else
	fail "setup: chfault.py and a collector behind it" "$(cat "$T/chfault.log"; head -5 "$T/serve-F.log" 2>/dev/null)"
fi

no_sanitizer "no sanitizer report" "$T"/serve-*.log
