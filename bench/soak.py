#!/usr/bin/env python3
"""soak.py BASE PID SECONDS DIR... — a collector's memory, descriptors and
threads over a long run of steady traffic (bench/soak.sh starts it).

Uploaders post the gzip'd pprof files found under each DIR (TYPE/NNNN.pb.gz,
as `loadgen scrape` writes them) round-robin, each one rewritten on the way:
its time_nanos becomes now (a small fraction: 1 to 40 days ago, so that day
files are made, closed by --max-open-partitions and dropped by retention),
and every function and file name gets the current "build" as a suffix: the
build changes every --deploy-every uploads, so the store keeps meeting new
symbols, as it does when services are deployed. Services svc0..svcN-1, labels
pod and version (the build).

Queriers meanwhile ask what a developer's page and scripts ask: lists,
single profiles just uploaded, merges (pprof, top, flame), fleet top, series,
labels, diff between the last two builds, rollouts, the web UI, /metrics,
and now and then a DELETE of an upload.

Every --every seconds one line: elapsed s, uploads, queries, errors, the
collector's VmRSS and VmHWM (KiB), open descriptors, threads. At the end,
with --probe N, every route asked N times alone (the load stopped: median and
longest answer in ms); then the queriers' routes, slowest in total first
(count, median, 90th percentile and longest answer in ms, total s), and a
summary line. Any answer outside what a sound request gets (a 5xx, no
answer) counts as an error, printed once per route with its body; the exit
code is 1 if there was any.
"""
import argparse
import gzip
import http.client
import os
import random
import sys
import threading
import time
import urllib.parse

from procstat import proc_status

ap = argparse.ArgumentParser()
ap.add_argument("base")
ap.add_argument("pid", type=int)
ap.add_argument("seconds", type=float)
ap.add_argument("dirs", nargs="+")
ap.add_argument("--uploaders", type=int, default=2)
ap.add_argument("--queriers", type=int, default=2)
ap.add_argument("--rate", type=float, default=100.0, help="uploads per second in all (0: as fast as answered)")
ap.add_argument("--services", type=int, default=20)
ap.add_argument("--deploy-every", type=int, default=3000)
ap.add_argument("--backdate", type=float, default=0.02, help="fraction of uploads dated 1 to 40 days ago")
ap.add_argument("--every", type=float, default=10.0)
ap.add_argument("--token", default="")
ap.add_argument("--probe", type=int, default=0,
                help="after the run, with nothing else going on, ask every route N times in turn: median and longest")
ap.add_argument("--skip", default="", help="comma-separated paths the queriers leave out, e.g. /api/1/regressions")
args = ap.parse_args()

u = urllib.parse.urlsplit(args.base)
HOST, PORT = u.hostname, u.port or 80
HDRS = {"Authorization": "Bearer " + args.token} if args.token else {}


# ---- protobuf, top level only ------------------------------------------------

def uvarint(b, i):
    x = s = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7F) << s
        if c < 0x80:
            return x, i
        s += 7


def put_uvarint(x):
    out = bytearray()
    while x >= 0x80:
        out.append((x & 0x7F) | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def fields(b):
    """(field, wire type, start, end of the whole field, payload start)"""
    i, n = 0, len(b)
    while i < n:
        st = i
        key, i = uvarint(b, i)
        f, wt = key >> 3, key & 7
        ps = i
        if wt == 0:
            _, i = uvarint(b, i)
        elif wt == 1:
            i += 8
        elif wt == 2:
            ln, i = uvarint(b, i)
            ps = i
            i += ln
        elif wt == 5:
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, st, i, ps


class Template:
    """A profile split at its time_nanos and the strings that name code."""

    def __init__(self, raw):
        self.parts = []  # bytes, or ("str", bytes), or "time"
        last = 0
        for f, wt, st, end, ps in fields(raw):
            if f == 9 and wt == 0:  # time_nanos
                self.parts.append(raw[last:st])
                self.parts.append("time")
                last = end
            elif f == 6 and wt == 2:  # string_table entry
                s = raw[ps:end]
                if b"." in s or b"/" in s:
                    self.parts.append(raw[last:st])
                    self.parts.append(("str", s))
                    last = end
        self.parts.append(raw[last:])
        if "time" not in self.parts:
            self.parts.append("time")

    def render(self, tnanos, build):
        out = []
        suffix = (".b%d" % build).encode()
        for p in self.parts:
            if p == "time":
                out.append(b"\x48" + put_uvarint(tnanos))
            elif isinstance(p, tuple):
                s = p[1] + suffix
                out.append(b"\x32" + put_uvarint(len(s)) + s)
            else:
                out.append(p)
        return b"".join(out)


def load(dirs):
    t = []
    for d in dirs:
        for typ in sorted(os.listdir(d)):
            sub = os.path.join(d, typ)
            if not os.path.isdir(sub):
                continue
            for name in sorted(os.listdir(sub))[:200]:
                with open(os.path.join(sub, name), "rb") as fh:
                    t.append((typ, Template(gzip.decompress(fh.read()))))
    if not t:
        sys.exit("soak: no profiles under " + " ".join(dirs))
    random.Random(1).shuffle(t)
    return t


# ---- shared state ------------------------------------------------------------

lock = threading.Lock()
stats = {"up": 0, "q": 0, "err": 0}
lat = {}  # route -> [seconds], the queriers' answers
errs_seen = set()
recent = []  # (id, service)
build = [0]
stop = threading.Event()


def note_error(route, status, body):
    with lock:
        stats["err"] += 1
        if route in errs_seen:
            return
        errs_seen.add(route)
    print("ERROR %s -> %s %r" % (route, status, body[:300]), file=sys.stderr, flush=True)


class Conn:
    def __init__(self):
        self.c = None

    def do(self, method, path, body=None, hdrs=None):
        for attempt in range(2):
            try:
                if self.c is None:
                    self.c = http.client.HTTPConnection(HOST, PORT, timeout=120)
                h = dict(HDRS)
                h.update(hdrs or {})
                self.c.request(method, path, body=body, headers=h)
                r = self.c.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.c.close()
                    self.c = None
                return r.status, data
            except (OSError, http.client.HTTPException) as e:
                if self.c:
                    self.c.close()
                self.c = None
                if attempt:
                    return None, str(e).encode()
        return None, b""


def uploader(k, templates):
    c = Conn()
    rng = random.Random(100 + k)
    i = k
    per = args.uploaders / args.rate if args.rate > 0 else 0
    nxt = time.monotonic()
    while not stop.is_set():
        typ, t = templates[i % len(templates)]
        i += args.uploaders
        now = time.time()
        if rng.random() < args.backdate:
            now -= rng.uniform(1, 40) * 86400
        b = build[0]
        raw = t.render(int(now * 1e9), b)
        body = gzip.compress(raw, 1)
        svc = "svc%d" % (i % args.services)
        q = urllib.parse.urlencode({"service": svc, "type": typ,
                                    "labels": "pod=%s-%d,version=b%d" % (svc, i % 5, b)})
        st, data = c.do("POST", "/api/0/profiles?" + q, body, {"Content-Type": "application/octet-stream"})
        if st == 200:
            pid = data.split(b'"id":"', 1)[1][:20].decode() if b'"id":"' in data else None
            with lock:
                stats["up"] += 1
                if stats["up"] % args.deploy_every == 0:
                    build[0] += 1
                if pid:
                    recent.append((pid, svc))
                    if len(recent) > 500:
                        del recent[:250]
        elif st in (400, 413) and b"retention" in data or st == 503:
            pass  # past the retention window; or busy: both are answers to a sound request
        else:
            note_error("POST upload", st, data)
        if per:
            nxt += per
            d = nxt - time.monotonic()
            if d > 0:
                time.sleep(d)
            else:
                nxt = time.monotonic()


def queries(rng):
    svc = "svc%d" % rng.randrange(args.services)
    b = build[0]
    sel = 'cpu{service="%s"}' % svc
    with lock:
        pick = rng.choice(recent) if recent else None
    qs = [
        ("/api/0/profiles", {"service": svc, "type": "cpu", "from": "now-2m", "to": "now", "limit": "50"}),
        ("/api/0/profiles/merge", {"service": svc, "type": "cpu", "from": "now-1m", "to": "now"}),
        ("/api/0/profiles/merge", {"service": svc, "type": "heap", "from": "now-5m", "to": "now"}),
        ("/api/0/services", {}),
        ("/api/1/merge", {"query": sel, "from": "now-2m", "format": "top", "n": "20"}),
        ("/api/1/merge", {"query": 'heap{service="%s"}' % svc, "from": "now-2m", "format": "flamegraph"}),
        ("/api/1/top", {"query": "cpu{}", "from": "now-5m", "to": "now", "n": "10"}),
        ("/api/1/top", {"query": "cpu{}", "from": "now-2h", "to": "now", "n": "10", "by": "function"}),
        ("/api/1/series", {"query": sel, "from": "now-10m", "step": "1m", "format": "json"}),
        ("/api/1/series", {"query": "cpu{}", "from": "now-10m", "step": "1m", "format": "prometheus", "by": "service"}),
        ("/api/1/labels", {"query": "cpu", "from": "now-1h"}),
        ("/api/1/labels/version/values", {"query": "cpu", "from": "now-1h"}),
        ("/api/1/types", {"from": "now-1h"}),
        ("/api/1/diff", {"base": 'cpu{version="b%d"}' % max(b - 1, 0), "target": 'cpu{version="b%d"}' % b,
                         "from": "now-30m", "format": "top", "n": "10"}),
        ("/api/1/rollouts", {"query": "cpu{}", "from": "now-1h", "label": "version"}),
        ("/api/1/regressions", {"query": "cpu{}", "from": "now-1h", "format": "json", "n": "10"}),
        ("/", {}),
        ("/metrics", {}),
        ("/metrics/profiles", {}),
    ]
    if pick:
        qs.append(("/api/0/profiles/" + pick[0], {}))
    skip = set(filter(None, args.skip.split(",")))
    return [(p, ps) for p, ps in qs if p not in skip]


def route_name(path, params):
    route = path if not path.startswith("/api/0/profiles/") or path.endswith("/merge") else "/api/0/profiles/ID"
    if path in ("/api/1/merge", "/api/1/series", "/api/1/top") or path.endswith("/merge"):
        route += " " + params.get("format", params.get("by", params.get("type", "")))
    return route


def probe(n):
    """Every route n times in turn, alone: the latencies of a quiet collector."""
    c = Conn()
    rng = random.Random(300)
    got = {}
    for _ in range(n):
        for path, params in queries(rng):
            if path == "/api/0/profiles/ID":
                continue
            url = path + ("?" + urllib.parse.urlencode(params) if params else "")
            t = time.monotonic()
            st, data = c.do("GET", url)
            got.setdefault(route_name(path, params), []).append(time.monotonic() - t)
            if st not in (200, 404, 413):
                note_error("GET " + path + " (probe)", st, data)
    print("probe (alone, %d times each): route median_ms max_ms" % n, flush=True)
    for route, ts in sorted(got.items(), key=lambda kv: -sorted(kv[1])[len(kv[1]) // 2]):
        ts = sorted(ts)
        print("probe %s %.1f %.1f" % (route.replace(" ", ":"), 1e3 * ts[len(ts) // 2], 1e3 * ts[-1]), flush=True)


def querier(k):
    c = Conn()
    rng = random.Random(200 + k)
    while not stop.is_set():
        for path, params in queries(rng):
            if stop.is_set():
                break
            url = path + ("?" + urllib.parse.urlencode(params) if params else "")
            t = time.monotonic()
            st, data = c.do("GET", url)
            t = time.monotonic() - t
            route = route_name(path, params)
            with lock:
                stats["q"] += 1
                lat.setdefault(route, []).append(t)
            # 404: nothing in the range yet; 413: a range over the merge limit
            if st not in (200, 404, 413, 503):
                note_error("GET " + path, st, data)
        if rng.random() < 0.2:
            with lock:
                pick = recent.pop(rng.randrange(len(recent))) if recent else None
            if pick:
                st, data = c.do("DELETE", "/api/0/profiles/" + pick[0])
                with lock:
                    stats["q"] += 1
                if st not in (200, 204, 404):
                    note_error("DELETE profile", st, data)


def main():
    templates = load(args.dirs)
    ts = [threading.Thread(target=uploader, args=(k, templates), daemon=True) for k in range(args.uploaders)]
    ts += [threading.Thread(target=querier, args=(k,), daemon=True) for k in range(args.queriers)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    print("seconds uploads queries errors rss_kib hwm_kib fds threads build", flush=True)
    rows = []
    dead = False
    while True:
        time.sleep(max(0.0, min(args.every, args.seconds - (time.monotonic() - t0))))
        el = time.monotonic() - t0
        p = proc_status(args.pid)
        if p is None:
            dead = True
            print("soak: the collector (pid %d) is gone" % args.pid, file=sys.stderr, flush=True)
            break
        with lock:
            s = dict(stats)
        rows.append((el, p["VmRSS"]))
        print("%.0f %d %d %d %d %d %d %d %d" % (el, s["up"], s["q"], s["err"], p["VmRSS"], p["VmHWM"],
                                                 p["fds"], p["Threads"], build[0]), flush=True)
        if el >= args.seconds:
            break
    stop.set()
    for t in ts:
        t.join(timeout=150)
    half = [r for e, r in rows if e >= args.seconds / 2]
    if args.probe and not dead:
        time.sleep(2)
        probe(args.probe)
    with lock:
        s = dict(stats)
        routes = sorted(lat.items(), key=lambda kv: -sum(kv[1]))
    print("route count median_ms p90_ms max_ms total_s", flush=True)
    for route, ts in routes:
        ts = sorted(ts)
        print("%s %d %.1f %.1f %.1f %.1f" % (route.replace(" ", ":"), len(ts), 1e3 * ts[len(ts) // 2],
                                            1e3 * ts[int(len(ts) * 0.9)], 1e3 * ts[-1], sum(ts)), flush=True)
    print("soak: %d uploads, %d queries, %d errors, %d builds; RSS second half %d..%d KiB%s"
          % (s["up"], s["q"], s["err"], build[0] + 1, min(half) if half else 0, max(half) if half else 0,
             "; COLLECTOR DIED" if dead else ""), flush=True)
    return 1 if s["err"] or dead else 0


if __name__ == "__main__":
    sys.exit(main())
