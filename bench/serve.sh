#!/usr/bin/env bash
# serve.sh — collector benchmark (`make bench` runs it after bench/run.sh):
# `profd serve` over HTTP, driven by bench/loadgen (Go, standard library).
#
#   (a) ingest: a fresh server pinned to core 0 (taskset -c 0), loadgen on
#       core 1 POSTing every file once over CONNS (default 8) keep-alive
#       connections; inputs: the 1,000 small and the 200 large generated CPU
#       profiles of both shapes (bench/gen -kind small, large; deepsmall,
#       deep: stacks up to 64 deep, many distinct leaf functions). Every answer must be 200 (loadgen exits 1 otherwise).
#       Wall time from first request to last answer (loadgen), server CPU
#       time (its threads' run time, /proc/PID/task/*/schedstat) and peak
#       RSS (VmHWM). Then
#       the same with the data dir on tmpfs (/dev/shm, if present), where
#       fsync is free: what the server's CPU alone allows. Then both inputs
#       again with --tokens and --tls-cert/--tls-key on (RSA-2048 certificate
#       made here by openssl, TLS 1.2+ as negotiated by Go's client, a Bearer
#       token on every request): the cost of auth + TLS, same run. Then the
#       floor: bench/ingest_floor in profd's place, answering the same uploads
#       and doing nothing else, or only writing each body as a durable SQLite
#       row; with gunzip + decode of the same files (bench_codec), the least
#       any server that reads and stores them spends here.
#   (b) merge of the 200 large profiles (of each shape) through the API
#       (GET /api/0/profiles/merge?...&from=0&to=now, downloaded by curl) vs
#       the pprof tool behind `go tool pprof -proto` on the same 200 files
#       (and `profd pprof merge` for reference), alternating, both unpinned.
#       Each round starts a fresh server on the same data dir (filled once),
#       so the server's VmHWM is that of a process that opened the store and
#       did this one merge; its VmRSS just before the merge is reported too.
#       A second merge on the same process is timed as "warm". An API merge's
#       time is curl's time_total (connect to last byte of the answer), not the
#       start of the curl process (~5 ms of loading libcurl's libraries, measured,
#       which is no part of the server's merge); go tool pprof's is its whole
#       run, as a user waits for it. Checked once:
#       go tool pprof -top of both merges is identical. The API merge is
#       timed with tokens + TLS too (first shape only).
#   (c) storage: scrapes of one service posted to a fresh server, one at a
#       time over one connection, as a scraper sends a target's (service
#       goapp): the 1,000 small generated CPU profiles, and 6,000 real
#       scrapes of examples/goapp, 1,000 each of heap, allocs, goroutine,
#       block and mutex (rounds 250 ms apart) and 1,000 CPU profiles of 1 s
#       taken back to back beside them (and the 1,000 small generated
#       profiles of the deep shape) (taken once, ~17 min, kept in
#       $BUILD/bench-data/scrapes). Data-dir bytes (du -sb, without the
#       fixed 4 MiB disk-full ballast .reserve) with the server
#       running and after SIGTERM; any -wal file left after SIGTERM is
#       reported. One data dir per type, and all six types in one data dir.
#       The first profile is stored alone first, which gives the fixed size
#       of a partition and the marginal bytes per further profile.
#
# The profd binary is copied at start, so a rebuild during the run does not
# mix binaries. Data dirs live under $BUILD (same disk as a real data dir).
# The generated profiles carry time_nanos 2026-01-01, hence --retention 0.
#
# Results: Markdown tables on stdout, appended to $BUILD/bench-results.md.
# Env: ROUNDS (default 5), BUILD (default build), CONNS (default 8),
#      PARTS (default "a b c": which of the sections above to run),
#      PERF=1 (perf record -g the server during the last ingest and merge
#      round, into $BUILD/perf-{ingest-small,ingest-large,merge}.data).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-5}
CONNS=${CONNS:-8}
PERF=${PERF:-0}
PARTS=${PARTS:-a b c}
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
DATA=$PWD/$BUILD/bench-data
LOADGEN=$PWD/$BUILD/loadgen
export HOME=$PWD/$BUILD/gohome PPROF_TMPDIR=$PWD/$BUILD/gohome/pprof
mkdir -p "$HOME" "$DATA"
PPROF=$(go env GOROOT)/pkg/tool/$(go env GOOS)_$(go env GOARCH)/pprof
[ -x "$PPROF" ] || { echo "bench: go's pprof tool not found at $PPROF" >&2; exit 1; }
for b in profd loadgen gen goapp ingest_floor bench_codec; do
	[ -x "$BUILD/$b" ] || { echo "bench: $BUILD/$b missing (make $BUILD/$b)" >&2; exit 1; }
done
TICK=$(getconf CLK_TCK)
# shellcheck source=bench/targets.sh
. bench/targets.sh
. bench/goapp.sh

WORK=$(mktemp -d "$PWD/$BUILD/bench-serve.XXXXXX")
cp "$BUILD/profd" "$WORK/profd"
cp "$BUILD/ingest_floor" "$WORK/ingest_floor"
SHM= # tmpfs scratch for the tmpfs ingest rows, if /dev/shm is there
if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm)" = tmpfs ]; then
	SHM=$(mktemp -d /dev/shm/profd-bench.XXXXXX)
fi
PROFD=$WORK/profd
SPID= # the running server, if any
GPID= # goapp, while scraping
PERFPID=
cleanup() {
	[ -n "$PERFPID" ] && kill -INT "$PERFPID" 2>/dev/null
	[ -n "$GPID" ] && kill "$GPID" 2>/dev/null
	[ -n "$SPID" ] && kill -KILL "$SPID" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$WORK"
	[ -z "$SHM" ] || rm -rf "$SHM"
}
trap cleanup EXIT

# ---- inputs -----------------------------------------------------------------

gen() { # kind n dir (as bench/run.sh)
	if [ ! -f "$3/.done-$2" ]; then
		rm -rf "$3"
		"$BUILD/gen" -kind "$1" -n "$2" -seed 1 -o "$3" >/dev/null
		touch "$3/.done-$2"
	fi
}
gen small 1000 "$DATA/small"
gen large 200 "$DATA/large"
gen deepsmall 1000 "$DATA/deepsmall"
gen deep 200 "$DATA/deep"

STYPES="heap allocs goroutine block mutex"
# 1,000 rounds, 250 ms apart: consecutive scrapes of a type are as far
# apart as several of goapp's GC cycles (a heap profile changes at each),
# not the same profile twice (10 ms apart, most were: blocks stored
# against the previous one looked 5x smaller than at 2 s apart, measured)
# And 1,000 CPU profiles of 1 s each, back to back beside them (a 10 s
# profile a minute is the common setting; 1,000 of those would take 3 hours):
# the real CPU series of the storage table, beside the generated one.
NSCRAPES=1000 SPAUSE=250ms
if want c && [ ! -f "$DATA/scrapes/.done-$NSCRAPES-$SPAUSE-cpu1s" ]; then
	echo "bench: scraping examples/goapp ($NSCRAPES rounds of $STYPES, $SPAUSE apart, and $NSCRAPES cpu profiles of 1 s: ~17 min), once" >&2
	rm -rf "$DATA/scrapes"
	scrape_goapp "$BUILD" "$WORK" "$DATA/scrapes" "$NSCRAPES" "cpu,${STYPES// /,}" "$SPAUSE" || exit 1
	touch "$DATA/scrapes/.done-$NSCRAPES-$SPAUSE-cpu1s"
fi
files_of() { # type -> the 1,000 files of (c)
	case $1 in
	cpu) echo "$DATA"/small/*.pb.gz ;;
	cpu-deep) echo "$DATA"/deepsmall/*.pb.gz ;;
	cpu-real) echo "$DATA"/scrapes/cpu/*.pb.gz ;;
	*) echo "$DATA/scrapes/$1"/*.pb.gz ;;
	esac
}

# ---- server control -------------------------------------------------------------

# Tokens and TLS for the SECURE=1 rows: a CA and a server certificate for
# 127.0.0.1 (RSA-2048, the common choice), a tokens file, the client's token.
SEC=$WORK/sec
mkdir -p "$SEC"
ossl() { openssl "$@" >>"$SEC/openssl.log" 2>&1 || { echo "bench: openssl $1 failed: $(tail -3 "$SEC/openssl.log")" >&2; exit 1; }; }
ossl req -x509 -newkey rsa:2048 -nodes -keyout "$SEC/ca.key" -out "$SEC/ca.pem" -days 2 -subj /CN=profd-bench-ca
ossl req -newkey rsa:2048 -nodes -keyout "$SEC/server.key" -out "$SEC/server.csr" -subj /CN=127.0.0.1
echo "subjectAltName=IP:127.0.0.1" >"$SEC/server.ext"
ossl x509 -req -in "$SEC/server.csr" -CA "$SEC/ca.pem" -CAkey "$SEC/ca.key" -CAcreateserial -days 2 \
	-extfile "$SEC/server.ext" -out "$SEC/server.pem"
(
	umask 077
	openssl rand -hex 32 >"$SEC/token"
	echo "$(cat "$SEC/token") read,write bench" >"$SEC/tokens"
	echo "Authorization: Bearer $(cat "$SEC/token")" >"$SEC/auth-header"
)
SECURE=0 # 1: start_server adds --tokens and --tls-*, clients use https and the token
scheme() { if [ "$SECURE" = 1 ]; then echo https; else echo http; fi; }
sec_serve_args() { [ "$SECURE" = 1 ] && echo --tokens "$SEC/tokens" --tls-cert "$SEC/server.pem" --tls-key "$SEC/server.key"; true; }
sec_loadgen_args() { [ "$SECURE" = 1 ] && echo -token-file "$SEC/token" -cacert "$SEC/ca.pem"; true; }
sec_curl_args() { [ "$SECURE" = 1 ] && echo --cacert "$SEC/ca.pem" -H "@$SEC/auth-header"; true; }

FLOOR= # http or sqlite: start_server starts bench/ingest_floor -m FLOOR instead of profd

# start_server DATADIR CPULIST ("" = unpinned): sets SPID and SPORT
start_server() {
	local log=$WORK/server.log
	: >"$log"
	# shellcheck disable=SC2046 # word splitting of the args on purpose (no spaces in them)
	if [ -n "$FLOOR" ]; then
		mkdir -p "$1"
		taskset -c "$2" "$WORK/ingest_floor" -m "$FLOOR" -d "$1" 2>"$log" &
	elif [ -n "$2" ]; then
		taskset -c "$2" "$PROFD" serve -q --retention 0 --addr 127.0.0.1:0 --data-dir "$1" $(sec_serve_args) 2>"$log" &
	else
		"$PROFD" serve -q --retention 0 --addr 127.0.0.1:0 --data-dir "$1" $(sec_serve_args) 2>"$log" &
	fi
	SPID=$!
	SPORT=
	for _ in $(seq 200); do
		SPORT=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$log" | head -n1)
		[ -n "$SPORT" ] && break
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.05
	done
	[ -n "$SPORT" ] || { echo "bench: profd serve did not start: $(cat "$log")" >&2; exit 1; }
	# shellcheck disable=SC2046
	curl -sf -o /dev/null $(sec_curl_args) "$(scheme)://127.0.0.1:$SPORT/readyz" || { echo "bench: server not ready" >&2; exit 1; }
}

stop_server() { # SIGTERM, wait, must exit 0
	kill -TERM "$SPID"
	local rc=0
	wait "$SPID" || rc=$?
	SPID=
	[ "$rc" = 0 ] || { echo "bench: profd serve exited $rc: $(tail -3 "$WORK/server.log")" >&2; exit 1; }
}

# cpu_now: the server's CPU seconds so far into CPU_NOW, as the run time of
# its threads from schedstat (nanoseconds: /proc/PID/stat counts 10 ms
# ticks, too coarse for the floor's 20 ms), and as ticks into CPU_TICKS;
# its thread list into CPU_TASKS. profd serve's and ingest_floor's threads
# live as long as the process; cpu_used falls back to the ticks if the
# list changed (an exited thread's time is gone from schedstat).
cpu_now() {
	CPU_TASKS=$(ls "/proc/$SPID/task" | tr '\n' ' ')
	CPU_NOW=$(cat /proc/"$SPID"/task/*/schedstat | awk '{ s += $1 } END { printf "%.4f", s / 1e9 }')
	CPU_TICKS=$(awk -v t="$TICK" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$SPID/stat")
}
cpu_used() { # tasks0 now0 ticks0 (from cpu_now before): the CPU seconds since
	cpu_now
	if [ "$1" = "$CPU_TASKS" ]; then
		awk -v a="$2" -v b="$CPU_NOW" 'BEGIN { printf "%.4f", b - a }'
	else
		awk -v a="$3" -v b="$CPU_TICKS" 'BEGIN { printf "%.3f", b - a }'
	fi
}
vm_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$SPID/status"; }

perf_start() { # output file
	perf record -q -g -p "$SPID" -o "$1" >/dev/null 2>&1 &
	PERFPID=$!
	sleep 0.3
}
perf_stop() {
	kill -INT "$PERFPID" 2>/dev/null || true
	wait "$PERFPID" 2>/dev/null || true
	PERFPID=
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { awk -v c="$1" '{print $c}' "$2" | median; } # column file -> median

now() { date +%s.%N; }

# time_cmd OUT CMD...: wall seconds and peak RSS (KB) of one run, appended to OUT
time_cmd() {
	local out=$1
	shift
	local t0 t1
	t0=$(now)
	/usr/bin/time -f "%M" -o "$out.rss" "$@" >/dev/null 2>"$out.err" || {
		echo "bench: failed: $* ($(tail -3 "$out.err"))" >&2
		exit 1
	}
	t1=$(now)
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}') $(cat "$out.rss")" >>"$out"
}

results=$BUILD/bench-results.md
out() { tee -a "$results"; }

echo
echo "profd serve bench: $ROUNDS rounds, medians; $(nproc) CPUs; $CONNS connections; $(date -u +%Y-%m-%dT%H:%MZ)" | out

# ---- (a) ingest -----------------------------------------------------------------

if want a; then
{
	echo
	echo "Ingest: profd serve pinned to core 0, loadgen ($CONNS keep-alive connections) on core 1, fresh data dir per round"
	echo
	echo "| input | files | gzip'd input | wall | profiles/s | MB/s (gz) | server CPU | MB/s per server CPU-s | server core busy | server peak RSS |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
} | out
ingest_set() { # label perfname datadir files...
	local label=$1 pname=$2 dd=$3
	shift 3
	local t=$WORK/ingest-$pname r
	: >"$t"
	for r in $(seq "$ROUNDS"); do
		rm -rf "$dd"
		start_server "$dd" 0
		[ "$PERF" = 1 ] && [ "$r" = "$ROUNDS" ] && perf_start "$PWD/$BUILD/perf-ingest-$pname.data"
		local line c hwm tasks0 now0 ticks0
		cpu_now
		tasks0=$CPU_TASKS now0=$CPU_NOW ticks0=$CPU_TICKS
		# shellcheck disable=SC2046
		line=$(taskset -c 1 "$LOADGEN" post -c "$CONNS" -url "$(scheme)://127.0.0.1:$SPORT" $(sec_loadgen_args) -service bench -type cpu "$@")
		c=$(cpu_used "$tasks0" "$now0" "$ticks0")
		hwm=$(vm_kb VmHWM)
		[ -n "$PERFPID" ] && perf_stop
		stop_server
		# seconds bytes cpu hwm
		echo "$line" | awk -v c="$c" -v h="$hwm" '{
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			print v["seconds"], v["bytes"], c, h }' >>"$t"
	done
	local w b c h
	w=$(col 1 "$t")
	b=$(col 2 "$t")
	c=$(col 3 "$t")
	h=$(col 4 "$t")
	INGEST_RATE[$pname]=$(awk -v w="$w" -v b="$b" 'BEGIN { print b / 1e6 / w }')
	INGEST_CPU[$pname]=$c INGEST_BYTES[$pname]=$b
	awk -v l="$label" -v n=$# -v w="$w" -v b="$b" -v c="$c" -v h="$h" 'BEGIN {
		printf "| %s | %d | %.1f MB | %.3f s | %.0f | %.1f | %.3f s | %.1f | %.0f %% | %.1f MB |\n",
			l, n, b / 1e6, w, n / w, b / 1e6 / w, c, b / 1e6 / c, 100 * c / w, h / 1024 }' | out
}
declare -A INGEST_RATE=() INGEST_CPU=() INGEST_BYTES=() # perfname -> medians of its row: MB/s (gz), server CPU s, bytes
ingest_set "(a) small CPU" small "$WORK/d" "$DATA"/small/*.pb.gz
ingest_set "(b) large CPU" large "$WORK/d" "$DATA"/large/*.pb.gz
ingest_set "(d) deep shape, small" deepsmall "$WORK/d" "$DATA"/deepsmall/*.pb.gz
ingest_set "(e) deep shape, large" deep "$WORK/d" "$DATA"/deep/*.pb.gz
SECURE=1
ingest_set "(a) small CPU, tokens + TLS" small-sec "$WORK/d" "$DATA"/small/*.pb.gz
ingest_set "(b) large CPU, tokens + TLS" large-sec "$WORK/d" "$DATA"/large/*.pb.gz
SECURE=0
# The same with the data dir on tmpfs, where fsync costs nothing: the rate the
# server's CPU allows, to tell disk-bound from CPU-bound.
if [ -n "$SHM" ]; then
	ingest_set "(a) small CPU, data dir on tmpfs" small-tmpfs "$SHM/d" "$DATA"/small/*.pb.gz
	ingest_set "(b) large CPU, data dir on tmpfs" large-tmpfs "$SHM/d" "$DATA"/large/*.pb.gz
	ingest_set "(d) deep shape, small, tmpfs" deepsmall-tmpfs "$SHM/d" "$DATA"/deepsmall/*.pb.gz
	ingest_set "(e) deep shape, large, tmpfs" deep-tmpfs "$SHM/d" "$DATA"/deep/*.pb.gz
fi
echo "Target: >= 40 MB/s of gzip'd pprof per core (column MB/s (gz); the server has one core)." | out
# The floor: bench/ingest_floor, set up as profd serve (libmicrohttpd's epoll
# pool), answering the same uploads while doing nothing with them, or only
# inserting each body as a row of a SQLite file (WAL, synchronous=FULL, group
# commit as profd's store): what HTTP and a durable write cost on this machine.
# Plus the least reading a profile costs (bench_codec: gunzip + decode, one
# core). Their sum bounds the rate of any server that reads what it stores.
{
	echo
	echo "The floor on this machine, same method: a server that only answers (HTTP), or only stores each body as a SQLite row, durably"
	echo
	echo "| input | files | gzip'd input | wall | profiles/s | MB/s (gz) | server CPU | MB/s per server CPU-s | server core busy | server peak RSS |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
} | out
FLOOR=http
ingest_set "(a) small CPU: HTTP only" floor-http-small "$WORK/f" "$DATA"/small/*.pb.gz
ingest_set "(b) large CPU: HTTP only" floor-http-large "$WORK/f" "$DATA"/large/*.pb.gz
FLOOR=sqlite
ingest_set "(a) small CPU: HTTP + a SQLite row, durable" floor-sqlite-small "$WORK/f" "$DATA"/small/*.pb.gz
ingest_set "(b) large CPU: HTTP + a SQLite row, durable" floor-sqlite-large "$WORK/f" "$DATA"/large/*.pb.gz
ingest_set "(d) deep shape, small: HTTP + a SQLite row, durable" floor-sqlite-deepsmall "$WORK/f" "$DATA"/deepsmall/*.pb.gz
ingest_set "(e) deep shape, large: HTTP + a SQLite row, durable" floor-sqlite-deep "$WORK/f" "$DATA"/deep/*.pb.gz
FLOOR=
echo | out
for set in small large deepsmall deep; do
	read_s=$("$BUILD/bench_codec" -r "$ROUNDS" "$DATA/$set"/*.pb.gz | awk '$1 == "gunzip_median_s" { g = $2 } $1 == "decode_median_s" { d = $2 } END { print g + d }')
	awk -v set="$set" -v p="${INGEST_CPU[$set]}" -v f="${INGEST_CPU[floor-sqlite-$set]}" -v r="$read_s" -v b="${INGEST_BYTES[$set]}" 'BEGIN {
		printf "%s: server CPU profd %.3f s; floor %.3f s (HTTP + SQLite row) + %.3f s (reading: gunzip + decode, one core) = %.3f s, at most %.1f MB/s per CPU-s for a server that reads and stores every profile here; profd spends %.3f s more (%.0f %% of its CPU).\n",
			set, p, f, r, f + r, b / 1e6 / (f + r), p - f - r, 100 * (p - f - r) / p }' | out
	read -r rate bound met < <(awk -v p="${INGEST_CPU[$set]}" -v f="${INGEST_CPU[floor-sqlite-$set]}" -v r="$read_s" -v b="${INGEST_BYTES[$set]}" \
		'BEGIN { printf "%.1f %.1f %s\n", b / 1e6 / p, b / 1e6 / (f + r), (b / 1e6 >= 40 * p) ? "yes" : "no" }')
	case $set in
	small) label="(a) small CPU" ;; large) label="(b) large CPU" ;;
	deepsmall) label="(d) deep shape, small" ;; deep) label="(e) deep shape, large" ;;
	esac
	target_add "ingest, MB/s of gzip'd input per server CPU-s" "$label" "$rate" ">= 40" "$met" \
		"a server that only reads each profile and stores it durably gets at most $bound here"
done
# The wall-clock rows of one run vary more than TLS costs on this VM; the
# server's CPU for the same uploads says it with less noise.
awk -v s="${INGEST_RATE[small]}" -v ss="${INGEST_RATE[small-sec]}" -v l="${INGEST_RATE[large]}" -v ls="${INGEST_RATE[large-sec]}" \
	-v cs="${INGEST_CPU[small]}" -v css="${INGEST_CPU[small-sec]}" -v cl="${INGEST_CPU[large]}" -v cls="${INGEST_CPU[large-sec]}" 'BEGIN {
	printf "Tokens + TLS cost %.1f %% of ingest throughput (small) and %.1f %% (large), MB/s (gz) medians of the same run. Target: <= 15 %%.\n",
		100 * (1 - ss / s), 100 * (1 - ls / l)
	printf "The same in server CPU for the same uploads: %+.1f %% (small), %+.1f %% (large).\n",
		100 * (css / cs - 1), 100 * (cls / cl - 1) }' | out
fi

# ---- (b) merge through the API ------------------------------------------------------

# merge_set LABEL NAME DIR: the merge of DIR's files through the API
merge_set() {
local label=$1 name=$2 dir=$3
MD=$WORK/merge-data-$name
start_server "$MD" ""
"$LOADGEN" post -c "$CONNS" -url "http://127.0.0.1:$SPORT" -service big -type cpu "$dir"/*.pb.gz >/dev/null
stop_server
MURL="/api/0/profiles/merge?service=big&type=cpu&from=0&to=now"
t=$WORK/merge-$name
: >"$t"
: >"$t.go"
: >"$t.cli"
: >"$t.sec"
for r in $(seq "$ROUNDS"); do
	start_server "$MD" ""
	base=$(vm_kb VmRSS)
	[ "$PERF" = 1 ] && [ "$r" = "$ROUNDS" ] && perf_start "$PWD/$BUILD/perf-merge-$name.data"
	read -r code a1 < <(curl -sS -o "$WORK/api.pb.gz" -w '%{http_code} %{time_total}\n' "http://127.0.0.1:$SPORT$MURL")
	[ "$code" = 200 ] || { echo "bench: merge answered $code: $(head -c 300 "$WORK/api.pb.gz")" >&2; exit 1; }
	hwm=$(vm_kb VmHWM)
	read -r code a2 < <(curl -sS -o "$WORK/api2.pb.gz" -w '%{http_code} %{time_total}\n' "http://127.0.0.1:$SPORT$MURL")
	[ "$code" = 200 ] || { echo "bench: merge answered $code" >&2; exit 1; }
	[ -n "$PERFPID" ] && perf_stop
	stop_server
	# cold wall, server HWM, server RSS before, warm wall
	echo "$a1 $hwm $base $a2" >>"$t"
	time_cmd "$t.go" "$PPROF" -proto -output "$WORK/go.pb.gz" "$dir"/*.pb.gz
	time_cmd "$t.cli" "$PROFD" pprof merge -q -o "$WORK/cli.pb.gz" "$dir"/*.pb.gz
	[ "$name" = large ] || continue # tokens + TLS: measured on the first set
	# the same two merges with tokens + TLS on
	SECURE=1
	start_server "$MD" ""
	# shellcheck disable=SC2046
	read -r code s1 h1 < <(curl -sS $(sec_curl_args) -o "$WORK/apis.pb.gz" -w '%{http_code} %{time_total} %{time_appconnect}\n' "https://127.0.0.1:$SPORT$MURL")
	[ "$code" = 200 ] || { echo "bench: merge over TLS answered $code: $(head -c 300 "$WORK/apis.pb.gz")" >&2; exit 1; }
	# shellcheck disable=SC2046
	read -r code s2 h2 < <(curl -sS $(sec_curl_args) -o "$WORK/apis2.pb.gz" -w '%{http_code} %{time_total} %{time_appconnect}\n' "https://127.0.0.1:$SPORT$MURL")
	[ "$code" = 200 ] || { echo "bench: merge over TLS answered $code" >&2; exit 1; }
	stop_server
	SECURE=0
	echo "$s1 $s2 $h1 $h2" >>"$t.sec" # h: connect + TLS handshake (curl's time_appconnect)
done
if [ "$name" = large ]; then
	cmp -s "$WORK/api.pb.gz" "$WORK/apis.pb.gz" || { echo "bench: the merges over HTTP and TLS differ" >&2; exit 1; }
fi
# correctness: both merges read the same in go tool pprof -top (the API's
# output goes through pprof -proto first, as in bench/run.sh)
"$PPROF" -proto -output "$WORK/apip.pb.gz" "$WORK/api.pb.gz" 2>/dev/null
top "$WORK/apip.pb.gz" >"$WORK/api.top"
top "$WORK/go.pb.gz" >"$WORK/go.top"
if ! cmp -s "$WORK/api.top" "$WORK/go.top"; then
	echo "bench: $label: API merge and go tool pprof -proto differ in go tool pprof -top" >&2
	diff "$WORK/api.top" "$WORK/go.top" | head -20 >&2
	exit 1
fi
cmp -s "$WORK/api.pb.gz" "$WORK/api2.pb.gz" || { echo "bench: the two API merges differ" >&2; exit 1; }
awk -v l="$label" -v n="$(find "$dir" -name '*.pb.gz' | wc -l)" -v a="$(col 1 "$t")" -v w="$(col 4 "$t")" -v h="$(col 2 "$t")" -v s="$(col 3 "$t")" \
	-v g="$(col 1 "$t.go")" -v gr="$(col 2 "$t.go")" -v c="$(col 1 "$t.cli")" -v sz="$(stat -c %s "$WORK/api.pb.gz")" 'BEGIN {
	printf "| %s, %d -> %.0f KB | %.3f s | %.3f s | %.3f s | %.1fx | %.1fx | %.3f s | %.1f MB | %.1f MB | %.1f MB | 1/%.0f |\n",
		l, n, sz / 1e3, a, w, g, g / a, g / w, c, h / 1024, s / 1024, gr / 1024, gr / h }' | out
read -r first warm rss met < <(awk -v a="$(col 1 "$t")" -v w="$(col 4 "$t")" -v h="$(col 2 "$t")" -v g="$(col 1 "$t.go")" -v gr="$(col 2 "$t.go")" \
	'BEGIN { printf "%.1f %.1f %.0f %s\n", g / a, g / w, gr / h, (g >= 100 * a && g >= 100 * w && gr >= 10 * h) ? "yes" : "no" }')
target_add "API merge vs go tool pprof -proto (first query on a fresh server / warm)" "$label" "${first}x / ${warm}x, RSS 1/$rss" \
	">= 100x both, server RSS <= 1/10" "$met"
if [ "$name" = large ]; then
	MERGE_TLS=$(awk -v a="$(col 1 "$t")" -v w="$(col 4 "$t")" -v sa="$(col 1 "$t.sec")" -v sw="$(col 2 "$t.sec")" \
		-v ha="$(col 3 "$t.sec")" -v hw="$(col 4 "$t.sec")" 'BEGIN {
		printf "With tokens + TLS ((b)): 1st merge %.3f s, warm %.3f s (plain HTTP %.3f s, %.3f s): %+.1f %%, %+.1f %%;", sa, sw, a, w,
			100 * (sa / a - 1), 100 * (sw / w - 1)
		printf " after the handshake (curl connects anew each time; its TLS set-up is most of it) %.3f s, %.3f s: %+.1f %%, %+.1f %%.\n",
			sa - ha, sw - hw, 100 * ((sa - ha) / a - 1), 100 * ((sw - hw) / w - 1) }')
fi
}
top() { "$PPROF" -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$1" 2>/dev/null | tail -n +2; }
if want b; then
{
	echo
	echo "Merge of the 200 large CPU profiles of each shape: API (fresh server per round on the same data dir, unpinned) vs go tool pprof -proto on the files (unpinned); go tool pprof -top of both identical"
	echo
	echo "| merge | API, 1st on fresh server | API, 2nd (warm) | go tool pprof -proto | speed-up (1st) | speed-up (warm) | profd pprof merge (files) | server peak RSS (VmHWM) | server RSS before merge | pprof peak RSS | RSS ratio |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
} | out
MERGE_TLS=
merge_set "(b) large CPU" large "$DATA/large"
merge_set "(e) deep shape, large" deep "$DATA/deep"
echo "$MERGE_TLS" | out
echo "Target: merge >= 100x faster than go tool pprof -proto, first query and warm (issue 18)." | out
fi

# ---- (c) storage ----------------------------------------------------------------------

if want c; then
{
	echo
	echo "Storage: profiles of one service (goapp) posted to a fresh server, one at a time (as a scraper sends one target's): cpu = the 1,000 small generated profiles, the other types = 1,000 real scrapes each of examples/goapp, 250 ms apart (and a row of 1,000 real 1 s CPU profiles of it); du -sb of the data dir, without the fixed disk-full ballast .reserve (4 MiB)"
	echo
	echo "| type | profiles | gzip'd input | per profile | on disk, running (with WAL) | on disk after SIGTERM | per profile | input / disk | data dir with 1 profile | marginal per profile | input / marginal | WAL left after SIGTERM |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
} | out
post_files() { # type files... -> "files bytes", every answer 200
	local typ=$1 line
	shift
	# one connection: a series (one target's scrapes of one type) arrives
	# one scrape at a time, as from a scraper; each block is stored against
	# the series' previous one (8 uploads of one series at once each find
	# an older base: heap blocks measured ~2x larger)
	line=$("$LOADGEN" post -c 1 -url "http://127.0.0.1:$SPORT" -service goapp -type "$typ" ${PLABELS:+-labels "$PLABELS"} "$@")
	[[ $line =~ files=([0-9]+)\ bytes=([0-9]+) ]] || { echo "bench: loadgen said: $line" >&2; exit 1; }
	echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
}
# Bytes of a data dir without the store's disk-full ballast (.reserve, a
# fixed <= 4 MiB kept so that DELETEs can be written on a full disk; it
# does not grow with the data).
dsize() { du -sb --exclude=.reserve "$1" | cut -f1; }
# The first profile goes in alone (then SIGTERM, du: the size of a partition
# holding one profile, mostly fixed cost: every table and index takes at
# least one page, 2 KiB in a day file made since 2026-12-06), the rest after a restart on the same data dir; the
# marginal cost per profile is what the other n-1 added.
store_row() { # label dir "type files..."...
	local label=$1 dir=$2
	shift 2
	rm -rf "$dir"
	start_server "$dir" ""
	local n=0 bytes=0 spec typ files nb base=
	for spec in "$@"; do
		typ=${spec%% *}
		read -r -a files <<<"${spec#* }"
		if [ -z "$base" ]; then
			nb=$(post_files "$typ" "${files[0]}")
			n=$((n + ${nb% *})) bytes=$((bytes + ${nb#* }))
			stop_server
			base=$(dsize "$dir")
			start_server "$dir" ""
			files=("${files[@]:1}")
		fi
		nb=$(post_files "$typ" "${files[@]}")
		n=$((n + ${nb% *})) bytes=$((bytes + ${nb#* }))
	done
	local live after wal
	live=$(dsize "$dir")
	stop_server
	after=$(dsize "$dir")
	wal=$(find "$dir" -name '*-wal' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	awk -v l="$label" -v n="$n" -v b="$bytes" -v live="$live" -v a="$after" -v w="$wal" -v base="$base" 'BEGIN {
		m = (a - base) / (n - 1)
		printf "| %s | %d | %.2f MB | %.2f KB | %.2f MB | %.2f MB | %.2f KB | %.1fx | %.0f KB | %.2f KB | %.1fx | %s |\n",
			l, n, b / 1e6, b / n / 1e3, live / 1e6, a / 1e6, a / n / 1e3, b / a, base / 1e3, m / 1e3, b / n / m,
			(w ? sprintf("%d B", w) : "none") }' | out
	# issue 18's storage targets: cpu, heap and allocs, and the mixed dir
	case $label in goroutine | block | mutex) return 0 ;; esac
	local ratio marg met
	read -r ratio marg met < <(awk -v n="$n" -v b="$bytes" -v a="$after" -v base="$base" \
		'BEGIN { printf "%.2f %.1f %s\n", b / a, b / n / ((a - base) / (n - 1)), (b >= 10 * a) ? "yes" : "no" }')
	[ "$label" = cpu ] && label="cpu, (a): 1,000 generated"
	target_add "storage, gzip'd input / bytes on disk after SIGTERM" "$label" "${ratio}x" ">= 10x" "$met" \
		"per further profile: ${marg}x"
}
all=()
for typ in cpu $STYPES; do
	store_row "$typ" "$WORK/s-$typ" "$typ $(files_of "$typ")"
	all+=("$typ $(files_of "$typ")")
done
store_row "cpu, deep shape (1,000 generated)" "$WORK/s-cpu-deep" "cpu $(files_of cpu-deep)"
store_row "cpu, 1,000 real scrapes of 1 s" "$WORK/s-cpu-real" "cpu $(files_of cpu-real)"
# what `profd scrape` sends from a pod found through Kubernetes: its place
# and its own labels, the same on every scrape of the series
PLABELS="namespace=ops,pod=goapp-7d9f8b6c5d-x2x4z,container=goapp,node=gke-prod-pool-1-3f2a9c1e-k7m2,app=goapp,pod-template-hash=7d9f8b6c5d" \
	store_row "cpu, the real scrapes with 6 kube labels" "$WORK/s-cpu-real-l" "cpu $(files_of cpu-real)"
store_row "all six, one data dir" "$WORK/s-all" "${all[@]}"
echo "Target (issue 18): on disk <= 1/10 of the gzip'd input (input / disk >= 10x), per type and for the mixed dir." | out
fi
