// timeline.js — the selection's cost per step (/api/1/series), stacked by
// service or a label, on a <canvas>: drag to zoom into a range, click a bar
// to open that step's profiles.
import { h, clear, fmtValue, fmtTime, hash32, cssVar, toUnix } from './util.js';

const HEIGHT = 110, LEFT = 58, BOTTOM = 18, TOP = 6;

export function seriesColor(key, dark) {
  const x = hash32(key);
  return `hsl(${x % 360} ${55 + (x >>> 9) % 20}% ${dark ? 55 : 50}%)`;
}

export class Timeline {
  constructor(host, opts = {}) {
    this.o = opts;
    this.canvas = h('canvas', { class: 'timeline-canvas', 'data-role': opts.role || 'timeline' });
    this.tip = h('div', { class: 'tip', hidden: true });
    this.legend = h('div', { class: 'legend' });
    this.el = h('div', { class: 'timeline' }, this.canvas, this.legend);
    host.appendChild(this.el);
    document.body.appendChild(this.tip);
    this.drag = null;
    this.canvas.addEventListener('pointerdown', (e) => { this.drag = { x0: this.px(e), x1: this.px(e) }; this.canvas.setPointerCapture(e.pointerId); });
    this.canvas.addEventListener('pointermove', (e) => this.onMove(e));
    this.canvas.addEventListener('pointerup', (e) => this.onUp(e));
    this.canvas.addEventListener('pointerleave', () => { this.tip.hidden = true; });
    this.ro = new ResizeObserver(() => { if (this.data && this.el.clientWidth !== this.W) this.render(); });
    this.ro.observe(this.el);
  }

  destroy() { this.ro.disconnect(); this.tip.remove(); }

  px(e) { return e.clientX - this.canvas.getBoundingClientRect().left; }

  set(data) {
    this.data = data;
    const from = toUnix(data.from), to = toUnix(data.to);
    this.from = from; this.to = Math.max(to, from + 1);
    this.step = data.step;
    const ts = new Set();
    for (const s of data.series) for (const p of s.points) ts.add(p[0]);
    this.ts = [...ts].sort((a, b) => a - b);
    this.idx = new Map(this.ts.map((t, i) => [t, i]));
    this.stack = data.series.map((s) => {
      const v = new Float64Array(this.ts.length);
      for (const p of s.points) v[this.idx.get(p[0])] = p[1];
      return v;
    });
    this.unit = data.series.length ? data.series[0].unit : '';
    this.render();
    this.renderLegend();
  }

  key(s) {
    const l = s.labels || {};
    const ks = Object.keys(l);
    if (!ks.length) return s.type || 'total';
    return ks.map((k) => (ks.length > 1 ? k + '=' : '') + (l[k] === '' ? '(none)' : l[k])).join(' ');
  }

  renderLegend() {
    clear(this.legend);
    const dark = document.documentElement.dataset.theme === 'dark';
    this.data.series.forEach((s, i) => {
      const sum = this.stack[i].reduce((a, b) => a + b, 0);
      const sw = h('span', { class: 'swatch' });
      sw.style.background = seriesColor(this.key(s), dark);
      this.legend.appendChild(h('span', { class: 'legend-item', 'data-series': this.key(s) }, sw, this.key(s), h('span', { class: 'muted' }, ` ${fmtValue(sum, this.unit)} · ${s.profiles} profiles`)));
    });
    if (!this.data.series.length) this.legend.appendChild(h('span', { class: 'muted' }, 'no profiles in this range'));
  }

  x(t) { return LEFT + ((t - this.from) / (this.to - this.from)) * (this.W - LEFT - 4); }
  t(x) { return this.from + ((x - LEFT) / (this.W - LEFT - 4)) * (this.to - this.from); }

  render() {
    const W = this.el.clientWidth;
    if (!W || !this.data) return;
    const dpr = window.devicePixelRatio || 1;
    const c = this.canvas;
    if (this.W !== W || this.dpr !== dpr) {
      c.width = Math.round(W * dpr); c.height = Math.round(HEIGHT * dpr);
      c.style.width = W + 'px'; c.style.height = HEIGHT + 'px';
      this.W = W; this.dpr = dpr;
    }
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const dark = document.documentElement.dataset.theme === 'dark';
    ctx.fillStyle = cssVar('--panel') || (dark ? '#1b1e24' : '#fff');
    ctx.fillRect(0, 0, W, HEIGHT);
    const n = this.ts.length;
    let max = 0;
    const tot = new Float64Array(n);
    for (const v of this.stack) for (let i = 0; i < n; i++) tot[i] += Math.max(0, v[i]);
    for (let i = 0; i < n; i++) if (tot[i] > max) max = tot[i];
    const ph = HEIGHT - TOP - BOTTOM;
    const fg = cssVar('--muted') || '#777';
    ctx.strokeStyle = cssVar('--border') || '#ccc';
    ctx.beginPath(); ctx.moveTo(LEFT, TOP + ph + 0.5); ctx.lineTo(W - 4, TOP + ph + 0.5); ctx.stroke();
    ctx.fillStyle = fg;
    ctx.font = '11px ' + (cssVar('--sans') || 'sans-serif');
    ctx.textBaseline = 'top';
    ctx.textAlign = 'right';
    ctx.fillText(fmtValue(max, this.unit), LEFT - 6, TOP);
    ctx.fillText('0', LEFT - 6, TOP + ph - 10);
    ctx.textAlign = 'center';
    const nt = Math.max(1, Math.min(4, Math.floor((W - LEFT) / 130)));
    for (let k = 0; k <= nt; k++) {
      const t = this.from + ((this.to - this.from) * k) / nt;
      const s = fmtTime(t).slice(5, 16);
      ctx.textAlign = k === 0 ? 'left' : k === nt ? 'right' : 'center';
      ctx.fillText(s, k === 0 ? LEFT : k === nt ? W - 4 : this.x(t), TOP + ph + 4);
    }
    const bw = Math.max(2, this.x(this.from + this.step) - this.x(this.from) - 1);
    this.bw = bw;
    const cols = this.data.series.map((s) => seriesColor(this.key(s), dark));
    for (let i = 0; i < n; i++) {
      let y = TOP + ph;
      const x = this.x(this.ts[i]);
      for (let s = 0; s < this.stack.length; s++) {
        const v = this.stack[s][i];
        if (v <= 0 || !max) continue;
        const hgt = Math.max(1, (v / max) * ph);
        ctx.fillStyle = cols[s];
        ctx.fillRect(x, y - hgt, bw, hgt);
        y -= hgt;
      }
    }
    if (this.drag && Math.abs(this.drag.x1 - this.drag.x0) > 3) {
      ctx.fillStyle = dark ? 'rgba(120,160,255,0.25)' : 'rgba(40,90,200,0.18)';
      const a = Math.min(this.drag.x0, this.drag.x1), b = Math.max(this.drag.x0, this.drag.x1);
      ctx.fillRect(a, TOP, b - a, ph);
    }
  }

  stepAt(x) {
    for (let i = this.ts.length - 1; i >= 0; i--) {
      const x0 = this.x(this.ts[i]);
      if (x >= x0 - 1 && x <= x0 + this.bw + 1) return this.ts[i];
    }
    return null;
  }

  onMove(e) {
    const x = this.px(e);
    if (this.drag) { this.drag.x1 = x; this.render(); }
    const t = this.stepAt(x);
    if (t === null || !this.data) { this.tip.hidden = true; return; }
    const i = this.idx.get(t);
    clear(this.tip);
    this.tip.appendChild(h('div', { class: 'tip-b' }, fmtTime(t) + ' (+' + this.step + 's)'));
    this.data.series.forEach((s, k) => {
      if (this.stack[k][i]) this.tip.appendChild(h('div', {}, this.key(s) + ': ' + fmtValue(this.stack[k][i], this.unit)));
    });
    this.tip.appendChild(h('div', { class: 'tip-hint' }, 'click: this step\'s profiles · drag: zoom'));
    this.tip.hidden = false;
    this.tip.style.left = Math.min(window.innerWidth - this.tip.offsetWidth - 4, e.clientX + 12) + 'px';
    this.tip.style.top = e.clientY + 14 + 'px';
  }

  onUp(e) {
    const d = this.drag;
    this.drag = null;
    if (!d) return;
    const x = this.px(e);
    if (Math.abs(x - d.x0) > 4) {
      const a = Math.max(this.from, this.t(Math.min(d.x0, x))), b = Math.min(this.to, this.t(Math.max(d.x0, x)));
      this.render();
      if (this.o.onZoom && b > a) this.o.onZoom(Math.floor(a), Math.ceil(b));
      return;
    }
    this.render();
    const t = this.stepAt(x);
    if (t !== null && this.o.onPick) this.o.onPick(t, this.step);
  }
}
