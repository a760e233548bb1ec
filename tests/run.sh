#!/usr/bin/env bash
# run.sh — the one test command (`make test` runs it): unit tests (cmocka),
# fuzz-corpus replay, end-to-end tests. Ends with one line
# "N passed, N failed"; exits non-zero if anything failed or nothing ran.
#   tests/run.sh [unit|replay|e2e]...   (default: all)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
passed=0 failed=0
log=$(mktemp)
nok=$(mktemp) # every failure's line, said again just above the summary
trap 'rm -f "$log" "$nok"' EXIT
want() { [ $# -eq 0 ] && return 0; for w in $SELECT; do [ "$w" = "$1" ] && return 0; done; return 1; }
SELECT="${*:-unit replay e2e}"

count_cmocka() { # parse cmocka's summary lines from $log
	local p f
	p=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | awk '{s+=$NF} END {print s+0}')
	f=$(grep -Eo '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$(NF-1)} END {print s+0}')
	passed=$((passed + p)); failed=$((failed + f))
}

# With the end-to-end tests too, the unit tests and the replay run beside
# them (a child run of this script, its output printed and counted at the
# end): they mostly wait on the scheduler's real intervals.
if want e2e && { want unit || want replay; } && [ -z "${RUN_SH_CHILD:-}" ]; then
	side=$(mktemp)
	sel=""
	want unit && sel+=" unit"
	want replay && sel+=" replay"
	# shellcheck disable=SC2086 # the phases are words on purpose
	RUN_SH_CHILD=1 bash "$0" $sel >"$side" 2>&1 &
	side_pid=$!
	SELECT=e2e
fi

if want unit; then
	echo "== unit tests"
	for t in "$BUILD"/tests/test_*; do
		[ -x "$t" ] || continue
		: >"$log"
		"$t" 2>&1 | tee -a "$log"
		rc=${PIPESTATUS[0]}
		count_cmocka
		grep '^\[  FAILED  \] test' "$log" | sed "s|^|${t##*/}: |" >>"$nok"
		if [ "$rc" -ne 0 ] && ! grep -q '^\[  FAILED  \]' "$log"; then
			echo "not ok - $(basename "$t") crashed (exit $rc)" | tee -a "$nok"; failed=$((failed + 1))
		fi
	done
fi

if want replay; then
	echo "== fuzz corpus replay"
	for r in "$BUILD"/tests/replay_*; do
		[ -x "$r" ] || continue
		name=${r##*/replay_}
		if out=$("$r" tests/fuzz/corpus/"$name" 2>&1); then
			echo "ok - replay $name: $out"; passed=$((passed + 1))
		else
			echo "not ok - replay $name: $(echo "$out" | tail -20)" | tee -a "$nok"; failed=$((failed + 1))
		fi
	done
fi

if want e2e; then
	# The scripts are independent (each has its own temp dir and free ports)
	# and mostly wait on real processes, so E2E_JOBS of them run at once
	# (default: 2 x cores + 1). Each one's output is printed whole when it ends,
	# with its time; the longest known ones (measured: 20-60 s each) start
	# first so the tail is short.
	# (ASan+UBSan builds, twice as heavy: cores + 2)
	ncpu=$(nproc 2>/dev/null || echo 1)
	case $BUILD in *san*) jobs_max=${E2E_JOBS:-$((ncpu + 2))} ;; *) jobs_max=${E2E_JOBS:-$((2 * ncpu + 1))} ;; esac
	echo "== end-to-end tests ($jobs_max at a time)"
	outdir=$(mktemp -d)
	trap 'rm -f "$log" "$nok"; rm -rf "$outdir"' EXIT
	first="test_clickhouse_cluster test_capture test_dist_arm64 test_image test_deploy test_scrape test_ui test_clickhouse test_scrape_kube
		test_regressions test_api1_series test_abuse test_clickhouse_env test_badinput test_client test_serve
		test_store_faults test_serve_ops test_rollups test_prometheus test_kubeapi"
	first=$(echo $first) # one space between the names: the case below matches " name "
	scripts=()
	for n in $first; do [ -f "tests/e2e/$n.sh" ] && scripts+=("tests/e2e/$n.sh"); done
	for s in tests/e2e/test_*.sh; do
		[ -f "$s" ] || continue
		n=${s##*/}
		case " $first " in *" ${n%.sh} "*) continue ;; esac
		scripts+=("$s")
	done
	declare -A started=() script_of=()
	report() { # pid: print and count the finished script's output
		local pid=$1 s=${script_of[$1]} p f
		local out="$outdir/${s##*/}.log"
		echo "# $s ($((SECONDS - started[$1])) s)"
		cat "$out"
		p=$(grep -c '^ok - ' "$out"); f=$(grep -c '^not ok - ' "$out")
		grep '^not ok - ' "$out" | cut -c1-300 | sed "s|^|${s##*/}: |" >>"$nok"
		passed=$((passed + p)); failed=$((failed + f))
	}
	reap() { # wait for one script to end and report it (the unit tests' child may end meanwhile)
		local rc
		while :; do
			wait -n -p done_pid
			rc=$?
			if [ -n "${side_pid:-}" ] && [ "$done_pid" = "$side_pid" ]; then
				side_rc=$rc side_done=1
				continue
			fi
			report "$done_pid"; running=$((running - 1))
			return
		done
	}
	running=0
	for s in "${scripts[@]}"; do
		if [ "$running" -ge "$jobs_max" ]; then
			reap
		fi
		bash "$s" >"$outdir/${s##*/}.log" 2>&1 &
		started[$!]=$SECONDS script_of[$!]=$s
		running=$((running + 1))
	done
	while [ "$running" -gt 0 ]; do
		reap
	done
fi

if [ -n "${side_pid:-}" ]; then
	if [ -z "${side_done:-}" ]; then
		wait "$side_pid"
		side_rc=$?
	fi
	sed '$d' "$side"
	grep -e '^not ok - ' -e '^\[  FAILED  \] test' "$side" >>"$nok"
	echo "# unit tests and replay: $(tail -1 "$side")"
	sp=$(tail -1 "$side" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
	sf=$(tail -1 "$side" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
	if [ -z "$sp" ]; then
		echo "not ok - the unit tests and replay ended without their summary (exit $side_rc)" | tee -a "$nok"
		failed=$((failed + 1))
	else
		passed=$((passed + sp)); failed=$((failed + sf))
	fi
	rm -f "$side"
fi

if [ "$failed" -gt 0 ] && [ -z "${RUN_SH_CHILD:-}" ]; then
	# said again just above the summary, where a log's tail shows them
	echo "# what failed:"
	cut -c1-300 "$nok" | awk '!seen[$0]++'
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
