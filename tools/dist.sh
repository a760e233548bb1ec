#!/usr/bin/env bash
# dist.sh BUILD OUTDIR — the release archive for linux amd64 (`make dist`):
#   OUTDIR/profd-VERSION-linux-amd64.tar.gz (+ .sha256), holding
#     bin/profd           a static launcher (tools/dist_launcher.c)
#     bin/kubectl-profd   a link to it: the kubectl plugin
#     lib/profd           BUILD/profd itself
#     lib/*.so*           every library it loads (ldd), the dynamic loader
#                         and glibc included: Debian 12's, so the archive
#                         runs on any x86-64 Linux, Debian or not, and in
#                         a root that holds nothing else
#     share/              man pages, bash completion, LICENSE, README, docs
# Not static: Debian's libcurl needs GSSAPI and LDAP, which Debian ships
# as shared libraries only (no .a), and gnutls the same; bundling them with
# their loader gets the same independence from the host.
set -euo pipefail
BUILD=${1:?usage: dist.sh BUILD OUTDIR}
OUT=${2:?usage: dist.sh BUILD OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$BUILD/profd
[ -x "$BIN" ] || { echo "dist: $BIN missing (make)" >&2; exit 1; }
[ "$(uname -m)" = x86_64 ] || { echo "dist: linux amd64 only (this is $(uname -m))" >&2; exit 1; }
VERSION=$("$BIN" --version | awk '{print $2}')
NAME=profd-$VERSION-linux-amd64
D=$OUT/$NAME
rm -rf "$D" "$OUT/$NAME.tar.gz" "$OUT/$NAME.tar.gz.sha256"
mkdir -p "$D/bin" "$D/lib" "$D/share/man/man1" "$D/share/bash-completion/completions" "$D/share/doc/profd"
install -m 0755 "$BIN" "$D/lib/profd"
# every library the binary loads, and the loader (ldd's paths, links followed)
ldd "$BIN" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u | while read -r so; do
	cp -L "$so" "$D/lib/$(basename "$so")"
done
[ -f "$D/lib/ld-linux-x86-64.so.2" ] || { echo "dist: no dynamic loader in ldd's list" >&2; exit 1; }
cc -static -O2 -o "$D/bin/profd" "$ROOT/tools/dist_launcher.c"
strip "$D/bin/profd"
ln -s profd "$D/bin/kubectl-profd"
"$ROOT/tools/man.sh" "$BIN" "$D/share/man/man1"
"$BIN" completion bash >"$D/share/bash-completion/completions/profd"
cp "$ROOT/LICENSE" "$ROOT/README.md" "$D/"
cp "$ROOT"/docs/*.md "$D/share/doc/profd/"
# the archive: reproducible order and owner
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@${SOURCE_DATE_EPOCH:-0}" -C "$OUT" -czf "$OUT/$NAME.tar.gz" "$NAME"
(cd "$OUT" && sha256sum "$NAME.tar.gz" >"$NAME.tar.gz.sha256")
echo "dist: $OUT/$NAME.tar.gz: $(du -b "$OUT/$NAME.tar.gz" | cut -f1) bytes ($(du -sb "$D" | cut -f1) unpacked: $(ls "$D/lib" | grep -c '\.so') libraries); sha256 $(cut -d' ' -f1 "$OUT/$NAME.tar.gz.sha256")"
