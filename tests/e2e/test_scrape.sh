#!/usr/bin/env bash
# test_scrape.sh — end-to-end tests of `profd scrape` (static targets) against
# a real collector (`profd serve`) and real Go services (build/goapp):
#   1. --once over 3 goapp targets: every type of every target lands in the
#      collector with its service and labels (cumulative=true on allocs,
#      block, mutex without --state-dir); the summary table; --types subset
#   2. deltas: two --once runs with --state-dir and --save-raw; the stored
#      allocs/block/mutex profiles read in go tool pprof -top exactly like
#      `go tool pprof -base first second` of the raw snapshots of the same
#      moments; a restart of the target (counters go down) stores the new
#      snapshot as it is
#   3. faults in one --once run: target down, hanging, HTML, garbage, legacy
#      text, and "cpu profiling already in use" once (retried, then ok):
#      each reported by reason, exit 1, the good target delivered
#   4. continuous mode with the collector down, then back: profiles queue,
#      arrive once the collector is up, none twice (counted); /metrics,
#      /healthz, /targets; no round missed; SIGTERM exits 0
#   4b. missed rounds: CPU profiles that take longer than the interval, one
#      slot for two targets: profd_scrape_missed_total counts both reasons
#      (running, queued), a warning names --cpu-concurrency
#   5. usage errors and --help
#   6. the YAML config: three groups with their own types and labels land
#      exactly so (group keys > flags > global:; label_keep); bad configs exit
#      2 naming FILE:LINE:COLUMN and the key (unknown type, typo'd key,
#      duplicate target, cpu_duration vs interval); examples/scrape.yaml
#      parses; per-group interval (1s vs 1h) seen in /metrics
#   7. TLS to targets: an https:// target (python3 ssl in front of a goapp,
#      a CA and a certificate made here by openssl): --target-ca stores its
#      profiles; without it (the system's CAs) or with another CA: exit 1, a
#      certificate error naming --target-ca, nothing stored; --target-insecure
#      stores them
#   8. a target configured with ?debug=1 (the real goapp): each type's text
#      (heap, allocs, block, mutex, goroutine; threadcreate when Go's parser
#      reads it) stored as its type, go tool pprof -raw/-top of it equal to
#      those of the text the scraper got, sample types equal to curl's
#      ?debug=1 now; merges; legacy allocs deltas with --state-dir; ?debug=2
#      goroutine dumps a per-target error, not echoed
# Every profd log is checked for sanitizer reports.
# Run: BUILD=build bash tests/e2e/test_scrape.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

TYPES="cpu heap allocs block mutex goroutine threadcreate"
t_start=$SECONDS

kill_started_on_exit

GA=$GOAPP
[ -x "$GA" ] || GA=$ROOT/build/goapp
if [ ! -x "$GA" ]; then
	fail "setup" "no goapp binary (make -s $BUILD/goapp)"
	exit 0
fi

# start_goapp NAME WORKLOAD [ADDR]: sets ADDR_<NAME> and PID_<NAME> (not lib.sh's)
start_goapp() {
	local name=$1 wl=$2 addr=${3:-127.0.0.1:0}
	: >"$T/goapp-$name.log"
	"$GA" -addr "$addr" -workload "$wl" -cpu-load 0.2 2>"$T/goapp-$name.log" &
	printf -v "PID_$name" %s $!
	local a
	a=$(wait_line "$T/goapp-$name.log" '^goapp: listening on \(.*\)$')
	[ -n "$a" ] || fail "setup: goapp $name" "$(cat "$T/goapp-$name.log")"
	printf -v "ADDR_$name" %s "$a"
}

# start_server DIR [ADDR]: a collector; sets SPID, SURL, SLOG
nsrv=0
start_server() {
	local dir=$1 addr=${2:-127.0.0.1:0} port
	nsrv=$((nsrv + 1))
	SLOG=$T/srv-$nsrv.log
	"$PROFD" serve --addr "$addr" --data-dir "$dir" --retention 0 -q 2>"$SLOG" &
	SPID=$!
	port=$(wait_line "$SLOG" '.*listening on port \([0-9][0-9]*\).*')
	if [ -z "$port" ]; then
		fail "setup: collector" "$(cat "$SLOG")"
		SURL=http://127.0.0.1:1
		return 1
	fi
	SURL=http://127.0.0.1:$port
}

# count SERVICE [TYPE] [LABELS]: number of stored profiles
count() {
	curl -sS "$SURL/api/0/profiles?service=$1${2:+&type=$2}${3:+&labels=$3}&from=0&to=now" |
		grep -o '"id":"[0-9a-v]*"' | wc -l
}
# ids SERVICE TYPE: ids of stored profiles, oldest first
ids() {
	curl -sS "$SURL/api/0/profiles?service=$1&type=$2&from=0&to=now" | grep -o '"id":"[0-9a-v]*"' | cut -d'"' -f4
}

# the broken-target server (standard library Go, built here)
FAULTSRV=$ROOT/$BUILD/faultsrv
if ! (cd "$ROOT/tests/e2e/faultsrv" && HOME=$ROOT/$BUILD/gohome GOCACHE=$ROOT/$BUILD/gocache GOPROXY=off \
	GOFLAGS=-mod=mod GOTOOLCHAIN=local go build -o "$FAULTSRV" .) >"$T/faultsrv-build.log" 2>&1; then
	fail "setup: build tests/e2e/faultsrv" "$(cat "$T/faultsrv-build.log")"
	exit 0
fi

start_server "$T/data1" || exit 0
start_goapp a auth
start_goapp b search
start_goapp c ingest
# shellcheck disable=SC2154 # set by start_goapp
A=$ADDR_a B=$ADDR_b C=$ADDR_c
ok "setup: collector $SURL, goapps $A $B $C"
sleep 1.5 # let every workload put samples in every profile type (mutex, block)

# ---- 1. --once, three targets, all types --------------------------------------------------------

t0=$SECONDS
"$PROFD" scrape --once --collector "$SURL" --cpu-duration 1s --save-raw "$T/raw1" \
	--target "$A" --service auth -L env=e2e -L 'version=1.0.0+build' \
	--target "http://$B/debug/pprof/" --service search -L team=x \
	--target "$C" --service ingest >"$T/once1.out" 2>"$T/once1.err"
rc=$?
if [ $rc -eq 0 ]; then ok "once: exit 0 ($((SECONDS - t0)) s)"; else fail "once: exit 0" "exit $rc: $(cat "$T/once1.err" "$T/once1.out")"; fi
rows=$(grep -c "^http://.*  ok " "$T/once1.out")
if [ "$rows" -eq 3 ] && head -1 "$T/once1.out" | grep -q "TARGET.*SERVICE.*CPU.*HEAP.*ALLOCS.*BLOCK.*MUTEX.*GOROUTINE.*THREADCREATE.*BYTES.*DURATION"; then
	ok "once: summary table, one row per target"
else
	fail "once: summary table" "$(cat "$T/once1.out")"
fi
if grep -q "ok\*" "$T/once1.out" && grep -q "cumulative=true" "$T/once1.out" && grep -q -- "--state-dir" "$T/once1.out"; then
	ok "once: the summary says cumulative types were stored as they are"
else
	fail "once: cumulative note" "$(cat "$T/once1.out")"
fi
bad=""
for svc in auth search ingest; do
	for t in $TYPES; do
		n=$(count $svc $t)
		[ "$n" -eq 1 ] || bad="$bad $svc/$t=$n"
	done
done
if [ -z "$bad" ]; then ok "once: 3 services x 7 types stored, one profile each"; else fail "once: profiles stored" "$bad"; fi
svcs=$(curl -sS "$SURL/api/0/services")
if [ "$svcs" = '{"code":200,"body":["auth","ingest","search"]}' ]; then ok "once: /api/0/services lists the 3 services"; else fail "once: services" "$svcs"; fi
meta=$(curl -sS "$SURL/api/0/profiles?service=auth&type=cpu&from=0&to=now")
if echo "$meta" | grep -qF '{"key":"env","value":"e2e"}' && echo "$meta" | grep -qF "{\"key\":\"instance\",\"value\":\"$A\"}" &&
	echo "$meta" | grep -qF '{"key":"version","value":"1.0.0+build"}' && ! echo "$meta" | grep -q cumulative; then
	ok "once: labels arrive (-L, instance, a '+' escaped twice as profefe's agent does)"
else
	fail "once: labels" "$meta"
fi
n_cum=$(count auth allocs cumulative=true)
n_cum_cpu=$(count auth cpu cumulative=true)
if [ "$n_cum" -eq 1 ] && [ "$n_cum_cpu" -eq 0 ]; then ok "once: allocs carries cumulative=true, cpu does not"; else fail "once: cumulative label" "allocs $n_cum cpu $n_cum_cpu"; fi
if [ "$(count search heap team=x)" -eq 1 ]; then ok "once: target given as a full URL with a trailing slash"; else fail "once: full URL target" "$(count search heap)"; fi
id=$(ids auth cpu | head -1)
go_pprof -top "$SURL/api/0/profiles/$id" >"$T/auth-cpu.top"
if grep -q "auth" "$T/auth-cpu.top"; then ok "once: the stored auth cpu profile shows auth's functions in go tool pprof"; else fail "once: cpu content" "$(head -20 "$T/auth-cpu.top")"; fi
nraw=$(find "$T/raw1" -name '*.pb.gz' | wc -l)
if [ "$nraw" -eq 21 ]; then ok "once: --save-raw kept the 21 bodies as received"; else fail "once: --save-raw" "$nraw files"; fi
no_sanitizer "once: no sanitizer report" "$T/once1.err"

# --types subset
"$PROFD" scrape --once -q --collector "$SURL" --types heap,goroutine --target "$A" --service sub >"$T/sub.out" 2>"$T/sub.err"
rc=$?
got=""
for t in $TYPES; do got="$got$t=$(count sub $t) "; done
if [ $rc -eq 0 ] && [ "$got" = "cpu=0 heap=1 allocs=0 block=0 mutex=0 goroutine=1 threadcreate=0 " ] &&
	head -1 "$T/sub.out" | grep -q "HEAP  GOROUTINE" && ! head -1 "$T/sub.out" | grep -q CPU; then
	ok "once: --types heap,goroutine scrapes and stores just those"
else
	fail "once: --types" "exit $rc; $got; $(cat "$T/sub.out" "$T/sub.err")"
fi
[ -s "$T/sub.err" ] && fail "once: -q is quiet" "$(cat "$T/sub.err")" || ok "once: -q is quiet"

# ---- 2. deltas with --state-dir -----------------------------------------------------------------

start_goapp d mixed
D=$ADDR_d
DT="allocs,block,mutex"
scrape_delta() {
	"$PROFD" scrape --once --collector "$SURL" --state-dir "$T/state" --save-raw "$T/raw" --types $DT \
		--target "$D" --service delta >"$T/delta$1.out" 2>"$T/delta$1.err"
}
sleep 0.5
scrape_delta 1
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c "  base " "$T/delta1.out")" -eq 1 ] && [ "$(count delta)" -eq 0 ] &&
	grep -q "first scrape" "$T/delta1.err"; then
	ok "delta: first run keeps the base and stores nothing (exit 0, says so)"
else
	fail "delta: first run" "exit $rc, $(count delta) stored; $(cat "$T/delta1.out" "$T/delta1.err")"
fi
nstate=$(find "$T/state" -name '*.pb.gz' | wc -l)
[ "$nstate" -eq 3 ] && ok "delta: --state-dir holds one snapshot per cumulative type" || fail "delta: state files" "$nstate"
sleep 1.5
scrape_delta 2
rc=$?
if [ $rc -eq 0 ]; then ok "delta: second run exit 0"; else fail "delta: second run" "exit $rc: $(cat "$T/delta2.out" "$T/delta2.err")"; fi
for t in allocs block mutex; do
	# shellcheck disable=SC2207
	raws=($(find "$T/raw" -name "*.$t.*.pb.gz" | sort))
	if [ ${#raws[@]} -ne 2 ]; then
		fail "delta $t: raw snapshots" "${#raws[@]} files"
		continue
	fi
	if grep -q "unchanged" "$T/delta2.out" && [ "$(count delta $t)" -eq 0 ]; then
		ok "delta $t: nothing happened between the runs, nothing stored (skipped)"
		continue
	fi
	id=$(ids delta $t | tail -1)
	if [ -z "$id" ]; then
		fail "delta $t: stored" "no profile; $(cat "$T/delta2.out")"
		continue
	fi
	curl -sS -o "$T/stored-$t.pb.gz" "$SURL/api/0/profiles/$id"
	for idx in "" alloc_space alloc_objects; do
		[ -n "$idx" ] && [ "$t" != allocs ] && continue
		si=${idx:+-sample_index=$idx}
		# shellcheck disable=SC2086
		go_pprof -top -nodecount=100000 $si "$T/stored-$t.pb.gz" | sed -n '/^Showing nodes/,$p' >"$T/mine"
		# shellcheck disable=SC2086
		go_pprof -top -nodecount=100000 $si -base "${raws[0]}" "${raws[1]}" | sed -n '/^Showing nodes/,$p' >"$T/go"
		if [ -s "$T/go" ]; then
			same_output "delta $t ${idx:-default}: stored profile -top equals go tool pprof -base first second" "$T/go" "$T/mine"
		else
			fail "delta $t ${idx:-default}" "go tool pprof -base printed no table"
		fi
	done
done
if [ "$(count delta allocs cumulative=true)" -eq 0 ]; then ok "delta: deltas carry no cumulative label"; else fail "delta: label" "cumulative=true on a delta"; fi
# a restart of the target on the same address: its counters start again
kill "$PID_d"
wait "$PID_d" 2>/dev/null
start_goapp d mixed "$D"
sleep 0.3
scrape_delta 3
rc=$?
# shellcheck disable=SC2207
raws=($(find "$T/raw" -name "*.allocs.*.pb.gz" | sort))
id=$(ids delta allocs | tail -1)
curl -sS -o "$T/stored-reset.pb.gz" "$SURL/api/0/profiles/$id"
go_pprof -top -nodecount=100000 -sample_index=alloc_space "$T/stored-reset.pb.gz" | sed -n '/^Showing nodes/,$p' >"$T/mine"
go_pprof -top -nodecount=100000 -sample_index=alloc_space "${raws[2]}" | sed -n '/^Showing nodes/,$p' >"$T/go"
if [ $rc -eq 0 ] && grep -q "reset" "$T/delta3.out" && grep -q "restarted" "$T/delta3.err" && [ "$(count delta allocs)" -eq 2 ]; then
	ok "delta: a restarted target (counters went down) is detected and counted as reset"
	same_output "delta: after a restart the snapshot is stored as it is" "$T/go" "$T/mine"
else
	fail "delta: restart" "exit $rc, $(count delta allocs) allocs; $(cat "$T/delta3.out" "$T/delta3.err")"
fi
no_sanitizer "delta: no sanitizer report" "$T"/delta*.err

# ---- 3. faults ------------------------------------------------------------------------------------

cpuraw=$(find "$T/raw1" -name '*.cpu.*.pb.gz' | head -1)
"$FAULTSRV" -busy 1 -cpu-file "$cpuraw" 2>"$T/faultsrv.log" &
F=$(wait_line "$T/faultsrv.log" '^faultsrv: listening on \(.*\)$')
[ -n "$F" ] || fail "setup: faultsrv" "$(cat "$T/faultsrv.log")"
t0=$SECONDS
"$PROFD" scrape --once --collector "$SURL" --cpu-duration 1s --timeout 2s \
	--target "$B" --service good-f \
	--target 127.0.0.1:1 --service down-f \
	--target "http://$F/hang/debug/pprof" --service hang-f \
	--target "http://$F/html/debug/pprof" --service html-f \
	--target "http://$F/garbage/debug/pprof" --service garbage-f \
	--target "http://$F/text/debug/pprof" --service text-f \
	--target "http://$F/busy/debug/pprof" --service busy-f --listen 127.0.0.1:0 >"$T/faults.out" 2>"$T/faults.err"
rc=$?
took=$((SECONDS - t0))
if [ $rc -eq 1 ]; then ok "faults: exit 1 when a target failed"; else fail "faults: exit 1" "exit $rc: $(cat "$T/faults.out" "$T/faults.err")"; fi
if [ $took -le 8 ]; then ok "faults: a hanging target costs one --timeout, not more ($took s)"; else fail "faults: time" "$took s"; fi
row() { grep "$1" "$T/faults.out" | head -1; }
expect_row() { # NAME PATTERN CELLS-REGEX
	if row "$2" | grep -Eq "$3"; then ok "faults: $1"; else fail "faults: $1" "$(row "$2") / $(cat "$T/faults.out")"; fi
}
expect_row "the good target is all ok" "^http://$B" "^http://$B/debug/pprof +good-f +ok +ok +ok\* +ok\* +ok\* +ok +ok "
expect_row "target down = connect, every type" "^http://127.0.0.1:1/" "down-f +(connect +){7}"
expect_row "hanging target = timeout, every type" "/hang/" "hang-f +(timeout +){7}"
expect_row "HTML = not_pprof" "/html/" "html-f +(not_pprof +){7}"
expect_row "garbage = not_pprof" "/garbage/" "garbage-f +(not_pprof +){7}"
# a legacy text heap profile (Go's ?debug=1) is read as a heap profile: stored for
# heap and allocs (one text format for both), the wrong kind of profile for the rest
expect_row "legacy text heap profile = ok for heap and allocs, wrong_kind for the rest" "/text/" "text-f +wrong_kind +ok +ok\* +(wrong_kind +){4}"
expect_row "cpu profiling already in use: retried after --cpu-duration, then ok" "/busy/" "busy-f +ok +(http_4xx +){6}"
if grep -q "target http://$F/html/debug/pprof type heap: not a pprof profile (got text/html; charset=utf-8): the body is an HTML page (92 bytes)" "$T/faults.out" &&
	grep -q "type heap: not a pprof profile (got text/html; charset=utf-8): the body is an HTML page (92 bytes)" "$T/faults.err"; then
	ok "faults: HTML is reported as 'not a pprof profile (got text/html ...): the body is an HTML page (92 bytes)' in the table and the log"
else
	fail "faults: HTML message" "$(grep html "$T/faults.out" "$T/faults.err" | head -5)"
fi
if grep -qi "sign in" "$T/faults.out" "$T/faults.err"; then
	fail "faults: the HTML page's text is not echoed" "$(grep -i "sign in" "$T/faults.out" "$T/faults.err" | head -3)"
else
	ok "faults: the HTML page's text is not echoed (table, log)"
fi
grep -q "/garbage/debug/pprof type cpu: not a pprof profile (got application/octet-stream): the body is binary data (4096 bytes)" "$T/faults.out" &&
	ok "faults: garbage is reported with its content type and size" || fail "faults: garbage message" "$(grep garbage "$T/faults.out")"
grep -q "127.0.0.1:1/debug/pprof type heap: target down" "$T/faults.out" && ok "faults: connection refused says target down" ||
	fail "faults: down message" "$(grep ':1/' "$T/faults.out")"
grep -q "/hang/debug/pprof type cpu: no answer within 3s (--cpu-duration + --timeout)" "$T/faults.out" &&
	ok "faults: the timeout message names the flags" || fail "faults: timeout message" "$(grep hang "$T/faults.out")"
grep -q "cpu profiling already in use" "$T/faults.err" && ! grep -q "/busy/debug/pprof type cpu" "$T/faults.out" &&
	ok "faults: cpu-in-use is logged, not reported as a failure" || fail "faults: cpu in use" "$(grep busy "$T/faults.out" "$T/faults.err")"
got=""
for t in $TYPES; do got="$got$(count good-f $t)"; done
if [ "$got" = "1111111" ] && [ "$(count busy-f cpu)" -eq 1 ] && [ "$(count html-f)" -eq 0 ] && [ "$(count hang-f)" -eq 0 ]; then
	ok "faults: the good target's 7 profiles and busy's cpu were delivered, nothing from broken targets"
else
	fail "faults: delivered" "good-f $got busy $(count busy-f cpu) html $(count html-f)"
fi
grep -q "7 of 7 target(s) failed\|6 of 7 target(s) failed" "$T/faults.err" && ok "faults: the last log line counts the failed targets" ||
	fail "faults: last line" "$(tail -2 "$T/faults.err")"
no_sanitizer "faults: no sanitizer report" "$T/faults.err"

# ---- 4. continuous: the collector down, then back ------------------------------------------------

# a port that nothing listens on, for the collector to come back on
start_server "$T/tmpdata" || exit 0
CPORT=${SURL##*:}
kill "$SPID"
wait "$SPID" 2>/dev/null
COLL=http://127.0.0.1:$CPORT
"$PROFD" scrape --collector "$COLL" --interval 2s --cpu-duration 1s --types cpu,heap,goroutine,allocs \
	--target "$A" --service cont1 --target "$C" --service cont2 --listen 127.0.0.1:0 --flush-timeout 5s \
	2>"$T/cont.err" &
SCR=$!
MPORT=$(wait_line "$T/cont.err" '.*metrics listening on port \([0-9][0-9]*\).*')
M=http://127.0.0.1:$MPORT
metric() { curl -sS "$M/metrics" | sed -n "s/^$1 \([0-9.]*\)$/\1/p" | head -1; }
q=0
for ((i = 0; i < 120; i++)); do
	q=$(metric profd_scrape_queue_length)
	f=$(metric 'profd_scrape_posts_total{result="failed"}')
	[ "${q:-0}" -ge 4 ] && [ "${f:-0}" -ge 1 ] && break
	sleep 0.1
done
if [ "${q:-0}" -ge 4 ]; then ok "continuous: collector down: $q profiles queued, posts failing ($f)"; else fail "continuous: queue" "queue $q failed $f; $(cat "$T/cont.err")"; fi
grep -q "keeping profiles queued" "$T/cont.err" && ok "continuous: the log says the collector is down and profiles are kept" ||
	fail "continuous: down log" "$(cat "$T/cont.err")"
h=$(curl -sS "$M/healthz")
[ "$h" = "ok" ] && ok "continuous: /healthz" || fail "continuous: /healthz" "$h"
curl -sS "$M/metrics" >"$T/metrics1"
grep -q "^profd_scrape_target_up{target=\"http://$A/debug/pprof\",service=\"cont1\"} 1$" "$T/metrics1" &&
	ok "continuous: /metrics shows the targets up" || fail "continuous: target_up" "$(grep target_up "$T/metrics1")"
curl -sS "$M/targets" | grep -q "cont2" && ok "continuous: /targets lists the targets" || fail "continuous: /targets" "$(curl -sS "$M/targets")"
start_server "$T/data2" "127.0.0.1:$CPORT" || exit 0
for ((i = 0; i < 150; i++)); do
	q=$(metric profd_scrape_queue_length)
	p=$(metric profd_scrape_posts_in_flight)
	e=$(metric profd_scrape_enqueued_total)
	o=$(metric 'profd_scrape_posts_total{result="ok"}')
	[ "${q:-1}" -eq 0 ] && [ "${p:-1}" -eq 0 ] && [ "${o:-0}" -ge 4 ] && [ "$e" = "$o" ] && break
	sleep 0.1
done
if [ "${q:-1}" -eq 0 ] && [ "$e" = "$o" ]; then ok "continuous: collector back: queue drained ($o delivered)"; else fail "continuous: drain" "queue $q enqueued $e ok $o; $(tail -5 "$T/cont.err")"; fi
grep -q "is back" "$T/cont.err" && ok "continuous: the log says the collector is back" || fail "continuous: back log" "$(tail -5 "$T/cont.err")"
mq=$(metric 'profd_scrape_missed_total{reason="queued"}')
mr=$(metric 'profd_scrape_missed_total{reason="running"}')
if [ "$mq" = 0 ] && [ "$mr" = 0 ] && ! grep -q "missed" "$T/cont.err"; then
	ok "continuous: no round missed (profd_scrape_missed_total 0 for both reasons)"
else
	fail "continuous: missed rounds" "queued '$mq' running '$mr'; $(grep missed "$T/cont.err" | head -3)"
fi
kill -TERM $SCR
exit_within $SCR 10
rc=$EXIT_RC
[ "$rc" = 0 ] && ok "continuous: SIGTERM: exit 0" || fail "continuous: SIGTERM" "exit $rc; $(tail -5 "$T/cont.err")"
delivered=$(sed -n 's/.*msg="stopped" delivered=\([0-9]*\).*/\1/p' "$T/cont.err")
stored=$(($(count cont1) + $(count cont2)))
if [ -n "$delivered" ] && [ "$stored" -eq "$delivered" ] && [ "$stored" -ge 4 ]; then
	ok "continuous: every delivered profile is in the collector exactly once ($stored)"
else
	fail "continuous: counts" "delivered '$delivered' stored $stored"
fi
dups=$(for s in cont1 cont2; do curl -sS "$SURL/api/0/profiles?service=$s&from=0&to=now" |
	grep -o '"type":"[a-z]*","service":"[a-z0-9]*","labels":[^]]*\],"created_at":"[^"]*"'; done | sort | uniq -d | wc -l)
[ "$dups" -eq 0 ] && ok "continuous: no profile arrived twice (series, labels, created_at unique)" || fail "continuous: duplicates" "$dups"
nbase=$(count cont1 allocs)
grep -q "first scrape of its cumulative types" "$T/cont.err" && ok "continuous: the first allocs scrape is the base ($nbase deltas stored after it)" ||
	fail "continuous: base log" "$(head -5 "$T/cont.err")"
no_sanitizer "continuous: no sanitizer report" "$T/cont.err"

# ---- 4b. missed rounds ------------------------------------------------------------------------------

# /slow/ answers a CPU profile after 2.5 s: longer than the 2 s interval
# (the round due meanwhile is missed: running), and two targets share one
# CPU slot (one waits past its due time: queued)
"$FAULTSRV" -slow 2500ms -cpu-file "$cpuraw" 2>"$T/faultsrv-slow.log" &
FS=$(wait_line "$T/faultsrv-slow.log" '^faultsrv: listening on \(.*\)$')
[ -n "$FS" ] || fail "setup: faultsrv -slow" "$(cat "$T/faultsrv-slow.log")"
"$PROFD" scrape --collector "$SURL" --interval 2s --cpu-duration 1s --timeout 5s --types cpu --cpu-concurrency 1 \
	--service slow --target "http://$FS/slow/a/debug/pprof" --target "http://$FS/slow/b/debug/pprof" \
	--listen 127.0.0.1:0 --flush-timeout 2s 2>"$T/missed.err" &
SCR=$!
MPORT=$(wait_line "$T/missed.err" '.*metrics listening on port \([0-9][0-9]*\).*')
M=http://127.0.0.1:$MPORT
mq=0 mr=0
for ((i = 0; i < 200; i++)); do
	mq=$(metric 'profd_scrape_missed_total{reason="queued"}')
	mr=$(metric 'profd_scrape_missed_total{reason="running"}')
	[ "${mq:-0}" -ge 1 ] && [ "${mr:-0}" -ge 1 ] && break
	sleep 0.1
done
if [ "${mq:-0}" -ge 1 ] && [ "${mr:-0}" -ge 1 ]; then
	ok "missed: profd_scrape_missed_total counts rounds missed while queued ($mq) and while running ($mr)"
else
	fail "missed: counters" "queued '$mq' running '$mr'; $(tail -5 "$T/missed.err")"
fi
slots=$(metric profd_scrape_cpu_slots)
if [ "$slots" = 1 ]; then ok "missed: profd_scrape_cpu_slots shows --cpu-concurrency"; else fail "missed: cpu slots" "'$slots'"; fi
if grep -q 'level=warn.*type cpu: missed [0-9]* round(s): still waiting for a free slot.*--cpu-concurrency' "$T/missed.err" &&
	grep -q 'level=warn.*type cpu: missed [0-9]* round(s): the last scrape was still running' "$T/missed.err" &&
	[ "$(grep -c 'missed [0-9]* round' "$T/missed.err")" -eq 2 ]; then
	ok "missed: one warning per reason (rate-limited), the queued one names --cpu-concurrency"
else
	fail "missed: warning" "$(grep missed "$T/missed.err" | head -5)"
fi
kill -TERM $SCR
wait $SCR
rc=$?
n=$(sed -n 's/.*msg="stopped" .*missed_rounds=\([0-9]*\).*/\1/p' "$T/missed.err")
if [ "$rc" = 0 ] && [ "${n:-0}" -ge 2 ]; then ok "missed: the last log line counts them (missed_rounds=$n)"; else fail "missed: last line" "exit $rc; $(tail -2 "$T/missed.err")"; fi
no_sanitizer "missed: no sanitizer report" "$T/missed.err"

# ---- 5. usage ---------------------------------------------------------------------------------------

"$PROFD" scrape --help >"$T/help" 2>&1
if [ $? -eq 0 ] && grep -q "Examples:" "$T/help" && grep -q "Exit codes:" "$T/help"; then ok "usage: --help"; else fail "usage: --help" "$(head -5 "$T/help")"; fi
expect_exit "usage: no targets" 2 "no targets" "$PROFD" scrape --once
expect_exit "usage: unknown type" 2 "unknown profile type \"bogus\"" "$PROFD" scrape --once --types cpu,bogus --target h:1 --service s
expect_exit "usage: fractional cpu duration" 2 "whole seconds" "$PROFD" scrape --cpu-duration 1.5s --target h:1 --service s
expect_exit "usage: target without service" 2 "has no service" "$PROFD" scrape --once --target h:1
expect_exit "usage: bad label" 2 "KEY=VALUE" "$PROFD" scrape --once --target h:1 --service s -L novalue
expect_exit "usage: -L service=... (a selector's service is the profile's, never such a label)" 2 \
	"-L service=b: service is not a label: --service NAME sets the service" "$PROFD" scrape --once --target h:1 --service s -L service=b
expect_exit "usage: bad interval" 2 "interval" "$PROFD" scrape --interval 0 --target h:1 --service s
expect_exit "usage: cpu duration not shorter than the interval" 2 "shorter than --interval" "$PROFD" scrape --interval 5s --cpu-duration 5s --target h:1 --service s
expect_exit "usage: ftp target" 2 "only http" "$PROFD" scrape --once --target ftp://h:1 --service s
expect_exit "usage: duplicate target" 2 "given twice" "$PROFD" scrape --once --target h:1 --service s --target http://h:1/debug/pprof --service t
expect_exit "missing --config file is exit 1" 1 "nope.txt" "$PROFD" scrape --once --config "$T/nope.txt"
printf '# targets\n%s service=fromfile env=cfg\n' "$A" >"$T/targets.txt"
"$PROFD" scrape --once -q --collector "$SURL" --types goroutine --config "$T/targets.txt" >"$T/cfg.out" 2>"$T/cfg.err"
rc=$?
if [ $rc -eq 0 ] && [ "$(count fromfile goroutine env=cfg)" -eq 1 ]; then ok "--config: static targets from a file"; else fail "--config" "exit $rc; $(cat "$T/cfg.out" "$T/cfg.err")"; fi

# ---- 6. the YAML config --------------------------------------------------------------------------

# labels_json SERVICE TYPE: the labels array of the newest stored profile
labels_json() {
	curl -sS "$SURL/api/0/profiles?service=$1&type=$2&from=0&to=now&limit=1" | grep -o '"labels":\[[^]]*\]' | head -1
}
# types_of SERVICE: "type=count " for the seven types
types_of() {
	local t out=""
	for t in $TYPES; do out="$out$t=$(count "$1" "$t") "; done
	echo "$out"
}
# flags: --types heap beats global:'s types, -L env=flag beats global:'s env; groups' own keys beat both
cat >"$T/scrape.yaml" <<EOF
# two groups with their own types and labels, one with global:'s
global:
  cpu_duration: 1s
  types: [threadcreate]
  labels: {env: yaml, tier: g}
scrape_configs:
  - service: yaml-a
    types: [cpu, heap]
    labels: {team: a}
    static_configs:
      - targets: ['$A']
        labels: {zone: z1}
  - job_name: yaml-b
    types: goroutine
    label_keep: [env, zone]
    static_configs:
      - targets: ['http://$B/debug/pprof/']
        labels: {zone: z2, dropped: x}
  - service: yaml-c
    static_configs:
      - targets: ['$C']
EOF
"$PROFD" scrape --once --collector "$SURL" --types heap -L env=flag --config "$T/scrape.yaml" >"$T/yaml.out" 2>"$T/yaml.err"
rc=$?
[ $rc -eq 0 ] && ok "yaml: --once --config x.yaml exit 0" || fail "yaml: exit 0" "exit $rc: $(cat "$T/yaml.out" "$T/yaml.err")"
got="$(types_of yaml-a)| $(types_of yaml-b)| $(types_of yaml-c)"
want="cpu=1 heap=1 allocs=0 block=0 mutex=0 goroutine=0 threadcreate=0 | cpu=0 heap=0 allocs=0 block=0 mutex=0 goroutine=1 threadcreate=0 | cpu=0 heap=1 allocs=0 block=0 mutex=0 goroutine=0 threadcreate=0 "
if [ "$got" = "$want" ]; then
	ok "yaml: each group's types stored, exactly (group types > --types > global: types)"
else
	fail "yaml: types per group" "got '$got', want '$want'"
fi
la=$(labels_json yaml-a cpu)
if [ "$la" = "\"labels\":[{\"key\":\"env\",\"value\":\"flag\"},{\"key\":\"instance\",\"value\":\"$A\"},{\"key\":\"team\",\"value\":\"a\"},{\"key\":\"tier\",\"value\":\"g\"},{\"key\":\"zone\",\"value\":\"z1\"}]" ]; then
	ok "yaml: group a's labels: global:, -L over it, the group's, the target's, instance"
else
	fail "yaml: group a labels" "$la"
fi
lb=$(labels_json yaml-b goroutine)
if [ "$lb" = '"labels":[{"key":"env","value":"flag"},{"key":"zone","value":"z2"}]' ]; then
	ok "yaml: label_keep: only env and zone sent"
else
	fail "yaml: label_keep" "$lb"
fi
grep -q "config $T/scrape.yaml: 3 static target(s), 0 kubernetes entries" "$T/yaml.err" && ok "yaml: the log says what the file holds" ||
	fail "yaml: log" "$(head -3 "$T/yaml.err")"
no_sanitizer "yaml: no sanitizer report" "$T/yaml.err"
# a label given at two levels is sent once, the later level's (-L before any --target < a line's or a target's)
printf '%s service=lines-d env=line\n' "$C" >"$T/dup-labels.txt"
"$PROFD" scrape --once --collector "$SURL" --types goroutine -L env=flag --config "$T/dup-labels.txt" \
	--target "$B" --service tgt-e -L env=tgt >"$T/dupl.out" 2>"$T/dupl.err"
ld=$(labels_json lines-d goroutine)
le=$(labels_json tgt-e goroutine)
if [ "$ld" = "\"labels\":[{\"key\":\"env\",\"value\":\"line\"},{\"key\":\"instance\",\"value\":\"$C\"}]" ] &&
	[ "$le" = "\"labels\":[{\"key\":\"env\",\"value\":\"tgt\"},{\"key\":\"instance\",\"value\":\"$B\"}]" ]; then
	ok "a line's env= and a target's -L env= replace -L env= before any --target (one env label each)"
else
	fail "labels at two levels" "line: $ld; target: $le; $(head -c 300 "$T/dupl.err")"
fi
# errors: FILE:LINE:COLUMN, the key, exit 2
printf 'scrape_configs:\n  - service: x\n    types: [cpu, cpux]\n    static_configs: [{targets: [h:1]}]\n' >"$T/bad.yaml"
expect_exit "yaml: unknown type: exit 2, FILE:LINE:COLUMN and the key" 2 \
	"--config $T/bad.yaml:3:18: scrape_configs\[0\]\.types\[1\]: unknown profile type \"cpux\"" "$PROFD" scrape --once --config "$T/bad.yaml"
printf '# typo\nscrape_configs:\n  - service: x\n    intervall: 1m\n    static_configs: [{targets: [h:1]}]\n' >"$T/typo.yml"
expect_exit "yaml: a typo is an unknown key, not ignored" 2 "typo.yml:4:5: scrape_configs\[0\]: unknown key \"intervall\" \(valid: " \
	"$PROFD" scrape --once --config "$T/typo.yml"
printf 'scrape_configs:\n  - job_name: x\n    scrape_interval: 30s\n    static_configs: [{targets: [h:1]}]\n' >"$T/prom.yml"
expect_exit "yaml: a Prometheus key says what to write instead" 2 \
	"prom.yml:3:5: scrape_configs\[0\]: unknown key \"scrape_interval\" \(a Prometheus key\): write interval" "$PROFD" scrape --once --config "$T/prom.yml"
printf 'scrape_configs:\n  - job_name: x\n    static_configs:\n      - targets: [h:1]\n        labels: {service: y}\n' >"$T/svc.yml"
expect_exit "yaml: a label named service is refused (a selector could not reach it)" 2 \
	"svc.yml:5:18: scrape_configs\[0\]\.static_configs\[0\]\.labels: \"service\" is not a label" "$PROFD" scrape --once --config "$T/svc.yml"
printf 'scrape_configs:\n  - service: x\n    static_configs:\n      - targets: [h:1]\n  - service: y\n    static_configs:\n      - targets: ["http://h:1/debug/pprof"]\n' >"$T/dup"
expect_exit "yaml (by content, no .yaml name): duplicate target" 2 "dup:7:19: .*given twice \(first at .*dup:4:19\)" \
	"$PROFD" scrape --once --config "$T/dup"
printf 'scrape_configs:\n  - service: x\n    static_configs: [{targets: ["%s"]}]\n' "$A" >"$T/both.yaml"
expect_exit "yaml: a target both in the file and as --target" 2 "given twice" \
	"$PROFD" scrape --once --config "$T/both.yaml" --target "$A" --service x
expect_exit "yaml: global: interval shorter than --cpu-duration" 2 "global: cpu_duration \(10s\) must be shorter than interval \(5s\)" \
	"$PROFD" scrape --config <(printf 'global:\n  interval: 5s\n') --target h:1 --service s
# examples/scrape.yaml parses (it has kubernetes entries: without a kubeconfig that is exit 1, after parsing)
env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST "$PROFD" scrape --once --config "$ROOT/examples/scrape.yaml" >"$T/ex.out" 2>"$T/ex.err"
rc=$?
if [ $rc -eq 1 ] && grep -q "scrape.yaml: 5 static target(s), 2 kubernetes entries" "$T/ex.err" && grep -q "no kubeconfig" "$T/ex.err"; then
	ok "yaml: examples/scrape.yaml parses (5 targets, 2 kubernetes entries; discovery on)"
else
	fail "yaml: examples/scrape.yaml" "exit $rc: $(cat "$T/ex.err")"
fi
# per-group interval, continuous: 1s against 1h, counted in /metrics
cat >"$T/iv.yaml" <<EOF
global: {types: [heap]}
scrape_configs:
  - service: iv-fast
    interval: 1s
    static_configs: [{targets: ['$A']}]
  - service: iv-slow
    interval: 1h
    static_configs: [{targets: ['$B']}]
EOF
"$PROFD" scrape --collector "$SURL" --config "$T/iv.yaml" --listen 127.0.0.1:0 2>"$T/iv.err" &
SCR=$!
MPORT=$(wait_line "$T/iv.err" '.*metrics listening on port \([0-9][0-9]*\).*')
M=http://127.0.0.1:$MPORT
okrounds() { curl -sS "$M/metrics" | sed -n "s/^profd_scrape_target_scrapes_total{target=\"[^\"]*\",service=\"$1\",outcome=\"ok\"} \([0-9]*\)$/\1/p" | head -1; }
for ((i = 0; i < 100; i++)); do
	[ "$(okrounds iv-fast)" -ge 3 ] 2>/dev/null && break
	sleep 0.1
done
fast=$(okrounds iv-fast) slow=$(okrounds iv-slow)
if [ "${fast:-0}" -ge 3 ] && [ "${slow:-0}" -le 1 ]; then
	ok "yaml: per-group interval: 1s group scraped $fast times, 1h group ${slow:-0} in the same seconds"
else
	fail "yaml: per-group interval" "fast '$fast' slow '$slow'; $(tail -5 "$T/iv.err")"
fi
kill -TERM $SCR
wait $SCR
rc=$?
[ $rc -eq 0 ] && ok "yaml: continuous: SIGTERM exit 0" || fail "yaml: continuous SIGTERM" "exit $rc"
no_sanitizer "yaml: continuous: no sanitizer report" "$T/iv.err"

# ---- 7. TLS to targets: --target-ca, --target-insecure ---------------------------------------------

# a CA and a certificate for 127.0.0.1 (as test_tls.sh makes them), another CA that signed nothing here
PKI=$T/pki
mkdir -p "$PKI"
ossl() { openssl "$@" >>"$PKI/openssl.log" 2>&1; }
for ca in ca otherca; do
	ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$PKI/$ca.key" -out "$PKI/$ca.pem" -days 3 -subj "/CN=$ca"
done
ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$PKI/target.key" -out "$PKI/target.csr" -subj "/CN=target"
echo "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$PKI/target.ext"
ossl x509 -req -in "$PKI/target.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial -out "$PKI/target.pem" -days 3 -extfile "$PKI/target.ext"
# an https:// target: a TLS front (python3 ssl) to goapp A's real pprof endpoints
python3 "$ROOT/tests/tools/tls_front.py" "$A" "$PKI/target.pem" "$PKI/target.key" >"$T/tls-target.log" 2>&1 &
TP=$(wait_line "$T/tls-target.log" '^listening on \([0-9]*\)$')
if [ -s "$PKI/target.pem" ] && [ -n "$TP" ] && curl -sS --cacert "$PKI/ca.pem" -o /dev/null "https://127.0.0.1:$TP/debug/pprof/goroutine"; then
	ok "tls: setup: openssl made a CA and a certificate; an https:// target on :$TP (curl --cacert reads it)"
else
	fail "tls: setup" "$(tail -3 "$PKI/openssl.log") $(cat "$T/tls-target.log")"
fi
TT=https://127.0.0.1:$TP
tls_scrape() { # NAME SERVICE ARGS...: --once over the https target, cpu and heap; out/err/rc in $T/tls-NAME.*
	local name=$1 svc=$2
	shift 2
	"$PROFD" scrape --once --collector "$SURL" --cpu-duration 1s --types cpu,heap --target "$TT" --service "$svc" "$@" \
		>"$T/tls-$name.out" 2>"$T/tls-$name.err"
	echo $? >"$T/tls-$name.rc"
}
tls_scrape ca tls-ca --target-ca "$PKI/ca.pem"
if [ "$(cat "$T/tls-ca.rc")" = 0 ] && [ "$(count tls-ca cpu)" -eq 1 ] && [ "$(count tls-ca heap)" -eq 1 ] &&
	grep -Eq "^$TT/debug/pprof +tls-ca +ok +ok " "$T/tls-ca.out"; then
	ok "tls: --target-ca: the https:// target's cpu and heap profiles are stored"
else
	fail "tls: --target-ca" "exit $(cat "$T/tls-ca.rc"); $(cat "$T/tls-ca.out" "$T/tls-ca.err")"
fi
tls_scrape none tls-none
if [ "$(cat "$T/tls-none.rc")" = 1 ] && [ "$(count tls-none)" -eq 0 ] &&
	grep -Eq "^$TT/debug/pprof +tls-none +network +network " "$T/tls-none.out" &&
	grep -q "type heap: TLS: the target's certificate is not trusted: .*certificate.* (--target-ca FILE names the CA that signed it)" "$T/tls-none.out" &&
	grep -q "type heap: TLS: the target's certificate is not trusted" "$T/tls-none.err"; then
	ok "tls: without --target-ca (the system's CAs): exit 1, a certificate error naming --target-ca, nothing stored"
else
	fail "tls: without --target-ca" "exit $(cat "$T/tls-none.rc"), $(count tls-none) stored; $(cat "$T/tls-none.out" "$T/tls-none.err")"
fi
tls_scrape other tls-other --target-ca "$PKI/otherca.pem"
if [ "$(cat "$T/tls-other.rc")" = 1 ] && [ "$(count tls-other)" -eq 0 ] &&
	grep -q "type cpu: TLS: the target's certificate is not trusted: .* (is it signed by the CA of --target-ca?)" "$T/tls-other.out"; then
	ok "tls: --target-ca of another CA: refused the same way, nothing stored"
else
	fail "tls: --target-ca of another CA" "exit $(cat "$T/tls-other.rc"); $(cat "$T/tls-other.out")"
fi
tls_scrape insecure tls-insecure --target-insecure
if [ "$(cat "$T/tls-insecure.rc")" = 0 ] && [ "$(count tls-insecure cpu)" -eq 1 ] && [ "$(count tls-insecure heap)" -eq 1 ]; then
	ok "tls: --target-insecure: stored without verifying"
else
	fail "tls: --target-insecure" "exit $(cat "$T/tls-insecure.rc"); $(cat "$T/tls-insecure.out" "$T/tls-insecure.err")"
fi
expect_exit "tls: --target-ca FILE that cannot be read: exit 1, names it" 1 "target-ca $T/nope.pem: No such file" \
	"$PROFD" scrape --once --target-ca "$T/nope.pem" --target "$TT" --service s
"$PROFD" scrape --help >"$T/help" 2>&1
grep -q -- "--target-ca FILE" "$T/help" && grep -q -- "--target-insecure" "$T/help" && ok "tls: --help lists --target-ca and --target-insecure" ||
	fail "tls: --help" "$(grep -i target "$T/help")"
no_sanitizer "tls: no sanitizer report" "$T"/tls-*.err

# ---- 8. a target configured with ?debug=1: Go's legacy text formats ----------------------------------

# Every request gets the target's query (heap?debug=1, profile?seconds=1&debug=1); Go
# answers text for heap, allocs, block, mutex, goroutine and threadcreate (cpu is
# always protobuf). What is compared: each stored profile against the very body the
# scraper received (--save-raw): go tool pprof -raw reads the same samples, locations
# and mappings (sample order aside) and -top the same table; the sample types against
# the same kind fetched with curl ...?debug=1 now (a live profile changes between
# two fetches, so its values cannot be compared).
start_goapp l mixed
L=$ADDR_l
sleep 1.5 # samples in block and mutex
"$PROFD" scrape --once --collector "$SURL" --cpu-duration 1s --save-raw "$T/rawleg" \
	--target "http://$L/debug/pprof?debug=1" --service legacy >"$T/leg.out" 2>"$T/leg.err"
rc=$?
# raw TYPE: the body the scraper received for TYPE
raw() { find "$T/rawleg" -name "*.$1.*.pb.gz" | head -1; }
# canon FILE [ARGS]: go tool pprof -raw with each sample on one line (its labels joined), its
# location ids replaced by the locations (address, mapping, lines), sorted: what -raw says,
# whatever ids and order the store gave them
canon() {
	local f=$1
	shift
	go_pprof -raw "$@" "$f" >"$T/canon.raw"
	awk 'FNR == NR {
		if ($0 ~ /^Locations/) { loc = 1; next }
		if ($0 ~ /^Mappings/) loc = 0
		if (loc && $1 ~ /^[0-9]+:$/) { id = substr($1, 1, length($1) - 1); $1 = ""; addr[id] = $0 }
		next
	}
	/^Samples:/ { s = 1; print; next }
	/^Locations/ { s = 0; if (b != "") print b; b = ""; loc = 1; next }
	/^Mappings/ { loc = 0 }
	s && /^ +[a-z_]+:\[/ { b = b " " $0; next }
	s && /: / {
		if (b != "") print b
		split($0, parts, ": ")
		n = split(parts[2], ids, " ")
		b = parts[1] ":"
		for (i = 1; i <= n; i++) b = b " [" addr[ids[i]] "]"
		next
	}
	loc && $1 ~ /^[0-9]+:$/ { $1 = ""; print "location" $0; next }
	{ if (b != "") print b; b = ""; print }
	END { if (b != "") print b }' "$T/canon.raw" "$T/canon.raw" | sort
}
stypes() { go_pprof -raw "$1" | sed -n '/^Samples:/{n;p;q}'; }
tc_go=$(curl -sS "http://$L/debug/pprof/threadcreate?debug=1" -o "$T/leg-curl-threadcreate" && go_pprof -raw "$T/leg-curl-threadcreate" >/dev/null && echo reads || echo refuses)
if [ "$tc_go" = reads ]; then tc_cell=ok; else tc_cell=not_pprof; fi
if grep -Eq "^http://$L/debug/pprof\?debug=1 +legacy +ok +ok +ok\* +ok\* +ok\* +ok +$tc_cell " "$T/leg.out"; then
	ok "debug=1: every type scraped (threadcreate: $tc_cell, as go tool pprof $tc_go Go's text of it); allocs is not refused as a heap profile"
else
	fail "debug=1: table" "exit $rc; $(cat "$T/leg.out" "$T/leg.err")"
fi
grep -q "threadcreate profile, line [0-9]*: malformed (Go's profile.Parse refuses it too; the line is not shown" "$T/leg.out" ||
	[ "$tc_go" = reads ] && ok "debug=1: a threadcreate text that Go's parser refuses says so" ||
	fail "debug=1: threadcreate message" "$(grep threadcreate "$T/leg.out")"
declare -A head=([heap]="heap profile:" [allocs]="heap profile:" [block]="--- contention:" [mutex]="--- mutex:" [goroutine]="goroutine profile: total")
for t in heap allocs block mutex goroutine threadcreate cpu; do
	[ "$t" = threadcreate ] && [ "$tc_go" != reads ] && continue
	r=$(raw "$t")
	id=$(ids legacy "$t" | head -1)
	if [ -z "$r" ] || [ -z "$id" ] || [ "$(count legacy "$t")" -ne 1 ]; then
		fail "debug=1 $t: stored once, raw body kept" "raw '$r' id '$id' $(count legacy "$t") stored"
		continue
	fi
	if [ -n "${head[$t]:-}" ] && ! head -c 40 "$r" | grep -q "^${head[$t]}"; then
		fail "debug=1 $t: Go answered text" "$(head -c 40 "$r" | od -c | head -2)"
		continue
	fi
	curl -sS -o "$T/leg-st-$t" "$SURL/api/0/profiles/$id"
	canon "$r" >"$T/leg-a"
	canon "$T/leg-st-$t" >"$T/leg-b"
	if [ -s "$T/leg-a" ] && cmp -s "$T/leg-a" "$T/leg-b"; then
		ok "debug=1 $t: stored as type $t; go tool pprof -raw of it = -raw of the body the scraper got ($(grep -c . "$T/leg-a") lines)"
	else
		fail "debug=1 $t: -raw" "$(diff "$T/leg-a" "$T/leg-b" | head -10)"
	fi
	# (legacy text has no symbols: -addresses gives a row per address)
	go_pprof -top -addresses -nodecount=100000 "$r" | sed -n '/^Type:/,$p' >"$T/leg-a"
	go_pprof -top -addresses -nodecount=100000 "$T/leg-st-$t" | sed -n '/^Type:/,$p' >"$T/leg-b"
	same_output "debug=1 $t: go tool pprof -top -addresses of the stored profile = of the body the scraper got ($(wc -l <"$T/leg-a") lines)" "$T/leg-a" "$T/leg-b"
	if [ "$t" != cpu ]; then
		curl -sS -o "$T/leg-curl-$t" "http://$L/debug/pprof/$t?debug=1"
		expect "debug=1 $t: sample types = those of curl .../$t?debug=1 now" "$(stypes "$T/leg-curl-$t")" "$(stypes "$T/leg-st-$t")"
	fi
done
for t in allocs mutex; do
	curl -sS -o "$T/leg-m-$t" "$SURL/api/0/profiles/merge?service=legacy&type=$t&from=0&to=now"
	expect "debug=1 $t: the merge API reads it (sample types)" "$(stypes "$(raw $t)")" "$(stypes "$T/leg-m-$t")"
done
# deltas of legacy allocs between two runs (--state-dir): as go tool pprof -base first second
legdelta() {
	"$PROFD" scrape --once -q --collector "$SURL" --state-dir "$T/legstate" --save-raw "$T/legraw2" --types allocs \
		--target "http://$L/debug/pprof?debug=1" --service legdelta >"$T/legd$1.out" 2>&1
}
legdelta 1 && sleep 1 && legdelta 2
rc=$?
# shellcheck disable=SC2207
raws=($(find "$T/legraw2" -name "*.allocs.*.pb.gz" | sort))
id=$(ids legdelta allocs | tail -1)
if [ $rc -eq 0 ] && [ ${#raws[@]} -eq 2 ] && [ -n "$id" ]; then
	curl -sS -o "$T/legd.pb.gz" "$SURL/api/0/profiles/$id"
	go_pprof -top -addresses -nodecount=100000 -sample_index=alloc_space -base "${raws[0]}" "${raws[1]}" | sed -n '/^Showing nodes/,$p' >"$T/leg-a"
	go_pprof -top -addresses -nodecount=100000 -sample_index=alloc_space "$T/legd.pb.gz" | sed -n '/^Showing nodes/,$p' >"$T/leg-b"
	same_output "debug=1 allocs with --state-dir: the stored delta -top -addresses = go tool pprof -base first second of the texts ($(wc -l <"$T/leg-a") lines)" "$T/leg-a" "$T/leg-b"
	canon "${raws[1]}" -base "${raws[0]}" >"$T/leg-a"
	canon "$T/legd.pb.gz" >"$T/leg-b"
	same_output "debug=1 allocs with --state-dir: ... and its -raw (samples, locations, mappings)" "$T/leg-a" "$T/leg-b"
else
	fail "debug=1 allocs delta" "exit $rc, ${#raws[@]} raw, id '$id'; $(cat "$T"/legd*.out)"
fi
# debug=2: goroutine dumps are not profiles (a per-target error); Go's heap?debug=2 is text as debug=1
"$PROFD" scrape --once --collector "$SURL" --types heap,goroutine --target "http://$L/debug/pprof?debug=2" --service dbg2 \
	>"$T/dbg2.out" 2>"$T/dbg2.err"
rc=$?
if [ $rc -eq 1 ] && grep -Eq "debug=2 +dbg2 +ok +not_pprof " "$T/dbg2.out" && [ "$(count dbg2 goroutine)" -eq 0 ] &&
	grep -q "type goroutine: not a pprof profile (got text/plain; charset=utf-8): the body is a goroutine dump (debug=2: stack traces of every goroutine), which no profile parser reads" "$T/dbg2.out"; then
	ok "debug=2: the goroutine dump is a clear per-target error (heap is stored), exit 1"
else
	fail "debug=2" "exit $rc; $(cat "$T/dbg2.out" "$T/dbg2.err")"
fi
grep -q "goroutine 1 \[\|main\.\|runtime\." "$T/dbg2.out" "$T/dbg2.err" && fail "debug=2: the dump is not echoed" "$(grep -h "runtime\." "$T/dbg2.out" "$T/dbg2.err" | head -3)" ||
	ok "debug=2: the dump's stacks are not echoed"
expect_exit "usage: a target query with seconds= (the scraper's own)" 2 "seconds= is the scraper's own parameter" \
	"$PROFD" scrape --once --target "http://$L/debug/pprof?seconds=5" --service s
no_sanitizer "debug=1: no sanitizer report" "$T/leg.err" "$T/dbg2.err" "$T"/legd*.out

no_sanitizer "collector logs: no sanitizer report" "$T"/srv-*.log
echo "# test_scrape.sh took $((SECONDS - t_start)) s"
