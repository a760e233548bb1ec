// table.js — a sortable, filterable table. Every cell carries its raw value
// in data-value (the tests read numbers, people read "1.23s").
import { h, clear, fmtValue, fmtPct, fmtSigned } from './util.js';

const SHOW = 500;

export class Table {
  // columns: [{key, label, kind: 'text'|'value'|'pct'|'signed'|'spct', unit, abs, title}]
  constructor(host, opts) {
    this.o = opts;
    this.sort = opts.sort || '';
    this.dir = opts.dir || 'desc';
    this.filter = opts.filter || '';
    this.limit = SHOW;
    this.filterInput = h('input', {
      type: 'search', class: 'filter', placeholder: opts.filterPlaceholder || 'filter (regex)', value: this.filter,
      'aria-label': 'filter rows', 'data-role': 'table-filter',
      oninput: () => { this.filter = this.filterInput.value; this.limit = SHOW; this.renderBody(); this.changed(); },
    });
    this.count = h('span', { class: 'muted count' });
    this.thead = h('thead');
    this.tbody = h('tbody');
    this.more = h('div', { class: 'more' });
    this.el = h('div', { class: 'table-wrap' },
      h('div', { class: 'table-tools' }, this.filterInput, this.count, opts.tools || null),
      h('div', { class: 'scroll-x' }, h('table', { class: 'data', 'data-role': opts.role || 'table' }, this.thead, this.tbody)),
      this.more);
    host.appendChild(this.el);
    this.renderHead();
    this.renderBody();
  }

  changed() { if (this.o.onState) this.o.onState({ sort: this.sort, dir: this.dir, filter: this.filter }); }

  renderHead() {
    clear(this.thead);
    const tr = h('tr');
    for (const c of this.o.columns) {
      const active = this.sort === c.key;
      const b = h('button', {
        class: 'sort', type: 'button', title: c.title || 'sort by ' + c.label,
        onclick: () => {
          if (this.sort === c.key) this.dir = this.dir === 'desc' ? 'asc' : 'desc';
          else { this.sort = c.key; this.dir = c.kind === 'text' ? 'asc' : 'desc'; }
          this.renderHead(); this.renderBody(); this.changed();
        },
      }, c.label, active ? (this.dir === 'desc' ? ' ▼' : ' ▲') : '');
      tr.appendChild(h('th', {
        class: c.kind === 'text' ? 'left' : 'num', 'data-key': c.key,
        'aria-sort': active ? (this.dir === 'desc' ? 'descending' : 'ascending') : 'none',
      }, b));
    }
    if (this.o.actions) tr.appendChild(h('th', { class: 'left' }, ''));
    this.thead.appendChild(tr);
  }

  rows() {
    let rows = this.o.rows;
    if (this.filter) {
      let re;
      try { re = new RegExp(this.filter, 'i'); } catch (e) { re = null; }
      const f = this.filter.toLowerCase();
      const key = this.o.filterKey || 'name';
      rows = rows.filter((r) => {
        const s = String(typeof key === 'function' ? key(r) : r[key] ?? '');
        return re ? re.test(s) : s.toLowerCase().includes(f);
      });
    }
    if (this.sort) {
      const c = this.o.columns.find((x) => x.key === this.sort);
      if (c) {
        const k = c.key, sgn = this.dir === 'desc' ? -1 : 1;
        const val = c.sortValue || ((r) => r[k]);
        rows = rows.slice().sort((a, b) => {
          let x = val(a), y = val(b);
          if (c.abs) { x = Math.abs(x); y = Math.abs(y); }
          if (x === y) return 0;
          return (x < y ? -1 : 1) * sgn;
        });
      }
    }
    return rows;
  }

  cell(c, r) {
    const v = r[c.key];
    let text;
    switch (c.kind) {
      case 'value': text = fmtValue(v, c.unit); break;
      case 'signed': text = fmtSigned(v, c.unit); break;
      case 'pct': text = fmtPct(v); break;
      case 'spct': text = (v > 0 ? '+' : '') + fmtPct(v); break;
      default: text = c.fmt ? c.fmt(v, r) : v ?? '';
    }
    const cls = (c.kind === 'text' ? 'left' : 'num') + (c.kind === 'signed' || c.kind === 'spct' ? (v > 0 ? ' up' : v < 0 ? ' down' : '') : '');
    const td = h('td', { class: cls, 'data-key': c.key, 'data-value': v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v) });
    if (c.render) c.render(td, v, r); else td.textContent = text;
    if (c.bar && typeof v === 'number') td.classList.add('bar');
    return td;
  }

  renderBody() {
    const rows = this.rows();
    clear(this.tbody);
    const n = Math.min(rows.length, this.limit);
    const frag = document.createDocumentFragment();
    for (let i = 0; i < n; i++) {
      const r = rows[i];
      const tr = h('tr', { 'data-name': r.name ?? '' });
      for (const c of this.o.columns) tr.appendChild(this.cell(c, r));
      if (this.o.actions) {
        const td = h('td', { class: 'left actions' });
        for (const a of this.o.actions) {
          const b = a(r);
          if (b) td.appendChild(b);
        }
        tr.appendChild(td);
      }
      if (this.o.onRow) {
        tr.classList.add('clickable');
        tr.tabIndex = 0;
        tr.addEventListener('click', (e) => { if (e.target.closest('button,a,input')) return; this.o.onRow(r, tr); });
        tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') this.o.onRow(r, tr); });
      }
      frag.appendChild(tr);
    }
    this.tbody.appendChild(frag);
    this.count.textContent = rows.length === this.o.rows.length ? `${rows.length} rows` : `${rows.length} of ${this.o.rows.length} rows`;
    clear(this.more);
    if (rows.length > n) {
      this.more.appendChild(h('button', { type: 'button', onclick: () => { this.limit = Infinity; this.renderBody(); } }, `show all ${rows.length} rows`));
    }
  }
}
