#!/usr/bin/env bash
# test_dist.sh — the release archive (`make dist`, tools/dist.sh) runs with
# nothing of the system: unpacked into an empty directory used as the root
# (chroot: no libc, no Debian library, no shell, no /proc), its bin/profd
# prints the version, merges profiles as the build does (byte for byte), and
# serves (an upload, a merge, the UI); bin/kubectl-profd is the plugin; the
# checksum file checks; bin/profd is static. Needs root (chroot): skipped
# with a visible reason otherwise, and for sanitizer builds (a release is
# built without).
# Run: BUILD=build bash tests/e2e/test_dist.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_built 1 make "$PROFD"
need_cmds 1 curl tar sha256sum readelf cc
if [ "$(id -u)" != 0 ]; then ok "dist # skip not root (chroot)"; exit 0; fi
if grep -q '__asan_init' "$PROFD" 2>/dev/null || nm -D "$PROFD" 2>/dev/null | grep -q __asan; then
	ok "dist # skip a sanitizer build (the release archive is of the plain build)"
	exit 0
fi
kill_started_on_exit
if ! "$ROOT/tools/dist.sh" "$ROOT/$BUILD" "$T/dist" >"$T/dist.log" 2>&1; then
	fail "make dist" "$(tail -c 600 "$T/dist.log")"
	exit 1
fi
ok "dist: $(tail -1 "$T/dist.log" | sed 's/^dist: //; s/; sha256.*//')"
A=$(ls "$T"/dist/*.tar.gz)
N=$(basename "$A" .tar.gz)
(cd "$T/dist" && sha256sum -c "$N.tar.gz.sha256" >/dev/null 2>&1) && ok "dist: the .sha256 checks" || fail "dist: sha256" "$(cat "$T/dist/$N.tar.gz.sha256")"
R=$T/root
mkdir -p "$R/in" "$R/data"
tar xzf "$A" -C "$R"
readelf -l "$R/$N/bin/profd" | grep -q INTERP && fail "dist: bin/profd is static" "it has an interpreter" ||
	ok "dist: bin/profd is static (no interpreter)"
expect "dist: the root holds nothing but the archive and the inputs" "data in $N" "$(ls "$R" | tr '\n' ' ' | sed 's/ $//')"
for f in cpu heap; do
	cp "$ROOT/tests/fuzz/corpus/pprof/seed-$f.pb" "$R/in/$f.pb"
done
v=$(chroot "$R" "/$N/bin/profd" --version 2>&1)
expect "dist: in the empty root, profd --version" "$("$PROFD" --version)" "$v"
chroot "$R" "/$N/bin/profd" pprof merge -o /m.pb.gz /in/cpu.pb /in/cpu.pb >"$T/m.out" 2>&1
"$PROFD" pprof merge -o "$T/host-m.pb.gz" "$R/in/cpu.pb" "$R/in/cpu.pb" >/dev/null 2>&1
same_output "dist: in the empty root, pprof merge = the build's, byte for byte" "$T/host-m.pb.gz" "$R/m.pb.gz"
chroot "$R" "/$N/bin/kubectl-profd" --help 2>&1 | grep -q "^Usage: kubectl profd <command>" &&
	ok "dist: bin/kubectl-profd is the kubectl plugin" || fail "dist: kubectl-profd" "$(chroot "$R" "/$N/bin/kubectl-profd" --help 2>&1 | head -3)"
chroot "$R" "/$N/bin/profd" serve --addr 127.0.0.1:0 --data-dir /data --retention 0 2>"$T/serve.log" &
serve_smoke "dist" "$T/serve.log" $! "$R/in/heap.pb" chroot "$R" "/$N/bin/profd"
man -l "$R/$N/share/man/man1/profd-serve.1" >/dev/null 2>&1 && ok "dist: man pages in share/man" || fail "dist: man" "profd-serve.1"
