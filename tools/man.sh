#!/usr/bin/env bash
# man.sh PROFD OUTDIR — the man pages of profd, made from the binary's own
# --help texts (one source: what `profd CMD --help` prints is the page):
# profd.1, and profd-CMD.1 for every command and subcommand (profd-pprof-merge.1,
# profd-store-backup.1, ...). `make man` and `make install` run it.
set -euo pipefail
PROFD=$1
OUT=$2
mkdir -p "$OUT"
VERSION=$("$PROFD" --version | awk '{print $2}')
DATE=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%d)

# page NAME SUMMARY HELP-TEXT-FILE
page() {
	local name=$1 summary=$2 help=$3 up
	up=$(tr '[:lower:]' '[:upper:]' <<<"$name")
	{
		printf '.TH %s 1 "%s" "profd %s" "profd manual"\n' "$up" "$DATE" "$VERSION"
		printf '.SH NAME\n%s \\- %s\n' "$name" "$(sed 's/\\/\\e/g; s/-/\\-/g' <<<"$summary")"
		printf '.SH DESCRIPTION\n.nf\n'
		# the help as it is: backslashes escaped, lines starting with . or ' protected
		sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\&\\1/" "$help"
		printf '.fi\n.SH SEE ALSO\n'
		if [ "$name" = profd ]; then
			ls "$OUT" | sed -n 's/^\(profd-.*\)\.1$/.BR \1 (1),/p' | sed '$ s/,$//' 
		else
			printf '.BR profd (1)\n'
		fi
		printf '.PP\nThe documentation: docs/ in the source tree, or PREFIX/share/doc/profd/.\n'
	} >"$OUT/$name.1"
}

"$PROFD" --help >"$OUT/.help"
# commands: the "  name   summary" lines of profd --help
while read -r cmd summary; do
	[ "$cmd" = help ] && continue
	"$PROFD" "$cmd" --help >"$OUT/.h" 2>&1 || true
	page "profd-$cmd" "$summary" "$OUT/.h"
	case $cmd in pprof | store | get) # their subcommands' own help
		while read -r sub ssum; do
			if "$PROFD" "$cmd" "$sub" --help >"$OUT/.hs" 2>&1 && ! cmp -s "$OUT/.hs" "$OUT/.h"; then
				page "profd-$cmd-$sub" "$ssum" "$OUT/.hs"
			fi
		done < <(sed -n 's/^  \([a-z][a-z-]*\)  *\(.*\)$/\1 \2/p' "$OUT/.h" | awk '$1 !~ /^-/')
		;;
	esac
done < <(sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\)  *\(.*\)$/\1 \2/p' "$OUT/.help")
page profd "continuous profiling for Go services" "$OUT/.help"
rm -f "$OUT/.help" "$OUT/.h" "$OUT/.hs"
