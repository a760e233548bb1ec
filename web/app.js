// app.js — profd's web UI: state in the URL, the selection bar, the
// timeline, the actions, dialogs and shortcuts; the views are in views/.
import { h, clear, parseSelector, formatSelector, withMatcher, withType, OPS, TYPES, fmtValue, fmtTime, toUnix, absTime, shQuote, fileName, debounce } from './util.js';
import * as api from './api.js';
import { Timeline } from './timeline.js';
import { flameView, tableView } from './views/explore.js';
import { diffView } from './views/diff.js';
import { fleetView } from './views/fleet.js';
import { profilesView } from './views/profiles.js';
import { regressionsView } from './views/regressions.js';

const KEYS = ['view', 'query', 'from', 'to', 'si', 'max_nodes', 'n', 'focus', 'search', 'sandwich', 'sort', 'dir', 'filter',
  'by', 'step', 'base', 'target', 'base_from', 'base_to', 'normalize', 'fn', 'value', 'picked', 'id', 'label', 'min_change'];
const DEFAULTS = { view: 'flame', from: 'now-1h', to: 'now', label: 'version', min_change: '5%' };
const VIEWS = [
  ['flame', 'Flame graph', 'f', flameView],
  ['table', 'Top table', 't', tableView],
  ['diff', 'Diff', 'd', diffView],
  ['fleet', 'Fleet', 'l', fleetView],
  ['profiles', 'Profiles', 'p', profilesView],
  ['regressions', 'Regressions', 'g', regressionsView],
];
// the sample types of a profile type: the API's (sample_types of the last
// merge answer of that type), this list only before the first answer
const SAMPLE_TYPES = {
  cpu: ['samples', 'cpu'], heap: ['alloc_objects', 'alloc_space', 'inuse_objects', 'inuse_space'],
  allocs: ['alloc_objects', 'alloc_space', 'inuse_objects', 'inuse_space'], block: ['contentions', 'delay'],
  mutex: ['contentions', 'delay'], goroutine: ['goroutine'], threadcreate: ['threadcreate'], other: [],
};
const PRESETS = [['now-15m', '15m'], ['now-1h', '1h'], ['now-6h', '6h'], ['now-24h', '24h'], ['now-168h', '7d'], ['now-720h', '30d']];

const $ = (id) => document.getElementById(id);
let state = {};
let seq = 0;
let cleanups = [];

export function readState() {
  const p = new URLSearchParams(location.search);
  const s = {};
  for (const k of KEYS) s[k] = p.get(k) ?? DEFAULTS[k] ?? '';
  if (!VIEWS.some((v) => v[0] === s.view)) s.view = 'flame';
  return s;
}

export function hrefOf(s) {
  const p = new URLSearchParams();
  for (const k of KEYS) {
    const v = s[k];
    if (v !== undefined && v !== null && v !== '' && !(k !== 'view' && v === DEFAULTS[k])) p.set(k, v);
  }
  return location.pathname + '?' + p.toString();
}

export function navigate(patch, opts = {}) {
  const s = { ...state, ...patch };
  if (!('id' in patch) && ('query' in patch || 'from' in patch || 'to' in patch)) s.id = ''; // a new selection: no longer one profile
  const u = hrefOf(s);
  if (opts.replace) history.replaceState(null, '', u); else history.pushState(null, '', u);
  if (opts.silent) { state = readState(); return; }
  render();
}

// ---- theme ----
function applyTheme(t) {
  const dark = t ? t === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
}
function toggleTheme() {
  const next = document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark';
  localStorage.setItem('profd-theme', next);
  applyTheme(next);
  render();
}

// ---- toast, copy ----
let toastTimer = 0;
export function toast(msg, kind) {
  const t = $('toast');
  t.textContent = msg;
  t.className = kind || '';
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 3500);
}

export async function copyText(text, what) {
  const out = $('copied');
  if (out) { out.value = text; out.dataset.what = what; out.hidden = false; }
  let ok = false;
  try { await navigator.clipboard.writeText(text); ok = true; } catch (e) {
    if (out) { out.focus(); out.select(); try { ok = document.execCommand('copy'); } catch (e2) { ok = false; } }
  }
  toast(ok ? `Copied ${what}` : `Select and copy the ${what} below`);
}

// ---- errors and loading ----
const TITLES = { 0: 'Cannot reach the collector', 400: 'Bad request', 401: 'This collector needs a token', 403: 'Forbidden', 404: 'Nothing found', 413: 'Too much at once', 500: 'The collector failed' };

export function showError(el, err, what) {
  clear(el);
  if (err && err.name === 'AbortError') return;
  const st = err && err.status !== undefined ? err.status : -1;
  const box = h('div', { class: 'error', role: 'alert', 'data-status': st },
    h('strong', {}, (what ? what + ': ' : '') + (TITLES[st] || (st > 0 ? 'Error ' + st : 'Error'))),
    h('p', { class: 'error-msg' }, err && err.message ? err.message : String(err)),
    err && err.url ? h('p', { class: 'muted small' }, (st > 0 ? st + ' from ' : '') + 'GET ' + err.url) : null);
  if (st === 401 || st === 403) {
    box.appendChild(h('p', {},
      h('button', { type: 'button', 'data-role': 'enter-token', onclick: () => { api.allowPrompt(); api.clearCache(); render(); } }, api.token() ? 'Enter another token' : 'Enter a token'),
      api.token() ? h('button', { type: 'button', onclick: () => { api.setToken(''); api.clearCache(); render(); } }, 'Forget the token') : null));
  }
  if (st === 404 && /no profiles match/.test(err.message || '')) box.appendChild(h('p', { class: 'muted' }, 'Widen the time range or remove a matcher.'));
  el.appendChild(box);
}

export function loading(el, what) {
  clear(el);
  el.appendChild(h('p', { class: 'loading', 'aria-busy': 'true' }, h('span', { class: 'spinner' }), 'Loading ' + what + '…'));
}

// ---- the token form ----
function promptToken(msg, refused) {
  return new Promise((resolve) => {
    const input = h('input', { type: 'password', id: 'token-input', autocomplete: 'off', spellcheck: 'false', required: true, minlength: '16', 'aria-label': 'read token' });
    let done = false;
    const finish = (v) => { if (done) return; done = true; d.close(); d.remove(); resolve(v); };
    const form = h('form', { onsubmit: (e) => { e.preventDefault(); finish(input.value.trim() || null); } },
      h('h2', {}, refused ? 'The token was refused' : 'This collector needs a token'),
      h('p', { class: 'error-msg' }, msg),
      h('p', { class: 'muted' }, 'Enter a token with the read scope. It is kept in this tab only (sessionStorage) and sent as "Authorization: Bearer" with every request.'),
      h('label', {}, 'Token ', input),
      h('div', { class: 'buttons' },
        h('button', { type: 'submit', class: 'primary' }, 'Use this token'),
        h('button', { type: 'button', onclick: () => finish(null) }, 'Cancel')));
    const d = h('dialog', { id: 'token-dialog', 'aria-label': 'token' }, form);
    d.addEventListener('cancel', (e) => { e.preventDefault(); finish(null); });
    document.body.appendChild(d);
    d.showModal();
    input.focus();
  });
}

// ---- help ----
const SHORTCUTS = [['?', 'this help'], ['f t d l p g', 'flame graph, top table, diff, fleet, profiles, regressions'], ['/', 'search (flame graph) or filter (tables)'],
  ['Esc', 'reset zoom, close a dialog'], ['u or Backspace', 'zoom out one frame'], ['s', 'sandwich of the zoomed frame'], ['r', 'reload from the collector'],
  ['m', 'light / dark theme'], ['Alt+← Alt+→', 'back / forward (every view is a URL)']];
function showHelp() {
  if ($('help-dialog')) return;
  const d = h('dialog', { id: 'help-dialog', 'aria-label': 'keyboard shortcuts' },
    h('h2', {}, 'Keyboard shortcuts'),
    h('table', { class: 'keys' }, SHORTCUTS.map(([k, v]) => h('tr', {}, h('td', {}, h('kbd', {}, k)), h('td', {}, v)))),
    h('p', { class: 'muted' }, 'Flame graph: hover a frame for its cost, click to zoom, right-click for its sandwich (callers above, callees below). Timeline: drag to zoom into a range, click a bar for its profiles.'),
    h('div', { class: 'buttons' }, h('button', { type: 'button', onclick: () => { d.close(); d.remove(); } }, 'Close')));
  d.addEventListener('close', () => d.remove());
  document.body.appendChild(d);
  d.showModal();
}

// ---- CLI and URLs ----
export function collectorBase() {
  return new URL('.', document.baseURI).href.replace(/\/$/, '');
}

export function absParams(p) {
  const o = { ...p };
  for (const k of ['from', 'to', 'base_from', 'base_to']) if (o[k]) o[k] = absTime(o[k]);
  return o;
}

// simple: TYPE{service="S", k="v"} with '=' only, or null
export function simpleSelection(query) {
  const sel = parseSelector(query);
  if (!sel || !sel.type) return null;
  let service = null;
  const labels = [];
  for (const m of sel.matchers) {
    if (m.op !== '=') return null;
    if (m.name === 'service') { if (service !== null) return null; service = m.value; } else {
      if (m.name.includes('=') || m.name.includes(',') || m.value.includes(',')) return null;
      labels.push(m.name + '=' + m.value);
    }
  }
  return { type: sel.type, service, labels };
}

function timeFlags(s) {
  const f = [];
  if (s.from && s.from !== 'now-1h') f.push('--from', s.from);
  if (s.to && s.to !== 'now') f.push('--to', s.to);
  return f;
}

export function cli(args) {
  return ['profd', ...args, '--collector', collectorBase()].map(shQuote).join(' ');
}

// the selection of the merge views: the profiles named by id, else query and range
export function selOf(s) {
  return s.id ? { id: s.id } : { query: s.query, from: s.from, to: s.to };
}

export function cliMerge(s) {
  if (s.id) return `# profile ${s.id} as one pprof:\ncurl -sS -o ${shQuote(fileName(s.id.split(',')[0] + '.pb.gz'))} ${shQuote(new URL(api.url('api/1/merge', { id: s.id }), document.baseURI).href)}`;
  const x = simpleSelection(s.query);
  if (x && x.service !== null) {
    const a = ['merge', '--service', x.service, '--type', x.type, ...timeFlags(s)];
    if (x.labels.length) a.push('-l', x.labels.join(','));
    a.push('-o', fileName(`${x.service}-${x.type}.pb.gz`));
    return cli(a);
  }
  const u = new URL(api.url('api/1/merge', absParams({ query: s.query, from: s.from, to: s.to })), document.baseURI).href;
  return `# profd merge takes one service and exact labels; this selection as one pprof:\ncurl -sS -o profile.pb.gz ${shQuote(u)}`;
}

export function cliTop(s, n) {
  const x = simpleSelection(s.query);
  if (!x) return `# profd top takes a type, one service (or --all) and exact labels; the API for this selection:\ncurl -sS ${shQuote(new URL(api.url('api/1/top', absParams({ query: s.query, from: s.from, to: s.to, n: n || 10 })), document.baseURI).href)}`;
  const a = ['top', ...(x.service !== null ? ['--service', x.service] : ['--all']), '--type', x.type, ...timeFlags(s)];
  if (x.labels.length) a.push('-l', x.labels.join(','));
  if (n) a.push('-n', String(n));
  if (s.si) a.push('-i', s.si);
  return cli(a);
}

// ---- sample types ----
const apiSampleTypes = new Map(); // profile type (or id:ID) -> [{type, unit}] from the API
const stKey = (s) => (s.id ? 'id:' + s.id : parseSelector(s.query)?.type || '');
function fillSampleTypes(sel, s) {
  const type = parseSelector(s.query)?.type || '', si = s.si;
  const got = apiSampleTypes.get(stKey(s));
  const names = got ? got.map((t) => t.type) : SAMPLE_TYPES[type] || [];
  clear(sel);
  sel.dataset.source = got ? 'api' : 'builtin';
  sel.appendChild(h('option', { value: '' }, 'default sample'));
  for (const [i, n] of names.entries()) sel.appendChild(h('option', { value: n, title: got ? got[i].unit : null }, got ? `${n} (${got[i].unit})` : n));
  if (si && !names.includes(si)) sel.appendChild(h('option', { value: si }, si));
  sel.value = si;
}
// setSampleTypes: the sample_types of a merge answer for the selection S
export function setSampleTypes(s, list) {
  if (!Array.isArray(list) || !list.length) return;
  const k = stKey(s), prev = apiSampleTypes.get(k);
  apiSampleTypes.set(k, list);
  const sel = $('si');
  if (sel && (!prev || JSON.stringify(prev) !== JSON.stringify(list) || sel.dataset.source !== 'api')) fillSampleTypes(sel, s);
}

// ---- selection bar ----
function datalist(id, values) {
  let dl = $(id);
  if (!dl) { dl = h('datalist', { id }); document.body.appendChild(dl); }
  clear(dl);
  for (const v of values) dl.appendChild(h('option', { value: v }));
}

function renderSelection(s) {
  const el = $('selection');
  clear(el);
  const sel = parseSelector(s.query) || { type: '', matchers: [] };
  const type = sel.type;
  const my = seq;
  const live = () => my === seq;
  const noService = formatSelector({ type, matchers: sel.matchers.filter((m) => m.name !== 'service') });

  // type
  const typeSel = h('select', { id: 'type', 'aria-label': 'profile type', onchange: () => navigate({ query: withType(s.query, typeSel.value), si: '', focus: '', sandwich: '', search: '' }) },
    h('option', { value: type }, type || 'every type'));
  api.get('api/1/types', { from: s.from, to: s.to }).then((types) => {
    if (!live()) return;
    clear(typeSel);
    const have = new Set(types.map((t) => t.type));
    for (const t of types) typeSel.appendChild(h('option', { value: t.type }, `${t.type} (${t.profiles})`));
    if (type && !have.has(type)) typeSel.appendChild(h('option', { value: type }, `${type} (0)`));
    typeSel.value = type;
  }).catch(() => {});

  // sample type
  const siSel = h('select', { id: 'si', 'aria-label': 'sample type', onchange: () => navigate({ si: siSel.value }) });
  fillSampleTypes(siSel, s);

  // service, with counts and share
  const svcMatch = sel.matchers.filter((m) => m.name === 'service');
  const curSvc = svcMatch.length === 1 && svcMatch[0].op === '=' ? svcMatch[0].value : '';
  const svcSel = h('select', { id: 'service', 'aria-label': 'service', onchange: () => navigate({ query: withMatcher(s.query, 'service', '=', svcSel.value || null), focus: '', sandwich: '' }) },
    h('option', { value: '' }, 'all services'), curSvc ? h('option', { value: curSvc }, curSvc) : null);
  svcSel.value = curSvc;
  if (type) {
    api.get('api/1/top', { query: noService, from: s.from, to: s.to, by: 'service', n: 1000, si: s.si }).then((top) => {
      if (!live()) return;
      clear(svcSel);
      svcSel.appendChild(h('option', { value: '' }, `all services (${top.profiles} profiles)`));
      for (const r of top.rows) svcSel.appendChild(h('option', { value: r.service }, `${r.service} (${r.profiles} profiles, ${r.pct.toFixed(1)}%)`));
      if (curSvc && !top.rows.some((r) => r.service === curSvc)) svcSel.appendChild(h('option', { value: curSvc }, curSvc + ' (0)'));
      svcSel.value = curSvc;
    }).catch(() => api.get('api/1/labels/service/values', { query: type, from: s.from, to: s.to }).then((vs) => {
      if (!live()) return;
      for (const v of vs) if (v !== curSvc) svcSel.appendChild(h('option', { value: v }, v));
      svcSel.value = curSvc;
    }).catch(() => {}));
  }

  // matchers
  const chips = h('span', { class: 'chips', 'data-role': 'matchers' });
  if (s.id) {
    chips.appendChild(h('span', { class: 'chip id', 'data-role': 'profile-id', 'data-id': s.id, title: 'the flame graph, top table and profiles show this profile alone (not the selector)' },
      `profile ${s.id.split(',').join(', ')}`,
      h('button', { type: 'button', class: 'x', 'data-role': 'clear-id', 'aria-label': 'back to the selection', title: 'back to the selection', onclick: () => navigate({ id: '' }) }, '×')));
  }
  sel.matchers.forEach((m, i) => {
    if (m.name === 'service' && m.op === '=' && svcMatch.length === 1) return;
    chips.appendChild(h('span', { class: 'chip', 'data-name': m.name },
      `${m.name}${m.op}"${m.value}"`,
      h('button', { type: 'button', class: 'x', 'aria-label': 'remove matcher ' + m.name, title: 'remove', onclick: () => {
        const rest = sel.matchers.filter((_, j) => j !== i);
        navigate({ query: formatSelector({ type, matchers: rest }) });
      } }, '×')));
  });
  const nameIn = h('input', { id: 'm-name', list: 'dl-names', placeholder: 'label', size: 9, 'aria-label': 'label name', autocomplete: 'off' });
  const opSel = h('select', { id: 'm-op', 'aria-label': 'operator' }, OPS.map((o) => h('option', { value: o }, o)));
  const valIn = h('input', { id: 'm-value', list: 'dl-values', placeholder: 'value', size: 10, 'aria-label': 'label value', autocomplete: 'off' });
  const loadValues = () => {
    const n = nameIn.value.trim();
    if (!n) return;
    api.get('api/1/labels/' + n.split('/').map(encodeURIComponent).join('/') + '/values', { query: type, from: s.from, to: s.to })
      .then((vs) => datalist('dl-values', vs)).catch(() => datalist('dl-values', []));
  };
  nameIn.addEventListener('change', loadValues);
  nameIn.addEventListener('focus', () => api.get('api/1/labels', { query: type, from: s.from, to: s.to }).then((ls) => datalist('dl-names', ls)).catch(() => {}));
  valIn.addEventListener('focus', loadValues);
  const addForm = h('form', { class: 'add-matcher', onsubmit: (e) => {
    e.preventDefault();
    const n = nameIn.value.trim();
    if (!n) { nameIn.focus(); return; }
    navigate({ query: formatSelector({ type, matchers: [...sel.matchers, { name: n, op: opSel.value, value: valIn.value }] }) });
  } }, nameIn, opSel, valIn, h('button', { type: 'submit', title: 'add this matcher' }, '+'));

  // the selector itself
  const qIn = h('input', { id: 'query', class: 'query', value: s.query, spellcheck: 'false', 'aria-label': 'selector', title: 'selector: type{label="value", label=~"regex"} (Enter applies)' });
  const qForm = h('form', { class: 'qform', onsubmit: (e) => { e.preventDefault(); navigate({ query: qIn.value.trim(), focus: '', sandwich: '' }); } }, qIn);

  // time range
  const preset = PRESETS.find((p) => p[0] === s.from && s.to === 'now');
  const rangeSel = h('select', { id: 'range', 'aria-label': 'time range', onchange: () => { if (rangeSel.value) navigate({ from: rangeSel.value, to: 'now' }); } },
    PRESETS.map(([v, l]) => h('option', { value: v }, 'last ' + l)), h('option', { value: '' }, 'custom'));
  rangeSel.value = preset ? preset[0] : '';
  const fromIn = h('input', { id: 'from', value: s.from, size: 12, 'aria-label': 'from', title: 'from: now-1h, RFC3339 or unix seconds' });
  const toIn = h('input', { id: 'to', value: s.to, size: 12, 'aria-label': 'to', title: 'to: now, RFC3339 or unix seconds' });
  const tForm = h('form', { class: 'tform', onsubmit: (e) => { e.preventDefault(); navigate({ from: fromIn.value.trim(), to: toIn.value.trim() }); } },
    rangeSel, fromIn, h('span', { class: 'muted' }, '→'), toIn, h('button', { type: 'submit' }, 'Apply'));
  const a = toUnix(s.from), b = toUnix(s.to);
  const resolved = h('span', { class: 'muted small', id: 'resolved' }, a !== null && b !== null ? `${fmtTime(a).slice(0, 16)} → ${fmtTime(b).slice(0, 16)} UTC` : '');

  el.appendChild(h('div', { class: 'row' }, typeSel, siSel, svcSel, chips, addForm));
  el.appendChild(h('div', { class: 'row' }, qForm, tForm, resolved));
}

// ---- timeline of the selection ----
function autoStep(s) {
  const a = toUnix(s.from), b = toUnix(s.to);
  const span = a !== null && b !== null ? Math.max(1, b - a) : 3600;
  const nice = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  return nice.find((x) => span / x <= 120) || 86400;
}

function renderTimeline(s) {
  const el = $('timeline-host');
  clear(el);
  const show = ['flame', 'table', 'profiles'].includes(s.view) && parseSelector(s.query)?.type && !s.id;
  el.hidden = !show;
  if (!show) return;
  const my = seq;
  const by = s.by || 'service';
  const bySel = h('select', { id: 'stack-by', 'aria-label': 'stack by', onchange: () => navigate({ by: bySel.value === 'service' ? '' : bySel.value }, {}) },
    h('option', { value: 'service' }, 'service'), by !== 'service' ? h('option', { value: by }, by) : null);
  bySel.value = by;
  api.get('api/1/labels', { query: parseSelector(s.query).type, from: s.from, to: s.to }).then((ls) => {
    if (my !== seq) return;
    for (const l of ls) if (l !== 'service' && l !== by) bySel.appendChild(h('option', { value: l }, l));
  }).catch(() => {});
  const step = s.step || autoStep(s);
  const body = h('div', { class: 'timeline-body' });
  el.appendChild(h('div', { class: 'row head' }, h('strong', {}, 'Timeline'), h('span', { class: 'muted small' }, `total cost per ${step}s step, stacked by`), bySel,
    h('span', { class: 'muted small hide-narrow' }, 'drag to zoom · click a bar for its profiles')));
  el.appendChild(body);
  loading(body, 'timeline');
  api.get('api/1/series', { query: s.query, from: s.from, to: s.to, step, by, si: s.si, n: 12 }).then((data) => {
    if (my !== seq) return;
    clear(body);
    const tl = new Timeline(body, {
      onZoom: (a, b) => navigate({ from: String(a), to: String(b), focus: '' }),
      onPick: (t, st) => navigate({ view: 'profiles', from: String(t), to: `${t + st - 1}.999999999` }),
    });
    cleanups.push(() => tl.destroy());
    tl.set(data);
  }).catch((e) => { if (my === seq) showError(body, e, 'Timeline'); });
}

// ---- actions: download, copy URL, copy CLI, copy link ----
export function setActions(spec) {
  const el = $('actions');
  clear(el);
  const out = h('input', { id: 'copied', readonly: true, class: 'copied', 'aria-label': 'copied text', hidden: true });
  const btn = (label, role, fn, title) => h('button', { type: 'button', 'data-role': role, title, onclick: fn }, label);
  if (spec.download) {
    el.appendChild(btn('⬇ Download pprof', 'download', async () => {
      try {
        const r = await api.download(spec.download.path, spec.download.params, spec.download.name);
        toast(`Saved ${r.name} (${fmtValue(r.size, 'bytes')})`);
      } catch (e) { toast(`Download failed: ${e.message}`, 'bad'); }
    }, 'the pprof file (gzip\'d profile.proto) of this view'));
  }
  if (spec.pprof) {
    el.appendChild(btn('Copy go tool pprof URL', 'copy-pprof', () => {
      const u = new URL(api.url(spec.pprof.path, absParams(spec.pprof.params)), document.baseURI).href;
      copyText(`go tool pprof -http=: '${u}'`, 'go tool pprof command');
    }, 'go tool pprof reads this URL (the relative times written out)'));
  }
  if (spec.cli) el.appendChild(btn('Copy CLI', 'copy-cli', () => copyText(typeof spec.cli === 'function' ? spec.cli() : spec.cli, 'profd command'), 'the equivalent profd command'));
  el.appendChild(btn('Copy link', 'copy-link', () => copyText(location.href, 'link to this view'), 'a link that opens this exact view'));
  el.appendChild(out);
}

// ---- render ----
function updateTabs(s) {
  const nav = $('tabs');
  clear(nav);
  for (const [id, label, key] of VIEWS) {
    nav.appendChild(h('a', {
      href: hrefOf({ ...s, view: id }), class: 'tab' + (s.view === id ? ' active' : ''), 'data-view': id, 'aria-current': s.view === id ? 'page' : false,
      title: `${label} (${key})`, onclick: (e) => { if (e.ctrlKey || e.metaKey || e.shiftKey || e.button) return; e.preventDefault(); navigate({ view: id }); },
    }, label));
  }
}

async function render() {
  state = readState();
  const s = state;
  const my = ++seq;
  for (const f of cleanups) f();
  cleanups = [];
  updateTabs(s);
  document.title = `profd · ${VIEWS.find((v) => v[0] === s.view)[1]}${s.id ? ' · profile ' + s.id : s.query ? ' · ' + s.query : ''}`;
  const main = $('view');
  if (!s.query) {
    loading(main, 'profile types');
    try {
      const types = await api.get('api/1/types', { from: s.from, to: s.to });
      if (my !== seq) return;
      if (types.length) {
        const t = types.find((x) => x.type === 'cpu') || types[0];
        navigate({ query: t.type, id: s.id }, { replace: true });
        return;
      }
      renderSelection(s);
      renderTimeline(s);
      setActions({});
      clear(main);
      main.appendChild(h('div', { class: 'empty' }, h('h2', {}, 'No profiles in this range'),
        h('p', {}, `Nothing was stored between ${s.from} and ${s.to}. Widen the range, or send profiles: profd scrape, profd load, or POST /api/0/profiles.`)));
      return;
    } catch (e) {
      if (my !== seq) return;
      renderSelection(s);
      setActions({});
      showError(main, e, 'Profile types');
      return;
    }
  }
  renderSelection(s);
  renderTimeline(s);
  const view = VIEWS.find((v) => v[0] === s.view)[3];
  const ctx = {
    state: s, main, live: () => my === seq, navigate, setActions, showError, loading, toast, copyText,
    replace: (patch) => navigate(patch, { replace: true, silent: true }),
    onCleanup: (f) => cleanups.push(f),
  };
  try {
    await view(ctx);
  } catch (e) {
    if (my === seq) showError(main, e);
    console.warn(e);
  }
}

export const app = { render, navigate, get state() { return state; } };
window.profdDebug = app;

// ---- keyboard ----
function onKey(e) {
  const t = e.target;
  const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable);
  if (e.key === 'Escape') {
    if (typing) { t.blur(); return; }
    if (state.focus || state.sandwich) navigate({ focus: '', sandwich: '' });
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  const v = VIEWS.find((x) => x[2] === e.key);
  if (v) { navigate({ view: v[0] }); return; }
  switch (e.key) {
    case '?': showHelp(); break;
    case '/': { const f = document.querySelector('[data-role=search], [data-role=table-filter]'); if (f) { e.preventDefault(); f.focus(); } break; }
    case 'r': api.clearCache(); render(); break;
    case 'm': toggleTheme(); break;
    case 'u': case 'Backspace':
      if (state.focus) { const p = state.focus.split(';'); p.pop(); navigate({ focus: p.join(';') }); e.preventDefault(); }
      break;
    case 's':
      if (state.focus) navigate({ sandwich: state.focus.split(';').pop() });
      break;
    default:
  }
}

function init() {
  applyTheme(localStorage.getItem('profd-theme'));
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => { if (!localStorage.getItem('profd-theme')) { applyTheme(null); render(); } });
  api.setTokenPrompt(promptToken);
  $('theme').addEventListener('click', toggleTheme);
  $('help').addEventListener('click', showHelp);
  $('reload').addEventListener('click', () => { api.clearCache(); render(); });
  window.addEventListener('popstate', render);
  document.addEventListener('keydown', onKey);
  render();
}

init();
