#!/bin/sh
# krew.sh BUILD [URL] — the krew release of this build (`make krew`):
#   BUILD/krew/profd_linux_<arch>.tar.gz   the release archive (tools/dist.sh:
#                                          runs on any x86-64 Linux; reproducible);
#                                          arm64 too if BUILD-arm64/profd is built
#                                          (make dist-arm64)
#   BUILD/krew/profd.yaml                  deploy/krew/profd.yaml with only
#                                          this platform, its uri (URL/<archive>)
#                                          and the archive's sha256
# URL defaults to the manifest's placeholder (https://RELEASE-URL).
set -eu
build=${1:?usage: tools/krew.sh BUILD [URL]}
url=${2:-https://RELEASE-URL}
url=${url%/}
cd "$(dirname "$0")/.."
case $(uname -m) in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) echo "krew.sh: no krew platform for $(uname -m)" >&2; exit 1 ;;
esac
[ "$(uname -s)" = Linux ] || { echo "krew.sh: Linux only" >&2; exit 1; }
[ -x "$build/profd" ] || { echo "krew.sh: $build/profd is not built (run make)" >&2; exit 1; }
out=$build/krew
[ "$arch" = amd64 ] || { echo "krew.sh: the release archive is built on amd64 (tools/dist.sh)" >&2; exit 1; }
version=$("$build/profd" --version | awk '{print $2}')
# the release archives (tools/dist.sh: the binary with its libraries and loader, runs on any
# x86-64 / arm64 Linux) are the krew archives; krew links kubectl-profd to their bin/profd (the
# launcher passes that name on, so the binary knows it is the plugin). arm64 too when
# `make dist-arm64` has cross-built $build-arm64/profd.
tools/dist.sh "$build" "$out/dist" >/dev/null
arches=amd64
if [ -x "$build-arm64/profd" ]; then
	HOST_PROFD=$build/profd tools/dist.sh "$build-arm64" "$out/dist" arm64 >/dev/null
	arches="amd64 arm64"
fi
plat=""
for a in $arches; do
	cp "$out/dist/profd-$version-linux-$a.tar.gz" "$out/profd_linux_$a.tar.gz"
	plat="$plat $a=$(sha256sum "$out/profd_linux_$a.tar.gz" | cut -d' ' -f1)"
done
name=profd_linux_$arch.tar.gz
sum=$(sha256sum "$out/$name" | cut -d' ' -f1)
# the header as is; of the platforms, only those built, each with its uri, sha256 and bin
awk -v plat="$plat" -v url="$url" -v version="$version" '
BEGIN { n = split(plat, kv, " "); for (i = 1; i <= n; i++) { split(kv[i], p, "="); sums[p[1]] = p[2] } }
function flush() { if (blk != "" && keep != "") {
	sub(/uri: [^\n]*/, "uri: " url "/profd_linux_" keep ".tar.gz", blk)
	sub(/sha256: [^\n]*/, "sha256: \"" sums[keep] "\"", blk)
	sub(/bin: [^\n]*/, "bin: profd-" version "-linux-" keep "/bin/profd", blk)
	printf "%s", blk }
	blk = ""; keep = "" }
/^  - selector:/ { flush(); inp = 1 }
!inp { print; next }
$1 == "arch:" && ($2 in sums) { keep = $2 }
{ blk = blk $0 "\n" }
END { flush() }' deploy/krew/profd.yaml >"$out/profd.yaml"
for a in $arches; do
	grep -q "profd_linux_$a.tar.gz" "$out/profd.yaml" || { echo "krew.sh: no linux/$a platform in deploy/krew/profd.yaml" >&2; exit 1; }
done
echo "$out/$name $sum"
echo "$out/profd.yaml"
