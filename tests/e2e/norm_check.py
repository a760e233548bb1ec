#!/usr/bin/env python3
"""norm_check.py — the data checks of tests/e2e/test_api1_norm.sh: API v1's
normalisation (docs/api.md "Normalisation") on real profiles of two (and a
third) instances of one service, each expected value computed independently
with `go tool pprof` on the same files:

  gauges (heap, goroutine)   per instance: go tool pprof -top of its snapshots
                             (pprof merges them) / their count; summed over
                             the instances
  cumulative=true (allocs)   per instance: go tool pprof -top -base FIRST LAST;
                             summed; an instance with one snapshot left out
  cpu cores                  flat of go tool pprof -top of all the files x
                             instances / the sum of the files' duration_nanos
                             (read from the protobuf here)
  normalize=false            go tool pprof -top of every file (the raw sum)

  norm_check.py post URL MANIFEST       upload the manifest's files
  norm_check.py check URL MANIFEST FROM TO STEP

MANIFEST: one profile per line: FILE SERVICE TYPE INSTANCE CUMULATIVE(0|1)
CREATED_AT (unix seconds). Prints TAP lines ("ok - ...", "not ok - ...: why").
"""
import gzip
import json
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict

TOP = ["-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0"]


def ok(name):
    print("ok - " + name, flush=True)


def fail(name, why):
    print("not ok - %s: %s" % (name, str(why).replace("\n", " | ")[:1500]), flush=True)


def check(name, cond, why=""):
    if cond:
        ok(name)
    else:
        fail(name, why)
    return cond


def http_get(url, path, params):
    q = urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url + path + ("?" + q if q else ""), timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def api(url, path, **params):
    st, b = http_get(url, path, params)
    try:
        j = json.loads(b)
    except ValueError:
        return st, b
    return st, j.get("body", j.get("error"))


def manifest(path):
    rows = []
    for line in open(path):
        f = line.split()
        if len(f) == 6:
            rows.append({"file": f[0], "service": f[1], "type": f[2], "instance": f[3], "cumulative": f[4] == "1",
                         "created": int(f[5])})
    return rows


def post(url, mpath):
    bad = []
    for r in manifest(mpath):
        labels = "instance=" + urllib.parse.quote(r["instance"], safe="")
        if r["cumulative"]:
            labels += ",cumulative=true"
        q = urllib.parse.urlencode({"service": r["service"], "type": r["type"], "labels": labels,
                                    "created_at": str(r["created"])})
        req = urllib.request.Request(url + "/api/0/profiles?" + q, data=open(r["file"], "rb").read(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                if resp.status != 200:
                    bad.append("%s: %d" % (r["file"], resp.status))
        except urllib.error.HTTPError as e:
            bad.append("%s: %d %s" % (r["file"], e.code, e.read()[:200]))
    if bad:
        print("\n".join(bad))
        sys.exit(1)


# ---- go tool pprof -------------------------------------------------------------------

ROW = re.compile(r"^\s*(-?[0-9.]+)([a-zA-Z]*)\s+(-?[0-9.]+)%\s+(-?[0-9.]+)%\s+(-?[0-9.]+)([a-zA-Z]*)\s+(-?[0-9.]+)%\s+(.*)$")
TOTAL = re.compile(r"of (-?[0-9.]+)([a-zA-Z]*) total")


def pprof_top(files, *args):
    """{name: (flat, cum)} and the total of go tool pprof -top (values in the raw unit: pass -unit=B or -unit=ns)."""
    p = subprocess.run(["go", "tool", "pprof"] + TOP + list(args) + list(files), capture_output=True, text=True)
    rows, total, on = {}, None, False
    for line in p.stdout.splitlines():
        m = TOTAL.search(line)
        if m and line.startswith("Showing nodes"):
            total = int(float(m.group(1)))
        if re.match(r"^\s*flat\s+flat%", line):
            on = True
            continue
        if on:
            m = ROW.match(line)
            if m:
                name = re.sub(r" \((partial-)?inline\)$", "", m.group(8))
                rows[name] = (int(float(m.group(1))), int(float(m.group(5))))
    if total is None:
        raise RuntimeError("go tool pprof %s %s: %s" % (" ".join(args), " ".join(files), p.stderr[:400]))
    return rows, total


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def duration_nanos(path):
    """Field 10 of profile.proto (Profile.duration_nanos), read from the file itself."""
    b = open(path, "rb").read()
    if b[:2] == b"\x1f\x8b":
        b = gzip.decompress(b)
    i, dur = 0, 0
    while i < len(b):
        tag, i = varint(b, i)
        f, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = varint(b, i)
            if f == 10:
                dur = v
        elif wt == 2:
            n, i = varint(b, i)
            i += n
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
    return dur


def got_rows(body):
    return {r["name"]: (r["flat"], r["cum"]) for r in body["rows"]}


def compare(name, got, want, tol, total_got=None, total_want=None):
    """got {name: (flat, cum)}; want {name: (float flat, float cum)}: every function within tol of round(want)."""
    bad = []
    for k in set(got) | set(want):
        g = got.get(k, (0, 0))
        w = want.get(k, (0.0, 0.0))
        if abs(g[0] - round(w[0])) > tol or abs(g[1] - round(w[1])) > tol:
            bad.append("%s: got %s want %.2f %.2f" % (k, g, w[0], w[1]))
    if total_want is not None and abs(total_got - round(total_want)) > tol:
        bad.append("total: got %s want %.2f" % (total_got, total_want))
    nz = sum(1 for v in want.values() if round(v[0]) or round(v[1]))
    return check("%s (%d functions)" % (name, nz), not bad and nz > 0, "; ".join(sorted(bad)[:8]) or "no rows")


def check_all(url, mpath, frm, to, step):
    rows = manifest(mpath)
    W = {"from": frm, "to": to}
    by = defaultdict(list)  # (type, instance, cumulative) -> files, ascending created
    for r in sorted(rows, key=lambda r: r["created"]):
        by[(r["type"], r["instance"], r["cumulative"])].append(r["file"])
    insts = sorted({r["instance"] for r in rows if r["type"] == "heap"})

    # ---- gauges: heap (inuse_space, inuse_objects, alloc_space), goroutine
    for typ, si, unit in (("heap", None, "-unit=B"), ("heap", "inuse_objects", None), ("heap", "alloc_space", "-unit=B"),
                          ("goroutine", None, None)):
        want, wtot = defaultdict(lambda: [0.0, 0.0]), 0.0
        for inst in insts:
            files = by[(typ, inst, False)]
            args = [a for a in (unit, "-sample_index=" + si if si else None) if a]
            rs, tot = pprof_top(files, *args)
            for k, (f, c) in rs.items():
                want[k][0] += f / len(files)
                want[k][1] += c / len(files)
            wtot += tot / len(files)
        params = dict(W, query='%s{service="web"}' % typ, n="1000")
        if si:
            params["si"] = si
        st, b = api(url, "/api/1/top", **params)
        if not check("top %s%s: 200" % (typ, " si=" + si if si else ""), st == 200, b):
            continue
        label = "top %s%s = sum over the %d instances of (go tool pprof -top of its snapshots) / snapshots" % (
            typ, " si=" + si if si else "", len(insts))
        # goroutine: go tool pprof leaves samples without locations out of -top's total alike
        compare(label, got_rows(b), want, 1, b["total"], wtot)
        nm = b["normalization"]
        nsnap = sum(len(by[(typ, i, False)]) for i in insts)
        check("top %s: normalization says gauge_average, %d sources, %d profiles" % (typ, len(insts), nsnap),
              nm["mode"] == "gauge_average" and nm["sources"] == len(insts) and nm["profiles"] == nsnap
              and nm["excluded"] == 0 and "cores" not in b, nm)
        if typ == "heap" and si is None:
            heap_total = b["total"]
            svc = b["services"][0]
            check("top heap: the service's total and sources", svc["total"] == b["total"] and svc["sources"] == len(insts),
                  svc)

    # ---- normalize=false: the raw sum, as before
    for typ, unit in (("heap", "-unit=B"), ("cpu", "-unit=ns")):
        files = [r["file"] for r in rows if r["type"] == typ]
        rs, tot = pprof_top(files, unit)
        st, b = api(url, "/api/1/top", **dict(W, query='%s{service="web"}' % typ, n="1000", normalize="false"))
        if check("top %s normalize=false: 200" % typ, st == 200, b):
            compare("top %s normalize=false = go tool pprof -top of all %d files (summed)" % (typ, len(files)),
                    got_rows(b), {k: (float(v[0]), float(v[1])) for k, v in rs.items()}, 0, b["total"], tot)
            check("top %s normalize=false: mode none, no cores" % typ,
                  b["normalization"]["mode"] == "none" and "cores" not in b, b["normalization"])

    # ---- cumulative=true allocs: latest - earliest per instance; single snapshots left out
    want, wtot, used, single = defaultdict(lambda: [0.0, 0.0]), 0, 0, 0
    cinst = sorted({r["instance"] for r in rows if r["type"] == "allocs"})
    for inst in cinst:
        files = by[("allocs", inst, True)]
        if len(files) < 2:
            single += len(files)
            continue
        used += len(files)
        rs, tot = pprof_top([files[-1]], "-unit=B", "-base", files[0])
        for k, (f, c) in rs.items():
            want[k][0] += f
            want[k][1] += c
        wtot += tot
    st, b = api(url, "/api/1/top", **dict(W, query='allocs{service="web"}', n="1000"))
    if check("top allocs (cumulative=true): 200", st == 200, b):
        compare("top allocs cumulative=true = sum over instances of go tool pprof -top -base FIRST LAST", got_rows(b),
                want, 0, b["total"], wtot)
        nm = b["normalization"]
        check("top allocs: normalization: cumulative_delta, %d sources, %d used, %d excluded (single snapshot), a note"
              % (len(cinst), used, single),
              nm["mode"] == "cumulative_delta" and nm["sources"] == len(cinst) and nm["used"] == used
              and nm["excluded"] == single and nm.get("resets") == 0 and "only one" in nm.get("note", "")
              and "normalize=false" in nm.get("note", ""), nm)
    st, mb = http_get(url, "/api/1/merge", dict(W, query='allocs{service="web"}'))
    if check("merge allocs format=pprof: 200", st == 200, mb[:200]):
        open(mpath + ".allocs.pb.gz", "wb").write(mb)
        rs, tot = pprof_top([mpath + ".allocs.pb.gz"], "-unit=B")
        compare("merge allocs (pprof, read by go tool pprof -top) = the same deltas summed",
                {k: v for k, v in rs.items()}, want, 0, tot, wtot)

    # ---- merge of a gauge: a valid pprof, rounded per sample; format=top reads as it
    st, mb = http_get(url, "/api/1/merge", dict(W, query='heap{service="web"}'))
    if check("merge heap format=pprof: 200", st == 200, mb[:200]):
        open(mpath + ".heap.pb.gz", "wb").write(mb)
        rs, tot = pprof_top([mpath + ".heap.pb.gz"], "-unit=B")
        st2, b2 = api(url, "/api/1/merge", **dict(W, query='heap{service="web"}', format="top", n="100000"))
        check("merge heap: format=top = go tool pprof -top of format=pprof (averaged profile)",
              st2 == 200 and got_rows(b2) == rs and b2["total"] == tot
              and b2["normalization"]["mode"] == "gauge_average", (st2, tot))
        check("merge heap: total within 0.01%% of the exact average (%d vs %d): per-sample rounding" % (tot, heap_total),
              abs(tot - heap_total) <= max(1, heap_total // 10000), (tot, heap_total))

    # ---- cpu: raw sums unchanged; cores = flat x instances / sum(duration_nanos)
    cfiles = [r["file"] for r in rows if r["type"] == "cpu"]
    cinsts = sorted({r["instance"] for r in rows if r["type"] == "cpu"})
    wall = sum(duration_nanos(f) for f in cfiles)
    rs, tot = pprof_top(cfiles, "-unit=ns")
    st, b = api(url, "/api/1/top", **dict(W, query='cpu{service="web"}', n="1000"))
    if check("top cpu: 200", st == 200, b):
        compare("top cpu (normalised) = go tool pprof -top of all %d files: cpu is summed" % len(cfiles), got_rows(b),
                {k: (float(v[0]), float(v[1])) for k, v in rs.items()}, 0, b["total"], tot)
        k = len(cinsts) / wall if wall else 0
        bad = [r["name"] for r in b["rows"]
               if abs(r["flat_cores"] - r["flat"] * k) > 1e-9 * max(1, r["flat"] * k)
               or abs(r["cum_cores"] - r["cum"] * k) > 1e-9 * max(1, r["cum"] * k)]
        check("top cpu: flat_cores/cum_cores = value x %d instances / %d ns (the files' duration_nanos)"
              % (len(cinsts), wall), wall > 0 and not bad and abs(b["cores"] - tot * k) < 1e-9 * tot * k, bad[:5])
        svc = b["services"][0]
        check("top cpu: the service's wall_seconds, sources and cores",
              abs(svc["wall_seconds"] - wall / 1e9) < 1e-6 and svc["sources"] == len(cinsts)
              and abs(svc["cores"] - b["cores"]) < 1e-12, svc)
        st2, b2 = api(url, "/api/1/top", **dict(W, query='cpu{service="web"}', n="1000", by="function,service"))
        check("top cpu by=function,service: flat_cores/cum_cores per (function, service)",
              st2 == 200 and all(abs(r["flat_cores"] - r["flat"] * k) <= 1e-9 * max(1, r["flat"] * k)
                                 for r in b2["rows"]), b2 if st2 != 200 else "")
        st2, b2 = api(url, "/api/1/top", **dict(W, query='cpu{service="web"}', n="1000", by="service"))
        check("top cpu by=service: cores", st2 == 200 and abs(b2["rows"][0]["cores"] - b["cores"]) < 1e-12, b2)
        st2, b2 = api(url, "/api/1/top", **dict(W, query='cpu{service="web"}', n="1000", si="samples"))
        check("top cpu si=samples: no cores (not a time)", st2 == 200 and "cores" not in b2
              and "flat_cores" not in b2["rows"][0], b2.get("cores") if isinstance(b2, dict) else b2)

    # ---- series: one step holds every gauge snapshot = /top; allocs over two steps add up to /top
    st, b = api(url, "/api/1/series", **dict(W, query='heap{service="web"}', step=str(step * 2)))
    pts = [p for s in (b["series"] if st == 200 else []) for p in s["points"]]
    check("series heap, one step: the point = top's total (%s)" % heap_total,
          st == 200 and len(pts) == 1 and pts[0][1] == heap_total and b["normalization"]["mode"] == "gauge_average",
          (st, pts, b if st != 200 else ""))
    st, b = api(url, "/api/1/series", **dict(W, query='allocs{service="web"}', step=str(step)))
    pts = [p for s in (b["series"] if st == 200 else []) for p in s["points"]]
    check("series allocs (cumulative), %d steps: each step against the latest snapshot before it; the points add up "
          "to top's total %d" % (len(pts), wtot),
          st == 200 and len(pts) == 2 and sum(p[1] for p in pts) == wtot, (st, pts))
    st, b = api(url, "/api/1/series", **dict(W, query='allocs{service="web"}', step=str(step), normalize="false"))
    pts2 = [p for s in (b["series"] if st == 200 else []) for p in s["points"]]
    rs, rawtot = pprof_top([r["file"] for r in rows if r["type"] == "allocs"], "-unit=B")
    check("series allocs normalize=false: the snapshots summed (%d)" % rawtot,
          st == 200 and sum(p[1] for p in pts2) == rawtot and b["normalization"]["mode"] == "none", (st, pts2))
    st, b = api(url, "/api/1/series", **dict(W, query='cpu{service="web"}', step=str(step * 2), unit="cores"))
    pts = [p for s in (b["series"] if st == 200 else []) for p in s["points"]]
    k = len(cinsts) / wall if wall else 0
    check("series cpu unit=cores: the point = total x %d / wall (%.6f cores)" % (len(cinsts), tot * k),
          st == 200 and len(pts) == 1 and abs(pts[0][1] - tot * k) < 1e-9 * tot * k
          and b["series"][0]["unit"] == "cores", (st, pts))
    st, t = http_get(url, "/api/1/series", dict(W, query='cpu{service="web"}', step=str(step * 2), unit="cores",
                                                 format="prometheus"))
    t = t.decode()
    check("series unit=cores format=prometheus: unit=\"cores\", a float value",
          st == 200 and 'unit="cores"' in t and re.search(r'\} [0-9.e+-]+ [0-9]+$', t.strip()), t[-300:])
    st, t = http_get(url, "/api/1/series", dict(W, query='cpu{service="web"}', step=str(step * 2), unit="cores",
                                                 format="influx"))
    t = t.decode()
    check("series unit=cores format=influx: a float field \"cores\"", st == 200 and " cores=" in t and "i " not in t,
          t[-300:])

    # ---- diff: each side averaged per source
    a, bi = insts[0], insts[1]
    st, b = api(url, "/api/1/diff", **dict(W, base='heap{instance="%s"}' % a, target='heap{instance="%s"}' % bi))
    _, ta = pprof_top(by[("heap", a, False)], "-unit=B")
    _, tb = pprof_top(by[("heap", bi, False)], "-unit=B")
    check("diff heap instance A vs B: each side is its instance's average (%d, %d)" % (ta / len(by[("heap", a, False)]),
                                                                                       tb / len(by[("heap", bi, False)])),
          st == 200 and abs(b["base"]["total"] - ta / len(by[("heap", a, False)])) <= 1000
          and abs(b["target"]["total"] - tb / len(by[("heap", bi, False)])) <= 1000
          and b["base"]["normalization"]["mode"] == "gauge_average", b if st != 200 else (b["base"], b["target"]))
    st, b = api(url, "/api/1/diff", **dict(W, base='heap{instance="%s"}' % a, target='heap{instance="%s"}' % bi,
                                           raw="true"))
    check("diff raw=true: the sides summed", st == 200 and b["base"]["total"] == ta and b["target"]["total"] == tb,
          (st, b))

    # ---- bad parameters
    for path, params, want in (("/api/1/top", {"normalize": "maybe"}, 'bad "normalize" "maybe": want true or false'),
                               ("/api/1/merge", {"normalize": "2"}, 'bad "normalize" "2"'),
                               ("/api/1/series", {"unit": "furlongs"}, 'bad "unit" "furlongs": want raw or cores'),
                               ("/api/1/series", {"unit": "cores", "query": 'heap{service="web"}'},
                                'bad "unit" "cores": the heap profiles'),
                               ("/api/1/diff", {"raw": "x", "base": "heap", "target": "heap"}, 'bad "raw" "x"')):
        p = dict(W, query='cpu{service="web"}')
        p.update(params)
        st, b = api(url, path, **p)
        check("%s %s: 400 %s" % (path, params, want), st == 400 and want in str(b), (st, b))
    st, b = api(url, "/api/1/merge", **dict(W, query='allocs{instance="%s"}' % [i for i in cinst if len(by[("allocs", i, True)]) < 2][0]))
    check("merge of only single cumulative snapshots: 404 saying why", st == 404 and "single cumulative=true snapshot" in str(b)
          and "normalize=false" in str(b), (st, b))


def main():
    if sys.argv[1] == "post":
        post(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "check":
        check_all(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))


if __name__ == "__main__":
    main()
