#!/usr/bin/env bash
# test_scrape_kube.sh — end-to-end tests of `profd scrape` with Kubernetes
# discovery, against the test API server (tests/kubeapi), a real collector
# (`profd serve`) and real Go services (build/goapp) on loopback. Pods in the
# API server point (podIP 127.0.0.1, profefe.com/port) at the goapps:
#   1. --once -A: profiles of exactly the selected pods land, with the right
#      service (Deployment from a ReplicaSet pod, StatefulSet, DaemonSet with a
#      profefe.com/service override, a named container port) and labels
#      (namespace, pod, container, node, kept pod labels); not annotated,
#      enable=false, enable=True (a warning says why), Pending, Succeeded,
#      being deleted: not scraped; a wrong
#      port: target down, reported; profefe.com/path honoured (a goapp serving
#      pprof under /custom/pprof; a pod with a path nothing serves gets 404);
#      a bad port annotation is reported and counted
#   2. --once -n: one namespace; -l: a label selector; --pod-labels and -L;
#      a YAML --config with kubernetes entries (which pods, types, labels)
#   3. continuous (list + watch): a pod added through the API is scraped in a
#      following round; a deleted pod and a pod no longer Running stop; API
#      faults: 500 (back off, recover), 410 (compaction while the watch is
#      down: re-list), 401 (the kubeconfig's token revoked: reported, counted,
#      the known targets still scraped; token back: recovers); a watch cut
#      mid-stream after it was up: retried after 1 s, not the old backoff; a pod
#      discovery cannot read (over a cap): skipped, the watch goes on; /metrics
#      counts each; SIGTERM exits 0
#   3b. 10000 pods: 40 watch events in a row, and a burst of 2000 new
#      pods, are applied within seconds; SIGTERM during a slow paged list
#      ends it at once
#   4. zero config in a pod: KUBERNETES_SERVICE_HOST + the service account
#      (token file, CA, namespace): --once finds the pods of its namespace;
#      continuous, the token rotated (file rewritten): re-read, no error
#   5. usage errors, --help
# Every profd log is checked for sanitizer reports.
# Run: BUILD=build bash tests/e2e/test_scrape_kube.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

t_start=$SECONDS
KUBEAPI=$ROOT/$BUILD/kubeapi
GA=$GOAPP
# Go programs, not sanitized: take them from build/ when $BUILD lacks them or
# has an older one (`make SANITIZE=1` builds profd only)
[ -x "$KUBEAPI" ] && ! [ "$ROOT/build/kubeapi" -nt "$KUBEAPI" ] || KUBEAPI=$ROOT/build/kubeapi
[ -x "$GA" ] && ! [ "$ROOT/build/goapp" -nt "$GA" ] || GA=$ROOT/build/goapp
if ! command -v jq >/dev/null 2>&1; then
	fail "setup: jq" "not installed; the JSON checks need it"
	exit 0
fi
for b in "$KUBEAPI" "$GA"; do
	if [ ! -x "$b" ]; then
		fail "setup: $b exists" "not built; run: make -s build/kubeapi build/goapp"
		exit 0
	fi
done

kill_started_on_exit

# ---- helpers ------------------------------------------------------------------------------

# until_true TENTHS CMD...: run CMD every 0.1 s until it succeeds (1) or TENTHS pass
until_true() {
	local n=$1 i
	shift
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

# the collector
"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data" --retention 0 -q 2>"$T/srv.log" &
sport=$(wait_line "$T/srv.log" '.*listening on port \([0-9][0-9]*\).*')
if [ -z "$sport" ]; then
	fail "setup: collector" "$(cat "$T/srv.log")"
	exit 0
fi
SURL=http://127.0.0.1:$sport

# count SERVICE [LABELS] [TYPE]: number of stored profiles
count() {
	curl -sS "$SURL/api/0/profiles?service=$1${2:+&labels=$2}${3:+&type=$3}&from=0&to=now&limit=10000" |
		grep -o '"id":"[0-9a-v]*"' | wc -l
}
# labels_of SERVICE LABELS: the labels of the newest matching profile, "k=v,k=v" sorted by key
labels_of() {
	curl -sS "$SURL/api/0/profiles?service=$1&labels=$2&from=0&to=now&limit=1" |
		jq -r '.body[0].labels | map(.key + "=" + .value) | join(",")'
}
services() { curl -sS "$SURL/api/0/services" | jq -r '.body | join(",")'; }

start_goapp a auth
start_goapp b search -pprof-prefix /custom/pprof
start_goapp c ingest
# shellcheck disable=SC2154 # set by start_goapp
PA=$PORT_a PB=$PORT_b PC=$PORT_c

# ---- the pods -----------------------------------------------------------------------------------

K=$T/kubeconfig
EN='"profefe.com/enable": "true"'
cat >"$T/pods.json" <<EOF
[
 {"metadata": {"name": "web-7d9f8c6b5-x2x9k", "namespace": "shop",
   "labels": {"app": "web", "version": "1.4.2", "app.kubernetes.io/name": "webapp", "team": "a", "pod-template-hash": "7d9f8c6b5"},
   "annotations": {$EN, "profefe.com/port": "$PA"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f8c6b5"}]},
  "spec": {"nodeName": "node-1", "containers": [{"name": "istio-proxy", "ports": [{"containerPort": 15090}]},
                                                {"name": "web", "ports": [{"containerPort": $PA}]}]}},
 {"metadata": {"name": "db-0", "namespace": "shop", "labels": {"app": "db"},
   "annotations": {$EN, "profefe.com/port": "$PB", "profefe.com/path": "/custom/pprof/"},
   "ownerReferences": [{"kind": "StatefulSet", "name": "db"}]}},
 {"metadata": {"name": "nopath-0", "namespace": "shop", "labels": {"app": "nopath"},
   "annotations": {$EN, "profefe.com/port": "$PB", "profefe.com/path": "/not/served"}}},
 {"metadata": {"name": "wrongport-1", "namespace": "shop", "annotations": {$EN, "profefe.com/port": "1"}}},
 {"metadata": {"name": "plain-1", "namespace": "shop", "labels": {"app": "web"}, "annotations": {"profefe.com/port": "$PA"}}},
 {"metadata": {"name": "pending-1", "namespace": "shop", "labels": {"app": "web"}, "annotations": {$EN, "profefe.com/port": "$PA"}},
  "status": {"phase": "Pending"}},
 {"metadata": {"name": "badport-1", "namespace": "shop", "annotations": {$EN, "profefe.com/port": "pprof"}}},
 {"metadata": {"name": "agent-7mxkq", "namespace": "ops", "labels": {"app": "agent"},
   "annotations": {$EN, "profefe.com/port": "pprof", "profefe.com/service": "node-agent"},
   "ownerReferences": [{"kind": "DaemonSet", "name": "agent"}]},
  "spec": {"nodeName": "node-2", "containers": [{"name": "agent", "ports": [{"name": "pprof", "containerPort": $PC}]}]}},
 {"metadata": {"name": "disabled-1", "namespace": "ops", "annotations": {"profefe.com/enable": "false", "profefe.com/port": "$PC"}}},
 {"metadata": {"name": "typo-1", "namespace": "ops", "annotations": {"profefe.com/enable": "True", "profefe.com/port": "$PC"}}},
 {"metadata": {"name": "done-1", "namespace": "ops", "annotations": {$EN, "profefe.com/port": "$PC"}},
  "status": {"phase": "Succeeded"}},
 {"metadata": {"name": "leaving-1", "namespace": "ops", "deletionTimestamp": "2025-01-01T00:00:00Z",
   "annotations": {$EN, "profefe.com/port": "$PC"}}},
 {"metadata": {"name": "web-6c5d4f7b8-q8wzn", "namespace": "staging",
   "labels": {"app": "web", "version": "1.5.0-rc1", "pod-template-hash": "6c5d4f7b8"},
   "annotations": {$EN, "profefe.com/port": "$PA"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "web-6c5d4f7b8"}]}},
 {"metadata": {"name": "api-5b7c9d8f4-z2k8p", "namespace": "default", "labels": {"app": "api", "pod-template-hash": "5b7c9d8f4"},
   "annotations": {$EN, "profefe.com/port": "$PC"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "api-5b7c9d8f4"}]}}
]
EOF

"$KUBEAPI" -kubeconfig "$K" -pods "$T/pods.json" -cert-dir "$T/certs" -bookmark-interval 1s 2>"$T/kubeapi.log" &
API=$(wait_line "$T/kubeapi.log" '^kubeapi: listening on \(https:.*\)$')
if [ -z "$API" ]; then
	fail "setup: kubeapi" "$(cat "$T/kubeapi.log")"
	exit 0
fi
OLD_TOKEN=$(cat "$T/certs/token")
api() { curl -sS --max-time 10 --cacert "$T/certs/ca.crt" -H "Authorization: Bearer $(cat "$T/certs/token")" "$@"; }
ok "setup: collector $SURL, goapps :$PA :$PB (+/custom/pprof) :$PC, kubeapi $API"
sleep 0.5 # let the workloads start

# ---- 1. --once -A ---------------------------------------------------------------------------------

t0=$SECONDS
"$PROFD" scrape --once --kubeconfig "$K" -A --collector "$SURL" --types heap,goroutine --cpu-duration 1s \
	--listen 127.0.0.1:0 >"$T/once.out" 2>"$T/once.err"
rc=$?
expect "once -A: exit 1 (one target is down) ($((SECONDS - t0)) s)" 1 "$rc"
rows=$(sed -n '2,/^$/p' "$T/once.out" | grep -v '^$' | awk '{print $1 "|" $2 "|" $3 "|" $4}' | tr '\n' ' ')
expect "once -A: the table lists exactly the selected pods, by namespace/pod, with their service" \
	"default/api-5b7c9d8f4-z2k8p|api|ok|ok ops/agent-7mxkq|node-agent|ok|ok shop/db-0|db|ok|ok shop/nopath-0|nopath-0|http_4xx|http_4xx shop/web-7d9f8c6b5-x2x9k|web|ok|ok shop/wrongport-1|wrongport-1|connect|connect staging/web-6c5d4f7b8-q8wzn|web|ok|ok " \
	"$rows"
head -1 "$T/once.out" | grep -q '^TARGET  *SERVICE  *HEAP  *GOROUTINE  *BYTES  *DURATION$' &&
	ok "once -A: table header" || fail "once -A: table header" "$(head -1 "$T/once.out")"
grep -q "target shop/wrongport-1 type heap: target down" "$T/once.out" &&
	ok "once -A: the wrong port is reported as target down" || fail "once -A: wrong port" "$(cat "$T/once.out")"
grep -q "target shop/nopath-0 type heap: .*404" "$T/once.out" &&
	ok "once -A: profefe.com/path is honoured (a path nothing serves: 404)" || fail "once -A: nopath" "$(cat "$T/once.out")"
expect "once -A: /api/0/services: the selected pods' services" "api,db,node-agent,web" "$(services)"
got=""
for sel in "web namespace=shop,pod=web-7d9f8c6b5-x2x9k" "web namespace=staging,pod=web-6c5d4f7b8-q8wzn" \
	"db namespace=shop,pod=db-0" "node-agent namespace=ops,pod=agent-7mxkq" "api namespace=default,pod=api-5b7c9d8f4-z2k8p"; do
	# shellcheck disable=SC2086
	got="$got$(count $sel) "
done
expect "once -A: heap + goroutine of each selected pod (by service and namespace,pod labels)" "2 2 2 2 2 " "$got"
expect "once -A: labels of a Deployment's pod: namespace, pod, container (the one with the port), node, kept pod labels" \
	"app=web,app.kubernetes.io/name=webapp,container=web,namespace=shop,node=node-1,pod=web-7d9f8c6b5-x2x9k,version=1.4.2" \
	"$(labels_of web namespace=shop)"
expect "once -A: labels of a StatefulSet's pod (default container, node)" \
	"app=db,container=app,namespace=shop,node=node-1,pod=db-0" "$(labels_of db pod=db-0)"
expect "once -A: a DaemonSet's pod: profefe.com/service override, named port, its node" \
	"app=agent,container=agent,namespace=ops,node=node-2,pod=agent-7mxkq" "$(labels_of node-agent pod=agent-7mxkq)"
n=0
for s in plain-1 pending-1 badport-1 disabled-1 typo-1 done-1 leaving-1 wrongport-1; do n=$((n + $(count $s))); done
nweb=$(count web pod=plain-1)$(count web pod=pending-1)
expect "once -A: nothing from pods not annotated, enable=false or True, Pending, Succeeded, being deleted, down" "0 00" "$n $nweb"
grep -q 'pod shop/pending-1: annotated for profiling but skipped: phase Pending' "$T/once.err" &&
	grep -q 'level=warn component=kube msg="pod shop/badport-1: annotated for profiling but skipped: profefe.com/port \\"pprof\\" is neither' "$T/once.err" &&
	grep -q 'level=warn component=kube msg="pod ops/typo-1: not scraped: profefe.com/enable is \\"True\\": only \\"true\\" (lower case) turns profiling on"' "$T/once.err" &&
	grep -q 'listed 14 pod(s) in all namespaces: 11 annotated profefe.com/enable=true, 7 target(s)' "$T/once.err" &&
	ok "once -A: the log says which annotated pods were skipped and why, and counts" ||
	fail "once -A: log" "$(grep component=kube "$T/once.err")"
grep -q '7 target(s) failed\|2 of 7 target(s) failed' "$T/once.err" && ok "once -A: the last line counts the Kubernetes targets" ||
	fail "once -A: last line" "$(tail -1 "$T/once.err")"
no_sanitizer "once -A: no sanitizer report" "$T/once.err"

# ---- 2. -n, -l, --pod-labels -----------------------------------------------------------------------

api -X POST "$API/admin/fault?code=410&count=1&match=/pods" >/dev/null # the list expires once
"$PROFD" scrape --once --kubeconfig "$K" -n staging --collector "$SURL" --types goroutine >"$T/ns.out" 2>"$T/ns.err"
rc=$?
expect "once -n staging: exit 0, only that namespace's pod" "0 staging/web-6c5d4f7b8-q8wzn" \
	"$rc $(sed -n '2,/^$/p' "$T/ns.out" | awk 'NF {print $1}' | tr '\n' ' ' | sed 's/ $//')"
grep -q 'HTTP 410 .*; listing again' "$T/ns.err" && ok "once: a 410 on the list: listed again, once" ||
	fail "once: 410 on the list" "$(cat "$T/ns.err")"
expect "once -n staging: stored for staging only" "3 2" "$(count web namespace=staging) $(count web namespace=shop)"
"$PROFD" scrape --once -q --kubeconfig "$K" --context kubeapi-cert -A -l 'app=web' --pod-labels 'team, version' -L cluster=e2e \
	--collector "$SURL" --types goroutine >"$T/sel.out" 2>"$T/sel.err"
rc=$?
expect "once -A -l app=web (client certificate context): the two web pods, not plain-1 or pending-1" \
	"0 shop/web-7d9f8c6b5-x2x9k staging/web-6c5d4f7b8-q8wzn" \
	"$rc $(sed -n '2,/^$/p' "$T/sel.out" | awk 'NF {print $1}' | tr '\n' ' ' | sed 's/ $//')"
expect "once --pod-labels team,version -L cluster=e2e: those labels, no app" \
	"cluster=e2e,container=web,namespace=shop,node=node-1,pod=web-7d9f8c6b5-x2x9k,team=a,version=1.4.2" \
	"$(labels_of web cluster=e2e,namespace=shop)"
# static targets combine with discovery; the default namespace is the context's (default)
"$PROFD" scrape --once -q --kubeconfig "$K" --collector "$SURL" --types goroutine \
	--target "127.0.0.1:$PC" --service static-c >"$T/mix.out" 2>"$T/mix.err"
rc=$?
expect "once --kubeconfig + --target: the static target and the context namespace's pod" \
	"0 http://127.0.0.1:$PC/debug/pprof default/api-5b7c9d8f4-z2k8p" \
	"$rc $(sed -n '2,/^$/p' "$T/mix.out" | awk 'NF {print $1}' | tr '\n' ' ' | sed 's/ $//')"
no_sanitizer "once -n / -l: no sanitizer report" "$T/ns.err" "$T/sel.err" "$T/mix.err"
# the YAML config's kubernetes entries: they turn discovery on, say what is watched (shop and
# staging: all namespaces), choose the pods (first match) and give them types and labels
cat >"$T/kube.yaml" <<'EOF'
global: {types: [goroutine], labels: {run: yamlk}}
scrape_configs:
  - kubernetes: {namespaces: [shop], selector: 'app in (web, db)'}
    types: [heap]
    label_keep: [namespace, pod, team, run]
  - kubernetes: {namespaces: [staging]}
    labels: {stage: s1}
EOF
"$PROFD" scrape --once --kubeconfig "$K" --config "$T/kube.yaml" --collector "$SURL" >"$T/ky.out" 2>"$T/ky.err"
rc=$?
expect "once --config (kubernetes entries): exit 0, exactly the pods the entries match" \
	"0 shop/db-0 shop/web-7d9f8c6b5-x2x9k staging/web-6c5d4f7b8-q8wzn" \
	"$rc $(sed -n '2,/^$/p' "$T/ky.out" | awk 'NF {print $1}' | tr '\n' ' ' | sed 's/ $//')"
expect "once --config: each entry's types (shop: heap; staging: global:'s goroutine)" "1 0 1 0 1" \
	"$(count web run=yamlk,namespace=shop heap) $(count web run=yamlk,namespace=shop goroutine) $(count web run=yamlk,namespace=staging goroutine) $(count web run=yamlk,namespace=staging heap) $(count db run=yamlk heap)"
expect "once --config: label_keep (pod labels it names copied, the rest dropped)" \
	"namespace=shop,pod=web-7d9f8c6b5-x2x9k,run=yamlk,team=a" "$(labels_of web run=yamlk,namespace=shop)"
expect "once --config: the second entry's labels after the pod's" \
	"app=web,container=app,namespace=staging,node=node-1,pod=web-6c5d4f7b8-q8wzn,run=yamlk,stage=s1,version=1.5.0-rc1" \
	"$(labels_of web run=yamlk,namespace=staging)"
grep -q 'in all namespaces: 11 annotated profefe.com/enable=true, 3 target(s)' "$T/ky.err" &&
	ok "once --config: namespaces of two entries: all watched, 3 targets" || fail "once --config: log" "$(grep component=kube "$T/ky.err")"
no_sanitizer "once --config (kubernetes): no sanitizer report" "$T/ky.err"

# ---- 3. continuous: list + watch -----------------------------------------------------------------------

pod_json() { # NAME PORT [EXTRA-ANNOTATIONS]
	printf '{"metadata":{"name":"%s","namespace":"cont","labels":{"app":"%s"},"annotations":{"profefe.com/enable":"true","profefe.com/port":"%s"%s}}}' \
		"$1" "$1" "$2" "${3:-}"
}
api -X POST --data "$(pod_json one "$PA")" "$API/admin/pods" >/dev/null
"$PROFD" scrape --kubeconfig "$K" -n cont --collector "$SURL" --types goroutine --interval 2s \
	--listen 127.0.0.1:0 --flush-timeout 3s 2>"$T/cont.err" &
SCR=$!
mport=$(wait_line "$T/cont.err" '.*metrics listening on port \([0-9][0-9]*\).*')
M=http://127.0.0.1:$mport
metric() { curl -sS "$M/metrics" | awk -v n="$1" '$1 == n && !d {print $2; d = 1}'; }
has_profiles() { [ "$(count "$1")" -ge "${2:-1}" ]; }
metric_ge() { [ "$(metric "$1")" -ge "$2" ] 2>/dev/null; }
metric_eq() { [ "$(metric "$1")" = "$2" ]; }

if until_true 60 has_profiles one; then ok "continuous: the listed pod is scraped"; else fail "continuous: listed pod" "$(cat "$T/cont.err")"; fi
expect "continuous: /metrics: 1 target, 1 list, API up" "1 1 1" \
	"$(metric profd_scrape_kube_targets) $(metric profd_scrape_kube_list_total) $(metric profd_scrape_kube_api_up)"

# a pod added through the watch
api -X POST --data "$(pod_json two "$PB")" "$API/admin/pods" >/dev/null
t0=$SECONDS
if until_true 60 has_profiles two; then
	ok "continuous: a pod added through the watch is scraped ($((SECONDS - t0)) s, interval 2 s)"
else
	fail "continuous: added pod" "$(tail -5 "$T/cont.err")"
fi
grep -q 'pod cont/two: new target (service two, http://127.0.0.1:'"$PB"'/debug/pprof)' "$T/cont.err" &&
	ok "continuous: the log names the new target" || fail "continuous: new target log" "$(grep component=kube "$T/cont.err")"

# deleted, and no longer Running: both stop
api -X DELETE "$API/admin/pods/cont/one" >/dev/null
api -X PATCH --data '{"status":{"phase":"Succeeded"}}' "$API/admin/pods/cont/two" >/dev/null
if until_true 50 metric_eq profd_scrape_targets 0; then
	sleep 1 # a scrape in flight may still land
	n1=$(count one) n2=$(count two)
	sleep 4.5
	expect "continuous: a deleted pod and a pod no longer Running are not scraped any more (2 intervals)" "$n1 $n2" "$(count one) $(count two)"
else
	fail "continuous: targets gone" "$(curl -sS "$M/metrics" | grep targets)"
fi
grep -q 'pod cont/one deleted: no longer a target' "$T/cont.err" && grep -q 'pod cont/two: no longer a target: phase Succeeded' "$T/cont.err" &&
	ok "continuous: the log says why they left" || fail "continuous: leave log" "$(grep component=kube "$T/cont.err")"

# 500: the next watch requests fail; backoff, then the watch is back
api -X POST --data "$(pod_json three "$PC")" "$API/admin/pods" >/dev/null
until_true 60 has_profiles three || fail "continuous: pod three" "$(tail -3 "$T/cont.err")"
api -X POST "$API/admin/fault?code=500&count=2&match=watch" >/dev/null
api -X POST "$API/admin/watches/close" >/dev/null
if until_true 60 metric_ge 'profd_scrape_kube_errors_total{reason="http_5xx"}' 2; then
	ok "continuous: API 500 on the watch: counted as http_5xx"
else
	fail "continuous: 500 counted" "$(curl -sS "$M/metrics" | grep kube_errors)"
fi
api -X POST --data "$(pod_json four "$PA")" "$API/admin/pods" >/dev/null
if until_true 80 has_profiles four; then ok "continuous: after the 500s (backoff 1 s, 2 s) the watch is back: a new pod is scraped"; else fail "continuous: recover after 500" "$(tail -5 "$T/cont.err")"; fi
grep -q 'watching pods failed (http_5xx): .*HTTP 500 .*again in 1.0s, scraping the 1 known target(s) meanwhile' "$T/cont.err" &&
	grep -q 'again in 2.0s' "$T/cont.err" && ok "continuous: the log reports the 500s and the backoff" ||
	fail "continuous: 500 log" "$(grep 'failed' "$T/cont.err")"

# the watch is up again (bookmarks every second); cut mid-stream (an API server crash, a load
# balancer dropping it): tried again after 1 s, not after the 500s' backoff grown on (4 s)
sleep 1.5
api -X POST "$API/admin/watches/close?abort=1" >/dev/null
if until_true 50 grep -q 'watching pods failed (network)' "$T/cont.err" &&
	grep 'watching pods failed (network)' "$T/cont.err" | head -1 | grep -q 'again in 1.0s'; then
	ok "continuous: a watch cut after it was up: a new backoff series (1 s)"
else
	fail "continuous: backoff after a cut" "$(grep 'watching pods failed' "$T/cont.err" | sed 's/GET [^ ]*//')"
fi

# 410: while the watch is down (a 500), a change and a compaction: the resourceVersion is gone -> list again
lists=$(metric profd_scrape_kube_list_total)
api -X POST "$API/admin/fault?code=500&count=1&match=watch" >/dev/null
api -X POST "$API/admin/watches/close" >/dev/null
sleep 0.3
api -X POST --data "$(pod_json five "$PB")" "$API/admin/pods" >/dev/null
api -X POST "$API/admin/compact" >/dev/null
if until_true 60 metric_ge 'profd_scrape_kube_errors_total{reason="gone"}' 1 && until_true 30 metric_ge profd_scrape_kube_list_total $((lists + 1)); then
	ok "continuous: watch from a compacted resourceVersion: 410 counted (gone), listed again"
else
	fail "continuous: 410" "lists $lists -> $(metric profd_scrape_kube_list_total); $(grep 'gone\|410' "$T/cont.err")"
fi
if until_true 60 has_profiles five; then ok "continuous: the pod added while the watch was down comes with the re-list"; else fail "continuous: re-list pod" "$(tail -5 "$T/cont.err")"; fi

# 401: the kubeconfig's token revoked (it cannot be re-read): reported, counted, the known targets still scraped
api -X POST "$API/admin/token?value=rotated-$RANDOM$RANDOM" >/dev/null
api -X POST "$API/admin/watches/close" >/dev/null
if until_true 60 metric_ge 'profd_scrape_kube_errors_total{reason="unauthorized"}' 1; then
	ok "continuous: token revoked: 401 counted (unauthorized)"
else
	fail "continuous: 401" "$(curl -sS "$M/metrics" | grep kube_errors)"
fi
expect "continuous: API down: profd_scrape_kube_api_up 0, the 3 known targets kept" "0 3" \
	"$(metric profd_scrape_kube_api_up) $(metric profd_scrape_kube_targets)"
n3=$(count three)
if until_true 60 has_profiles three $((n3 + 1)); then ok "continuous: while the API refuses us, the known targets are still scraped"; else fail "continuous: scraping during 401" "$n3"; fi
grep -q 'watching pods failed (unauthorized): .*HTTP 401 Unauthorized' "$T/cont.err" && ok "continuous: the log reports the 401" ||
	fail "continuous: 401 log" "$(grep failed "$T/cont.err" | tail -3)"
api -X POST "$API/admin/token?value=$OLD_TOKEN" >/dev/null
api -X POST --data "$(pod_json six "$PC")" "$API/admin/pods" >/dev/null
if until_true 120 has_profiles six; then ok "continuous: the token valid again: discovery recovers (a new pod is scraped)"; else fail "continuous: recover after 401" "$(tail -5 "$T/cont.err")"; fi

# a pod the API accepts but discovery cannot read (5000 annotations: over its cap of 4096): skipped
# with a warning; the watch goes on (it used to fail on that event, and again on every retry)
seq -f '"a%g":"x"' 5000 | paste -sd, | awk '{print "{\"metadata\":{\"name\":\"huge\",\"namespace\":\"cont\",\"annotations\":{" $0 "}}}"}' >"$T/huge.json"
api -X POST --data @"$T/huge.json" "$API/admin/pods" >/dev/null
api -X POST --data "$(pod_json seven "$PA")" "$API/admin/pods" >/dev/null
if until_true 80 has_profiles seven && grep -q 'level=warn component=kube msg="pod cont/huge: cannot be read, skipped: watch stream: .*5000 entries, over the limit of 4096' "$T/cont.err"; then
	ok "continuous: an unreadable pod is skipped with a warning, the watch goes on (a later pod is scraped)"
else
	fail "continuous: unreadable pod" "$(grep component=kube "$T/cont.err" | tail -3)"
fi
expect "continuous: API up again" 1 "$(metric profd_scrape_kube_api_up)"
if metric_ge profd_scrape_kube_watch_restarts_total 5 && metric_ge profd_scrape_kube_watch_events_total 5; then
	ok "continuous: /metrics counts watch restarts ($(metric profd_scrape_kube_watch_restarts_total)) and events"
else
	fail "continuous: restarts" "$(curl -sS "$M/metrics" | grep kube_watch)"
fi
curl -sS "$M/metrics" >"$T/metrics.txt"
grep -q '^profd_scrape_target_up{target="cont/three",service="three"} 1$' "$T/metrics.txt" &&
	ok "continuous: scrape health series name the pod (target=\"namespace/pod\")" ||
	fail "continuous: target_up" "$(grep target_up "$T/metrics.txt")"
kill -TERM $SCR
exit_within $SCR 5
rc=$EXIT_RC
expect "continuous: SIGTERM: exit 0, promptly (discovery thread joined)" 0 "$rc"
no_sanitizer "continuous: no sanitizer report" "$T/cont.err"

# ---- 3b. many pods: each watch event costs O(pods), not O(pods^2) ---------------------------------------

# 10000 annotated pods (port 1: nothing listens; --interval 1h: hardly scraped); 40 label changes
# in a row must all be applied within seconds (each used to rebuild the target list in O(n^2):
# half a second per event at 10000 pods, two at 20000)
NBIG=10000
seq -f 'p-%05g' "$NBIG" | awk 'BEGIN {printf "["} NR > 1 {printf ","}
	{printf "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"big\",\"annotations\":{\"profefe.com/enable\":\"true\",\"profefe.com/port\":\"1\"}}}", $1}
	END {print "]"}' >"$T/big.json"
"$KUBEAPI" -kubeconfig "$T/kbig" -pods "$T/big.json" -cert-dir "$T/certsbig" 2>"$T/kubeapibig.log" &
APIB=$(wait_line "$T/kubeapibig.log" '^kubeapi: listening on \(https:.*\)$')
"$PROFD" scrape --kubeconfig "$T/kbig" -n big --collector "$SURL" --types goroutine --interval 1h 2>"$T/big.err" &
SCR=$!
if until_true 300 grep -q "listed $NBIG pod(s) in namespace big: $NBIG annotated" "$T/big.err"; then
	t0=$SECONDS
	for ((i = 1; i <= 40; i++)); do
		curl -sS --max-time 10 --cacert "$T/certsbig/ca.crt" -H "Authorization: Bearer $(cat "$T/certsbig/token")" \
			-X PATCH --data "{\"metadata\":{\"labels\":{\"app\":\"v$i\"}}}" "$APIB/admin/pods/big/p-$(printf %05d $((i % 10 + 1)))" >/dev/null
	done
	big_changed() { [ "$(grep -c 'changed target' "$T/big.err")" -ge 40 ]; }
	if until_true 80 big_changed; then
		ok "$NBIG pods: 40 watch events applied within $((SECONDS - t0)) s"
	else
		fail "$NBIG pods: 40 watch events" "$(grep -c 'changed target' "$T/big.err") applied after $((SECONDS - t0)) s"
	fi
	# a burst: 2000 pods at once (a big rollout), 2000 ADDED events: handed to the scraper in a few
	# lists, not one copy of 12000 targets per event (that took a minute)
	seq -f 'q-%05g' 2000 | awk 'BEGIN {printf "["} NR > 1 {printf ","}
		{printf "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"big\",\"annotations\":{\"profefe.com/enable\":\"true\",\"profefe.com/port\":\"1\"}}}", $1}
		END {print "]"}' >"$T/burst.json"
	t0=$SECONDS
	curl -sS --max-time 30 --cacert "$T/certsbig/ca.crt" -H "Authorization: Bearer $(cat "$T/certsbig/token")" \
		-X POST --data @"$T/burst.json" "$APIB/admin/pods" >/dev/null
	if until_true 100 grep -q "targets: $((NBIG + 2000)) " "$T/big.err"; then
		ok "$NBIG pods: a burst of 2000 new pods is with the scraper within $((SECONDS - t0)) s ($(grep -c 'component=scrape msg="targets: ' "$T/big.err") target lists)"
	else
		fail "$NBIG pods: a burst of 2000" "$(grep -c 'new target' "$T/big.err") applied after $((SECONDS - t0)) s; $(grep 'targets: ' "$T/big.err" | tail -1)"
	fi
else
	fail "$NBIG pods: listed" "$(tail -3 "$T/big.err")"
fi
kill -TERM $SCR
wait $SCR
expect "$NBIG pods: SIGTERM: exit 0" 0 "$?"
# SIGTERM while the list is on its way (every page 5 s late: 20 pages, 100 s): it ends at once,
# not after the last page
curl -sS --max-time 10 --cacert "$T/certsbig/ca.crt" -H "Authorization: Bearer $(cat "$T/certsbig/token")" \
	-X POST "$APIB/admin/fault?code=0&count=40&match=/pods%3Flimit&delay=5s" >/dev/null
"$PROFD" scrape --kubeconfig "$T/kbig" -n big --collector "$SURL" --types goroutine --interval 1h 2>"$T/bigstop.err" &
SCR=$!
sleep 2
t0=$SECONDS
kill -TERM $SCR
exit_within $SCR 5
rc=$EXIT_RC
expect "$NBIG pods: SIGTERM during a slow paged list: exit 0 within 5 s ($((SECONDS - t0)) s)" 0 "$rc"
grep -q 'listed .* pod(s)' "$T/bigstop.err" && fail "$NBIG pods: SIGTERM during a list" "the list went on: $(grep listed "$T/bigstop.err")"
no_sanitizer "$NBIG pods: no sanitizer report" "$T/big.err" "$T/bigstop.err"

# ---- 4. zero config in a pod: the service account -------------------------------------------------------

# profd scrape as in a pod: no kubeconfig, KUBERNETES_SERVICE_*, the service-account directory
hp=${API#https://}
INPOD=(env -u KUBECONFIG HOME="$T/podhome" KUBERNETES_SERVICE_HOST="${hp%:*}" KUBERNETES_SERVICE_PORT="${hp##*:}"
	PROFD_KUBE_SA_DIR="$T/certs" "$PROFD" scrape)
mkdir -p "$T/podhome"
"${INPOD[@]}" --once --collector "$SURL" --types goroutine >"$T/zero.out" 2>"$T/zero.err"
rc=$?
expect "in a pod, no flags: the service account's namespace (default) is discovered" "0 default/api-5b7c9d8f4-z2k8p" \
	"$rc $(sed -n '2,/^$/p' "$T/zero.out" | awk 'NF {print $1}' | tr '\n' ' ' | sed 's/ $//')"
grep -q 'in-cluster service account' "$T/zero.err" && ok "in a pod: the log says in-cluster" || fail "in a pod: log" "$(head -3 "$T/zero.err")"

api -X POST --data '{"metadata":{"name":"api-5b7c9d8f4-r7t5v","namespace":"default","labels":{"app":"api","pod-template-hash":"5b7c9d8f4"},"annotations":{"profefe.com/enable":"true","profefe.com/port":"'"$PA"'"},"ownerReferences":[{"kind":"ReplicaSet","name":"api-5b7c9d8f4"}]}}' "$API/admin/pods" >/dev/null
"${INPOD[@]}" --collector "$SURL" --types goroutine --interval 2s --listen 127.0.0.1:0 --flush-timeout 2s 2>"$T/zcont.err" &
SCR=$!
mport=$(wait_line "$T/zcont.err" '.*metrics listening on port \([0-9][0-9]*\).*')
M=http://127.0.0.1:$mport
until_true 60 metric_ge profd_scrape_kube_targets 2 || fail "in a pod, continuous: 2 targets" "$(cat "$T/zcont.err")"
api -X POST "$API/admin/token?value=rotated-again-$RANDOM" >/dev/null # rewrites certs/token
api -X POST "$API/admin/watches/close" >/dev/null
api -X DELETE "$API/admin/pods/default/api-5b7c9d8f4-r7t5v" >/dev/null
if until_true 60 metric_eq profd_scrape_kube_targets 1; then
	expect "in a pod: token rotated (file rewritten): re-read on the 401, the watch goes on, no error" 0 \
		"$(metric 'profd_scrape_kube_errors_total{reason="unauthorized"}')"
else
	fail "in a pod: token rotation" "$(grep component=kube "$T/zcont.err" | tail -5)"
fi
kill -TERM $SCR
wait $SCR
expect "in a pod, continuous: SIGTERM: exit 0" 0 "$?"
no_sanitizer "in a pod: no sanitizer report" "$T/zero.err" "$T/zcont.err"

# ---- 5. usage ---------------------------------------------------------------------------------------------

"$PROFD" scrape --help >"$T/help" 2>&1
grep -q -- '--all-namespaces' "$T/help" && grep -q 'profefe.com/path' "$T/help" && grep -q -- '--pod-labels' "$T/help" &&
	ok "usage: --help documents Kubernetes discovery" || fail "usage: --help" "$(head -5 "$T/help")"
expect_exit "usage: bad namespace" 2 'not a namespace name' "$PROFD" scrape --once -n 'Bad_NS'
expect_exit "usage: --pod-labels service (a selector's service is the profile's, never such a label)" 2 \
	'--pod-labels: service is not a label' "$PROFD" scrape --once -A --pod-labels app,service
expect_exit "usage: no targets names the Kubernetes flags" 2 'no targets: .*-A' env -u KUBERNETES_SERVICE_HOST "$PROFD" scrape --once
expect_exit "missing --kubeconfig: exit 1, names the file" 1 "kubeconfig.*$T/nope" "$PROFD" scrape --once --kubeconfig "$T/nope"
expect_exit "unknown --context: exit 1, lists the contexts" 1 'context "nope" not found' "$PROFD" scrape --once --kubeconfig "$K" --context nope
api -X POST "$API/admin/fault?code=403&count=1&match=/pods" >/dev/null
expect_exit "--once: the list forbidden (RBAC): exit 1 with the API's message" 1 'HTTP 403 Forbidden: pods is forbidden' \
	"$PROFD" scrape --once --kubeconfig "$K" -A --collector "$SURL"

no_sanitizer "collector log: no sanitizer report" "$T/srv.log"
echo "# test_scrape_kube.sh took $((SECONDS - t_start)) s"
