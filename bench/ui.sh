#!/usr/bin/env bash
# ui.sh — benchmark of the web UI (not a test): the flame graph of a
# synthetic 100,000-node merged profile in headless Chromium (first render,
# hover and zoom per frame: tests/ui/flame_bench.mjs), and the page weight
# (every file of web/ gzip -9'd, summed). Targets: first render < 200 ms,
# hover/zoom < 16 ms a frame, page weight < 300 KB gzip'd.
# Run: bash bench/ui.sh [NODES]      (needs chromium, node and npm)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
UI=$ROOT/tests/ui
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

echo "## Page weight (web/, gzip -9)"
echo
echo "| file | bytes | gzip'd |"
echo "|---|---|---|"
raw=0 gz=0
while IFS= read -r f; do
	r=$(wc -c <"$ROOT/web/$f")
	g=$(gzip -9 -c "$ROOT/web/$f" | wc -c)
	raw=$((raw + r)) gz=$((gz + g))
	echo "| $f | $r | $g |"
done < <(cd "$ROOT/web" && find . -maxdepth 2 -type f | sed 's|^\./||' | sort)
echo "| **total** | **$raw** | **$gz** ($((gz / 1024)) KiB; target < 300 KB: $([ "$gz" -lt 300000 ] && echo ok || echo MISSED)) |"
echo

if [ ! -x "$CHROMIUM" ] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "flame graph benchmark skipped: needs $CHROMIUM, node and npm (apt-get install chromium nodejs npm)"
	exit 0
fi
if [ ! -d "$UI/node_modules/playwright-core" ]; then
	npm ci --prefix "$UI" --no-audit --no-fund >/dev/null
fi
echo "## Flame graph"
echo
node "$UI/flame_bench.mjs" "${1:-100000}" --chromium "$CHROMIUM" 2>/dev/null
