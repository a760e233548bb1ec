#!/usr/bin/env bash
# shellcheck disable=SC2154 # CH_HTTP_s1 and the like: exported by ch_start
# test_clickhouse_cluster.sh — the ClickHouse store on a cluster (issue 13,
# `--store clickhouse://...?cluster=NAME[&insert_quorum=N]`), on Debian's
# ClickHouse 18.16 and ZooKeeper 3.8 started here on loopback ports
# (clickhouse.sh):
#   a. two shards (s1, s2; cluster "two", each shard one replica): two
#      `profd serve` (X on s1, Y on s2) create the tables ON CLUSTER
#      (ReplicatedReplacingMergeTree *_local + Distributed); real goapp CPU and
#      heap profiles uploaded through both land on both shards (rows per
#      shard's local table); list, label filter, get, merge (go tool pprof
#      -top), services, /api/1/labels, values, types and /api/1/top from X
#      and Y equal the embedded store's answers (--data-dir, the same
#      uploads); a DELETE through X is seen through Y; the store
#      conformance suite (tests/unit/test_store.c) on the two shards
#   b. replication (r1, r2: one shard, two replicas; cluster "rep"):
#      Q writes through r1 with insert_quorum=2, N through r2 without; r1 is
#      stopped during Q's ingest: every upload Q acknowledged is listed and
#      fetched through N (r2), the ones after the stop are 503; uploads to N
#      meanwhile are 200; r1 restarted catches up (its profiles_local has
#      them); with r2 stopped, Q's uploads are 503 (quorum 2 not reachable),
#      never a false 200
# Skipped with one visible line where clickhouse-server or zookeeper are
# not installed (make deps).
# Run: BUILD=build bash tests/e2e/test_clickhouse_cluster.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=clickhouse.sh
source "$(dirname "$0")/clickhouse.sh"

ch_require "ClickHouse store on a cluster"
if ! zk_available; then
	echo "ok - ClickHouse store on a cluster # SKIP zookeeper not installed (make deps)"
	exit 0
fi
need_built 0 "make test" "$PROFD" "$GOAPP"
need_cmds 0 curl jq
kill_started_on_exit

# the profiles: 2 CPU (1 s) and 2 heap captures of goapp, taken while the
# servers start
start_goapp g mixed
G=http://127.0.0.1:$PORT_g/debug/pprof
mkdir -p "$T/p"
(
	for i in 1 2; do
		curl -sS --max-time 20 -o "$T/p/cpu$i.pb.gz" "$G/profile?seconds=1" &
		curl -sS --max-time 20 -o "$T/p/heap$i.pb.gz" "$G/heap"
		wait
	done
) &
CAP=$!

if ! zk_start; then
	fail "setup: ZooKeeper" "did not start"
	exit 0
fi
ok=1
ch_start s1 --shard 01 --replica a --zk "$ZK_PORT" --cluster "two=s1;s2" || ok=''
ch_start s2 --shard 02 --replica a --zk "$ZK_PORT" --cluster "two=s1;s2" || ok=''
ch_start r1 --shard 01 --replica r1 --zk "$ZK_PORT" --cluster "rep=r1,r2" || ok=''
ch_start r2 --shard 01 --replica r2 --zk "$ZK_PORT" --cluster "rep=r1,r2" || ok=''
if [ -n "$ok" ]; then ok "setup: ZooKeeper, shards s1 and s2, replicas r1 and r2"; else
	fail "setup: clickhouse-server x4" "did not start"
	exit 0
fi
ch_q s1 "CREATE DATABASE profd ON CLUSTER two" >/dev/null 2>"$T/.e" || fail "setup: CREATE DATABASE ON CLUSTER two" "$(head -c 300 "$T/.e")"
ch_q r1 "CREATE DATABASE profd ON CLUSTER rep" >/dev/null 2>"$T/.e" || fail "setup: CREATE DATABASE ON CLUSTER rep" "$(head -c 300 "$T/.e")"

# serve NAME ARGS...: profd serve; sets PORT_NAME, PID_NAME
serve() {
	local name=$1 pid port
	shift
	"$PROFD" serve --addr 127.0.0.1:0 --retention 0 "$@" >"$T/serve-$name.log" 2>&1 &
	pid=$!
	port=$(serve_port "$T/serve-$name.log" "$pid")
	printf -v "PORT_$name" %s "$port"
	printf -v "PID_$name" %s "$pid"
	[ -n "$port" ]
}
S1="clickhouse://127.0.0.1:$CH_HTTP_s1/profd?cluster=two"
S2="clickhouse://127.0.0.1:$CH_HTTP_s2/profd?cluster=two"
if serve X --store "$S1" --rollup-interval 1s && serve Y --store "$S2" --rollup-interval 1s &&
	serve E --data-dir "$T/emb" --rollup-interval 1s; then
	ok "setup: collectors X (s1), Y (s2) with ?cluster=two, E on the embedded store"
else
	fail "setup: collectors" "$(cat "$T"/serve-*.log | head -10)"
	exit 0
fi
X=http://127.0.0.1:$PORT_X Y=http://127.0.0.1:$PORT_Y E=http://127.0.0.1:$PORT_E
expect "a: the tables: *_local replicated, the others Distributed, on both shards" \
	"Distributed Distributed Distributed Distributed Distributed ReplicatedMergeTree ReplicatedReplacingMergeTree ReplicatedReplacingMergeTree ReplicatedReplacingMergeTree ReplicatedReplacingMergeTree" \
	"$(ch_q s2 "SELECT engine FROM system.tables WHERE database = 'profd' ORDER BY engine" | paste -sd' ')"

# ---- a. two shards ---------------------------------------------------------------------
wait "$CAP"
n=0 bad=0
for f in "$T"/p/*.pb.gz; do
	b=$(basename "$f" .pb.gz)
	t=${b%%[0-9]*}
	for pod in p1 p2 p3 p4; do
		n=$((n + 1))
		if [ $((n % 2)) = 0 ]; then C=$X; else C=$Y; fi
		q="service=goapp&type=$t&labels=pod=$pod,file=$b"
		c1=$(curl -sS -o /dev/null -w '%{http_code}' --data-binary "@$f" "$C/api/0/profiles?$q")
		c2=$(curl -sS -o /dev/null -w '%{http_code}' --data-binary "@$f" "$E/api/0/profiles?$q")
		[ "$c1$c2" = 200200 ] || bad=$((bad + 1))
	done
done
# and each CPU file once more two hours ago, in an hour that is over: rolled up
past=$(date -u -d '-2 hours' +%Y-%m-%dT%H:20:00Z)
for f in "$T"/p/cpu*.pb.gz; do
	b=$(basename "$f" .pb.gz)
	q="service=goapp&type=cpu&labels=pod=p9,file=$b&created_at=$past"
	c1=$(curl -sS -o /dev/null -w '%{http_code}' --data-binary "@$f" "$X/api/0/profiles?$q")
	c2=$(curl -sS -o /dev/null -w '%{http_code}' --data-binary "@$f" "$E/api/0/profiles?$q")
	[ "$c1$c2" = 200200 ] || bad=$((bad + 1))
done
expect "a: $n uploads through X and Y (alternately) and E, and 2 of two hours ago: all 200" 0 "$bad"
c1=$(ch_q s1 "SELECT count() FROM profd.profiles_local")
c2=$(ch_q s2 "SELECT count() FROM profd.profiles_local")
if [ "$c1" -gt 0 ] && [ "$c2" -gt 0 ] && [ $((c1 + c2)) = "$((n + 2))" ]; then
	ok "a: the profiles are spread over both shards ($c1 + $c2 rows in profiles_local)"
else
	fail "a: profiles on both shards" "s1 $c1, s2 $c2 of $n"
fi
y1=$(ch_q s1 "SELECT count() FROM profd.symbols_local")
y2=$(ch_q s2 "SELECT count() FROM profd.symbols_local")
if [ "$y1" -gt 0 ] && [ "$y2" -gt 0 ]; then ok "a: symbols on both shards ($y1 + $y2 rows)"; else fail "a: symbols on both shards" "$y1 $y2"; fi

# list: the same profiles (all but the ids and block sizes) from X, Y and E
meta() { jq -c '[.body[] | {service, type, created_at, labels}] | sort_by(.labels | tostring)'; }
for t in cpu heap; do
	curl -sS "$E/api/0/profiles?service=goapp&type=$t&from=0&to=now" | meta >"$T/list-E-$t"
	for c in X Y; do
		u=$([ $c = X ] && echo "$X" || echo "$Y")
		curl -sS "$u/api/0/profiles?service=goapp&type=$t&from=0&to=now" | meta >"$T/list-$c-$t"
	done
	want=8
	[ $t = cpu ] && want=10
	if [ "$(jq length "$T/list-E-$t")" = "$want" ] && cmp -s "$T/list-E-$t" "$T/list-X-$t" && cmp -s "$T/list-E-$t" "$T/list-Y-$t"; then
		ok "a: list $t: X and Y list what the embedded store lists ($want profiles)"
	else
		fail "a: list $t equal to the embedded store's" "$(diff "$T/list-E-$t" "$T/list-X-$t" | head -5)"
	fi
done
lq="service=goapp&type=cpu&labels=pod=p3&from=0&to=now"
expect "a: label filter (pod=p3): X = Y = E" "$(curl -sS "$E/api/0/profiles?$lq" | meta)|$(curl -sS "$E/api/0/profiles?$lq" | meta)" \
	"$(curl -sS "$X/api/0/profiles?$lq" | meta)|$(curl -sS "$Y/api/0/profiles?$lq" | meta)"
expect "a: services: X = Y = E" "$(curl -sS "$E/api/0/services" | jq -c .body)$(curl -sS "$E/api/0/services" | jq -c .body)" \
	"$(curl -sS "$X/api/0/services" | jq -c .body)$(curl -sS "$Y/api/0/services" | jq -c .body)"

# API v1 labels and values
for c in X Y E; do
	u=$(eval echo "\$$c")
	{
		curl -sS "$u/api/1/labels?query=cpu%7B%7D&from=now-1h&to=now" | jq -c .body
		curl -sS "$u/api/1/labels/pod/values?query=heap%7B%7D&from=now-1h&to=now" | jq -c .body
		curl -sS "$u/api/1/types?query=%7Bservice%3D%22goapp%22%7D&from=now-1h&to=now" | jq -c .body
	} >"$T/labels-$c"
done
if grep -q '"pod"' "$T/labels-E" && cmp -s "$T/labels-E" "$T/labels-X" && cmp -s "$T/labels-E" "$T/labels-Y"; then
	ok "a: /api/1/labels, labels/pod/values and types: X = Y = E ($(paste -sd' ' "$T/labels-E" | head -c 150))"
else
	fail "a: /api/1/labels equal to E's" "$(paste -sd' ' "$T/labels-X" | head -c 200) vs $(paste -sd' ' "$T/labels-E" | head -c 200)"
fi

# get: every profile through Y reads like E's of the same file and pod
topn() { go_pprof -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$@" | tail -n +2; }
bad=0 got=0
while read -r id file pod; do
	eid=$(curl -sS "$E/api/0/profiles?service=goapp&labels=file=$file,pod=$pod&from=0&to=now" | jq -r '.body[0].id')
	curl -sS -o "$T/g-y.pb.gz" "$Y/api/0/profiles/$id"
	curl -sS -o "$T/g-e.pb.gz" "$E/api/0/profiles/$eid"
	topn "$T/g-y.pb.gz" >"$T/g-y.top"
	topn "$T/g-e.pb.gz" >"$T/g-e.top"
	got=$((got + 1))
	[ -s "$T/g-y.top" ] && cmp -s "$T/g-y.top" "$T/g-e.top" || bad=$((bad + 1))
done < <(curl -sS "$Y/api/0/profiles?service=goapp&from=0&to=now" | jq -r '.body[] | (.labels | from_entries) as $l | "\(.id) \($l.file) \($l.pod)"')
expect "a: get: each of the $((n + 2)) profiles through Y equals E's in go tool pprof -top" "$((n + 2)) 0" "$got $bad"

# merge: -top of X's, Y's and E's merges equal
for t in cpu heap; do
	for c in X Y E; do
		u=$(eval echo "\$$c")
		curl -sS -o "$T/m-$c-$t.pb.gz" "$u/api/0/profiles/merge?service=goapp&type=$t&from=0&to=now"
		topn "$T/m-$c-$t.pb.gz" >"$T/m-$c-$t.top"
	done
	if [ -s "$T/m-E-$t.top" ] && cmp -s "$T/m-E-$t.top" "$T/m-X-$t.top" && cmp -s "$T/m-E-$t.top" "$T/m-Y-$t.top"; then
		ok "a: merge $t: go tool pprof -top of X's and Y's merges equal E's ($(wc -l <"$T/m-E-$t.top") lines)"
	else
		fail "a: merge $t equal to E's" "$(diff "$T/m-E-$t.top" "$T/m-X-$t.top" | head -6)"
	fi
done
# /api/1/top over the fleet: the last hour; the last three hours, once the
# rollup passes (X, Y and E: --rollup-interval 1s) built the hour that is over
for c in X Y E; do
	u=$(eval echo "\$$c")
	curl -sS "$u/api/1/top?query=cpu%7B%7D&from=now-1h&to=now&n=1000" | jq -c '.body | {total, rows}' >"$T/top-$c"
done
if [ "$(jq '.rows | length' "$T/top-E")" -gt 5 ] && cmp -s "$T/top-E" "$T/top-X" && cmp -s "$T/top-E" "$T/top-Y"; then
	ok "a: /api/1/top: X and Y answer what E answers ($(jq '.rows | length' "$T/top-E") rows)"
else
	fail "a: /api/1/top equal to E's" "$(head -c 300 "$T/top-X") vs $(head -c 300 "$T/top-E")"
fi
T3="query=cpu%7B%7D&from=now-3h&to=now&n=1000"
for _ in $(seq 1 100); do
	grep -q 'component=rollup msg="built' "$T/serve-E.log" &&
		[ "$(curl -sS "$X/api/1/top?$T3" | jq -r .body.rollups)" = true ] && break
	sleep 0.1
done
for c in X Y E; do
	u=$(eval echo "\$$c")
	curl -sS "$u/api/1/top?$T3" >"$T/top3-$c.json"
	jq -c '.body | {total, rows}' "$T/top3-$c.json" >"$T/top3-$c"
done
if [ "$(jq -r '.body.rollups' "$T/top3-X.json")" = true ] && cmp -s "$T/top3-E" "$T/top3-X" && cmp -s "$T/top3-E" "$T/top3-Y"; then
	ok "a: /api/1/top over 3 h from ClickHouse's rollups (rollups: true): X and Y answer what E answers ($(jq '.rows | length' "$T/top3-E") rows)"
else
	fail "a: /api/1/top over 3 h with rollups equal to E's" "$(jq -c '.body | {rollups, total}' "$T/top3-X.json") vs $(jq -c '.body | {rollups, total}' "$T/top3-E.json")"
fi
# delete through X: gone through Y
did=$(curl -sS "$Y/api/0/profiles?service=goapp&type=heap&labels=pod=p4,file=heap1&from=0&to=now" | jq -r '.body[0].id')
expect "a: DELETE through X" 200 "$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$X/api/0/profiles/$did")"
expect "a: ... gone through Y" 404 "$(curl -sS -o /dev/null -w '%{http_code}' "$Y/api/0/profiles/$did")"
expect "a: ... and from Y's list" 7 "$(curl -sS "$Y/api/0/profiles?service=goapp&type=heap&from=0&to=now" | jq '.body | length')"

# the store conformance suite on the two shards (each test in its own
# database ON CLUSTER), in the background while b runs on the other servers
CONF=''
if [ -x "$ROOT/$BUILD/tests/test_store" ]; then
	PD_TEST_STORE=clickhouse://127.0.0.1:$CH_HTTP_s1 PD_TEST_CH_CLUSTER=two "$ROOT/$BUILD/tests/test_store" >"$T/conf.log" 2>&1 &
	CONF=$!
fi

# ---- b. replication ------------------------------------------------------------------------
R1="clickhouse://127.0.0.1:$CH_HTTP_r1/profd?cluster=rep"
R2="clickhouse://127.0.0.1:$CH_HTTP_r2/profd?cluster=rep"
if serve Q --store "$R1&insert_quorum=2" && serve N --store "$R2"; then
	ok "setup: collector Q on r1 (?cluster=rep&insert_quorum=2), N on r2"
else
	fail "setup: collectors Q and N" "$(tail -5 "$T/serve-Q.log" "$T/serve-N.log")"
	exit 0
fi
Q=http://127.0.0.1:$PORT_Q N=http://127.0.0.1:$PORT_N
# Q's uploads in the background; r1 stopped after the 10th; 5 more started
# after the stop (at most 200 in all)
(
	after=0
	for i in $(seq 1 200); do
		f=$T/p/heap$(((i % 2) + 1)).pb.gz
		late=0
		[ -e "$T/r1-stopped" ] && late=1 after=$((after + 1))
		code=$(curl -sS -o "$T/q.json" -w '%{http_code}' --max-time 30 --data-binary "@$f" "$Q/api/0/profiles?service=rep&type=heap&labels=n=$i")
		echo "$i $code $late $(jq -r '.body.id // empty' "$T/q.json" 2>/dev/null)" >>"$T/q-acks"
		[ "$i" = 10 ] && touch "$T/q-10"
		[ "$after" -ge 5 ] && break
	done
) &
QL=$!
for _ in $(seq 1 200); do [ -e "$T/q-10" ] && break; sleep 0.05; done
ch_stop r1
touch "$T/r1-stopped"
wait "$QL"
acked=$(awk '$2 == 200 {print $4}' "$T/q-acks")
nack=$(echo "$acked" | grep -c .)
expect "b: r1 stopped during Q's uploads: the 10 before acknowledged, the 5 started after it 503" "10 5" \
	"$(awk '$1 <= 10 && $2 == 200' "$T/q-acks" | wc -l) $(awk '$3 == 1 && $2 == 503' "$T/q-acks" | wc -l)"
listed=$(curl -sS "$N/api/0/profiles?service=rep&type=heap&from=0&to=now" | jq -r '.body[].id')
missing=0
for id in $acked; do
	grep -qx "$id" <<<"$listed" || missing=$((missing + 1))
	[ "$(curl -sS -o /dev/null -w '%{http_code}' "$N/api/0/profiles/$id")" = 200 ] || missing=$((missing + 1))
done
expect "b: all $nack uploads Q acknowledged are listed and fetched through N (r2)" 0 "$missing"
# r1 down: N (no quorum) still takes uploads
bad=0
for i in 1 2 3 4 5; do
	[ "$(curl -sS -o /dev/null -w '%{http_code}' --data-binary "@$T/p/cpu1.pb.gz" "$N/api/0/profiles?service=late&type=cpu&labels=n=$i")" = 200 ] || bad=$((bad + 1))
done
expect "b: r1 down: 5 uploads to N (without quorum) are 200" 0 "$bad"
want=$(ch_q r2 "SELECT count() FROM profd.profiles_local")
ch_restart r1 || fail "b: r1 restarts" "see $T/ch-r1/log"
got=''
for _ in $(seq 1 100); do
	got=$(ch_q r1 "SELECT count() FROM profd.profiles_local" 2>/dev/null)
	[ "$got" = "$want" ] && break
	sleep 0.2
done
expect "b: r1 restarted catches up: its profiles_local has r2's $want rows" "$want" "$got"
# quorum 2 with r2 stopped: 503, and nothing acknowledged
ch_stop r2
codes=''
for i in 1 2 3; do
	codes="$codes$(curl -sS -o "$T/qd.json" -w '%{http_code}' --max-time 30 --data-binary "@$T/p/cpu2.pb.gz" "$Q/api/0/profiles?service=quorum&type=cpu&labels=n=$i") "
done
if [ "$codes" = "503 503 503 " ]; then
	ok "b: r2 down, insert_quorum=2: Q's uploads are 503 ($(jq -r .error "$T/qd.json" | head -c 150))"
else
	fail "b: r2 down, insert_quorum=2: uploads 503" "$codes $(head -c 300 "$T/qd.json")"
fi
expect "b: ... and none is listed" 0 "$(curl -sS "$Q/api/0/profiles?service=quorum&type=cpu&from=0&to=now" | jq '.body | length')"
if [ -n "$CONF" ]; then
	if wait "$CONF" && grep -q "^\[  PASSED  \] 18 test(s)" "$T/conf.log"; then
		ok "a: conformance: the 18 backend-independent tests of the store suite pass on the two shards"
	else
		fail "a: conformance suite on the two shards" "$(grep -E 'FAILED|ERROR|LINE|ClickHouse' "$T/conf.log" | head -10)"
	fi
fi
no_sanitizer "no sanitizer report" "$T"/serve-*.log
