#!/usr/bin/env bash
# test_capture.sh — end-to-end tests of `profd capture` run by REAL kubectl as
# the plugin `kubectl profd capture`, against the test API server
# (tests/kubeapi: HTTPS, its own CA, a bearer token, pods and apps/v1
# workloads) whose pod proxy forwards to real Go services (build/goapp) on
# 127.0.0.1, and a real collector (`profd serve`):
#   1. the plugin: `kubectl plugin list` finds kubectl-profd (a link to
#      profd in PATH); --help as the plugin says "kubectl profd capture"
#   2. files: one pod, every type (each file read by go tool pprof, of its
#      type, named <service>-<pod>-<type>-<time>.pb.gz, listed on stdout);
#      deployment/NAME (a Pending pod skipped), a bare workload name (the
#      seed's `kubectl profd capture -n ops influxdb-v2`), statefulset/NAME
#      (profefe.com/path and profefe.com/service honoured), -l, -A -l,
#      --types, --port with a container port name, --service; a second run
#      never overwrites; plain `profd capture` too
#   3. --collector: the printed URLs fetch 200 (go tool pprof reads them);
#      the list shows them with their labels
#   4. faults, each one clear line and a non-zero exit while the other pod
#      of the run is still captured: pod not found, no pod matches (a
#      workload scaled to zero, a selector), pod not annotated and no --port,
#      the proxy's 503 (a closed port), a target that hangs (--timeout),
#      collector down (the profiles kept in files), SIGINT; a pod whose
#      answers hold a secret (an HTML page, a 404 with text): described by
#      kind and size, never echoed
#   5. a terminal: the live table (under script(1)); usage errors (exit 2)
# Every profd stderr is checked for sanitizer reports.
# Run: BUILD=build bash tests/e2e/test_capture.sh   (BUILD=build-san too)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

KUBEAPI=$ROOT/$BUILD/kubeapi
GA=$GOAPP
# Go programs, not sanitized: take them from build/ when $BUILD lacks them or
# has an older one (`make SANITIZE=1` builds profd only)
[ -x "$KUBEAPI" ] && ! [ "$ROOT/build/kubeapi" -nt "$KUBEAPI" ] || KUBEAPI=$ROOT/build/kubeapi
[ -x "$GA" ] && ! [ "$ROOT/build/goapp" -nt "$GA" ] || GA=$ROOT/build/goapp
if ! command -v kubectl >/dev/null 2>&1; then
	ok "capture: kubectl not installed # SKIP"
	exit 0
fi
if ! command -v jq >/dev/null 2>&1; then
	fail "setup: jq" "not installed; the JSON checks need it"
	exit 0
fi
for b in "$KUBEAPI" "$GA" "$PROFD"; do
	if [ ! -x "$b" ]; then
		fail "setup: $b exists" "not built; run: make build/profd build/kubeapi build/goapp"
		exit 0
	fi
done

kill_started_on_exit

# ---- helpers ------------------------------------------------------------------------------

SAN_FILES=()
# ptype FILE: the "Type: X" go tool pprof -top says, or the error
ptype() {
	local out
	if out=$(go_pprof -top "$1"); then
		echo "$out" | sed -n 's/^Type: //p' | head -1
	else
		echo "unreadable: $(echo "$out" | head -1)"
	fi
}
want_type() { # TYPE -> what go tool pprof -top says for it
	case $1 in
	cpu) echo cpu ;; heap) echo inuse_space ;; allocs) echo alloc_space ;; block | mutex) echo delay ;;
	goroutine) echo goroutine ;; threadcreate) echo threadcreate ;;
	esac
}
# check_files NAME DIR PREFIX TYPES: DIR holds exactly PREFIX-<type>-<time>.pb.gz for each of TYPES
# (comma-separated), each a profile of that type for go tool pprof
check_files() {
	local name=$1 dir=$2 prefix=$3 types=$4 t f got='' bad=''
	for t in ${types//,/ }; do
		f=$(find "$dir" -maxdepth 1 -name "$prefix-$t-*.pb.gz" | head -1)
		if [ -z "$f" ]; then
			bad="$bad no $prefix-$t-*.pb.gz;"
			continue
		fi
		[[ $(basename "$f") =~ ^$prefix-$t-[0-9]{8}T[0-9]{6}Z\.pb\.gz$ ]] || bad="$bad bad name $(basename "$f");"
		got=$(ptype "$f")
		[ "$got" = "$(want_type "$t")" ] || bad="$bad $t: $got;"
	done
	local n want
	n=$(find "$dir" -maxdepth 1 -name "$prefix-*.pb.gz" | wc -l)
	want=$(echo "$types" | tr ',' '\n' | wc -l)
	[ "$n" -eq "$want" ] || bad="$bad $n files, want $want;"
	if [ -z "$bad" ]; then ok "$name"; else fail "$name" "$bad $(ls "$dir" | head -20 | tr '\n' ' ')"; fi
}
# run_cap NAME [ARGS...]: kubectl profd capture --kubeconfig K ARGS, stdout/stderr/rc in $T/NAME.{out,err,rc}
run_cap() {
	local name=$1
	shift
	timeout 120 kubectl profd capture --kubeconfig "$K" "$@" >"$T/$name.out" 2>"$T/$name.err"
	echo $? >"$T/$name.rc"
	SAN_FILES+=("$T/$name.err")
}
rc_of() { cat "$T/$1.rc"; }
# one_line NAME CASE REGEX: exactly one stderr line of run CASE matches REGEX
one_line() {
	local n
	n=$(grep -cE -- "$3" "$T/$2.err")
	if [ "$n" -eq 1 ]; then ok "$1"; else fail "$1" "$n lines match /$3/: $(head -c 800 "$T/$2.err")"; fi
}

# ---- setup: goapps, collector, pods, workloads, API server -------------------------------------------

start_goapp a auth
start_goapp b search -pprof-prefix /custom/pprof
start_goapp c ingest
start_goapp d mixed
# shellcheck disable=SC2154 # set by start_goapp
PA=$PORT_a PB=$PORT_b PC=$PORT_c PD=$PORT_d
# a pod whose answers hold a secret: an HTML page (200) under /html/, a 404 with text under /gone/
python3 - >"$T/secret.log" 2>&1 <<'EOF' &
import http.server
PAGES = {"html": (200, "text/html", b"<!DOCTYPE html><html><body>token=SECRET-MARKER-123</body></html>"),
         "gone": (404, "text/plain", b"not here; SECRET-MARKER-123\n")}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        code, ctype, body = PAGES.get(self.path.split("/")[1], (404, "text/plain", b""))
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print("listening on %d" % s.server_address[1], flush=True)
s.serve_forever()
EOF
PS=$(wait_line "$T/secret.log" '^listening on \([0-9]*\)$')
[ -n "$PS" ] || fail "setup: the secret-holding target" "$(cat "$T/secret.log")"

"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data" --retention 0 -q 2>"$T/srv.log" &
sport=$(wait_line "$T/srv.log" '.*listening on port \([0-9][0-9]*\).*')
if [ -z "$sport" ]; then
	fail "setup: collector" "$(cat "$T/srv.log")"
	exit 0
fi
SURL=http://127.0.0.1:$sport
SAN_FILES+=("$T/srv.log")

K=$T/kubeconfig
EN='"profefe.com/enable": "true"'
cat >"$T/pods.json" <<EOF
[
 {"metadata": {"name": "web-7d9f8c6b5-x2x9k", "namespace": "shop",
   "labels": {"app": "web", "version": "1.4.2", "tier": "front", "pod-template-hash": "7d9f8c6b5"},
   "annotations": {$EN, "profefe.com/port": "$PA"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f8c6b5"}]},
  "spec": {"nodeName": "node-1", "containers": [{"name": "istio-proxy", "ports": [{"containerPort": 15090}]},
                                                {"name": "web", "ports": [{"containerPort": $PA}]}]}},
 {"metadata": {"name": "web-7d9f8c6b5-q8wzn", "namespace": "shop",
   "labels": {"app": "web", "tier": "front", "pod-template-hash": "7d9f8c6b5"},
   "annotations": {$EN, "profefe.com/port": "$PC"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f8c6b5"}]},
  "spec": {"nodeName": "node-2"}},
 {"metadata": {"name": "web-7d9f8c6b5-pend1", "namespace": "shop",
   "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5"},
   "annotations": {$EN, "profefe.com/port": "$PA"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f8c6b5"}]},
  "status": {"phase": "Pending"}},
 {"metadata": {"name": "search-0", "namespace": "shop", "labels": {"app": "search", "tier": "back"},
   "annotations": {$EN, "profefe.com/port": "$PB", "profefe.com/path": "/custom/pprof/", "profefe.com/service": "search-svc"},
   "ownerReferences": [{"kind": "StatefulSet", "name": "search"}]}},
 {"metadata": {"name": "plain-1", "namespace": "shop", "labels": {"app": "plain"}},
  "spec": {"containers": [{"name": "main", "ports": [{"name": "http", "containerPort": 8080}, {"name": "debug", "containerPort": $PD}]}]}},
 {"metadata": {"name": "down-0", "namespace": "shop", "labels": {"app": "down"}, "annotations": {"profefe.com/port": "1"}}},
 {"metadata": {"name": "typo-1", "namespace": "shop", "labels": {"app": "typo"}, "annotations": {"profefe.com/enable": "True"}}},
 {"metadata": {"name": "secret-0", "namespace": "shop", "labels": {"app": "secret"},
   "annotations": {"profefe.com/port": "$PS", "profefe.com/path": "/html/debug/pprof"}}},
 {"metadata": {"name": "secret-1", "namespace": "shop", "labels": {"app": "secret"},
   "annotations": {"profefe.com/port": "$PS", "profefe.com/path": "/gone/debug/pprof"}}},
 {"metadata": {"name": "slow-0", "namespace": "shop", "labels": {"app": "slow"}, "annotations": {"profefe.com/port": "$PD"}}},
 {"metadata": {"name": "influxdb-v2-5d8f7b9c4-m2x7q", "namespace": "ops",
   "labels": {"app.kubernetes.io/name": "influxdb", "tier": "back", "pod-template-hash": "5d8f7b9c4"},
   "annotations": {$EN, "profefe.com/port": "$PD"},
   "ownerReferences": [{"kind": "ReplicaSet", "name": "influxdb-v2-5d8f7b9c4"}]}}
]
EOF
cat >"$T/workloads.json" <<EOF
[
 {"kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}}},
 {"kind": "Deployment", "metadata": {"name": "idle", "namespace": "shop"},
  "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "idle"}}}},
 {"kind": "StatefulSet", "metadata": {"name": "search", "namespace": "shop"},
  "spec": {"replicas": 1, "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["search"]}]}}},
 {"kind": "Deployment", "metadata": {"name": "influxdb-v2", "namespace": "ops"},
  "spec": {"replicas": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "influxdb"},
   "matchExpressions": [{"key": "tier", "operator": "Exists"}]}}}
]
EOF

"$KUBEAPI" -kubeconfig "$K" -pods "$T/pods.json" -cert-dir "$T/certs" 2>"$T/kubeapi.log" &
API=$(wait_line "$T/kubeapi.log" '^kubeapi: listening on \(https:.*\)$')
if [ -z "$API" ]; then
	fail "setup: kubeapi" "$(cat "$T/kubeapi.log")"
	exit 0
fi
api() { curl -sS --max-time 10 --cacert "$T/certs/ca.crt" -H "Authorization: Bearer $(cat "$T/certs/token")" "$@"; }
api -X POST --data @"$T/workloads.json" "$API/admin/workloads" >"$T/wl.json"
expect "setup: workloads created" 4 "$(jq length "$T/wl.json" 2>/dev/null)"

# the plugin: kubectl-profd in PATH, a link to the binary under test
mkdir -p "$T/bin"
ln -s "$PROFD" "$T/bin/kubectl-profd"
export PATH="$T/bin:$PATH"
ok "setup: collector $SURL, goapps :$PA :$PB (/custom/pprof) :$PC :$PD, kubeapi $API"

# ---- 1. the plugin ------------------------------------------------------------------------------------

if kubectl plugin list >"$T/plugins.txt" 2>&1; [ -s "$T/plugins.txt" ] && grep -qx "$T/bin/kubectl-profd" "$T/plugins.txt"; then
	ok "kubectl plugin list: shows kubectl-profd"
else
	fail "kubectl plugin list" "$(head -c 600 "$T/plugins.txt")"
fi
if kubectl profd capture --help >"$T/help.txt" 2>&1 && grep -q '^Usage: kubectl profd capture ' "$T/help.txt" &&
	grep -q '^Examples:' "$T/help.txt" && grep -q '^Exit codes:' "$T/help.txt" &&
	grep -q 'kubectl profd capture -n ops influxdb-v2' "$T/help.txt"; then
	ok "kubectl profd capture --help: usage as the plugin, examples, exit codes"
else
	fail "kubectl profd capture --help" "$(head -c 600 "$T/help.txt")"
fi
"$PROFD" capture --help >"$T/help2.txt" 2>&1
grep -q '^Usage: profd capture ' "$T/help2.txt" && ok "profd capture --help: usage as profd" ||
	fail "profd capture --help" "$(head -c 300 "$T/help2.txt")"

# ---- 2. files -------------------------------------------------------------------------------------------

mkdir -p "$T/one"
t0=$SECONDS
run_cap one -n shop web-7d9f8c6b5-x2x9k --duration 1s --output-dir "$T/one"
expect "one pod, all types: exit 0 ($((SECONDS - t0)) s)" 0 "$(rc_of one)"
check_files "one pod: 7 files <service>-<pod>-<type>-<time>.pb.gz, each of its type for go tool pprof" \
	"$T/one" web-web-7d9f8c6b5-x2x9k cpu,heap,allocs,block,mutex,goroutine,threadcreate
expect "one pod: stdout lists the 7 files" "7 7" \
	"$(wc -l <"$T/one.out") $(while read -r f; do [ -f "$f" ] && echo "$f"; done <"$T/one.out" | grep -c "^$T/one/web-web-7d9f8c6b5-x2x9k-")"
grep -q '^shop/web-7d9f8c6b5-x2x9k cpu: ok, .* -> ' "$T/one.err" && grep -q '^7 profile(s) from 1 pod(s) written to ' "$T/one.err" &&
	ok "one pod: a line per profile and a summary on stderr (not a terminal)" || fail "one pod: stderr" "$(cat "$T/one.err")"
if [ -z "$(find "$T/one" -name '.*tmp*')" ]; then ok "one pod: no temporary files left"; else fail "one pod: temp files" "$(ls -a "$T/one")"; fi

# the same again: new names, nothing overwritten
run_cap again -n shop web-7d9f8c6b5-x2x9k --types heap --output-dir "$T/one"
n=$(find "$T/one" -name 'web-web-7d9f8c6b5-x2x9k-heap-*.pb.gz' | wc -l)
expect "a second capture in the same directory: a new file, none overwritten" "0 2" "$(rc_of again) $n"

mkdir -p "$T/deploy"
run_cap deploy -n shop deployment/web --types heap,goroutine --output-dir "$T/deploy"
expect "deployment/web: exit 0" 0 "$(rc_of deploy)"
check_files "deployment/web: heap, goroutine of the first Running pod" "$T/deploy" web-web-7d9f8c6b5-x2x9k heap,goroutine
check_files "deployment/web: heap, goroutine of the second Running pod" "$T/deploy" web-web-7d9f8c6b5-q8wzn heap,goroutine
one_line "deployment/web: the Pending pod is skipped, with one line saying so" deploy \
	'^shop/web-7d9f8c6b5-pend1: skipped \(phase Pending, not Running, chosen by deployment/web\)$'

mkdir -p "$T/bare"
run_cap bare -n ops influxdb-v2 --types heap,cpu --duration 1s --output-dir "$T/bare"
expect "a bare workload name (kubectl profd capture -n ops influxdb-v2): exit 0" 0 "$(rc_of bare)"
check_files "a bare workload name: the Deployment's pod (matchLabels + matchExpressions)" "$T/bare" \
	influxdb-v2-influxdb-v2-5d8f7b9c4-m2x7q heap,cpu

mkdir -p "$T/sts"
run_cap sts -n shop sts/search --types heap --output-dir "$T/sts"
check_files "sts/search: profefe.com/path (/custom/pprof) and profefe.com/service honoured" "$T/sts" search-svc-search-0 heap

mkdir -p "$T/sel"
run_cap sel -n shop -l tier=front --types mutex --output-dir "$T/sel"
expect "-l tier=front: exit 0, the two front pods" "0 2" "$(rc_of sel) $(find "$T/sel" -name 'web-*-mutex-*.pb.gz' | wc -l)"
mkdir -p "$T/all"
run_cap all -A -l tier=back --types goroutine --output-dir "$T/all"
expect "-A -l tier=back: exit 0, pods of two namespaces" "0 search-svc-search-0 influxdb-v2-influxdb-v2-5d8f7b9c4-m2x7q" \
	"$(rc_of all) $(cd "$T/all" && ls | sed 's/-goroutine-.*//' | sort -r | tr '\n' ' ' | sed 's/ $//')"

mkdir -p "$T/port"
run_cap port -n shop pod/plain-1 --port debug --service plain --types cpu,heap,threadcreate --duration 1s --output-dir "$T/port"
expect "--port NAME (a container port name) for a pod without annotations: exit 0" 0 "$(rc_of port)"
check_files "--types cpu,heap,threadcreate --service plain: exactly those" "$T/port" plain-plain-1 cpu,heap,threadcreate

# plain profd, no kubectl; KUBECONFIG from the environment; -n=NS as pflag takes it
mkdir -p "$T/plain"
(cd "$T/plain" && KUBECONFIG=$K "$PROFD" capture -n=shop web-7d9f8c6b5-q8wzn --types allocs >"$T/plainrun.out" 2>"$T/plainrun.err")
rc=$?
SAN_FILES+=("$T/plainrun.err")
expect "profd capture (not the plugin), \$KUBECONFIG, -n=shop, default --output-dir .: exit 0, a relative path on stdout" \
	"0 web-web-7d9f8c6b5-q8wzn-allocs" "$rc $(sed 's/-[0-9]*T[0-9]*Z\.pb\.gz$//' "$T/plainrun.out")"
check_files "profd capture: the file in the current directory" "$T/plain" web-web-7d9f8c6b5-q8wzn allocs

# ---- 3. --collector -----------------------------------------------------------------------------------------

run_cap coll -n shop deploy/web --types cpu,heap --duration 1s --collector "$SURL"
expect "--collector: exit 0, 4 profile URLs on stdout" "0 4" "$(rc_of coll) $(grep -c "^$SURL/api/0/profiles/[0-9a-v]*$" "$T/coll.out")"
bad=''
while read -r u; do
	code=$(curl -sS -o "$T/fetched.pb.gz" -w '%{http_code}' "$u")
	[ "$code" = 200 ] || bad="$bad $u: HTTP $code;"
	t=$(ptype "$T/fetched.pb.gz")
	[ "$t" = cpu ] || [ "$t" = inuse_space ] || bad="$bad $u: $t;"
done <"$T/coll.out"
if [ -z "$bad" ]; then ok "--collector: every printed URL answers 200 with a profile go tool pprof reads"; else fail "--collector: URLs" "$bad"; fi
curl -sS "$SURL/api/0/profiles?service=web&type=heap&from=0&to=now" >"$T/list.json"
# container: the one declaring the port (web, not istio-proxy), else the first ("app", filled in by kubeapi)
expect "--collector: the list shows them with their labels (namespace, pod, container, node, app, version)" \
	"app=web,container=app,namespace=shop,node=node-2,pod=web-7d9f8c6b5-q8wzn app=web,container=web,namespace=shop,node=node-1,pod=web-7d9f8c6b5-x2x9k,version=1.4.2" \
	"$(jq -r '.body[] | .labels | sort_by(.key) | map(.key + "=" + .value) | join(",")' "$T/list.json" | sort | tr '\n' ' ' | sed 's/ $//')"
expect "--collector: ids in the list are the printed ones" \
	"$(grep -o '[0-9a-v]*$' "$T/coll.out" | sort | tr '\n' ' ')" \
	"$(curl -sS "$SURL/api/0/profiles?service=web&from=0&to=now" | jq -r '.body[].id' | sort | tr '\n' ' ')"
run_cap collcum -n shop web-7d9f8c6b5-x2x9k --types allocs --collector "$SURL"
expect "--collector: allocs (cumulative) labelled cumulative=true" true \
	"$(curl -sS "$SURL/api/0/profiles?service=web&type=allocs&from=0&to=now" | jq -r '.body[0].labels | from_entries | .cumulative')"

# ---- 4. faults: one clear line each, a non-zero exit, the other pod still captured ------------------------

fault_case() { # NAME CASE REGEX: exit 1, one line matching REGEX, the good pod's heap file there
	local name=$1 case=$2 re=$3
	expect "$name: exit 1" 1 "$(rc_of "$case")"
	one_line "$name: one clear line" "$case" "$re"
	expect "$name: the other pod still captured" 1 "$(find "$T/f-$case" -name 'web-web-7d9f8c6b5-x2x9k-heap-*.pb.gz' | wc -l)"
}
GOOD=web-7d9f8c6b5-x2x9k
for c in nf nomatch noport proxy503 hang; do mkdir -p "$T/f-$c"; done
run_cap nf -n shop "$GOOD" nope-1 --types heap --output-dir "$T/f-nf"
fault_case "pod not found" nf '^kubectl profd capture: nope-1: no pod, deployment, statefulset or daemonset "nope-1" in namespace shop \(kubectl get'
run_cap nomatch -n shop "$GOOD" deployment/idle --types heap --output-dir "$T/f-nomatch"
fault_case "no pod matches (a deployment scaled to zero)" nomatch \
	'^kubectl profd capture: deployment/idle: no pods match its selector app=idle in namespace shop'
run_cap nomatch2 -n shop -l app=nothing --types heap --output-dir "$T/f-nomatch"
expect "no pod matches -l: exit 1, one line" "1 1" "$(rc_of nomatch2) $(grep -c 'l app=nothing: no pods match in namespace shop (try another -n, or -A)' "$T/nomatch2.err")"
run_cap nomatch3 -A -l app=nothing --types heap --output-dir "$T/f-nomatch"
expect "no pod matches -A -l: exit 1, one line (no 'try -A' when -A was given)" "1 1" \
	"$(rc_of nomatch3) $(grep -c 'l app=nothing: no pods match in any namespace (kubectl get pods -A --show-labels lists their labels)$' "$T/nomatch3.err")"
run_cap noport -n shop "$GOOD" plain-1 --types heap --output-dir "$T/f-noport"
fault_case "pod not annotated and no --port" noport \
	'^kubectl profd capture: shop/plain-1: not annotated with its pprof port \(profefe.com/port\) and no --port given: give --port'
# a pod the API accepts but capture cannot read (5000 annotations: over the cap of 4096), chosen by
# -l: skipped with a line saying why (the whole list used to fail)
seq -f '"a%g":"x"' 5000 | paste -sd, |
	awk '{print "{\"metadata\":{\"name\":\"huge-0\",\"namespace\":\"shop\",\"labels\":{\"app\":\"huge\"},\"annotations\":{" $0 "}}}"}' >"$T/huge.json"
api -X POST --data @"$T/huge.json" "$API/admin/pods" >/dev/null
run_cap huge -n shop -l app=huge --types heap --output-dir "$T/f-noport"
expect "-l choosing a pod that cannot be read: skipped with why, exit 1 (nothing captured)" "1 1" \
	"$(rc_of huge) $(grep -c "^shop/huge-0: skipped (the API's pod cannot be read (pod list JSON: items\[0\]: metadata.annotations: 5000 entries, over the limit of 4096), chosen by -l app=huge)$" "$T/huge.err")"
run_cap typo -n shop typo-1 --types heap --output-dir "$T/f-noport"
expect "profefe.com/enable \"True\", no port: exit 1, the line says only \"true\" means 6060" "1 1" \
	"$(rc_of typo) $(grep -c '^kubectl profd capture: shop/typo-1: .*profefe.com/enable is "True", not "true" (only "true" means the default port 6060)' "$T/typo.err")"
run_cap proxy503 -n shop "$GOOD" down-0 --output-dir "$T/f-proxy503"
fault_case "proxy error 503 (every type of the pod: one line)" proxy503 \
	'^kubectl profd capture: shop/down-0 \(all types\): pod proxy \(port 1\): HTTP 503 Service Unavailable: error trying to reach service: .*check profefe.com/port or --port\)$'
expect "proxy error 503: the good pod's 7 profiles" 7 "$(find "$T/f-proxy503" -name 'web-*.pb.gz' | wc -l)"
# a pod's answer is described, never echoed (issue 12 item 6)
mkdir -p "$T/f-secret"
run_cap secret -n shop "$GOOD" secret-0 secret-1 --types heap --output-dir "$T/f-secret"
expect "secrets: exit 1, the good pod still captured" "1 1" "$(rc_of secret) $(find "$T/f-secret" -name "web-*-heap-*.pb.gz" | wc -l)"
if grep -q "SECRET-MARKER" "$T/secret.out" "$T/secret.err"; then
	fail "secrets: no pod's body in the output" "$(grep -h SECRET-MARKER "$T/secret.out" "$T/secret.err" | head -3)"
else
	ok "secrets: no pod's body in the output"
fi
one_line "secrets: an HTML page (200) is described with its size" secret \
	'^kubectl profd capture: shop/secret-0 heap: not a pprof profile \(got text/html\): the body is an HTML page \(64 bytes\) — a login or error page.* \(is port [0-9]+ the pprof port\?'
one_line "secrets: a 404 from the pod is described with its size" secret \
	'^kubectl profd capture: shop/secret-1 heap: pod proxy \(port [0-9]+\): HTTP 404 from the pod, with text \(28 bytes\) \(no pprof handler at /gone/debug/pprof/heap'
api -X POST "$API/admin/fault?code=0&delay=60s&count=10&match=/pods/slow-0:" >/dev/null
t0=$SECONDS
run_cap hang -n shop "$GOOD" slow-0 --types heap --timeout 2s --output-dir "$T/f-hang"
api -X DELETE "$API/admin/fault" >/dev/null
fault_case "target timeout (a proxy that hangs, --timeout 2s)" hang \
	'^kubectl profd capture: shop/slow-0 heap: no answer within 2s \(--timeout 2s\): the pod is slow or hanging \(try a longer --timeout\)$'
[ $((SECONDS - t0)) -lt 15 ] && ok "target timeout: the run ends after --timeout ($((SECONDS - t0)) s)" ||
	fail "target timeout: duration" "$((SECONDS - t0)) s"

mkdir -p "$T/f-coll"
(cd "$T/f-coll" && timeout 60 kubectl profd capture --kubeconfig "$K" -n shop "$GOOD" --types heap,goroutine \
	--collector http://127.0.0.1:1 >"$T/colldown.out" 2>"$T/colldown.err")
echo $? >"$T/colldown.rc"
SAN_FILES+=("$T/colldown.err")
expect "collector down: exit 1" 1 "$(rc_of colldown)"
one_line "collector down: one clear line" colldown \
	'^kubectl profd capture: collector not reachable: GET http://127.0.0.1:1/api/0/version: .*\(is it running\? check --collector\); the profiles go to files in the current directory instead$'
check_files "collector down: the profiles kept in files in the current directory" "$T/f-coll" web-web-7d9f8c6b5-x2x9k heap,goroutine

# the collector goes away during the run: each profile kept in a file, said once per pod
"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data2" --retention 0 -q 2>"$T/srv2.log" &
SRV2=$!
sport2=$(wait_line "$T/srv2.log" '.*listening on port \([0-9][0-9]*\).*')
mkdir -p "$T/f-coll2"
(cd "$T/f-coll2" && timeout 60 kubectl profd capture --kubeconfig "$K" -n shop "$GOOD" --types cpu,heap --duration 3s \
	--collector "http://127.0.0.1:$sport2" >"$T/colldies.out" 2>"$T/colldies.err") &
CAP=$!
# killed once the heap is stored (the cpu profile, 3 s, still on its way): a fixed
# sleep lost the race on a loaded machine (kubectl and the plugin not yet started)
for ((k = 0; k < 400; k++)); do
	curl -s --max-time 2 "http://127.0.0.1:$sport2/metrics" | grep -q '^profd_profiles_ingested_total{type="heap"} 1$' && break
	sleep 0.05
done
kill "$SRV2"
wait "$SRV2" 2>/dev/null
wait "$CAP"
echo $? >"$T/colldies.rc"
SAN_FILES+=("$T/colldies.err")
expect "collector dies mid-run: exit 1, the heap stored, the cpu profile kept in a file" "1 1 1" \
	"$(rc_of colldies) $(grep -c "^http://127.0.0.1:$sport2/api/0/profiles/" "$T/colldies.out") $(find "$T/f-coll2" -name 'web-web-7d9f8c6b5-x2x9k-cpu-*.pb.gz' | wc -l)"
one_line "collector dies mid-run: one line naming the pod, the type, the file kept" colldies \
	"^kubectl profd capture: shop/$GOOD cpu: collector http://127.0.0.1:$sport2: .*; saved to web-web-7d9f8c6b5-x2x9k-cpu-[0-9TZ]*\.pb\.gz instead$"

# a collector that refuses with control characters in its error: shown escaped, on one line
canned esc 'GET /' 200 '{"code":200,"body":{"version":"x"}}' 'POST /' 400 '{"code":400,"error":"bad \\u001b[2J thing\\nforged"}'
mkdir -p "$T/f-esc"
(cd "$T/f-esc" && timeout 60 kubectl profd capture --kubeconfig "$K" -n shop "$GOOD" --types heap \
	--collector "$CANNED_URL" >"$T/collesc.out" 2>"$T/collesc.err")
echo $? >"$T/collesc.rc"
SAN_FILES+=("$T/collesc.err")
kill "$CANNED_PID" 2>/dev/null
wait "$CANNED_PID" 2>/dev/null
expect "a collector's refusal with control characters: exit 1, no ESC on the terminal" "1 0" \
	"$(rc_of collesc) $(grep -c $'\e' "$T/collesc.err")"
one_line "a collector's refusal with control characters: its text escaped on the pod's line" collesc \
	'refused the profile: HTTP 400: bad \\x1b\[2J thing\\nforged; saved to '

# SIGINT during a long CPU profile: out at once, what was captured is kept
mkdir -p "$T/int"
timeout 60 "$PROFD" capture --kubeconfig "$K" -n shop "$GOOD" --types cpu,heap --duration 30s --output-dir "$T/int" \
	>"$T/int.out" 2>"$T/int.err" &
CAP=$!
sleep 1.5
t0=$(date +%s%N)
kill -INT "$CAP"
wait "$CAP"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
SAN_FILES+=("$T/int.err")
expect "SIGINT: exit 1 within 2 s, the heap kept, cpu interrupted" "1 yes 1 1" \
	"$rc $([ "$ms" -lt 2000 ] && echo yes || echo "${ms}ms") $(find "$T/int" -name '*-heap-*.pb.gz' | wc -l) $(grep -c "shop/$GOOD cpu: interrupted$" "$T/int.err")"

# ---- 5. a terminal; usage ---------------------------------------------------------------------------------

if command -v script >/dev/null 2>&1; then
	mkdir -p "$T/tty"
	COLUMNS=100 LINES=30 script -qec "kubectl profd capture --kubeconfig $K -n shop deploy/web --duration 1s --output-dir $T/tty" \
		/dev/null >"$T/tty.txt" 2>&1
	rc=$?
	SAN_FILES+=("$T/tty.txt")
	tr -d '\r' <"$T/tty.txt" | sed 's/\x1b\[[0-9]*[AK]//g' >"$T/tty.clean"
	if [ "$rc" = 0 ] && grep -Eq '^POD +CPU +HEAP +ALLOCS +BLOCK +MUTEX +GOROUTINE +THREADS' "$T/tty.clean" &&
		grep -Eq '^web-7d9f8c6b5-x2x9k +ok +ok +ok +ok +ok +ok +ok' "$T/tty.clean" &&
		grep -Eq '^web-7d9f8c6b5-q8wzn +- +- +- +- +- +- +-' "$T/tty.clean" && grep -q $'\x1b\[3A' "$T/tty.txt" &&
		[ "$(find "$T/tty" -name '*.pb.gz' | wc -l)" = 14 ]; then
		ok "a terminal: a live table (row per pod, column per type), redrawn in place"
	else
		fail "a terminal: live table" "rc=$rc $(head -c 1200 "$T/tty.clean")"
	fi
else
	ok "a terminal: script(1) not installed # SKIP"
fi

usage() { # NAME REGEX ARGS...
	local name=$1 re=$2
	shift 2
	expect_exit "usage: $name" 2 "$re" timeout 20 kubectl profd capture --kubeconfig "$K" "$@"
}
usage "nothing chosen" 'which pods\? give a pod, a workload \(deployment/NAME\) or -l SELECTOR'
usage "-A with a name" 'cannot be named across all namespaces' -A web
usage "-A without -l" '-A needs -l' -A
usage "--output-dir and --collector" 'choose one' web --output-dir /tmp --collector http://x
usage "names with -l" '-l cannot be combined with pod or workload names' web -l app=web
usage "--types bad" 'unknown profile type "trace"' web --types cpu,trace
usage "--duration 1.5s" 'whole seconds' web --duration 1.5s
usage "--collector not a URL" 'want an http:// or https:// URL' web --collector localhost:10100
expect_exit "kubeconfig missing: exit 1, names the file" 1 'nope.yaml' \
	timeout 20 kubectl profd capture --kubeconfig "$T/nope.yaml" -n shop web
expect_exit "--output-dir missing: exit 1" 1 'not a directory' \
	timeout 20 kubectl profd capture --kubeconfig "$K" -n shop web --output-dir "$T/none"

# ---- the rest ----------------------------------------------------------------------------------------------

if grep -l "Sanitizer\|runtime error" "${SAN_FILES[@]}" >/dev/null 2>&1; then
	fail "no sanitizer report" "$(grep -h -A5 "Sanitizer\|runtime error" "${SAN_FILES[@]}" | head -20)"
else
	ok "no sanitizer report in any profd run (${#SAN_FILES[@]} checked)"
fi
if [ "$(grep -cv '^kubeapi: listening on ' "$T/kubeapi.log")" -eq 0 ]; then
	ok "kubeapi: nothing else on stderr"
else
	fail "kubeapi: stderr" "$(grep -v '^kubeapi: listening on ' "$T/kubeapi.log" | head -c 600)"
fi
