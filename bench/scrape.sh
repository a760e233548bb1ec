#!/usr/bin/env bash
# scrape.sh — scraper benchmark (`make bench` runs it after bench/serve.sh):
# one `profd scrape` process against many loopback targets (issue 4: "1,000
# targets at a 60 s interval using < 10 % of one core and < 100 MB RSS").
#
#   targets    bench/targets ($BUILD/targets, Go): PROCS (default 4) processes
#              serving N/PROCS loopback ports each; every port is one target
#              with net/http/pprof's URLs and real examples/goapp profiles
#              (the 5 captures of bench/run.sh, target i gets capture i mod 5;
#              the k-th scrape of allocs/block/mutex gets cumulative values
#              times k+1, so every delta is non-empty). cpu answers after
#              ?seconds=S, as Go does.
#   scraper    profd scrape --config (one line per target, 50 services),
#              pinned to core 0 (taskset -c 0), --listen for /metrics.
#   collector  either a stub that answers every POST with 200 (bench/targets
#              -collector: the scraper's own cost), or a real
#              `profd serve --retention 0` (fresh data dir).
#   Targets and collector share core 1.
#
# Each row: start everything, let one interval + CPU + 3 s pass (every
# target's first round: the cumulative types keep their base), then measure
# over WINDOW = KINT (default 3) intervals:
#   - scrapes done / due: the increase of profd_scrape_target_scrapes_total
#     {outcome="ok"} over all targets (one per type per target per interval
#     is due); "min/target" is the smallest increase of one target (due:
#     types x KINT). Sustained = done >= 99 % of due, min >= types x (KINT-1)
#     (a round finishing just across the window edge), no failed scrape,
#     no profile dropped from the delivery queue, no round missed.
#   - missed rounds: the increase of profd_scrape_missed_total (a job still
#     waiting for a slot or still running at its next due time).
#   - scraper CPU: utime+stime (/proc/PID/stat) over the window; as % of one
#     core; per target per round (window CPU / (targets x KINT)).
#   - peak RSS: VmHWM of the scraper at the end of the row (whole run).
# Rows (ROWS, "targets types concurrency collector [interval cpu]" separated
# by ';'; concurrency "default" = no --concurrency flag; interval and
# --cpu-duration in seconds, default INTERVAL (20) and CPU (3): the issue's
# 60 s and the default 10 s scaled down by 3):
#   500 all default stub
#   1000 all default stub
#   1000 all 256 stub       --concurrency 256 (the rows measured before the
#                           limits were split used it)
#   1000 cpu,heap default stub
#   1000 all default profd  with the real collector
#   1000 all default stub 60 10   the issue's case as it is: 60 s, cpu 10 s
# A cpu scrape holds a slot for its whole --cpu-duration, so about targets x
# cpu / interval of them are in flight (1,000 x 10 / 60 = 167 at the issue's
# numbers); they have their own limit (--cpu-concurrency, derived from the
# targets by default), --concurrency is for the other types. The scaled rows
# are not a linear model of the last one, so the issue's case is measured as
# it is.
#
# The profd binary is copied at start (a rebuild during the run does not mix
# binaries). Medians of SCRAPE_ROUNDS rounds (default: ROUNDS, at most 3; a
# round takes interval x (KINT + 1) + ~10 s: ~35 min in all by default). The
# load average of the machine at the end of each row is shown (other
# processes compete for the cores).
#
# Results: a Markdown table on stdout, appended to $BUILD/bench-results.md.
# Env: ROUNDS, SCRAPE_ROUNDS, BUILD, INTERVAL, CPU, KINT, PROCS, ROWS,
#      PERF=1 (perf record -g the scraper over the window of the last round
#      of each row, into $BUILD/perf-scrape-<row>.data).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-5}
SCRAPE_ROUNDS=${SCRAPE_ROUNDS:-$((ROUNDS < 3 ? ROUNDS : 3))}
INTERVAL=${INTERVAL:-20}
CPU=${CPU:-3}
KINT=${KINT:-3}
PROCS=${PROCS:-4}
PERF=${PERF:-0}
ROWS=${ROWS:-"500 all default stub; 1000 all default stub; 1000 all 256 stub; 1000 cpu,heap default stub; 1000 all default profd; 1000 all default stub 60 10"}
DATA=$PWD/$BUILD/bench-data
for b in profd targets goapp; do
	[ -x "$BUILD/$b" ] || { echo "bench: $BUILD/$b missing (make $BUILD/$b)" >&2; exit 1; }
done
TICK=$(getconf CLK_TCK)
if [ "$(nproc)" -ge 2 ]; then
	PIN_SCRAPER="taskset -c 0" PIN_OTHERS="taskset -c 1"
else
	PIN_SCRAPER="" PIN_OTHERS=""
fi

WORK=$(mktemp -d "$PWD/$BUILD/bench-scrape.XXXXXX")
cp "$BUILD/profd" "$WORK/profd"
PROFD=$WORK/profd
PIDS=() # targets, collector
SCPID=  # the scraper
PERFPID=
cleanup() {
	set +e # a process that is already gone must not stop the clean-up
	[ -n "$PERFPID" ] && kill -INT "$PERFPID" 2>/dev/null
	[ -n "$SCPID" ] && kill -KILL "$SCPID" 2>/dev/null
	local p
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

# the same captures as bench/run.sh
# shellcheck source=bench/goapp.sh
. bench/goapp.sh
goapp_captures "$BUILD" "$DATA" || { echo "bench: capturing examples/goapp failed" >&2; exit 1; }
SETS=$(echo "$DATA"/goapp/run{1,2,3,4,5} | tr ' ' ,)

# wait_line FILE SED-EXPR: the first match of a sed -n expression in FILE (10 s)
wait_line() {
	local v i
	for i in $(seq 200); do
		v=$(sed -n "$2" "$1" | head -n1)
		[ -n "$v" ] && { echo "$v"; return 0; }
		sleep 0.05
	done
	return 1
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { awk -v c="$1" '{print $c}' "$2" | median; }
cpu_s() { awk -v t="$TICK" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat"; }
vm_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# snap FILE: the scraper's /metrics -> FILE
snap() { curl -sf --max-time 10 -o "$1" "http://127.0.0.1:$MPORT/metrics"; }

# one_round N TYPES CONC COLL INTERVAL CPU OUT [PERFFILE]: start, measure, stop;
# appends "due done minper failed dropped cpu hwm rss load posts_ok
# posts_failed missed" to OUT
one_round() {
	local n=$1 types=$2 conc=$3 coll=$4 iv=$5 cs=$6 out=$7 perf=${8:-}
	local per=$(((n + PROCS - 1) / PROCS)) first=0 p
	: >"$WORK/ports"
	PIDS=()
	for ((p = 0; p < PROCS && first < n; p++)); do
		local k=$((n - first < per ? n - first : per))
		# emptied here, not by the redirection of a background job (which may
		# run after wait_line has read the last round's file)
		: >"$WORK/targets.$p.log"
		rm -f "$WORK/ports.$p"
		$PIN_OTHERS "$BUILD/targets" -n "$k" -first "$first" -profiles "$SETS" -ports-file "$WORK/ports.$p" \
			2>"$WORK/targets.$p.log" &
		PIDS+=($!)
		wait_line "$WORK/targets.$p.log" 's/^targets: listening on \([0-9]*\) ports$/\1/p' >/dev/null ||
			{ echo "bench: targets did not start: $(cat "$WORK/targets.$p.log")" >&2; exit 1; }
		cat "$WORK/ports.$p" >>"$WORK/ports"
		first=$((first + k))
	done
	awk '{ printf "%s service=svc%02d\n", $1, (NR - 1) % 50 }' "$WORK/ports" >"$WORK/targets.txt"
	local url
	: >"$WORK/coll.log"
	: >"$WORK/scrape.log"
	if [ "$coll" = stub ]; then
		$PIN_OTHERS "$BUILD/targets" -n 0 -collector 127.0.0.1:0 2>"$WORK/coll.log" &
		PIDS+=($!)
		url=http://$(wait_line "$WORK/coll.log" 's/^targets: collector on //p') ||
			{ echo "bench: stub collector did not start: $(cat "$WORK/coll.log")" >&2; exit 1; }
	else
		rm -rf "$WORK/data"
		$PIN_OTHERS "$PROFD" serve -q --retention 0 --addr 127.0.0.1:0 --data-dir "$WORK/data" 2>"$WORK/coll.log" &
		PIDS+=($!)
		url=http://127.0.0.1:$(wait_line "$WORK/coll.log" 's/.*listening on port \([0-9]*\).*/\1/p') ||
			{ echo "bench: profd serve did not start: $(cat "$WORK/coll.log")" >&2; exit 1; }
	fi
	local ty=$types
	[ "$ty" = all ] && ty=cpu,heap,allocs,block,mutex,goroutine,threadcreate
	local ntypes
	ntypes=$(echo "$ty" | tr , '\n' | grep -c .)
	local concflag=(--concurrency "$conc")
	[ "$conc" = default ] && concflag=()
	$PIN_SCRAPER "$PROFD" scrape --config "$WORK/targets.txt" --collector "$url" --interval "${iv}s" \
		--cpu-duration "${cs}s" --types "$ty" "${concflag[@]}" --listen 127.0.0.1:0 2>"$WORK/scrape.log" &
	SCPID=$!
	MPORT=$(wait_line "$WORK/scrape.log" 's/.*metrics listening on port \([0-9]*\).*/\1/p') ||
		{ echo "bench: profd scrape did not start: $(head -5 "$WORK/scrape.log")" >&2; exit 1; }
	sleep $((iv + cs + 3))
	[ -n "$perf" ] && {
		perf record -q -g -p "$SCPID" -o "$perf" >/dev/null 2>&1 &
		PERFPID=$!
	}
	local c0 c1
	snap "$WORK/m0"
	c0=$(cpu_s "$SCPID")
	sleep $((KINT * iv))
	snap "$WORK/m1"
	c1=$(cpu_s "$SCPID")
	[ -n "$PERFPID" ] && { kill -INT "$PERFPID"; wait "$PERFPID" || true; PERFPID=; }
	local hwm rss load
	hwm=$(vm_kb "$SCPID" VmHWM)
	rss=$(vm_kb "$SCPID" VmRSS)
	load=$(cut -d' ' -f1 /proc/loadavg)
	kill -TERM "$SCPID"
	local rc=0
	wait "$SCPID" || rc=$?
	SCPID=
	[ "$rc" = 0 ] || { echo "bench: profd scrape exited $rc: $(tail -3 "$WORK/scrape.log")" >&2; exit 1; }
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
	# per-target ok/failed increases; queue drops; posts
	awk -v n="$n" -v nt="$ntypes" -v k="$KINT" -v c0="$c0" -v c1="$c1" -v h="$hwm" -v r="$rss" -v l="$load" '
		function val(line) { return line + 0 }
		/^profd_scrape_target_scrapes_total\{/ {
			key = $1; v = $2
			if (FILENAME ~ /m0$/) before[key] = v; else after[key] = v
		}
		/^profd_scrape_queue_dropped_total / { if (FILENAME ~ /m0$/) d0 = $2; else d1 = $2 }
		/^profd_scrape_posts_total\{result="ok"\}/ { if (FILENAME ~ /m0$/) po0 = $2; else po1 = $2 }
		/^profd_scrape_posts_total\{result="failed"\}/ { if (FILENAME ~ /m0$/) pf0 = $2; else pf1 = $2 }
		/^profd_scrape_missed_total\{/ { if (FILENAME ~ /m0$/) mi0 += $2; else mi1 += $2 }
		END {
			min = -1
			for (key in after) {
				inc = after[key] - before[key]
				if (key ~ /outcome="ok"/) { done += inc; if (min < 0 || inc < min) min = inc }
				else failed += inc
			}
			printf "%d %d %d %d %d %.3f %d %d %s %d %d %d\n", n * nt * k, done, min, failed, d1 - d0, c1 - c0, h, r, l,
				po1 - po0, pf1 - pf0, mi1 - mi0
		}' "$WORK/m0" "$WORK/m1" >>"$out"
	cp "$WORK/scrape.log" "$WORK/last-scrape.log"
}

results=$BUILD/bench-results.md
out() { tee -a "$results"; }
{
	echo
	echo "profd scrape bench: $SCRAPE_ROUNDS rounds, medians; $(nproc) CPUs; window $KINT intervals; $(date -u +%Y-%m-%dT%H:%MZ)"
	echo
	echo "One profd scrape pinned to core 0; targets ($PROCS processes of bench/targets, real goapp profiles) and the collector on core 1"
	echo
	echo "| targets | types | --concurrency | interval / --cpu-duration | collector | scrapes done / due (window) | min / target (due) | failed | dropped | missed rounds | sustained | scraper CPU, % of a core | CPU ms / target / round | peak RSS | RSS / target | posts ok / s | load (1 min) |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} | out
IFS=';' read -r -a rows <<<"$ROWS"
for row in "${rows[@]}"; do
	read -r n types conc coll iv cs <<<"$row"
	iv=${iv:-$INTERVAL} cs=${cs:-$CPU}
	t=$WORK/row
	: >"$t"
	nt=7
	[ "$types" = all ] || nt=$(echo "$types" | tr , '\n' | grep -c .)
	for r in $(seq "$SCRAPE_ROUNDS"); do
		pf=
		[ "$PERF" = 1 ] && [ "$r" = "$SCRAPE_ROUNDS" ] && pf=$PWD/$BUILD/perf-scrape-$n-${types//,/+}-$conc-$coll-$iv-$cs.data
		one_round "$n" "$types" "$conc" "$coll" "$iv" "$cs" "$t" "$pf"
		echo "bench: scrape $n $types $conc $coll ${iv}s/${cs}s round $r: $(tail -1 "$t")" >&2
	done
	# columns: 1 due 2 done 3 min 4 failed 5 dropped 6 cpu 7 hwm 8 rss 9 load 10 posts_ok 11 posts_failed 12 missed
	awk -v n="$n" -v ty="$types" -v c="$conc" -v co="$coll" -v nt="$nt" -v k="$KINT" -v iv="$iv" -v cs="$cs" \
		-v due="$(col 1 "$t")" -v done="$(col 2 "$t")" -v min="$(col 3 "$t")" -v f="$(col 4 "$t")" \
		-v d="$(col 5 "$t")" -v cpu="$(col 6 "$t")" -v h="$(col 7 "$t")" -v l="$(col 9 "$t")" \
		-v po="$(col 10 "$t")" -v mi="$(col 12 "$t")" 'BEGIN {
		ok = (done >= 0.99 * due && min >= nt * (k - 1) && f == 0 && d == 0 && mi == 0) ? "yes" : "**no**"
		printf "| %d | %s | %s | %d s / %d s | %s | %d / %d (%.1f %%) | %d (%d) | %d | %d | %d | %s | %.1f %% | %.2f | %.1f MB | %.0f KB | %.0f | %.2f |\n",
			n, ty, c, iv, cs, (co == "stub" ? "stub" : "profd serve"), done, due, 100 * done / due, min, nt * k, f, d, mi, ok,
			100 * cpu / (k * iv), 1000 * cpu / (n * k), h / 1024, h / n, po / (k * iv), l }' | out
done
echo "Target (issue 4): 1,000 targets every 60 s (--cpu-duration 10 s) in < 10 % of one core and < 100 MB RSS." | out
