#!/usr/bin/env bash
# test_image.sh — the image of the release archive (`make image-dist`, tools/image.sh), built
# with a real engine (podman, or docker when its daemon answers) FROM scratch, run: --version
# names the build's version and commit, it runs as 65532, the tools the Kubernetes manifests
# run besides profd are there (find, install, sh), and `serve` (the image's default command,
# on the host's network) takes an upload and merges it back. Skipped with a visible reason
# when no engine is installed, for sanitizer builds, and when the engine cannot start any
# container on this machine (the reason printed).
# Where the machine refuses podman's defaults (a container without the right to raise
# RLIMIT_NPROC, cgroups v1+v2 "hybrid" that crun refuses), the run is retried without default
# ulimits and with runc and the cgroupfs manager.
# Run: BUILD=build bash tests/e2e/test_image.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_built 1 make "$PROFD"
need_cmds 1 curl readelf
if grep -q '__asan_init' "$PROFD" 2>/dev/null || nm -D "$PROFD" 2>/dev/null | grep -q __asan; then
	ok "image # skip a sanitizer build (the image is of the release archive, a plain build)"
	exit 0
fi
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then ENGINE=docker
elif command -v podman >/dev/null; then ENGINE=podman
else
	ok "image # skip neither podman nor a running docker here (tools/deps.sh installs podman)"
	exit 0
fi
export ENGINE
kill_started_on_exit
TAG=localhost/profd-e2e:$$
cleanup_image() { "$ENGINE" rm -f "profd-e2e-$$" >/dev/null 2>&1; "$ENGINE" rmi -f "$TAG" >/dev/null 2>&1 || true; }
prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
trap "cleanup_image; $prev" EXIT
if ! "$ROOT/tools/image.sh" "$ROOT/$BUILD" "$TAG" >"$T/build.log" 2>&1; then
	fail "image: tools/image.sh" "$(tail -c 600 "$T/build.log")"
	exit 1
fi
ok "$(tail -1 "$T/build.log")"
# how containers start here: the engine's defaults, else (podman) without default ulimits,
# with runc and cgroupfs
RUN=("$ENGINE" run --rm)
if ! "${RUN[@]}" "$TAG" --version >"$T/v" 2>&1; then
	first=$(head -c 300 "$T/v")
	if [ "$ENGINE" = podman ] && command -v runc >/dev/null; then
		printf '[containers]\ndefault_ulimits = []\n' >"$T/containers.conf"
		export CONTAINERS_CONF=$T/containers.conf
		RUN=(podman --runtime runc --cgroup-manager=cgroupfs run --rm)
	fi
	if ! "${RUN[@]}" "$TAG" --version >"$T/v" 2>&1; then
		ok "image # skip $ENGINE cannot start containers on this machine: $first / $(head -c 300 "$T/v")"
		exit 0
	fi
	ok "image: $ENGINE's defaults refused here ($first): run without default ulimits, with runc and cgroupfs"
fi
expect "image: profd --version (the build's version and commit)" "$("$PROFD" --version | sed 's/, built .*//')" "$(sed 's/, built .*//' "$T/v")"
expect "image: runs as the non-root user 65532" "uid=65532(nonroot) gid=65532(nonroot) groups=65532(nonroot)" \
	"$("${RUN[@]}" --entrypoint id "$TAG" 2>&1)"
tools=$("${RUN[@]}" --entrypoint sh "$TAG" -c 'install -d -m 0700 /tmp/x && echo s3cret >/tmp/src && install -m 0600 /tmp/src /tmp/x/tokens &&
	stat -c "%a %u %s" /tmp/x /tmp/x/tokens && find /tmp/x /opt/profd/bin -name tokens -o -name kubectl-profd' 2>&1 | tr '\n' ' ')
expect "image: sh, install -d / -m and find run (the manifests' init container and CronJob), the plugin is there" \
	"700 65532 4096 600 65532 7 /tmp/x/tokens /opt/profd/bin/kubectl-profd " "$tools"
"${RUN[@]}" --network=host --name "profd-e2e-$$" "$TAG" serve --addr 127.0.0.1:0 --data-dir /data --retention 0 \
	>"$T/serve.log" 2>&1 &
SPID=$!
PORT=$(serve_port "$T/serve.log" "$SPID")
up=
[ -n "$PORT" ] && curl -sf -o /dev/null "http://127.0.0.1:$PORT/readyz" && up=1
if [ -z "$up" ]; then
	fail "image: serve (the default command's profd serve)" "$(head -c 600 "$T/serve.log")"
else
	code=$(curl -s -o "$T/post" -w '%{http_code}' --data-binary "@$ROOT/tests/fuzz/corpus/pprof/seed-heap.pb" \
		"http://127.0.0.1:$PORT/api/0/profiles?service=img&type=heap&created_at=$(date +%s)")
	m=$(curl -s -o "$T/merged.pb.gz" -w '%{http_code}' "http://127.0.0.1:$PORT/api/0/profiles/merge?service=img&type=heap&from=now-1h&to=now")
	if [ "$code" = 200 ] && [ "$m" = 200 ] && "$PROFD" pprof info "$T/merged.pb.gz" >/dev/null 2>&1; then
		ok "image: serve in the container: an upload stored in /data, merged back"
	else fail "image: serve" "post $code $(head -c 200 "$T/post"), merge $m"; fi
	"$ENGINE" stop -t 10 "profd-e2e-$$" >/dev/null 2>&1
	wait "$SPID"
	expect "image: serve exits 0 on the engine's SIGTERM" 0 "$?"
fi
