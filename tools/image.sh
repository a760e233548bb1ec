#!/usr/bin/env bash
# image.sh BUILD IMAGE:TAG — the image of the release archive (`make image-dist`), built with
# docker or podman FROM scratch: no base image, so nothing is pulled from a registry.
#   /opt/profd/          the release archive (tools/dist.sh: launcher, binary, its libraries
#                        and loader, man pages), /opt/profd/bin on PATH
#   /bin/busybox         Debian's busybox-static, linked as sh, find, ls, cat, ...; and
#   /bin/install         tools/image/install, sh for install -m MODE SRC DST and -d (busybox
#                        has no install): what deploy/kubernetes's pods run besides profd
#                        (the CronJob's clean-up, the collector's init container)
#   /etc/ssl/certs/ca-certificates.crt   this machine's CA bundle (https scrape targets,
#                        ClickHouse with ?secure=1)
#   /etc/passwd, /etc/group  root and nonroot (65532), the user it runs as
#   /data                the default --data-dir, owned by 65532; /tmp (1777)
# ENTRYPOINT profd, CMD serve --addr :10100 --data-dir /data, as deploy/Dockerfile's.
# ENGINE=docker|podman picks the engine (default: docker if its daemon answers, else podman).
set -euo pipefail
BUILD=${1:?usage: image.sh BUILD IMAGE:TAG}
TAG=${2:?usage: image.sh BUILD IMAGE:TAG}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${ENGINE:-}" ]; then
	if command -v docker >/dev/null && docker info >/dev/null 2>&1; then ENGINE=docker
	elif command -v podman >/dev/null; then ENGINE=podman
	else echo "image: neither a running docker nor podman (apt-get install podman)" >&2; exit 1; fi
fi
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ! readelf -l "$BB" 2>/dev/null | grep -q 'Elf file type is EXEC' || readelf -l "$BB" | grep -q INTERP; then
	echo "image: needs a static busybox (apt-get install busybox-static)" >&2
	exit 1
fi
VERSION=$("$BUILD/profd" --version | awk '{print $2}')
"$ROOT/tools/dist.sh" "$BUILD" "$BUILD/dist" >/dev/null
A=$BUILD/dist/profd-$VERSION-linux-amd64.tar.gz
CTX=$(mktemp -d)
trap 'rm -rf "$CTX"' EXIT
R=$CTX/rootfs
mkdir -p "$R/opt" "$R/bin" "$R/etc/ssl/certs" "$R/data" "$R/tmp"
tar xzf "$A" -C "$R/opt"
mv "$R/opt/profd-$VERSION-linux-amd64" "$R/opt/profd"
cp "$BB" "$R/bin/busybox"
for t in sh find ls cat mkdir rm cp mv chmod id env sleep test wc; do ln -s busybox "$R/bin/$t"; done
# Debian's busybox has no install applet: tools/image/install, in sh, does the forms the
# manifests use (install [-m MODE] SRC DST, install -d [-m MODE] DIR...) and refuses others
install -m 0755 "$ROOT/tools/image/install" "$R/bin/install"
[ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/data:/bin/sh\n' >"$R/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$R/etc/group"
chmod 1777 "$R/tmp"
# owners set in the tar (ADD keeps them): /data is the non-root user's
tar --sort=name --numeric-owner --mtime="@${SOURCE_DATE_EPOCH:-0}" -C "$R" --owner=0 --group=0 --exclude=./data -cf "$CTX/rootfs.tar" .
tar --numeric-owner --mtime="@${SOURCE_DATE_EPOCH:-0}" -C "$R" --owner=65532 --group=65532 -rf "$CTX/rootfs.tar" ./data
cat >"$CTX/Containerfile" <<EOF
FROM scratch
ADD rootfs.tar /
ENV PATH=/opt/profd/bin:/bin
USER 65532:65532
EXPOSE 10100 9100
ENTRYPOINT ["profd"]
CMD ["serve", "--addr", ":10100", "--data-dir", "/data"]
EOF
"$ENGINE" build -q -f "$CTX/Containerfile" -t "$TAG" "$CTX" >/dev/null
echo "image: $TAG ($ENGINE, FROM scratch: $(du -b "$CTX/rootfs.tar" | cut -f1) bytes of root file system)"
