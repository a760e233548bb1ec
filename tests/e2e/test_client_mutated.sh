#!/usr/bin/env bash
# test_client_mutated.sh — the client commands (get, top, diff, regressions,
# merge, load) against a collector whose answers are damaged in ways nobody
# wrote down, and capture against a damaged Kubernetes API server:
# tests/e2e/mutproxy.py sits in front of a real `profd serve` holding real
# profiles of examples/goapp (two versions, cpu and heap), then in front of
# tests/kubeapi (pods of a Deployment, their pod proxy to a real goapp),
# and for --collector http://PROXY/m/SEED (a kubeconfig's server
# http://PROXY/m/SEED) changes each answer as the seed says (values of
# another kind, keys removed, arrays blown up, bodies cut short, emptied or
# replaced by HTML, statuses swapped). test_client.sh and test_capture.sh
# check the cases written by hand; this one checks, for every command and
# seed:
#   - the exit status is 0 or 1 (never a usage error, a crash or a signal);
#   - a failure is one line on stderr, "profd CMD: ..." (capture: one line
#     per problem, each "profd capture: ...", and its summary);
#   - success prints something (a damaged answer is not a silent empty result);
#   - nothing on stdout or stderr is a control byte (but newline and tab) or
#     a byte that is not UTF-8: what the collector sent is escaped;
#   - a failed -O leaves no file; capture reports on stdout each file it
#     wrote, and exit 0 means it wrote one;
#   - no sanitizer report (BUILD=build-san).
# Each command also runs once through the proxy undamaged and must succeed,
# so that the damaged runs' errors are the damage's.
# MUT_SEEDS=N (default 25) seeds per command; a failing seed replays alone:
#   MUT_SEEDS="7 19" bash tests/e2e/test_client_mutated.sh
# Run: BUILD=build bash tests/e2e/test_client_mutated.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

unset PROFD_COLLECTOR
GA=$GOAPP
[ -x "$GA" ] || GA=$ROOT/build/goapp # a Go program, not sanitized
KUBEAPI=$ROOT/$BUILD/kubeapi
[ -x "$KUBEAPI" ] || KUBEAPI=$ROOT/build/kubeapi # a Go program, not sanitized
need_built 0 "make $BUILD/profd $BUILD/goapp $BUILD/kubeapi" "$PROFD" "$GA" "$KUBEAPI"
need_cmds 0 curl python3 iconv
kill_started_on_exit

SEEDS=${MUT_SEEDS:-25}
[[ $SEEDS =~ ^[0-9]+$ ]] && SEEDS=$(seq 1 "$SEEDS")
C=$T/cap

capture_sets "$C" 2

"$PROFD" serve -q --addr 127.0.0.1:0 --data-dir "$T/data" 2>"$T/serve.log" &
SPID=$!
port=$(serve_port "$T/serve.log" "$SPID")
[ -n "$port" ] || { fail "setup: serve" "$(head -c 400 "$T/serve.log")"; exit 0; }
URL=http://127.0.0.1:$port
# goapp at version 1.0 for a while, then 1.1: two rollouts for regressions and diff
for m in 50 45 40 35; do
	"$PROFD" load --service goapp -l version=1.0 --created-at "now-${m}m" --collector "$URL" "$C/1/cpu.pb.gz" "$C/1/heap.pb.gz" >/dev/null 2>"$T/load.err" ||
		{ fail "setup: load" "$(head -c 400 "$T/load.err")"; exit 0; }
done
for m in 20 15 10 5; do
	"$PROFD" load --service goapp -l version=1.1 --created-at "now-${m}m" --collector "$URL" "$C/2/cpu.pb.gz" "$C/2/heap.pb.gz" >/dev/null 2>"$T/load.err" ||
		{ fail "setup: load" "$(head -c 400 "$T/load.err")"; exit 0; }
done

PLOG=$T/proxy.log # what the proxy did, per request
python3 "$ROOT/tests/e2e/mutproxy.py" "$T/proxy.port" "$URL" 2>"$PLOG" &
for ((k = 0; k < 200; k++)); do [ -s "$T/proxy.port" ] && break; sleep 0.05; done
[ -s "$T/proxy.port" ] || { fail "setup: mutproxy.py" "$(head -c 400 "$PLOG")"; exit 0; }
PROXY=http://127.0.0.1:$(cat "$T/proxy.port")

B="cpu{version=\"1.0\"}" G="cpu{version=\"1.1\"}"
CMDS=(
	"get services" "get services -o name" "get services -o json" "get types"
	"get profiles --service goapp" "get profiles --service goapp -o name" "get profiles --service goapp -o json"
	"top --service goapp" "top --all" "top --service goapp -o json" "top --service goapp --type heap -i inuse_space"
	"top --query $G --cum"
	"diff --base $B --target $G" "diff --base $B --target $G -O @OUT"
	"regressions" "regressions --service goapp -o json" "regressions --base $B --target $G"
	"merge --service goapp --type cpu -O @OUT" "merge --service goapp --type heap --limit 3 -O @OUT"
	"load --service x $C/1/cpu.pb.gz" "load --service x -o json $C/1/heap.pb.gz"
)

# one CMD SEED: runs CMD against the proxy (SEED "": undamaged); sets RC, WHY (empty: all held)
one() {
	local cmd=$1 seed=$2 base=$PROXY a
	[ -n "$seed" ] && base=$PROXY/m/$seed
	local -a args=()
	read -r -a args <<<"$cmd"
	for a in "${!args[@]}"; do [ "${args[a]}" = @OUT ] && args[a]=$T/out.pb.gz; done
	case ${args[0]} in load | capture) ;; *) args+=(--from -1h) ;; esac
	rm -rf "$T/out.pb.gz" "$T/outdir"
	if [ "${args[0]}" = capture ]; then # through a kubeconfig whose server is the proxy
		kubeconfig "$T/k.yaml" "$base"
		mkdir -p "$T/outdir"
		args+=(--kubeconfig "$T/k.yaml" --output-dir "$T/outdir" -q)
	else
		args+=(--collector "$base")
	fi
	timeout 60 "$PROFD" "${args[@]}" >"$T/o" 2>"$T/e"
	RC=$? WHY=
	local nl
	nl=$(wc -l <"$T/e")
	if grep -q "Sanitizer\|runtime error" "$T/e"; then
		WHY="sanitizer report: $(grep -A4 "Sanitizer\|runtime error" "$T/e" | head -c 600)"
	elif [ "$RC" -gt 1 ]; then
		WHY="exit $RC: $(head -c 300 "$T/e")"
	elif [ "$RC" = 1 ] && [ "${args[0]}" = capture ] && grep -qv "^profd capture: \|profile(s) from" "$T/e"; then
		WHY="exit 1, stderr lines that are neither problems nor the summary: $(head -c 300 "$T/e")"
	elif [ "$RC" = 1 ] && [ "${args[0]}" != capture ] && { [ "$nl" != 1 ] || ! head -1 "$T/e" | grep -q "^profd ${args[0]}[ :]"; }; then
		WHY="exit 1 with $nl lines on stderr: $(head -c 300 "$T/e")"
	elif [ "$RC" = 0 ] && [ ! -s "$T/o" ] && [ ! -s "$T/e" ]; then
		WHY="exit 0 and nothing printed"
	elif LC_ALL=C grep -qaP '[\x00-\x08\x0b-\x1f\x7f]' "$T/o" "$T/e"; then
		WHY="a control byte on the terminal: $(cat -v "$T/o" "$T/e" | grep -m1 -a '\^' | head -c 300)"
	elif ! iconv -f UTF-8 -t UTF-8 "$T/o" >/dev/null 2>&1 || ! iconv -f UTF-8 -t UTF-8 "$T/e" >/dev/null 2>&1; then
		WHY="bytes that are not UTF-8 on the terminal: $(cat -v "$T/o" "$T/e" | grep -m1 -a 'M-' | head -c 300)"
	elif [ "$RC" != 0 ] && [ -e "$T/out.pb.gz" ]; then
		WHY="exit $RC but -O wrote $T/out.pb.gz"
	elif [ "${args[0]}" = capture ] && [ "$RC" = 0 ] && [ -z "$(ls "$T/outdir")" ]; then
		WHY="exit 0 and no profile written"
	elif [ "${args[0]}" = capture ] && [ "$(find "$T/outdir" -type f | wc -l)" != "$(grep -c . "$T/o")" ]; then
		WHY="$(find "$T/outdir" -type f | wc -l) files written, $(grep -c . "$T/o") reported on stdout"
	fi
}

# check_all CMD...: each CMD once undamaged (it must succeed), then for every seed
total=0
check_all() {
	local cmd n s bad nerr
	for cmd in "$@"; do
		one "$cmd" ""
		if [ "$RC" = 0 ] && [ -z "$WHY" ]; then
			ok "profd $cmd: undamaged answers through the proxy: exit 0"
		else
			fail "profd $cmd: undamaged answers through the proxy" "exit $RC ${WHY:-$(head -c 300 "$T/e")}"
			continue
		fi
		bad=() nerr=0
		for s in $SEEDS; do
			one "$cmd" "$s"
			total=$((total + 1))
			[ "$RC" = 0 ] || nerr=$((nerr + 1))
			if [ -n "$WHY" ]; then
				bad+=("seed $s: $WHY; the damage: $(grep -a " seed $s: " "$PLOG" | tail -2 | cut -c1-200 | tr '\n' '|')")
			fi
		done
		n=$(echo "$SEEDS" | wc -w)
		if [ ${#bad[@]} = 0 ]; then
			ok "profd $cmd: $n seeds of damaged answers ($nerr refused): exit 0 or 1, errors said as such, nothing unescaped"
		else
			fail "profd $cmd: ${#bad[@]} of $n damaged answers mishandled" "$(printf '%s || ' "${bad[@]:0:3}")"
		fi
	done
}
check_all "${CMDS[@]}"

# ---- capture through a damaged API server -------------------------------------------------------------
start_goapp web mixed
# shellcheck disable=SC2154 # PORT_web: set by start_goapp
cat >"$T/pods.json" <<EOF
[
 {"metadata": {"name": "web-7d9f8c6b5-x2x9k", "namespace": "shop",
   "labels": {"app": "web", "version": "1.4.2", "pod-template-hash": "7d9f8c6b5"},
   "annotations": {"profefe.com/enable": "true", "profefe.com/port": "$PORT_web"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f8c6b5"}]},
  "spec": {"nodeName": "node-1", "containers": [{"name": "web", "ports": [{"containerPort": $PORT_web}]}]}},
 {"metadata": {"name": "web-7d9f8c6b5-q8wzn", "namespace": "shop",
   "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5"},
   "annotations": {"profefe.com/enable": "true", "profefe.com/port": "$PORT_web"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f8c6b5"}]},
  "spec": {"nodeName": "node-2"}}
]
EOF
"$KUBEAPI" -pods "$T/pods.json" -cert-dir "$T/certs" 2>"$T/kubeapi.log" &
API=$(wait_line "$T/kubeapi.log" '^kubeapi: listening on \(https:.*\)$')
[ -n "$API" ] || { fail "setup: kubeapi" "$(head -c 400 "$T/kubeapi.log")"; exit 0; }
curl -sS --max-time 10 --cacert "$T/certs/ca.crt" -H "Authorization: Bearer $(cat "$T/certs/token")" -X POST \
	--data '[{"kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
	  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}}]' "$API/admin/workloads" >"$T/wl.json"
PLOG=$T/kproxy.log
python3 "$ROOT/tests/e2e/mutproxy.py" "$T/kproxy.port" "$API" 2>"$PLOG" &
for ((k = 0; k < 200; k++)); do [ -s "$T/kproxy.port" ] && break; sleep 0.05; done
[ -s "$T/kproxy.port" ] || { fail "setup: mutproxy.py before kubeapi" "$(head -c 400 "$PLOG")"; exit 0; }
PROXY=http://127.0.0.1:$(cat "$T/kproxy.port")
# kubeconfig FILE SERVER: the test API server's token, namespace shop
kubeconfig() {
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$2"}}]
users: [{name: u, user: {token: "$(cat "$T/certs/token")"}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: shop}}]
current-context: x
EOF
}
check_all "capture web-7d9f8c6b5-x2x9k --types heap,goroutine" "capture deployment/web --types heap,mutex" \
	"capture web --types goroutine" "capture -l app=web --types heap,allocs" "capture -l app=web -A --types goroutine"

no_sanitizer "the collector's log (behind the proxy): no sanitizer report" "$T/serve.log"
if [ "$total" -gt 0 ]; then ok "$total damaged runs"; else fail "damaged runs" "none ran"; fi
