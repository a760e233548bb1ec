// util.js — DOM, formatting, selectors and times shared by every view.
// Untrusted strings (function names, labels, errors) only ever go through
// text nodes: h() never parses HTML.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const k in attrs) {
      const v = attrs[k];
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k === 'value') el.value = v;
      else if (k === 'checked') el.checked = !!v;
      else if (k === 'style') throw new Error('no style attributes (CSP)');
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// ---- values, as pprof prints them (1.23s, 420ms, 10.50MB) ----

const TIME_UNITS = [[3600e9, 'h'], [60e9, 'm'], [1e9, 's'], [1e6, 'ms'], [1e3, 'us'], [1, 'ns']];
const BYTE_UNITS = [[1024 ** 5, 'PB'], [1024 ** 4, 'TB'], [1024 ** 3, 'GB'], [1024 ** 2, 'MB'], [1024, 'kB'], [1, 'B']];

function trim(x) {
  let s = x.toFixed(2);
  if (s.includes('.')) s = s.replace(/0+$/, '').replace(/\.$/, '');
  return s;
}

export function fmtValue(v, unit) {
  if (v === undefined || v === null || Number.isNaN(v)) return '';
  const neg = v < 0;
  const a = Math.abs(v);
  let s;
  if (unit === 'nanoseconds') s = scaled(a, TIME_UNITS);
  else if (unit === 'bytes') s = scaled(a, BYTE_UNITS);
  else if (a >= 1e9) s = trim(a / 1e9) + 'G';
  else if (a >= 1e6) s = trim(a / 1e6) + 'M';
  else if (a >= 1e4) s = trim(a / 1e3) + 'k';
  else s = trim(a);
  return (neg ? '-' : '') + s;
}

function scaled(a, units) {
  if (a === 0) return '0';
  for (const [f, u] of units) if (a >= f) return trim(a / f) + u;
  const last = units[units.length - 1];
  return trim(a / last[0]) + last[1];
}

export function fmtPct(p) {
  if (p === undefined || p === null || !Number.isFinite(p)) return '';
  return p.toFixed(2) + '%';
}

export function fmtSigned(v, unit) {
  return (v > 0 ? '+' : '') + fmtValue(v, unit);
}

// ---- selectors: TYPE{name op "value", ...} (docs/api.md "Selectors") ----

export const TYPES = ['cpu', 'heap', 'allocs', 'block', 'mutex', 'goroutine', 'threadcreate', 'other'];
export const OPS = ['=', '!=', '=~', '!~'];
const IDENT = /^[A-Za-z_][A-Za-z0-9_.:/-]*$/;

export function quote(s) {
  let out = '"';
  for (const ch of String(s)) {
    const c = ch.codePointAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (c < 0x20 || c === 0x7f) out += '\\x' + c.toString(16).padStart(2, '0');
    else out += ch;
  }
  return out + '"';
}

export function formatSelector(sel) {
  const m = sel.matchers.map((x) => (IDENT.test(x.name) ? x.name : quote(x.name)) + x.op + quote(x.value));
  if (!m.length) return sel.type || '{}';
  return (sel.type || '') + '{' + m.join(', ') + '}';
}

// parseSelector: {type, matchers} or null when the text is not a selector
// this parser knows (the collector's own error is then shown).
export function parseSelector(text) {
  const s = String(text || '').trim();
  let i = 0;
  const ws = () => { while (i < s.length && /\s/.test(s[i])) i++; };
  const sel = { type: '', matchers: [] };
  const tm = /^[a-z]+/.exec(s);
  if (tm) { sel.type = tm[0]; i = tm[0].length; }
  ws();
  if (i >= s.length) return sel.type || !s ? sel : null;
  if (s[i] !== '{') return null;
  i++;
  const str = () => {
    const q = s[i];
    if (q === '`') {
      const j = s.indexOf('`', i + 1);
      if (j < 0) throw 0;
      const v = s.slice(i + 1, j); i = j + 1; return v;
    }
    if (q !== '"' && q !== "'") throw 0;
    i++;
    let v = '';
    while (i < s.length && s[i] !== q) {
      if (s[i] === '\\') {
        const e = s[i + 1];
        const simple = { n: '\n', t: '\t', r: '\r', a: '\x07', b: '\b', f: '\f', v: '\v', '\\': '\\', '"': '"', "'": "'" };
        if (e in simple) { v += simple[e]; i += 2; }
        else if (e === 'x') { v += String.fromCharCode(parseInt(s.substr(i + 2, 2), 16)); i += 4; }
        else if (e === 'u') { v += String.fromCodePoint(parseInt(s.substr(i + 2, 4), 16)); i += 6; }
        else if (e === 'U') { v += String.fromCodePoint(parseInt(s.substr(i + 2, 8), 16)); i += 10; }
        else if (/[0-7]/.test(e)) { v += String.fromCharCode(parseInt(s.substr(i + 1, 3), 8)); i += 4; }
        else throw 0;
      } else v += s[i++];
    }
    if (s[i] !== q) throw 0;
    i++;
    return v;
  };
  try {
    for (;;) {
      ws();
      if (s[i] === '}') { i++; break; }
      let name;
      if (s[i] === '"' || s[i] === "'" || s[i] === '`') name = str();
      else {
        const nm = /^[A-Za-z_][A-Za-z0-9_.:/-]*/.exec(s.slice(i));
        if (!nm) return null;
        name = nm[0]; i += name.length;
      }
      ws();
      const om = /^(=~|!~|!=|=)/.exec(s.slice(i));
      if (!om) return null;
      i += om[0].length;
      ws();
      const value = str();
      sel.matchers.push({ name, op: om[0], value });
      ws();
      if (s[i] === ',') { i++; continue; }
      if (s[i] === '}') { i++; break; }
      return null;
    }
  } catch (e) {
    return null;
  }
  ws();
  return i === s.length ? sel : null;
}

// withMatcher: the selector text with matchers on NAME replaced by one (or removed: value null)
export function withMatcher(query, name, op, value) {
  const sel = parseSelector(query) || { type: '', matchers: [] };
  sel.matchers = sel.matchers.filter((m) => m.name !== name);
  if (value !== null && value !== undefined) sel.matchers.push({ name, op, value });
  return formatSelector(sel);
}

export function withType(query, type) {
  const sel = parseSelector(query) || { type: '', matchers: [] };
  sel.type = type;
  return formatSelector(sel);
}

// RE2 escape of a literal (anchored by the caller)
export function reEscape(s) {
  return String(s).replace(/[\\.+*?()|[\]{}^$]/g, '\\$&');
}

// ---- times (docs/api.md "Times") ----

const DUR_UNITS = { ns: 1e-9, us: 1e-6, 'µs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };

export function parseDuration(d) {
  const re = /([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0, m, n = 0;
  re.lastIndex = 0;
  while (re.lastIndex < d.length && (m = re.exec(d))) { total += parseFloat(m[1]) * DUR_UNITS[m[2]]; n++; }
  if (!n || re.lastIndex !== d.length) return null;
  return total;
}

// toUnix: seconds since the epoch of any form the API accepts, or null
export function toUnix(t, now = Date.now() / 1000) {
  const s = String(t || '').trim();
  if (!s) return null;
  if (s === 'now') return now;
  let m = /^(now)?([+-])(.+)$/.exec(s);
  if (m) {
    const d = parseDuration(m[3]);
    return d === null ? null : now + (m[2] === '-' ? -d : d);
  }
  if (/^[0-9]+(\.[0-9]+)?$/.test(s)) return parseFloat(s);
  const iso = /[zZ]|[+-]\d\d:\d\d$/.test(s) ? s : s + 'Z';
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? null : ms / 1000 + fracNs(s);
}

function fracNs(s) { // Date.parse keeps milliseconds only
  const m = /\.(\d+)/.exec(s);
  if (!m || m[1].length <= 3) return 0;
  return parseFloat('0.000' + m[1].slice(3));
}

export function isoTime(unix) {
  return new Date(Math.round(unix * 1000)).toISOString().replace('.000Z', 'Z');
}

// absTime: an absolute form of T for a link that must name the same range later
export function absTime(t) {
  const s = String(t || '').trim();
  if (/^(now|[+-]|now[+-])/.test(s)) {
    const u = toUnix(s);
    return u === null ? s : String(Math.floor(u));
  }
  return s;
}

export function fmtTime(unix) {
  const d = new Date(unix * 1000);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function shQuote(s) {
  s = String(s);
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'";
}

// a file name made of NAME (a service, an id: anyone's strings) that stays in
// the directory it is saved to: no '/', no shell or control characters
export function fileName(name) {
  return String(name).replace(/[^A-Za-z0-9._+-]/g, '_');
}

export function qs(params) {
  const u = new URLSearchParams();
  for (const k in params) {
    const v = params[k];
    if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  }
  return u.toString();
}

// package of a Go function name: what precedes the last '.' of its package path
export function goPackage(name) {
  let n = name;
  const br = n.indexOf('[');
  if (br > 0) n = n.slice(0, br);
  const slash = n.lastIndexOf('/');
  const dot = n.indexOf('.', slash + 1);
  if (dot < 0) return n;
  return n.slice(0, dot);
}

export function hash32(s) {
  let x = 2166136261;
  for (let i = 0; i < s.length; i++) { x ^= s.charCodeAt(i); x = Math.imul(x, 16777619); }
  return x >>> 0;
}

export function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

export function debounce(fn, ms) {
  let t = 0;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}
