# shellcheck shell=bash
# clickhouse.sh — ClickHouse and ZooKeeper servers for the end-to-end tests
# of the ClickHouse store (bash). Source it after lib.sh; it is a library,
# not a test. Every server is Debian's package binary, started by the test
# itself with its own minimal config on free loopback ports, data under $T,
# and cannot outlive the test (killed by the EXIT trap, and by the kernel
# — PR_SET_PDEATHSIG via setpriv — if the test shell dies some other way).
# docs/scale-out.md ("Running ClickHouse for development and tests") says
# what runs and which SQL works on Debian 12's ClickHouse 18.16.1.
#
#   ch_available                 clickhouse-server is installed
#   ch_require CHECK             else "ok - CHECK # SKIP clickhouse-server not
#                                installed (make deps)" and exit 0
#   zk_available                 Debian's ZooKeeper (and java) are installed
#   ch_start NAME [--shard S --replica R] [--zk PORT] [--cluster C=SPEC]...
#                                start server NAME (letters, digits, _); SPEC
#                                is shards separated by ';', each a list of
#                                replicas separated by ',', each HOST:TCPPORT
#                                or the NAME of another server of this test
#                                (its ports are reserved if it has not started
#                                yet). --zk: ZooKeeper on 127.0.0.1:PORT, plus
#                                distributed_ddl; --shard/--replica: macros.
#                                Exports CH_HTTP_NAME CH_TCP_NAME CH_PID_NAME;
#                                returns 1 (with the log's tail on stderr) if
#                                the server does not answer within 30 s.
#   ch_stop NAME                 SIGTERM, wait for it to exit (KILL after 30 s)
#   ch_kill NAME                 SIGKILL, wait
#   ch_restart NAME              stop if running, start again: same config,
#                                ports and data
#   ch_q NAME SQL [PARAMS]       SQL as the POST body; PARAMS ("a=1&b=2") are
#                                added to the URL (settings). Prints the
#                                answer; on failure returns 1 and prints
#                                ClickHouse's error text to stderr
#   ch_qf NAME FILE [PARAMS]     the same with the SQL in FILE
#   ch_post NAME SQL FILE [PARAMS]  SQL in the URL (?query=), FILE as the body:
#                                INSERT ... FORMAT RowBinary
#   ch_q_ext NAME SQL TABLE STRUCTURE FILE [PARAMS]  SQL with FILE (RowBinary)
#                                as the temporary table TABLE of STRUCTURE
#                                ("h FixedString(16)"): WHERE h IN TABLE
#   zk_start                     ZooKeeper on a free port; exports ZK_PORT,
#                                ZK_PID; returns 1 if no "imok" within 60 s
#   zk_stop                      SIGTERM, wait
#   zk_ruok                      "imok" if ZooKeeper answers
#
# Call ch_start/zk_start from the test's main shell (not inside $(...) or a
# pipeline): the variables are exported there, and the server is tied to
# that shell's life. Logs: $T/ch-NAME/log/clickhouse-server{,.err}.log,
# $T/zk/zookeeper.log.

CH_SERVER=${CH_SERVER:-/usr/sbin/clickhouse-server}
CH_USERS=${CH_USERS:-/etc/clickhouse-server/users.xml}
CH_START_TIMEOUT=${CH_START_TIMEOUT:-30}
# A replica killed with SIGKILL keeps its ZooKeeper session (and is "active")
# until this timeout: quorum inserts wait for it, and the restarted replica
# waits for the old session to expire before it replicates again
CH_ZK_SESSION_TIMEOUT_MS=${CH_ZK_SESSION_TIMEOUT_MS:-6000}
# On SIGTERM a server waits this long (s) for open connections to close — a
# Distributed table's pooled connections from the other servers keep it
# the whole default 5 s
CH_SHUTDOWN_WAIT=${CH_SHUTDOWN_WAIT:-1}
ZK_JARS=${ZK_JARS:-/usr/share/java}
# Ports for the servers are picked at random in this range, below Linux's
# ephemeral range (32768-60999), where the kernel puts the port-0 listeners
# of the other tests and every outgoing connection's local port; a port is
# checked free just before the start and the start is retried on other ports
# if a test in parallel took it first.
CH_PORT_MIN=${CH_PORT_MIN:-20000}
CH_PORT_MAX=${CH_PORT_MAX:-32000}

declare -A _CH_ARGS=() _CH_STARTED=() _CH_REFS=()
_CH_NAMES=()
_CH_PIDS_ALL=""

ch_available() { [ -x "$CH_SERVER" ]; }

ch_require() {
	ch_available && return 0
	echo "ok - $1 # SKIP clickhouse-server not installed (make deps)"
	exit 0
}

zk_available() { [ -r "$ZK_JARS/zookeeper.jar" ] && command -v java >/dev/null; }

# _ch_free_ports N: N distinct ports in [CH_PORT_MIN, CH_PORT_MAX) that can
# be bound on 127.0.0.1 right now, one per line
_ch_free_ports() {
	python3 - "$1" "$CH_PORT_MIN" "$CH_PORT_MAX" <<'EOF'
import random, socket, sys
n, lo, hi = map(int, sys.argv[1:])
got = []
while len(got) < n:
    p = random.randrange(lo, hi)
    if p in got:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        got.append(p)
    except OSError:
        pass
    finally:
        s.close()
print("\n".join(map(str, got)))
EOF
}

# _ch_spawn LOG CMD...: CMD in the background of the calling (main) shell,
# killed by the kernel when that shell dies; sets _CH_LASTPID
_ch_spawn() {
	local log=$1
	shift
	if setpriv --pdeathsig KILL true 2>/dev/null; then
		setpriv --pdeathsig KILL "$@" >>"$log" 2>&1 </dev/null &
	else
		"$@" >>"$log" 2>&1 </dev/null &
	fi
	_CH_LASTPID=$!
	_CH_PIDS_ALL="$_CH_PIDS_ALL $!"
}

# _ch_reserve NAME: ports for NAME if it has none yet
_ch_reserve() {
	local n=$1 p
	[ -n "$(eval echo "\${CH_TCP_$n:-}")" ] && return 0
	mapfile -t p < <(_ch_free_ports 3)
	export "CH_HTTP_$n=${p[0]}" "CH_TCP_$n=${p[1]}" "CH_IS_$n=${p[2]}"
	case " ${_CH_NAMES[*]} " in *" $n "*) ;; *) _CH_NAMES+=("$n") ;; esac
}

_ch_var() { eval echo "\${$1_$2:-}"; }

# _ch_replica SPEC FROM: <replica> XML for HOST:PORT or a server's NAME (in
# server FROM's config)
_ch_replica() {
	local r=$1 host port
	if [[ $r == *:* ]]; then
		host=${r%:*} port=${r##*:}
	elif [[ ! $r =~ ^[A-Za-z0-9_]+$ ]]; then
		echo "ch_start: bad replica '$r' in --cluster (HOST:PORT or a server name)" >&2
		return 2
	else
		_ch_reserve "$r"
		host=127.0.0.1 port=$(_ch_var CH_TCP "$r")
		case " ${_CH_REFS[$r]:-} " in *" $2 "*) ;; *) _CH_REFS[$r]="${_CH_REFS[$r]:-} $2" ;; esac
	fi
	printf '        <replica><host>%s</host><port>%s</port></replica>\n' "$host" "$port"
}

# _ch_config NAME: write $T/ch-NAME/config.xml from NAME's arguments
_ch_config() {
	local n=$1 d=$T/ch-$1 shard='' replica='' zk='' clusters=() a b c s r
	local -a args
	read -r -a args <<<"${_CH_ARGS[$n]}"
	set -- "${args[@]}"
	while [ $# -gt 0 ]; do
		case $1 in
		--shard) shard=$2; shift 2 ;;
		--replica) replica=$2; shift 2 ;;
		--zk) zk=$2; shift 2 ;;
		--cluster) clusters+=("$2"); shift 2 ;;
		*) echo "ch_start: unknown argument $1" >&2; return 2 ;;
		esac
	done
	mkdir -p "$d/data" "$d/tmp" "$d/user_files" "$d/format_schemas" "$d/log"
	cp "$CH_USERS" "$d/users.xml"
	# merged into users.xml by the server: an idle TCP connection (a
	# Distributed table's pool, clickhouse-client) looks for a shutdown every
	# poll_interval s (default 10, which a stop would then wait for)
	mkdir -p "$d/users.d"
	cat >"$d/users.d/profd-tests.xml" <<'EOF'
<?xml version="1.0"?>
<yandex><profiles><default><poll_interval>1</poll_interval></default></profiles></yandex>
EOF
	{
		cat <<EOF
<?xml version="1.0"?>
<!-- written by tests/e2e/clickhouse.sh for server $n -->
<yandex>
    <logger>
        <level>information</level>
        <log>$d/log/clickhouse-server.log</log>
        <errorlog>$d/log/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>$(_ch_var CH_HTTP "$n")</http_port>
    <tcp_port>$(_ch_var CH_TCP "$n")</tcp_port>
    <interserver_http_port>$(_ch_var CH_IS "$n")</interserver_http_port>
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <path>$d/data/</path>
    <tmp_path>$d/tmp/</tmp_path>
    <user_files_path>$d/user_files/</user_files_path>
    <format_schema_path>$d/format_schemas/</format_schema_path>
    <users_config>$d/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
    <shutdown_wait_unfinished>$CH_SHUTDOWN_WAIT</shutdown_wait_unfinished>
EOF
		if [ ${#clusters[@]} -gt 0 ]; then
			echo "    <remote_servers>"
			for c in "${clusters[@]}"; do
				echo "      <${c%%=*}>"
				IFS=';' read -r -a s <<<"${c#*=}"
				for a in "${s[@]}"; do
					echo "        <shard><internal_replication>true</internal_replication>"
					IFS=',' read -r -a r <<<"$a"
					for b in "${r[@]}"; do _ch_replica "$b" "$n" || return 2; done
					echo "        </shard>"
				done
				echo "      </${c%%=*}>"
			done
			echo "    </remote_servers>"
		fi
		if [ -n "$zk" ]; then
			cat <<EOF
    <zookeeper>
        <node><host>127.0.0.1</host><port>$zk</port></node>
        <session_timeout_ms>$CH_ZK_SESSION_TIMEOUT_MS</session_timeout_ms>
    </zookeeper>
    <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
EOF
		fi
		if [ -n "$shard$replica" ]; then
			echo "    <macros>"
			[ -n "$shard" ] && echo "        <shard>$shard</shard>"
			[ -n "$replica" ] && echo "        <replica>$replica</replica>"
			echo "    </macros>"
		fi
		echo "</yandex>"
	} >"$d/config.xml.new" || return 2
	mv "$d/config.xml.new" "$d/config.xml"
}

# _ch_launch NAME: start NAME from its config, wait for SELECT 1. Returns
# 0 up, 1 failed, 3 a port was taken (the caller may retry on others)
_ch_launch() {
	local n=$1 d=$T/ch-$1 pid end=$((SECONDS + CH_START_TIMEOUT))
	: >"$d/log/stdout.log"
	_ch_spawn "$d/log/stdout.log" "$CH_SERVER" --config-file="$d/config.xml"
	pid=$_CH_LASTPID
	export "CH_PID_$n=$pid"
	_CH_STARTED[$n]=1
	while [ "$SECONDS" -lt "$end" ]; do
		if [ "$(curl -s --max-time 2 "http://127.0.0.1:$(_ch_var CH_HTTP "$n")/?query=SELECT%201" 2>/dev/null)" = 1 ]; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null || true
			_ch_forget "$pid"
			unset "_CH_STARTED[$n]"
			if grep -q "Address already in use" "$d/log/stdout.log" "$d/log/clickhouse-server.err.log" 2>/dev/null; then
				return 3
			fi
			return 1
		fi
		sleep 0.1
	done
	{
		kill -9 "$pid" || true
		wait "$pid" || true
	} 2>/dev/null
	_ch_forget "$pid"
	unset "_CH_STARTED[$n]"
	return 1
}

_ch_fail_log() { # NAME WHAT: the log's tail on stderr
	local d=$T/ch-$1
	{
		echo "clickhouse $1: $2; last lines of its logs:"
		tail -n 5 "$d/log/stdout.log" 2>/dev/null
		tail -n 10 "$d/log/clickhouse-server.err.log" 2>/dev/null
	} | cut -c1-400 >&2
}

ch_start() {
	local n=$1 try rc m
	shift
	if [[ ! $n =~ ^[A-Za-z0-9_]+$ ]]; then
		echo "ch_start: bad name '$n' (letters, digits, _)" >&2
		return 2
	fi
	if [ -n "${_CH_STARTED[$n]:-}" ]; then
		echo "ch_start: $n already runs (pid $(_ch_var CH_PID "$n"))" >&2
		return 2
	fi
	_CH_ARGS[$n]="$*"
	_ch_reserve "$n"
	for try in 1 2 3 4 5; do
		_ch_config "$n" || return 2
		_ch_launch "$n"
		rc=$?
		if [ "$rc" -eq 0 ]; then
			[ "$try" -gt 1 ] && _ch_wait_refs "$n"
			return 0
		fi
		[ "$rc" -eq 3 ] || break
		# a port was taken meanwhile: new ports, and every config that
		# names this server rewritten (running servers reload remote_servers)
		unset "CH_HTTP_$n" "CH_TCP_$n" "CH_IS_$n"
		_ch_reserve "$n"
		for m in "${_CH_NAMES[@]}"; do
			[ "$m" != "$n" ] && [ -n "${_CH_ARGS[$m]+x}" ] && _ch_config "$m"
		done
	done
	_ch_fail_log "$n" "did not answer SELECT 1 within ${CH_START_TIMEOUT}s (ports $(_ch_var CH_HTTP "$n")/$(_ch_var CH_TCP "$n"))"
	return 1
}

# _ch_forget PID: PID has exited and was reaped: never signal it again
_ch_forget() { _CH_PIDS_ALL=$(echo " $_CH_PIDS_ALL " | sed "s/ $1 / /g"); }

# _ch_wait_refs NAME: NAME moved to other ports: wait (up to 10 s) until
# the running servers whose clusters name it have reloaded their config
_ch_wait_refs() {
	local n=$1 m i
	for m in ${_CH_REFS[$n]:-}; do
		if [ "$m" = "$n" ] || [ -z "${_CH_STARTED[$m]:-}" ]; then continue; fi
		for ((i = 0; i < 50; i++)); do
			[ "$(ch_q "$m" "SELECT count() FROM system.clusters WHERE port = $(_ch_var CH_TCP "$n")" 2>/dev/null)" != 0 ] && break
			sleep 0.2
		done
	done
	return 0
}

# _ch_wait_exit PID SECS: wait up to SECS for PID to exit, then KILL it
_ch_wait_exit() {
	local pid=$1 secs=$2 i
	for ((i = 0; i < secs * 20; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	_ch_forget "$pid"
	return 0
}

ch_stop() {
	local n=$1 pid
	pid=$(_ch_var CH_PID "$n")
	[ -n "${_CH_STARTED[$n]:-}" ] && [ -n "$pid" ] || return 0
	{
		kill -TERM "$pid"
		_ch_wait_exit "$pid" 30
	} 2>/dev/null
	unset "_CH_STARTED[$n]"
}

ch_kill() {
	local n=$1 pid
	pid=$(_ch_var CH_PID "$n")
	[ -n "${_CH_STARTED[$n]:-}" ] && [ -n "$pid" ] || return 0
	# (stderr of the whole: bash's "Killed" notice of the job goes there)
	{
		kill -KILL "$pid"
		_ch_wait_exit "$pid" 5
	} 2>/dev/null
	unset "_CH_STARTED[$n]"
}

ch_restart() {
	local n=$1 try rc
	if [ -z "${_CH_ARGS[$n]+x}" ]; then
		echo "ch_restart: $n was never started" >&2
		return 2
	fi
	ch_stop "$n"
	# same ports: a port can only be "in use" briefly (the old socket)
	for try in 1 2 3 4 5; do
		_ch_launch "$n"
		rc=$?
		[ "$rc" -eq 0 ] && return 0
		[ "$rc" -eq 3 ] || break
		sleep 1
	done
	_ch_fail_log "$n" "did not come back on its ports"
	return 1
}

# _ch_curl NAME PARAMS CURL-ARGS...: POST to NAME's HTTP port; the answer on
# stdout if 200, else ClickHouse's error on stderr and return 1
_ch_curl() {
	local n=$1 params=$2 port out code
	shift 2
	port=$(_ch_var CH_HTTP "$n")
	if [ -z "$port" ]; then
		echo "ch_q: no server $n" >&2
		return 2
	fi
	out=$(mktemp "$T/.chq.XXXXXX")
	# wait_end_of_query: the answer is buffered, so an error during the
	# query is a 500 and not the tail of a 200
	code=$(curl -sS --max-time "${CH_QUERY_TIMEOUT:-120}" -o "$out" -w '%{http_code}' \
		"$@" "http://127.0.0.1:$port/?wait_end_of_query=1${params:+&$params}")
	if [ "$code" = 200 ]; then
		cat "$out"
		rm -f "$out"
		return 0
	fi
	{
		[ "$code" = 000 ] && echo "clickhouse $n: no answer on port $port"
		head -c 2000 "$out"
	} >&2
	rm -f "$out"
	return 1
}

# (the body through stdin: an argument is limited to 128 KiB)
ch_q() { printf %s "$2" | _ch_curl "$1" "${3:-}" --data-binary @-; }

ch_qf() { _ch_curl "$1" "${3:-}" --data-binary @"$2"; }

ch_post() {
	local n=$1 sql=$2 file=$3 params=${4:-} q
	q=$(jq -rn --arg s "$sql" '$s|@uri')
	_ch_curl "$n" "query=$q${params:+&$params}" --data-binary @"$file"
}

# ch_q_ext NAME SQL TABLE STRUCTURE FILE [PARAMS]: SQL (in the URL) with
# FILE (RowBinary) sent as the temporary table TABLE ("external data", a
# multipart upload), STRUCTURE e.g. "h FixedString(16)": for
# WHERE h IN TABLE with more keys than a query text should carry
ch_q_ext() {
	local n=$1 sql=$2 tab=$3 st=$4 file=$5 params=${6:-} q
	q=$(jq -rn --arg s "$sql" '$s|@uri')
	st=$(jq -rn --arg s "$st" '$s|@uri')
	_ch_curl "$n" "query=$q&${tab}_structure=$st&${tab}_format=RowBinary${params:+&$params}" -F "$tab=@$file"
}

# ZooKeeper (Debian's 3.8), standalone, from its jars: own zoo.cfg, data
# and log4j config under $T/zk
zk_ruok() {
	local port=${1:-${ZK_PORT:-}}
	[ -n "$port" ] || return 1
	python3 - "$port" <<'EOF' 2>/dev/null
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
s.sendall(b"ruok")
b = b""
while True:
    c = s.recv(16)
    if not c:
        break
    b += c
print(b.decode(errors="replace"))
EOF
}

# _zk_classpath: the jars a standalone ZooKeeper server needs, not all of
# /usr/share/java (500 jars here, four SLF4J bindings of which one is nop)
_zk_classpath() {
	local j cp=''
	for j in zookeeper zookeeper-jute slf4j-api slf4j-log4j12 log4j-1.2 metrics-core commons-cli \
		netty-common netty-buffer netty-transport netty-resolver netty-codec netty-handler \
		netty-transport-native-unix-common netty-transport-native-epoll snappy-java; do
		[ -r "$ZK_JARS/$j.jar" ] && cp=$cp${cp:+:}$ZK_JARS/$j.jar
	done
	echo "$cp"
}

zk_start() {
	local d=$T/zk try port pid end
	if [ -n "${ZK_PID:-}" ] && kill -0 "$ZK_PID" 2>/dev/null; then
		echo "zk_start: ZooKeeper already runs (pid $ZK_PID)" >&2
		return 2
	fi
	mkdir -p "$d/data"
	cat >"$d/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %m%n
EOF
	for try in 1 2 3 4 5; do
		port=${ZK_PORT:-$(_ch_free_ports 1)}
		cat >"$d/zoo.cfg" <<EOF
tickTime=1000
initLimit=10
syncLimit=5
dataDir=$d/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,stat,mntr
maxClientCnxns=0
minSessionTimeout=2000
EOF
		: >"$d/zookeeper.log"
		# C1 only, serial GC, small heap: starts in ~1 s instead of ~2.5
		_ch_spawn "$d/zookeeper.log" java -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
			-Dzookeeper.root.logger=INFO,CONSOLE -Dlog4j.configuration="file:$d/log4j.properties" \
			-cp "$(_zk_classpath)" org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg"
		pid=$_CH_LASTPID
		export ZK_PID=$pid ZK_PORT=$port
		end=$((SECONDS + 60))
		while [ "$SECONDS" -lt "$end" ]; do
			[ "$(zk_ruok "$port")" = imok ] && return 0
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		{
			kill -9 "$pid" || true
			wait "$pid" || true
		} 2>/dev/null
		_ch_forget "$pid"
		grep -q "Address already in use" "$d/zookeeper.log" || break
		unset ZK_PORT
	done
	{
		echo "zookeeper: no imok on port $port; last lines of its log:"
		tail -n 10 "$d/zookeeper.log" | cut -c1-400
	} >&2
	unset ZK_PID
	return 1
}

zk_stop() {
	[ -n "${ZK_PID:-}" ] || return 0
	{
		kill -TERM "$ZK_PID"
		_ch_wait_exit "$ZK_PID" 20
	} 2>/dev/null
	unset ZK_PID
}

# ch_cleanup: KILL every server this test started and still runs, and reap
# it (from the EXIT trap, before lib.sh removes $T; the data is thrown away,
# so there is nothing to shut down cleanly)
ch_cleanup() {
	local p
	# (|| true: the trap may run under the test's set -e)
	{
		for p in $_CH_PIDS_ALL; do kill -KILL "$p" || true; done
		for p in $_CH_PIDS_ALL; do wait "$p" || true; done
	} 2>/dev/null
	_CH_PIDS_ALL=""
	return 0
}

_ch_prev_trap=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
# shellcheck disable=SC2064 # expanded now on purpose
trap "ch_cleanup; $_ch_prev_trap" EXIT
unset _ch_prev_trap
