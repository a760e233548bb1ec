# targets.sh — sourced by bench/run.sh, serve.sh and fleet.sh: each part
# records where issue 18's targets stand in this run, and run.sh prints
# them together at its end ("Issue 18's targets, this run").
#
# $TARGETS (default $BUILD/bench-targets.tsv) holds one line per measured
# target: target, input, measured, goal, met (yes / no), remark; run.sh
# empties it first, so a part run alone appends to the last full run's.
TARGETS=${TARGETS:-$BUILD/bench-targets.tsv}

# target_add TARGET INPUT MEASURED GOAL MET [REMARK]
target_add() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "${6:-}" >>"$TARGETS"
}

# target_met EXPR: "yes" if the awk expression holds, else "no"
target_met() { awk "BEGIN { print (($1) ? \"yes\" : \"no\") }"; }

# target_print: the table of every recorded target, and a count
target_print() {
	[ -s "$TARGETS" ] || return 0
	echo
	echo "Issue 18's targets, this run (docs/benchmarks.md says why the unmet ones stand where they do):"
	echo
	echo "| target | input | this run | goal | met | |"
	echo "|---|---|---|---|---|---|"
	awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }' "$TARGETS"
	awk -F'\t' '{ n++; if ($5 == "yes") y++ } END { printf "%d of %d targets met in this run.\n", y, n }' "$TARGETS"
}
