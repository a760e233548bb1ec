#!/usr/bin/env bash
# test_install.sh — `make install DESTDIR=... PREFIX=/usr` lays out exactly
# the binary, the kubectl plugin link, bash completion, the systemd unit
# (deploy/systemd/profd.service with PREFIX's paths), LICENSE and the docs;
# the installed binary runs as profd and as kubectl-profd; the completion
# loads; the unit passes `systemd-analyze verify`; `make uninstall` removes
# every file again.
# Run: BUILD=build bash tests/e2e/test_install.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_built 1 make "$PROFD"
D=$T/inst
if ! make --no-print-directory -C "$ROOT" BUILD="$BUILD" install DESTDIR="$D" PREFIX=/usr >"$T/make.log" 2>&1; then
	fail "make install DESTDIR" "$(tail -c 600 "$T/make.log")"
	exit 1
fi
want=$(
	printf '%s\n' usr/bin/profd usr/bin/kubectl-profd usr/lib/systemd/system/profd.service \
		usr/share/bash-completion/completions/profd usr/share/doc/profd/LICENSE usr/share/doc/profd/README.md
	(cd "$ROOT/docs" && ls -- *.md) | sed 's|^|usr/share/doc/profd/|'
	# a man page per command and per subcommand with a help of its own
	echo usr/share/man/man1/profd.1
	"$PROFD" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\)  *.*/\1/p' | grep -vx help | sed 's|.*|usr/share/man/man1/profd-&.1|'
	for sub in "pprof merge" "pprof top" "pprof folded" "pprof info" "pprof convert" "pprof delta" "store check" "store backup" "store restore"; do
		echo "usr/share/man/man1/profd-${sub/ /-}.1"
	done
)
got=$(cd "$D" && find . -type f -o -type l | sed 's|^\./||' | sort)
expect "install: exactly the binary, the plugin link, man pages, completion, the unit, LICENSE and docs" "$(sort <<<"$want")" "$got"
[ "$(readlink "$D/usr/bin/kubectl-profd")" = profd ] && ok "install: kubectl-profd is a relative link to profd" ||
	fail "install: kubectl-profd link" "$(readlink "$D/usr/bin/kubectl-profd")"
v=$("$D/usr/bin/profd" --version)
[ "$v" = "$("$PROFD" --version)" ] && ok "install: the installed binary runs ($v)" || fail "install: binary" "$v"
"$D/usr/bin/kubectl-profd" --help | grep -q '^Usage: kubectl profd <command>' && ok "install: as kubectl-profd it is the plugin" ||
	fail "install: plugin" "$("$D/usr/bin/kubectl-profd" --help | head -2)"
cmp -s "$D/usr/share/doc/profd/LICENSE" "$ROOT/LICENSE" && grep -q 'Apache License' "$ROOT/LICENSE" &&
	ok "install: LICENSE (Apache-2.0) shipped" || fail "install: LICENSE" "missing or differs"
if bash -c 'source "$1" && complete -p profd' _ "$D/usr/share/bash-completion/completions/profd" | grep -q _profd_complete; then
	ok "install: the bash completion loads"
else fail "install: completion" "$(head -c 200 "$D/usr/share/bash-completion/completions/profd")"; fi
bad=
for m in "$D"/usr/share/man/man1/*.1; do
	out=$(MANWIDTH=80 man -l "$m" 2>"$T/man.err") && [ ! -s "$T/man.err" ] && grep -q 'profd manual' <<<"$out" || bad+="$(basename "$m") "
done
[ -z "$bad" ] && ok "install: every man page renders with man -l ($(ls "$D"/usr/share/man/man1 | wc -l))" || fail "install: man pages" "$bad: $(head -c 300 "$T/man.err")"
grep -q 'only profiles of pods in namespace NS' "$D/usr/share/man/man1/profd-top.1" &&
	ok "install: a page is its command's --help (profd-top.1 has top's -n)" || fail "install: man = --help" "profd-top.1"
U=$D/usr/lib/systemd/system/profd.service
if grep -q '^ExecStart=/usr/bin/profd serve --data-dir /var/lib/profd' "$U" && grep -q '^DynamicUser=yes' "$U" &&
	grep -q '^StateDirectory=profd' "$U" && grep -q '^Restart=on-failure' "$U" && grep -q '^ProtectSystem=strict' "$U"; then
	ok "install: the unit runs /usr/bin/profd as its own user, StateDirectory, Restart=on-failure, hardened"
else fail "install: unit" "$(grep -E '^(ExecStart|DynamicUser|StateDirectory|Restart)=' "$U")"; fi
if command -v systemd-analyze >/dev/null; then
	# verify needs the ExecStart binary to exist: the installed one, at its DESTDIR path
	sed "s|/usr/bin/profd|$D/usr/bin/profd|" "$U" >"$T/profd.service"
	if systemd-analyze verify "$T/profd.service" >"$T/verify" 2>&1 && ! grep -qi 'profd.service' "$T/verify"; then
		ok "install: systemd-analyze verify: clean"
	else fail "install: systemd-analyze verify" "$(head -c 600 "$T/verify")"; fi
else
	ok "install: systemd-analyze verify # skip no systemd-analyze (Debian's systemd)"
fi
make --no-print-directory -C "$ROOT" BUILD="$BUILD" uninstall DESTDIR="$D" PREFIX=/usr >"$T/make.log" 2>&1
left=$(cd "$D" && find . -type f -o -type l)
expect "make uninstall removes every installed file" "" "$left"
