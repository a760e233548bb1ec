// views/profiles.js — the individual profiles of the selection
// (/api/1/profiles): open one as a flame graph, download it, pick two to diff.
import { h, clear, quote, fmtTime, toUnix, parseSelector, withType } from '../util.js';
import * as api from '../api.js';
import { Table } from '../table.js';
import { cli, simpleSelection, selOf } from '../app.js';

// the selector and window that select profile P alone (its type, service,
// labels and second): for /api/1/diff, whose id parameter would name both sides
export function profileSelection(p) {
  const m = [`service=${quote(p.service)}`, ...(p.labels || []).map((l) => `${/^[A-Za-z_][A-Za-z0-9_.:/-]*$/.test(l.key) ? l.key : quote(l.key)}=${quote(l.value)}`)];
  const to = p.created_at.replace(/(\.\d+)?Z$/, '.999999999Z');
  return { query: `${p.type}{${m.join(', ')}}`, from: p.created_at, to };
}

export async function profilesView(ctx) {
  const s = ctx.state, main = ctx.main;
  const x = simpleSelection(s.query);
  const listCli = () => {
    const a = ['get', 'profiles'];
    if (x && x.service !== null) a.push('--service', x.service);
    if (x) a.push('--type', x.type);
    if (s.from !== 'now-1h') a.push('--from', s.from);
    if (s.to !== 'now') a.push('--to', s.to);
    if (x && x.labels.length) a.push('-l', x.labels.join(','));
    return cli(a);
  };
  const sel = selOf(s);
  ctx.setActions({ download: { path: 'api/1/merge', params: sel, name: 'profiles.pb.gz' }, pprof: { path: 'api/1/merge', params: sel }, cli: listCli });
  ctx.loading(main, 'profiles');
  const list = await api.get('api/1/profiles', sel);
  if (!ctx.live()) return;
  clear(main);
  const picked = new Set((s.picked || '').split(',').filter(Boolean));
  const diffBtn = h('button', { type: 'button', 'data-role': 'diff-picked', disabled: picked.size !== 2, onclick: () => {
    const [a, b] = [...picked].map((id) => list.find((p) => p.id === id)).filter(Boolean).sort((p, q) => (p.created_at < q.created_at ? -1 : 1));
    if (!a || !b) return;
    const A = profileSelection(a), B = profileSelection(b);
    ctx.navigate({ view: 'diff', base: A.query, base_from: A.from, base_to: A.to, target: B.query, from: B.from, to: B.to, picked: '' });
  } }, 'Diff the two picked');
  const pickInfo = h('span', { class: 'muted small' }, `${picked.size} picked`);
  main.appendChild(h('div', { class: 'row' }, h('span', { class: 'muted small', 'data-role': 'profiles-info', 'data-count': list.length }, `${list.length} profiles, oldest first`), diffBtn, pickInfo));
  const rows = list.map((p) => ({ ...p, time: p.created_at, labels_text: (p.labels || []).map((l) => `${l.key}=${l.value}`).join(', '), size: p.size }));
  const hasSize = rows.some((r) => r.size !== undefined);
  new Table(main, {
    role: 'profiles', rows, sort: s.sort, dir: s.dir, filter: s.filter, filterKey: (r) => `${r.service} ${r.type} ${r.labels_text} ${r.id}`,
    filterPlaceholder: 'filter: service, label, id',
    onState: (st) => ctx.replace({ sort: st.sort, dir: st.sort ? st.dir : '', filter: st.filter }),
    columns: [
      { key: 'time', label: 'created (UTC)', kind: 'text', fmt: (v) => fmtTime(toUnix(v)) },
      { key: 'service', label: 'service', kind: 'text' },
      { key: 'type', label: 'type', kind: 'text' },
      { key: 'labels_text', label: 'labels', kind: 'text' },
      hasSize ? { key: 'size', label: 'size', kind: 'value', unit: 'bytes' } : null,
      { key: 'id', label: 'id', kind: 'text' },
    ].filter(Boolean),
    actions: [
      (p) => h('button', { type: 'button', class: 'link', 'data-role': 'open-profile', title: 'the flame graph of this profile alone', onclick: () => {
        const query = parseSelector(s.query)?.type === p.type ? s.query : withType(s.query, p.type);
        ctx.navigate({ view: 'flame', id: p.id, query, si: p.type === parseSelector(s.query)?.type ? s.si : '', focus: '', search: '', sandwich: '' });
      } }, 'open'),
      (p) => h('button', { type: 'button', class: 'link', 'data-role': 'download-profile', onclick: async () => {
        try { const r = await api.download('api/0/profiles/' + p.id, null, `${p.service}-${p.type}-${p.id}.pb.gz`); ctx.toast(`Saved ${r.name}`); } catch (e) { ctx.toast('Download failed: ' + e.message, 'bad'); }
      } }, 'download'),
      (p) => {
        const cb = h('input', { type: 'checkbox', 'data-role': 'pick', 'aria-label': 'pick ' + p.id, checked: picked.has(p.id), onchange: () => {
          if (cb.checked) picked.add(p.id); else picked.delete(p.id);
          diffBtn.disabled = picked.size !== 2;
          pickInfo.textContent = `${picked.size} picked`;
          ctx.replace({ picked: [...picked].join(',') });
        } });
        return h('label', { class: 'check' }, cb, 'pick');
      },
    ],
  });
}
