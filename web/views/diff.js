// views/diff.js — two selections compared (/api/1/diff): a flame graph
// coloured by change (red grew, green shrank) and a table of deltas.
import { h, clear, fmtValue, fmtPct, parseSelector, withMatcher, reEscape, debounce, shQuote } from '../util.js';
import * as api from '../api.js';
import { Flame, layout } from '../flame.js';
import { Table } from '../table.js';
import { cli } from '../app.js';

function diffParams(s) {
  return { base: s.base, target: s.target, from: s.from, to: s.to, base_from: s.base_from, base_to: s.base_to, normalize: s.normalize === 'true' ? 'true' : '', si: s.si };
}

function cliDiff(s) {
  const a = ['diff', '--base', s.base, '--target', s.target];
  if (s.from && s.from !== 'now-1h') a.push('--from', s.from);
  if (s.to && s.to !== 'now') a.push('--to', s.to);
  if (s.base_from) a.push('--base-from', s.base_from);
  if (s.base_to) a.push('--base-to', s.base_to);
  if (s.si) a.push('-i', s.si);
  if (s.normalize === 'true') a.push('--normalize');
  a.push('-n', '0');
  return cli(a);
}

async function defaults(ctx) {
  const s = ctx.state;
  const q = s.query || 'cpu';
  const type = parseSelector(q)?.type || '';
  try {
    const vs = await api.get('api/1/labels/version/values', { query: q, from: s.from, to: s.to });
    if (vs.length >= 2) return { base: withMatcher(q, 'version', '=', vs[0]), target: withMatcher(q, 'version', '=', vs[vs.length - 1]) };
  } catch (e) { /* no version label */ }
  return { base: q || type, target: q || type };
}

export async function diffView(ctx) {
  const s = ctx.state, main = ctx.main;
  if (!s.base || !s.target) {
    ctx.loading(main, 'labels');
    const d = await defaults(ctx);
    if (!ctx.live()) return;
    ctx.navigate({ base: s.base || d.base, target: s.target || d.target }, { replace: true });
    return;
  }
  const p = diffParams(s);
  ctx.setActions({ download: { path: 'api/1/diff', params: { ...p, format: 'pprof' }, name: 'diff.pb.gz' }, pprof: { path: 'api/1/diff', params: { ...p, format: 'pprof' } }, cli: () => cliDiff(s) });
  clear(main);

  // the two selections
  const baseIn = h('input', { id: 'base', class: 'query', value: s.base, 'aria-label': 'base selector', spellcheck: 'false' });
  const targetIn = h('input', { id: 'target', class: 'query', value: s.target, 'aria-label': 'target selector', spellcheck: 'false' });
  const bfIn = h('input', { id: 'base_from', value: s.base_from, placeholder: 'as target', size: 11, 'aria-label': 'base from' });
  const btIn = h('input', { id: 'base_to', value: s.base_to, placeholder: 'as target', size: 11, 'aria-label': 'base to' });
  const norm = h('input', { type: 'checkbox', id: 'normalize', checked: s.normalize === 'true', onchange: () => ctx.navigate({ normalize: norm.checked ? 'true' : '' }) });
  const form = h('form', { class: 'diff-form panel', onsubmit: (e) => {
    e.preventDefault();
    ctx.navigate({ base: baseIn.value.trim(), target: targetIn.value.trim(), base_from: bfIn.value.trim(), base_to: btIn.value.trim() });
  } },
  h('div', { class: 'row' }, h('label', { class: 'side base' }, 'Base ', baseIn), h('span', { class: 'muted small' }, 'range'), bfIn, h('span', { class: 'muted' }, '→'), btIn),
  h('div', { class: 'row' }, h('label', { class: 'side target' }, 'Target ', targetIn), h('span', { class: 'muted small' }, 'range: the selection bar\'s'),
    h('button', { type: 'submit' }, 'Compare'),
    h('button', { type: 'button', title: 'swap base and target', onclick: () => ctx.navigate({ base: s.target, target: s.base, base_from: s.from === 'now-1h' ? '' : s.from, base_to: s.to === 'now' ? '' : s.to, from: s.base_from || s.from, to: s.base_to || s.to }) }, '⇅ swap'),
    h('label', { class: 'check' }, norm, ' normalised')));
  main.appendChild(form);
  const mode = h('p', { class: 'mode ' + (s.normalize === 'true' ? 'norm' : 'abs'), 'data-role': 'diff-mode' },
    s.normalize === 'true'
      ? 'Normalised: the target is scaled so that its total equals the base\'s (pprof -normalize): shapes are compared, not volumes. Values: scaled target − base.'
      : 'Absolute: values are target − base, in the profiles\' unit (pprof -diff_base). Percentages are of the base\'s total.');
  main.appendChild(mode);
  const summary = h('div', { class: 'muted small', 'data-role': 'diff-summary' });
  const legend = h('div', { class: 'legend diff-legend' }, h('span', { class: 'swatch grew' }), 'grew', h('span', { class: 'swatch shrank' }), 'shrank',
    h('span', { class: 'muted small' }, ' · intensity: size of the change · width: base + target'));
  const host = h('div', { class: 'flame-host' });
  const tableHost = h('div', {});
  main.appendChild(summary);
  main.appendChild(legend);
  main.appendChild(host);
  main.appendChild(tableHost);
  ctx.loading(host, 'diff');

  const [fg, top] = await Promise.all([
    api.get('api/1/diff', { ...p, format: 'flamegraph', max_nodes: s.max_nodes || '1000' }).catch((e) => e),
    api.get('api/1/diff', { ...p, format: 'top', n: 100000 }).catch((e) => e),
  ]);
  if (!ctx.live()) return;
  if (fg instanceof Error) { ctx.showError(host, fg, 'Diff'); clear(legend); return; }
  clear(host);
  if (!(top instanceof Error)) {
    summary.textContent = `${top.sample_type} (${top.unit}) · base: ${top.base.profiles} profiles, ${fmtValue(top.base.total, top.unit)} · target: ${top.target.profiles} profiles, ${fmtValue(top.target.total, top.unit)} · ${top.functions} functions changed`;
  }
  const L = layout(fg.root, { diff: true });
  const fl = new Flame(host, {
    role: 'diff-flame',
    onClick: (i) => fl.setZoom(i),
    onOther: () => ctx.navigate({ max_nodes: String(Math.min(100000, Number(s.max_nodes || 1000) * 4)) }),
  });
  ctx.onCleanup(() => fl.destroy());
  fl.set(L, { unit: fg.unit, baseTotal: fg.root.base || (top.total || 0), maxNodes: s.max_nodes || 1000 });
  window.profdFlame = fl;
  if (s.search) {
    fl.setSearch(s.search);
    legend.appendChild(h('span', { class: 'small', 'data-role': 'diff-search' }, ` · highlighted: ${s.search} `,
      h('button', { type: 'button', class: 'link', onclick: () => ctx.navigate({ search: '' }) }, 'clear')));
  }
  if (top instanceof Error) { ctx.showError(tableHost, top, 'Diff table'); return; }
  const u = top.unit;
  new Table(tableHost, {
    role: 'diff-table', rows: top.rows, sort: s.sort, dir: s.dir, filter: s.filter,
    onState: (st) => ctx.replace({ sort: st.sort, dir: st.sort ? st.dir : '', filter: st.filter }),
    columns: [
      { key: 'delta_flat', label: 'Δ flat', kind: 'signed', unit: u, abs: true },
      { key: 'delta_flat_pct', label: 'Δ flat%', kind: 'spct', abs: true },
      { key: 'delta_cum', label: 'Δ cum', kind: 'signed', unit: u, abs: true },
      { key: 'delta_cum_pct', label: 'Δ cum%', kind: 'spct', abs: true },
      { key: 'base_flat', label: 'base flat', kind: 'value', unit: u },
      { key: 'target_flat', label: 'target flat', kind: 'value', unit: u },
      { key: 'name', label: 'name', kind: 'text' },
    ],
    onRow: (r) => { fl.setSearch('^' + reEscape(r.name) + '$'); host.scrollIntoView({ block: 'nearest' }); },
  });
}
