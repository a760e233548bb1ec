#!/usr/bin/env bash
# cli_docs.sh PROFD [FILE] — docs/cli.md's flag reference, made from the
# binary's flag tables (`profd help --markdown`): the part between the
# "BEGIN flag reference" and "END flag reference" markers of FILE (default
# docs/cli.md) replaced in place. `make docs` runs it;
# tests/e2e/test_cli.sh fails when the file differs from the binary.
set -euo pipefail
PROFD=$1
FILE=${2:-docs/cli.md}
gen=$(mktemp)
trap 'rm -f "$gen" "$gen.new"' EXIT
"$PROFD" help --markdown >"$gen"
grep -q '^<!-- BEGIN flag reference' "$FILE" || { echo "cli_docs.sh: no BEGIN flag reference marker in $FILE" >&2; exit 1; }
awk -v gen="$gen" '
	/^<!-- BEGIN flag reference/ { print; while ((getline l < gen) > 0) print l; skip = 1; next }
	/^<!-- END flag reference/ { skip = 0 }
	!skip { print }' "$FILE" >"$gen.new"
mv "$gen.new" "$FILE"
