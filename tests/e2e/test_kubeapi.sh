#!/usr/bin/env bash
# test_kubeapi.sh — the test Kubernetes API server (tests/kubeapi, build/kubeapi)
# checked with REAL kubectl, so that the fake stays honest for profd's
# Kubernetes client (issue 4: discovery, issue 5: the pod proxy):
#   1. kubectl get pods -A -o json / -n / -l (=, !=, exists, !, in) /
#      --field-selector, plain and wide table output, one pod, pod shapes;
#      apps/v1 workloads: get deployment -o json, tables, 404
#   2. credentials: token, client certificate, CA and certificates as files,
#      insecure-skip-tls-verify; a wrong token and no credentials are 401
#   3. paging: kubectl --chunk-size=2, and curl with limit/continue (one
#      snapshot across pages, 410 Expired with a fresh token after compaction)
#   4. watch: kubectl get -w (tables) and --watch-only -o name see a pod added
#      through the admin API; raw watch events (ADDED/MODIFIED/DELETED,
#      BOOKMARK, 410 ERROR for a compacted resourceVersion)
#   5. pod proxy to a real examples/goapp: heap and cpu profiles (gzip pprof,
#      read by go tool pprof), default port, 503 for an unreachable target,
#      404 for a missing pod, the client's timeout ends a hanging request
#   6. injected faults (500, 401), a clean SIGTERM shutdown, a quiet stderr
# Needs kubectl (skipped without it) and jq or python3 for the JSON checks.
# Run: BUILD=build bash tests/e2e/test_kubeapi.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

KUBEAPI=$ROOT/$BUILD/kubeapi
# Go programs, not sanitized: take them from build/ when $BUILD lacks them
go_bins_from_build GOAPP KUBEAPI # Go programs, not sanitized

if ! command -v kubectl >/dev/null 2>&1; then
	ok "kubeapi: kubectl not installed # SKIP"
	exit 0
fi
for b in "$KUBEAPI" "$GOAPP"; do
	if [ ! -x "$b" ]; then
		fail "setup: $b exists" "not built; run: make build/kubeapi build/goapp"
		exit 0
	fi
done
if command -v jq >/dev/null 2>&1; then
	JSON=jq
elif command -v python3 >/dev/null 2>&1; then
	JSON=python3
else
	fail "setup: jq or python3" "neither is installed; the JSON checks need one"
	exit 0
fi

API_PID='' APP_PID='' WATCH_PIDS=()
stop_all() {
	local p
	for p in "${WATCH_PIDS[@]}" $API_PID $APP_PID; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
}
# chain lib.sh's EXIT trap (removes $T) after stopping the processes
eval "set -- $(trap -p EXIT)"
# shellcheck disable=SC2064 # lib.sh's command is expanded now, on purpose
trap "stop_all; ${3:-}" EXIT

# ---- helpers ------------------------------------------------------------------------

K=$T/kubeconfig
k() { timeout 20 kubectl --kubeconfig "$K" "$@"; }

# names FILE: the sorted "namespace/name" of a list's items, space separated
names() {
	if [ "$JSON" = jq ]; then
		jq -r '.items[] | .metadata.namespace + "/" + .metadata.name' "$1" | sort | tr '\n' ' ' | sed 's/ $//'
	else
		python3 -c 'import json,sys
print(" ".join(sorted(i["metadata"]["namespace"]+"/"+i["metadata"]["name"] for i in json.load(open(sys.argv[1]))["items"])))' "$1"
	fi
}

# jfield FILE PATH: the value at a jq-style path (.a.b[0].c, .a["b-c"]) of a JSON file,
# strings raw, "null" when missing
jfield() {
	if [ "$JSON" = jq ]; then
		jq -r "$2" "$1"
	else
		python3 -c 'import json,re,sys
v=json.load(open(sys.argv[1]))
for k in re.findall(r"\.([A-Za-z0-9_]+)|\[(\d+)\]|\[\"([^\"]+)\"\]", sys.argv[2]):
    try: v = v[int(k[1])] if k[1] else v[k[0] or k[2]]
    except (KeyError, IndexError, TypeError): v = None; break
print("null" if v is None else (json.dumps(v) if isinstance(v, (dict, list, bool)) else v))' "$1" "$2"
	fi
}

# events FILE: "TYPE name" of each non-BOOKMARK event of a watch stream, space separated
events() {
	if [ "$JSON" = jq ]; then
		jq -r 'select(.type != "BOOKMARK") | .type + " " + .object.metadata.name' "$1" | tr '\n' ' '
	else
		python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e["type"] != "BOOKMARK": print(e["type"], e["object"]["metadata"]["name"], end=" ")' "$1"
	fi
}

# wait_watches N: wait until the server has N watches open (5 s)
wait_watches() {
	local i
	for ((i = 0; i < 50; i++)); do
		curl_api "$URL/admin/state" >"$T/state.json"
		[ "$(jfield "$T/state.json" .watches)" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# expect NAME WANT GOT
expect() {
	if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "want '$2', got '$3'"; fi
}

# curl_api [CURL ARGS...] URL: curl with the CA and the token
curl_api() { curl -sS --max-time 20 --cacert "$T/certs/ca.crt" -H "Authorization: Bearer $(cat "$T/certs/token")" "$@"; }

# wait_grep FILE REGEX [TENTHS]: wait until FILE matches REGEX (default 5 s)
wait_grep() {
	local i
	for ((i = 0; i < ${3:-50}; i++)); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# ---- setup: a real goapp, pods pointing at it, the API server ------------------------------

: >"$T/goapp.log"
"$GOAPP" -addr 127.0.0.1:0 -cpu-load 0.2 2>"$T/goapp.log" &
APP_PID=$!
if ! wait_grep "$T/goapp.log" '^goapp: listening on ' 100; then
	fail "setup: goapp" "no 'listening on' line: $(head -c 400 "$T/goapp.log")"
	exit 0
fi
GPORT=$(sed -n 's/^goapp: listening on .*:\([0-9]*\)$/\1/p' "$T/goapp.log" | head -n1)

cat >"$T/pods.json" <<EOF
[
 {"metadata": {"name": "web-7d9f8c6b5-x2x9k", "namespace": "shop",
   "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5"},
   "annotations": {"profefe.com/enable": "true", "profefe.com/port": "$GPORT"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f8c6b5"}]},
  "spec": {"containers": [{"name": "web", "image": "example/web:1.4.2", "ports": [{"containerPort": $GPORT}]}]},
  "status": {"podIP": "127.0.0.1"}},
 {"metadata": {"name": "web-7d9f8c6b5-q8wzn", "namespace": "shop",
   "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f8c6b5"}]},
  "spec": {"containers": [{"name": "web", "image": "example/web:1.4.2", "ports": [{"containerPort": $GPORT}]}]}},
 {"metadata": {"name": "db-0", "namespace": "shop", "labels": {"app": "db"},
   "ownerReferences": [{"kind": "StatefulSet", "name": "db"}]},
  "spec": {"containers": [{"name": "db", "ports": [{"containerPort": 1}]}]}},
 {"metadata": {"name": "agent-7mxkq", "namespace": "ops", "labels": {"app": "agent"},
   "ownerReferences": [{"kind": "DaemonSet", "name": "agent"}]},
  "spec": {"nodeName": "node-2"}},
 {"metadata": {"name": "batch-1", "namespace": "ops"}, "status": {"phase": "Succeeded"}}
]
EOF
ALL="ops/agent-7mxkq ops/batch-1 shop/db-0 shop/web-7d9f8c6b5-q8wzn shop/web-7d9f8c6b5-x2x9k"

: >"$T/kubeapi.log"
"$KUBEAPI" -kubeconfig "$K" -pods "$T/pods.json" -cert-dir "$T/certs" -bookmark-interval 200ms 2>"$T/kubeapi.log" &
API_PID=$!
if ! wait_grep "$T/kubeapi.log" '^kubeapi: listening on https://127\.0\.0\.1:[0-9]+$' 100; then
	fail "setup: kubeapi" "no 'listening on' line: $(head -c 400 "$T/kubeapi.log")"
	exit 0
fi
URL=$(sed -n 's/^kubeapi: listening on //p' "$T/kubeapi.log" | head -n1)
ok "setup: goapp on port $GPORT, kubeapi on $URL, $(kubectl version --client 2>/dev/null | head -n1)"

# ---- 1. kubectl get pods ------------------------------------------------------------------------

if k version -o json >"$T/version.json" 2>"$T/err"; then
	expect "kubectl version: server gitVersion" v1.32.5 "$(jfield "$T/version.json" .serverVersion.gitVersion)"
else
	fail "kubectl version" "$(head -c 400 "$T/err")"
fi

if k get pods -A -o json >"$T/all.json" 2>"$T/err"; then
	expect "get pods -A -o json: every pod" "$ALL" "$(names "$T/all.json")"
else
	fail "get pods -A -o json" "$(head -c 400 "$T/err")"
fi

# the list itself, as the server sends it (kubectl -o json re-wraps it as a v1 List)
curl_api "$URL/api/v1/pods" >"$T/raw.json"
rv=$(jfield "$T/raw.json" .metadata.resourceVersion)
expect "GET /api/v1/pods: PodList v1 with a resourceVersion, every pod" "PodList v1 yes $ALL" \
	"$(jfield "$T/raw.json" .kind) $(jfield "$T/raw.json" .apiVersion) $([[ $rv =~ ^[0-9]+$ ]] && echo yes) $(names "$T/raw.json")"

# the shape of one pod, filled in from a minimal spec
if k get pod -n shop web-7d9f8c6b5-q8wzn -o json >"$T/pod.json" 2>"$T/err"; then
	got=""
	for f in .kind .apiVersion .metadata.ownerReferences[0].kind .metadata.ownerReferences[0].name \
		.metadata.ownerReferences[0].apiVersion .metadata.ownerReferences[0].controller .metadata.generateName \
		'.metadata.labels["pod-template-hash"]' .spec.containers[0].ports[0].containerPort .spec.nodeName \
		.status.phase .status.podIP .status.podIPs[0].ip .status.hostIP .status.containerStatuses[0].name \
		.status.containerStatuses[0].ready; do
		got="$got $(jfield "$T/pod.json" "$f")"
	done
	expect "get pod: v1 shape (owner, ports, node, status)" \
		" Pod v1 ReplicaSet web-7d9f8c6b5 apps/v1 true web-7d9f8c6b5- 7d9f8c6b5 $GPORT node-1 Running 127.0.0.1 127.0.0.1 127.0.0.1 web true" "$got"
	uid=$(jfield "$T/pod.json" .metadata.uid) rv=$(jfield "$T/pod.json" .metadata.resourceVersion)
	ts=$(jfield "$T/pod.json" .metadata.creationTimestamp)
	if [[ $uid =~ ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ && $rv =~ ^[0-9]+$ && $ts =~ ^20[0-9-]+T[0-9:]+Z$ ]]; then
		ok "get pod: server-filled uid, resourceVersion, creationTimestamp"
	else
		fail "get pod: server-filled uid, resourceVersion, creationTimestamp" "uid=$uid rv=$rv ts=$ts"
	fi
else
	fail "get pod -n shop web-7d9f8c6b5-q8wzn -o json" "$(head -c 400 "$T/err")"
fi
expect "get pod: StatefulSet owner" "StatefulSet/db" "$(k get pod db-0 -n shop -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}' 2>&1)"

# apps/v1 workloads (for profd capture deployment/NAME): discovery, get -o json, tables, 404
curl_api -X POST --data '[{"kind":"Deployment","metadata":{"name":"web","namespace":"shop"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}}}},
 {"kind":"StatefulSet","metadata":{"name":"db","namespace":"shop"},"spec":{"selector":{"matchExpressions":[{"key":"app","operator":"In","values":["db"]}]}}}]' \
	"$URL/admin/workloads" >/dev/null
if k get deployment web -n shop -o json >"$T/deploy.json" 2>"$T/err"; then
	got=""
	for f in .kind .apiVersion .metadata.name .metadata.namespace .spec.selector.matchLabels.app .spec.replicas \
		.spec.template.metadata.labels.app .status.replicas .status.readyReplicas; do
		got="$got $(jfield "$T/deploy.json" "$f")"
	done
	expect "kubectl get deployment web -o json: apps/v1 shape, status from the matching pods" \
		" Deployment apps/v1 web shop web 2 web 2 2" "$got"
else
	fail "kubectl get deployment web -o json" "$(head -c 400 "$T/err")"
fi
if k get deployments,statefulsets -A >"$T/deploy.txt" 2>"$T/err" &&
	grep -Eq '^NAMESPACE +NAME +READY +UP-TO-DATE +AVAILABLE +AGE$' "$T/deploy.txt" &&
	grep -Eq '^shop +deployment.apps/web +2/2 +2 +2 +[0-9]+s$' "$T/deploy.txt" &&
	grep -Eq '^shop +statefulset.apps/db +1/1 +[0-9]+s$' "$T/deploy.txt"; then
	ok "kubectl get deployments,statefulsets -A: tables (READY, UP-TO-DATE, AVAILABLE)"
else
	fail "kubectl get deployments,statefulsets -A" "$(cat "$T/deploy.txt" "$T/err" | head -c 600)"
fi
expect "kubectl get sts db -o jsonpath: the matchExpressions selector" "app In db" \
	"$(k get sts db -n shop -o jsonpath='{.spec.selector.matchExpressions[0].key} {.spec.selector.matchExpressions[0].operator} {.spec.selector.matchExpressions[0].values[0]}' 2>&1)"
expect_exit "kubectl get deployment nope: NotFound" 1 'deployments.apps "nope" not found' \
	timeout 20 kubectl --kubeconfig "$K" get deployment nope -n shop

# selections: each as -o json, compared by name
select_case() { # NAME WANT KUBECTL-ARGS...
	local name=$1 want=$2
	shift 2
	if k get pods -o json "$@" >"$T/sel.json" 2>"$T/err"; then
		expect "$name" "$want" "$(names "$T/sel.json")"
	else
		fail "$name" "$(head -c 400 "$T/err")"
	fi
}
select_case "get pods -n shop" "shop/db-0 shop/web-7d9f8c6b5-q8wzn shop/web-7d9f8c6b5-x2x9k" -n shop
select_case "get pods -n nowhere: empty" "" -n nowhere
select_case "get pods -A -l app=web" "shop/web-7d9f8c6b5-q8wzn shop/web-7d9f8c6b5-x2x9k" -A -l app=web
select_case "get pods -A -l app!=web" "ops/agent-7mxkq ops/batch-1 shop/db-0" -A -l 'app!=web'
select_case "get pods -A -l app (exists)" "ops/agent-7mxkq shop/db-0 shop/web-7d9f8c6b5-q8wzn shop/web-7d9f8c6b5-x2x9k" -A -l app
select_case "get pods -A -l !app" "ops/batch-1" -A -l '!app'
select_case "get pods -A -l 'app in (db,agent)'" "ops/agent-7mxkq shop/db-0" -A -l 'app in (db,agent)'
select_case "get pods -n shop -l app=web,pod-template-hash=7d9f8c6b5" "shop/web-7d9f8c6b5-q8wzn shop/web-7d9f8c6b5-x2x9k" -n shop -l app=web,pod-template-hash=7d9f8c6b5
select_case "get pods -A --field-selector status.phase=Running" "ops/agent-7mxkq shop/db-0 shop/web-7d9f8c6b5-q8wzn shop/web-7d9f8c6b5-x2x9k" -A --field-selector status.phase=Running
select_case "get pods -A --field-selector spec.nodeName=node-2" "ops/agent-7mxkq" -A --field-selector spec.nodeName=node-2
expect_exit "get pods --field-selector spec.nope=x: the server's 400" 1 'field label not supported: spec.nope' \
	timeout 20 kubectl --kubeconfig "$K" get pods -A --field-selector spec.nope=x

# plain table output (the server answers kubectl's Table request)
if k get pods -A >"$T/table.txt" 2>"$T/err"; then
	if head -n1 "$T/table.txt" | grep -Eq '^NAMESPACE +NAME +READY +STATUS +RESTARTS +AGE$' &&
		grep -Eq '^shop +web-7d9f8c6b5-x2x9k +1/1 +Running +0 +[0-9]+s$' "$T/table.txt" &&
		grep -Eq '^ops +batch-1 +0/1 +Completed +0 +' "$T/table.txt" && [ "$(wc -l <"$T/table.txt")" -eq 6 ]; then
		ok "get pods -A: table (NAMESPACE NAME READY STATUS RESTARTS AGE)"
	else
		fail "get pods -A: table" "$(head -c 600 "$T/table.txt")"
	fi
else
	fail "get pods -A: table" "$(head -c 400 "$T/err")"
fi
if k get pods -n ops -o wide >"$T/wide.txt" 2>"$T/err" && head -n1 "$T/wide.txt" | grep -q 'IP  *NODE  *NOMINATED NODE  *READINESS GATES' &&
	grep -Eq '^agent-7mxkq +1/1 +Running +0 +[0-9]+s +127\.0\.0\.1 +node-2 ' "$T/wide.txt"; then
	ok "get pods -o wide: IP and NODE columns"
else
	fail "get pods -o wide" "$(cat "$T/wide.txt" "$T/err" | head -c 600)"
fi

# ---- 2. credentials -------------------------------------------------------------------------------

for ctx in kubeapi-cert kubeapi-files kubeapi-insecure; do
	select_case "context $ctx: get pods -A" "$ALL" -A --context "$ctx"
done
if grep -q 'insecure-skip-tls-verify: true' "$K" && grep -q 'client-certificate-data:' "$K" &&
	grep -q '^current-context: kubeapi$' "$K"; then
	ok "kubeconfig: CA data, client certificate, insecure cluster, current-context"
else
	fail "kubeconfig: contents" "$(head -c 600 "$K")"
fi
expect_exit "wrong token: kubectl fails with Unauthorized" 1 'Unauthorized' \
	timeout 20 kubectl --kubeconfig "$K" --token wrong-token get pods -A
code=$(curl -sS --max-time 10 --cacert "$T/certs/ca.crt" -o "$T/401.json" -w '%{http_code}' "$URL/api/v1/pods")
expect "no credentials: 401 with a v1 Status" "401 Status Failure Unauthorized 401" \
	"$code $(jfield "$T/401.json" .kind) $(jfield "$T/401.json" .status) $(jfield "$T/401.json" .reason) $(jfield "$T/401.json" .code)"
code=$(curl -sS --max-time 10 --cacert "$T/certs/ca.crt" -H 'Authorization: Bearer nope' -o /dev/null -w '%{http_code}' "$URL/admin/pods")
expect "admin API needs the token too" 401 "$code"

# ---- 3. paging --------------------------------------------------------------------------------------

curl_api -X DELETE "$URL/admin/requests" >/dev/null
if k get pods -A --chunk-size=2 -o json >"$T/chunk.json" 2>"$T/err"; then
	expect "get pods -A --chunk-size=2: every pod" "$ALL" "$(names "$T/chunk.json")"
	curl_api "$URL/admin/requests" >"$T/req.json"
	n=$(grep -o '"uri":"/api/v1/pods?[^"]*limit=2[^"]*"' "$T/req.json" | grep -c 'continue=')
	expect "get pods -A --chunk-size=2: 2 continue requests" 2 "$n"
else
	fail "get pods -A --chunk-size=2" "$(head -c 400 "$T/err")"
fi

curl_api "$URL/api/v1/pods?limit=2" >"$T/p1.json"
c1=$(jfield "$T/p1.json" .metadata.continue) rv1=$(jfield "$T/p1.json" .metadata.resourceVersion)
expect "curl limit=2: 2 items, continue, remainingItemCount 3" "2 3" \
	"$(grep -o '"kind":"Pod"' "$T/p1.json" | wc -l) $(jfield "$T/p1.json" .metadata.remainingItemCount)"
# a change between pages is not seen: every page comes from the first one's snapshot
curl_api -X POST --data '{"metadata":{"name":"late-1","namespace":"shop","labels":{"app":"late"}}}' "$URL/admin/pods" >/dev/null
curl_api "$URL/api/v1/pods?limit=2&continue=$c1" >"$T/p2.json"
c2=$(jfield "$T/p2.json" .metadata.continue)
curl_api "$URL/api/v1/pods?limit=2&continue=$c2" >"$T/p3.json"
expect "curl continue: pages 2 and 3 from the snapshot of page 1" \
	"ops/agent-7mxkq ops/batch-1 | shop/db-0 shop/web-7d9f8c6b5-q8wzn | shop/web-7d9f8c6b5-x2x9k | $rv1 $rv1 null" \
	"$(names "$T/p1.json") | $(names "$T/p2.json") | $(names "$T/p3.json") | $(jfield "$T/p2.json" .metadata.resourceVersion) $(jfield "$T/p3.json" .metadata.resourceVersion) $(jfield "$T/p3.json" .metadata.continue)"
# after compaction the snapshot is gone: 410 Expired, with a token to go on inconsistently
curl_api -X POST "$URL/admin/compact" >/dev/null
code=$(curl_api -o "$T/gone.json" -w '%{http_code}' "$URL/api/v1/pods?limit=2&continue=$c1")
c3=$(jfield "$T/gone.json" .metadata.continue)
expect "curl continue after compaction: 410 Expired + metadata.continue" "410 Expired 410 yes" \
	"$code $(jfield "$T/gone.json" .reason) $(jfield "$T/gone.json" .code) $([ "${#c3}" -gt 10 ] && echo yes)"
curl_api "$URL/api/v1/pods?limit=10&continue=$c3" >"$T/p4.json"
expect "curl continue with the 410's token: the rest, as of now" \
	"shop/db-0 shop/late-1 shop/web-7d9f8c6b5-q8wzn shop/web-7d9f8c6b5-x2x9k" "$(names "$T/p4.json")"
code=$(curl_api -o "$T/bad.json" -w '%{http_code}' "$URL/api/v1/pods?limit=2&continue=bm9wZQ")
expect "curl continue=garbage: 400 BadRequest" "400 BadRequest" "$code $(jfield "$T/bad.json" .reason)"

# ---- 4. watch -----------------------------------------------------------------------------------------

timeout 15 kubectl --kubeconfig "$K" get pods -A -w >"$T/w-table.txt" 2>&1 &
WATCH_PIDS+=($!)
timeout 15 kubectl --kubeconfig "$K" get pods -n shop --watch-only -o name >"$T/w-name.txt" 2>&1 &
WATCH_PIDS+=($!)
wait_watches 2
curl_api -X POST --data '{"metadata":{"name":"new-1","namespace":"shop","labels":{"app":"web"}}}' "$URL/admin/pods" >/dev/null
if wait_grep "$T/w-table.txt" '^shop +new-1 +1/1 +Running +0 +[0-9]+s$'; then
	ok "get pods -A -w: a pod added through the admin API appears (Table watch)"
else
	fail "get pods -A -w" "$(head -c 600 "$T/w-table.txt")"
fi
if wait_grep "$T/w-name.txt" '^pod/new-1$'; then
	ok "get pods --watch-only -o name: the added pod"
else
	fail "get pods --watch-only -o name" "$(head -c 600 "$T/w-name.txt")"
fi
kill "${WATCH_PIDS[@]}" 2>/dev/null
wait "${WATCH_PIDS[@]}" 2>/dev/null
WATCH_PIDS=()

# raw events from a list's resourceVersion, filtered by a label selector
curl_api "$URL/api/v1/namespaces/shop/pods?labelSelector=app%3Dweb" >"$T/l.json"
rv=$(jfield "$T/l.json" .metadata.resourceVersion)
curl_api -N --max-time 10 "$URL/api/v1/namespaces/shop/pods?watch=1&labelSelector=app%3Dweb&resourceVersion=$rv&allowWatchBookmarks=true&timeoutSeconds=2" >"$T/events.ndjson" &
WATCH_PIDS+=($!)
wait_watches 1
curl_api -X PATCH --data '{"metadata":{"annotations":{"x":"1"}}}' "$URL/admin/pods/shop/new-1" >/dev/null
curl_api -X PATCH --data '{"metadata":{"labels":{"app":"other"}}}' "$URL/admin/pods/shop/new-1" >/dev/null # leaves the selection
curl_api -X POST --data '{"metadata":{"name":"new-2","namespace":"shop","labels":{"app":"web"}}}' "$URL/admin/pods" >/dev/null
curl_api -X DELETE "$URL/admin/pods/shop/new-2" >/dev/null
curl_api -X POST --data '{"metadata":{"name":"new-3","namespace":"ops","labels":{"app":"web"}}}' "$URL/admin/pods" >/dev/null # other namespace
wait "${WATCH_PIDS[@]}" 2>/dev/null
WATCH_PIDS=()
got=$(events "$T/events.ndjson")
expect "watch from a resourceVersion: MODIFIED, DELETED on leaving the selector, ADDED, DELETED" \
	"MODIFIED new-1 DELETED new-1 ADDED new-2 DELETED new-2 " "$got"
if grep -q '"type":"BOOKMARK"' "$T/events.ndjson" && [ "$(grep -c '' "$T/events.ndjson")" -ge 5 ]; then
	ok "watch allowWatchBookmarks=true: BOOKMARK events; timeoutSeconds ends the stream"
else
	fail "watch bookmarks" "$(head -c 600 "$T/events.ndjson")"
fi
# admin: close the watches cleanly (the stream ends: curl exits 0) or cut them (abort=1: curl fails)
for mode in close abort; do
	curl_api -N --max-time 10 "$URL/api/v1/pods?watch=1&timeoutSeconds=30" >"$T/w-$mode.ndjson" 2>"$T/w-$mode.err" &
	cpid=$!
	wait_watches 1
	curl_api -X POST "$URL/admin/watches/close$([ $mode = abort ] && echo '?abort=1')" >/dev/null
	wait $cpid
	echo $? >"$T/w-$mode.rc"
done
if [ "$(cat "$T/w-close.rc")" = 0 ] && [ "$(cat "$T/w-abort.rc")" != 0 ] && [ -s "$T/w-abort.ndjson" ]; then
	ok "admin: watches/close ends the streams, ?abort=1 cuts them after their events (curl: $(head -c 80 "$T/w-abort.err"))"
else
	fail "admin: watches/close, abort" "rc $(cat "$T/w-close.rc") $(cat "$T/w-abort.rc"): $(cat "$T/w-abort.err")"
fi
curl_api -X POST "$URL/admin/compact" >/dev/null
code=$(curl_api -N -o "$T/expired.ndjson" -w '%{http_code}' "$URL/api/v1/pods?watch=1&resourceVersion=$rv")
if [ "$code" = 200 ] && grep -q '"type":"ERROR"' "$T/expired.ndjson" && grep -q '"code":410' "$T/expired.ndjson" &&
	grep -q '"reason":"Expired"' "$T/expired.ndjson" && grep -q 'too old resource version' "$T/expired.ndjson"; then
	ok "watch from a compacted resourceVersion: 200 + ERROR event, Status 410 Expired"
else
	fail "watch from a compacted resourceVersion" "HTTP $code: $(head -c 400 "$T/expired.ndjson")"
fi

# ---- 5. pod proxy to a real goapp -------------------------------------------------------------------

P=/api/v1/namespaces/shop/pods
is_gzip() { [ "$(head -c 2 "$1" | od -An -tx1 | tr -d ' ')" = 1f8b ]; }
if k get --raw "$P/web-7d9f8c6b5-x2x9k:$GPORT/proxy/debug/pprof/heap" >"$T/heap.pb.gz" 2>"$T/err" && is_gzip "$T/heap.pb.gz" &&
	go_pprof -top "$T/heap.pb.gz" >"$T/top.txt" && grep -q 'inuse_space' "$T/top.txt"; then
	ok "proxy: kubectl get --raw .../pods/NAME:PORT/proxy/debug/pprof/heap is a heap profile"
else
	fail "proxy: heap profile" "$(cat "$T/err" "$T/top.txt" 2>/dev/null | head -c 400)"
fi
if curl_api -o "$T/cpu.pb.gz" "$URL$P/web-7d9f8c6b5-x2x9k:$GPORT/proxy/debug/pprof/profile?seconds=1" && is_gzip "$T/cpu.pb.gz" &&
	go_pprof -top "$T/cpu.pb.gz" >"$T/top.txt" && grep -q 'Type: cpu' "$T/top.txt"; then
	ok "proxy: the query string is passed on (cpu profile, seconds=1)"
else
	fail "proxy: cpu profile" "$(head -c 400 "$T/top.txt")"
fi
expect "proxy without a port: the first containerPort" ok "$(k get --raw "$P/web-7d9f8c6b5-q8wzn/proxy/work" 2>&1)"
code=$(curl_api -o "$T/503.json" -w '%{http_code}' "$URL$P/db-0/proxy/debug/pprof/heap")
expect "proxy to a closed port: 503 ServiceUnavailable Status" "503 ServiceUnavailable" "$code $(jfield "$T/503.json" .reason)"
expect_exit "proxy to a closed port: kubectl says error trying to reach service" 1 'error trying to reach service' \
	timeout 20 kubectl --kubeconfig "$K" get --raw "$P/db-0:1/proxy/"
expect_exit "proxy to a missing pod: NotFound" 1 'NotFound|not found' \
	timeout 20 kubectl --kubeconfig "$K" get --raw "$P/nope:$GPORT/proxy/work"
t0=$(date +%s%N)
curl_api --max-time 1 -o /dev/null "$URL$P/web-7d9f8c6b5-x2x9k:$GPORT/proxy/debug/pprof/profile?seconds=5" 2>/dev/null
t1=$(($(date +%s%N) - t0))
if [ "$t1" -lt 3000000000 ] && [ "$(curl_api "$URL$P/web-7d9f8c6b5-x2x9k:$GPORT/proxy/work")" = ok ]; then
	ok "proxy: a client timeout ends a long request; the server still serves"
else
	fail "proxy: client timeout" "took $((t1 / 1000000)) ms"
fi

# ---- 6. faults, shutdown --------------------------------------------------------------------------------

curl_api -X POST "$URL/admin/fault?code=500&count=1&match=/pods" >/dev/null
expect_exit "fault 500: kubectl reports InternalError" 1 'InternalError|Internal error' \
	timeout 20 kubectl --kubeconfig "$K" get pods -A
curl_api -X POST "$URL/admin/fault?code=401&count=1&match=/pods" >/dev/null
expect_exit "fault 401: kubectl reports Unauthorized" 1 'Unauthorized' \
	timeout 20 kubectl --kubeconfig "$K" get pods -A -o name
select_case "after the faults: get pods works again" \
	"ops/agent-7mxkq ops/batch-1 ops/new-3 shop/db-0 shop/late-1 shop/new-1 shop/web-7d9f8c6b5-q8wzn shop/web-7d9f8c6b5-x2x9k" -A

kill -TERM "$API_PID"
for ((i = 0; i < 30; i++)); do
	kill -0 "$API_PID" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$API_PID" 2>/dev/null; then
	fail "kubeapi: stops on SIGTERM" "still running after 3 s"
else
	wait "$API_PID"
	expect "kubeapi: exit 0 on SIGTERM" 0 "$?"
	API_PID=''
fi
if [ "$(grep -cv '^kubeapi: listening on ' "$T/kubeapi.log")" -eq 0 ]; then
	ok "kubeapi: nothing else on stderr (no panic, no race report)"
else
	fail "kubeapi: stderr" "$(grep -v '^kubeapi: listening on ' "$T/kubeapi.log" | head -c 600)"
fi
