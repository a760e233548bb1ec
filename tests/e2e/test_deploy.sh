#!/usr/bin/env bash
# test_deploy.sh — deploy/kubernetes checked with REAL kubectl and the real
# profd binary (issue 4, item 6):
#   1. kubectl kustomize of both layouts (deploy/kubernetes: collector +
#      continuous scraper; deploy/kubernetes/cronjob: collector + CronJob),
#      offline: the expected objects, all in namespace profd
#   2. kubectl apply --dry-run=client -k and -f FILE of every manifest, against
#      the test API server (tests/kubeapi: pods only, so kubectl's discovery
#      cache is seeded with the resource lists of the kinds used), and kubectl
#      create --dry-run=client -o json offline (the same seeded cache, an
#      unreachable server). --validate=false: schema validation needs the
#      server's OpenAPI documents, which the test server does not serve; 3
#      does that job instead:
#   3. every object decoded into kubectl's own Go types (kubectl set ...
#      --local decodes typed, offline): no type error, and no unknown field
#      in workloads, Services and bindings (the typed round trip must keep
#      every field given; a control with a misspelt field must be caught)
#   4. consistency: labels, image, Service <-> collector port <-> scraper's
#      --collector URL, probes on declared ports, grace period >
#      --shutdown-timeout, single writer (1 replica, Recreate, RWO volume),
#      RBAC = pods get/list/watch, non-root and read-only root filesystem,
#      resources, the CronJob's state on a PVC
#   5. the args of every profd container are accepted by build/profd: each
#      flag is in `profd CMD --help` (the Kubernetes discovery flags are
#      skipped while the binary has none), and the commands run with them
#      (addresses and directories swapped for local ones, --cpu-duration 1s
#      added; -A pointed at the test API server, whose one annotated pod is a
#      real examples/goapp, or, without discovery in the binary or without
#      the server, replaced by a static --target of that goapp): serve
#      answers its probe paths, is the collector of the scrapes, stops
#      cleanly on SIGTERM; the continuous scraper answers its probe paths and
#      stops cleanly; the CronJob's `scrape --once` run twice keeps the allocs
#      base in --state-dir, then stores a delta; its prune command deletes
#      only old state files.
# Needs kubectl and jq (skipped without them).
# Run: BUILD=build bash tests/e2e/test_deploy.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
# shellcheck disable=SC2016 # jq programs in single quotes, on purpose
source "$(dirname "$0")/lib.sh"

DEPLOY=$ROOT/deploy/kubernetes
KUBEAPI=$ROOT/$BUILD/kubeapi
[ -x "$KUBEAPI" ] || KUBEAPI=$ROOT/build/kubeapi # Go program, not sanitized

if ! command -v kubectl >/dev/null 2>&1; then
	ok "deploy/kubernetes manifests # SKIP kubectl not installed"
	exit 0
fi
if ! command -v jq >/dev/null 2>&1; then
	ok "deploy/kubernetes manifests # SKIP jq not installed (needed for the JSON checks)"
	exit 0
fi
if [ ! -x "$PROFD" ]; then
	fail "setup: $PROFD exists" "not built; run: make"
	exit 0
fi

API_PID='' RUN_PID='' SERVE_PID='' APP_PID=''
stop_all() {
	local p
	for p in $RUN_PID $SERVE_PID $API_PID $APP_PID; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
}
eval "set -- $(trap -p EXIT)"
# shellcheck disable=SC2064 # lib.sh's command is expanded now, on purpose
trap "stop_all; ${3:-}" EXIT

expect() { # NAME WANT GOT
	if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "want '$2', got '$3'"; fi
}

# wait_grep FILE REGEX [TENTHS]: wait until FILE matches REGEX (default 5 s)
wait_grep() {
	local i
	for ((i = 0; i < ${3:-50}; i++)); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# seed_discovery HOST_PORT: kubectl's discovery cache for the server at
# HOST:PORT, listing the kinds the manifests use (kubectl trusts it for 6 h)
seed_discovery() {
	local d=$HOME/.kube/cache/discovery/$1
	mkdir -p "$d/v1" "$d/apps/v1" "$d/batch/v1" "$d/rbac.authorization.k8s.io/v1"
	g() { printf '{"name":"%s","versions":[{"groupVersion":"%s","version":"v1"}],"preferredVersion":{"groupVersion":"%s","version":"v1"}}' "$1" "$2" "$2"; }
	r() { printf '{"name":"%s","singularName":"%s","namespaced":%s,"kind":"%s","verbs":["create","delete","get","list","patch","update","watch"]}' "$@"; }
	l() { printf '{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"%s","resources":[%s]}' "$1" "$2"; }
	printf '{"kind":"APIGroupList","apiVersion":"v1","groups":[%s,%s,%s,%s]}' "$(g '' v1)" "$(g apps apps/v1)" \
		"$(g batch batch/v1)" "$(g rbac.authorization.k8s.io rbac.authorization.k8s.io/v1)" >"$d/servergroups.json"
	l v1 "$(r namespaces namespace false Namespace),$(r services service true Service),$(r serviceaccounts serviceaccount true ServiceAccount),$(r persistentvolumeclaims persistentvolumeclaim true PersistentVolumeClaim),$(r pods pod true Pod)" >"$d/v1/serverresources.json"
	l apps/v1 "$(r deployments deployment true Deployment)" >"$d/apps/v1/serverresources.json"
	l batch/v1 "$(r cronjobs cronjob true CronJob),$(r jobs job true Job)" >"$d/batch/v1/serverresources.json"
	l rbac.authorization.k8s.io/v1 "$(r clusterroles clusterrole false ClusterRole),$(r clusterrolebindings clusterrolebinding false ClusterRoleBinding)" \
		>"$d/rbac.authorization.k8s.io/v1/serverresources.json"
}

# objs: the objects of kubectl's JSON output (a List, or objects one after another)
OBJS='if .kind == "List" then .items[] else . end'

# ---- 1. kustomize (offline) ---------------------------------------------------------------

KVER=$(timeout 20 kubectl version --client 2>/dev/null | head -n1)
LAYOUTS="default cronjob"
dir_of() { if [ "$1" = default ]; then echo "$DEPLOY"; else echo "$DEPLOY/$1"; fi; }
# shellcheck disable=SC2034 # read through ${!want}
want_default="Namespace/profd ServiceAccount/profd-scraper ClusterRole/profd-scraper ClusterRoleBinding/profd-scraper Service/profd PersistentVolumeClaim/profd-data Deployment/profd Deployment/profd-scraper"
# shellcheck disable=SC2034
want_cronjob="Namespace/profd ServiceAccount/profd-scraper ClusterRole/profd-scraper ClusterRoleBinding/profd-scraper Service/profd PersistentVolumeClaim/profd-data PersistentVolumeClaim/profd-scrape-state Deployment/profd CronJob/profd-scrape"
OFFLINE=$T/offline.kubeconfig
cat >"$OFFLINE" <<'EOF'
apiVersion: v1
kind: Config
clusters:
- name: offline
  cluster: {server: "http://127.0.0.1:1"}
contexts:
- name: offline
  context: {cluster: offline, namespace: default}
current-context: offline
users: []
EOF
seed_discovery 127.0.0.1_1
for lay in $LAYOUTS; do
	if timeout 30 kubectl kustomize "$(dir_of "$lay")" >"$T/$lay.yaml" 2>"$T/err"; then
		ok "kubectl kustomize deploy/kubernetes ($lay layout; $KVER)"
	else
		fail "kubectl kustomize ($lay)" "$(head -c 600 "$T/err")"
		continue
	fi
	# unstructured JSON of every object, as kubectl reads it (offline: seeded discovery, no server)
	if timeout 30 kubectl --kubeconfig "$OFFLINE" create --dry-run=client --validate=false -o json -f "$T/$lay.yaml" \
		>"$T/$lay.json" 2>"$T/err"; then
		ok "kubectl create --dry-run=client -o json ($lay layout, offline)"
	else
		fail "kubectl create --dry-run=client ($lay)" "$(head -c 600 "$T/err")"
	fi
	want=want_$lay
	expect "$lay layout: the objects" "${!want}" \
		"$(jq -r "$OBJS | .kind + \"/\" + .metadata.name" "$T/$lay.json" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
done
DJ=$T/default.json CJ=$T/cronjob.json
# the files, each on its own too (as `kubectl apply -f FILE` would take them)
mapfile -t FILES < <(cd "$DEPLOY" && find . -name '*.yaml' ! -name kustomization.yaml | sed 's|^\./||' | sort)
expect "manifests: the files" "base/collector.yaml base/namespace.yaml base/rbac.yaml cronjob/scraper-cronjob.yaml scraper.yaml" "${FILES[*]}"

# ---- 2. kubectl apply --dry-run=client against the test API server --------------------------

# a real Go service for step 5: the pod of the test API server and the static
# stand-in target point at it (without goapp: a closed port)
TPORT=1
if [ -x "$GOAPP" ] || [ -x "$ROOT/build/goapp" ]; then
	[ -x "$GOAPP" ] || GOAPP=$ROOT/build/goapp
	: >"$T/goapp.log"
	"$GOAPP" -addr 127.0.0.1:0 2>"$T/goapp.log" &
	APP_PID=$!
	if wait_grep "$T/goapp.log" '^goapp: listening on ' 100; then
		TPORT=$(sed -n 's/^goapp: listening on .*:\([0-9]*\)$/\1/p' "$T/goapp.log" | head -n1)
	else
		fail "setup: goapp" "$(head -c 400 "$T/goapp.log")"
	fi
fi

K=''
if [ -x "$KUBEAPI" ]; then
	K=$T/kubeconfig
	: >"$T/kubeapi.log"
	# one pod to discover in step 5: annotated, its pprof port goapp's
	echo '[{"metadata": {"name": "app-1", "namespace": "default", "annotations": {"profefe.com/enable": "true", "profefe.com/port": "'"$TPORT"'"}}}]' >"$T/pods.json"
	"$KUBEAPI" -kubeconfig "$K" -pods "$T/pods.json" 2>"$T/kubeapi.log" &
	API_PID=$!
	if wait_grep "$T/kubeapi.log" '^kubeapi: listening on https://127\.0\.0\.1:[0-9]+$' 100; then
		hp=$(sed -n 's|^kubeapi: listening on https://||p' "$T/kubeapi.log" | head -n1 | tr : _)
		seed_discovery "$hp"
		for lay in $LAYOUTS; do
			want=want_$lay
			n=$(echo "${!want}" | wc -w)
			if timeout 30 kubectl --kubeconfig "$K" apply --dry-run=client --validate=false -k "$(dir_of "$lay")" \
				>"$T/apply.out" 2>"$T/err" && [ "$(grep -c ' created (dry run)$' "$T/apply.out")" -eq "$n" ] &&
				[ ! -s "$T/err" ]; then
				ok "kubectl apply --dry-run=client -k ($lay layout): $n objects created (dry run); server $(timeout 20 kubectl --kubeconfig "$K" version 2>/dev/null | sed -n 's/^Server Version: //p')"
			else
				fail "kubectl apply --dry-run=client -k ($lay)" "$(cat "$T/apply.out" "$T/err" | head -c 600)"
			fi
		done
		for f in "${FILES[@]}"; do
			n=$(grep -c '^kind:' "$DEPLOY/$f")
			if timeout 30 kubectl --kubeconfig "$K" apply --dry-run=client --validate=false -f "$DEPLOY/$f" \
				>"$T/apply.out" 2>"$T/err" && [ "$(grep -c ' created (dry run)$' "$T/apply.out")" -eq "$n" ]; then
				ok "kubectl apply --dry-run=client -f $f: $n object(s)"
			else
				fail "kubectl apply --dry-run=client -f $f" "$(cat "$T/apply.out" "$T/err" | head -c 600)"
			fi
		done
	else
		fail "setup: kubeapi" "$(head -c 400 "$T/kubeapi.log")"
	fi
else
	ok "kubectl apply --dry-run=client # SKIP $KUBEAPI not built (make $BUILD/kubeapi)"
fi

# ---- 3. typed decoding (kubectl's Go types) ----------------------------------------------------

# leaves_missing UNSTRUCTURED TYPED: "Kind/name: path" of every scalar given in
# an object of UNSTRUCTURED that the typed round trip of the same object lost
leaves_missing() {
	jq -rn --slurpfile u "$1" --slurpfile t "$2" "
		def leaves: [paths(scalars) | map(tostring) | join(\".\")];
		([\$t[] | $OBJS | {key: (.kind + \"/\" + .metadata.name), value: (reduce leaves[] as \$p ({}; .[\$p] = true))}]
			| from_entries) as \$T
		| \$u[] | $OBJS | (.kind + \"/\" + .metadata.name) as \$k | select(\$T[\$k])
		| leaves[] | select(\$T[\$k][.] | not) | \"\(\$k): \(.)\""
}

# typed LAYOUT: every object through kubectl's typed decoders; the typed JSON of
# workloads (set env), Services (set selector, the same selector) and role
# bindings (set subject) in $T/LAYOUT.typed.json
typed() {
	local lay=$1 y=$T/$1.yaml out=$T/$1.typed.json
	: >"$out"
	: >"$T/$lay.typed.err"
	timeout 30 kubectl set env --local -f "$y" PROFD_DEPLOY_TEST=1 -o json >>"$out" 2>>"$T/$lay.typed.err"
	local sel
	sel=$(jq -r "$OBJS | select(.kind == \"Service\") | .spec.selector | to_entries | map(.key + \"=\" + .value) | join(\",\")" "$T/$lay.json" | head -n1)
	timeout 30 kubectl set selector --local -f "$y" "$sel" -o json >>"$out" 2>>"$T/$lay.typed.err.2"
	timeout 30 kubectl set subject --local -f "$y" --serviceaccount=profd:deploy-test -o json >>"$out" 2>>"$T/$lay.typed.err.3"
	cat "$T/$lay.typed.err.2" "$T/$lay.typed.err.3" >>"$T/$lay.typed.err"
}
for lay in $LAYOUTS; do
	[ -s "$T/$lay.json" ] || continue
	typed "$lay"
	# decoded: every object is either printed (typed) or refused for its kind by name
	# (*v1.Namespace ...), never "unable to decode"
	if grep -q 'unable to decode\|cannot unmarshal\|json:' "$T/$lay.typed.err"; then
		fail "$lay layout: typed decoding" "$(grep -m3 'unable to decode\|cannot unmarshal\|json:' "$T/$lay.typed.err")"
	else
		kinds=$( (jq -r "$OBJS | .kind" "$T/$lay.typed.json"; grep -o '\*v1\.[A-Za-z]*' "$T/$lay.typed.err" | sed 's/^\*v1\.//') | sort -u | tr '\n' ' ')
		expect "$lay layout: every kind decoded into kubectl's Go types" \
			"$(jq -r "$OBJS | .kind" "$T/$lay.json" | sort -u | tr '\n' ' ')" "$kinds"
	fi
	missing=$(leaves_missing "$T/$lay.json" "$T/$lay.typed.json")
	checked=$(jq -r "$OBJS | .kind" "$T/$lay.typed.json" | sort -u | tr '\n' ' ' | sed 's/ $//')
	if [ -z "$missing" ] && [ -n "$checked" ]; then
		ok "$lay layout: no unknown field ($checked: every field survives the typed round trip)"
	else
		fail "$lay layout: unknown fields" "${missing:-nothing checked}"
	fi
done
# control: a misspelt field must be caught by the check above
sed 's/^\(  *\)terminationGracePeriodSeconds: 45$/\1terminationGracePeriodSecond: 45/' "$T/default.yaml" >"$T/bad.yaml"
timeout 30 kubectl --kubeconfig "$OFFLINE" create --dry-run=client --validate=false -o json -f "$T/bad.yaml" >"$T/bad.json" 2>/dev/null
timeout 30 kubectl set env --local -f "$T/bad.yaml" PROFD_DEPLOY_TEST=1 -o json >"$T/bad.typed.json" 2>/dev/null
expect "control: a misspelt field is reported" \
	"Deployment/profd: spec.template.spec.terminationGracePeriodSecond" "$(leaves_missing "$T/bad.json" "$T/bad.typed.json")"
sed 's/^\(  *\)replicas: 1$/\1replicas: "1"/' "$T/default.yaml" >"$T/bad2.yaml"
if timeout 30 kubectl set env --local -f "$T/bad2.yaml" X=1 -o json 2>&1 >/dev/null | grep -q 'cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas'; then
	ok "control: a wrongly typed field is refused by the typed decoding"
else
	fail "control: wrongly typed field" "not refused"
fi

# ---- 4. consistency ------------------------------------------------------------------------------

# q LAYOUT JQ: jq -r over the objects of a layout
q() { jq -rn "[inputs | $OBJS] as \$all | $2" "$T/$1.json"; }
dep='($all[] | select(.kind == "Deployment" and .metadata.name == "profd"))'
scr='($all[] | select(.kind == "Deployment" and .metadata.name == "profd-scraper"))'
cron='($all[] | select(.kind == "CronJob"))'
svc='($all[] | select(.kind == "Service"))'
# flag VALUE of an args array: .[index(flag)+1]
arg() { echo "(. as \$a | (\$a | index([\"$1\"])) as \$i | if \$i == null then null else \$a[\$i + 1] end)"; }

for lay in $LAYOUTS; do
	[ -s "$T/$lay.json" ] || continue
	expect "$lay: namespaced objects in namespace profd" "" \
		"$(q "$lay" '$all[] | select(.kind != "Namespace" and .kind != "ClusterRole" and .kind != "ClusterRoleBinding" and .metadata.namespace != "profd") | .kind + "/" + .metadata.name')"
	expect "$lay: app.kubernetes.io/name=profd and part-of=profd on every object and pod template" "" \
		"$(q "$lay" '$all[] | select(.metadata.labels["app.kubernetes.io/name"] != "profd" or .metadata.labels["app.kubernetes.io/part-of"] != "profd"
			or ((.spec.template // .spec.jobTemplate.spec.template // {metadata: {labels: {"app.kubernetes.io/name": "profd"}}}).metadata.labels["app.kubernetes.io/name"] != "profd"))
			| .kind + "/" + .metadata.name')"
	expect "$lay: every container runs profd:0.1.0 with requests and a memory limit, non-root, read-only root, no privilege escalation, no capabilities" "" \
		"$(q "$lay" '$all[] | (.spec.template.spec // .spec.jobTemplate.spec.template.spec // empty) as $p
			| ($p.containers + ($p.initContainers // []))[]
			| select(.image != "profd:0.1.0" or .resources.requests.cpu == null or .resources.requests.memory == null
				or .resources.limits.memory == null or $p.securityContext.runAsNonRoot != true
				or .securityContext.readOnlyRootFilesystem != true or .securityContext.allowPrivilegeEscalation != false
				or .securityContext.capabilities.drop != ["ALL"])
			| .name')"
	# probes on declared ports
	expect "$lay: every probe on a declared container port" "" \
		"$(q "$lay" '$all[] | (.spec.template.spec // .spec.jobTemplate.spec.template.spec // empty).containers[]
			| . as $c | ([.ports[]? | .name, .containerPort]) as $ports
			| (.startupProbe, .livenessProbe, .readinessProbe) | select(. != null)
			| select(.httpGet.port as $p | $ports | index([$p]) | not) | $c.name')"
done

lay=default
if [ -s "$DJ" ]; then
	got=$(q $lay "$dep | [.spec.replicas, .spec.strategy.type] | map(tostring) | join(\" \")")
	got="$got $(q $lay "[$dep.spec.template.spec.volumes[] | .persistentVolumeClaim.claimName // empty] | join(\",\")") $(q $lay '$all[] | select(.kind == "PersistentVolumeClaim" and .metadata.name == "profd-data") | .spec.accessModes | join(",")')"
	expect "collector: single writer (1 replica, Recreate, data on a ReadWriteOnce PVC)" "1 Recreate profd-data ReadWriteOnce" "$got"
	args=$(q $lay "$dep.spec.template.spec.containers[0].args")
	ddir=$(echo "$args" | jq -r "$(arg --data-dir)")
	expect "collector: --data-dir is the PVC's mount" "$ddir" \
		"$(q $lay "$dep.spec.template.spec | (.volumes[] | select(.persistentVolumeClaim.claimName == \"profd-data\") | .name) as \$v | .containers[0].volumeMounts[] | select(.name == \$v) | .mountPath")"
	st=$(echo "$args" | jq -r "$(arg --shutdown-timeout) // \"30s\"" | sed 's/s$//')
	grace=$(q $lay "$dep.spec.template.spec.terminationGracePeriodSeconds // 30")
	if [[ $st =~ ^[0-9]+$ ]] && [ "$grace" -gt "$st" ]; then
		ok "collector: terminationGracePeriodSeconds ($grace) > --shutdown-timeout (${st}s)"
	else
		fail "collector: terminationGracePeriodSeconds > --shutdown-timeout" "grace $grace, shutdown-timeout '$st'"
	fi
	expect "collector: readiness /readyz, liveness /healthz" "/readyz /healthz" \
		"$(q $lay "$dep.spec.template.spec.containers[0] | [.readinessProbe.httpGet.path, .livenessProbe.httpGet.path] | join(\" \")")"
	addr_port=$(echo "$args" | jq -r "$(arg --addr)" | sed 's/.*://')
	expect "Service profd: port 10100 -> the collector's --addr port, selector matches the collector's pods" "10100 $addr_port true" \
		"$(q $lay "$svc | .spec.ports[0] as \$p | ($dep.spec.template.spec.containers[0].ports[] | select(.name == \$p.targetPort or .containerPort == \$p.targetPort) | .containerPort) as \$cp
			| ($dep.spec.template.metadata.labels) as \$l | \"\(\$p.port) \(\$cp) \(.spec.selector | to_entries | all(\$l[.key] == .value))\"")"
	svc_url=$(q $lay "$svc | \"http://\(.metadata.name).\(.metadata.namespace).svc:\(.spec.ports[0].port)\"")
	expect "scraper: --collector is the collector's Service" "$svc_url" \
		"$(q $lay "$scr.spec.template.spec.containers[0].args | $(arg --collector)")"
	expect "scraper: --listen port is the metrics port" "$(q $lay "$scr.spec.template.spec.containers[0].ports[] | select(.name == \"metrics\") | .containerPort")" \
		"$(q $lay "$scr.spec.template.spec.containers[0].args | $(arg --listen)" | sed 's/.*://')"
	expect "scraper: one replica, Recreate, service account profd-scraper bound to a ClusterRole of pods get/list/watch" \
		"1 Recreate profd-scraper | pods:get,list,watch | ClusterRole/profd-scraper <- ServiceAccount/profd/profd-scraper" \
		"$(q $lay "$scr.spec | \"\(.replicas) \(.strategy.type) \(.template.spec.serviceAccountName)\"") | $(q $lay '$all[] | select(.kind == "ClusterRole") | .rules | map((.apiGroups | join(",")) + (.resources | join(",")) + ":" + (.verbs | join(","))) | join(" ")') | $(q $lay '$all[] | select(.kind == "ClusterRoleBinding") | "\(.roleRef.kind)/\(.roleRef.name) <- \(.subjects | map("\(.kind)/\(.namespace)/\(.name)") | join(" "))"')"
fi
if [ -s "$CJ" ]; then
	lay=cronjob
	expect "cronjob: every 10 minutes, Forbid, no retries, restartPolicy Never, deadline < period" "*/10 * * * * Forbid 0 Never true" \
		"$(q $lay "$cron.spec | \"\(.schedule) \(.concurrencyPolicy) \(.jobTemplate.spec.backoffLimit) \(.jobTemplate.spec.template.spec.restartPolicy) \(.jobTemplate.spec.activeDeadlineSeconds < 600)\"")"
	expect "cronjob: scrape --once -A --state-dir on a PVC (deltas between runs), --collector = the Service" \
		"true true /var/lib/profd-scrape profd-scrape-state ReadWriteOnce $svc_url" \
		"$(q $lay "$cron.spec.jobTemplate.spec.template.spec as \$p | \$p.containers[0].args as \$a | (\$a | $(arg --state-dir)) as \$sd
			| (\$p.containers[0].volumeMounts[] | select(.mountPath == \$sd) | .name) as \$v
			| (\$p.volumes[] | select(.name == \$v) | .persistentVolumeClaim.claimName) as \$pvc
			| \"\(\$a | index([\"--once\"]) != null) \(\$a | index([\"-A\"]) != null) \(\$sd) \(\$pvc) \(\$all[] | select(.kind == \"PersistentVolumeClaim\" and .metadata.name == \$pvc) | .spec.accessModes | join(\",\")) \(\$a | $(arg --collector))\"")"
fi

# ---- 5. the args against the real binary -----------------------------------------------------------

KFLAGS=" -A --all-namespaces -n --namespace -l --selector --kubeconfig --context --kubernetes --pod-labels "
# every profd container of both layouts: "LAYOUT KIND/NAME CONTAINER" and its args as JSON
for lay in $LAYOUTS; do
	[ -s "$T/$lay.json" ] || continue
	q "$lay" '$all[] | . as $o | (.spec.template.spec // .spec.jobTemplate.spec.template.spec // empty).containers[]
		| select(.command == ["profd"]) | "\($o.kind)/\($o.metadata.name)/\(.name)\t\(.args | tojson)"'
done | sort -u >"$T/containers.tsv"
expect "profd containers" "CronJob/profd-scrape/scraper Deployment/profd-scraper/scraper Deployment/profd/profd" \
	"$(cut -f1 "$T/containers.tsv" | tr '\n' ' ' | sed 's/ $//')"

while IFS=$'\t' read -r what json; do
	cmd=$(echo "$json" | jq -r '.[0]')
	"$PROFD" "$cmd" --help >"$T/help.txt" 2>&1
	unknown='' skipped=''
	for f in $(echo "$json" | jq -r '.[1:][] | select(startswith("-")) | sub("=.*"; "")'); do
		if [[ $f == --* ]]; then re="(^|[ ,])$f( |,|$)"; else re="(^| )$f,"; fi
		if grep -Eq -- "$re" "$T/help.txt"; then
			continue
		elif [[ $KFLAGS == *" $f "* ]] && ! grep -q -- '--all-namespaces' "$T/help.txt"; then
			skipped="$skipped $f"
		else
			unknown="$unknown $f"
		fi
	done
	if [ -n "$unknown" ]; then
		fail "$what: flags in profd $cmd --help" "not there:$unknown"
	else
		ok "$what: every flag of its args is in profd $cmd --help"
	fi
	[ -z "$skipped" ] || ok "$what: flags$skipped # SKIP this profd scrape has no Kubernetes discovery yet"
done <"$T/containers.tsv"

# Kubernetes discovery: with a profd that has it and the test API server up,
# the discovery flags are kept and pointed at the test API server (one
# annotated pod: goapp); otherwise they are replaced by a static target (goapp).
KMODE=static
if grep -q -- '--all-namespaces' <("$PROFD" scrape --help 2>&1) && [ -n "$API_PID" ] && kill -0 "$API_PID" 2>/dev/null; then
	KMODE=kube
fi
# local_args JSON COLLECTOR: the args with local stand-ins (one per line, for
# mapfile): --addr and --listen on 127.0.0.1:0, --data-dir and --state-dir
# under $T, --collector COLLECTOR, the discovery flags as said above;
# --cpu-duration 1s is added to keep the test short
local_args() {
	echo "$1" | jq -r --arg t "$T" --arg mode "$KMODE" --arg kc "$K" --arg coll "$2" --arg tgt "127.0.0.1:$TPORT" '
		def kv: IN("-n", "--namespace", "-l", "--selector", "--kubeconfig", "--context", "--pod-labels");
		def kflag: IN("-A", "--all-namespaces", "--kubernetes") or kv;
		. as $a | ([range(0; length)] | map(
			if (. > 0) and ($a[. - 1] | IN("--addr", "--listen")) then "127.0.0.1:0"
			elif (. > 0) and $a[. - 1] == "--data-dir" then $t + "/data"
			elif (. > 0) and $a[. - 1] == "--state-dir" then $t + "/state"
			elif (. > 0) and $a[. - 1] == "--collector" then $coll
			elif $mode == "kube" then (if (. > 0) and $a[. - 1] == "--kubeconfig" then $kc else $a[.] end)
			elif $a[.] | kflag then empty
			elif (. > 0) and ($a[. - 1] | kv) then empty
			else $a[.] end))
		+ (if any($a[]; kflag) then
			(if $mode == "kube" then (if any($a[]; . == "--kubeconfig") then [] else ["--kubeconfig", $kc] end)
			 else ["--target", $tgt, "--service", "deploy-test"] end)
		   else [] end)
		+ (if $a[0] == "scrape" then ["--cpu-duration", "1s"] else [] end) | .[]'
}
# the args of a container, and its probe paths
cargs() { grep -F "$1"$'\t' "$T/containers.tsv" | cut -f2; }
probes() { q "$1" "\$all[] | select(.kind + \"/\" + .metadata.name == \"$2\") | .spec.template.spec.containers[0] | [.startupProbe, .livenessProbe, .readinessProbe][] | select(. != null) | .httpGet.path" | sort -u; }
# probe_codes PORT LAYOUT KIND/NAME: " PATH=CODE" for each probe path
probe_codes() {
	local p
	for p in $(probes "$2" "$3"); do
		printf ' %s=%s' "$p" "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$1$p")"
	done
}

# serve: starts with the manifest's args, answers its probe paths; it is the
# collector of the scrapes below, then stops cleanly
COLL=http://127.0.0.1:1
json=$(cargs Deployment/profd/profd)
if [ -n "$json" ]; then
	mapfile -t a < <(local_args "$json" "")
	: >"$T/serve.log"
	"$PROFD" "${a[@]}" 2>"$T/serve.log" &
	SERVE_PID=$!
	if wait_grep "$T/serve.log" 'listening on port [0-9]+' 100; then
		port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$T/serve.log" | head -n1)
		COLL=http://127.0.0.1:$port
		expect "profd ${a[*]}: starts, its probe paths answer 200" " /healthz=200 /readyz=200" \
			"$(probe_codes "$port" default Deployment/profd)"
	else
		fail "profd ${a[*]}: starts" "$(head -c 600 "$T/serve.log")"
	fi
fi

# continuous scraper: starts, answers its probe paths on --listen, stops cleanly
json=$(cargs Deployment/profd-scraper/scraper)
if [ -n "$json" ]; then
	mapfile -t a < <(local_args "$json" "$COLL")
	: >"$T/scrape.log"
	"$PROFD" "${a[@]}" 2>"$T/scrape.log" &
	RUN_PID=$!
	if wait_grep "$T/scrape.log" 'metrics listening on port [0-9]+' 100; then
		port=$(sed -n 's/.*metrics listening on port \([0-9]*\).*/\1/p' "$T/scrape.log" | head -n1)
		expect "profd ${a[*]}: starts, its probe paths answer 200 ($KMODE targets)" " /healthz=200" \
			"$(probe_codes "$port" default Deployment/profd-scraper)"
		kill -TERM "$RUN_PID"
		rc=0
		wait "$RUN_PID" || rc=$?
		expect "profd scrape (the Deployment's args): exit 0 on SIGTERM" 0 "$rc"
	else
		fail "profd ${a[*]}: starts" "$(head -c 600 "$T/scrape.log")"
		kill -KILL "$RUN_PID" 2>/dev/null
		wait "$RUN_PID" 2>/dev/null
	fi
	RUN_PID=''
fi

# the CronJob's scrape --once, twice: the first run keeps the bases of allocs,
# block and mutex in --state-dir, the second stores deltas (ok, not ok*:
# cumulative as it is)
json=$(cargs CronJob/profd-scrape/scraper)
if [ -n "$json" ] && [ "$TPORT" != 1 ]; then
	mapfile -t a < <(local_args "$json" "$COLL")
	cells=''
	for _ in 1 2; do
		rc=0
		timeout 60 "$PROFD" "${a[@]}" >"$T/once.out" 2>"$T/once.err" || rc=$?
		cells="$cells | exit $rc: $(awk 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } NR == 2 { print $c["CPU"], $c["HEAP"], $c["ALLOCS"] }' "$T/once.out")"
	done
	nstate=$(find "$T/state" -name '*.allocs.pb.gz' 2>/dev/null | wc -l)
	if [ "$cells" = " | exit 0: ok ok base | exit 0: ok ok ok" ] && [ "$nstate" = 1 ]; then
		ok "profd ${a[*]} ($KMODE target), twice: allocs kept as the base in --state-dir, then stored as a delta"
	else
		fail "profd scrape --once (the CronJob's args), twice" "got '$cells', $nstate allocs state file(s); stderr: $(head -c 400 "$T/once.err")"
	fi
fi
if [ -n "$SERVE_PID" ]; then
	kill -TERM "$SERVE_PID"
	rc=0
	wait "$SERVE_PID" || rc=$?
	SERVE_PID=''
	expect "profd serve (the manifest's args): exit 0 on SIGTERM" 0 "$rc"
fi

# the CronJob's prune init container: only the state files no run rewrote for a day go
prune=$(q cronjob "$cron.spec.jobTemplate.spec.template.spec.initContainers[0].command | map(if . == \"/var/lib/profd-scrape\" then \"$T/state\" else . end) | @sh")
if [ -n "$prune" ]; then
	mkdir -p "$T/state"
	touch "$T/state/new.allocs.pb.gz"
	touch -d '2 days ago' "$T/state/old.allocs.pb.gz"
	if eval "$prune" && [ -f "$T/state/new.allocs.pb.gz" ] && [ ! -e "$T/state/old.allocs.pb.gz" ]; then
		ok "cronjob: the prune init container ($prune) deletes only state files older than a day"
	else
		fail "cronjob: prune init container" "$prune: $(ls "$T/state")"
	fi
fi

# no sanitizer report from any profd run above (make SANITIZE=1 test)
if grep -l 'Sanitizer\|runtime error' "$T"/serve.log "$T"/scrape.log "$T"/once.err 2>/dev/null | grep -q .; then
	fail "profd runs: no sanitizer report" "$(grep -h -A5 'Sanitizer\|runtime error' "$T"/serve.log "$T"/scrape.log "$T"/once.err | head -c 600)"
else
	ok "profd runs: no sanitizer report"
fi
