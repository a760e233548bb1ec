// views/explore.js — the flame graph (with its sandwich and a linked top
// table) and the top table of the selection (/api/1/merge).
import { h, clear, fmtValue, fmtPct, reEscape, debounce } from '../util.js';
import * as api from '../api.js';
import { Flame, layout, pathOf, findPath, sandwich } from '../flame.js';
import { Table } from '../table.js';
import { cliMerge, cliTop, selOf, setSampleTypes } from '../app.js';

const layouts = new WeakMap();
export function layoutOf(data, diff) {
  let L = layouts.get(data);
  if (!L) { L = layout(data.root, { diff }); layouts.set(data, L); }
  return L;
}

function mergeActions(ctx, extra) {
  const s = ctx.state;
  const sel = selOf(s);
  ctx.setActions({
    download: { path: 'api/1/merge', params: sel, name: s.id ? s.id.split(',')[0] + '.pb.gz' : 'profile.pb.gz' },
    pprof: { path: 'api/1/merge', params: sel },
    cli: extra || (() => cliMerge(s)),
  });
}

export function topColumns(unit) {
  return [
    { key: 'flat', label: 'flat', kind: 'value', unit },
    { key: 'flat_pct', label: 'flat%', kind: 'pct' },
    { key: 'sum_pct', label: 'sum%', kind: 'pct' },
    { key: 'cum', label: 'cum', kind: 'value', unit },
    { key: 'cum_pct', label: 'cum%', kind: 'pct' },
    { key: 'name', label: 'name', kind: 'text', render: (td, v, r) => { td.textContent = v + (r.inline ? ' (inline)' : ''); td.title = v; } },
  ];
}

function withSum(rows) {
  let sum = 0;
  return rows.map((r) => { sum += r.flat_pct; return { ...r, sum_pct: sum }; });
}

export function flameSummary(data) {
  const bits = [`${fmtValue(data.total, data.unit)} total`, `${data.profiles} profile${data.profiles === 1 ? '' : 's'}`, `sample type ${data.sample_type} (${data.unit})`];
  if (data.normalization && data.normalization.mode && data.normalization.mode !== 'sum') bits.push(`aggregated: ${data.normalization.mode.replace(/_/g, ' ')}`);
  return bits.join(' · ');
}

export async function flameView(ctx) {
  const s = ctx.state, main = ctx.main;
  mergeActions(ctx);
  const maxNodes = s.max_nodes || '1000';
  loading(ctx, 'flame graph');
  const data = await api.get('api/1/merge', { ...selOf(s), si: s.si, format: 'flamegraph', max_nodes: maxNodes });
  if (!ctx.live()) return;
  setSampleTypes(s, data.sample_types);
  clear(main);
  const L = layoutOf(data, false);
  const search = h('input', { type: 'search', class: 'search', 'data-role': 'search', placeholder: 'search functions (regex)', value: s.search, 'aria-label': 'search functions' });
  const found = h('span', { class: 'found', 'data-role': 'search-result', 'aria-live': 'polite' });
  const info = h('div', { class: 'muted small', 'data-role': 'flame-info', 'data-total': data.total, 'data-profiles': data.profiles }, flameSummary(data));
  if (data.truncated) {
    const more = Math.min(100000, Math.max(data.frames, Number(maxNodes) * 4));
    info.appendChild(h('span', {}, ` · ${data.nodes} of ${data.frames} frames shown (the smallest folded into "other") `,
      h('button', { type: 'button', class: 'link', 'data-role': 'more-frames', onclick: () => ctx.navigate({ max_nodes: String(more) }) }, `show ${more >= data.frames ? 'all' : more}`)));
  } else info.appendChild(h('span', {}, ` · ${data.frames} frames`));
  const crumbs = h('nav', { class: 'crumbs', 'data-role': 'breadcrumb', 'aria-label': 'zoom' });
  const host = h('div', { class: 'flame-host' });
  const sandHost = h('div', { class: 'sandwich' });
  const tableHost = h('div', { class: 'linked-table' });
  main.appendChild(h('div', { class: 'toolbar' }, search, found));
  main.appendChild(info);
  main.appendChild(crumbs);
  main.appendChild(sandHost);
  main.appendChild(host);
  main.appendChild(tableHost);

  const zoomTo = (i) => ctx.navigate({ focus: i > 0 ? pathOf(L, i).join(';') : '' });
  const fl = new Flame(host, {
    onClick: zoomTo,
    onSandwich: (name) => ctx.navigate({ sandwich: name }),
    onOther: (i) => ctx.navigate({ max_nodes: String(Math.min(100000, Number(maxNodes) * 4)), focus: L.parent[i] > 0 ? pathOf(L, L.parent[i]).join(';') : s.focus }),
  });
  ctx.onCleanup(() => fl.destroy());
  fl.set(L, { unit: data.unit, maxNodes });
  window.profdFlame = fl;
  const z = s.focus ? findPath(L, s.focus.split(';')) : 0;
  if (z) fl.setZoom(z);

  // breadcrumb
  if (z) {
    const path = [];
    for (let x = z; x >= 0; x = L.parent[x]) path.push(x);
    path.reverse().forEach((i, k) => {
      if (k) crumbs.appendChild(h('span', { class: 'sep' }, '›'));
      crumbs.appendChild(h('button', { type: 'button', class: 'crumb' + (i === z ? ' current' : ''), 'data-node': i, onclick: () => zoomTo(i) }, i === 0 ? 'all' : L.names[L.name[i]]));
    });
    crumbs.appendChild(h('button', { type: 'button', class: 'link', 'data-role': 'sandwich-zoomed', onclick: () => ctx.navigate({ sandwich: L.names[L.name[z]] }) }, 'sandwich'));
  } else crumbs.appendChild(h('span', { class: 'muted small' }, 'click a frame to zoom · right-click: its sandwich · / to search'));

  const doSearch = (text) => {
    const r = fl.setSearch(text);
    found.textContent = r ? `${r.count} matching frame${r.count === 1 ? '' : 's'} · ${fmtPct(r.pct)} of total (${fmtValue(r.value, data.unit)})` : '';
    found.dataset.count = r ? r.count : '';
    found.dataset.pct = r ? r.pct : '';
    if (sand) sand.forEach((f) => f.setSearch(text));
  };
  const upd = debounce(() => { doSearch(search.value); ctx.replace({ search: search.value }); }, 120);
  search.addEventListener('input', upd);

  // sandwich
  let sand = null;
  if (s.sandwich) {
    const sw = sandwich(L, s.sandwich);
    const Lc = layout(sw.callers), Le = layout(sw.callees);
    const ch = h('div', { class: 'flame-host' }), eh = h('div', { class: 'flame-host' });
    clear(sandHost);
    sandHost.appendChild(h('div', { class: 'row head' },
      h('strong', { 'data-role': 'sandwich-title' }, 'Sandwich: ' + s.sandwich),
      h('span', { class: 'muted small', 'data-role': 'sandwich-total', 'data-value': sw.total }, `${fmtValue(sw.total, data.unit)} · ${fmtPct(data.total ? (100 * sw.total) / data.total : 0)} of total · callers above, callees below`),
      h('button', { type: 'button', class: 'link', 'data-role': 'close-sandwich', onclick: () => ctx.navigate({ sandwich: '' }) }, 'close')));
    sandHost.appendChild(ch);
    sandHost.appendChild(eh);
    const fc = new Flame(ch, { inverted: true, role: 'sandwich-callers', onSandwich: (n) => ctx.navigate({ sandwich: n }), onClick: () => {} });
    const fe = new Flame(eh, { role: 'sandwich-callees', onSandwich: (n) => ctx.navigate({ sandwich: n }), onClick: () => {} });
    ctx.onCleanup(() => { fc.destroy(); fe.destroy(); });
    fc.set(Lc, { unit: data.unit });
    fe.set(Le, { unit: data.unit });
    sand = [fc, fe];
    if (!sw.total) sandHost.appendChild(h('p', { class: 'muted' }, `"${s.sandwich}" is not in this flame graph (folded into "other", or not in the selection).`));
  }
  if (s.search) doSearch(s.search);

  // linked top table
  const top = await api.get('api/1/merge', { ...selOf(s), si: s.si, format: 'top', n: 50 }).catch((e) => e);
  if (!ctx.live()) return;
  if (top instanceof Error) { ctx.showError(tableHost, top, 'Top table'); return; }
  tableHost.appendChild(h('div', { class: 'row head' }, h('strong', {}, 'Top functions'),
    h('span', { class: 'muted small' }, `${top.rows.length} of ${top.functions} · click a row to find it in the flame graph`),
    h('a', { href: '?' + new URLSearchParams({ ...Object.fromEntries(new URLSearchParams(location.search)), view: 'table' }), class: 'link', onclick: (e) => { e.preventDefault(); ctx.navigate({ view: 'table' }); } }, 'all functions')));
  new Table(tableHost, {
    columns: topColumns(top.unit), rows: withSum(top.rows), role: 'flame-top',
    onRow: (r) => { search.value = '^' + reEscape(r.name) + '$'; doSearch(search.value); ctx.replace({ search: search.value }); host.scrollIntoView({ block: 'nearest' }); },
    actions: [(r) => h('button', { type: 'button', class: 'link', onclick: () => ctx.navigate({ sandwich: r.name }) }, 'sandwich')],
  });
}

function loading(ctx, what) { ctx.loading(ctx.main, what); }

export async function tableView(ctx) {
  const s = ctx.state, main = ctx.main;
  const n = s.n || '1000';
  mergeActions(ctx, s.id ? null : () => cliTop(s, Number(n)));
  loading(ctx, 'top table');
  const top = await api.get('api/1/merge', { ...selOf(s), si: s.si, format: 'top', n, value: s.value });
  if (!ctx.live()) return;
  setSampleTypes(s, top.sample_types);
  clear(main);
  const nSel = h('select', { 'aria-label': 'rows', onchange: () => ctx.navigate({ n: nSel.value }) },
    ['100', '1000', '10000', '100000'].map((v) => h('option', { value: v }, v + ' rows')));
  nSel.value = ['100', '1000', '10000', '100000'].includes(n) ? n : '1000';
  const valSel = h('select', { 'aria-label': 'order', onchange: () => ctx.navigate({ value: valSel.value === 'flat' ? '' : valSel.value }) },
    h('option', { value: 'flat' }, 'ranked by flat (-top)'), h('option', { value: 'cum' }, 'ranked by cum (-top -cum)'));
  valSel.value = s.value || 'flat';
  main.appendChild(h('div', { class: 'muted small', 'data-role': 'top-info', 'data-total': top.total, 'data-functions': top.functions },
    `Type: ${top.sample_type} · Showing ${top.rows.length} of ${top.functions} functions, ${fmtValue(top.total, top.unit)} total (${top.unit}) · ${top.profiles} profiles`));
  new Table(main, {
    columns: topColumns(top.unit), rows: withSum(top.rows), role: 'top', sort: s.sort, dir: s.dir, filter: s.filter,
    tools: [nSel, valSel],
    onState: (st) => ctx.replace({ sort: st.sort, dir: st.sort ? st.dir : '', filter: st.filter }),
    onRow: (r) => ctx.navigate({ view: 'flame', search: '^' + reEscape(r.name) + '$' }),
    actions: [(r) => h('button', { type: 'button', class: 'link', onclick: () => ctx.navigate({ view: 'flame', sandwich: r.name }) }, 'sandwich')],
  });
}
