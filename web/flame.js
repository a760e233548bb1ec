// flame.js — the icicle flame graph on a <canvas>.
// layout() flattens the API's tree (/api/1/merge?format=flamegraph, or
// /api/1/diff?format=flamegraph) into typed arrays in preorder, so that a
// render is one linear pass that skips every subtree narrower than half a
// pixel; hover is drawn on a second canvas (the frames are not redrawn).
import { h, fmtValue, fmtPct, fmtSigned, goPackage, hash32, cssVar } from './util.js';

export const ROW = 18;
const MAX_CSS_HEIGHT = 12000;

export function layout(root, opts = {}) {
  const diff = !!opts.diff;
  let n = 0;
  const st = [root];
  while (st.length) {
    const x = st.pop();
    n++;
    const c = x.children;
    if (c) for (let i = 0; i < c.length; i++) st.push(c[i]);
  }
  const L = {
    n, diff,
    val: new Float64Array(n), self: new Float64Array(n), w: new Float64Array(n),
    start: new Float64Array(n), depth: new Uint16Array(n), end: new Int32Array(n),
    parent: new Int32Array(n), name: new Int32Array(n), pkg: new Int32Array(n),
    other: new Uint8Array(n), names: [], pkgs: [], maxDepth: 0,
    base: diff ? new Float64Array(n) : null, target: diff ? new Float64Array(n) : null,
    maxAbs: 0,
  };
  const nameIdx = new Map(), pkgIdx = new Map(), namePkg = [];
  const off = new Float64Array(n);
  const stack = [root], parents = [-1];
  let k = 0;
  while (stack.length) {
    const x = stack.pop(), p = parents.pop();
    const i = k++;
    let ni = nameIdx.get(x.name);
    if (ni === undefined) {
      ni = L.names.length;
      L.names.push(x.name);
      nameIdx.set(x.name, ni);
      const pk = x.other ? '(other)' : i === 0 && x.name === 'root' ? '(root)' : goPackage(x.name);
      let pi = pkgIdx.get(pk);
      if (pi === undefined) { pi = L.pkgs.length; L.pkgs.push(pk); pkgIdx.set(pk, pi); }
      namePkg.push(pi);
    }
    L.name[i] = ni;
    L.pkg[i] = namePkg[ni];
    L.val[i] = x.value || 0;
    L.self[i] = x.self || 0;
    L.other[i] = x.other ? 1 : 0;
    if (diff) {
      L.base[i] = x.base || 0;
      L.target[i] = x.target || 0;
      L.w[i] = L.base[i] + L.target[i];
      if (i > 0 && Math.abs(L.val[i]) > L.maxAbs) L.maxAbs = Math.abs(L.val[i]);
    } else L.w[i] = Math.max(0, L.val[i]);
    L.parent[i] = p;
    if (p >= 0) {
      L.depth[i] = L.depth[p] + 1;
      L.start[i] = off[p];
      off[p] += L.w[i];
      if (L.depth[i] > L.maxDepth) L.maxDepth = L.depth[i];
    }
    off[i] = L.start[i];
    const c = x.children;
    if (c) for (let j = c.length - 1; j >= 0; j--) { stack.push(c[j]); parents.push(i); }
  }
  const size = new Int32Array(n).fill(1);
  for (let i = n - 1; i > 0; i--) size[L.parent[i]] += size[i];
  for (let i = 0; i < n; i++) L.end[i] = i + size[i];
  return L;
}

export function children(L, i) {
  const out = [];
  for (let j = i + 1; j < L.end[i]; j = L.end[j]) out.push(j);
  return out;
}

// path of node I (names below the root), and back
export function pathOf(L, i) {
  const p = [];
  for (let x = i; x > 0; x = L.parent[x]) p.push(L.names[L.name[x]]);
  return p.reverse();
}
export function findPath(L, names) {
  let i = 0;
  for (const nm of names) {
    const j = children(L, i).find((c) => L.names[L.name[c]] === nm);
    if (j === undefined) return i;
    i = j;
  }
  return i;
}

// sandwich of the function named NAME: its callers (a tree from it up to the
// roots) and its callees (its subtrees merged); outermost calls only, so a
// recursive function counts once
export function sandwich(L, name) {
  const f = L.names.indexOf(name);
  const mk = (nm) => ({ name: nm, value: 0, self: 0, children: [], m: new Map() });
  const callers = mk(name), callees = mk(name);
  if (f < 0) return { callers, callees, total: 0 };
  const child = (t, nm) => {
    let c = t.m.get(nm);
    if (!c) { c = mk(nm); t.m.set(nm, c); t.children.push(c); }
    return c;
  };
  const merge = (t, i) => {
    t.value += L.val[i];
    t.self += L.self[i];
    for (let j = i + 1; j < L.end[i]; j = L.end[j]) merge(child(t, L.names[L.name[j]]), j);
  };
  let total = 0;
  for (let i = 0; i < L.n;) {
    if (L.name[i] !== f) { i++; continue; }
    total += L.val[i];
    merge(callees, i);
    callers.value += L.val[i];
    let t = callers;
    for (let p = L.parent[i]; p > 0; p = L.parent[p]) {
      t = child(t, L.names[L.name[p]]);
      t.value += L.val[i];
    }
    t.self += L.val[i];
    i = L.end[i];
  }
  const sort = (t) => { t.children.sort((a, b) => b.value - a.value || (a.name < b.name ? -1 : 1)); t.children.forEach(sort); delete t.m; };
  sort(callers); sort(callees);
  return { callers, callees, total };
}

function palette(L, dark) {
  return L.pkgs.map((p, k) => {
    if (p === '(root)') return dark ? '#5a5f6a' : '#c9ccd3';
    if (p === '(other)') return dark ? '#44474f' : '#e3e4e8';
    const x = hash32(p);
    const hue = x % 360, sat = 45 + (x >>> 9) % 25, lig = dark ? 32 + (x >>> 17) % 12 : 62 + (x >>> 17) % 14;
    return `hsl(${hue} ${sat}% ${lig}%)`;
  });
}

function diffColors(dark) {
  const n = 32, red = [], green = [];
  const base = dark ? [70, 72, 78] : [225, 226, 230];
  const r = dark ? [230, 70, 70] : [215, 38, 38], g = dark ? [60, 190, 90] : [30, 150, 60];
  for (let i = 0; i < n; i++) {
    const t = i / (n - 1);
    const mix = (a, b) => `rgb(${a.map((v, j) => Math.round(v + (b[j] - v) * t)).join(',')})`;
    red.push(mix(base, r));
    green.push(mix(base, g));
  }
  return { red, green, zero: `rgb(${base.join(',')})` };
}

export class Flame {
  constructor(host, opts = {}) {
    this.opts = opts;
    this.host = host;
    this.canvas = h('canvas', { class: 'flame-base', 'data-role': opts.role || 'flame' });
    this.over = h('canvas', { class: 'flame-over' });
    this.tip = h('div', { class: 'tip', role: 'tooltip', hidden: true });
    this.el = h('div', { class: 'flame' }, this.canvas, this.over);
    host.appendChild(this.el);
    document.body.appendChild(this.tip);
    this.L = null;
    this.zoom = 0;
    this.hover = -1;
    this.match = null;
    this.W = 0;
    this.H = 0;
    this.mx = -1;
    this.my = -1;
    this.raf = 0;
    this.el.addEventListener('mousemove', (e) => this.onMove(e));
    this.el.addEventListener('mouseleave', () => { this.mx = -1; this.schedule(); });
    this.el.addEventListener('click', (e) => this.onClick(e));
    this.el.addEventListener('contextmenu', (e) => {
      const i = this.hit(e);
      if (i > 0 && this.opts.onSandwich && !this.L.other[i]) { e.preventDefault(); this.opts.onSandwich(this.nameOf(i)); }
    });
    this.ro = new ResizeObserver(() => { if (this.L && this.host.clientWidth !== this.W) this.render(); });
    this.ro.observe(host);
  }

  destroy() { this.ro.disconnect(); this.tip.remove(); }

  set(L, meta = {}) {
    this.L = L;
    this.meta = meta;
    this.zoom = 0;
    this.hover = -1;
    this.match = null;
    this.drawnIdx = new Int32Array(L.n);
    this.drawnX0 = new Float32Array(L.n);
    this.drawnX1 = new Float32Array(L.n);
    this.nDrawn = 0;
    this.pal = null;
    this.render();
  }

  nameOf(i) { return this.L.names[this.L.name[i]]; }

  setZoom(i) { this.zoom = i >= 0 && i < this.L.n ? i : 0; this.hover = -1; this.render(); }

  // setSearch: highlight frames whose name matches TEXT (a regex, else a
  // literal; case-insensitive); returns the matches and their share (each
  // sample once: frames below a matching frame are not added again)
  setSearch(text) {
    const L = this.L;
    if (!L) return null;
    if (!text) { this.match = null; this.render(); return null; }
    let re;
    try { re = new RegExp(text, 'i'); } catch (e) { re = new RegExp(text.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&'), 'i'); }
    const byName = new Uint8Array(L.names.length);
    L.names.forEach((nm, k) => { byName[k] = re.test(nm) ? 1 : 0; });
    const m = new Uint8Array(L.n);
    let count = 0, value = 0;
    for (let i = 1; i < L.n; i++) if (byName[L.name[i]] && !L.other[i]) { m[i] = 1; count++; }
    for (let i = 1; i < L.n;) {
      if (m[i]) { value += L.diff ? L.w[i] : L.val[i]; i = L.end[i]; } else i++;
    }
    this.match = m;
    this.render();
    const total = L.diff ? L.w[0] : L.val[0];
    return { count, value, pct: total ? (100 * value) / total : 0 };
  }

  colors() {
    const dark = document.documentElement.dataset.theme === 'dark';
    if (!this.pal || this.pal.dark !== dark) {
      this.pal = {
        dark,
        pkg: palette(this.L, dark),
        diff: diffColors(dark),
        bg: cssVar('--flame-bg') || (dark ? '#15171c' : '#ffffff'),
        text: dark ? '#f2f2f2' : '#111111',
        dim: dark ? '#2c2f36' : '#eeeff2',
        hl: dark ? '#ffd75e' : '#7a1fa2',
        font: cssVar('--mono') || 'monospace',
      };
    }
    return this.pal;
  }

  render() {
    const L = this.L;
    if (!L) return;
    const W = this.host.clientWidth;
    if (!W) return;
    const dpr = window.devicePixelRatio || 1;
    const z = this.zoom;
    let maxD = 0;
    for (let i = z; i < L.end[z]; i++) if (L.depth[i] > maxD) maxD = L.depth[i];
    const H = Math.min(MAX_CSS_HEIGHT, (maxD + 1) * ROW);
    const c = this.canvas, o = this.over;
    if (W !== this.W || H !== this.H || this.dpr !== dpr) {
      for (const cv of [c, o]) {
        cv.width = Math.round(W * dpr);
        cv.height = Math.round(H * dpr);
        cv.style.width = W + 'px';
        cv.style.height = H + 'px';
      }
      this.el.style.height = H + 'px';
      this.W = W; this.H = H; this.dpr = dpr;
    }
    const P = this.colors();
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = P.bg;
    ctx.fillRect(0, 0, W, H);
    ctx.font = '12px ' + P.font;
    ctx.textBaseline = 'middle';
    const cw = this.cw || (this.cw = ctx.measureText('abcdefghijklmnopqrstuvwxyz_./()*').width / 32);
    const zs = L.start[z], zw = L.w[z] || 1, scale = W / zw;
    const inv = !!this.opts.inverted, match = this.match, diff = L.diff;
    const dc = P.diff, nb = dc.red.length - 1, maxAbs = L.maxAbs || 1;
    const rows = Math.floor(H / ROW);
    let nd = 0;
    const { drawnIdx, drawnX0, drawnX1 } = this;
    for (let i = 0; i < L.n;) {
      const w = L.w[i] * scale;
      const x0 = (L.start[i] - zs) * scale;
      const d = L.depth[i];
      if (w < 0.5 || x0 >= W || x0 + w <= 0 || d >= rows) { i = L.end[i]; continue; }
      const a = x0 < 0 ? 0 : x0, b = x0 + w > W ? W : x0 + w;
      const y = inv ? H - (d + 1) * ROW : d * ROW;
      let col;
      if (match && !match[i]) col = P.dim;
      else if (diff && !L.other[i] && i > 0) {
        const v = L.val[i];
        if (v === 0) col = dc.zero;
        else {
          const t = Math.round(Math.sqrt(Math.min(1, Math.abs(v) / maxAbs)) * nb);
          col = v > 0 ? dc.red[t] : dc.green[t];
        }
      } else col = P.pkg[L.pkg[i]];
      ctx.fillStyle = col;
      const bw = b - a;
      ctx.fillRect(a, y, bw > 2 ? bw - 1 : bw, ROW - 1);
      if (bw > 26) {
        const max = Math.floor((bw - 6) / cw);
        if (max >= 3) {
          let s = L.names[L.name[i]];
          if (s.length > max) s = s.slice(0, max - 1) + '…';
          ctx.fillStyle = match && !match[i] ? P.dimText || '#888' : P.text;
          ctx.fillText(s, a + 3, y + ROW / 2);
        }
      }
      drawnIdx[nd] = i; drawnX0[nd] = a; drawnX1[nd] = b; nd++;
      i++;
    }
    this.nDrawn = nd;
    this.drawOverlay();
    if (this.opts.onRender) this.opts.onRender(this);
  }

  rowY(d) { return this.opts.inverted ? this.H - (d + 1) * ROW : d * ROW; }

  // rect of node I as last drawn (css px), or null
  rectOf(i) {
    for (let k = 0; k < this.nDrawn; k++) if (this.drawnIdx[k] === i) return { x0: this.drawnX0[k], x1: this.drawnX1[k], y: this.rowY(this.L.depth[i]), h: ROW - 1 };
    return null;
  }

  hitAt(x, y) {
    if (!this.L) return -1;
    const d = this.opts.inverted ? Math.floor((this.H - y) / ROW) : Math.floor(y / ROW);
    if (d < 0) return -1;
    const depth = this.L.depth;
    for (let k = 0; k < this.nDrawn; k++) {
      const i = this.drawnIdx[k];
      if (depth[i] === d && x >= this.drawnX0[k] && x < this.drawnX1[k]) return i;
    }
    return -1;
  }

  hit(e) {
    const r = this.canvas.getBoundingClientRect();
    return this.hitAt(e.clientX - r.left, e.clientY - r.top);
  }

  onMove(e) {
    const r = this.canvas.getBoundingClientRect();
    this.mx = e.clientX - r.left;
    this.my = e.clientY - r.top;
    this.cx = e.clientX;
    this.cy = e.clientY;
    this.schedule();
  }

  schedule() {
    if (!this.raf) this.raf = requestAnimationFrame(() => { this.raf = 0; this.updateHover(); });
  }

  updateHover() {
    const i = this.mx < 0 ? -1 : this.hitAt(this.mx, this.my);
    if (i !== this.hover) {
      this.hover = i;
      this.drawOverlay();
      if (this.opts.onHover) this.opts.onHover(i);
    }
    this.showTip(i);
  }

  drawOverlay() {
    const o = this.over, dpr = this.dpr || 1;
    const ctx = o.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, this.W, this.H);
    const i = this.hover;
    if (i < 0) return;
    const r = this.rectOf(i);
    if (!r) return;
    ctx.strokeStyle = this.colors().hl;
    ctx.lineWidth = 2;
    ctx.strokeRect(r.x0 + 1, r.y + 1, Math.max(1, r.x1 - r.x0 - 2), r.h - 2);
  }

  tipLines(i) {
    const L = this.L, u = this.meta.unit, tot = L.diff ? this.meta.baseTotal : L.val[0];
    const name = this.nameOf(i);
    const lines = [];
    if (L.other[i]) {
      lines.push(['b', 'other: smaller frames folded into one']);
      lines.push(['', `total ${fmtValue(L.val[i], u)} (${fmtPct(tot ? (100 * L.val[i]) / tot : 0)} of total)`]);
      lines.push(['', `The collector keeps the ${this.meta.maxNodes || ''} largest frames (max_nodes); the siblings left out are summed here.`]);
      lines.push(['hint', this.opts.onOther ? 'click: show more frames (a larger max_nodes)' : '']);
      return lines;
    }
    lines.push(['b', name]);
    const p = L.parent[i];
    if (L.diff) {
      lines.push(['', `delta ${fmtSigned(L.val[i], u)} (${fmtPct(tot ? (100 * L.val[i]) / tot : 0)} of base total)`]);
      lines.push(['', `base ${fmtValue(L.base[i], u)} → target ${fmtValue(L.target[i], u)}`]);
    } else {
      const pv = p >= 0 ? L.val[p] : L.val[i];
      lines.push(['total', `total ${fmtValue(L.val[i], u)} · ${fmtPct(tot ? (100 * L.val[i]) / tot : 0)} of total · ${fmtPct(pv ? (100 * L.val[i]) / pv : 0)} of parent`]);
      lines.push(['', `self ${fmtValue(L.self[i], u)} · ${fmtPct(tot ? (100 * L.self[i]) / tot : 0)} of total`]);
    }
    if (i > 0) lines.push(['pkg', 'package ' + L.pkgs[L.pkg[i]]]);
    lines.push(['hint', i > 0 ? 'click: zoom' + (this.opts.onSandwich ? ' · right-click: sandwich' : '') : 'click: reset zoom']);
    return lines;
  }

  showTip(i) {
    const t = this.tip;
    if (i < 0) { t.hidden = true; return; }
    if (t.dataset.node !== String(i)) {
      while (t.firstChild) t.removeChild(t.firstChild);
      for (const [cls, s] of this.tipLines(i)) if (s) t.appendChild(h('div', { class: 'tip-' + (cls || 'line') }, s));
      t.dataset.node = String(i);
      t.dataset.name = this.nameOf(i);
      t.dataset.total = String(this.L.val[i]);
    }
    t.hidden = false;
    const vw = window.innerWidth, vh = window.innerHeight;
    const tw = t.offsetWidth, th = t.offsetHeight;
    let x = this.cx + 14, y = this.cy + 16;
    if (x + tw > vw - 4) x = Math.max(4, this.cx - tw - 10);
    if (y + th > vh - 4) y = Math.max(4, this.cy - th - 10);
    t.style.left = x + 'px';
    t.style.top = y + 'px';
  }

  onClick(e) {
    const i = this.hit(e);
    if (i < 0) return;
    if (this.L.other[i]) { if (this.opts.onOther) this.opts.onOther(i); return; }
    if (this.opts.onClick) this.opts.onClick(i === this.zoom ? this.L.parent[i] : i);
  }
}
