// ui_test.mjs — profd's web UI in a real browser (headless Chromium driven by
// playwright-core). Run by tests/e2e/test_ui.sh, which starts the collector,
// posts real profiles and writes the config (argv[2]): {base, phase ("open",
// "tokens" or "prefix": the server under --web-prefix /profd), shots, chromium, readToken, expect: {total, rows: [{name,
// flat, cum}]} (go tool pprof -top of Go's merge)}. Prints one TAP line per
// check: "ok - ui: NAME" or "not ok - ui: NAME: why". Exit 1 if any failed.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const BASE = cfg.base.replace(/\/$/, '');
const ROW = 18;
let failures = 0;

function tap(okay, name, why) {
  if (okay) console.log(`ok - ui: ${name}`);
  else { failures++; console.log(`not ok - ui: ${name}: ${String(why).replace(/\s+/g, ' ').slice(0, 600)}`); }
}
// check NAME FN: FN returns true (or nothing) when it holds, else a reason
async function check(name, fn) {
  try {
    const r = await fn();
    tap(r === undefined || r === true, name, r);
  } catch (e) {
    tap(false, name, e && e.message ? e.message.split('\n')[0] : e);
  }
}

const browser = await chromium.launch({ executablePath: cfg.chromium || '/usr/bin/chromium', args: ['--no-sandbox'] });

// a page whose problems (console errors, page errors, failed requests,
// answers >= 400 the test did not provoke) are collected. A 503 with
// Retry-After is the collector saying it is busy (--max-concurrent-merges:
// merges of requests the page has already dropped may still be running); the
// page asks again (web/api.js), so such an answer is counted in page.busy, not
// as a problem: whether the view then works is what each check looks at.
async function open(opts = {}) {
  const context = await browser.newContext({ viewport: opts.viewport || { width: 1280, height: 720 }, colorScheme: opts.colorScheme || 'light', acceptDownloads: true });
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  page.problems = [];
  page.busy = new Set();
  page.allow = opts.allow || (() => false);
  page.on('console', (m) => {
    if (m.type() !== 'error' || page.allow(m.text())) return;
    if (/status of 503/.test(m.text()) && page.busy.has(m.location().url)) return;
    page.problems.push('console: ' + m.text());
  });
  page.on('pageerror', (e) => page.problems.push('pageerror: ' + e.message));
  page.on('requestfailed', (r) => {
    const f = r.failure() ? r.failure().errorText : '';
    if (!/ERR_ABORTED/.test(f)) page.problems.push(`requestfailed: ${r.url()} ${f}`);
  });
  page.on('response', (r) => {
    if (r.status() === 503 && r.headers()['retry-after'] !== undefined) { page.busy.add(r.url()); return; }
    if (r.status() >= 400 && !page.allow(r.url(), r.status())) page.problems.push(`HTTP ${r.status()} ${r.url()}`);
  });
  return page;
}
function problems(page) { const p = page.problems.splice(0); return p.length ? p.join('; ') : null; }

async function apiGet(p, params, token) {
  const u = BASE + '/' + p + (params ? '?' + new URLSearchParams(params) : '');
  const res = await fetch(u, { headers: token ? { Authorization: 'Bearer ' + token } : {} });
  if (!res.ok) throw new Error(`${u}: ${res.status} ${await res.text()}`);
  return (await res.json()).body;
}

async function shot(page, name) {
  fs.mkdirSync(cfg.shots, { recursive: true });
  await page.screenshot({ path: path.join(cfg.shots, name + '.png') });
}

// pixels of a canvas: how many differ from the background, how many are red / green
async function pixels(page, sel, rowY) {
  return page.evaluate(([sel, rowY]) => {
    const c = document.querySelector(sel);
    if (!c || !c.width || !c.height) return null;
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const bgHex = getComputedStyle(document.documentElement).getPropertyValue('--flame-bg').trim() || '#ffffff';
    const bg = [1, 3, 5].map((i) => parseInt(bgHex.slice(i, i + 2), 16));
    const dpr = c.width / c.clientWidth;
    let fg = 0, red = 0, green = 0, rowBg = 0, rowN = 0;
    const isBg = (i) => Math.abs(d[i] - bg[0]) < 6 && Math.abs(d[i + 1] - bg[1]) < 6 && Math.abs(d[i + 2] - bg[2]) < 6;
    for (let i = 0; i < d.length; i += 4) {
      if (!isBg(i)) fg++;
      if (d[i] > d[i + 1] + 60 && d[i] > d[i + 2] + 60) red++;
      if (d[i + 1] > d[i] + 40 && d[i + 1] > d[i + 2] + 20) green++;
    }
    if (rowY !== undefined && rowY !== null) {
      const y = Math.round(rowY * dpr);
      for (let x = 0; x < c.width; x++) { rowN++; if (isBg((y * c.width + x) * 4)) rowBg++; }
    }
    return { fg, red, green, total: d.length / 4, rowBg, rowN, width: c.clientWidth, height: c.clientHeight };
  }, [sel, rowY]);
}

// The box of SEL once the page has stopped moving it (no request for 500 ms,
// then two reads 100 ms apart agree): what loads after the canvas (the
// header's lists) can push it, and a click at a stale box lands a row off
// (seen once in CI, under ASan: the right-click opened a child's sandwich).
async function stableBox(page, sel) {
  await page.waitForLoadState('networkidle').catch(() => {});
  let last = null;
  for (let i = 0; i < 30; i++) {
    const b = await (await page.$(sel)).boundingBox();
    if (last && b && b.x === last.x && b.y === last.y && b.width === last.width) return b;
    last = b;
    await page.waitForTimeout(100);
  }
  return last;
}

async function waitCanvas(page, role) {
  await page.waitForFunction((role) => {
    const c = document.querySelector(`canvas[data-role="${role}"]`);
    return c && c.width > 0 && c.height > 0;
  }, role);
  await page.waitForTimeout(50);
}

function outermostShare(root, re) { // value of the frames matching RE, each sample once
  let v = 0;
  const walk = (n, top) => {
    if (!top && !n.other && re.test(n.name)) { v += n.value; return; }
    for (const c of n.children || []) walk(c, false);
  };
  walk(root, true);
  return v;
}

const VIEWS = { flame: 'canvas[data-role="flame"]', table: 'table[data-role="top"] tbody tr', diff: 'canvas[data-role="diff-flame"]', fleet: 'table[data-role="fleet"] tbody tr', profiles: 'table[data-role="profiles"] tbody tr', regressions: 'section[data-role="regress-comparison"]' };
const exp = cfg.expect;

if (cfg.phase === 'open') await openPhase();
else if (cfg.phase === 'prefix') await prefixPhase();
else if (cfg.phase === 'hostile') await hostilePhase();
else await tokenPhase();
await browser.close();
process.exit(failures ? 1 : 0);

async function openPhase() {
  const page = await open({ allow: (u, st) => /query=cpu%7Bservice%3D%22%22%22/.test(u) && st === 400 });

  // 1. every view loads, clean
  for (const v of Object.keys(VIEWS)) {
    await check(`view ${v} loads without a console error or failed request`, async () => {
      await page.goto(`${BASE}/?view=${v}&query=cpu`);
      await page.waitForSelector(VIEWS[v]);
      await page.waitForLoadState('networkidle');
      await shot(page, v);
      return problems(page) || true;
    });
  }

  // 2. the top table is go tool pprof -top
  await check(`top table equals go tool pprof -top of Go's merge (${exp.rows.length} rows, raw values)`, async () => {
    await page.goto(`${BASE}/?view=table&query=cpu&n=100000`);
    await page.waitForSelector(VIEWS.table);
    const got = await page.$$eval('table[data-role="top"] tbody tr', (trs) => trs.map((tr) => {
      const v = (k) => tr.querySelector(`td[data-key="${k}"]`).dataset.value;
      return { name: v('name'), flat: Number(v('flat')), cum: Number(v('cum')) };
    }));
    if (got.length !== exp.rows.length) return `${got.length} rows, go tool pprof has ${exp.rows.length}`;
    for (let i = 0; i < got.length; i++) {
      const a = got[i], b = exp.rows[i];
      if (a.name !== b.name || a.flat !== b.flat || a.cum !== b.cum) return `row ${i + 1}: UI ${JSON.stringify(a)}, go tool pprof ${JSON.stringify(b)}`;
    }
    const total = await page.$eval('[data-role="top-info"]', (e) => Number(e.dataset.total));
    return total === exp.total || `total ${total}, go tool pprof ${exp.total}`;
  });
  await check('top table shows values as pprof prints them (e.g. 460ms), raw in data-value', async () => {
    const cell = await page.$eval('table[data-role="top"] tbody tr td[data-key="flat"]', (td) => [td.textContent, td.dataset.value]);
    return /^-?[0-9.]+(ns|us|ms|s|m|h)$/.test(cell[0]) && cell[0] !== cell[1] || `cell "${cell[0]}" (${cell[1]})`;
  });
  await check('top table sorts by cum (click the header) and keeps it in the URL', async () => {
    await page.click('th[data-key="cum"] button');
    const cums = await page.$$eval('table[data-role="top"] tbody td[data-key="cum"]', (tds) => tds.map((t) => Number(t.dataset.value)));
    for (let i = 1; i < cums.length; i++) if (cums[i] > cums[i - 1]) return `row ${i + 1} cum ${cums[i]} > ${cums[i - 1]}`;
    return /sort=cum/.test(page.url()) || 'sort not in ' + page.url();
  });
  await check('top table filter keeps only matching rows', async () => {
    await page.fill('[data-role="table-filter"]', 'sha256');
    await page.waitForTimeout(100);
    const names = await page.$$eval('table[data-role="top"] tbody td[data-key="name"]', (tds) => tds.map((t) => t.dataset.value));
    const want = exp.rows.filter((r) => /sha256/i.test(r.name)).length;
    return (names.length === want && names.every((n) => /sha256/i.test(n))) || `${names.length} rows (want ${want}): ${names.slice(0, 3)}`;
  });

  // 3. the flame graph
  const fg = await apiGet('api/1/merge', { query: 'cpu', format: 'flamegraph', max_nodes: 1000 });
  await page.goto(`${BASE}/?view=flame&query=cpu`);
  await waitCanvas(page, 'flame');
  const W = await page.$eval('canvas[data-role="flame"]', (c) => c.clientWidth);
  const box = await stableBox(page, 'canvas[data-role="flame"]');
  await check('flame graph canvas is drawn (HiDPI-sized, frames painted)', async () => {
    const px = await pixels(page, 'canvas[data-role="flame"]');
    const dprOk = await page.$eval('canvas[data-role="flame"]', (c) => c.width === Math.round(c.clientWidth * devicePixelRatio));
    return (px && px.fg > px.total * 0.05 && dprOk) || `pixels ${JSON.stringify(px)}, dpr sizing ${dprOk}`;
  });
  const widest = fg.root.children[0];
  await check(`hover on the widest frame below root (${widest.name}) shows its name and total as pprof computes them`, async () => {
    await page.mouse.move(box.x + ((widest.value / fg.total) * W) / 2, box.y + ROW * 1.5);
    await page.waitForSelector('.tip:not([hidden])');
    const tip = await page.$eval('.tip:not([hidden])', (t) => ({ text: t.textContent, name: t.dataset.name, total: Number(t.dataset.total) }));
    const goRow = exp.rows.find((r) => r.name === widest.name);
    const pct = ((100 * widest.value) / fg.total).toFixed(2) + '%';
    if (tip.name !== widest.name || !tip.text.includes(widest.name)) return `tooltip names ${tip.name}`;
    if (tip.total !== widest.value) return `tooltip total ${tip.total}, flame graph ${widest.value}`;
    if (goRow && goRow.cum !== tip.total) return `tooltip total ${tip.total}, go tool pprof cum ${goRow.cum}`;
    return tip.text.includes(pct) || `no "${pct}" of total in "${tip.text}"`;
  });
  // a frame along the widest path narrower than the width
  let zd = 1, zn = widest;
  const zpath = [widest.name];
  while (zn.value > 0.8 * fg.total && zn.children.length) { zn = zn.children[0]; zd++; zpath.push(zn.name); }
  const nameAt = async (x, y) => {
    await page.mouse.move(box.x + x, box.y + y);
    await page.waitForTimeout(80); // a frame: the hover is drawn on the next animation frame
    return page.evaluate(() => { const t = document.querySelector('.tip:not([hidden])'); return t ? t.dataset.name : null; });
  };
  await check(`click zooms into a frame (${zn.name}): breadcrumb, URL, it fills the width`, async () => {
    const y = zd * ROW + ROW / 2;
    const rightBefore = await nameAt(W - 3, y);
    if (rightBefore === zn.name) return `${zn.name} already reaches the right edge before the zoom`;
    await page.mouse.click(box.x + ((zn.value / fg.total) * W) / 2, box.y + y);
    await page.waitForSelector('[data-role="breadcrumb"] .crumb.current');
    await waitCanvas(page, 'flame');
    const crumbs = await page.$$eval('[data-role="breadcrumb"] .crumb', (b) => b.map((x) => x.textContent));
    const focus = new URL(page.url()).searchParams.get('focus');
    if (focus !== zpath.join(';')) return `focus=${focus}, want ${zpath.join(';')}`;
    if (crumbs[crumbs.length - 1] !== zn.name || crumbs[0] !== 'all') return 'breadcrumb ' + crumbs.join(' > ');
    const row = await pixels(page, 'canvas[data-role="flame"]', y);
    const left = await nameAt(2, y), right = await nameAt(W - 3, y);
    if (left !== zn.name || right !== zn.name) return `after the zoom the row holds ${left} .. ${right}`;
    return row.rowBg <= 0.01 * row.rowN || `after zoom ${row.rowBg} of ${row.rowN} pixels of its row are background`;
  });
  await shot(page, 'flame-zoom');
  await check('breadcrumb "all" zooms out; browser back zooms in again', async () => {
    await page.click('[data-role="breadcrumb"] .crumb >> text=all');
    await page.waitForSelector('[data-role="breadcrumb"] .crumb', { state: 'detached' });
    if (new URL(page.url()).searchParams.get('focus')) return 'focus still in ' + page.url();
    await page.goBack();
    await page.waitForSelector('[data-role="breadcrumb"] .crumb.current');
    return new URL(page.url()).searchParams.get('focus') === zpath.join(';') || 'back: ' + page.url();
  });
  const zoomedUrl = page.url();
  await check('search highlights matching frames and sums their share like pprof', async () => {
    await page.fill('[data-role="search"]', 'sha256');
    await page.waitForFunction(() => document.querySelector('[data-role="search-result"]').dataset.count > 0);
    const r = await page.$eval('[data-role="search-result"]', (e) => ({ count: Number(e.dataset.count), pct: Number(e.dataset.pct), text: e.textContent }));
    const want = (100 * outermostShare(fg.root, /sha256/i)) / fg.total;
    return (Math.abs(r.pct - want) < 1e-6 && /matching frame/.test(r.text)) || `share ${r.pct}, want ${want} (${r.text})`;
  });
  await check('a copied link reproduces the view (zoom and search) in a new page', async () => {
    await page.waitForFunction(() => /search=sha256/.test(location.search));
    await page.click('[data-role="copy-link"]');
    const href = await page.$eval('#copied', (i) => i.value);
    if (href !== page.url()) return `copied ${href}, page at ${page.url()}`;
    const p2 = await open();
    await p2.goto(href);
    await p2.waitForSelector('[data-role="breadcrumb"] .crumb.current');
    await p2.waitForFunction(() => document.querySelector('[data-role="search-result"]').dataset.count > 0);
    const a = await page.$eval('[data-role="search-result"]', (e) => e.textContent);
    const b = await p2.$eval('[data-role="search-result"]', (e) => e.textContent);
    const ca = await page.$$eval('[data-role="breadcrumb"] .crumb', (x) => x.map((e) => e.textContent).join('>'));
    const cb = await p2.$$eval('[data-role="breadcrumb"] .crumb', (x) => x.map((e) => e.textContent).join('>'));
    const pr = problems(p2);
    await p2.context().close();
    return (a === b && ca === cb && !pr) || `search "${a}" vs "${b}", crumbs ${ca} vs ${cb} ${pr || ''}`;
  });
  const sha = exp.rows.find((r) => r.name === 'crypto/sha256.block') || exp.rows[0];
  await check(`sandwich of ${sha.name}: callers and callees drawn, total = go tool pprof cum`, async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu&sandwich=${encodeURIComponent(sha.name)}`);
    await waitCanvas(page, 'sandwich-callers');
    await waitCanvas(page, 'sandwich-callees');
    const t = await page.$eval('[data-role="sandwich-total"]', (e) => Number(e.dataset.value));
    const a = await pixels(page, 'canvas[data-role="sandwich-callers"]');
    const b = await pixels(page, 'canvas[data-role="sandwich-callees"]');
    if (!(a.fg > 100 && b.fg > 100)) return `callers ${a.fg}, callees ${b.fg} painted pixels`;
    return t === sha.cum || `sandwich total ${t}, go tool pprof cum ${sha.cum}`;
  });
  await shot(page, 'sandwich');
  await check('right-click on a frame opens its sandwich', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu`);
    await waitCanvas(page, 'flame');
    const b = await stableBox(page, 'canvas[data-role="flame"]');
    await page.mouse.click(b.x + ((widest.value / fg.total) * W) / 2, b.y + ROW * 1.5, { button: 'right' });
    await page.waitForSelector('[data-role="sandwich-title"]');
    return new URL(page.url()).searchParams.get('sandwich') === widest.name || page.url();
  });
  await check('"other" frames are explained on hover and expanded by a larger max_nodes', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu&max_nodes=20`);
    await waitCanvas(page, 'flame');
    const small = await apiGet('api/1/merge', { query: 'cpu', format: 'flamegraph', max_nodes: 20 });
    const kids = small.root.children;
    const oth = kids[kids.length - 1];
    if (!small.truncated || !oth.other) return 'max_nodes=20 is not truncated with an other node last';
    const x1 = W, x0 = W - (oth.value / small.total) * W;
    await page.mouse.move(box.x + (x0 + x1) / 2, box.y + ROW * 1.5);
    await page.waitForSelector('.tip:not([hidden])');
    const tip = await page.$eval('.tip:not([hidden])', (t) => t.textContent);
    if (!/other/.test(tip) || !/max_nodes/.test(tip)) return 'tooltip: ' + tip;
    await page.mouse.click(box.x + (x0 + x1) / 2, box.y + ROW * 1.5);
    await page.waitForFunction(() => Number(new URLSearchParams(location.search).get('max_nodes')) > 20);
    await waitCanvas(page, 'flame');
    return problems(page) || true;
  });
  await check('"show all" frames re-queries with max_nodes >= frames', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu&max_nodes=20`);
    await page.click('[data-role="more-frames"]');
    await page.waitForFunction(() => !document.querySelector('[data-role="more-frames"]') && document.querySelector('[data-role="flame-info"]'));
    return Number(new URL(page.url()).searchParams.get('max_nodes')) >= fg.frames || page.url();
  });
  await check('sample type: heap with si=alloc_space is shown as such', async () => {
    await page.goto(`${BASE}/?view=flame&query=heap&si=alloc_space`);
    await waitCanvas(page, 'flame');
    const t = await page.$eval('[data-role="flame-info"]', (e) => e.textContent);
    const si = await page.$eval('#si', (s) => s.value);
    return (/alloc_space/.test(t) && si === 'alloc_space') || t;
  });
  await check('sample type selector lists the sample_types of the API\'s merge answer (heap: four, with units)', async () => {
    const api = await apiGet('api/1/merge', { query: 'heap', format: 'top', n: 1 });
    await page.waitForFunction(() => document.querySelector('#si').dataset.source === 'api');
    const opts = await page.$$eval('#si option', (o) => o.filter((x) => x.value).map((x) => [x.value, x.textContent]));
    const want = (api.sample_types || []).map((t) => [t.type, `${t.type} (${t.unit})`]);
    return (want.length === 4 && JSON.stringify(opts) === JSON.stringify(want)) || `UI ${JSON.stringify(opts)}, API ${JSON.stringify(want)}`;
  });

  // 4. diff
  const dq = `base=${encodeURIComponent('cpu{version="1.0"}')}&target=${encodeURIComponent('cpu{version="1.1"}')}`;
  await check('diff flame graph has red (grew) and green (shrank) frames', async () => {
    await page.goto(`${BASE}/?view=diff&query=cpu&${dq}`);
    await waitCanvas(page, 'diff-flame');
    const px = await pixels(page, 'canvas[data-role="diff-flame"]');
    await shot(page, 'diff');
    return (px.red > 200 && px.green > 200) || `red ${px.red}, green ${px.green} pixels`;
  });
  await check('diff table equals /api/1/diff?format=top, labelled absolute', async () => {
    await page.waitForSelector('table[data-role="diff-table"] tbody tr');
    const api = await apiGet('api/1/diff', { base: 'cpu{version="1.0"}', target: 'cpu{version="1.1"}', format: 'top', n: 100000 });
    const got = await page.$$eval('table[data-role="diff-table"] tbody tr', (trs) => trs.map((tr) => [tr.querySelector('[data-key=name]').dataset.value, Number(tr.querySelector('[data-key=delta_flat]').dataset.value)]));
    const mode = await page.$eval('[data-role="diff-mode"]', (e) => e.textContent);
    if (!/^Absolute/.test(mode)) return 'mode: ' + mode;
    const want = api.rows.slice(0, 500).map((r) => [r.name, r.delta_flat]);
    return JSON.stringify(got.slice(0, 500)) === JSON.stringify(want) || `UI ${JSON.stringify(got.slice(0, 2))} API ${JSON.stringify(want.slice(0, 2))} (${got.length} vs ${api.rows.length})`;
  });
  await check('diff normalised mode: URL normalize=true, labelled, totals equal', async () => {
    await page.click('#normalize');
    await page.waitForSelector('[data-role="diff-mode"].norm');
    await waitCanvas(page, 'diff-flame');
    const api = await apiGet('api/1/diff', { base: 'cpu{version="1.0"}', target: 'cpu{version="1.1"}', format: 'top', normalize: 'true' });
    return (/normalize=true/.test(page.url()) && api.normalized === true) || page.url();
  });
  await check('diff without base/target picks two versions of the selection', async () => {
    await page.goto(`${BASE}/?view=diff&query=cpu`);
    await waitCanvas(page, 'diff-flame');
    const u = new URL(page.url()).searchParams;
    return (u.get('base') === 'cpu{version="1.0"}' && u.get('target') === 'cpu{version="1.1"}') || page.url();
  });

  // 5. fleet
  await check('fleet table equals /api/1/top (names, flat, per-service breakdown)', async () => {
    await page.goto(`${BASE}/?view=fleet&query=cpu`);
    await page.waitForSelector(VIEWS.fleet);
    const api = await apiGet('api/1/top', { query: 'cpu', n: 20 });
    const got = await page.$$eval('table[data-role="fleet"] tbody tr', (trs) => trs.map((tr) => [tr.querySelector('[data-key=name]').dataset.value, Number(tr.querySelector('[data-key=flat]').dataset.value), tr.querySelector('[data-key=services]').dataset.value]));
    const want = api.rows.map((r) => [r.name, r.flat, r.services.map((x) => x.service).join(',')]);
    const svc = await page.$$eval('.services .svc', (b) => b.length);
    return (JSON.stringify(got) === JSON.stringify(want) && svc === 3) || `UI ${JSON.stringify(got.slice(0, 2))} API ${JSON.stringify(want.slice(0, 2))}, ${svc} services`;
  });
  await check('fleet: clicking a function shows its cost over time and the services that spend it', async () => {
    const api = await apiGet('api/1/top', { query: 'cpu', n: 20 });
    await page.click('table[data-role="fleet"] tbody tr:first-child td[data-key=name]');
    await waitCanvas(page, 'fn-timeline');
    await page.waitForSelector('table[data-role="fn-services"] tbody tr');
    const fn = new URL(page.url()).searchParams.get('fn');
    const n = await page.$$eval('table[data-role="fn-services"] tbody tr', (t) => t.length);
    const px = await page.evaluate(() => { const c = document.querySelector('canvas[data-role="fn-timeline"]'); const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let k = 0; for (let i = 0; i < d.length; i += 4) if (Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) k++; return k; });
    const legend = await page.$$eval('.fn-panel .legend-item', (x) => x.map((e) => e.dataset.series));
    const missing = api.rows[0].services.filter((x) => !legend.includes(x.service)).map((x) => x.service);
    await shot(page, 'fleet');
    return (fn === api.rows[0].name && n === api.rows[0].services.length && px > 20 && !missing.length) || `fn ${fn}, ${n} services, ${px} coloured pixels, series ${legend}, missing ${missing}`;
  });

  // 5b. regressions
  // the page's /api/1/regressions request (absolute), and the API's answer to it
  const regressionsOfPage = async () => {
    const u = await page.evaluate(() => performance.getEntriesByType('resource').map((e) => e.name).filter((n) => n.includes('/api/1/regressions?')).pop());
    if (!u) throw new Error('the page made no /api/1/regressions request');
    const res = await fetch(u);
    return [new URL(u), (await res.json()).body];
  };
  // every cell of the page's tables against the answer; null when equal
  const sameAsApi = async (api, value) => {
    const ui = await page.$$eval('section[data-role="regress-comparison"]', (secs) => secs.map((sec) => ({
      service: sec.dataset.service, from: sec.dataset.from, to: sec.dataset.to,
      head: sec.querySelector('[data-role="regress-head"]').textContent,
      rows: [...sec.querySelectorAll('table[data-role="regress-rows"] tbody tr[data-name]')].map((tr) => {
        const v = (k) => tr.querySelector(`td[data-key="${k}"]`).dataset.value;
        const n = (k) => (v(k) === '' ? null : Number(v(k)));
        return { name: v('name'), base: n('base'), target: n('target'), change: n('change'), relative: n('relative'), noise: n('noise'), samples: v('samples'),
          within: tr.dataset.within === 'true', muted: tr.classList.contains('within-noise'), tag: /within noise/.test(tr.textContent),
          up: tr.querySelector('td[data-key="change"]').classList.contains('up'), down: tr.querySelector('td[data-key="change"]').classList.contains('down'),
          relText: tr.querySelector('td[data-key="relative"]').textContent };
      }),
    })));
    const cs = api.comparisons;
    if (ui.length !== cs.length) return `${ui.length} comparisons shown, the API has ${cs.length}`;
    for (let i = 0; i < cs.length; i++) {
      const c = cs[i], u = ui[i];
      const at = new Date(c.at).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
      if (u.service !== c.service || u.head !== `${c.service}: ${c.from} → ${c.to}, first seen ${at}`) return `comparison ${i}: "${u.head}", API ${c.service} ${c.from} ${c.to} ${c.at}`;
      if (u.rows.length !== c.rows.length) return `${c.service}: ${u.rows.length} rows, API ${c.rows.length}`;
      for (let j = 0; j < c.rows.length; j++) {
        const a = u.rows[j], x = c.rows[j][value];
        const b = { name: c.rows[j].name, base: x.base, target: x.target, change: x.change, relative: x.relative, noise: x.noise, samples: `${x.base_samples ?? ''}/${x.target_samples ?? ''}` };
        for (const k of Object.keys(b)) if (a[k] !== b[k]) return `${c.service} row ${j + 1} ${k}: UI ${a[k]}, API ${b[k]}`;
        if (a.within !== x.within_noise || a.muted !== x.within_noise || a.tag !== x.within_noise) return `${c.service} row ${j + 1} (${b.name}): within noise ${x.within_noise}, UI muted ${a.muted}, tagged ${a.tag}`;
        if (a.up !== x.change > 0 || a.down !== x.change < 0) return `${c.service} row ${j + 1}: change ${x.change}, coloured up ${a.up} down ${a.down}`;
        if ((x.relative === null) !== (a.relText === 'new')) return `${c.service} row ${j + 1}: relative ${x.relative} shown "${a.relText}"`;
      }
    }
    const fleet = await page.$$eval('table[data-role="regress-fleet"] tbody tr', (trs) => trs.map((tr) => [tr.querySelector('[data-key=name]').dataset.value, Number(tr.querySelector('[data-key=change]').dataset.value), tr.querySelector('[data-key=services]').dataset.value]));
    const wf = (api.fleet || []).map((f) => [f.name, f.change, f.services.join(',')]);
    if (JSON.stringify(fleet) !== JSON.stringify(wf)) return `fleet: UI ${JSON.stringify(fleet.slice(0, 2))}, API ${JSON.stringify(wf.slice(0, 2))} (${fleet.length} vs ${wf.length})`;
    return null;
  };
  let reg = null;
  await check('regressions: one comparison per rollout (auth, ingest, search: 1.0 → 1.1), the rates\' mode and unit stated', async () => {
    await page.goto(`${BASE}/?view=regressions&query=cpu`);
    await page.waitForSelector(VIEWS.regressions);
    const [u, api] = await regressionsOfPage();
    reg = api;
    const mode = await page.$eval('[data-role="regress-mode"]', (e) => e.textContent);
    const got = api.comparisons.map((c) => `${c.service} ${c.from} ${c.to}`).join(', ');
    if (got !== 'auth 1.0 1.1, ingest 1.0 1.1, search 1.0 1.1') return 'API comparisons: ' + got;
    if (u.searchParams.get('label') !== 'version' || u.searchParams.get('min_change') !== '5%' || u.searchParams.get('query') !== 'cpu') return 'request ' + u;
    return (mode.includes(api.rate_unit) && mode.includes(api.mode) && api.rate_unit === 'share of CPU time') || `mode "${mode}", API ${api.rate_unit} / ${api.mode}`;
  });
  await check('regressions: every table cell (rates, change, relative, noise, samples, within noise, colour) and the fleet table equal the API\'s JSON for the same URL', async () => {
    const [, api] = await regressionsOfPage();
    const n = api.comparisons.reduce((a, c) => a + c.rows.length, 0);
    if (!n) return 'no rows in any comparison';
    return (await sameAsApi(api, 'flat')) || true;
  });
  await check('regressions: rank by cum and min change "any" go into the URL and the tables follow', async () => {
    await page.selectOption('[data-role="regress-value"]', 'cum');
    await page.waitForFunction(() => /value=cum/.test(location.search));
    await page.waitForSelector(VIEWS.regressions);
    await page.selectOption('[data-role="regress-min"]', '0');
    await page.waitForFunction(() => /min_change=0/.test(location.search));
    await page.waitForSelector('[data-role="regress-min"]');
    await page.waitForFunction(() => document.querySelector('[data-role="regress-min"]').value === '0');
    const [u, api] = await regressionsOfPage();
    if (u.searchParams.get('value') !== 'cum' || u.searchParams.get('min_change') !== '0') return 'request ' + u;
    const rows = (x) => x.comparisons.reduce((a, c) => a + c.rows.length, 0);
    if (rows(api) < rows(reg)) return `min_change=0: ${rows(api)} rows, 5%: ${rows(reg)}`;
    return (await sameAsApi(api, 'cum')) || true;
  });
  await check('regressions: clicking a row opens the diff of that service\'s two versions (URL base/target, diff drawn)', async () => {
    await page.goto(`${BASE}/?view=regressions&query=cpu&min_change=0`);
    await page.waitForSelector(VIEWS.regressions);
    const sec = await page.$('section[data-role="regress-comparison"][data-service="search"]');
    const tr = await sec.$('table[data-role="regress-rows"] tbody tr[data-name]');
    const name = await tr.getAttribute('data-name');
    await tr.click();
    await waitCanvas(page, 'diff-flame');
    const u = new URL(page.url()).searchParams;
    if (u.get('view') !== 'diff' || u.get('base') !== 'cpu{service="search", version="1.0"}' || u.get('target') !== 'cpu{service="search", version="1.1"}') return page.url();
    const px = await pixels(page, 'canvas[data-role="diff-flame"]');
    const summary = await page.$eval('[data-role="diff-summary"]', (e) => e.textContent);
    const hl = await page.$eval('[data-role="diff-search"]', (e) => e.textContent);
    return (px.fg > px.total * 0.02 && /base: 1 profiles/.test(summary) && /target: 1 profiles/.test(summary) && hl.includes(name.replace(/[\\.+*?()|[\]{}^$]/g, '\\$&'))) || `${px.fg} of ${px.total} pixels, "${summary}", "${hl}"`;
  });
  await check('regressions: a comparison\'s header opens its diff too', async () => {
    await page.goBack();
    await page.waitForSelector(VIEWS.regressions);
    await page.click('section[data-role="regress-comparison"][data-service="auth"] [data-role="regress-head"]');
    await waitCanvas(page, 'diff-flame');
    const u = new URL(page.url()).searchParams;
    return (u.get('base') === 'cpu{service="auth", version="1.0"}' && u.get('target') === 'cpu{service="auth", version="1.1"}' && !u.get('search')) || page.url();
  });
  await check('regressions: no rollout of the label (env has one value) says so', async () => {
    await page.goto(`${BASE}/?view=regressions&query=cpu&label=env`);
    await page.waitForSelector('[data-role="regress-empty"]');
    const t = await page.$eval('[data-role="regress-empty"]', (e) => e.textContent);
    const label = await page.$eval('[data-role="regress-label"]', (e) => e.value);
    return (t.includes('no rollout of label env in the range: no service has two values of it') && label === 'env') || t;
  });
  await check('regressions: an API error is shown as the other views show it', async () => {
    await page.goto(`${BASE}/?view=regressions&query=${encodeURIComponent('{service="auth"}')}`);
    await page.waitForSelector('main .error[data-status="400"]');
    page.problems.splice(0);
    return true;
  });

  // 6. profiles
  await check('profiles: the 6 cpu profiles listed, one downloads as the stored pprof', async () => {
    await page.goto(`${BASE}/?view=profiles&query=cpu`);
    await page.waitForSelector(VIEWS.profiles);
    const n = await page.$eval('[data-role="profiles-info"]', (e) => Number(e.dataset.count));
    if (n !== 6) return `${n} profiles`;
    const id = await page.$eval('table[data-role="profiles"] tbody tr td[data-key=id]', (td) => td.dataset.value);
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('table[data-role="profiles"] tbody tr:first-child [data-role="download-profile"]')]);
    const file = await dl.path();
    const got = fs.readFileSync(file);
    const want = Buffer.from(await (await fetch(`${BASE}/api/0/profiles/${id}`)).arrayBuffer());
    return (got.equals(want) && got[0] === 0x1f && got[1] === 0x8b) || `downloaded ${got.length} bytes, API ${want.length}`;
  });
  await check('profiles: each profile\'s size (bytes, formatted) is a column', async () => {
    const api = await apiGet('api/1/profiles', { query: 'cpu{service="auth"}' });
    await page.goto(`${BASE}/?view=profiles&query=${encodeURIComponent('cpu{service="auth"}')}`);
    await page.waitForSelector(VIEWS.profiles);
    const got = await page.$$eval('table[data-role="profiles"] tbody tr', (trs) => trs.map((tr) => [tr.querySelector('td[data-key=id]').dataset.value, Number(tr.querySelector('td[data-key=size]').dataset.value), tr.querySelector('td[data-key=size]').textContent]));
    const want = api.map((p) => [p.id, p.size]);
    return (JSON.stringify(got.map((g) => g.slice(0, 2))) === JSON.stringify(want) && got.every((g) => /^[0-9.]+(B|kB|MB)$/.test(g[2])) && want.every((w) => w[1] > 0)) || `UI ${JSON.stringify(got)}, API ${JSON.stringify(want)}`;
  });
  await check('profiles: open one by id: id= in the URL and the merge, "profile ID" in the selection bar, flame total = /api/1/merge?id=&format=top', async () => {
    await page.goto(`${BASE}/?view=profiles&query=${encodeURIComponent('cpu{service="auth"}')}`);
    await page.waitForSelector(VIEWS.profiles);
    const id = await page.$eval('table[data-role="profiles"] tbody tr:first-child td[data-key=id]', (td) => td.dataset.value);
    await page.click('table[data-role="profiles"] tbody tr:first-child [data-role="open-profile"]');
    await waitCanvas(page, 'flame');
    const api = await apiGet('api/1/merge', { id, format: 'top', n: 1 });
    const info = await page.$eval('[data-role="flame-info"]', (e) => ({ text: e.textContent, total: Number(e.dataset.total), profiles: Number(e.dataset.profiles) }));
    const chip = await page.$eval('[data-role="profile-id"]', (e) => e.textContent);
    const merges = await page.evaluate(() => performance.getEntriesByType('resource').map((e) => e.name).filter((n) => n.includes('/api/1/merge?')));
    const u = new URL(page.url()).searchParams;
    if (u.get('id') !== id || !chip.includes('profile ' + id)) return `URL id ${u.get('id')}, chip "${chip}" (want ${id})`;
    if (!merges.length || !merges.every((m) => new URL(m).searchParams.get('id') === id && !new URL(m).searchParams.get('query'))) return 'merges: ' + merges.join(' ');
    if (api.profiles !== 1 || info.profiles !== 1 || !/· 1 profile ·/.test(info.text)) return `${info.text} (API: ${api.profiles} profiles)`;
    return info.total === api.total || `flame total ${info.total}, API ${api.total}`;
  });
  await check('profiles: clearing the profile id goes back to the whole selection', async () => {
    await page.click('[data-role="clear-id"]');
    await page.waitForFunction(() => !new URLSearchParams(location.search).get('id') && document.querySelector('[data-role="flame-info"]')?.dataset.profiles === '2');
    return (await page.$('[data-role="profile-id"]')) === null || 'chip still shown';
  });
  await check('profiles: pick two and diff them', async () => {
    await page.goto(`${BASE}/?view=profiles&query=${encodeURIComponent('cpu{service="auth"}')}`);
    await page.waitForSelector(VIEWS.profiles);
    const picks = await page.$$('[data-role="pick"]');
    await picks[0].check();
    await picks[1].check();
    await page.click('[data-role="diff-picked"]');
    await waitCanvas(page, 'diff-flame');
    const u = new URL(page.url()).searchParams;
    const summary = await page.$eval('[data-role="diff-summary"]', (e) => e.textContent);
    return (u.get('base_from') && /base: 1 profiles/.test(summary) && /target: 1 profiles/.test(summary)) || summary;
  });

  // 7. timeline
  await check('timeline drawn; clicking a bar opens the profiles of that step', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu`);
    await waitCanvas(page, 'timeline');
    const tl = await (await page.$('canvas[data-role="timeline"]')).boundingBox();
    const x = await page.evaluate(() => {
      const c = document.querySelector('canvas[data-role="timeline"]');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const y = c.height - Math.round(24 * (c.width / c.clientWidth));
      for (let x = c.width - 1; x > 60; x--) { const i = (y * c.width + x) * 4; if (Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) return x / (c.width / c.clientWidth); }
      return -1;
    });
    if (x < 0) return 'no bar drawn';
    await page.mouse.click(tl.x + x - 1, tl.y + tl.height - 24);
    await page.waitForSelector(VIEWS.profiles);
    const n = await page.$eval('[data-role="profiles-info"]', (e) => Number(e.dataset.count));
    const u = new URL(page.url()).searchParams;
    return (u.get('view') === 'profiles' && /^\d+$/.test(u.get('from')) && n > 0) || `${page.url()}: ${n} profiles`;
  });
  await check('a busy collector (503 with Retry-After) is asked again: the timeline is drawn, no error shown', async () => {
    let calls = 0;
    const busy = async (route) => {
      if (++calls === 1) {
        await route.fulfill({ status: 503, headers: { 'Retry-After': '1', 'Content-Type': 'application/json' },
          body: '{"code":503,"error":"4 merges are running, the limit (--max-concurrent-merges): try again"}' });
      } else await route.continue();
    };
    await page.route(/\/api\/1\/series\?/, busy);
    try {
      const t0 = Date.now();
      await page.goto(`${BASE}/?view=flame&query=cpu&from=now-2h&to=now`);
      await waitCanvas(page, 'timeline'); // sized when its data is drawn
      const shown = await page.$$eval('.error, [role="alert"]', (els) => els.map((e) => e.textContent.trim()).filter(Boolean).join(' | '));
      const waited = Date.now() - t0;
      if (calls < 2) return `the series was asked ${calls} time(s)`;
      if (shown) return 'an error is shown: ' + shown;
      if (waited < 900) return `answered after ${waited} ms: Retry-After (1 s) not honoured`;
      return problems(page) || true;
    } finally {
      await page.unroute(/\/api\/1\/series\?/, busy);
    }
  });
  await check('timeline drag zooms into an absolute range', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu`);
    await waitCanvas(page, 'timeline');
    const tl = await (await page.$('canvas[data-role="timeline"]')).boundingBox();
    const bar = await page.evaluate(() => {
      const c = document.querySelector('canvas[data-role="timeline"]');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, r = c.width / c.clientWidth;
      const y = c.height - Math.round(24 * r);
      for (let x = c.width - 1; x > 60; x--) { const i = (y * c.width + x) * 4; if (Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) return x / r; }
      return -1;
    });
    if (bar < 0) return 'no bar drawn';
    await page.mouse.move(tl.x + Math.max(62, bar - 150), tl.y + 40);
    await page.mouse.down();
    await page.mouse.move(tl.x + Math.min(tl.width - 5, bar + 20), tl.y + 40, { steps: 5 });
    await page.mouse.up();
    await page.waitForFunction(() => /^\d+$/.test(new URLSearchParams(location.search).get('from') || ''));
    const u = new URL(page.url()).searchParams;
    await waitCanvas(page, 'flame');
    return (Number(u.get('to')) > Number(u.get('from')) && !problems(page)) || page.url();
  });

  // 8. actions: downloads, go tool pprof URL, CLI
  await check('download pprof (flame graph view) = /api/1/merge pprof', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu`);
    await waitCanvas(page, 'flame');
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('[data-role="download"]')]);
    const got = fs.readFileSync(await dl.path());
    return (got[0] === 0x1f && got[1] === 0x8b && got.length > 1000) || `${got.length} bytes`;
  });
  await check('copied go tool pprof URL is absolute, with absolute times, and answers a pprof', async () => {
    await page.click('[data-role="copy-pprof"]');
    const t = await page.$eval('#copied', (i) => i.value);
    const m = /^go tool pprof -http=: '([^']+)'$/.exec(t);
    if (!m) return t;
    const u = new URL(m[1]);
    if (!m[1].startsWith(BASE + '/api/1/merge?') || /now/.test(u.searchParams.get('from') + u.searchParams.get('to'))) return m[1];
    const res = await fetch(m[1]);
    const b = Buffer.from(await res.arrayBuffer());
    return (res.status === 200 && b[0] === 0x1f) || `${res.status}`;
  });
  await check('copied CLI for one service is profd merge with its real flags', async () => {
    await page.goto(`${BASE}/?view=flame&query=${encodeURIComponent('cpu{service="auth", version="1.0"}')}`);
    await waitCanvas(page, 'flame');
    await page.click('[data-role="copy-cli"]');
    const t = await page.$eval('#copied', (i) => i.value);
    return t === `profd merge --service auth --type cpu -l version=1.0 -o auth-cpu.pb.gz --collector ${BASE}` || t;
  });
  await check('copied CLI of the top table is profd top', async () => {
    await page.goto(`${BASE}/?view=table&query=cpu&n=100`);
    await page.waitForSelector(VIEWS.table);
    await page.click('[data-role="copy-cli"]');
    const t = await page.$eval('#copied', (i) => i.value);
    return t === `profd top --all --type cpu -n 100 --collector ${BASE}` || t;
  });

  // 9. navigation, keyboard, themes, errors, phone
  await check('tabs and browser back/forward move between views', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu`);
    await waitCanvas(page, 'flame');
    await page.click('#tabs [data-view="fleet"]');
    await page.waitForSelector(VIEWS.fleet);
    await page.goBack();
    await waitCanvas(page, 'flame');
    await page.goForward();
    await page.waitForSelector(VIEWS.fleet);
    return problems(page) || true;
  });
  await check('keyboard: ? lists the shortcuts, Esc closes, t opens the top table', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu`);
    await waitCanvas(page, 'flame');
    await page.keyboard.press('?');
    await page.waitForSelector('#help-dialog[open]');
    const n = await page.$$eval('#help-dialog kbd', (k) => k.length);
    await page.keyboard.press('Escape');
    await page.waitForSelector('#help-dialog', { state: 'detached' });
    await page.keyboard.press('t');
    await page.waitForSelector(VIEWS.table);
    await page.keyboard.press('g');
    await page.waitForSelector(VIEWS.regressions);
    return n >= 6 || `${n} shortcuts`;
  });
  await check('theme toggle: dark theme, the flame graph redrawn on a dark background', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu`);
    await waitCanvas(page, 'flame');
    await page.click('#theme');
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
    await waitCanvas(page, 'flame');
    const bgVar = await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue('--flame-bg').trim());
    const px = await pixels(page, 'canvas[data-role="flame"]');
    const bg = parseInt(bgVar.slice(1, 3), 16) + parseInt(bgVar.slice(3, 5), 16) + parseInt(bgVar.slice(5, 7), 16);
    await shot(page, 'flame-dark');
    await page.click('#theme');
    return (bg < 150 && px.fg < 0.95 * px.total && px.fg > 0.05 * px.total) || `background ${bgVar}, ${px.fg} of ${px.total} pixels not background`;
  });
  await check('prefers-color-scheme: dark opens in the dark theme', async () => {
    const p = await open({ colorScheme: 'dark' });
    await p.goto(`${BASE}/?view=table&query=cpu`);
    await p.waitForSelector(VIEWS.table);
    const t = await p.evaluate(() => document.documentElement.dataset.theme);
    await p.context().close();
    return t === 'dark' || t;
  });
  await check('a bad selector shows the API\'s error message', async () => {
    await page.goto(`${BASE}/?view=flame&query=${encodeURIComponent('cpu{service="""}')}`);
    await page.waitForSelector('main .error');
    const t = await page.$eval('main .error', (e) => e.textContent);
    page.problems.splice(0);
    return (/bad query/.test(t) && /at \d+/.test(t)) || t;
  });
  await check('phone width (390px): flame graph drawn, no horizontal scrolling', async () => {
    const p = await open({ viewport: { width: 390, height: 844 } });
    await p.goto(`${BASE}/?view=flame&query=cpu`);
    await waitCanvas(p, 'flame');
    const r = await p.evaluate(() => ({ sw: document.documentElement.scrollWidth, cw: document.querySelector('canvas[data-role="flame"]').clientWidth }));
    await shot(p, 'phone');
    const pr = problems(p);
    await p.context().close();
    return (r.sw <= 391 && r.cw > 300 && !pr) || `${JSON.stringify(r)} ${pr || ''}`;
  });
  await check('no console error, CSP violation or failed request over the whole session', async () => problems(page) || true);
}

async function tokenPhase() {
  const page = await open({ allow: (u, st) => st === 401 || /401|Unauthorized/.test(u) });
  const auths = [];
  page.on('request', (r) => { if (r.url().includes('/api/')) auths.push(r.headers().authorization || ''); });
  await check('tokens: the page and its files load without a token; the API\'s 401 opens the token form', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu`);
    await page.waitForSelector('#token-dialog[open]');
    const t = await page.$eval('#token-dialog', (d) => d.textContent);
    await shot(page, 'token');
    return /needs a token/.test(t) && /unauthorized/.test(t) || t;
  });
  await check('tokens: without a token, a clear message (the API\'s) and a way to enter one', async () => {
    await page.click('#token-dialog button:has-text("Cancel")');
    await page.waitForSelector('main .error[data-status="401"]');
    const t = await page.$eval('main .error', (e) => e.textContent);
    const btn = await page.$('main .error [data-role="enter-token"]');
    return (/unauthorized: this collector needs a token/.test(t) && !!btn) || t;
  });
  await check('tokens: a wrong token is refused with the API\'s message', async () => {
    await page.click('main .error [data-role="enter-token"]');
    await page.waitForSelector('#token-dialog[open]');
    await page.fill('#token-input', 'not-a-valid-token-0123456789');
    await page.press('#token-input', 'Enter');
    await page.waitForSelector('#token-dialog[open] >> text=The token was refused');
    await page.click('#token-dialog button:has-text("Cancel")');
    await page.waitForSelector('main .error[data-status="401"]');
    return true;
  });
  await check('tokens: with the read token every view works and each API call carries it', async () => {
    await page.click('main .error [data-role="enter-token"]');
    await page.waitForSelector('#token-dialog[open]');
    await page.fill('#token-input', cfg.readToken);
    await page.press('#token-input', 'Enter');
    await waitCanvas(page, 'flame');
    for (const v of ['table', 'fleet', 'profiles', 'regressions', 'diff']) {
      await page.click(`#tabs [data-view="${v}"]`);
      await page.waitForSelector(VIEWS[v]);
    }
    const stored = await page.evaluate(() => sessionStorage.getItem('profd-token'));
    auths.length = 0;
    await page.reload();
    await waitCanvas(page, 'diff-flame');
    const bad = auths.filter((a) => a !== 'Bearer ' + cfg.readToken);
    return (stored === cfg.readToken && auths.length > 0 && !bad.length) || `stored ${!!stored}, ${auths.length} API calls, ${bad.length} without the token`;
  });
  await check('tokens: pprof download goes through fetch with the token', async () => {
    await page.goto(`${BASE}/?view=flame&query=cpu`);
    await waitCanvas(page, 'flame');
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('[data-role="download"]')]);
    const got = fs.readFileSync(await dl.path());
    return (got[0] === 0x1f && got[1] === 0x8b) || `${got.length} bytes: ${got.slice(0, 60)}`;
  });
  await check('tokens: no console error or failed request but the 401s asked for', async () => problems(page) || true);
}

async function prefixPhase() {
  const P = BASE + '/profd/';
  const page = await open();
  const reqs = [];
  page.on('request', (r) => { if (!/^(data|blob):/.test(r.url())) reqs.push(r.url()); });
  const outside = () => reqs.filter((u) => !u.startsWith(P));
  await check('prefix: GET /profd is a redirect to /profd/ (query kept)', async () => {
    const res = await fetch(`${BASE}/profd?query=cpu`, { redirect: 'manual' });
    const loc = res.headers.get('location') || '';
    return ([301, 302, 307, 308].includes(res.status) && new URL(loc, BASE).href === `${P}?query=cpu`) || `${res.status} ${loc}`;
  });
  await check('prefix: the flame graph under /profd/ loads without a console error or failed request, every request under /profd/', async () => {
    await page.goto(`${P}?query=cpu`);
    await waitCanvas(page, 'flame');
    await page.waitForLoadState('networkidle');
    const base = await page.evaluate(() => document.baseURI);
    if (base !== P) return 'baseURI ' + base;
    if (!reqs.some((u) => u.startsWith(P + 'api/1/merge?'))) return 'no merge request under /profd/: ' + reqs.slice(0, 5).join(' ');
    return problems(page) || (outside().length ? 'outside /profd/: ' + outside().join(' ') : true);
  });
  await check('prefix: the copied go tool pprof URL is under /profd/api/1/merge and answers a pprof', async () => {
    await page.click('[data-role="copy-pprof"]');
    const t = await page.$eval('#copied', (i) => i.value);
    const m = /^go tool pprof -http=: '([^']+)'$/.exec(t);
    if (!m || !m[1].startsWith(P + 'api/1/merge?')) return t;
    const res = await fetch(m[1]);
    const b = Buffer.from(await res.arrayBuffer());
    return (res.status === 200 && b[0] === 0x1f && b[1] === 0x8b) || `${res.status}`;
  });
  await check('prefix: the tabs, the regressions view and a profile opened by id stay under /profd/', async () => {
    await page.click('#tabs [data-view="regressions"]');
    await page.waitForSelector(VIEWS.regressions);
    await page.click('#tabs [data-view="profiles"]');
    await page.waitForSelector(VIEWS.profiles);
    await page.click('table[data-role="profiles"] tbody tr:first-child [data-role="open-profile"]');
    await waitCanvas(page, 'flame');
    await page.waitForLoadState('networkidle');
    const path = await page.evaluate(() => location.pathname);
    if (path !== '/profd/' || !new URL(page.url()).searchParams.get('id')) return page.url();
    return problems(page) || (outside().length ? 'outside /profd/: ' + outside().join(' ') : true);
  });
}

// Profiles whose service names, labels, function and file names are markup,
// script, javascript: URLs, quotes, U+2028, a newline, invalid UTF-8 and a
// 5,000-character name (test_ui.sh posts them): every view shows them as
// text. Their payloads would set window.__xss or the title, or leave an
// <img src=x> in the page; the CSP would block an inline handler, so the
// element itself is looked for, and CSP violations are console errors.
async function hostilePhase() {
  const page = await open({ allow: (u, st) => st === 404 || / 404 /.test(u) }); // a selector of markup matches nothing: its error is shown
  const pwned = () => page.evaluate(() => {
    const bad = [];
    if (window.__xss !== undefined) bad.push('window.__xss = ' + window.__xss);
    if (!document.title.startsWith('profd')) bad.push('title ' + document.title.slice(0, 80));
    const n = document.querySelectorAll('img[src="x"], script:not([src]), [onerror], a[href^="javascript:"]').length;
    if (n) bad.push(n + ' injected elements');
    return bad.length ? bad.join('; ') : null;
  });
  const settle = async (sel) => { await page.waitForSelector(sel); await page.waitForLoadState('networkidle').catch(() => {}); };
  for (const v of Object.keys(VIEWS)) {
    await check(`hostile: view ${v} shows hostile strings as text (no element, no script, no CSP violation)`, async () => {
      await page.goto(`${BASE}/?view=${v}&query=cpu`);
      await settle(VIEWS[v]);
      return (await pwned()) || problems(page) || true;
    });
  }
  await check('hostile: the top table shows each hostile function name verbatim', async () => {
    const top = await apiGet('api/1/merge', { query: 'cpu', format: 'top', n: 100 });
    await page.goto(`${BASE}/?view=table&query=cpu`);
    await settle(VIEWS.table);
    const shown = await page.$$eval('table[data-role="top"] tbody td[data-key="name"]', (tds) => tds.map((t) => t.textContent));
    const missing = top.rows.filter((r) => !shown.includes(r.name)).map((r) => r.name.slice(0, 40));
    return (top.rows.length >= 6 && !missing.length) || `${top.rows.length} rows, missing ${JSON.stringify(missing)}`;
  });
  const x = '<img src=x onerror="window.__xss=5;document.title=\'XSS\'">';
  for (const [what, q] of [['sandwich', { sandwich: x }], ['search and focus', { search: x, focus: x }], ['fleet fn', { view: 'fleet', fn: x }],
    ['diff base/target', { view: 'diff', base: `cpu{service=${JSON.stringify(x)}}`, target: 'cpu' }], ['selector', { query: `cpu{env=${JSON.stringify(x)}}` }]]) {
    await check(`hostile: markup in the URL (${what}) is shown as text`, async () => {
      await page.goto(`${BASE}/?` + new URLSearchParams({ query: 'cpu', ...q }));
      await page.waitForLoadState('networkidle').catch(() => {});
      await page.waitForTimeout(200);
      return (await pwned()) || problems(page) || true;
    });
  }
  await check('hostile: fleet: a service named with a quote and a backslash opens its flame graph (the selector escapes it)', async () => {
    const svcs = await apiGet('api/0/services');
    const nl = svcs.find((v) => v.includes('"') && v.includes('\\'));
    if (!nl) return 'no service with a quote and a backslash: ' + JSON.stringify(svcs);
    await page.goto(`${BASE}/?view=fleet&query=cpu`);
    await settle(VIEWS.fleet);
    const btns = await page.$$('.services button.svc');
    let btn = null;
    for (const b of btns) if ((await b.getAttribute('data-service')) === nl) btn = b;
    if (!btn) return `no button for ${JSON.stringify(nl)}`;
    await btn.click();
    await waitCanvas(page, 'flame');
    const q = new URL(page.url()).searchParams.get('query');
    const err = await page.$('main .error');
    return (q === 'cpu{service="q\\"uo\\\\te"}' && !err && !(await pwned())) || `query ${q}, error ${err ? await err.textContent() : ''}`;
  });
  await check('hostile: no console error, CSP violation or failed request over the whole session', async () => problems(page) || true);
  // last: id=../../x is the collector's 400, shown
  for (const [what, q] of [['a service named ../../x y/z', { query: 'cpu{service="../../x y/z"}' }], ['id=../../x', { id: '../../x' }]]) {
    await check(`hostile: the copied CLI of ${what} saves to a file in the current directory`, async () => {
      await page.goto(`${BASE}/?` + new URLSearchParams({ query: 'cpu', ...q }));
      await page.waitForLoadState('networkidle').catch(() => {});
      await page.click('[data-role="copy-cli"]');
      const t = await page.$eval('#copied', (i) => i.value);
      const o = /-o '?([^' ]+)'?/.exec(t);
      return (o && !o[1].includes('/')) || t;
    });
  }
}
