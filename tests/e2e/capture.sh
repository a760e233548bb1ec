#!/usr/bin/env bash
# capture.sh — start the example Go service (examples/goapp) on a free port
# and download all seven pprof profile types from it, for e2e tests and
# `make demo`.
#
# Usage: capture.sh GOAPP_BIN OUTDIR [CPU_SECONDS]
#
# Writes OUTDIR/{cpu,heap,allocs,block,mutex,goroutine,threadcreate}.pb.gz,
# checks that each one is non-empty gzip (magic 1f 8b), prints one summary
# line per file and exits 0. The CPU profile (CPU_SECONDS long, default 2) is
# fetched in the background while the others are downloaded. The goapp
# process is always killed on exit, including on failure.
# Extra goapp flags can be passed in GOAPP_ARGS (e.g. "-workload auth").
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
	echo "usage: $0 GOAPP_BIN OUTDIR [CPU_SECONDS]" >&2
	exit 2
fi
goapp_bin=$1
outdir=$2
cpu_seconds=${3:-2}
ready_timeout=10 # seconds to wait for the "listening on" line

if [[ ! -x $goapp_bin ]]; then
	echo "capture.sh: $goapp_bin is not executable" >&2
	exit 2
fi
if ! [[ $cpu_seconds =~ ^[1-9][0-9]*$ ]]; then
	echo "capture.sh: CPU_SECONDS must be a positive integer, got '$cpu_seconds'" >&2
	exit 2
fi
mkdir -p "$outdir"

workdir=$(mktemp -d)
app_pid=
cpu_pid=
# shellcheck disable=SC2317 # invoked through the EXIT trap
cleanup() {
	if [[ -n $cpu_pid ]]; then kill "$cpu_pid" 2>/dev/null || true; fi
	if [[ -n $app_pid ]]; then
		kill "$app_pid" 2>/dev/null || true
		wait "$app_pid" 2>/dev/null || true
	fi
	rm -rf "$workdir"
}
trap cleanup EXIT

# shellcheck disable=SC2086 # GOAPP_ARGS is deliberately word-split
: >"$workdir/goapp.log" # exists before sed reads it, even if the shell is slow to start goapp
"$goapp_bin" -addr 127.0.0.1:0 ${GOAPP_ARGS:-} 2>"$workdir/goapp.log" &
app_pid=$!

# Wait for "goapp: listening on HOST:PORT".
addr=
deadline=$((SECONDS + ready_timeout))
while [[ -z $addr ]]; do
	addr=$(sed -n 's/^goapp: listening on \(.*\)$/\1/p' "$workdir/goapp.log" | head -n1)
	[[ -n $addr ]] && break
	if ! kill -0 "$app_pid" 2>/dev/null; then
		echo "capture.sh: goapp exited before it was ready:" >&2
		cat "$workdir/goapp.log" >&2
		exit 1
	fi
	if ((SECONDS >= deadline)); then
		echo "capture.sh: goapp not ready after ${ready_timeout}s:" >&2
		cat "$workdir/goapp.log" >&2
		exit 1
	fi
	sleep 0.05
done
base="http://$addr/debug/pprof"

sleep 1 # let some work happen before profiling

fetch() { # fetch NAME URL MAX_SECONDS
	curl --silent --show-error --fail --max-time "$3" -o "$outdir/$1.pb.gz" "$2"
}

fetch cpu "$base/profile?seconds=$cpu_seconds" $((cpu_seconds + 15)) &
cpu_pid=$!
for name in heap allocs block mutex goroutine threadcreate; do
	if ! fetch "$name" "$base/$name" 15; then
		echo "capture.sh: fetching the $name profile failed" >&2
		exit 1
	fi
done
cpu_status=0
wait "$cpu_pid" || cpu_status=$?
cpu_pid=
if ((cpu_status != 0)); then
	echo "capture.sh: fetching the CPU profile failed (curl status $cpu_status)" >&2
	exit 1
fi

failed=0
for name in cpu heap allocs block mutex goroutine threadcreate; do
	file=$outdir/$name.pb.gz
	size=$(stat -c %s "$file" 2>/dev/null || echo 0)
	magic=$(head -c 2 "$file" 2>/dev/null | od -An -tx1 | tr -d ' \n')
	if ((size > 0)) && [[ $magic == 1f8b ]]; then
		printf '%-13s %8d bytes  %s\n' "$name" "$size" "$file"
	else
		printf '%-13s %8d bytes  %s  NOT GZIP (magic "%s")\n' "$name" "$size" "$file" "$magic" >&2
		failed=1
	fi
done
exit "$failed"
