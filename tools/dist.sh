#!/usr/bin/env bash
# dist.sh BUILD OUTDIR [ARCH] — the release archive for linux ARCH (amd64,
# the default: `make dist`; arm64: `make dist-arm64`, cross-built):
#   OUTDIR/profd-VERSION-linux-ARCH.tar.gz (+ .sha256), holding
#     bin/profd           a static launcher (tools/dist_launcher.c)
#     bin/kubectl-profd   a link to it: the kubectl plugin
#     lib/profd           BUILD/profd itself
#     lib/*.so*           every library it loads (ldd, and those it dlopens:
#                         lib/util/pddl.h), the dynamic loader
#                         and glibc included: Debian 12's, so the archive
#                         runs on any x86-64 (arm64) Linux, Debian or not,
#                         and in a root that holds nothing else
#     share/              man pages, bash completion, LICENSE, README, docs
# Not static: Debian's libcurl needs GSSAPI and LDAP, which Debian ships
# as shared libraries only (no .a), and gnutls the same; bundling them with
# their loader gets the same independence from the host.
# arm64: BUILD/profd is the cross-built binary (aarch64-linux-gnu-gcc,
# Debian's crossbuild-essential-arm64 and the :arm64 -dev packages); its
# libraries come from Debian's arm64 multiarch directories, found by
# following DT_NEEDED with readelf (ldd cannot run a foreign binary), and
# what the binary prints (version, man pages, completion) is printed by
# HOST_PROFD, the same sources built for this machine.
set -euo pipefail
BUILD=${1:?usage: dist.sh BUILD OUTDIR [amd64|arm64]}
OUT=${2:?usage: dist.sh BUILD OUTDIR [amd64|arm64]}
ARCH=${3:-amd64}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$BUILD/profd
[ -x "$BIN" ] || { echo "dist: $BIN missing (make)" >&2; exit 1; }
[ "$(uname -m)" = x86_64 ] || { echo "dist: builds on x86-64 only (this is $(uname -m))" >&2; exit 1; }
case $ARCH in
amd64) TCC=cc STRIP=strip LOADER=ld-linux-x86-64.so.2 MACHINE="X86-64" HOST_PROFD=${HOST_PROFD:-$BIN} ;;
arm64)
	TCC=aarch64-linux-gnu-gcc STRIP=aarch64-linux-gnu-strip LOADER=ld-linux-aarch64.so.1 MACHINE=AArch64
	LIBDIRS="/lib/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu"
	: "${HOST_PROFD:?dist: arm64 needs HOST_PROFD, a profd built for this machine (make dist-arm64 sets it)}"
	command -v "$TCC" >/dev/null || { echo "dist: $TCC missing (apt-get install crossbuild-essential-arm64)" >&2; exit 1; }
	;;
*) echo "dist: unknown ARCH $ARCH (amd64 or arm64)" >&2; exit 2 ;;
esac
readelf -h "$BIN" | grep -q "Machine:.*$MACHINE" || { echo "dist: $BIN is not an $ARCH binary" >&2; exit 1; }
VERSION=$("$HOST_PROFD" --version | awk '{print $2}')
NAME=profd-$VERSION-linux-$ARCH
D=$OUT/$NAME
rm -rf "$D" "$OUT/$NAME.tar.gz" "$OUT/$NAME.tar.gz.sha256"
mkdir -p "$D/bin" "$D/lib" "$D/share/man/man1" "$D/share/bash-completion/completions" "$D/share/doc/profd"
install -m 0755 "$BIN" "$D/lib/profd"
# loaded with dlopen when first used, so not in DT_NEEDED: the sonames of
# lib/util/pddl.c's PD_DL_DEFINE lines (a new loader there is bundled too)
DLOPENED=$(sed -n 's/^PD_DL_DEFINE([a-z0-9_]*, "\([^"]*\)".*/\1/p' "$ROOT/lib/util/pddl.c" | tr '\n' ' ')
[ -n "$DLOPENED" ] || { echo "dist: no PD_DL_DEFINE sonames in $ROOT/lib/util/pddl.c" >&2; exit 1; }
# needed FILE: the shared libraries FILE names (DT_NEEDED)
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*Shared library: \[\(.*\)\]/\1/p'; }
# every library the binary loads, and the loader (links followed)
if [ "$ARCH" = amd64 ]; then
	dl=()
	for so in $DLOPENED; do
		p=$(ldconfig -p | awk -v s="$so" '$1 == s && /x86-64/ && !p {p = $NF} END {print p}')
		[ -n "$p" ] || { echo "dist: $so (loaded by profd when needed) not found by ldconfig" >&2; exit 1; }
		dl+=("$p")
		cp -L "$p" "$D/lib/$so"
	done
	{ ldd "$BIN"; for p in "${dl[@]}"; do ldd "$p"; done; } | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u | while read -r so; do
		cp -L "$so" "$D/lib/$(basename "$so")"
	done
else
	todo="$(needed "$BIN") $DLOPENED"
	while [ -n "$todo" ]; do
		next=""
		for so in $todo; do
			[ -f "$D/lib/$so" ] && continue
			src=""
			for d in $LIBDIRS; do [ -f "$d/$so" ] && { src=$d/$so; break; }; done
			[ -n "$src" ] || { echo "dist: $so (needed by the $ARCH binary) not found in $LIBDIRS" >&2; exit 1; }
			cp -L "$src" "$D/lib/$so"
			next="$next $(needed "$D/lib/$so")"
		done
		todo=$next
	done
	for d in $LIBDIRS; do [ -f "$d/$LOADER" ] && cp -L "$d/$LOADER" "$D/lib/$LOADER" && break; done
fi
[ -f "$D/lib/$LOADER" ] || { echo "dist: no dynamic loader ($LOADER) among the libraries" >&2; exit 1; }
"$TCC" -static -O2 -DPD_LOADER="\"$LOADER\"" -o "$D/bin/profd" "$ROOT/tools/dist_launcher.c"
"$STRIP" "$D/bin/profd"
ln -s profd "$D/bin/kubectl-profd"
"$ROOT/tools/man.sh" "$HOST_PROFD" "$D/share/man/man1"
"$HOST_PROFD" completion bash >"$D/share/bash-completion/completions/profd"
cp "$ROOT/LICENSE" "$ROOT/README.md" "$D/"
cp "$ROOT"/docs/*.md "$D/share/doc/profd/"
# the archive: reproducible order and owner
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@${SOURCE_DATE_EPOCH:-0}" -C "$OUT" -czf "$OUT/$NAME.tar.gz" "$NAME"
(cd "$OUT" && sha256sum "$NAME.tar.gz" >"$NAME.tar.gz.sha256")
echo "dist: $OUT/$NAME.tar.gz: $(du -b "$OUT/$NAME.tar.gz" | cut -f1) bytes ($(du -sb "$D" | cut -f1) unpacked: $(ls "$D/lib" | grep -c '\.so') libraries); sha256 $(cut -d' ' -f1 "$OUT/$NAME.tar.gz.sha256")"
