// api.js — every call to the collector. Relative URLs only (the page may be
// served under a path prefix); the read token, when the collector asks for
// one, is kept in sessionStorage and sent as "Authorization: Bearer".
import { qs, fileName } from './util.js';

const KEY = 'profd-token';

export class ApiError extends Error {
  constructor(status, message, url) {
    super(message);
    this.status = status;
    this.url = url;
  }
}

let prompt = null;      // async (message, refused) => token or null; set by the app
let pending = null;     // the prompt in progress, shared by concurrent requests
let declined = false;   // the user closed the form: do not ask again until asked to

export function setTokenPrompt(fn) { prompt = fn; }
export function token() { return sessionStorage.getItem(KEY) || ''; }
export function setToken(t) {
  if (t) sessionStorage.setItem(KEY, t); else sessionStorage.removeItem(KEY);
  declined = false;
}
export function allowPrompt() { declined = false; }

function headers() {
  const t = token();
  return t ? { Authorization: 'Bearer ' + t } : {};
}

async function errorOf(res) {
  const text = await res.text().catch(() => '');
  try {
    const j = JSON.parse(text);
    if (j && typeof j.error === 'string') return j.error;
  } catch (e) { /* not JSON */ }
  return text.trim().slice(0, 500) || res.status + ' ' + res.statusText;
}

export function url(path, params) {
  const q = params ? qs(params) : '';
  return q ? path + '?' + q : path;
}

// A busy collector answers 503 with Retry-After (too many merges at once:
// --max-concurrent-merges); such an answer is asked again, at most BUSY_RETRIES
// times, after the time it says (at most 10 s), unless the request is aborted.
const BUSY_RETRIES = 3;

function retryAfterMs(res) {
  const v = res.headers.get('Retry-After');
  if (v === null || v.trim() === '') return null;
  const s = Number(v);
  if (Number.isFinite(s) && s >= 0) return Math.min(s, 10) * 1000;
  const d = Date.parse(v); // an HTTP date
  return Number.isNaN(d) ? null : Math.min(Math.max(d - Date.now(), 0), 10000);
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const aborted = () => new DOMException('The request was aborted', 'AbortError');
    if (signal && signal.aborted) { reject(aborted()); return; }
    const onAbort = () => { clearTimeout(t); reject(aborted()); };
    const t = setTimeout(() => {
      if (signal) signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
  });
}

// request: the Response of a 2xx answer, else an ApiError with the API's message
export async function request(path, params, opts = {}) {
  const u = url(path, params);
  let busy = 0;
  for (let attempt = 0; ; attempt++) {
    const sent = token();
    let res;
    try {
      res = await fetch(u, { headers: headers(), signal: opts.signal, cache: 'no-store' });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, 'cannot reach the collector: ' + e.message, u);
    }
    if (res.ok) return res;
    const wait = res.status === 503 && busy < BUSY_RETRIES ? retryAfterMs(res) : null;
    const msg = await errorOf(res);
    if (wait !== null) {
      busy++;
      await sleep(wait, opts.signal);
      continue;
    }
    if (res.status === 401 && prompt && !declined && attempt < 3) {
      if (!pending) {
        pending = prompt(msg, !!sent).finally(() => { pending = null; });
      }
      const t = await pending;
      if (t) { setToken(t); continue; }
      if (token() && token() !== sent) continue; // another request's prompt set one
      declined = true;
    }
    throw new ApiError(res.status, msg, u);
  }
}

const cache = new Map();
const CACHE_MAX = 40;

// get: the body of a JSON answer ({"code":200,"body":...}), cached by URL
export async function get(path, params, opts = {}) {
  const u = url(path, params);
  if (!opts.fresh && cache.has(u)) return cache.get(u);
  const p = request(path, params, opts).then(async (res) => {
    const j = await res.json();
    const body = j.body;
    if (j.partial && body && typeof body === 'object') body.__partial = j.skipped_days || true;
    return body;
  });
  cache.set(u, p);
  p.catch(() => cache.delete(u));
  if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value);
  return p;
}

export function clearCache() { cache.clear(); }

// download: fetch (with the token) into a Blob, then save it under its name
export async function download(path, params, fallbackName) {
  const res = await request(path, params);
  const blob = await res.blob();
  const cd = res.headers.get('Content-Disposition') || '';
  const m = /filename="?([^";]+)"?/.exec(cd);
  const name = fileName(m ? m[1] : fallbackName || 'profile.pb.gz');
  const href = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = href;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 60000);
  return { name, size: blob.size };
}
