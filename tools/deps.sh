#!/bin/sh
# deps.sh — install the Debian 12 packages profd needs to build, test,
# benchmark and demo. Idempotent: installs only what is missing, and runs
# apt-get update only then. Needs root (or sudo).
set -e
# golang-github-influxdata-influxdb1-client-dev is InfluxDB's line protocol parser: the tests
# check profd's Influx output with it. They check its Prometheus output with promtool, which
# Debian ships only inside the prometheus server package: installing that would start a
# Prometheus daemon on the machine, so only promtool is taken out of the package (below).
# (promtool and, for the tests that scrape with a real Prometheus, the prometheus binary.)
# clickhouse-server, clickhouse-client (ClickHouse 18.16.1) and zookeeper (3.8, pulls Java 17)
# are for the ClickHouse store's tests, which start their own servers on free loopback ports
# (tests/e2e/clickhouse.sh); nothing uses the packages' own service. zookeeper ships none;
# clickhouse-server's is started by its postinst: in a container policy-rc.d denies that
# ("invoke-rc.d: policy-rc.d denied execution of start.", harmless), and on a machine run by
# systemd the unit is masked before the install (below) so that no ClickHouse is left
# listening on :9000 (`systemctl unmask clickhouse-server` to use it as a service).
PKGS="build-essential pkg-config clang libclang-rt-14-dev
 libdeflate-dev zlib1g-dev libxxhash-dev libzstd-dev libjansson-dev libcmocka-dev
 libmicrohttpd-dev libgnutls28-dev libcurl4-openssl-dev libsqlite3-dev sqlite3 libyaml-dev libpcre2-dev openssl
 golang-go golang-github-google-pprof-dev curl time procps ca-certificates python3-yaml jq
 golang-github-influxdata-influxdb1-client-dev
 clickhouse-server clickhouse-client zookeeper
 chromium"
# The web UI's browser tests drive Debian's chromium with playwright-core, an npm package
# pinned in tests/ui/package-lock.json and installed there by `npm ci` (ui_deps below). Node.js
# and npm come from Debian unless the machine already has them.
command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

# promtool and the prometheus binary alone, from Debian's prometheus package, into
# /usr/local/bin (the tests start their own Prometheus on a loopback port; the package's
# service is never installed).
install_promtool() {
	command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && return 0
	echo "deps: installing promtool and prometheus (from Debian's prometheus package, without its service)"
	d=$(mktemp -d) && chmod 755 "$d"
	(cd "$d" && apt-get download prometheus >/dev/null 2>&1) ||
		{ $SUDO apt-get update -qq && (cd "$d" && apt-get download prometheus >/dev/null); }
	dpkg-deb --fsys-tarfile "$d"/prometheus_*.deb | tar -x -C "$d" ./usr/bin/promtool ./usr/bin/prometheus
	command -v promtool >/dev/null 2>&1 || $SUDO install -m 0755 "$d/usr/bin/promtool" /usr/local/bin/promtool
	command -v prometheus >/dev/null 2>&1 || $SUDO install -m 0755 "$d/usr/bin/prometheus" /usr/local/bin/prometheus
	rm -rf "$d"
}

# tests/ui's node_modules, as its lockfile pins them (again only when the lockfile changed).
ui_deps() {
	ui=$(cd "$(dirname "$0")/../tests/ui" && pwd)
	cmp -s "$ui/package-lock.json" "$ui/node_modules/.profd-lock" 2>/dev/null && return 0
	echo "deps: npm ci in tests/ui (playwright-core, pinned by its package-lock.json)"
	(cd "$ui" && npm ci --no-audit --no-fund --loglevel=error) &&
		cp "$ui/package-lock.json" "$ui/node_modules/.profd-lock"
}

# `deps.sh release`: what the release targets and their tests need (`make test` installs
# them): for `make dist-arm64`, Debian's cross compiler, the :arm64 -dev packages of the
# libraries above (multiarch: beside the amd64 ones) and qemu-user-static, which runs the arm64
# archive here (adds the arm64 architecture to dpkg); for `make image-dist`, podman (no daemon;
# runc for machines where crun refuses the cgroup layout) and busybox-static (the image's
# shell and tools).
if [ "${1:-}" = release ]; then
	A64="crossbuild-essential-arm64 qemu-user-static libdeflate-dev:arm64 libxxhash-dev:arm64 libsqlite3-dev:arm64
	 libzstd-dev:arm64 libjansson-dev:arm64 libmicrohttpd-dev:arm64 libcurl4-openssl-dev:arm64 libyaml-dev:arm64
	 libgnutls28-dev:arm64 libpcre2-dev:arm64 podman runc busybox-static"
	missing=""
	for p in $A64; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
	done
	[ -z "$missing" ] && { echo "deps: release packages present (arm64 cross build, podman)"; exit 0; }
	echo "deps: installing$missing"
	dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $missing
	exit 0
fi

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
	install_promtool
	ui_deps
	echo "deps: all packages present"
	exit 0
fi
echo "deps: installing$missing"
case " $missing " in
*" clickhouse-server "*)
	if [ -d /run/systemd/system ] && [ ! -e /lib/systemd/system/clickhouse-server.service ]; then
		echo "deps: masking clickhouse-server.service (the tests start their own servers)"
		$SUDO systemctl mask clickhouse-server.service
	fi
	;;
esac
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
install_promtool
ui_deps
