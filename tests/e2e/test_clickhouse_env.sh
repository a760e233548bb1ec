#!/usr/bin/env bash
# shellcheck disable=SC2154 # CH_HTTP_one and the like: exported by ch_start
# test_clickhouse_env.sh — the ClickHouse the store backend will run on
# (issue 13): Debian 12's clickhouse-server (18.16.1) and zookeeper (3.8),
# started by the test on loopback ports (tests/e2e/clickhouse.sh), each SQL
# feature the backend relies on checked for real:
#   a. one server: CREATE DATABASE; a ReplacingMergeTree PARTITION BY day
#      ORDER BY (kind, h FixedString(16)); INSERT ... FORMAT RowBinary over
#      HTTP (a body from python3's struct: arbitrary FixedString bytes,
#      Strings with NUL and high bytes, Array(String), negative Int64s)
#      read back byte for byte; duplicates: SELECT ... FINAL, then OPTIMIZE
#      ... FINAL; DROP PARTITION removes exactly that day; WHERE h IN 20,000
#      hashes (the query-size and AST limits, and the external-table form);
#      settings as URL parameters; what 18.16 refuses (docs/scale-out.md)
#   b. two shards: remote_servers, local tables + Distributed(...,
#      cityHash64(id)) on each server; inserts through either server spread
#      over both shards by the key, reads through either see every row,
#      FINAL through Distributed collapses duplicates
#   c. replication (ZooKeeper): ReplicatedMergeTree on two replicas of one
#      shard; insert_quorum=2 while both are up, a retried insert is
#      deduplicated; with one replica stopped an insert without quorum works
#      and one with insert_quorum=2 fails; the replica catches up on restart
# Skipped with a visible reason where clickhouse-server / zookeeper are not
# installed (make deps installs both).
# Run: BUILD=build bash tests/e2e/test_clickhouse_env.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=clickhouse.sh
source "$(dirname "$0")/clickhouse.sh"
kill_started_on_exit
ch_require "clickhouse: environment checks"
need_cmds 0 curl python3 jq
T0=$SECONDS

# qcheck NAME WANT SERVER SQL [PARAMS]: the answer of SQL must be WANT
qcheck() {
	local got
	if got=$(ch_q "$3" "$4" "${5:-}" 2>"$T/.qerr"); then
		expect "$1" "$2" "$got"
	else
		fail "$1" "$(head -c 400 "$T/.qerr")"
	fi
}

# qerr NAME REGEX SERVER SQL [PARAMS]: SQL must fail with an error matching
# REGEX; sets QERR to the error's first line
qerr() {
	QERR=''
	if ch_q "$3" "$4" "${5:-}" >"$T/.qout" 2>"$T/.qerr"; then
		fail "$1" "succeeded: $(head -c 200 "$T/.qout")"
		return 1
	fi
	QERR=$(head -1 "$T/.qerr" | sed 's/, e.what() = DB::Exception$//')
	if grep -Eq -- "$2" "$T/.qerr"; then ok "$1 ($QERR)"; else fail "$1" "error does not match /$2/: $QERR"; fi
}

# qok NAME SERVER SQL [PARAMS]: SQL must succeed
qok() {
	if ch_q "$2" "$3" "${4:-}" >"$T/.qout" 2>"$T/.qerr"; then ok "$1"; else fail "$1" "$(head -c 400 "$T/.qerr")"; fi
}

# poll_q WANT SECS SERVER SQL: the answer of SQL, polled until it is WANT
# (or SECS pass)
poll_q() {
	local want=$1 secs=$2 got='' i
	for ((i = 0; i < secs * 5; i++)); do
		got=$(ch_q "$3" "$4" 2>/dev/null)
		[ "$got" = "$want" ] && break
		sleep 0.2
	done
	echo "$got"
}

ms() { echo $(($(date +%s%N) / 1000000)); }

# ---------------------------------------------------------------- a. one server
t=$(ms)
if ! ch_start one; then
	fail "a: clickhouse-server starts and answers SELECT 1" "see above"
	exit 0
fi
VERSION=$(ch_q one "SELECT version()")
ok "a: clickhouse-server $VERSION starts and answers SELECT 1 ($(($(ms) - t)) ms)"
V18=''
[[ $VERSION == 18.16.* ]] && V18=1

qok "a: CREATE DATABASE" one "CREATE DATABASE profd"
qok "a: ReplacingMergeTree PARTITION BY day ORDER BY (kind, h FixedString(16))" one \
	"CREATE TABLE profd.t (day Date, kind UInt8, h FixedString(16), s String, a Array(String), n Int64)
	 ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY (kind, h)"

# rows.bin: the RowBinary body; expect.bin: what SELECT ... ORDER BY day,
# kind, h FORMAT RowBinary must give; days: rows per day; in_*: 20,000
# hashes (in.txt: how many of them are in the table after 2026-12-01 is
# dropped) as an unhex() list, a string-literal list and RowBinary
python3 - "$T" <<'EOF'
import datetime, random, struct, sys
out = sys.argv[1]
rnd = random.Random(13)
def varint(n):
    b = b""
    while True:
        c = n & 0x7F
        n >>= 7
        if n:
            b += bytes([c | 0x80])
        else:
            return b + bytes([c])
def string(s):
    return varint(len(s)) + s
epoch = datetime.date(1970, 1, 1)
days = [datetime.date(2026, 11, 30), datetime.date(2026, 12, 1), datetime.date(2026, 12, 2)]
special_h = [bytes(16), b"\xff" * 16, b"\x00" * 15 + b"\x01", b"\x01" + b"\x00" * 15, b"\x80" * 16]
special_s = [b"", b"a\x00b", bytes(range(256)), b"\xff\xfe\x80\x00", b"x" * 1000, b"\x00"]
special_a = [[], [b""], [b"\x00", b"\xff" * 200], [b"k%d" % i for i in range(130)], [bytes(range(256))]]
special_n = [-1, -2**63, 2**63 - 1, 0, -1234567890123]
rows, seen = [], set()
for i in range(600):
    day = days[i % 3]
    kind = i % 4
    h = special_h[i] if i < len(special_h) else bytes(rnd.getrandbits(8) for _ in range(16))
    if h in seen:
        continue
    seen.add(h)
    s = special_s[i % len(special_s)] if i % 2 == 0 else bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(40)))
    a = special_a[i % len(special_a)]
    n = special_n[i] if i < len(special_n) else -rnd.getrandbits(62)
    rows.append((day, kind, h, s, a, n))
def enc(r):
    day, kind, h, s, a, n = r
    b = struct.pack("<HB", (day - epoch).days, kind) + h + string(s)
    b += varint(len(a)) + b"".join(string(x) for x in a)
    return b + struct.pack("<q", n)
with open(out + "/rows.bin", "wb") as f:
    for r in rows:
        f.write(enc(r))
with open(out + "/expect.bin", "wb") as f:
    for r in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
        f.write(enc(r))
with open(out + "/days", "w") as f:
    for d in days:
        f.write("%s\t%d\n" % (d, sum(1 for r in rows if r[0] == d)))
with open(out + "/nrows", "w") as f:
    f.write("%d\n" % len(rows))
kept = [r[2] for r in rows if r[0] != days[1]]
hs = rnd.sample(kept, 50) + [bytes(rnd.getrandbits(8) for _ in range(16)) for _ in range(19950)]
rnd.shuffle(hs)
with open(out + "/in.txt", "w") as f:
    f.write("%d\n" % len(set(hs) & seen))
q = "SELECT count() FROM profd.t WHERE h IN ("
with open(out + "/in_unhex.sql", "w") as f:
    f.write(q + ",".join("unhex('%s')" % h.hex() for h in hs) + ")")
with open(out + "/in_str.sql", "w") as f:
    f.write(q + ",".join("'%s'" % "".join("\\x%02x" % c for c in h) for h in hs) + ")")
with open(out + "/in.bin", "wb") as f:
    f.write(b"".join(hs))
EOF
N=$(cat "$T/nrows")
COLS="day, kind, h, s, a, n"
if ch_post one "INSERT INTO profd.t FORMAT RowBinary" "$T/rows.bin" >"$T/.qout" 2>"$T/.qerr"; then
	ok "a: INSERT ... FORMAT RowBinary over HTTP ($N rows, $(wc -c <"$T/rows.bin") bytes)"
else
	fail "a: INSERT ... FORMAT RowBinary over HTTP" "$(head -c 400 "$T/.qerr")"
fi
qcheck "a: count() after the insert" "$N" one "SELECT count() FROM profd.t"
ch_q one "SELECT $COLS FROM profd.t ORDER BY day, kind, h FORMAT RowBinary" >"$T/got.bin" 2>"$T/.qerr"
same_output "a: FORMAT RowBinary reads back the same bytes (FixedString, NUL and high bytes, arrays, negative Int64)" \
	"$T/expect.bin" "$T/got.bin"

ch_post one "INSERT INTO profd.t FORMAT RowBinary" "$T/rows.bin" >/dev/null 2>"$T/.qerr"
qcheck "a: the same rows again: count() has both copies" "$((2 * N))" one "SELECT count() FROM profd.t"
qcheck "a: SELECT count() ... FINAL collapses the duplicates" "$N" one "SELECT count() FROM profd.t FINAL"
ch_q one "SELECT $COLS FROM profd.t FINAL ORDER BY day, kind, h FORMAT RowBinary" >"$T/got.bin" 2>"$T/.qerr"
same_output "a: SELECT ... FINAL FORMAT RowBinary gives each row once, same bytes" "$T/expect.bin" "$T/got.bin"
qok "a: OPTIMIZE TABLE ... PARTITION '2026-11-30' FINAL" one "OPTIMIZE TABLE profd.t PARTITION '2026-11-30' FINAL"
qcheck "a: ... merged that day only" "$((2 * N - $(awk '$1=="2026-11-30"{print $2}' "$T/days")))" one \
	"SELECT count() FROM profd.t"
qok "a: OPTIMIZE TABLE ... FINAL" one "OPTIMIZE TABLE profd.t FINAL"
qcheck "a: ... duplicates gone without FINAL (every day merged)" "$N" one "SELECT count() FROM profd.t"
qcheck "a: ... one active part per day" "3 3" one \
	"SELECT concat(toString(count()), ' ', toString(uniqExact(partition))) FROM system.parts WHERE database = 'profd' AND table = 't' AND active"
ch_q one "SELECT $COLS FROM profd.t ORDER BY day, kind, h FORMAT RowBinary" >"$T/got.bin" 2>"$T/.qerr"
same_output "a: after OPTIMIZE the same bytes" "$T/expect.bin" "$T/got.bin"

qok "a: ALTER TABLE ... DROP PARTITION '2026-12-01'" one "ALTER TABLE profd.t DROP PARTITION '2026-12-01'"
want=$(awk '$1!="2026-12-01"' "$T/days")
got=$(ch_q one "SELECT day, count() FROM profd.t GROUP BY day ORDER BY day")
expect "a: ... removed exactly that day" "$want" "$got"
qok "a: DROP PARTITION of a day that has no data is not an error" one "ALTER TABLE profd.t DROP PARTITION '2026-12-09'"

# WHERE h IN 20,000 hashes
WANT_IN=$(cat "$T/in.txt")
QSIZE=$(wc -c <"$T/in_unhex.sql")
if ch_qf one "$T/in_unhex.sql" >"$T/.qout" 2>"$T/.qerr"; then
	fail "a: IN (20,000 × unhex) refused with the default max_query_size" "it was accepted"
else
	e=$(head -1 "$T/.qerr")
	if grep -q "Max query size exceeded" "$T/.qerr"; then
		ok "a: IN (20,000 × unhex), $QSIZE bytes: refused with the default max_query_size (262144): Max query size exceeded"
	else
		fail "a: IN (20,000 × unhex) refused with the default max_query_size" "$e"
	fi
fi
if ch_qf one "$T/in_unhex.sql" "max_query_size=2000000" >"$T/.qout" 2>"$T/.qerr"; then
	fail "a: ... ?max_query_size=2000000 alone" "accepted: the AST limit is not 50000 any more? $(cat "$T/.qout")"
elif grep -q "AST is too big" "$T/.qerr"; then
	ok "a: ... ?max_query_size=2000000 alone: $(head -1 "$T/.qerr" | grep -o 'AST is too big. Maximum: [0-9]*') (3 AST elements per unhex())"
else
	fail "a: ... ?max_query_size=2000000 alone" "$(head -1 "$T/.qerr")"
fi
t=$(ms)
got=$(ch_qf one "$T/in_unhex.sql" "max_query_size=2000000&max_ast_elements=200000" 2>&1)
expect "a: ... ?max_query_size=2000000&max_ast_elements=200000: the right count ($(($(ms) - t)) ms)" "$WANT_IN" "$got"
t=$(ms)
got=$(ch_qf one "$T/in_str.sql" "max_query_size=2000000" 2>&1)
expect "a: IN (20,000 '\\x..' string literals), $(wc -c <"$T/in_str.sql") bytes, ?max_query_size=2000000: the right count ($(($(ms) - t)) ms)" \
	"$WANT_IN" "$got"
t=$(ms)
got=$(ch_q_ext one "SELECT count() FROM profd.t WHERE h IN hs" hs "h FixedString(16)" "$T/in.bin" 2>&1)
expect "a: IN an external table of 20,000 hashes (multipart RowBinary, default limits): the right count ($(($(ms) - t)) ms)" \
	"$WANT_IN" "$got"

# an error after the first MBs of the answer: a 200 with the error at the
# end of the body, unless ?wait_end_of_query=1 (which ch_q always sets)
LATE="SELECT toString(number), throwIf(number = 400000) FROM numbers(500000)"
code=$(curl -s -o "$T/late" -w '%{http_code}' --data-binary "$LATE" "http://127.0.0.1:$CH_HTTP_one/?max_block_size=10000")
if [ "$code" = 200 ] && tail -c 200 "$T/late" | grep -q "Code: 395"; then
	ok "a: an error after $(wc -c <"$T/late") bytes of the answer: HTTP 200, the error at the end of the body"
else
	fail "a: a late error without wait_end_of_query" "HTTP $code, body ends: $(tail -c 120 "$T/late")"
fi
code=$(curl -s -o "$T/late" -w '%{http_code}' --data-binary "$LATE" "http://127.0.0.1:$CH_HTTP_one/?max_block_size=10000&wait_end_of_query=1")
expect "a: ... with ?wait_end_of_query=1: HTTP 500 and only the error" "500 Code: 395" "$code $(head -c 9 "$T/late")"

# settings as URL parameters
qerr "a: settings as URL parameters take effect (?max_result_rows=1&result_overflow_mode=throw)" \
	"Limit for result exceeded" one "SELECT number FROM system.numbers LIMIT 5" "max_result_rows=1&result_overflow_mode=throw"
qerr "a: an unknown setting in the URL is refused" "Unknown setting nosuchsetting" one "SELECT 1" "nosuchsetting=1"
qcheck "a: ?insert_quorum=2 is a known setting (no-op on a non-replicated table)" "" one \
	"INSERT INTO profd.t SELECT toDate('2026-12-03'), 9, unhex('00'), '', [], 0" "insert_quorum=2"
qcheck "a: ?max_query_size=... in system.settings" "1000000" one \
	"SELECT value FROM system.settings WHERE name = 'max_query_size'" "max_query_size=1000000"
qcheck "a: sumMap, cityHash64, UNION ALL (SQL the backend uses)" "([1,2],[4,1])	2	1" one \
	"SELECT sumMap(k, v), count(), uniqExact(cityHash64(x)) FROM (SELECT [1, 2] AS k, [2, 1] AS v, 'x' AS x UNION ALL SELECT [1], [2], 'x') FORMAT TSV"

# what 18.16 refuses (docs/scale-out.md); on another version these only say so
if [ -n "$V18" ]; then
	qerr "a: 18.16 has no TTL" "Syntax error.*TTL" one \
		"CREATE TABLE profd.ttl (d Date, x UInt8) ENGINE = MergeTree PARTITION BY d ORDER BY x TTL d + INTERVAL 1 DAY"
	qerr "a: 18.16 has no column codecs" "Syntax error.*CODEC" one \
		"CREATE TABLE profd.codec (d Date, x UInt8 CODEC(ZSTD)) ENGINE = MergeTree PARTITION BY d ORDER BY x"
	qerr "a: 18.16: LowCardinality only behind allow_experimental_low_cardinality_type" \
		"allow_experimental_low_cardinality_type" one \
		"CREATE TABLE profd.lc (d Date, x LowCardinality(String)) ENGINE = MergeTree PARTITION BY d ORDER BY x"
	qok "a: ... with ?allow_experimental_low_cardinality_type=1 it is accepted" one \
		"CREATE TABLE profd.lc (d Date, x LowCardinality(String)) ENGINE = MergeTree PARTITION BY d ORDER BY x" \
		"allow_experimental_low_cardinality_type=1"
	qerr "a: 18.16 has no query parameters {x:T}" "Syntax error.*Unrecognized token" one "SELECT {x:UInt8}"
	qerr "a: ... nor param_x URL parameters" "Unknown setting param_x" one "SELECT 1" "param_x=1"
	qerr "a: 18.16 has no mutations_sync" "Unknown setting mutations_sync" one "SELECT 1" "mutations_sync=1"
	qerr "a: 18.16 has no SimpleAggregateFunction" "Unknown data type family: SimpleAggregateFunction" one \
		"CREATE TABLE profd.sa (d Date, s SimpleAggregateFunction(sum, UInt64)) ENGINE = AggregatingMergeTree PARTITION BY d ORDER BY d"
	qerr "a: 18.16 has no JSONExtract" "Unknown function JSONExtractString" one "SELECT JSONExtractString('{}', 'a')"
	qerr "a: 18.16 has no window functions" "Syntax error" one "SELECT sum(number) OVER () FROM numbers(2)"
	qerr "a: 18.16 has no RowBinaryWithNamesAndTypes" "Unknown format RowBinaryWithNamesAndTypes" one \
		"SELECT 1 FORMAT RowBinaryWithNamesAndTypes"
else
	ok "a: what 18.16 refuses # SKIP ClickHouse $VERSION is not 18.16"
fi
ch_stop one

# ---------------------------------------------------------------- b. two shards
t=$(ms)
ch_start s1 --cluster "two=s1;s2" && ch_start s2 --cluster "two=s1;s2"
if [ -z "${_CH_STARTED[s1]:-}" ] || [ -z "${_CH_STARTED[s2]:-}" ]; then
	fail "b: two servers start" "see above"
else
	ok "b: two servers start ($(($(ms) - t)) ms)"
	qcheck "b: remote_servers: cluster 'two' has two shards" "2" s1 \
		"SELECT uniqExact(shard_num) FROM system.clusters WHERE cluster = 'two'"
	for s in s1 s2; do
		if ch_q $s "CREATE DATABASE profd" >/dev/null 2>"$T/.qerr" &&
			ch_q $s "CREATE TABLE profd.l (day Date, id UInt64, v String) ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY id" >/dev/null 2>"$T/.qerr" &&
			ch_q $s "CREATE TABLE profd.d AS profd.l ENGINE = Distributed(two, profd, l, cityHash64(id))" >/dev/null 2>"$T/.qerr"; then
			ok "b: a local ReplacingMergeTree and a Distributed(two, profd, l, cityHash64(id)) on $s"
		else
			fail "b: a local ReplacingMergeTree and a Distributed table on $s" "$(head -c 400 "$T/.qerr")"
		fi
	done
	qok "b: INSERT through s1's Distributed (insert_distributed_sync=1)" s1 \
		"INSERT INTO profd.d SELECT toDate('2026-12-01'), number, toString(number) FROM numbers(1000)" "insert_distributed_sync=1"
	qok "b: INSERT through s2's Distributed (asynchronous, the default)" s2 \
		"INSERT INTO profd.d SELECT toDate('2026-12-02'), number + 1000, toString(number) FROM numbers(1000)"
	c1=$(poll_q 2000 10 s1 "SELECT count() FROM profd.d")
	expect "b: reads through s1's Distributed see all rows" 2000 "$c1"
	qcheck "b: reads through s2's Distributed see all rows" 2000 s2 "SELECT count() FROM profd.d"
	n1=$(ch_q s1 "SELECT count() FROM profd.l")
	n2=$(ch_q s2 "SELECT count() FROM profd.l")
	if [ "${n1:-0}" -gt 0 ] && [ "${n2:-0}" -gt 0 ] && [ $((n1 + n2)) -eq 2000 ]; then
		ok "b: the rows are spread over both shards ($n1 + $n2)"
	else
		fail "b: the rows are spread over both shards" "s1 has '$n1', s2 has '$n2'"
	fi
	qcheck "b: s1 (shard 1) holds exactly the ids with cityHash64(id) % 2 = 0" "0" s1 \
		"SELECT count() FROM profd.l WHERE cityHash64(id) % 2 != 0"
	qcheck "b: s2 (shard 2) holds exactly the ids with cityHash64(id) % 2 = 1" "0" s2 \
		"SELECT count() FROM profd.l WHERE cityHash64(id) % 2 != 1"
	qcheck "b: an aggregate through Distributed is the whole table's" "2000	1999000	2000" s2 \
		"SELECT count(), sum(id), uniqExact(id) FROM profd.d FORMAT TSV"
	# the same ids again through the other server: each goes to the shard it
	# went to before, so FINAL on each shard collapses them
	qok "b: the same ids again through the other server" s2 \
		"INSERT INTO profd.d SELECT toDate('2026-12-01'), number, toString(number) FROM numbers(1000)" "insert_distributed_sync=1"
	qcheck "b: ... count() through Distributed has the duplicates" 3000 s1 "SELECT count() FROM profd.d"
	qcheck "b: ... SELECT ... FINAL through Distributed collapses them (same key, same shard)" 2000 s1 \
		"SELECT count() FROM profd.d FINAL"
	qok "b: DROP PARTITION on each shard's local table" s1 "ALTER TABLE profd.l DROP PARTITION '2026-12-02'"
	ch_q s2 "ALTER TABLE profd.l DROP PARTITION '2026-12-02'" >/dev/null
	qcheck "b: ... gone through Distributed" "2026-12-01" s2 "SELECT DISTINCT day FROM profd.d"
fi
ch_stop s1
ch_stop s2

# ---------------------------------------------------------------- c. replication
if ! zk_available; then
	ok "c: replication with ZooKeeper # SKIP zookeeper not installed (make deps)"
	echo "# $((SECONDS - T0)) s"
	exit 0
fi
t=$(ms)
if ! zk_start; then
	fail "c: ZooKeeper starts and answers imok" "see above"
	exit 0
fi
ok "c: ZooKeeper starts and answers imok ($(($(ms) - t)) ms, port $ZK_PORT)"
t=$(ms)
ch_start r1 --shard 01 --replica r1 --zk "$ZK_PORT" --cluster "rep=r1,r2" &&
	ch_start r2 --shard 01 --replica r2 --zk "$ZK_PORT" --cluster "rep=r1,r2"
if [ -z "${_CH_STARTED[r1]:-}" ] || [ -z "${_CH_STARTED[r2]:-}" ]; then
	fail "c: two replicas start" "see above"
	exit 0
fi
ok "c: two replicas start ($(($(ms) - t)) ms)"
qcheck "c: macros" "01 r2" r2 "SELECT arrayStringConcat(groupArray(substitution), ' ') FROM (SELECT substitution FROM system.macros ORDER BY macro DESC)"
qcheck "c: ZooKeeper reachable from ClickHouse" "1" r1 "SELECT count() > 0 FROM system.zookeeper WHERE path = '/'"
if ch_q r1 "CREATE DATABASE profd ON CLUSTER rep" >"$T/.qout" 2>"$T/.qerr"; then
	ok "c: CREATE DATABASE ... ON CLUSTER (distributed DDL through ZooKeeper)"
else
	fail "c: CREATE DATABASE ... ON CLUSTER" "$(head -c 400 "$T/.qerr")"
	ch_q r1 "CREATE DATABASE IF NOT EXISTS profd" >/dev/null
	ch_q r2 "CREATE DATABASE IF NOT EXISTS profd" >/dev/null
fi
RT="CREATE TABLE profd.r (day Date, id UInt64, v String)
	ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/r', '{replica}') PARTITION BY day ORDER BY id"
qok "c: ReplicatedMergeTree('/clickhouse/tables/{shard}/r', '{replica}') on r1" r1 "$RT"
qok "c: ... and on r2" r2 "$RT"
qok "c: ReplicatedReplacingMergeTree ... ON CLUSTER" r1 \
	"CREATE TABLE profd.rr ON CLUSTER rep (day Date, id UInt64) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rr', '{replica}') PARTITION BY day ORDER BY id"
qcheck "c: ... created on r2 too" "1" r2 "EXISTS TABLE profd.rr"

python3 -c '
import struct, sys
sys.stdout.buffer.write(b"".join(struct.pack("<HQ", 20788, i) + bytes([5]) + b"r%04d" % i for i in range(100)))
' >"$T/r.bin"
if ch_post r1 "INSERT INTO profd.r FORMAT RowBinary" "$T/r.bin" "insert_quorum=2" >"$T/.qout" 2>"$T/.qerr"; then
	ok "c: INSERT on r1 with ?insert_quorum=2 while both replicas are up"
else
	fail "c: INSERT on r1 with ?insert_quorum=2 while both replicas are up" "$(head -c 400 "$T/.qerr")"
fi
qcheck "c: ... visible on r2 at once" 100 r2 "SELECT count() FROM profd.r"
ch_post r1 "INSERT INTO profd.r FORMAT RowBinary" "$T/r.bin" "insert_quorum=2" >/dev/null 2>"$T/.qerr"
qcheck "c: the same insert retried is deduplicated (same block)" 100 r1 "SELECT count() FROM profd.r"

t=$(ms)
ch_stop r2
ok "c: r2 stopped ($(($(ms) - t)) ms)"
qok "c: r2 down: INSERT on r1 without quorum succeeds" r1 \
	"INSERT INTO profd.r SELECT toDate('2026-12-01'), 1000 + number, 'b' FROM numbers(50)"
t=$(ms)
qerr "c: r2 down: INSERT on r1 with ?insert_quorum=2&insert_quorum_timeout=3000 fails" "alive replicas .* less than requested quorum" r1 \
	"INSERT INTO profd.r SELECT toDate('2026-12-01'), 2000 + number, 'c' FROM numbers(7)" \
	"insert_quorum=2&insert_quorum_timeout=3000"
echo "# ... after $(($(ms) - t)) ms"
c=$(ch_q r1 "SELECT count() FROM profd.r")
ok "c: ... r1 then has $c rows (100 + 50 without quorum$([ "$c" = 157 ] && echo " + the 7 of the failed quorum insert"))"
t=$(ms)
if ch_restart r2; then
	ok "c: r2 restarted on the same ports and data ($(($(ms) - t)) ms)"
else
	fail "c: r2 restarted" "see above"
fi
t=$(ms)
got=$(poll_q "$c" 30 r2 "SELECT count() FROM profd.r")
expect "c: r2 catches up ($(($(ms) - t)) ms)" "$c" "$got"
got=$(ch_q r2 "SELECT sum(id) FROM profd.r")
expect "c: ... the same rows as r1" "$(ch_q r1 "SELECT sum(id) FROM profd.r")" "$got"
t=$(ms)
ok=''
for ((i = 0; i < 20; i++)); do
	if ch_q r1 "INSERT INTO profd.r SELECT toDate('2026-12-02'), 3000 + number, 'd' FROM numbers(5)" \
		"insert_quorum=2&insert_quorum_timeout=5000" >/dev/null 2>"$T/.qerr"; then
		ok=1
		break
	fi
	sleep 0.5
done
if [ -n "$ok" ]; then
	ok "c: insert_quorum=2 works again once r2 is back ($(($(ms) - t)) ms)"
else
	fail "c: insert_quorum=2 works again once r2 is back" "$(head -1 "$T/.qerr")"
fi
# a replica that dies (SIGKILL) keeps its ZooKeeper session until the
# session timeout (CH_ZK_SESSION_TIMEOUT_MS, 6 s): a quorum insert then
# waits and times out, and the restarted replica waits for the old session
t=$(ms)
ch_kill r2
ok "c: r2 killed (SIGKILL, $(($(ms) - t)) ms)"
c0=$(ch_q r1 "SELECT count() FROM profd.r")
t=$(ms)
qerr "c: r2 killed: INSERT with ?insert_quorum=2&insert_quorum_timeout=2000 fails" "Timeout while waiting for quorum" r1 \
	"INSERT INTO profd.r SELECT toDate('2026-12-01'), 4000 + number, 'e' FROM numbers(3)" \
	"insert_quorum=2&insert_quorum_timeout=2000"
echo "# ... after $(($(ms) - t)) ms"
c=$(ch_q r1 "SELECT count() FROM profd.r")
ok "c: ... r1 then has $c rows, $((c - c0)) of the 3 of the failed insert"
qerr "c: ... and the next quorum insert" "Quorum for previous write has not been satisfied" r1 \
	"INSERT INTO profd.r SELECT toDate('2026-12-01'), 5000 + number, 'f' FROM numbers(3)" \
	"insert_quorum=2&insert_quorum_timeout=2000"
c=$(ch_q r1 "SELECT count() FROM profd.r")
# restarted while its old session lives, r2 refuses to replicate ("Replica
# ... appears to be already active") and retries only ~10 s later: wait
# for ZooKeeper to expire the session first
t=$(ms)
got=$(poll_q 0 20 r1 "SELECT count() FROM system.zookeeper WHERE path = '/clickhouse/tables/01/r/replicas/r2' AND name = 'is_active'")
expect "c: ZooKeeper expires the killed replica's session ($(($(ms) - t)) ms more)" 0 "$got"
t=$(ms)
if ch_restart r2; then
	got=$(poll_q "$c" 30 r2 "SELECT count() FROM profd.r")
	expect "c: r2 restarted after SIGKILL catches up ($(($(ms) - t)) ms)" "$c" "$got"
else
	fail "c: r2 restarted after SIGKILL" "see above"
fi

qok "c: DROP PARTITION on a replicated table" r1 "ALTER TABLE profd.r DROP PARTITION '2026-12-02'"
got=$(poll_q 0 10 r2 "SELECT count() FROM profd.r WHERE day = '2026-12-02'")
expect "c: ... replicated to r2" 0 "$got"
echo "# $((SECONDS - T0)) s"
