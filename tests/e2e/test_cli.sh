#!/usr/bin/env bash
# test_cli.sh — conventions every command keeps (docs/cli.md), no collector
# needed:
#   1. a bad option, a missing value: one style for every command and
#      subcommand ("profd X: unknown option '--x'" / "option '--x' needs a
#      value", then the --help hint), exit 2;
#   2. `profd help CMD` = `profd CMD --help`; `profd --version` and
#      `profd version -o json` name the version, the commit and the build time;
#   3. `profd completion bash` loads in bash and completes commands,
#      subcommands and each command's flags from its --help (as the plugin
#      `kubectl profd` too); `completion zsh` in zsh when zsh is installed.
# Run: BUILD=build bash tests/e2e/test_cli.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
need_built 1 make "$PROFD"

# ---- 1. bad options -------------------------------------------------------------------------
bad=
for c in serve scrape capture "get services" merge load top diff regressions "pprof merge" "pprof top" \
	"pprof folded" "pprof info" "pprof convert" "pprof delta" "store check" "store backup" "store restore" version; do
	# shellcheck disable=SC2086 # the subcommand is two words on purpose
	"$PROFD" $c --bogus >/dev/null 2>"$T/e"
	rc=$?
	n=${c/get services/get} # get has one --help for its subcommands
	[ "$rc" = 2 ] && [ "$(wc -l <"$T/e")" = 2 ] && grep -qx "profd $n: unknown option '--bogus'" "$T/e" &&
		grep -qx "Run 'profd $n --help' for usage." "$T/e" || bad+="$c: rc $rc $(head -c 200 "$T/e"); "
done
[ -z "$bad" ] && ok "cli: every command: \"profd CMD: unknown option '--bogus'\" + the --help hint, exit 2" || fail "cli: unknown option" "$bad"
bad=
for a in "serve --addr" "capture -n" "pprof top -n" "top --limit" "diff --base"; do
	# shellcheck disable=SC2086
	"$PROFD" $a >/dev/null 2>"$T/e"
	rc=$?
	c=${a% *} o=${a##* }
	[ "$rc" = 2 ] && grep -qx "profd $c: option '$o' needs a value" "$T/e" || bad+="$a: rc $rc $(head -c 200 "$T/e"); "
done
[ -z "$bad" ] && ok "cli: a missing value: \"option '--x' needs a value\", exit 2" || fail "cli: missing value" "$bad"
"$PROFD" nosuch >/dev/null 2>"$T/e"
expect "cli: an unknown command: exit 2 naming it" "2 profd: unknown command 'nosuch'" "$? $(head -1 "$T/e")"

# binary output to a terminal is refused by every command that writes a
# profile to stdout (merge and diff check before asking the collector: a dead
# one here); under script(1), which gives stdout a tty
if command -v script >/dev/null 2>&1; then
	P=$ROOT/tests/fuzz/corpus/pprof/seed-threadcreate.pb.gz
	bad=
	for a in "merge --service a --type cpu --collector http://127.0.0.1:1" "merge --service a --type cpu -O - --collector http://127.0.0.1:1" \
		"diff --base cpu --target cpu -o pprof --collector http://127.0.0.1:1" "pprof merge $P" "pprof delta $P $P" "pprof convert $P -"; do
		script -qec "$PROFD $a; echo rc=\$?" /dev/null >"$T/tty" 2>&1 </dev/null
		grep -q "refusing to write a binary profile to a terminal" "$T/tty" && grep -q "rc=2" "$T/tty" &&
			! grep -q $'\x1f\x8b' "$T/tty" || bad+="$a: $(tr -cd '[:print:]\n' <"$T/tty" | head -c 200); "
	done
	[ -z "$bad" ] && ok "cli: a binary profile to a terminal is refused (merge, diff, pprof merge/delta/convert), exit 2" ||
		fail "cli: binary to a terminal" "$bad"
else
	ok "cli: binary to a terminal # SKIP script(1) not installed"
fi

# ---- 2. help and version ----------------------------------------------------------------------
bad=
for c in serve scrape capture get merge load top diff regressions pprof store completion; do
	"$PROFD" help "$c" >"$T/a" 2>&1
	"$PROFD" "$c" --help >"$T/b" 2>&1
	cmp -s "$T/a" "$T/b" && [ -s "$T/a" ] || bad+="$c "
done
[ -z "$bad" ] && ok "cli: profd help CMD = profd CMD --help (every command)" || fail "cli: help CMD" "differs for: $bad"
out=$("$PROFD" --version)
commit=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo none)
if [[ $out =~ ^profd\ [0-9]+\.[0-9]+\.[0-9]+\ \(commit\ ([0-9a-f]+|unknown),\ built\ ([0-9T:Z-]+|unknown)\)$ ]]; then
	ok "cli: --version: version, commit and build time ($out)"
else fail "cli: --version" "$out"; fi
j=$("$PROFD" version -o json)
if jq -e '.version and (.commit | type == "string") and (.build_time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T"))' <<<"$j" >/dev/null &&
	[ "$("$PROFD" version)" = "$out" ]; then
	ok "cli: version -o json ($(jq -c . <<<"$j"); this tree's HEAD $commit)"
else fail "cli: version -o json" "$j"; fi
expect_exit "cli: version with an unknown option: exit 2, as every command" 2 "profd version: unknown option '--bogus'" "$PROFD" version --bogus
expect_exit "cli: version with a stray argument: exit 2" 2 "unexpected argument" "$PROFD" version stray

# the flag reference of docs/cli.md is what the binary's tables say
cp docs/cli.md "$T/cli.md"
if tools/cli_docs.sh "$PROFD" "$T/cli.md" 2>"$T/e" && cmp -s docs/cli.md "$T/cli.md"; then
	ok "cli: docs/cli.md's flag reference equals profd help --markdown (make docs)"
else fail "cli: docs/cli.md's flag reference is stale: run make docs" "$(cat "$T/e"; diff docs/cli.md "$T/cli.md" | head -20)"; fi
# every command and subcommand with a --help page has its section, and
# every flag its Options list shows is a row of it
bad=
for c in serve scrape capture get merge load top diff regressions "pprof merge" "pprof top" "pprof folded" \
	"pprof info" "pprof convert" "pprof delta" "store check" "store backup" "store restore" version; do
	sec=$(awk -v h="### profd $c" '$0 == h { on = 1; next } /^### / { on = 0 } on' "$T/cli.md")
	[ -n "$sec" ] || { bad+="$c: no section; "; continue; }
	# shellcheck disable=SC2086 # the subcommand is two words on purpose
	for f in $("$PROFD" $c --help | grep -Eo '^  (-[A-Za-z], )?--[a-z][a-z0-9-]*' | grep -Eo -- '--[a-z0-9-]+'); do
		grep -qF -- "\`$f\`" <<<"$sec" || bad+="$c: $f not in its section; "
	done
done
[ -z "$bad" ] && ok "cli: every --help page has its docs/cli.md section, with every flag its Options list" ||
	fail "cli: docs/cli.md sections" "$bad"

# ---- 3. completion --------------------------------------------------------------------------
mkdir -p "$T/bin"
ln -sf "$PROFD" "$T/bin/profd"
ln -sf "$PROFD" "$T/bin/kubectl-profd"
"$PROFD" completion bash >"$T/c.bash"
# complete WORDS...: what the completion function offers for the last word
complete_words() {
	PATH="$T/bin:$PATH" bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _profd_complete; echo "${COMPREPLY[*]}"' _ "$T/c.bash" "$@"
}
expect "cli: bash completion: commands (profd re<TAB>)" "regressions" "$(complete_words profd re)"
expect "cli: bash completion: subcommands (profd pprof <TAB>)" "merge top folded info convert delta" "$(complete_words profd pprof "")"
expect "cli: bash completion: a command's flags (profd top --li<TAB>)" "--limit" "$(complete_words profd top --li)"
expect "cli: bash completion: a subcommand's flags (profd get profiles --se<TAB>)" "--selector --service" "$(complete_words profd get profiles --se)"
expect "cli: bash completion: as the kubectl plugin (kubectl profd cap<TAB>)" "capture" "$(complete_words kubectl profd cap)"
if bash -n "$T/c.bash" && PATH="$T/bin:$PATH" bash -c 'source "$1" && complete -p profd' _ "$T/c.bash" | grep -q '_profd_complete'; then
	ok "cli: bash completion: the script loads and registers for profd"
else fail "cli: bash completion loads" "$(head -c 300 "$T/c.bash")"; fi
if command -v zsh >/dev/null; then
	"$PROFD" completion zsh >"$T/c.zsh"
	check "cli: zsh completion loads" zsh -c "source $T/c.zsh"
else
	ok "cli: zsh completion # skip no zsh"
fi
expect_exit "cli: completion fish: exit 2" 2 "want bash or zsh" "$PROFD" completion fish
