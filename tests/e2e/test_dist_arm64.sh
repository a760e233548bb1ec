#!/usr/bin/env bash
# test_dist_arm64.sh — the arm64 release archive (`make dist-arm64`: cross-built
# with Debian's aarch64-linux-gnu-gcc against its :arm64 libraries) runs on
# arm64 with nothing of the system: unpacked into an empty directory used as
# the root, with only qemu-user-static beside it (this machine is x86-64), its
# bundled loader and libraries print the version and merge profiles byte for
# byte as the host build does, and serve (an upload, a merge, the UI); the
# launcher bin/profd is a static AArch64 program that runs the bundled loader
# (without a binfmt_misc handler for arm64 the kernel cannot exec it from
# under qemu: then its message must name that loader; with one, it runs).
# Needs root (chroot); skipped with a visible reason for sanitizer builds.
# Run: BUILD=build bash tests/e2e/test_dist_arm64.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_built 1 make "$PROFD"
need_cmds 1 curl tar sha256sum readelf aarch64-linux-gnu-gcc qemu-aarch64-static
if [ "$(id -u)" != 0 ]; then ok "dist arm64 # skip not root (chroot)"; exit 0; fi
if grep -q '__asan_init' "$PROFD" 2>/dev/null || nm -D "$PROFD" 2>/dev/null | grep -q __asan; then
	ok "dist arm64 # skip a sanitizer build (the release archive is of the plain build)"
	exit 0
fi
kill_started_on_exit
# the cross build in a directory of its own (the test's), as make dist-arm64 does it
X=$T/build-arm64
if ! make -s -C "$ROOT" BUILD="$X" CC=aarch64-linux-gnu-gcc SANITIZE= \
	PKG_CONFIG="PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig pkg-config" \
	"$X/profd" >"$T/build.log" 2>&1; then
	fail "dist arm64: cross build" "$(tail -c 600 "$T/build.log")"
	exit 1
fi
if ! HOST_PROFD=$PROFD "$ROOT/tools/dist.sh" "$X" "$T/dist" arm64 >"$T/dist.log" 2>&1; then
	fail "dist arm64: tools/dist.sh" "$(tail -c 600 "$T/dist.log")"
	exit 1
fi
ok "dist arm64: $(tail -1 "$T/dist.log" | sed 's/^dist: //; s/; sha256.*//')"
A=$(ls "$T"/dist/*-linux-arm64.tar.gz)
N=$(basename "$A" .tar.gz)
(cd "$T/dist" && sha256sum -c "$N.tar.gz.sha256" >/dev/null 2>&1) && ok "dist arm64: the .sha256 checks" || fail "dist arm64: sha256" "$(cat "$T/dist/$N.tar.gz.sha256")"
R=$T/root
mkdir -p "$R/in" "$R/data"
tar xzf "$A" -C "$R"
cp "$(command -v qemu-aarch64-static)" "$R/qemu"
hdr=$(readelf -h "$R/$N/lib/profd" | sed -n 's/.*Machine: *//p')
expect "dist arm64: lib/profd is an AArch64 program" "AArch64" "$hdr"
if readelf -h "$R/$N/bin/profd" | grep -q 'Machine:.*AArch64' && ! readelf -l "$R/$N/bin/profd" | grep -q INTERP; then
	ok "dist arm64: bin/profd is a static AArch64 program"
else fail "dist arm64: bin/profd" "$(readelf -hl "$R/$N/bin/profd" | grep -E 'Machine|INTERP')"; fi
bad=$(for f in "$R/$N"/lib/*.so*; do readelf -h "$f" | grep -q 'Machine:.*AArch64' || basename "$f"; done)
expect "dist arm64: every bundled library is AArch64" "" "$bad"
# what bin/profd runs: the bundled loader, the bundled libraries, lib/profd
run() { chroot "$R" /qemu "/$N/lib/ld-linux-aarch64.so.1" --library-path "/$N/lib" --argv0 profd "/$N/lib/profd" "$@"; }
# (the version; the commit is the tree's at the cross build, which a stale host build may lack)
v=$(run --version 2>&1)
if [ "${v%% (commit *}" = "$("$PROFD" --version | sed 's/ (commit .*//')" ] && [[ $v == *"(commit "*", built "* ]]; then
	ok "dist arm64: in the empty root, profd --version: $v"
else fail "dist arm64: in the empty root, profd --version" "got '$v', the host build says '$("$PROFD" --version)'"; fi
if [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
	v=$(chroot "$R" "/$N/bin/profd" --version 2>&1)
	expect "dist arm64: bin/profd (binfmt_misc) --version" "$(run --version 2>&1)" "$v"
else
	v=$(chroot "$R" /qemu "/$N/bin/profd" --version 2>&1)
	expect "dist arm64: bin/profd runs the bundled loader (no binfmt_misc handler for arm64 here: exec refused)" \
		"profd: cannot run /$N/lib/ld-linux-aarch64.so.1: Exec format error" "$v"
fi
for f in cpu heap; do
	cp "$ROOT/tests/fuzz/corpus/pprof/seed-$f.pb" "$R/in/$f.pb"
done
run pprof merge -o /m.pb.gz /in/cpu.pb /in/cpu.pb >"$T/m.out" 2>&1
"$PROFD" pprof merge -o "$T/host-m.pb.gz" "$R/in/cpu.pb" "$R/in/cpu.pb" >/dev/null 2>&1
same_output "dist arm64: in the empty root, pprof merge = the host build's, byte for byte" "$T/host-m.pb.gz" "$R/m.pb.gz"
chroot "$R" /qemu "/$N/lib/ld-linux-aarch64.so.1" --library-path "/$N/lib" --argv0 profd "/$N/lib/profd" \
	serve --addr 127.0.0.1:0 --data-dir /data --retention 0 2>"$T/serve.log" &
serve_smoke "dist arm64" "$T/serve.log" $! "$R/in/heap.pb" run
