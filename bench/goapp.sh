# goapp.sh — sourced by bench scripts (run.sh, scrape.sh, serve.sh, soak.sh,
# soak_scrape.sh).
#
# goapp_captures BUILD DATA: DATA/goapp/run1..run5, five captures of
# examples/goapp (tests/e2e/capture.sh, every type, cpu 2 s), made once and
# kept (DATA/goapp/.done).
#
# scrape_goapp BUILD WORK OUT N TYPES PAUSE: start examples/goapp
# ($BUILD/goapp) on a free port, let its workload run a second, download N
# rounds of TYPES (comma-separated; cpu = 1 s profiles, back to back beside
# the others) PAUSE apart into OUT/TYPE/NNNN.pb.gz with bench/loadgen
# scrape, and stop it. GPID is goapp's pid while it runs: the caller's EXIT
# trap kills it. Returns 1 (with a message) if goapp does not start or a
# scrape fails.
scrape_goapp() {
	local build=$1 work=$2 out=$3 n=$4 types=$5 pause=$6 addr= rc=0
	"$build/goapp" -addr 127.0.0.1:0 2>"$work/goapp.log" &
	GPID=$!
	for _ in $(seq 200); do
		addr=$(sed -n 's/^goapp: listening on \(.*\)$/\1/p' "$work/goapp.log" | head -n1)
		[ -n "$addr" ] && break
		sleep 0.05
	done
	if [ -z "$addr" ]; then
		echo "bench: goapp did not start: $(cat "$work/goapp.log")" >&2
		rc=1
	else
		sleep 1 # let the workload run before the first scrape
		"$build/loadgen" scrape -url "http://$addr" -n "$n" -types "$types" -pause "$pause" \
			-cpu-seconds 1 -o "$out" || rc=1
	fi
	kill "$GPID" 2>/dev/null || true
	wait "$GPID" 2>/dev/null || true
	GPID=
	return $rc
}

goapp_captures() {
	local build=$1 data=$2 i
	[ -f "$data/goapp/.done" ] && return 0
	rm -rf "$data/goapp"
	mkdir -p "$data/goapp"
	for i in 1 2 3 4 5; do
		tests/e2e/capture.sh "$build/goapp" "$data/goapp/run$i" 2 >/dev/null || return 1
	done
	touch "$data/goapp/.done"
}
