// views/regressions.js — what got costlier after each rollout
// (/api/1/regressions): per service and version change, every function's
// rate before and after, its change and noise; each row opens the diff of
// the two versions.
import { h, clear, fmtValue, fmtSigned, fmtTime, toUnix, withMatcher, reEscape } from '../util.js';
import * as api from '../api.js';
import { cli } from '../app.js';

const MINS = ['0', '1%', '5%', '10%', '25%', '50%'];
const NS = ['10', '20', '50', '100', '1000'];
const SHARE = 'share of CPU time';

function rowsOf(s) { return NS.includes(s.n) ? s.n : '20'; }

function params(s) {
  return { query: s.query, from: s.from, to: s.to, label: s.label || 'version', min_change: s.min_change || '0', value: s.value === 'cum' ? 'cum' : 'flat', n: rowsOf(s), si: s.si };
}

function cliRegressions(s) {
  const p = params(s);
  const a = ['regressions', '--query', p.query, '--from', p.from || 'now-1h', '--to', p.to || 'now'];
  if (p.label !== 'version') a.push('--label', p.label);
  if (p.min_change !== '0') a.push('--min-change', p.min_change);
  a.push('-n', p.n);
  if (p.value === 'cum') a.push('--cum');
  if (s.si) a.push('-i', s.si);
  return cli(a);
}

// how the answer's rates read: a share of the CPU in %, else the profiles' unit
function formats(r) {
  if (r.rate_unit === SHARE) {
    const pc = (x) => { const p = 100 * x, a = Math.abs(p); return a === 0 ? '0' : a >= 1 ? p.toFixed(2) : p.toPrecision(2); };
    return { v: (x) => pc(x) + '%', d: (x) => (x > 0 ? '+' : '') + pc(x) + ' pp', n: (x) => '±' + pc(x) + ' pp' };
  }
  return { v: (x) => fmtValue(x, r.unit), d: (x) => fmtSigned(x, r.unit), n: (x) => '±' + fmtValue(x, r.unit) };
}

const num = (v) => (v === null || v === undefined ? '' : String(v));
const td = (key, v, text, cls) => h('td', { class: 'num' + (cls ? ' ' + cls : ''), 'data-key': key, 'data-value': num(v) }, text);
const updown = (x) => (x > 0 ? 'up' : x < 0 ? 'down' : '');

export async function regressionsView(ctx) {
  const s = ctx.state, main = ctx.main;
  const p = params(s);
  ctx.setActions({ cli: () => cliRegressions(s) });
  ctx.loading(main, 'regressions');
  const r = await api.get('api/1/regressions', p);
  if (!ctx.live()) return;
  clear(main);
  const F = formats(r);

  // controls, in the URL like every view
  const labelIn = h('input', { id: 'regress-label', 'data-role': 'regress-label', list: 'dl-regress-labels', value: p.label, size: 10, 'aria-label': 'version label', autocomplete: 'off' });
  api.get('api/1/labels', { query: s.query, from: s.from, to: s.to }).then((ls) => {
    if (!ctx.live()) return;
    main.appendChild(h('datalist', { id: 'dl-regress-labels' }, ls.filter((l) => l !== 'service').map((l) => h('option', { value: l }))));
  }).catch(() => {});
  const sel = (role, label, opts, v, key) => {
    const x = h('select', { 'data-role': role, 'aria-label': label, onchange: () => ctx.navigate({ [key]: x.value }) }, opts.map(([o, t]) => h('option', { value: o }, t)));
    x.value = v;
    return x;
  };
  const minSel = sel('regress-min', 'minimum change', MINS.map((m) => [m, m === '0' ? 'any change' : '≥ ' + m + ' of base']), MINS.includes(p.min_change) ? p.min_change : '', 'min_change');
  if (!MINS.includes(p.min_change)) { minSel.appendChild(h('option', { value: p.min_change }, '≥ ' + p.min_change)); minSel.value = p.min_change; }
  const valSel = sel('regress-value', 'rank by', [['flat', 'ranked by flat'], ['cum', 'ranked by cum']], p.value, 'value');
  const nSel = sel('regress-n', 'rows', NS.map((n) => [n, n + ' rows']), p.n, 'n');
  main.appendChild(h('form', { class: 'toolbar', onsubmit: (e) => { e.preventDefault(); ctx.navigate({ label: labelIn.value.trim() || 'version' }); } },
    h('label', {}, 'version label ', labelIn), minSel, valSel, nSel));

  const vk = p.value;
  main.appendChild(h('p', { class: 'mode norm', 'data-role': 'regress-mode', 'data-rate-unit': r.rate_unit, 'data-mode': r.mode },
    h('strong', {}, `Rates: ${r.rate_unit}`), ` — ${r.mode}. ${r.sample_type} (${r.unit}), ${vk} values. `,
    'change = target − base' + (r.rate_unit === SHARE ? ' in percentage points (pp)' : '') + ', relative = change / base ("new": no base); noise = 2σ from the sample counts: rows whose change is within it are muted and marked "within noise".'));

  for (const k of r.skipped || []) {
    main.appendChild(h('p', { class: 'muted small', 'data-role': 'regress-skipped' }, `skipped ${k.service || ''} ${k.from || ''} → ${k.to || ''}: ${k.reason || JSON.stringify(k)}`));
  }
  const cs = r.comparisons || [];
  if (!cs.length) {
    main.appendChild(h('div', { class: 'empty', 'data-role': 'regress-empty' }, h('h2', {}, `No rollout of label ${r.label || p.label} in the range`),
      h('p', {}, `no rollout of label ${r.label || p.label} in the range: no service has two values of it (between ${s.from} and ${s.to}). Widen the range, or pick the label that names your versions.`)));
    return;
  }

  const sideSel = (c, v) => withMatcher(withMatcher(s.query, 'service', '=', c.service), r.label || p.label, '=', v);
  const openDiff = (c, name) => ctx.navigate({
    view: 'diff', base: sideSel(c, c.from), target: sideSel(c, c.to), base_from: '', base_to: '', normalize: '',
    search: name ? '^' + reEscape(name) + '$' : '', sort: '', dir: '', filter: '',
  });

  // the fleet: changes beyond noise summed over services
  const fleet = r.fleet || [];
  const fl = h('section', { class: 'regress', 'data-role': 'regress-fleet-section' },
    h('h3', {}, 'Fleet', h('span', { class: 'muted small' }, ` · change beyond noise summed over ${cs.length} comparison${cs.length === 1 ? '' : 's'}`)));
  if (fleet.length) {
    fl.appendChild(h('div', { class: 'scroll-x' }, h('table', { class: 'data', 'data-role': 'regress-fleet' },
      h('thead', {}, h('tr', {}, h('th', { class: 'num' }, 'change'), h('th', { class: 'left' }, 'function'), h('th', { class: 'left' }, 'services'))),
      h('tbody', {}, fleet.map((f) => h('tr', { 'data-name': f.name },
        td('change', f.change, F.d(f.change), updown(f.change)),
        h('td', { class: 'left', 'data-key': 'name', 'data-value': f.name }, f.name),
        h('td', { class: 'left', 'data-key': 'services', 'data-value': f.services.join(',') }, f.services.join(', '))))))));
  } else fl.appendChild(h('p', { class: 'muted', 'data-role': 'regress-fleet-empty' }, 'No change beyond noise in any service.'));
  main.appendChild(fl);

  for (const c of cs) {
    const b = c.base || {}, t = c.target || {};
    const at = toUnix(c.at);
    const title = `${c.service}: ${c.from} → ${c.to}` + (at !== null ? `, first seen ${fmtTime(at)}` : '');
    const side = (x) => `${x.profiles} profile${x.profiles === 1 ? '' : 's'}, ${fmtValue(x.total, r.unit)}` + (x.rollup_hours ? ` (${x.rollup_hours} h from rollups)` : '');
    const sec = h('section', { class: 'regress', 'data-role': 'regress-comparison', 'data-service': c.service, 'data-from': c.from, 'data-to': c.to });
    sec.appendChild(h('h3', {}, h('button', { type: 'button', class: 'link', 'data-role': 'regress-head', title: 'open the diff flame graph of these two versions', onclick: () => openDiff(c, '') }, title)));
    sec.appendChild(h('p', { class: 'muted small', 'data-role': 'regress-summary' },
      `base ${c.from}: ${side(b)} · target ${c.to}: ${side(t)} · ${c.functions} functions changed, ${c.beyond_noise} beyond noise, ${c.regressions} costlier · click a row for the diff`));
    const head = ['function', 'base', 'target', 'change', 'relative', 'noise', 'samples (base / target)'];
    const rows = (c.rows || []).map((row) => {
      const x = row[vk] || {};
      const within = !!x.within_noise;
      const tr = h('tr', { class: 'clickable' + (within ? ' within-noise' : ''), tabindex: '0', 'data-name': row.name, 'data-within': String(within), title: `diff of ${c.service} ${c.from} → ${c.to}` },
        h('td', { class: 'left', 'data-key': 'name', 'data-value': row.name }, row.name, within ? h('span', { class: 'tag' }, 'within noise') : null),
        td('base', x.base, F.v(x.base)),
        td('target', x.target, F.v(x.target)),
        td('change', x.change, F.d(x.change), updown(x.change)),
        td('relative', x.relative, x.relative === null || x.relative === undefined ? 'new' : (x.relative > 0 ? '+' : '') + (100 * x.relative).toFixed(1) + '%', updown(x.change)),
        td('noise', x.noise, x.noise === null || x.noise === undefined ? '' : F.n(x.noise)),
        h('td', { class: 'num', 'data-key': 'samples', 'data-value': `${num(x.base_samples)}/${num(x.target_samples)}` }, `${x.base_samples ?? '–'} / ${x.target_samples ?? '–'}`));
      tr.addEventListener('click', () => openDiff(c, row.name));
      tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') openDiff(c, row.name); });
      return tr;
    });
    sec.appendChild(h('div', { class: 'scroll-x' }, h('table', { class: 'data', 'data-role': 'regress-rows', 'data-service': c.service },
      h('thead', {}, h('tr', {}, head.map((x, i) => h('th', { class: i ? 'num' : 'left' }, x)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { class: 'muted', colspan: '7' }, 'no function changed by the minimum change or more'))))));
    main.appendChild(sec);
  }
}
