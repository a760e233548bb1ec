#!/bin/sh
# deps.sh — install the Debian 12 packages profd needs to build, test,
# benchmark and demo. Idempotent: installs only what is missing, and runs
# apt-get update only then. Needs root (or sudo).
set -e
PKGS="build-essential pkg-config clang libclang-rt-14-dev
 libdeflate-dev zlib1g-dev libxxhash-dev libzstd-dev libjansson-dev libcmocka-dev
 libmicrohttpd-dev libcurl4-openssl-dev libsqlite3-dev sqlite3 libyaml-dev
 golang-go golang-github-google-pprof-dev curl time procps ca-certificates"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "deps: all packages present"
	exit 0
fi
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
