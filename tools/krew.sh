#!/bin/sh
# krew.sh BUILD [URL] — the krew release of this build (`make krew`):
#   BUILD/krew/profd_linux_<arch>.tar.gz   the release archive (tools/dist.sh:
#                                          runs on any x86-64 Linux; reproducible)
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
name=profd_linux_$arch.tar.gz
[ "$arch" = amd64 ] || { echo "krew.sh: the release archive is built for amd64 only (tools/dist.sh)" >&2; exit 1; }
# the release archive (tools/dist.sh: the binary with its libraries and loader, runs on any
# x86-64 Linux) is the krew archive; krew links kubectl-profd to its bin/profd (the launcher
# passes that name on, so the binary knows it is the plugin)
tools/dist.sh "$build" "$out/dist" >/dev/null
version=$("$build/profd" --version | awk '{print $2}')
cp "$out/dist/profd-$version-linux-amd64.tar.gz" "$out/$name"
bin=profd-$version-linux-amd64/bin/profd
sum=$(sha256sum "$out/$name" | cut -d' ' -f1)
# the header as is; of the platforms, only this arch's block, with uri and sha256 set
awk -v arch="$arch" -v uri="$url/$name" -v sum="$sum" -v bin="$bin" '
function flush() { if (blk != "" && keep) printf "%s", blk; blk = ""; keep = 0 }
/^  - selector:/ { flush(); inp = 1 }
!inp { print; next }
/^    uri:/ { sub(/uri: .*/, "uri: " uri) }
/^    sha256:/ { sub(/sha256: .*/, "sha256: \"" sum "\"") }
/^    bin:/ { sub(/bin: .*/, "bin: " bin) }
$1 == "arch:" && $2 == arch { keep = 1 }
{ blk = blk $0 "\n" }
END { flush() }' deploy/krew/profd.yaml >"$out/profd.yaml"
grep -q "$sum" "$out/profd.yaml" || { echo "krew.sh: no linux/$arch platform in deploy/krew/profd.yaml" >&2; exit 1; }
echo "$out/$name $sum"
echo "$out/profd.yaml"
