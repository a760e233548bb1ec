#!/usr/bin/env bash
# test_api1_series.sh — end-to-end tests of API v1's series and diff routes,
# the `profd diff` command and `profd serve --export-influx`, against a real
# collector holding real CPU and heap profiles of two example Go services
# (examples/goapp, two workloads) posted with distinct created_at times
# across several steps and two versions:
#   1. series (tests/e2e/series_check.py): per step, per service / label /
#      function, = go tool pprof -top of that step's files merged with
#      go tool pprof -proto (totals, flat, cum, sums over a regex, heap with
#      -sample_index); format=prometheus passes promtool check metrics and a
#      strict parser, format=influx InfluxDB's own parser ($BUILD/influxcheck),
#      both carrying the JSON's points; label escaping
#   2. diff: rows = go tool pprof -top -diff_base BASE TARGET (also
#      -normalize, -sample_index, time ranges, several services); the pprof
#      form read by go tool pprof -top = -top -diff_base; flame graph sums
#   3. bad queries: 400 (or 404/413) with a message naming the problem
#   4. profd diff: the table = go tool pprof -top -diff_base's; -o, --print-url;
#      usage errors, nothing found, collector down
#   5. profd serve --export-influx: the pushed lines parse, carry the token,
#      = go tool pprof -top of the window's profiles; a failing endpoint is
#      logged and counted in /metrics and never blocks the server; usage
# Run: BUILD=build bash tests/e2e/test_api1_series.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
export ROOT BUILD

CHECK=$ROOT/tests/e2e/series_check.py
INFLUXCHECK=$ROOT/$BUILD/influxcheck
GA=$GOAPP
[ -x "$GA" ] || GA=$ROOT/build/goapp # a Go program, not sanitized
unset PROFD_COLLECTOR PROFD_INFLUX_TOKEN
PIDS=()
stop_all() {
	local p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	PIDS=()
}
prev_trap=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
# shellcheck disable=SC2064 # expanded now on purpose: lib.sh's command
trap "stop_all; $prev_trap" EXIT

need_built 0 "make $BUILD/profd $BUILD/goapp $BUILD/influxcheck" "$PROFD" "$GA" "$INFLUXCHECK"
NEED_WHY="needed by this test (tools/deps.sh installs it)" need_cmds 0 go curl python3 promtool

# start_serve LOG ARGS...: profd serve on a free port; sets PORT (empty on failure) and adds the pid
start_serve() {
	local log=$1
	shift
	# emptied here, not only by the child's redirection: a log reused from an earlier server
	# would otherwise be read before the child truncates it, and give that server's port
	: >"$log"
	"$PROFD" serve --addr 127.0.0.1:0 --retention 0 "$@" 2>"$log" &
	local pid=$!
	PIDS+=("$pid")
	PORT=
	for ((k = 0; k < 200; k++)); do
		PORT=$(sed -n 's/.*listening on port \([0-9][0-9]*\).*/\1/p' "$log" | head -n1)
		[ -n "$PORT" ] && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	fail "setup: profd serve $*" "no 'listening on port' line: $(head -c 600 "$log")"
	return 1
}

# ---- 0. profiles: two services' worth of real CPU and heap profiles --------------------------

# capture NAME WORKLOAD DIR: goapp running WORKLOAD; 6 CPU profiles of 1s and 2 heap profiles
capture() {
	local dir=$3 addr= k
	mkdir -p "$dir"
	: >"$dir/goapp.log"
	"$GA" -addr 127.0.0.1:0 -service "$1" -workload "$2" 2>"$dir/goapp.log" &
	cap_pid=$! # runs in a background subshell: its EXIT trap stops goapp whatever happens
	trap 'kill "$cap_pid" 2>/dev/null; wait "$cap_pid" 2>/dev/null' EXIT
	for ((k = 0; k < 200; k++)); do
		addr=$(sed -n 's/^goapp: listening on \(.*\)$/\1/p' "$dir/goapp.log" | head -n1)
		[ -n "$addr" ] && break
		sleep 0.05
	done
	sleep 0.5
	local rc=0
	for k in 0 1 2 3 4 5; do
		curl -sSf --max-time 30 -o "$dir/cpu$k.pb.gz" "http://$addr/debug/pprof/profile?seconds=1" || rc=1
	done
	for k in 0 1; do
		curl -sSf --max-time 30 -o "$dir/heap$k.pb.gz" "http://$addr/debug/pprof/heap" || rc=1
		sleep 0.2
	done
	return $rc
}
capture a auth "$T/a" >"$T/cap-a.log" 2>&1 &
ca=$!
capture b search "$T/b" >"$T/cap-b.log" 2>&1 &
cb=$!
wait $ca && wait $cb
miss=
for f in a/cpu{0..5} b/cpu{0..5} a/heap{0,1} b/heap{0,1}; do [ -s "$T/$f.pb.gz" ] || miss="$miss $f"; done
if [ -n "$miss" ]; then
	fail "setup: capture 12 CPU and 4 heap profiles from goapp" "missing:$miss: $(tail -c 400 "$T/cap-a.log" "$T/cap-b.log")"
	exit 0
fi
ok "setup: 12 CPU profiles (1s) and 4 heap profiles from goapp -workload auth / search"

# The manifest: service "api" runs version 1.0 = workload auth, then 1.1 = search;
# "db" the other way round; one profile every 100 s from T0 (a multiple of 10 min, 3 h ago).
now=$(date +%s)
T0=$(((now - 3 * 3600) / 600 * 600))
M=$T/manifest
: >"$M"
for k in 0 1 2; do
	echo "$T/a/cpu$k.pb.gz api cpu 1.0 $((T0 + k * 100))" >>"$M"
	echo "$T/b/cpu$k.pb.gz api cpu 1.1 $((T0 + (k + 3) * 100))" >>"$M"
	echo "$T/b/cpu$((k + 3)).pb.gz db cpu 1.0 $((T0 + k * 100 + 50))" >>"$M"
	echo "$T/a/cpu$((k + 3)).pb.gz db cpu 1.1 $((T0 + (k + 3) * 100 + 50))" >>"$M"
done
{
	echo "$T/a/heap0.pb.gz api heap 1.0 $((T0 + 10))"
	echo "$T/b/heap0.pb.gz api heap 1.1 $((T0 + 310))"
	echo "$T/b/heap1.pb.gz db heap 1.0 $((T0 + 60))"
	echo "$T/a/heap1.pb.gz db heap 1.1 $((T0 + 360))"
	# label values with every character the text forms escape: " \ , space =
	echo "$T/a/cpu0.pb.gz esc cpu q%22u%20o%2Ct%3De%5Cx $((T0 + 20))"
	echo "$T/b/cpu0.pb.gz esc cpu type $((T0 + 30))"
} >>"$M"

if ! start_serve "$T/serve.log" --data-dir "$T/data" -q; then exit 0; fi
URL=http://127.0.0.1:$PORT
check "setup: post the $(wc -l <"$M") profiles with their created_at and version" python3 "$CHECK" post "$URL" "$M"

# ---- 1-3. series, diff, bad queries -------------------------------------------------------------

mkdir -p "$T/py"
python3 "$CHECK" series "$URL" "$M" "$T/py" 2>&1
python3 "$CHECK" diff "$URL" "$M" "$T/py" 2>&1
python3 "$CHECK" bad "$URL" "$M" 2>&1
if grep -q "Sanitizer\|runtime error" "$T/serve.log"; then
	fail "collector: no sanitizer report" "$(grep -m1 -A20 "Sanitizer\|runtime error" "$T/serve.log" | head -c 1500)"
else
	ok "collector: no sanitizer report after the series, diff and bad queries"
fi

# ---- 4. profd diff --------------------------------------------------------------------------------

TOPA=(-top -nodefraction=0 -edgefraction=0)
go tool pprof -proto "$T/a/cpu0.pb.gz" "$T/a/cpu1.pb.gz" "$T/a/cpu2.pb.gz" >"$T/base.pb.gz" 2>/dev/null
go tool pprof -proto "$T/b/cpu0.pb.gz" "$T/b/cpu1.pb.gz" "$T/b/cpu2.pb.gz" >"$T/target.pb.gz" 2>/dev/null
R=(--collector "$URL" --from "$((T0 - 60))" --to "$((T0 + 900))")
BASE='cpu{service="api",version="1.0"}'
TARGET='cpu{service="api",version="1.1"}'
# the table from its column header on = go tool pprof's (the lines above differ in wording).
# With a -nodecount, pprof decides "(inline)" on the graph of the kept nodes only (an edge from a
# dropped caller counts as not inlined), profd on the whole graph: markers compared with -n 0 only.
table_eq() { # NAME PROFD_OUT PPROF_OUT [strip-inline]
	local strip='s/$//'
	[ -n "${4:-}" ] && strip='s/ (\(partial-\)\{0,1\}inline)$//'
	if sed -n '/^ *flat  flat%/,$p' "$2" | sed "$strip" >"$T/.t1" && sed -n '/^ *flat  flat%/,$p' "$3" | sed "$strip" >"$T/.t2" &&
		[ -s "$T/.t1" ] && cmp -s "$T/.t1" "$T/.t2"; then
		ok "$1"
	else
		fail "$1" "$(diff "$T/.t1" "$T/.t2" | head -10)"
	fi
}
for n in 10 0; do
	nc=$n
	[ "$n" = 0 ] && nc=100000
	if "$PROFD" diff "${R[@]}" --base "$BASE" --target "$TARGET" --limit "$n" >"$T/d.out" 2>>"$T/d.err"; then
		go tool pprof "${TOPA[@]}" -nodecount=$nc -diff_base "$T/base.pb.gz" "$T/target.pb.gz" >"$T/d.want" 2>/dev/null
		table_eq "profd diff -n $n: the table = go tool pprof -top -diff_base's" "$T/d.out" "$T/d.want" \
			"$([ "$n" = 0 ] || echo strip)"
	else
		fail "profd diff --limit $n" "exit $?: $(head -c 400 "$T/d.err")"
	fi
done
if "$PROFD" diff "${R[@]}" --base "$BASE" --target "$TARGET" --normalize --cum --limit 15 >"$T/d.out" 2>>"$T/d.err"; then
	go tool pprof "${TOPA[@]}" -cum -nodecount=15 -normalize -diff_base "$T/base.pb.gz" "$T/target.pb.gz" >"$T/d.want" 2>/dev/null
	table_eq "profd diff --normalize --cum: = go tool pprof -top -cum -normalize -diff_base" "$T/d.out" "$T/d.want" strip
	if grep -q '^Base: cpu{service="api",version="1.0"}, 3 profiles, ' "$T/d.out" &&
		grep -q '^Target: cpu{service="api",version="1.1"}, 3 profiles, ' "$T/d.out" && grep -q '^Normalized' "$T/d.out"; then
		ok "profd diff: Base/Target lines name the selectors and their profile counts"
	else
		fail "profd diff: Base/Target lines" "$(head -5 "$T/d.out")"
	fi
else
	fail "profd diff --normalize --cum" "$(head -c 400 "$T/d.err")"
fi
if "$PROFD" diff "${R[@]}" --base "$BASE" --target "$TARGET" -O "$T/diff.pb.gz" 2>>"$T/d.err" &&
	go tool pprof "${TOPA[@]}" -nodecount=100000 "$T/diff.pb.gz" 2>/dev/null | sed -n '/^Showing nodes/,$p' >"$T/d.got" &&
	go tool pprof "${TOPA[@]}" -nodecount=100000 -diff_base "$T/base.pb.gz" "$T/target.pb.gz" 2>/dev/null |
	sed -n '/^Showing nodes/,$p' >"$T/d.want" && [ -s "$T/d.want" ] && grep -q "wrote $T/diff.pb.gz" "$T/d.err"; then
	same_output "profd diff -o FILE: go tool pprof -top FILE = go tool pprof -top -diff_base" "$T/d.got" "$T/d.want"
else
	fail "profd diff -O FILE" "$(head -c 400 "$T/d.err")"
fi
if u=$("$PROFD" diff "${R[@]}" --base "$BASE" --target "$TARGET" --print-url 2>>"$T/d.err") &&
	go tool pprof "${TOPA[@]}" -nodecount=100000 "$u" 2>/dev/null | sed -n '/^Showing nodes/,$p' >"$T/d.got"; then
	same_output "profd diff --print-url: go tool pprof URL = -diff_base" "$T/d.got" "$T/d.want"
else
	fail "profd diff --print-url" "$u $(head -c 400 "$T/d.err")"
fi
expect_exit "profd diff without --target: usage error" 2 "--base SELECTOR and --target SELECTOR are required" \
	"$PROFD" diff --collector "$URL" --base cpu
expect_exit "profd diff -O and --print-url: usage error" 2 "choose one" \
	"$PROFD" diff --collector "$URL" --base cpu --target cpu -O x --print-url
expect_exit "profd diff --base-from after --base-to: usage error" 2 "the base's range starts" \
	"$PROFD" diff --collector "$URL" --base cpu --target cpu --base-from -1h --base-to -2h
expect_exit "profd diff: a selector error is the collector's message" 1 \
	"diff: comparing the selections: the collector at .* answered 400: bad \"base\": bad query" \
	"$PROFD" diff "${R[@]}" --base 'cpu{' --target cpu
expect_exit "profd diff: nothing in the base: exit 1 naming the side" 1 "answered 404: base: no profiles match" \
	"$PROFD" diff "${R[@]}" --base 'cpu{service="nosuch"}' --target cpu
expect_exit "profd diff: collector down: one line with a hint" 1 "is .profd serve. running" \
	"$PROFD" diff --collector http://127.0.0.1:1 --base cpu --target cpu
if "$PROFD" diff --help | grep -q "^Usage: profd diff --base SELECTOR --target SELECTOR" &&
	"$PROFD" --help | grep -q "^  diff "; then
	ok "profd diff --help, and diff in profd --help"
else
	fail "profd diff --help" "$("$PROFD" diff --help 2>&1 | head -3)"
fi

# ---- 5. --export-influx -------------------------------------------------------------------------

RECV=$T/recv
mkdir -p "$RECV"
"$INFLUXCHECK" serve "$RECV" 2>"$T/recv.log" &
PIDS+=($!)
raddr=
for ((k = 0; k < 200; k++)); do
	raddr=$(sed -n 's/^influxcheck: listening on //p' "$T/recv.log")
	[ -n "$raddr" ] && break
	sleep 0.05
done
TOKEN=s3cr3t-$$
if PROFD_INFLUX_TOKEN=$TOKEN start_serve "$T/serve-x.log" --data-dir "$T/data-x" \
	--export-influx "http://$raddr/api/v2/write?org=o&bucket=b&precision=ns" --export-every 3s --export-delay 1s \
	--export-top 3; then
	XURL=http://127.0.0.1:$PORT
	python3 "$CHECK" export "$XURL" "$M" "$T/py" "$RECV" "$TOKEN" 2>&1
	curl -sS "$XURL/metrics" >"$T/metrics"
	ok_n=$(sed -n 's/^profd_export_windows_total{result="ok"} //p' "$T/metrics")
	lines=$(sed -n 's/^profd_export_lines_total //p' "$T/metrics")
	if [ "${ok_n:-0}" -ge 1 ] && [ "${lines:-0}" -ge 8 ] && grep -q '^profd_export_windows_total{result="empty"} ' "$T/metrics"; then
		ok "export: /metrics counts the pushed windows ($ok_n) and lines ($lines)"
	else
		fail "export: /metrics counts" "$(grep profd_export "$T/metrics")"
	fi
	if promtool check metrics <"$T/metrics" >"$T/promtool.out" 2>&1 || ! grep -q "profd_export" "$T/promtool.out"; then
		ok "export: the profd_export_* series pass promtool check metrics"
	else
		fail "export: promtool check metrics" "$(grep profd_export "$T/promtool.out" | head -5)"
	fi
	grep -q "$TOKEN" "$T/serve-x.log" && fail "export: the token is never logged" "found in the log" ||
		ok "export: the token is never logged"
fi

# a failing endpoint (500), then an unreachable one: logged, counted, the server unaffected
RECV2=$T/recv2
mkdir -p "$RECV2"
"$INFLUXCHECK" serve "$RECV2" -fail 1000 2>"$T/recv2.log" &
PIDS+=($!)
raddr2=
for ((k = 0; k < 200; k++)); do
	raddr2=$(sed -n 's/^influxcheck: listening on //p' "$T/recv2.log")
	[ -n "$raddr2" ] && break
	sleep 0.05
done
for target in "http://$raddr2/write?db=profd" "http://127.0.0.1:1/write?db=profd"; do
	if ! start_serve "$T/serve-f.log" --data-dir "$T/data-f" --export-influx "$target" --export-every 1s \
		--export-delay 0s -q; then continue; fi
	FURL=http://127.0.0.1:$PORT
	errs=0
	# post into the current window until one push has failed, been counted and logged (the
	# counter and the log line are two steps: wait for both, a loaded machine can split them)
	for ((k = 0; k < 100; k++)); do
		curl -sS -o /dev/null -X POST --data-binary @"$T/a/cpu0.pb.gz" "$FURL/api/0/profiles?service=api&type=cpu&created_at=now"
		errs=$(curl -sS "$FURL/metrics" | sed -n 's/^profd_export_windows_total{result="error"} //p')
		[ "${errs:-0}" -ge 1 ] && grep -q 'level=error component=export msg="window .* lines not delivered: POST ' "$T/serve-f.log" && break
		sleep 0.2
	done
	t0=$(date +%s%N)
	curl -sS -o /dev/null "$FURL/healthz"
	dt=$((($(date +%s%N) - t0) / 1000000))
	if [ "${errs:-0}" -ge 1 ] && grep -q 'level=error component=export msg="window .* lines not delivered: POST ' "$T/serve-f.log" &&
		[ "$dt" -lt 1000 ]; then
		ok "export to $target: failures logged and counted (profd_export_windows_total{result=\"error\"} $errs), /healthz in ${dt}ms"
	else
		fail "export to $target: failures logged and counted" "errors=$errs healthz ${dt}ms: $(grep export "$T/serve-f.log" | head -3)"
	fi
	kill -TERM "${PIDS[-1]}"
	wait "${PIDS[-1]}"
	rc=$?
	unset 'PIDS[-1]'
	if [ "$rc" -eq 0 ] && grep -q 'msg="stopped"' "$T/serve-f.log"; then
		ok "export to $target: SIGTERM stops the server and the exporter (exit 0)"
	else
		fail "export to $target: SIGTERM" "exit $rc: $(tail -3 "$T/serve-f.log")"
	fi
	rm -rf "$T/data-f"
done

expect_exit "serve --export-every without --export-influx: usage error" 2 "need --export-influx URL" \
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/d2" --export-every 1m
expect_exit "serve --export-influx ftp://: usage error" 2 "--export-influx: want an http:// or https:// URL" \
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/d2" --export-influx ftp://x/write
expect_exit "serve --export-every 1500ms: usage error" 2 "--export-every: want whole seconds" \
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/d2" --export-influx http://x/write --export-every 1500ms
expect_exit "serve --export-query with a bad selector: usage error" 2 "--export-query: bad query" \
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/d2" --export-influx http://x/write --export-query 'cpu{'
if "$PROFD" serve --help | grep -q -- "--export-influx URL" && "$PROFD" serve --help | grep -q "/api/1/series, /api/1/diff"; then
	ok "serve --help documents --export-influx and the new routes"
else
	fail "serve --help" "no --export-influx"
fi
stop_all # the servers' exit (leak reports of sanitized builds come then)
for f in "$T"/serve*.log "$T"/d.err; do
	if grep -q "Sanitizer\|runtime error" "$f"; then
		fail "no sanitizer report in $(basename "$f")" "$(grep -m1 -A20 "Sanitizer\|runtime error" "$f" | head -c 1500)"
	else
		ok "no sanitizer report in $(basename "$f") (after shutdown)"
	fi
done
