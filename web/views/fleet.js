// views/fleet.js — the hottest functions across every service (/api/1/top),
// each with its per-service breakdown; one function's cost over time
// (/api/1/series?function=^name$) and the services that spend it.
import { h, clear, fmtValue, fmtPct, parseSelector, withMatcher, reEscape, toUnix } from '../util.js';
import * as api from '../api.js';
import { Table } from '../table.js';
import { Timeline } from '../timeline.js';
import { cliTop } from '../app.js';

function autoStep(s) {
  const a = toUnix(s.from), b = toUnix(s.to);
  const span = a !== null && b !== null ? Math.max(1, b - a) : 3600;
  return [10, 30, 60, 300, 900, 3600, 21600, 86400].find((x) => span / x <= 100) || 86400;
}

export async function fleetView(ctx) {
  const s = ctx.state, main = ctx.main;
  const n = s.n || '20';
  const sel = { query: s.query, from: s.from, to: s.to };
  ctx.setActions({ download: { path: 'api/1/merge', params: sel, name: 'fleet.pb.gz' }, pprof: { path: 'api/1/merge', params: sel }, cli: () => cliTop(s, Number(n)) });
  ctx.loading(main, 'fleet top');
  const top = await api.get('api/1/top', { query: s.query, from: s.from, to: s.to, si: s.si, n, value: s.value });
  if (!ctx.live()) return;
  clear(main);
  const u = top.unit;
  const nSel = h('select', { 'aria-label': 'rows', onchange: () => ctx.navigate({ n: nSel.value }) }, ['10', '20', '50', '100', '1000'].map((v) => h('option', { value: v }, 'top ' + v)));
  nSel.value = n;
  main.appendChild(h('div', { class: 'muted small', 'data-role': 'fleet-info' },
    `${top.sample_type} (${u}) · ${fmtValue(top.total, u)} total over ${top.services.length} services, ${top.profiles} profiles` + (top.cores ? ` · ${top.cores.toFixed(3)} cores` : '') + ` · ${top.functions} functions`));
  const svc = h('div', { class: 'services' });
  for (const x of top.services) {
    svc.appendChild(h('button', { type: 'button', class: 'svc', 'data-service': x.service, title: 'open this service\'s flame graph', onclick: () => {
      ctx.navigate({ view: 'flame', query: withMatcher(parseSelector(s.query)?.type || '', 'service', '=', x.service) });
    } }, h('strong', {}, x.service), ` ${fmtPct(x.pct)} · ${x.profiles} profiles` + (x.cores !== undefined ? ` · ${x.cores.toFixed(3)} cores` : '')));
  }
  main.appendChild(svc);
  const fnHost = h('div', { class: 'fn-panel' });
  main.appendChild(fnHost);
  new Table(main, {
    role: 'fleet', rows: top.rows, sort: s.sort, dir: s.dir, filter: s.filter, tools: [nSel],
    onState: (st) => ctx.replace({ sort: st.sort, dir: st.sort ? st.dir : '', filter: st.filter }),
    columns: [
      { key: 'flat', label: 'flat', kind: 'value', unit: u },
      { key: 'flat_pct', label: 'flat%', kind: 'pct' },
      { key: 'cum', label: 'cum', kind: 'value', unit: u },
      { key: 'cum_pct', label: 'cum%', kind: 'pct' },
      { key: 'name', label: 'function', kind: 'text' },
      { key: 'services', label: 'services (flat share of the fleet)', kind: 'text', sortValue: (r) => r.services.length,
        render: (td, v) => { td.textContent = v.slice(0, 4).map((x) => `${x.service} ${fmtPct(x.flat_pct)}`).join(' · ') + (v.length > 4 ? ` · +${v.length - 4}` : ''); td.dataset.value = v.map((x) => x.service).join(','); } },
    ],
    onRow: (r) => ctx.navigate({ fn: r.name }),
  });
  if (s.fn) await fnPanel(ctx, fnHost, top);
}

async function fnPanel(ctx, el, top) {
  const s = ctx.state;
  const row = top.rows.find((r) => r.name === s.fn);
  const step = s.step || autoStep(s);
  el.appendChild(h('div', { class: 'row head' }, h('strong', { 'data-role': 'fn-title' }, s.fn),
    h('span', { class: 'muted small' }, `flat cost per ${step}s step, by service`),
    h('button', { type: 'button', class: 'link', onclick: () => ctx.navigate({ view: 'flame', search: '^' + reEscape(s.fn) + '$' }) }, 'find in flame graph'),
    h('button', { type: 'button', class: 'link', onclick: () => ctx.navigate({ view: 'flame', sandwich: s.fn }) }, 'sandwich'),
    h('button', { type: 'button', class: 'link', 'data-role': 'close-fn', onclick: () => ctx.navigate({ fn: '' }) }, 'close')));
  const body = h('div', {});
  el.appendChild(body);
  if (row) {
    new Table(el, {
      role: 'fn-services', rows: row.services,
      columns: [
        { key: 'service', label: 'service', kind: 'text' },
        { key: 'flat', label: 'flat', kind: 'value', unit: top.unit }, { key: 'flat_pct', label: 'flat%', kind: 'pct' },
        { key: 'cum', label: 'cum', kind: 'value', unit: top.unit }, { key: 'cum_pct', label: 'cum%', kind: 'pct' },
      ],
    });
  }
  ctx.loading(body, 'series');
  try {
    const data = await api.get('api/1/series', { query: s.query, from: s.from, to: s.to, si: s.si, step, by: 'service', function: '^' + reEscape(s.fn) + '$' });
    if (!ctx.live()) return;
    clear(body);
    const tl = new Timeline(body, { role: 'fn-timeline', onZoom: (a, b) => ctx.navigate({ from: String(a), to: String(b) }) });
    ctx.onCleanup(() => tl.destroy());
    tl.set(data);
  } catch (e) { if (ctx.live()) ctx.showError(body, e, 'Series'); }
}
