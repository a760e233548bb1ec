#!/bin/sh
# deps.sh — install the Debian 12 packages profd needs to build, test,
# benchmark and demo. Idempotent: installs only what is missing, and runs
# apt-get update only then. Needs root (or sudo).
set -e
# golang-github-influxdata-influxdb1-client-dev is InfluxDB's line protocol parser: the tests
# check profd's Influx output with it. They check its Prometheus output with promtool, which
# Debian ships only inside the prometheus server package: installing that would start a
# Prometheus daemon on the machine, so only promtool is taken out of the package (below).
PKGS="build-essential pkg-config clang libclang-rt-14-dev
 libdeflate-dev zlib1g-dev libxxhash-dev libzstd-dev libjansson-dev libcmocka-dev
 libmicrohttpd-dev libgnutls28-dev libcurl4-openssl-dev libsqlite3-dev sqlite3 libyaml-dev libpcre2-dev openssl
 golang-go golang-github-google-pprof-dev curl time procps ca-certificates python3-yaml jq
 golang-github-influxdata-influxdb1-client-dev"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

# promtool alone, from Debian's prometheus package, into /usr/local/bin.
install_promtool() {
	command -v promtool >/dev/null 2>&1 && return 0
	echo "deps: installing promtool (from Debian's prometheus package, without the server)"
	d=$(mktemp -d) && chmod 755 "$d"
	(cd "$d" && apt-get download prometheus >/dev/null 2>&1) ||
		{ $SUDO apt-get update -qq && (cd "$d" && apt-get download prometheus >/dev/null); }
	dpkg-deb --fsys-tarfile "$d"/prometheus_*.deb | tar -x -C "$d" ./usr/bin/promtool
	$SUDO install -m 0755 "$d/usr/bin/promtool" /usr/local/bin/promtool
	rm -rf "$d"
}

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
	install_promtool
	echo "deps: all packages present"
	exit 0
fi
echo "deps: installing$missing"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
install_promtool
