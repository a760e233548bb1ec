// flame_bench.mjs — benchmark (not a test) of web/flame.js in headless
// Chromium: a synthetic merged profile tree of N nodes (default 100,000; the
// JSON shape of /api/1/merge?format=flamegraph), then, with the Performance
// API: JSON.parse, layout (flat typed arrays), first render, hover (hit test
// + overlay + tooltip) and zoom (a full redraw) per frame, medians of many.
// Prints a markdown table (and JSON on stderr). Usage:
//   node tests/ui/flame_bench.mjs [NODES] [--chromium PATH]
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const WEB = path.resolve(here, '../../web');
const args = process.argv.slice(2);
const N = Number(args.find((a) => /^\d+$/.test(a)) || 100000);
const ci = args.indexOf('--chromium');
const exe = ci >= 0 ? args[ci + 1] : '/usr/bin/chromium';

// deterministic pseudo-random
let seed = 42;
const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
const PKGS = ['runtime', 'net/http', 'main', 'crypto/sha256', 'encoding/json', 'compress/flate', 'sync', 'github.com/acme/api/internal/store', 'google.golang.org/grpc', 'sort', 'strings', 'bufio', 'os', 'syscall', 'reflect'];
function makeTree(n) {
  const root = { name: 'root', value: 0, self: 0, children: [] };
  // expand a random node of the frontier each time: stacks of mixed depths
  // (Go's are 10..60 deep), wide near the root like a real service's
  const queue = [[root, 0]];
  let count = 1;
  while (count < n && queue.length) {
    const j = Math.floor(rnd() * queue.length);
    const [node, d] = queue[j];
    queue[j] = queue[queue.length - 1];
    queue.pop();
    const k = d === 0 ? 6 : Math.min(n - count, d > 8 && rnd() < 0.5 ? 1 : 1 + Math.floor(rnd() * 3));
    for (let i = 0; i < k && count < n; i++) {
      const pkg = PKGS[Math.floor(rnd() * PKGS.length)];
      const c = { name: `${pkg}.(*T${Math.floor(rnd() * 50)}).f${count}`, value: 0, self: Math.floor(rnd() * 1e7), children: [] };
      node.children.push(c);
      count++;
      if (d < 60) queue.push([c, d + 1]);
    }
  }
  const fill = (x) => { let v = x.self; for (const c of x.children) v += fill(c); x.value = v; x.children.sort((a, b) => b.value - a.value); return v; };
  fill(root);
  return { sample_type: 'cpu', unit: 'nanoseconds', total: root.value, profiles: 1, max_nodes: n, nodes: count, frames: count, truncated: false, root };
}

const tree = makeTree(N);
const json = JSON.stringify(tree);
const browser = await chromium.launch({ executablePath: exe, args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
await page.route('http://bench.local/**', (route) => {
  const u = new URL(route.request().url());
  if (u.pathname === '/') return route.fulfill({ contentType: 'text/html', body: '<!doctype html><html data-theme="light"><head><link rel="stylesheet" href="ui/style.css"></head><body><main><div id="host" class="flame-host"></div></main></body></html>' });
  if (u.pathname === '/tree.json') return route.fulfill({ contentType: 'application/json', body: json });
  const f = path.join(WEB, u.pathname.replace(/^\/ui\//, ''));
  if (!f.startsWith(WEB) || !fs.existsSync(f)) return route.fulfill({ status: 404, body: '' });
  return route.fulfill({ contentType: f.endsWith('.js') ? 'text/javascript' : f.endsWith('.css') ? 'text/css' : 'application/octet-stream', body: fs.readFileSync(f) });
});
await page.goto('http://bench.local/');
const r = await page.evaluate(async () => {
  const { Flame, layout } = await import('./ui/flame.js');
  const text = await (await fetch('tree.json')).text();
  const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
  const p95 = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length * 0.95)]; };
  const host = document.getElementById('host');
  const parse = [], lay = [], first = [];
  let fl, L, data;
  for (let k = 0; k < 7; k++) {
    if (fl) { fl.destroy(); host.textContent = ''; }
    let t = performance.now();
    data = JSON.parse(text);
    parse.push(performance.now() - t);
    t = performance.now();
    L = layout(data.root);
    const t1 = performance.now();
    fl = new Flame(host, {});
    fl.set(L, { unit: data.unit });
    const t2 = performance.now();
    lay.push(t1 - t);
    first.push(t2 - t1);
  }
  const drawnFirst = fl.nDrawn;
  // hover: mouse moves over the drawn frames, one frame each (hit test, overlay, tooltip)
  const rect = fl.canvas.getBoundingClientRect();
  const hover = [];
  for (let k = 0; k < 400; k++) {
    const x = (k * 37.3) % rect.width, y = ((k * 7) % Math.min(40, L.maxDepth)) * 18 + 9;
    const t = performance.now();
    fl.onMove({ clientX: rect.left + x, clientY: rect.top + y });
    fl.updateHover();
    hover.push(performance.now() - t);
    if (fl.raf) { cancelAnimationFrame(fl.raf); fl.raf = 0; }
  }
  // zoom: into frames of every size (a full redraw each), and back to the root
  const cand = [];
  for (let i = 1; i < L.n && cand.length < 200; i += 97) if (L.val[i] > L.val[0] * 1e-4) cand.push(i);
  const zoom = [];
  for (const i of cand) {
    let t = performance.now();
    fl.setZoom(i);
    zoom.push(performance.now() - t);
    t = performance.now();
    fl.setZoom(0);
    zoom.push(performance.now() - t);
  }
  const search = [];
  for (const q of ['sha256', 'net/http', 'f1', 'zzz', 'json']) { const t = performance.now(); fl.setSearch(q); search.push(performance.now() - t); }
  fl.setSearch('');
  return {
    nodes: L.n, maxDepth: L.maxDepth, drawn: drawnFirst, dpr: devicePixelRatio,
    parse: med(parse), layout: med(lay), render: med(first), firstTotal: med(lay) + med(first),
    hover: med(hover), hoverP95: p95(hover), hoverN: hover.length,
    zoom: med(zoom), zoomP95: p95(zoom), zoomN: zoom.length, search: med(search),
  };
});
await browser.close();
const f = (x) => x.toFixed(2) + ' ms';
console.error(JSON.stringify(r));
console.log(`Flame graph, ${r.nodes.toLocaleString('en')} nodes (depth ${r.maxDepth}, ${r.drawn} frames drawn at 1280 px), headless Chromium, medians:`);
console.log('');
console.log('| measure | value | target |');
console.log('|---|---|---|');
console.log(`| first render: layout + draw | ${f(r.firstTotal)} (layout ${f(r.layout)}, draw ${f(r.render)}) | < 200 ms ${r.firstTotal < 200 ? 'ok' : 'MISSED'} |`);
console.log(`| JSON.parse of the API answer (${(json.length / 1e6).toFixed(1)} MB) | ${f(r.parse)} | (network side) |`);
console.log(`| hover, per frame (${r.hoverN} moves) | ${f(r.hover)} (p95 ${f(r.hoverP95)}) | < 16 ms ${r.hoverP95 < 16 ? 'ok' : 'MISSED'} |`);
console.log(`| zoom, per frame (${r.zoomN} zooms in and out) | ${f(r.zoom)} (p95 ${f(r.zoomP95)}) | < 16 ms ${r.zoomP95 < 16 ? 'ok' : 'MISSED'} |`);
console.log(`| search (regex over every frame + redraw) | ${f(r.search)} | |`);
