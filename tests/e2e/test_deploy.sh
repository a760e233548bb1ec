#!/usr/bin/env bash
# test_deploy.sh — deploy/kubernetes checked with REAL kubectl and the real
# profd binary (issue 4, item 6; issue 12, items 3 and 7: tokens, NetworkPolicy,
# TLS; issue 13, part 3: the ClickHouse layout):
#   0. the files an operator creates first, in a copy of deploy/kubernetes:
#      the token files of secrets/ (openssl rand -hex 32) and, with the
#      shipped tls/gen-certs.sh, the CA and certificate of tls/ (checked: key
#      modes, chain, renewal keeps the CA); without them every layout's
#      kustomize build fails naming the missing file (no placeholder token or
#      certificate can be applied by mistake), and they are git-ignored;
#      the same for clickhouse/password (openssl rand -hex 32, no newline)
#   1. kubectl kustomize of the four layouts (deploy/kubernetes: collector +
#      continuous scraper; cronjob/: collector + CronJob; tls/: the default
#      over HTTPS; clickhouse/: 2 collectors on ClickHouse + the scraper +
#      an example ClickHouse), offline: the expected objects, all in namespace profd
#      (generated Secret and ConfigMap names end in -HASH)
#   2. kubectl apply --dry-run=client -k and -f FILE of every manifest, against
#      the test API server (tests/kubeapi: pods only, so kubectl's discovery
#      cache is seeded with the resource lists of the kinds used, incl.
#      networking.k8s.io/v1, apps/v1 StatefulSet, policy/v1), and kubectl create --dry-run=client -o json
#      offline (the same seeded cache, an unreachable server). --validate=false:
#      schema validation needs the server's OpenAPI documents, which the test
#      server does not serve; 3 does that job instead:
#   3. every object decoded into kubectl's own Go types (kubectl set ...
#      --local decodes typed, offline): no type error, and no unknown field
#      in workloads, Services and bindings (the typed round trip must keep
#      every field given) nor in Secrets, ConfigMaps and NetworkPolicies
#      nor in PodDisruptionBudgets (kubectl prints those only as refused, so
#      their fields are checked against the fields of their Go types,
#      k8s.io/api v1.32); controls with
#      misspelt and wrongly typed fields must be caught
#   4. consistency: labels, image, Service <-> collector port <-> scraper's
#      --collector URL, probes on declared ports, grace period >
#      --shutdown-timeout, single writer (1 replica, Recreate, RWO volume),
#      RBAC = pods get/list/watch, non-root and read-only root filesystem,
#      resources, the CronJob's state on a PVC; the NetworkPolicy (selects the
#      collector's pods only, on its port, from the scraper's pods and the
#      namespaces with the label the README documents); every Secret and
#      ConfigMap a volume names exists with the keys used; each file flag
#      (--tokens, --token-file, --tls-*, --collector-cacert) resolves through
#      its mount to the right Secret key (--tokens: through the init container
#      that copies it, mode 0600, since profd refuses the Secret volume's own
#      0440); Secret volumes readable by the pod's user through fsGroup, not by
#      others; the TLS overlay changes only what it says (HTTPS probes, port
#      names, https:// --collector with its CA); example-secrets.yaml and the
#      README's `kubectl create secret` lines use the names and keys mounted;
#      the ClickHouse layout: stateless collectors (>= 2 replicas,
#      RollingUpdate, no PVC, no --data-dir; args = the default's with --store
#      and --store-password-file instead of --data-dir), a PodDisruptionBudget
#      on them, the --store URL's host:port = the Service clickhouse's name
#      and port (-> the StatefulSet's pods), its user and database = the
#      example server's CLICKHOUSE_USER and CLICKHOUSE_DB, its password from
#      the same Secret key (not in the URL), the server on a pinned image with
#      its data on a PVC, its NetworkPolicy (collectors only, port 8123)
#   5. the args of every profd container are accepted by build/profd: each
#      flag is in `profd CMD --help` (the Kubernetes discovery flags are
#      skipped while the binary has none), and the commands run with them
#      (addresses and directories swapped for local ones, file flags pointed
#      at the pod's volumes as the kubelet would write them from the built
#      Secrets and ConfigMaps, with modes, owner root and group fsGroup, and
#      the init containers run as the pod's user; --cpu-duration 1s added; -A
#      pointed at the test API server, whose one annotated pod is a real
#      examples/goapp, or, without discovery in the binary or without the
#      server, replaced by a static --target of that goapp): serve (as the
#      pod's uid, when root) answers its probe paths, wants a token, is the
#      collector of the scrapes, stops cleanly on SIGTERM; the continuous
#      scraper answers its probe paths and stops cleanly; the CronJob's
#      `scrape --once` run twice keeps the allocs base in --state-dir, then
#      stores a delta; its prune command deletes only old state files; the
#      example Secret's placeholder tokens are refused; the TLS overlay's
#      serve answers its HTTPS probes for the Service's name (curl --cacert
#      the ConfigMap's CA), its scraper's args (+ --once) store profiles
#      over HTTPS with the token, and not without it; the ClickHouse layout's
#      collector args run twice (two pods) on one real ClickHouse 18.16
#      (tests/e2e/clickhouse.sh) given the user, password and database the
#      example server's entrypoint creates: a real goapp heap profile posted
#      to the first is listed and fetched from the second; a wrong password
#      stops the start; /readyz follows ClickHouse, /healthz does not.
#      Without clickhouse-server that part is a SKIP.
# Needs kubectl, jq and openssl (skipped without them).
# Run: BUILD=build bash tests/e2e/test_deploy.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
# shellcheck disable=SC2016 # jq programs in single quotes, on purpose
source "$(dirname "$0")/lib.sh"

# the manifests as shipped; the layouts are built from a copy, $DEPLOY, with
# the files an operator creates first (step 0)
SRC=$ROOT/deploy/kubernetes
DEPLOY=$T/k8s
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
if ! command -v openssl >/dev/null 2>&1; then
	ok "deploy/kubernetes manifests # SKIP openssl not installed (needed for the tokens and certificates)"
	exit 0
fi
if [ ! -x "$PROFD" ]; then
	fail "setup: $PROFD exists" "not built; run: make"
	exit 0
fi

API_PID='' RUN_PID='' SERVE_PID='' TLS_PID='' APP_PID='' CHA_PID='' CHB_PID=''
stop_all() {
	local p
	for p in $RUN_PID $SERVE_PID $TLS_PID $CHA_PID $CHB_PID $API_PID $APP_PID; do
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
	mkdir -p "$d/v1" "$d/apps/v1" "$d/batch/v1" "$d/rbac.authorization.k8s.io/v1" "$d/networking.k8s.io/v1" "$d/policy/v1"
	g() { printf '{"name":"%s","versions":[{"groupVersion":"%s","version":"v1"}],"preferredVersion":{"groupVersion":"%s","version":"v1"}}' "$1" "$2" "$2"; }
	r() { printf '{"name":"%s","singularName":"%s","namespaced":%s,"kind":"%s","verbs":["create","delete","get","list","patch","update","watch"]}' "$@"; }
	l() { printf '{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"%s","resources":[%s]}' "$1" "$2"; }
	printf '{"kind":"APIGroupList","apiVersion":"v1","groups":[%s,%s,%s,%s,%s,%s]}' "$(g '' v1)" "$(g apps apps/v1)" \
		"$(g batch batch/v1)" "$(g rbac.authorization.k8s.io rbac.authorization.k8s.io/v1)" \
		"$(g networking.k8s.io networking.k8s.io/v1)" "$(g policy policy/v1)" >"$d/servergroups.json"
	l v1 "$(r namespaces namespace false Namespace),$(r services service true Service),$(r serviceaccounts serviceaccount true ServiceAccount),$(r persistentvolumeclaims persistentvolumeclaim true PersistentVolumeClaim),$(r pods pod true Pod),$(r secrets secret true Secret),$(r configmaps configmap true ConfigMap)" >"$d/v1/serverresources.json"
	l apps/v1 "$(r deployments deployment true Deployment),$(r statefulsets statefulset true StatefulSet)" >"$d/apps/v1/serverresources.json"
	l batch/v1 "$(r cronjobs cronjob true CronJob),$(r jobs job true Job)" >"$d/batch/v1/serverresources.json"
	l rbac.authorization.k8s.io/v1 "$(r clusterroles clusterrole false ClusterRole),$(r clusterrolebindings clusterrolebinding false ClusterRoleBinding)" \
		>"$d/rbac.authorization.k8s.io/v1/serverresources.json"
	l networking.k8s.io/v1 "$(r networkpolicies networkpolicy true NetworkPolicy)" >"$d/networking.k8s.io/v1/serverresources.json"
	l policy/v1 "$(r poddisruptionbudgets poddisruptionbudget true PodDisruptionBudget)" >"$d/policy/v1/serverresources.json"
}

# objs: the objects of kubectl's JSON output (a List, or objects one after another)
OBJS='if .kind == "List" then .items[] else . end'
# KN: "Kind/name" of an object, the hash kustomize appends to generated names as -HASH
KN='.kind + "/" + (if .kind == "Secret" or .kind == "ConfigMap" then (.metadata.name | sub("-[a-z0-9]{10}$"; "-HASH")) else .metadata.name end)'

# ---- 0. what the operator creates first ---------------------------------------------------

# the token files of secrets/ and the certificate of tls/, as README.md says:
# tokens with openssl rand -hex 32, the certificate with tls/gen-certs.sh
TOKEN_FILES="secrets/tokens secrets/scraper-token"
TLS_FILES="tls/ca.crt tls/ca.key tls/tls.crt tls/tls.key"
CH_FILES="clickhouse/password"
cp -r "$SRC" "$DEPLOY"
for f in $TOKEN_FILES $TLS_FILES $CH_FILES; do rm -f "${DEPLOY:?}/$f"; done
NOFILES=$T/k8s-nofiles # the same, without them
cp -r "$DEPLOY" "$NOFILES"
TOK_SCRAPER=$(openssl rand -hex 32) TOK_READ=$(openssl rand -hex 32) TOK_ADMIN=$(openssl rand -hex 32)
(
	umask 077
	printf '%s\n' "$TOK_SCRAPER" >"$DEPLOY/secrets/scraper-token"
	printf '%s write scraper\n%s read deploy-test\n%s read,write,admin operators\n' \
		"$TOK_SCRAPER" "$TOK_READ" "$TOK_ADMIN" >"$DEPLOY/secrets/tokens"
	# the ClickHouse password as README.md makes it: hex, no newline
	openssl rand -hex 32 | tr -d '\n' >"$DEPLOY/clickhouse/password"
)
if sh "$DEPLOY/tls/gen-certs.sh" >"$T/gencerts.out" 2>&1 && [ -s "$DEPLOY/tls/ca.crt" ] && [ -s "$DEPLOY/tls/tls.crt" ] &&
	[ "$(stat -c %a "$DEPLOY/tls/tls.key" "$DEPLOY/tls/ca.key" | tr '\n' ' ')" = "600 600 " ] &&
	openssl verify -CAfile "$DEPLOY/tls/ca.crt" "$DEPLOY/tls/tls.crt" >/dev/null 2>&1; then
	ok "tls/gen-certs.sh: CA, certificate signed by it, keys mode 600"
else
	fail "tls/gen-certs.sh" "$(head -c 600 "$T/gencerts.out"; stat -c '%n %a' "$DEPLOY"/tls/*.key 2>&1)"
fi
# renewal: run again, the CA is kept (the scraper's CA does not change), the certificate is new
cp "$DEPLOY/tls/ca.crt" "$T/ca.before"
cp "$DEPLOY/tls/tls.crt" "$T/tls.before" 2>/dev/null
if sh "$DEPLOY/tls/gen-certs.sh" "$DEPLOY/tls" >"$T/gencerts.out" 2>&1 && cmp -s "$T/ca.before" "$DEPLOY/tls/ca.crt" &&
	! cmp -s "$T/tls.before" "$DEPLOY/tls/tls.crt" && openssl verify -CAfile "$DEPLOY/tls/ca.crt" "$DEPLOY/tls/tls.crt" >/dev/null 2>&1; then
	ok "tls/gen-certs.sh again (renewal): same CA, a new certificate"
else
	fail "tls/gen-certs.sh again (renewal)" "$(head -c 600 "$T/gencerts.out")"
fi

# without them, nothing builds: the error names the missing file
for lay in default cronjob; do
	d=$NOFILES
	[ "$lay" = default ] || d=$NOFILES/$lay
	if timeout 30 kubectl kustomize "$d" >/dev/null 2>"$T/err"; then
		fail "$lay layout without the token files: kustomize fails" "it built"
	elif grep -Eq 'secrets/(tokens|scraper-token)' "$T/err"; then
		ok "$lay layout without the token files: kustomize fails naming $(grep -Eo 'secrets/(tokens|scraper-token)' "$T/err" | head -n1)"
	else
		fail "$lay layout without the token files: kustomize fails naming the file" "$(head -c 400 "$T/err")"
	fi
done
cp -p "$DEPLOY/secrets/tokens" "$DEPLOY/secrets/scraper-token" "$NOFILES/secrets/"
if timeout 30 kubectl kustomize "$NOFILES/tls" >/dev/null 2>"$T/err"; then
	fail "tls layout without the certificate files: kustomize fails" "it built"
elif grep -Eq 'tls/(tls\.crt|tls\.key|ca\.crt)' "$T/err"; then
	ok "tls layout without the certificate files: kustomize fails naming $(grep -Eo 'tls/(tls\.crt|tls\.key|ca\.crt)' "$T/err" | head -n1)"
else
	fail "tls layout without the certificate files: kustomize fails naming the file" "$(head -c 400 "$T/err")"
fi
if timeout 30 kubectl kustomize "$NOFILES/clickhouse" >/dev/null 2>"$T/err"; then
	fail "clickhouse layout without the password file: kustomize fails" "it built"
elif grep -q 'clickhouse/password' "$T/err"; then
	ok "clickhouse layout without the password file: kustomize fails naming clickhouse/password"
else
	fail "clickhouse layout without the password file: kustomize fails naming the file" "$(head -c 400 "$T/err")"
fi
# every file a generator reads (files: in secrets/ and tls/), and the CA's key, is git-ignored
gen_files=$(for k in secrets tls clickhouse; do
	awk -v d="$k/" 'match($0, /^ *files:/) { f = index($0, "f"); next }
		f && match($0, /^ *- /) && RLENGTH - 1 > f - 1 { v = $2; sub(/^[^=]*=/, "", v); print d v; next } { f = 0 }' "$SRC/$k/kustomization.yaml"
done | sort -u | tr '\n' ' ')
expect "generators read the files the operator creates" "$(echo "$TOKEN_FILES $TLS_FILES $CH_FILES" | tr ' ' '\n' | grep -v ca.key | sort | tr '\n' ' ')" "$gen_files"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	notign=''
	for f in $gen_files tls/ca.key; do
		git -C "$ROOT" check-ignore -q "deploy/kubernetes/$f" || notign="$notign $f"
	done
	expect "the token, key, certificate and password files are git-ignored (never committed)" "" "$notign"
else
	ok "the token and key files are git-ignored # SKIP not a git work tree"
fi

# ---- 1. kustomize (offline) ---------------------------------------------------------------

KVER=$(timeout 20 kubectl version --client 2>/dev/null | head -n1)
LAYOUTS="default cronjob tls clickhouse"
dir_of() { if [ "$1" = default ]; then echo "$DEPLOY"; else echo "$DEPLOY/$1"; fi; }
# shellcheck disable=SC2034 # read through ${!want}
want_default="Namespace/profd ServiceAccount/profd-scraper ClusterRole/profd-scraper ClusterRoleBinding/profd-scraper Secret/profd-scraper-token-HASH Secret/profd-tokens-HASH Service/profd PersistentVolumeClaim/profd-data Deployment/profd Deployment/profd-scraper NetworkPolicy/profd-collector"
# shellcheck disable=SC2034
want_cronjob="Namespace/profd ServiceAccount/profd-scraper ClusterRole/profd-scraper ClusterRoleBinding/profd-scraper Secret/profd-scraper-token-HASH Secret/profd-tokens-HASH Service/profd PersistentVolumeClaim/profd-data PersistentVolumeClaim/profd-scrape-state Deployment/profd CronJob/profd-scrape NetworkPolicy/profd-collector"
# shellcheck disable=SC2034
want_tls="Namespace/profd ServiceAccount/profd-scraper ClusterRole/profd-scraper ClusterRoleBinding/profd-scraper ConfigMap/profd-ca-HASH Secret/profd-scraper-token-HASH Secret/profd-tls-HASH Secret/profd-tokens-HASH Service/profd PersistentVolumeClaim/profd-data Deployment/profd Deployment/profd-scraper NetworkPolicy/profd-collector"
# shellcheck disable=SC2034
want_clickhouse="Namespace/profd ServiceAccount/profd-scraper ClusterRole/profd-scraper ClusterRoleBinding/profd-scraper ConfigMap/clickhouse-config Secret/profd-clickhouse-HASH Secret/profd-scraper-token-HASH Secret/profd-tokens-HASH Service/clickhouse Service/profd Deployment/profd Deployment/profd-scraper StatefulSet/clickhouse PodDisruptionBudget/profd NetworkPolicy/clickhouse NetworkPolicy/profd-collector"
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
		"$(jq -r "$OBJS | $KN" "$T/$lay.json" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
done
DJ=$T/default.json CJ=$T/cronjob.json TJ=$T/tls.json HJ=$T/clickhouse.json
# the files, each on its own too (as `kubectl apply -f FILE` would take them;
# *.patch.yaml are kustomize patches, not objects)
mapfile -t FILES < <(cd "$SRC" && find . -name '*.yaml' ! -name kustomization.yaml ! -name '*.patch.yaml' | sed 's|^\./||' | sort)
expect "manifests: the files" "base/collector.yaml base/namespace.yaml base/networkpolicy.yaml base/rbac.yaml clickhouse/pdb.yaml clickhouse/server/clickhouse.yaml clickhouse/server/networkpolicy.yaml cronjob/scraper-cronjob.yaml monitoring/podmonitor.yaml monitoring/scraper-service.yaml monitoring/servicemonitor.yaml scraper/scraper.yaml secrets/example-secrets.yaml" "${FILES[*]}"

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
			if grep -q '^apiVersion: monitoring.coreos.com/' "$SRC/$f"; then # prometheus-operator's CRDs: not served here
				ok "kubectl apply --dry-run=client -f $f # skip a prometheus-operator kind (checked on kustomize's output below)"
				continue
			fi
			n=$(grep -c '^kind:' "$SRC/$f")
			if timeout 30 kubectl --kubeconfig "$K" apply --dry-run=client --validate=false -f "$SRC/$f" \
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


# Secrets, ConfigMaps, NetworkPolicies and PodDisruptionBudgets: kubectl
# decodes them typed (above: "*v1.Secret ... not a pod") but prints no typed
# round trip of them, so each of their leaves is checked against the fields
# of their Go types (k8s.io/api core/v1 Secret, ConfigMap; networking/v1
# NetworkPolicy; policy/v1 PodDisruptionBudget; metav1.ObjectMeta's name,
# namespace, labels, annotations); the keys of maps (labels, data, ...) are
# free.
# shellcheck disable=SC2089,SC2090 # a jq program in a variable, on purpose
KNOWN='def sel($p): [$p + ".matchLabels.*", $p + ".matchExpressions.[].key", $p + ".matchExpressions.[].operator", $p + ".matchExpressions.[].values.[]"];
	def peer($p): sel($p + ".podSelector") + sel($p + ".namespaceSelector") + [$p + ".ipBlock.cidr", $p + ".ipBlock.except.[]"];
	def ports($p): [$p + ".protocol", $p + ".port", $p + ".endPort"];
	{Secret: ["type", "data.*", "stringData.*", "immutable"],
	 ConfigMap: ["data.*", "binaryData.*", "immutable"],
	 NetworkPolicy: (sel("spec.podSelector") + ["spec.policyTypes.[]"] + peer("spec.ingress.[].from.[]") + ports("spec.ingress.[].ports.[]")
		+ peer("spec.egress.[].to.[]") + ports("spec.egress.[].ports.[]")),
	 PodDisruptionBudget: (sel("spec.selector") + ["spec.minAvailable", "spec.maxUnavailable", "spec.unhealthyPodEvictionPolicy"])}
	| map_values(. + ["apiVersion", "kind", "metadata.name", "metadata.namespace", "metadata.labels.*", "metadata.annotations.*"])'
# unknown_fields JSON: "Kind/name: path" of every leaf of a Secret, ConfigMap,
# NetworkPolicy or PodDisruptionBudget that its Go type has no field for
unknown_fields() {
	jq -rn "($KNOWN) as \$known | inputs | $OBJS | select(\$known[.kind]) | . as \$o
		| paths(scalars) | reduce .[] as \$e ({out: [], free: false};
			if .free then {out: (.out + [\"*\"]), free: false}
			else {out: (.out + [if (\$e | type) == \"number\" then \"[]\" else \$e end]),
				free: (\$e | IN(\"labels\", \"annotations\", \"matchLabels\", \"data\", \"stringData\", \"binaryData\"))} end)
		| .out | join(\".\") | select(. as \$p | \$known[\$o.kind] | index([\$p]) | not)
		| \"\(\$o.kind)/\(\$o.metadata.name): \(.)\"" "$1"
}
timeout 30 kubectl --kubeconfig "$OFFLINE" create --dry-run=client --validate=false -o json -f "$SRC/secrets/example-secrets.yaml" \
	>"$T/example.json" 2>"$T/err" || fail "kubectl create --dry-run=client -f secrets/example-secrets.yaml" "$(head -c 400 "$T/err")"
for lay in $LAYOUTS example; do
	[ -s "$T/$lay.json" ] || continue
	expect "$lay: no unknown field in $(jq -r "$OBJS | select(.kind | IN(\"Secret\", \"ConfigMap\", \"NetworkPolicy\", \"PodDisruptionBudget\")) | .kind" "$T/$lay.json" | sort -u | tr '\n' ' ' | sed 's/ $//') (the fields of their Go types)" \
		"" "$(unknown_fields "$T/$lay.json")"
done
# controls: a misspelt NetworkPolicy field is reported, a wrongly typed one refused
sed 's/^\(  *\)policyTypes:/\1policyType:/' "$T/default.yaml" >"$T/bad3.yaml"
timeout 30 kubectl --kubeconfig "$OFFLINE" create --dry-run=client --validate=false -o json -f "$T/bad3.yaml" >"$T/bad3.json" 2>/dev/null
expect "control: a misspelt NetworkPolicy field is reported" "NetworkPolicy/profd-collector: spec.policyType.[]" "$(unknown_fields "$T/bad3.json")"
jq "$OBJS | select(.kind == \"NetworkPolicy\") | .spec.policyTypes = \"Ingress\"" "$T/default.json" >"$T/bad4.json"
if timeout 30 kubectl set env --local -f "$T/bad4.json" X=1 -o json 2>&1 >/dev/null | grep -q 'cannot unmarshal string into Go struct field NetworkPolicySpec.spec.policyTypes'; then
	ok "control: a wrongly typed NetworkPolicy field is refused by the typed decoding"
else
	fail "control: wrongly typed NetworkPolicy field" "not refused"
fi
# controls: a misspelt PodDisruptionBudget field is reported, a wrongly typed one refused
if [ -s "$T/clickhouse.yaml" ]; then
	sed 's/^\(  *\)minAvailable: 1$/\1minAvailabel: 1/' "$T/clickhouse.yaml" >"$T/bad5.yaml"
	timeout 30 kubectl --kubeconfig "$OFFLINE" create --dry-run=client --validate=false -o json -f "$T/bad5.yaml" >"$T/bad5.json" 2>/dev/null
	expect "control: a misspelt PodDisruptionBudget field is reported" "PodDisruptionBudget/profd: spec.minAvailabel" "$(unknown_fields "$T/bad5.json")"
	jq "$OBJS | select(.kind == \"PodDisruptionBudget\") | .spec.selector = \"x\"" "$T/clickhouse.json" >"$T/bad6.json"
	if timeout 30 kubectl set env --local -f "$T/bad6.json" X=1 -o json 2>&1 >/dev/null | grep -q 'cannot unmarshal string into Go struct field PodDisruptionBudgetSpec.spec.selector'; then
		ok "control: a wrongly typed PodDisruptionBudget field is refused by the typed decoding"
	else
		fail "control: wrongly typed PodDisruptionBudget field" "not refused: $(timeout 30 kubectl set env --local -f "$T/bad6.json" X=1 -o json 2>&1 >/dev/null | head -c 300)"
	fi
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
	# (the ClickHouse layout's example server is app.kubernetes.io/name=clickhouse, part-of=profd)
	names='["profd"]'
	[ "$lay" != clickhouse ] || names='["profd", "clickhouse"]'
	expect "$lay: app.kubernetes.io/name=$(echo "$names" | jq -r 'join(" or ")') and part-of=profd on every object, the same name on its pod template" "" \
		"$(q "$lay" "$names"' as $names | $all[] | .metadata.labels["app.kubernetes.io/name"] as $n
			| select(($n | IN($names[]) | not) or .metadata.labels["app.kubernetes.io/part-of"] != "profd"
			or ((.spec.template // .spec.jobTemplate.spec.template // {metadata: {labels: {"app.kubernetes.io/name": $n}}}).metadata.labels["app.kubernetes.io/name"] != $n))
			| .kind + "/" + .metadata.name')"
	expect "$lay: every container of profd's workloads runs profd:0.1.0 with requests and a memory limit, non-root, read-only root, no privilege escalation, no capabilities" "" \
		"$(q "$lay" '$all[] | select(.metadata.labels["app.kubernetes.io/name"] == "profd") | (.spec.template.spec // .spec.jobTemplate.spec.template.spec // empty) as $p
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

# -- tokens, NetworkPolicy, TLS (issue 12) --

# jq: the pod spec and pod labels of a workload (empty for other objects);
# SEL: does a label selector (matchLabels only) match labels $l
POD='(.spec.template.spec // .spec.jobTemplate.spec.template.spec // empty)'
PODL='(.spec.template.metadata.labels // .spec.jobTemplate.spec.template.metadata.labels // {})'
SEL='def matches($s; $l): ($s.matchExpressions == null) and (($s.matchLabels // {}) | to_entries | all($l[.key] == .value));'
# RESOLVE: where the file at $path of container $c of pod spec $p comes from:
# "Secret/NAME-HASH:KEY", "ConfigMap/NAME-HASH:KEY", or for an emptyDir the
# init container whose command ends in $path (install ... SRC DST) and where
# its SRC comes from
RESOLVE='def hs: sub("-[a-z0-9]{10}$"; "-HASH");
	def resolve($p; $c; $path):
		([($c.volumeMounts // [])[] | . as $vm | select($path | startswith($vm.mountPath + "/"))] | max_by(.mountPath | length)) as $m
		| if $m == null then "not on a volume" else
			($path | ltrimstr($m.mountPath + "/")) as $rel
			| (first(($p.volumes // [])[] | select(.name == $m.name)) // {}) as $v
			| if $v.secret or $v.configMap then
				(if $v.secret then {kind: "Secret", name: $v.secret.secretName, src: $v.secret}
				 else {kind: "ConfigMap", name: $v.configMap.name, src: $v.configMap} end) as $r
				| (first(($r.src.items // [])[] | select(.path == $rel) | .key) // $rel) as $k
				| (first($all[] | select(.kind == $r.kind and .metadata.name == $r.name)) // null) as $o
				| "\($r.kind)/\($r.name | hs):\($k)" + (if $o == null then " (no such \($r.kind))"
					elif (($o.data // {}) + ($o.stringData // {})) | has($k) then "" else " (no such key)" end)
			elif $v.emptyDir then
				(first(($p.initContainers // [])[] | select(.command[-1] == $path)) // null) as $i
				| if $i == null then "emptyDir \($v.name), nothing writes it"
				  else "emptyDir \($v.name) <- \($i.name): \($i.command[:-2] | join(" ")) <- " + resolve($p; $i; $i.command[-2]) end
			else "volume \($m.name)" end
		end;'
FILEFLAGS='"--tokens", "--token-file", "--tls-cert", "--tls-key", "--tls-client-ca", "--collector-cacert", "--cacert", "--store-password-file", "--store-cacert"'
# file_flags LAYOUT: "Kind/name FLAG PATH: where it comes from", sorted
file_flags() {
	q "$1" "$RESOLVE"' $all[] | . as $w | '"$POD"' as $p | $p.containers[] | select(.command == ["profd"]) | . as $c | .args as $a
		| range(0; ($a | length) - 1) as $i | select($a[$i] | IN('"$FILEFLAGS"'))
		| "\($w.kind)/\($w.metadata.name) \($a[$i]) \($a[$i + 1]): " + resolve($p; $c; $a[$i + 1])' | sort
}
# OCT: a mode as 0NNN; EFF: a Secret or ConfigMap file's mode as the kubelet
# leaves it: its mode (item, else defaultMode, else 0644), plus 0440 when the
# pod has an fsGroup (SetVolumeOwnership: group fsGroup, g+r and u+r, whatever
# defaultMode says; kubernetes/kubernetes#57923)
OCT='def bit($b): ((. / $b) | floor) % 2; def oct: "0" + ([((. / 64) | floor) % 8, ((. / 8) | floor) % 8, . % 8] | map(tostring) | join(""));
	def eff($fsg): if $fsg == null then . else . + (if bit(256) == 0 then 256 else 0 end) + (if bit(32) == 0 then 32 else 0 end) end;'
np='($all[] | select(.kind == "NetworkPolicy" and .metadata.name == "profd-collector"))'

for lay in $LAYOUTS; do
	[ -s "$T/$lay.json" ] || continue
	args=$(q "$lay" "$dep.spec.template.spec.containers[0].args")
	addr_port=$(echo "$args" | jq -r "$(arg --addr)" | sed 's/.*://')
	# the NetworkPolicy: one, on the collector's pods only
	expect "$lay: NetworkPolicy profd-collector selects the collector's pods and no other pod template" "1 Deployment/profd" \
		"$(q "$lay" "$SEL"' [$all[] | select(.kind == "NetworkPolicy" and .metadata.name == "profd-collector")] as $nps | $nps[0] as $n
			| "\($nps | length) \([$all[] | select(.spec.template // .spec.jobTemplate) | select(matches($n.spec.podSelector; '"$PODL"')) | .kind + "/" + .metadata.name] | join(" "))"')"
	# on the collector's port: a number, or a name, that is the collector's container port = its --addr port
	expect "$lay: NetworkPolicy: Ingress only, to the collector's container port (= --addr port $addr_port)" "Ingress $addr_port/TCP" \
		"$(q "$lay" "$np"' as $n | '"$dep"'.spec.template.spec.containers[0].ports as $cp
			| "\($n.spec.policyTypes | join(",")) \([$n.spec.ingress[].ports[] | . as $x
				| (if ($x.port | type) == "number" then ($cp[] | select(.containerPort == $x.port) | .containerPort)
				   else ($cp[] | select(.name == $x.port) | .containerPort) end) as $num
				| "\($num)/\($x.protocol // "TCP")"] | join(","))"')"
	# from: the pods of the scraper workloads (every pod template that runs profd scrape), in the
	# policy's namespace, and the labelled namespaces; nothing else
	scrapers=$(q "$lay" '[$all[] | select(any('"$POD"'.containers[]; .command == ["profd"] and .args[0] == "scrape")) | .kind + "/" + .metadata.name] | join(",")')
	nslabel=$(q "$lay" "$np"' | [.spec.ingress[].from[] | select(.namespaceSelector) | .namespaceSelector.matchLabels | to_entries[] | "\(.key)=\(.value)"] | join(",")')
	expect "$lay: NetworkPolicy: from the scraper's pods ($scrapers) and the namespaces labelled ${nslabel:-?}, nothing else" \
		"pods:$scrapers namespaces:profd.io/collector-access=true" \
		"$(q "$lay" "$SEL $np"' as $n | [$n.spec.ingress[].from[] | . as $f
			| if .podSelector and (.namespaceSelector | not) and (.ipBlock | not) then
				"pods:" + ([$all[] | select(.spec.template // .spec.jobTemplate) | select(.metadata.namespace == $n.metadata.namespace)
					| select(matches($f.podSelector; '"$PODL"')) | .kind + "/" + .metadata.name] | join(","))
			  elif .namespaceSelector and (.podSelector | not) and (.namespaceSelector.matchExpressions | not) then
				"namespaces:" + (.namespaceSelector.matchLabels | to_entries | map("\(.key)=\(.value)") | join(","))
			  else "other:" + tojson end] | join(" ")')"
	# every Secret and ConfigMap a volume or an env variable names exists with the keys it
	# lists; every mount has its volume; no Secret or ConfigMap is unused
	expect "$lay: every Secret and ConfigMap a volume or env valueFrom names exists (with its keys), every mount has a volume, none unused" "" \
		"$(q "$lay" '($all[] | . as $w | '"$POD"' as $p | ($p.volumes // [])[] | select(.secret or .configMap)
			| (if .secret then {k: "Secret", n: .secret.secretName, s: .secret} else {k: "ConfigMap", n: .configMap.name, s: .configMap} end) as $r
			| (first($all[] | select(.kind == $r.k and .metadata.name == $r.n)) // null) as $o
			| if $o == null then "\($w.kind)/\($w.metadata.name): no \($r.k) \($r.n)"
			  else (($r.s.items // [])[] | .key as $key | select((($o.data // {}) + ($o.stringData // {})) | has($key) | not)
				| "\($w.kind)/\($w.metadata.name): \($r.k) \($r.n) has no key \($key)") end),
			($all[] | . as $w | '"$POD"' as $p | (($p.initContainers // []) + $p.containers)[] | . as $c | (.volumeMounts // [])[]
				| select(.name as $v | (($p.volumes // []) + ($w.spec.volumeClaimTemplates // []) | map(.name // .metadata.name)) | index([$v]) | not)
				| "\($w.kind)/\($w.metadata.name)/\($c.name): no volume \(.name)"),
			($all[] | . as $w | '"$POD"' as $p | (($p.initContainers // []) + $p.containers)[] | . as $c | (.env // [])[] | .name as $e
				| (if .valueFrom.secretKeyRef then {k: "Secret", r: .valueFrom.secretKeyRef} elif .valueFrom.configMapKeyRef then {k: "ConfigMap", r: .valueFrom.configMapKeyRef} else empty end) as $r
				| (first($all[] | select(.kind == $r.k and .metadata.name == $r.r.name)) // null) as $o
				| if $o == null then "\($w.kind)/\($w.metadata.name)/\($c.name): env \($e): no \($r.k) \($r.r.name)"
				  elif (($o.data // {}) + ($o.stringData // {})) | has($r.r.key) then empty
				  else "\($w.kind)/\($w.metadata.name)/\($c.name): env \($e): \($r.k) \($r.r.name) has no key \($r.r.key)" end),
			([$all[] | '"$POD"' | ((.volumes // [])[] | (.secret.secretName // .configMap.name // empty)),
				(((.initContainers // []) + .containers)[].env[]?.valueFrom | (.secretKeyRef.name // .configMapKeyRef.name // empty))] as $used
				| $all[] | select(.kind == "Secret" or .kind == "ConfigMap") | select(.metadata.name as $x | $used | index([$x]) | not)
				| "\(.kind)/\(.metadata.name): unused")')"
	# each file flag of a profd container: through its mount, to the right Secret (ConfigMap) key
	want="Deployment/profd --tokens /etc/profd/tokens/tokens: emptyDir tokens <- install-tokens: install -m 0600 <- Secret/profd-tokens-HASH:tokens"
	sc=Deployment/profd-scraper
	[ "$lay" != cronjob ] || sc=CronJob/profd-scrape
	want="$want
$sc --token-file /etc/profd/scraper-token/token: Secret/profd-scraper-token-HASH:token"
	if [ "$lay" = tls ]; then
		want="$want
Deployment/profd --tls-cert /etc/profd/tls/tls.crt: Secret/profd-tls-HASH:tls.crt
Deployment/profd --tls-key /etc/profd/tls/tls.key: Secret/profd-tls-HASH:tls.key
Deployment/profd-scraper --collector-cacert /etc/profd/ca/ca.crt: ConfigMap/profd-ca-HASH:ca.crt"
	fi
	if [ "$lay" = clickhouse ]; then
		want="$want
Deployment/profd --store-password-file /etc/profd/clickhouse/password: Secret/profd-clickhouse-HASH:password"
	fi
	expect "$lay: each file flag (--tokens, --token-file, --tls-*, --collector-cacert, --store-password-file) = mount path + key of the right Secret or ConfigMap" \
		"$(echo "$want" | sort | tr '\n' '|')" "$(file_flags "$lay" | tr '\n' '|')"
	# Secret volumes: the pod's non-root user reads them through the group (fsGroup), others nothing
	expect "$lay: every Secret volume readable by the pod's user through fsGroup (mode | 0440), by others not at all" "" \
		"$(q "$lay" "$OCT"' $all[] | . as $w | '"$POD"' as $p | ($p.volumes // [])[] | select(.secret) | . as $v
			| ([.secret.items[]?.mode | select(. != null)] + [.secret.defaultMode // 420])[] | eff($p.securityContext.fsGroup) as $e
			| select($p.securityContext.fsGroup == null or ($p.securityContext.runAsUser // 0) == 0 or $e % 8 != 0)
			| "\($w.kind)/\($w.metadata.name) \($v.name): mode \($e | oct), fsGroup \($p.securityContext.fsGroup), uid \($p.securityContext.runAsUser)"')"
	# profd serve's own check (lib/http/auth.c: mode & 077 == 0) on the file --tokens names:
	# the init container's copy (install -m), or else the Secret volume's mode
	tmode=$(q "$lay" "$OCT"' '"$dep"'.spec.template.spec as $p | ($p.containers[0].args | '"$(arg --tokens)"') as $t
		| (first(($p.initContainers // [])[] | select(.command[-1] == $t) | .command | . as $c | $c[($c | index(["-m"])) + 1]) // null) as $m
		| if $m != null then $m
		  else ($p.containers[0].volumeMounts[] | . as $vm | select($t | startswith($vm.mountPath + "/")) | .name) as $vn
			| ($p.volumes[] | select(.name == $vn) | if .secret then (.secret.defaultMode // 420 | eff($p.securityContext.fsGroup) | oct)
				else "none: on volume \(.name), not a Secret, and no init container writes it" end) end')
	if [[ $tmode =~ ^0?[0-7]{3}$ ]] && (((8#$tmode & 8#077) == 0)); then
		ok "$lay: the file profd serve --tokens reads has mode $tmode: passes its check (mode & 077 == 0)"
	else
		fail "$lay: the file profd serve --tokens reads passes its mode check (mode & 077 == 0)" "mode '$tmode'"
	fi
done

# the README documents the namespace label of the NetworkPolicy, and how to set it
if [ -s "$DJ" ]; then
	nslabel=$(q default "$np"' | [.spec.ingress[].from[] | select(.namespaceSelector) | .namespaceSelector.matchLabels | to_entries[] | "\(.key)=\(.value)"] | join(",")')
	if grep -Eq "kubectl label namespace [A-Za-z0-9_-]+ $nslabel" "$SRC/README.md"; then
		ok "README.md documents the NetworkPolicy's namespace label: kubectl label namespace NS $nslabel"
	else
		fail "README.md documents the NetworkPolicy's namespace label" "no 'kubectl label namespace NS $nslabel' in deploy/kubernetes/README.md"
	fi
	# example-secrets.yaml: the names and keys the layouts mount; README: a kubectl create secret line for each
	mounted=$(file_flags default | sed -n 's/.*<- Secret\/\([a-z0-9-]*\)-HASH:\(.*\)$/\1:\2/p; s/.*: Secret\/\([a-z0-9-]*\)-HASH:\(.*\)$/\1:\2/p' | sort -u | tr '\n' ' ' | sed 's/ $//')
	expect "secrets/example-secrets.yaml: the Secret names and keys the manifests mount ($mounted)" "$mounted" \
		"$(jq -r "$OBJS | select(.kind == \"Secret\") | .metadata.name as \$n | ((.data // {}) + (.stringData // {})) | keys[] | \"\(\$n):\(.)\"" "$T/example.json" | sort -u | tr '\n' ' ' | sed 's/ $//')"
	missing=''
	for nk in $mounted; do
		grep -Eq -- "create secret generic ${nk%%:*} .*--from-file=${nk#*:}=" "$SRC/README.md" || missing="$missing $nk"
	done
	expect "README.md: a 'kubectl create secret generic NAME --from-file=KEY=...' for each ($mounted)" "" "$missing"
fi

# the TLS overlay changes only what it says
if [ -s "$TJ" ] && [ -s "$DJ" ]; then
	lay=tls
	expect "tls: collector probes in HTTPS on its port named https; Service port https (appProtocol https) -> it" "HTTPS https | https https https 10100" \
		"$(q $lay "$dep.spec.template.spec.containers[0] | [.startupProbe, .livenessProbe, .readinessProbe] | map(.httpGet.scheme) | unique | join(\",\")") $(q $lay "$dep.spec.template.spec.containers[0] | [.startupProbe, .livenessProbe, .readinessProbe] | map(.httpGet.port) | unique | join(\",\")") | $(q $lay "$svc.spec.ports[0] | \"\(.name) \(.appProtocol) \(.targetPort)\"") $(q $lay "$dep.spec.template.spec.containers[0].ports[] | select(.name == \"https\") | .containerPort")"
	expect "default and cronjob: probes in plain HTTP" "HTTP HTTP" \
		"$(for l in default cronjob; do q $l '[$all[] | '"$POD"' | .containers[] | (.startupProbe, .livenessProbe, .readinessProbe) | select(. != null) | .httpGet.scheme // "HTTP"] | unique | join(",")'; done | tr '\n' ' ' | sed 's/ $//')"
	tls_url=$(q $lay "$svc | \"https://\(.metadata.name).\(.metadata.namespace).svc:\(.spec.ports[0].port)\"")
	expect "tls: scraper --collector is the Service in https ($tls_url); Secret profd-tls is kubernetes.io/tls" "$tls_url kubernetes.io/tls" \
		"$(q $lay "$scr.spec.template.spec.containers[0].args | $(arg --collector)") $(q $lay '$all[] | select(.kind == "Secret" and (.metadata.name | startswith("profd-tls-"))) | .type')"
	# the args: the TLS flags, and the scraper's --collector, are the only differences from the default layout
	strip='. as $a | [range(0; length) | select(($a[.] | IN("--tls-cert", "--tls-key", "--collector-cacert")) or (. > 0 and ($a[. - 1] | IN("--tls-cert", "--tls-key", "--collector-cacert"))) | not) | $a[.]] | map(sub("^https://"; "http://"))'
	expect "tls: the collector's and scraper's args are the default layout's + the TLS flags (and https://)" \
		"$(q default "[$dep, $scr] | map(.spec.template.spec.containers[0].args) | tojson")" \
		"$(q $lay "[$dep, $scr] | map(.spec.template.spec.containers[0].args | $strip) | tojson")"
	# the certificate of tls/gen-certs.sh names the host of the scraper's --collector
	host=$(echo "$tls_url" | sed 's|^https://||; s|:.*||')
	if openssl x509 -in "$DEPLOY/tls/tls.crt" -noout -text 2>/dev/null | grep -q "DNS:$host\(,\|$\)"; then
		ok "tls/gen-certs.sh: the certificate names the Service ($host)"
	else
		fail "tls/gen-certs.sh: the certificate names the Service ($host)" "$(openssl x509 -in "$DEPLOY/tls/tls.crt" -noout -text 2>&1 | grep -A1 'Alternative')"
	fi
fi

# the ClickHouse layout: stateless collectors on the example ClickHouse
if [ -s "$HJ" ]; then
	lay=clickhouse
	svcp='($all[] | select(.kind == "Service" and .metadata.name == "profd"))'
	chsvc='($all[] | select(.kind == "Service" and .metadata.name == "clickhouse"))'
	sts='($all[] | select(.kind == "StatefulSet" and .metadata.name == "clickhouse"))'
	pdb='($all[] | select(.kind == "PodDisruptionBudget"))'
	chnp='($all[] | select(.kind == "NetworkPolicy" and .metadata.name == "clickhouse"))'
	# URL: the parts of the collector's --store clickhouse://[USER[:PASSWORD]@]HOST:PORT/DATABASE[?...]
	URL='def url: capture("^clickhouse://((?<user>[^:@/]*)(?<pw>:[^@/]*)?@)?(?<host>[^:/@]+):(?<port>[0-9]+)/(?<db>[^?/]+)(?<q>[?].*)?$");'
	args=$(q $lay "$dep.spec.template.spec.containers[0].args")
	store=$(echo "$args" | jq -r "$(arg --store)")
	expect "clickhouse: collectors without local state: >= 2 replicas, RollingUpdate with maxUnavailable 0, no PVC volume, no --data-dir, no PVC in the layout" \
		"true RollingUpdate 0 | pvc: | --data-dir: false | PVCs:" \
		"$(q $lay "$dep.spec | \"\(.replicas >= 2) \(.strategy.type) \(.strategy.rollingUpdate.maxUnavailable)\"") | pvc:$(q $lay "[$dep.spec.template.spec.volumes[] | select(.persistentVolumeClaim) | .name] | join(\",\")") | --data-dir: $(echo "$args" | jq 'index(["--data-dir"]) != null') | PVCs:$(q $lay '[$all[] | select(.kind == "PersistentVolumeClaim") | .metadata.name] | join(",")')"
	# the args: the default layout's, with --store and --store-password-file instead of --data-dir
	expect "clickhouse: the collector's args are the default layout's with --store clickhouse://... --store-password-file FILE instead of --data-dir" \
		"$(q default "$dep.spec.template.spec.containers[0].args | . as \$a | [range(0; length) | select(\$a[.] != \"--data-dir\" and (. == 0 or \$a[. - 1] != \"--data-dir\")) | \$a[.]] | tojson") true" \
		"$(echo "$args" | jq -c '. as $a | [range(0; length) | select(($a[.] | IN("--store", "--store-password-file") | not) and (. == 0 or ($a[. - 1] | IN("--store", "--store-password-file") | not))) | $a[.]]') $(echo "$args" | jq -r "[$(arg --store), $(arg --store-password-file)] | map(. != null) | all")"
	expect "clickhouse: collector readiness /readyz (follows ClickHouse), liveness /healthz (does not), grace > --shutdown-timeout" "/readyz /healthz true" \
		"$(q $lay "$dep.spec.template.spec | (.containers[0].args | $(arg --shutdown-timeout) // \"30s\" | sub(\"s$\"; \"\") | tonumber) as \$st | \"\(.containers[0].readinessProbe.httpGet.path) \(.containers[0].livenessProbe.httpGet.path) \((.terminationGracePeriodSeconds // 30) > \$st)\"")"
	addr_port=$(echo "$args" | jq -r "$(arg --addr)" | sed 's/.*://')
	expect "clickhouse: Service profd: port 10100 -> the collectors' --addr port, selects the collectors' pods (and no other pod template)" "10100 $addr_port Deployment/profd" \
		"$(q $lay "$SEL $svcp | .spec.ports[0] as \$p | .spec.selector as \$s | ($dep.spec.template.spec.containers[0].ports[] | select(.name == \$p.targetPort or .containerPort == \$p.targetPort) | .containerPort) as \$cp
			| \"\(\$p.port) \(\$cp) \([\$all[] | select(.spec.template) | select(matches({matchLabels: \$s}; $PODL)) | .kind + \"/\" + .metadata.name] | join(\",\"))\"")"
	expect "clickhouse: scraper --collector is the Service profd" \
		"$(q $lay "$svcp | \"http://\(.metadata.name).\(.metadata.namespace).svc:\(.spec.ports[0].port)\"")" \
		"$(q $lay "$scr.spec.template.spec.containers[0].args | $(arg --collector)")"
	expect "clickhouse: PodDisruptionBudget: minAvailable 1 (< replicas), selects the collectors' pods and no other pod template" "1 true Deployment/profd" \
		"$(q $lay "$SEL $pdb | .spec as \$b | \"\(\$b.minAvailable) \(\$b.minAvailable < $dep.spec.replicas) \([\$all[] | select(.spec.template) | select(matches(\$b.selector; $PODL)) | .kind + \"/\" + .metadata.name] | join(\",\"))\"")"
	# --store: HOST:PORT is the Service clickhouse (HOST its name, or name.namespace[.svc...]),
	# whose port goes to the StatefulSet's container port; no password in the URL
	expect "clickhouse: --store $store: HOST:PORT = Service clickhouse's name:port -> the StatefulSet's pods, port 8123; no password in the URL" \
		"clickhouse:8123 -> StatefulSet/clickhouse:8123 no-password" \
		"$(q $lay "$URL $SEL \"$store\" | url as \$u | ($chsvc) as \$s | (\$u.host | split(\".\")) as \$h
			| if \$h[0] != \$s.metadata.name or (\$h[1] // \$s.metadata.namespace) != \$s.metadata.namespace then \"host \(\$u.host) is not Service \(\$s.metadata.name)\"
			  else (first(\$s.spec.ports[] | select((.port | tostring) == \$u.port)) // null) as \$p
			  | if \$p == null then \"port \(\$u.port) is not a port of Service \(\$s.metadata.name) (\(\$s.spec.ports | map(.port) | join(\",\")))\" else
			  [\$all[] | select(.spec.template) | select(matches({matchLabels: \$s.spec.selector}; $PODL)) | . as \$w
				| .spec.template.spec.containers[].ports[]? | select(.name == \$p.targetPort or .containerPort == \$p.targetPort)
				| \"\(\$w.kind)/\(\$w.metadata.name):\(.containerPort)\"] as \$to
			| \"\(\$h[0]):\(\$p.port) -> \(\$to | join(\",\")) \(if \$u.pw then \"PASSWORD IN THE URL\" else \"no-password\" end)\" end end")"
	# the URL's user and database are those the example server's entrypoint creates; its
	# password comes from the Secret key the collectors' --store-password-file reads
	pwsrc=$(file_flags $lay | sed -n 's/^Deployment\/profd --store-password-file [^ ]*: //p')
	expect "clickhouse: the URL's user and database = the server's CLICKHOUSE_USER, CLICKHOUSE_DB; CLICKHOUSE_PASSWORD = the Secret key of --store-password-file ($pwsrc)" \
		"$(q $lay "$URL \"$store\" | url | \"\(.user) \(.db)\"") $pwsrc" \
		"$(q $lay "$RESOLVE $sts.spec.template.spec.containers[0].env as \$e | def v(\$n): first(\$e[] | select(.name == \$n)) // {};
			\"\(v(\"CLICKHOUSE_USER\").value) \(v(\"CLICKHOUSE_DB\").value) \(v(\"CLICKHOUSE_PASSWORD\").valueFrom.secretKeyRef | \"Secret/\(.name | hs):\(.key)\")\"")"
	# the example server: one replica, data on a ReadWriteOnce PVC per pod at ClickHouse's
	# path, a pinned image (a full version tag), probes, resources
	expect "clickhouse: StatefulSet clickhouse: 1 replica, /var/lib/clickhouse on a ReadWriteOnce volume claim, image pinned to a version, /ping probes, requests and a memory limit" \
		"1 data:ReadWriteOnce:/var/lib/clickhouse pinned /ping true" \
		"$(q $lay "$sts.spec | .template.spec.containers[0] as \$c | (.volumeClaimTemplates[0]) as \$v
			| \"\(.replicas) \(\$v.metadata.name):\(\$v.spec.accessModes | join(\",\")):\(\$c.volumeMounts[] | select(.name == \$v.metadata.name) | .mountPath)\"
			+ \" \(if \$c.image | test(\":[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+\$\") then \"pinned\" else \"not pinned: \" + \$c.image end)\"
			+ \" \([\$c.startupProbe, \$c.readinessProbe, \$c.livenessProbe] | map(.httpGet.path) | unique | join(\",\"))\"
			+ \" \(\$c.resources.requests.cpu != null and \$c.resources.requests.memory != null and \$c.resources.limits.memory != null)\"")"
	# its NetworkPolicy: the ClickHouse pods only, their HTTP port (the Service's target), from the collectors only
	expect "clickhouse: NetworkPolicy clickhouse: selects the ClickHouse pods only; Ingress to port 8123 (the Service's target) from the collectors' pods only" \
		"StatefulSet/clickhouse | Ingress 8123/TCP | pods:Deployment/profd" \
		"$(q $lay "$SEL $chnp as \$n | ($sts.spec.template.spec.containers[0].ports) as \$cp
			| \"\([\$all[] | select(.spec.template) | select(matches(\$n.spec.podSelector; $PODL)) | .kind + \"/\" + .metadata.name] | join(\",\"))\"
			+ \" | \(\$n.spec.policyTypes | join(\",\")) \([\$n.spec.ingress[].ports[] | . as \$x | (\$cp[] | select(.containerPort == \$x.port or .name == \$x.port) | .containerPort) as \$num | \"\(\$num)/\(\$x.protocol // \"TCP\")\"] | join(\",\"))\"
			+ \" | \([\$n.spec.ingress[].from[] | if .podSelector and (.namespaceSelector | not) and (.ipBlock | not) then . as \$f
				| \"pods:\" + ([\$all[] | select(.spec.template) | select(.metadata.namespace == \$n.metadata.namespace) | select(matches(\$f.podSelector; $PODL)) | .kind + \"/\" + .metadata.name] | join(\",\"))
				else \"other:\" + tojson end] | join(\" \"))\"")"
	# an external secret manager: README.md says how to make the password's Secret by hand
	if grep -Eq -- "create secret generic profd-clickhouse .*--from-file=password=" "$SRC/README.md"; then
		ok "README.md: a 'kubectl create secret generic profd-clickhouse --from-file=password=...' (the key the layout mounts)"
	else
		fail "README.md: kubectl create secret generic profd-clickhouse" "no 'create secret generic profd-clickhouse ... --from-file=password=' in deploy/kubernetes/README.md"
	fi
fi

# ---- 5. the args against the real binary -----------------------------------------------------------

KFLAGS=" -A --all-namespaces -n --namespace -l --selector --kubeconfig --context --kubernetes --pod-labels "
# every profd container of the layouts: "LAYOUT:KIND/NAME/CONTAINER" and its args as JSON
for lay in $LAYOUTS; do
	[ -s "$T/$lay.json" ] || continue
	q "$lay" '$all[] | . as $o | (.spec.template.spec // .spec.jobTemplate.spec.template.spec // empty).containers[]
		| select(.command == ["profd"]) | "'"$lay"':\($o.kind)/\($o.metadata.name)/\(.name)\t\(.args | tojson)"'
done | sort -u >"$T/containers.tsv"
expect "profd containers" "clickhouse:Deployment/profd-scraper/scraper clickhouse:Deployment/profd/profd cronjob:CronJob/profd-scrape/scraper cronjob:Deployment/profd/profd default:Deployment/profd-scraper/scraper default:Deployment/profd/profd tls:Deployment/profd-scraper/scraper tls:Deployment/profd/profd" \
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
# local_args JSON COLLECTOR ROOT DATA [STORE-HOST:PORT]: the args with local
# stand-ins (one per line, for mapfile): --addr and --listen on 127.0.0.1:0,
# --data-dir DATA, --state-dir under $T, --collector COLLECTOR, the HOST:PORT
# of a --store clickhouse:// URL replaced by STORE-HOST:PORT, the files of the
# file flags under ROOT (the pod's volumes, see materialize), the discovery
# flags as said above; --cpu-duration 1s is added to keep the test short
local_args() {
	echo "$1" | jq -r --arg t "$T" --arg mode "$KMODE" --arg kc "$K" --arg coll "$2" --arg root "$3" --arg data "$4" \
		--arg tgt "127.0.0.1:$TPORT" --arg chhp "${5:-}" '
		def kv: IN("-n", "--namespace", "-l", "--selector", "--kubeconfig", "--context", "--pod-labels");
		def kflag: IN("-A", "--all-namespaces", "--kubernetes") or kv;
		. as $a | ([range(0; length)] | map(
			if (. > 0) and ($a[. - 1] | IN("--addr", "--listen")) then "127.0.0.1:0"
			elif (. > 0) and $a[. - 1] == "--data-dir" then $data
			elif (. > 0) and $a[. - 1] == "--state-dir" then $t + "/state"
			elif (. > 0) and $a[. - 1] == "--collector" then $coll
			elif (. > 0) and $a[. - 1] == "--store" and $chhp != "" then ($a[.] | sub("^(?<p>clickhouse://([^@/]*@)?)[^/]*"; "\(.p)\($chhp)"))
			elif (. > 0) and ($a[. - 1] | IN('"$FILEFLAGS"')) then $root + $a[.]
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
# the args of a container, and its probes ("PATH SCHEME")
cargs() { grep -F "$1"$'\t' "$T/containers.tsv" | cut -f2; }
probes() { q "$1" "\$all[] | select(.kind + \"/\" + .metadata.name == \"$2\") | .spec.template.spec.containers[0] | [.startupProbe, .livenessProbe, .readinessProbe][] | select(. != null) | .httpGet | \"\(.path) \(.scheme // \"HTTP\" | ascii_downcase)\"" | sort -u; }
# probe_codes PORT LAYOUT KIND/NAME HOST [CURL-ARGS...]: " PATH=CODE" for each
# probe path, in the probe's scheme, at HOST:PORT
probe_codes() {
	local port=$1 lay=$2 obj=$3 host=$4 path scheme
	shift 4
	while read -r path scheme; do
		printf ' %s=%s' "$path" "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" "$scheme://$host:$port$path")"
	done < <(probes "$lay" "$obj")
}

# The pods' users: as root (with setpriv), the init containers, the read
# checks and the collectors run as the pod's uid/gid with its fsGroup as
# supplementary group, against files with the owner (root), group (fsGroup)
# and modes the kubelet gives them; otherwise as we are (modes still as the
# kubelet's, so profd's mode check is still the real one).
AS_USER=''
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	AS_USER=1
	chmod 711 "$T" # the pod's uid must get to its files under $T (their names are not listed)
fi
# user_prefix UID GID FSGROUP: UP=(the command prefix that runs as them); "-" = none
user_prefix() {
	UP=()
	[ -n "$AS_USER" ] && [ "${1:--}" != - ] || return 0
	UP=(setpriv --reuid "$1" --regid "${2/-/$1}")
	if [ "${3:--}" != - ]; then UP+=(--groups "$3"); else UP+=(--clear-groups); fi
	UP+=(--)
}
# materialize LAYOUT KIND/NAME ROOT: the pod's volumes under ROOT + mountPath,
# as the kubelet writes them: each key of a Secret or ConfigMap (of the built
# layout; or its items' paths) in a timestamped directory behind ..data and a
# symlink KEY -> ..data/KEY, mode (item's mode, else defaultMode, else 0644)
# | 0440 when the pod has an fsGroup, owner root, group fsGroup; emptyDirs
# (and PVCs) as empty directories, mode 0777 (2777, group fsGroup); then the
# init containers' commands, their absolute paths under a mount moved under
# ROOT, as the container's user. Problems in ROOT.problems; it also checks
# that each container's user can read the Secret and ConfigMap files it
# mounts, and no other uid the Secret ones (with AS_USER).
materialize() {
	local lay=$1 obj=$2 root=$3 what a b c d f dir mode uid=- fsg=-
	rm -rf "$root" "$root.problems"
	mkdir -p "$root"
	chmod 755 "$root"
	while IFS=$'\t' read -r what a b c d; do
		case $what in
		pod) uid=$a fsg=$c ;; # b: the pod's gid
		missing) echo "missing $a" >>"$root.problems" ;;
		dir)
			mkdir -p "$root$a"
			chmod 777 "$root$a"
			if [ -n "$AS_USER" ] && [ "$fsg" != - ]; then chgrp "$fsg" "$root$a" && chmod 2777 "$root$a"; fi
			;;
		file) # a = mount path, b = file, c = mode (decimal), d = base64 content
			dir=$root$a/..2026_01_01_00_00_00.0
			mkdir -p "$dir"
			chmod 755 "$root$a" "$dir"
			ln -sfn "${dir##*/}" "$root$a/..data"
			printf %s "$d" | base64 -d >"$dir/$b"
			mode=$c
			[ "$fsg" = - ] || mode=$((mode | 8#440))
			chmod "$(printf %o "$mode")" "$dir/$b"
			[ -z "$AS_USER" ] || [ "$fsg" = - ] || chgrp "$fsg" "$dir/$b"
			ln -sfn "..data/$b" "$root$a/$b"
			;;
		can) # a = uid, b = gid, c = kind, d = file
			[ -n "$AS_USER" ] || continue
			user_prefix "$a" "$b" "$fsg"
			"${UP[@]}" cat "$root$d" >/dev/null 2>&1 || echo "uid $a cannot read $d" >>"$root.problems"
			if [ "$c" = Secret ] && setpriv --reuid 65533 --regid 65533 --clear-groups -- cat "$root$d" >/dev/null 2>&1; then
				echo "uid 65533 (not the pod's) can read $d" >>"$root.problems"
			fi
			;;
		init) # a = uid, b = gid, c = name, d = command (JSON)
			user_prefix "$a" "$b" "$fsg"
			mapfile -t f < <(echo "$d" | jq -r '.[]')
			"${UP[@]}" "${f[@]}" >>"$root.init.log" 2>&1 || echo "init container $c (${f[*]}) as uid $a: exit $?: $(tail -c 200 "$root.init.log")" >>"$root.problems"
			;;
		esac
	done < <(jq -rn --arg obj "$obj" --arg root "$root" "[inputs | $OBJS] as \$all | "'
		$all[] | select(.kind + "/" + .metadata.name == $obj) | (.spec.template.spec // .spec.jobTemplate.spec.template.spec) as $p
		| ($p.securityContext // {}) as $sc
		| def u($c): "\($c.securityContext.runAsUser // $sc.runAsUser // "-")\t\($c.securityContext.runAsGroup // $sc.runAsGroup // "-")";
		  def src($v): if $v.secret then {kind: "Secret", name: $v.secret.secretName, s: $v.secret}
			elif $v.configMap then {kind: "ConfigMap", name: $v.configMap.name, s: $v.configMap} else null end;
		  def data($r): (first($all[] | select(.kind == $r.kind and .metadata.name == $r.name)) // null) as $o
			| if $o == null then null
			  else ((if $r.kind == "Secret" then ($o.data // {} | map_values(gsub("\\s"; ""))) else ($o.data // {} | map_values(@base64)) end)
				+ (($o.stringData // {}) | map_values(@base64))) end;
		  def files($r): data($r) as $d | if $d == null then [] else ($r.s.items // ($d | keys | map({key: ., path: .}))) end;
		("pod\t\($sc.runAsUser // "-")\t\($sc.runAsGroup // "-")\t\($sc.fsGroup // "-")"),
		([(($p.initContainers // []) + $p.containers)[] | (.volumeMounts // [])[]] | unique_by(.mountPath)[] as $m
			| (first(($p.volumes // [])[] | select(.name == $m.name)) // {}) as $v | src($v) as $r
			| if $r != null then data($r) as $d
				| if $d == null then "missing\t\($r.kind)/\($r.name)"
				  else files($r)[] as $it
					| if $d | has($it.key) then "file\t\($m.mountPath)\t\($it.path)\t\($it.mode // $r.s.defaultMode // 420)\t\($d[$it.key])"
					  else "missing\t\($r.kind)/\($r.name):\($it.key)" end end
			  elif $v.emptyDir or $v.persistentVolumeClaim then "dir\t\($m.mountPath)"
			  else "missing\tvolume \($m.name)" end),
		((($p.initContainers // []) + $p.containers)[] as $c | ($c.volumeMounts // [])[] as $m
			| (first(($p.volumes // [])[] | select(.name == $m.name)) // {}) as $v | src($v) as $r | select($r != null)
			| files($r)[] | "can\t\(u($c))\t\($r.kind)\t\($m.mountPath)/\(.path)"),
		(($p.initContainers // [])[] as $c
			| "init\t\(u($c))\t\($c.name)\t\(($c.command + ($c.args // [])) | map(. as $x
				| if ($x | startswith("/")) and any(($c.volumeMounts // [])[]; . as $vm | $x == $vm.mountPath or ($x | startswith($vm.mountPath + "/")))
				  then $root + $x else $x end) | tojson)")' "$T/$lay.json")
	if [ -s "$root.problems" ]; then
		fail "$lay $obj: its volumes and init containers" "$(head -c 600 "$root.problems")"
	elif [ -n "$AS_USER" ]; then
		ok "$lay $obj: volumes written as the kubelet does (owner root, group fsGroup $fsg, mode | 0440), init containers run as the pod's uid $uid, every mounted Secret and ConfigMap file readable by its container's user, the Secret files by no other uid"
	else
		ok "$lay $obj: volumes written as the kubelet does, init containers run # SKIP not root: the read checks as the pod's uid"
	fi
}
# a data directory the pod's uid owns
datadir() {
	mkdir -p "$1"
	[ -z "$AS_USER" ] || chown "$2" "$1"
}
# curl_api URL ARGS...: the HTTP status code
curl_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
FS=$T/fs
POD_UID=$(q default "$dep.spec.template.spec.securityContext | \"\(.runAsUser // \"-\") \(.runAsGroup // \"-\") \(.fsGroup // \"-\")\"" 2>/dev/null)

# serve: starts with the manifest's args (its --tokens file made by its init
# container from the Secret), answers its probe paths, wants a token; it is
# the collector of the scrapes below, then stops cleanly
COLL=http://127.0.0.1:1
json=$(cargs default:Deployment/profd/profd)
if [ -n "$json" ]; then
	materialize default Deployment/profd "$FS/default/profd"
	datadir "$T/data" "${POD_UID%% *}"
	mapfile -t a < <(local_args "$json" "" "$FS/default/profd" "$T/data")
	# shellcheck disable=SC2086 # uid gid fsGroup
	user_prefix $POD_UID
	: >"$T/serve.log"
	"${UP[@]}" "$PROFD" "${a[@]}" 2>"$T/serve.log" &
	SERVE_PID=$!
	if wait_grep "$T/serve.log" 'listening on port [0-9]+' 100; then
		port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$T/serve.log" | head -n1)
		COLL=http://127.0.0.1:$port
		expect "profd ${a[*]}${UP:+ (as uid ${POD_UID%% *})}: starts, its probe paths answer 200" " /healthz=200 /readyz=200" \
			"$(probe_codes "$port" default Deployment/profd 127.0.0.1)"
		expect "profd serve (the manifest's args) wants a token: /metrics 401 without, 200 with a read token; POST with it 403" "401 200 403" \
			"$(curl_code "$COLL/metrics") $(curl_code -H "Authorization: Bearer $TOK_READ" "$COLL/metrics") $(curl_code -H "Authorization: Bearer $TOK_READ" --data-binary @/dev/null "$COLL/api/0/profiles?service=x&type=cpu")"
	else
		fail "profd ${a[*]}: starts" "$(head -c 600 "$T/serve.log")"
	fi
	# why the init container copies the file: profd serve refuses the Secret volume's own (mode | 0440)
	src=$(q default "$dep.spec.template.spec as \$p | (\$p.containers[0].args | $(arg --tokens)) as \$t | \$p.initContainers[] | select(.command[-1] == \$t) | .command[-2]")
	if [ -n "$src" ]; then
		expect_exit "profd serve --tokens on the Secret volume's own file (mode 0$(stat -L -c %a "$FS/default/profd$src" 2>/dev/null)): refused, hence the init container's 0600 copy" \
			1 'readable by group or others' timeout 20 "$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data-ctl" --tokens "$FS/default/profd$src"
	fi
fi

# continuous scraper: starts, answers its probe paths on --listen, stops cleanly
json=$(cargs default:Deployment/profd-scraper/scraper)
if [ -n "$json" ]; then
	materialize default Deployment/profd-scraper "$FS/default/profd-scraper"
	mapfile -t a < <(local_args "$json" "$COLL" "$FS/default/profd-scraper" "")
	: >"$T/scrape.log"
	"$PROFD" "${a[@]}" 2>"$T/scrape.log" &
	RUN_PID=$!
	if wait_grep "$T/scrape.log" 'metrics listening on port [0-9]+' 100; then
		port=$(sed -n 's/.*metrics listening on port \([0-9]*\).*/\1/p' "$T/scrape.log" | head -n1)
		expect "profd ${a[*]}: starts, its probe paths answer 200 ($KMODE targets)" " /healthz=200" \
			"$(probe_codes "$port" default Deployment/profd-scraper 127.0.0.1)"
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
# cumulative as it is); its token is accepted by the collector
json=$(cargs cronjob:CronJob/profd-scrape/scraper)
if [ -n "$json" ] && [ "$TPORT" != 1 ]; then
	materialize cronjob CronJob/profd-scrape "$FS/cronjob/profd-scrape"
	mapfile -t a < <(local_args "$json" "$COLL" "$FS/cronjob/profd-scrape" "")
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

# secrets/example-secrets.yaml applied as it is fails closed: profd serve refuses its placeholders
if [ -s "$T/example.json" ]; then
	(umask 077 && jq -r "$OBJS | select(.metadata.name == \"profd-tokens\") | .stringData.tokens" "$T/example.json" >"$T/example-tokens")
	expect_exit "secrets/example-secrets.yaml as it is: profd serve refuses its placeholder tokens (the collector does not start)" \
		1 'the token is [0-9]+ characters' timeout 20 "$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data-example" --tokens "$T/example-tokens"
	expect "secrets/example-secrets.yaml: the scraper's placeholder is the collector's write token's" \
		"$(awk '$2 ~ /(^|,)write(,|$)/ { print $1; exit }' "$T/example-tokens")" \
		"$(jq -r "$OBJS | select(.metadata.name == \"profd-scraper-token\") | .stringData.token" "$T/example.json")"
fi

# TLS: the overlay's serve with its certificate (the Secret profd-tls, as
# mounted), probes in HTTPS for the Service's name, verified with the CA the
# scraper mounts (ConfigMap profd-ca); its scraper's args (+ --once) store
# profiles over HTTPS with its token; without the token, or without the CA, not
json=$(cargs tls:Deployment/profd/profd)
if [ -n "$json" ]; then
	materialize tls Deployment/profd "$FS/tls/profd"
	materialize tls Deployment/profd-scraper "$FS/tls/profd-scraper"
	ca=$FS/tls/profd-scraper$(q tls "$scr.spec.template.spec.containers[0].args | $(arg --collector-cacert)")
	host=$(q tls "$scr.spec.template.spec.containers[0].args | $(arg --collector)" | sed 's|^https://||; s|[:/].*||')
	datadir "$T/data-tls" "${POD_UID%% *}"
	mapfile -t a < <(local_args "$json" "" "$FS/tls/profd" "$T/data-tls")
	# shellcheck disable=SC2086
	user_prefix $POD_UID
	: >"$T/tls.log"
	"${UP[@]}" "$PROFD" "${a[@]}" 2>"$T/tls.log" &
	TLS_PID=$!
	if wait_grep "$T/tls.log" 'listening on port [0-9]+' 100; then
		port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$T/tls.log" | head -n1)
		expect "profd ${a[*]}${UP:+ (as uid ${POD_UID%% *})}: its HTTPS probe paths answer 200 as $host (curl --cacert the ConfigMap's CA)" \
			" /healthz=200 /readyz=200" "$(probe_codes "$port" tls Deployment/profd "$host" --cacert "$ca" --resolve "$host:$port:127.0.0.1")"
		expect "tls: plain HTTP on the TLS port gets no answer; HTTPS needs the token (401 without)" "000 401" \
			"$(curl_code "http://127.0.0.1:$port/healthz") $(curl_code --cacert "$ca" "https://127.0.0.1:$port/api/0/services")"
		json=$(cargs tls:Deployment/profd-scraper/scraper)
		mapfile -t a < <(local_args "$json" "https://127.0.0.1:$port" "$FS/tls/profd-scraper" "")
		rc=0
		timeout 60 "$PROFD" "${a[@]}" --once >"$T/tlsonce.out" 2>"$T/tlsonce.err" || rc=$?
		svcs=$(curl -s --max-time 10 --cacert "$ca" -H "Authorization: Bearer $TOK_READ" "https://127.0.0.1:$port/api/0/services" | jq -r '.body | join(",")' 2>/dev/null)
		n=$(curl -s --max-time 10 --cacert "$ca" -H "Authorization: Bearer $TOK_READ" "https://127.0.0.1:$port/api/0/profiles?service=${svcs%%,*}&type=heap&from=now-1h&to=now" | jq '.body | length' 2>/dev/null)
		if [ "$rc" = 0 ] && [ -n "$svcs" ] && [ "${n:-0}" -ge 1 ]; then
			ok "profd ${a[*]} --once ($KMODE target): exit 0, profiles stored over HTTPS with its token (service $svcs: $n heap profile(s))"
		else
			fail "profd scrape (the TLS overlay's args) --once: profiles stored" "exit $rc, services '$svcs', $n heap; $(head -c 300 "$T/tlsonce.err")"
		fi
		# controls: without the token (401), without the CA (the system's do not know it)
		mapfile -t b < <(printf '%s\n' "${a[@]}" | awk 'p { p = 0; next } $0 == "--token-file" { p = 1; next } { print }')
		mapfile -t c < <(printf '%s\n' "${a[@]}" | awk 'p { p = 0; next } $0 == "--collector-cacert" { p = 1; next } { print }')
		rb=0 rcc=0
		timeout 60 "$PROFD" "${b[@]}" --once --types heap >"$T/tlsonce2.out" 2>"$T/tlsonce2.err" || rb=$?
		timeout 60 "$PROFD" "${c[@]}" --once --types heap >"$T/tlsonce3.out" 2>"$T/tlsonce3.err" || rcc=$?
		if [ "$rb" = 1 ] && grep -q '401' "$T/tlsonce2.err" && [ "$rcc" = 1 ] && grep -qi 'certificate' "$T/tlsonce3.err"; then
			ok "control: the TLS scraper without --token-file is refused (401, exit 1), without --collector-cacert cannot verify (exit 1)"
		else
			fail "control: the TLS scraper without its token or CA" "exit $rb: $(grep -m1 -i 'refused\|401\|error' "$T/tlsonce2.err" | head -c 200); exit $rcc: $(grep -m1 -i 'certif\|error' "$T/tlsonce3.err" | head -c 200)"
		fi
	else
		fail "profd ${a[*]}: starts" "$(head -c 600 "$T/tls.log")"
	fi
	if [ -n "$TLS_PID" ]; then
		kill -TERM "$TLS_PID"
		rc=0
		wait "$TLS_PID" || rc=$?
		TLS_PID=''
		expect "profd serve (the TLS overlay's args): exit 0 on SIGTERM" 0 "$rc"
	fi
fi

# The ClickHouse layout: the collector's args, twice (two pods of the Deployment), on
# one real ClickHouse (Debian's 18.16, tests/e2e/clickhouse.sh) given what the example
# server's entrypoint creates in the official image: the user CLICKHOUSE_USER with the
# password of the Secret key CLICKHOUSE_PASSWORD names (byte for byte, as the env
# variable has it), the database CLICKHOUSE_DB. Only the URL's host:port is local; the
# password file is the Secret as the kubelet mounts it, the tokens the init container's
# copy. A real goapp heap profile posted to the first is listed and fetched from the
# second; a wrong password stops the start; ClickHouse stopped: readiness 503, liveness 200.
json=$(cargs clickhouse:Deployment/profd/profd)
# shellcheck disable=SC2154 # CH_HTTP_deploy: set by ch_start
if [ -n "$json" ]; then
	# shellcheck source=clickhouse.sh
	source "$(dirname "$0")/clickhouse.sh"
	sts='($all[] | select(.kind == "StatefulSet" and .metadata.name == "clickhouse"))'
	CHENV="$sts"'.spec.template.spec.containers[0].env as $e | def v($n): first($e[] | select(.name == $n)) // {};'
	if ! ch_available; then
		ok "clickhouse layout: two collectors with the manifest's args on one ClickHouse # SKIP clickhouse-server not installed"
	else
		chuser=$(q clickhouse "$CHENV"' v("CLICKHOUSE_USER").value')
		chdb=$(q clickhouse "$CHENV"' v("CLICKHOUSE_DB").value')
		# (the password byte for byte: base64 -d of the Secret's data, as the kubelet decodes it)
		chpw64=$(q clickhouse "$CHENV"' v("CLICKHOUSE_PASSWORD").valueFrom.secretKeyRef as $r
			| first($all[] | select(.kind == "Secret" and .metadata.name == $r.name)).data[$r.key]')
		mkdir -p "$T/ch-deploy/users.d"
		{
			printf '<?xml version="1.0"?>\n<yandex><users><%s><password><![CDATA[' "$chuser"
			printf %s "$chpw64" | base64 -d
			printf ']]></password><networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota></%s></users></yandex>\n' "$chuser"
		} >"$T/ch-deploy/users.d/profd-user.xml"
		: >"$T/ch-start.err"
		if [ -z "$chpw64" ] || [ "$chpw64" = null ]; then
			echo "no password: CLICKHOUSE_PASSWORD names no Secret key of the layout" >"$T/ch-start.err"
		fi
		if [ ! -s "$T/ch-start.err" ] && [[ $chuser =~ ^[A-Za-z0-9_]+$ ]] && [[ $chdb =~ ^[A-Za-z0-9_]+$ ]] && ch_start deploy 2>"$T/ch-start.err" &&
			ch_q deploy "CREATE DATABASE $chdb" >/dev/null 2>>"$T/ch-start.err"; then
			ok "setup: ClickHouse $(ch_q deploy 'SELECT version()' 2>/dev/null) on 127.0.0.1:$CH_HTTP_deploy with what the example server's entrypoint creates: user $chuser (password: its CLICKHOUSE_PASSWORD's Secret key), CREATE DATABASE $chdb"
			materialize clickhouse Deployment/profd "$FS/clickhouse/profd"
			mapfile -t a < <(local_args "$json" "" "$FS/clickhouse/profd" "" "127.0.0.1:$CH_HTTP_deploy")
			# shellcheck disable=SC2086 # uid gid fsGroup
			user_prefix $POD_UID
			: >"$T/chserve-A.log"
			: >"$T/chserve-B.log"
			"${UP[@]}" "$PROFD" "${a[@]}" 2>"$T/chserve-A.log" &
			CHA_PID=$!
			"${UP[@]}" "$PROFD" "${a[@]}" 2>"$T/chserve-B.log" &
			CHB_PID=$!
			pa=$(serve_port "$T/chserve-A.log" "$CHA_PID")
			pb=$(serve_port "$T/chserve-B.log" "$CHB_PID")
			if [ -n "$pa" ] && [ -n "$pb" ]; then
				expect "profd ${a[*]}${UP:+ (as uid ${POD_UID%% *})}, twice (two pods): both start on the one ClickHouse, their probe paths answer 200" \
					" /healthz=200 /readyz=200 | /healthz=200 /readyz=200" \
					"$(probe_codes "$pa" clickhouse Deployment/profd 127.0.0.1) |$(probe_codes "$pb" clickhouse Deployment/profd 127.0.0.1)"
				A=http://127.0.0.1:$pa B=http://127.0.0.1:$pb
				if [ "$TPORT" = 1 ]; then
					ok "clickhouse layout: a profile posted to one collector, read from the other # SKIP goapp not built"
				elif curl -sS --max-time 10 -o "$T/ch-heap.pb.gz" "http://127.0.0.1:$TPORT/debug/pprof/heap" 2>"$T/err"; then
					id=$(curl -sS --max-time 20 -H "Authorization: Bearer $TOK_SCRAPER" --data-binary @"$T/ch-heap.pb.gz" \
						"$A/api/0/profiles?service=deploy-test&type=heap" | jq -r '.body.id // empty' 2>/dev/null)
					listed=$(curl -sS --max-time 10 -H "Authorization: Bearer $TOK_READ" \
						"$B/api/0/profiles?service=deploy-test&type=heap&from=now-1h&to=now" | jq -r '.body[].id' 2>/dev/null | tr '\n' ' ')
					code=$(curl -sS --max-time 10 -o "$T/ch-got.pb.gz" -w '%{http_code}' -H "Authorization: Bearer $TOK_READ" "$B/api/0/profiles/${id:-none}")
					how="gzip -t of the fetched file"
					same=$(gzip -t "$T/ch-got.pb.gz" 2>/dev/null && echo yes)
					if [ -n "$same" ] && command -v go >/dev/null 2>&1; then
						how="go tool pprof -top of both equal"
						topn() { go_pprof -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$@" | tail -n +2; }
						topn "$T/ch-heap.pb.gz" >"$T/ch-want.top"
						topn "$T/ch-got.pb.gz" >"$T/ch-got.top"
						{ [ -s "$T/ch-want.top" ] && cmp -s "$T/ch-want.top" "$T/ch-got.top"; } || same=''
					fi
					if [ -n "$id" ] && [[ " $listed" == *" $id "* ]] && [ "$code" = 200 ] && [ -n "$same" ]; then
						ok "clickhouse layout: a real goapp heap profile posted to collector A (the scraper's token) is listed and fetched from collector B (a read token): $how"
					else
						fail "clickhouse layout: a profile posted to A, listed and fetched from B" "id '$id', B lists '$listed', GET $code, same '${same:-no}' ($how); $(tail -n 3 "$T/chserve-A.log" "$T/chserve-B.log" | head -c 400)"
					fi
				else
					fail "clickhouse layout: a heap profile of goapp" "$(head -c 300 "$T/err")"
				fi
				# control: the same args with a wrong password do not start
				printf 'not-the-password' >"$T/ch-wrong-pw"
				mapfile -t w < <(printf '%s\n' "${a[@]}" | awk -v f="$T/ch-wrong-pw" 'p { print f; p = 0; next } $0 == "--store-password-file" { p = 1 } { print }')
				expect_exit "control: the same args with a wrong password file: exit 1 with ClickHouse's refusal (the pod would not start)" \
					1 'Wrong password|Authentication failed' timeout 20 "$PROFD" "${w[@]}"
				# ClickHouse stopped: the readiness probe's path fails (out of the Service), the liveness
				# probe's path does not (no restarts while ClickHouse is away)
				rp=$(q clickhouse "$dep.spec.template.spec.containers[0].readinessProbe.httpGet.path")
				lp=$(q clickhouse "$dep.spec.template.spec.containers[0].livenessProbe.httpGet.path")
				ch_stop deploy
				code=000
				for _ in $(seq 1 50); do
					code=$(curl -s -o "$T/ch-ready.txt" -w '%{http_code}' --max-time 5 "$A$rp")
					[ "$code" = 503 ] && break
					sleep 0.2
				done
				expect "clickhouse layout: ClickHouse stopped: readiness ($rp) 503 naming ClickHouse on both, liveness ($lp) 200 on both (out of the Service, not restarted)" \
					"503 ClickHouse 503 | 200 200" \
					"$code $(grep -o -m1 ClickHouse "$T/ch-ready.txt") $(curl_code "$B$rp") | $(curl_code "$A$lp") $(curl_code "$B$lp")"
			else
				fail "profd ${a[*]}, twice: both start" "$(head -c 300 "$T/chserve-A.log"; head -c 300 "$T/chserve-B.log")"
			fi
			rca=0 rcb=0
			kill -TERM "$CHA_PID" "$CHB_PID" 2>/dev/null
			wait "$CHA_PID" || rca=$?
			wait "$CHB_PID" || rcb=$?
			CHA_PID='' CHB_PID=''
			expect "profd serve (the ClickHouse layout's args), both: exit 0 on SIGTERM" "0 0" "$rca $rcb"
		else
			fail "setup: ClickHouse for the clickhouse layout (user '$chuser', database '$chdb')" "$(head -c 600 "$T/ch-start.err")"
		fi
	fi
fi

# ---- monitoring/: ServiceMonitor, PodMonitor, the scraper's Service ---------------------------
# (prometheus-operator's CRDs are not on the test API server: checked on kustomize's output, each
# selector against the labels and each port against the names of what it is to select)
if timeout 30 kubectl kustomize "$DEPLOY/monitoring" >/dev/null 2>"$T/err"; then
	fail "monitoring layout without monitoring/prometheus-token: kustomize fails" "it built"
else
	grep -q 'prometheus-token' "$T/err" && ok "monitoring layout without its token file: kustomize fails naming monitoring/prometheus-token" ||
		fail "monitoring layout: kustomize fails naming the file" "$(head -c 300 "$T/err")"
fi
(umask 077 && printf '%s\n' "$TOK_READ" >"$DEPLOY/monitoring/prometheus-token")
if timeout 30 kubectl kustomize "$DEPLOY/monitoring" >"$T/mon.yaml" 2>"$T/err"; then
	if python3 - "$T/mon.yaml" "$TOK_READ" >"$T/mon.out" 2>&1 <<'EOF'; then ok "monitoring layout: $(cat "$T/mon.out")"; else fail "monitoring layout" "$(head -c 800 "$T/mon.out")"; fi
import base64, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
def sub(sel, labels): return all(labels.get(k) == v for k, v in sel.items())
errs = []
svc, sm = by[("Service", "profd")], by[("ServiceMonitor", "profd")]
if not sub(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]): errs.append("ServiceMonitor selects no collector Service")
ports = {p["name"] for p in svc["spec"]["ports"]}
for e in sm["spec"]["endpoints"]:
    if e["port"] not in ports: errs.append("ServiceMonitor port %s not in the Service" % e["port"])
paths = sorted(e["path"] for e in sm["spec"]["endpoints"])
if paths != ["/metrics", "/metrics/profiles"]: errs.append("paths %s" % paths)
dep = by[("Deployment", "profd-scraper")]
plabels = dep["spec"]["template"]["metadata"]["labels"]
cports = {p["name"] for c in dep["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
pm = by[("PodMonitor", "profd-scraper")]
if not sub(pm["spec"]["selector"]["matchLabels"], plabels): errs.append("PodMonitor selects no scraper pod")
if any(e["port"] not in cports for e in pm["spec"]["podMetricsEndpoints"]): errs.append("PodMonitor port not a container port")
ss = by[("Service", "profd-scraper-metrics")]
if not sub(ss["spec"]["selector"], plabels) or ss["spec"]["ports"][0]["targetPort"] not in cports: errs.append("scraper Service")
if sub(ss["spec"]["selector"], by[("Deployment", "profd")]["spec"]["template"]["metadata"]["labels"]): errs.append("scraper Service also selects the collector")
sec = by[("Secret", "profd-prometheus-token")]
if base64.b64decode(sec["data"]["token"]).decode().strip() != sys.argv[2]: errs.append("token Secret")
for e in sm["spec"]["endpoints"]:
    if e["authorization"]["credentials"]["name"] != "profd-prometheus-token": errs.append("ServiceMonitor credentials")
if errs: print("; ".join(errs)); sys.exit(1)
print("ServiceMonitor (/metrics, /metrics/profiles with the read token), PodMonitor and the scraper's Service select what they should")
EOF
else
	fail "monitoring layout: kustomize" "$(head -c 400 "$T/err")"
fi

# no sanitizer report from any profd run above (make SANITIZE=1 test)
logs=("$T"/serve.log "$T"/scrape.log "$T"/once.err "$T"/tls.log "$T"/tlsonce*.err "$T"/chserve-*.log)
if grep -l 'Sanitizer\|runtime error' "${logs[@]}" 2>/dev/null | grep -q .; then
	fail "profd runs: no sanitizer report" "$(grep -h -A5 'Sanitizer\|runtime error' "${logs[@]}" 2>/dev/null | head -c 600)"
else
	ok "profd runs: no sanitizer report"
fi
