#!/usr/bin/env bash
# test_delta.sh — `profd pprof delta` against `go tool pprof -base` on two
# real snapshots of goapp's cumulative profiles (allocs, heap, block, mutex),
# and on crafted ones whose units differ (ms and ns).
. "$(dirname "$0")/lib.sh"
GA=$ROOT/build/goapp
[ -x "$GOAPP" ] && GA=$GOAPP
"$GA" -addr 127.0.0.1:0 -workload mixed 2>"$T/goapp.log" &
gpid=$!
trap 'kill $gpid 2>/dev/null; rm -rf "$T"' EXIT
addr=""
for _ in $(seq 100); do
	addr=$(sed -n 's/^goapp: listening on //p' "$T/goapp.log")
	[ -n "$addr" ] && break
	sleep 0.1
done
[ -n "$addr" ] || { fail "goapp started" "$(cat "$T/goapp.log")"; exit 0; }
types="allocs heap block mutex"
for t in $types; do curl -sSf -o "$T/a-$t.pb.gz" "http://$addr/debug/pprof/$t"; done
sleep 1.5
for t in $types; do curl -sSf -o "$T/b-$t.pb.gz" "http://$addr/debug/pprof/$t"; done
for t in $types; do
	if ! "$PROFD" pprof delta -o "$T/d-$t.pb.gz" "$T/a-$t.pb.gz" "$T/b-$t.pb.gz" 2>"$T/err"; then
		fail "delta $t" "$(cat "$T/err")"
		continue
	fi
	for idx in "" alloc_space alloc_objects; do
		[ -n "$idx" ] && [ "$t" != allocs ] && [ "$t" != heap ] && continue
		si=${idx:+-sample_index=$idx}
		go_pprof -top -nodecount=100000 $si "$T/d-$t.pb.gz" | sed -n '/^Showing nodes/,$p' >"$T/mine"
		go_pprof -top -nodecount=100000 $si -base "$T/a-$t.pb.gz" "$T/b-$t.pb.gz" | sed -n '/^Showing nodes/,$p' >"$T/go"
		if [ -s "$T/go" ]; then
			same_output "delta $t ${idx:-default}: -top equals go tool pprof -base" "$T/go" "$T/mine"
		else
			fail "delta $t ${idx:-default}" "go tool pprof -base printed no table"
		fi
	done
done
# a restart (counters lower than the base): the newer profile is kept as it is
expect_exit "delta with a counter reset writes the newer profile and says so" 0 "restart" \
	"$PROFD" pprof delta -o "$T/r.pb.gz" "$T/b-allocs.pb.gz" "$T/a-allocs.pb.gz"
expect_exit "delta of cpu-incompatible kinds is exit 1" 1 "." \
	"$PROFD" pprof delta -o "$T/x.pb.gz" "$T/a-allocs.pb.gz" "$T/b-block.pb.gz"
# units of one kind differ (a base in ns, a profile in ms; tests/e2e/craft_prof.py):
# go tool pprof -base converts both to ns and subtracts; so does delta, and a
# counter that went down is seen in converted totals
craft() { python3 "$ROOT/tests/e2e/craft_prof.py" cpu "$@"; }
if craft "$T/u-ns.pb.gz" nanoseconds 10000000 9000000 2000000 && craft "$T/u-ms.pb.gz" milliseconds 10 20 3; then
	if "$PROFD" pprof delta -o "$T/u-d.pb.gz" "$T/u-ns.pb.gz" "$T/u-ms.pb.gz" 2>"$T/err"; then
		go_pprof -raw "$T/u-d.pb.gz" | sed -n '/^Samples/,$p' >"$T/mine"
		go tool pprof -proto -base "$T/u-ns.pb.gz" "$T/u-ms.pb.gz" >"$T/u-g.pb.gz" 2>/dev/null
		go_pprof -raw "$T/u-g.pb.gz" | sed -n '/^Samples/,$p' >"$T/go"
		if grep -q '^samples/count cpu/nanoseconds' "$T/mine"; then
			same_output "delta of a ns base and a ms profile: -raw samples equal go tool pprof -base's" "$T/go" "$T/mine"
		else
			fail "delta of a ns base and a ms profile: in ns as go tool pprof -base" "$(head -c 300 "$T/mine")"
		fi
	else
		fail "delta of a ns base and a ms profile" "$(cat "$T/err")"
	fi
	expect_exit "delta of a ms base and a ns profile of fewer ms: a counter reset" 0 "restart" \
		"$PROFD" pprof delta -o "$T/u-r.pb.gz" "$T/u-ms.pb.gz" "$T/u-ns.pb.gz"
else
	fail "setup: craft_prof.py" "python3 failed"
fi
