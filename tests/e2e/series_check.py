#!/usr/bin/env python3
"""series_check.py — the data checks of tests/e2e/test_api1_series.sh: GET
/api/1/series and /api/1/diff of a real collector against `go tool pprof`
on the same profile files, the Prometheus and InfluxDB text forms against
real parsers (promtool, InfluxDB's own line protocol parser in
$BUILD/influxcheck) and a strict reading of their specs, the bad queries,
and what `profd serve --export-influx` pushes.

  series_check.py post URL MANIFEST           upload the manifest's files
  series_check.py series URL MANIFEST TMP     series checks
  series_check.py diff URL MANIFEST TMP       diff checks
  series_check.py bad URL                     bad queries: status and message
  series_check.py export URL MANIFEST TMP RECV_DIR TOKEN   post into the open window, check the push

MANIFEST: one profile per line: FILE SERVICE TYPE VERSION CREATED_AT (VERSION
percent-encoded, CREATED_AT in unix seconds).
Prints TAP lines ("ok - ...", "not ok - ...: why"); tests/run.sh counts them.
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

TOP = ["-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0"]
INFLUXCHECK = os.path.join(os.environ.get("ROOT", "."), os.environ.get("BUILD", "build"), "influxcheck")


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
            return r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


def api(url, path, **params):
    """(status, body) of a JSON answer; body is the envelope's body or error."""
    st, b, _ = http_get(url, path, params)
    try:
        env = json.loads(b)
    except ValueError:
        return st, b.decode("utf-8", "replace")
    return st, env.get("body") if st == 200 else env.get("error", "")


def read_manifest(path):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if p:
                rows.append({"file": p[0], "service": p[1], "type": p[2], "version": urllib.parse.unquote(p[3]),
                             "t": float(p[4])})
    return rows


def post_all(url, man):
    for m in man:
        labels = "version=" + urllib.parse.quote(m["version"], safe="")
        q = urllib.parse.urlencode({"service": m["service"], "type": m["type"], "labels": labels,
                                    "created_at": "%.3f" % m["t"]})
        with open(m["file"], "rb") as f:
            req = urllib.request.Request(url + "/api/0/profiles?" + q, data=f.read(), method="POST")
        with urllib.request.urlopen(req, timeout=60) as r:
            if r.status != 200:
                raise SystemExit("post %s: %s" % (m["file"], r.status))


# ---- go tool pprof --------------------------------------------------------------------------

_merged = {}


def merged(files, tmp):
    """One file: the -proto merge of files (cached)."""
    key = tuple(files)
    if len(files) == 1:
        return files[0]
    if key not in _merged:
        out = os.path.join(tmp, "m%d.pb.gz" % len(_merged))
        with open(out, "wb") as f:
            subprocess.run(["go", "tool", "pprof", "-proto"] + list(files), stdout=f, stderr=subprocess.DEVNULL,
                           check=True)
        _merged[key] = out
    return _merged[key]


UNITS = {"nanoseconds": "ns", "bytes": "B", "count": ""}


def num(tok):
    m = re.match(r"^(-?\d+)[A-Za-z]*$", tok)
    if not m:
        raise ValueError("not an integer value: %r" % tok)
    return int(m.group(1))


def pprof_top(files, tmp, si=None, unit="nanoseconds", base=None, normalize=False, extra=()):
    """go tool pprof -top of files merged: {"total", "rows": [(name, flat, cum, inline)], "text"}."""
    args = ["go", "tool", "pprof"] + TOP + list(extra)
    u = UNITS.get(unit, "")
    if u:
        args.append("-unit=" + u)
    if si:
        args.append("-sample_index=" + si)
    if normalize:
        args.append("-normalize")
    if base:
        args += ["-diff_base", merged(base, tmp)]
    args.append(merged(files, tmp))
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        raise RuntimeError("%s: %s" % (" ".join(args), r.stderr[:400]))
    lines = r.stdout.splitlines()
    total, rows, in_rows, text = None, [], False, []
    for ln in lines:
        m = re.search(r" of (\S+) total", ln)
        if m and ln.startswith("Showing nodes"):
            total = num(m.group(1))
            text.append(ln)
            continue
        if re.match(r"^\s+flat\s+flat%", ln):
            in_rows = True
            text.append(ln)
            continue
        if in_rows:
            text.append(ln)
            f = ln.split()
            name = ln.split(None, 5)[5]
            inl = ""
            mm = re.match(r"^(.*) \((inline|partial-inline)\)$", name)
            if mm:
                name, inl = mm.group(1), mm.group(2)
            rows.append((name, num(f[0]), num(f[3]), inl))
    if total is None:
        total = 0
    return {"total": total, "rows": rows, "text": text}


# ---- series -----------------------------------------------------------------------------------

def step_of(t, step):
    return int(t // step) * step


def expect_series(man, tmp, typ, step, by, fn_re, by_function, cum=False, si=None, unit="nanoseconds"):
    """{(labels tuple, function): {step: value}} from go tool pprof per (group, step)."""
    groups = {}
    for m in man:
        if m["type"] != typ:
            continue
        key = tuple(m["service"] if k == "service" else m["version"] for k in by)
        groups.setdefault(key, {}).setdefault(step_of(m["t"], step), []).append(m["file"])
    out = {}
    rx = re.compile(fn_re) if fn_re else None
    for key, steps in groups.items():
        per = {}
        for st, files in sorted(steps.items()):
            top = pprof_top(files, tmp, si=si, unit=unit)
            if not rx and not by_function:
                per.setdefault(None, {})[st] = top["total"]
                continue
            if by_function:
                for name, flat, c, _ in top["rows"]:
                    if rx is None or rx.fullmatch(name):
                        per.setdefault(name, {})[st] = c if cum else flat
            else:
                per.setdefault(None, {})[st] = sum(flat for name, flat, _, _ in top["rows"] if rx.fullmatch(name))
        for fn, pts in per.items():
            out[(key, fn)] = {st: pts.get(st, 0) for st in steps}
    return out


def got_series(body, by):
    out = {}
    for s in body["series"]:
        key = tuple(s["labels"][k] for k in by)
        out[(key, s["labels"].get("function"))] = {t: v for t, v in s["points"]}
    return out


def series_case(url, man, tmp, name, params, typ, step, by, fn_re=None, by_function=False, cum=False, si=None,
                unit="nanoseconds"):
    st, body = api(url, "/api/1/series", **params)
    if st != 200:
        return fail(name, "status %s: %s" % (st, body))
    want = expect_series(man, tmp, typ, step, by, fn_re, by_function, cum, si, unit)
    got = got_series(body, by)
    if got != want:
        missing = sorted(set(want) - set(got), key=str)[:5]
        extra = sorted(set(got) - set(want), key=str)[:5]
        diffs = [(k, want[k], got[k]) for k in want if k in got and want[k] != got[k]][:3]
        return fail(name, "missing %s; extra %s; different %s" % (missing, extra, diffs))
    bad_unit = [s for s in body["series"] if s["unit"] != unit]
    if bad_unit:
        return fail(name, "unit: %s" % bad_unit[0]["unit"])
    ok("%s (%d series, %d points)" % (name, len(got), sum(len(v) for v in got.values())))
    return body


# Prometheus text exposition 0.0.4, strictly: metric name, label names, quoted values with only \\ \" \n
# escapes, an integer value and an integer millisecond timestamp.
PROM_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
PROM_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def parse_prom(text):
    """[(name, {labels}, value, ts)] or raises ValueError naming the line."""
    out, helped, typed = [], set(), set()
    for i, ln in enumerate(text.split("\n")):
        if ln == "" and i == len(text.split("\n")) - 1:
            break
        if ln.startswith("# HELP "):
            n = ln.split(" ")[2]
            if n in helped:
                raise ValueError("line %d: second HELP for %s" % (i + 1, n))
            helped.add(n)
            continue
        if ln.startswith("# TYPE "):
            p = ln.split(" ")
            if len(p) != 4 or p[3] not in ("gauge", "counter", "untyped", "summary", "histogram"):
                raise ValueError("line %d: bad TYPE" % (i + 1))
            typed.add(p[2])
            continue
        m = PROM_NAME.match(ln)
        if not m:
            raise ValueError("line %d: no metric name: %r" % (i + 1, ln))
        name, j, labels = m.group(0), m.end(), {}
        if name not in typed:
            raise ValueError("line %d: %s has no TYPE line before it" % (i + 1, name))
        if ln[j:j + 1] == "{":
            j += 1
            while ln[j] != "}":
                lm = PROM_LABEL.match(ln, j)
                if not lm or ln[lm.end():lm.end() + 2] != '="':
                    raise ValueError("line %d: bad label at %d: %r" % (i + 1, j, ln))
                k, j, v = lm.group(0), lm.end() + 2, []
                while ln[j] != '"':
                    if ln[j] == "\\":
                        e = ln[j + 1]
                        if e not in '\\"n':
                            raise ValueError("line %d: bad escape \\%s" % (i + 1, e))
                        v.append("\n" if e == "n" else e)
                        j += 2
                    else:
                        v.append(ln[j])
                        j += 1
                if k in labels:
                    raise ValueError("line %d: label %s twice" % (i + 1, k))
                labels[k] = "".join(v)
                j += 1
                if ln[j] == ",":
                    j += 1
            j += 1
        rest = ln[j + 1:].split(" ")
        if ln[j:j + 1] != " " or len(rest) != 2 or not re.fullmatch(r"-?\d+", rest[0]) or not re.fullmatch(r"-?\d+", rest[1]):
            raise ValueError("line %d: want ' VALUE TIMESTAMP_MS': %r" % (i + 1, ln))
        out.append((name, labels, int(rest[0]), int(rest[1])))
    return out


def promtool(text):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return r.returncode == 0, r.stdout


def influx_parse(text, tmp):
    path = os.path.join(tmp, "influx.lp")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([INFLUXCHECK, "parse", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        return None, r.stderr
    return [json.loads(l) for l in r.stdout.splitlines()], ""


def text_forms(url, man, tmp, name, params, body, by, label_names=None):
    """format=prometheus and format=influx of the same query: valid, and the same points as JSON."""
    label_names = label_names or {k: k for k in by}
    want = set()
    for s in body["series"]:
        for t, v in s["points"]:
            lab = tuple(sorted([(label_names[k], s["labels"][k]) for k in by] +
                               [("type", s["type"]), ("sample_type", s["sample_type"]), ("unit", s["unit"])] +
                               ([("function", s["labels"]["function"])] if "function" in s["labels"] else [])))
            want.add((lab, v, t))
    st, b, ct = http_get(url, "/api/1/series", dict(params, format="prometheus"))
    text = b.decode()
    good, out = promtool(text)
    if not good:
        fail(name + ": prometheus: promtool check metrics", out)
    else:
        ok(name + ": prometheus: promtool check metrics")
    try:
        pts = parse_prom(text)
        got = {(tuple(sorted(l.items())), v, ts // 1000) for n, l, v, ts in pts if n == "profd_profile_value"}
        check(name + ": prometheus: strict parse = the JSON points (" + str(len(pts)) + " lines)",
              st == 200 and ct.startswith("text/plain; version=0.0.4") and got == want and len(pts) == len(want),
              "status %s, %s; missing %s extra %s" % (st, ct, list(want - got)[:3], list(got - want)[:3]))
    except ValueError as e:
        fail(name + ": prometheus: strict parse", e)
    st, b, ct = http_get(url, "/api/1/series", dict(params, format="influx"))
    pts, err = influx_parse(b.decode(), tmp)
    if pts is None:
        return fail(name + ": influx: InfluxDB's parser", err)
    ok(name + ": influx: InfluxDB's parser (%d points)" % len(pts))
    got = {(tuple(sorted((k, v) for k, v in p["tags"].items())), p["value"], p["time"] // 10**9) for p in pts}
    want_i = {(tuple(x for x in lab if x[1] != ""), v, t) for lab, v, t in want}  # empty tags are left out
    check(name + ": influx: measurement, tags, integer values, ns timestamps = the JSON points",
          st == 200 and all(p["measurement"] == "profd_profile" and p["time"] % 10**9 == 0 for p in pts) and
          got == want_i and len(pts) == len(want),
          "missing %s extra %s" % (list(want_i - got)[:3], list(got - want_i)[:3]))


def run_series(url, man, tmp):
    t0 = min(m["t"] for m in man)
    rng = {"from": "%d" % (t0 - 60), "to": "%d" % (t0 + 900)}
    cpu = [m for m in man if m["type"] == "cpu" and m["service"] in ("api", "db")]
    CPU = 'cpu{service=~"api|db"}'
    # totals per service, 2m and 5m steps
    for step, sname in ((120, "2m"), (300, "5m")):
        p = dict(rng, query=CPU, step=sname)
        b = series_case(url, cpu, tmp, "series: cpu total per service per %s step = go tool pprof -top total of "
                        "the step's files" % sname, p, "cpu", step, ["service"])
    if b:
        text_forms(url, cpu, tmp, "series total", dict(rng, query=CPU, step="5m"), b, ["service"])
    # steps without profiles have no point; steps are multiples of step since the epoch
    st, body = api(url, "/api/1/series", **dict(rng, query='cpu{service="api"}', step="100s"))
    pts = [t for s in body["series"] for t, _ in s["points"]] if st == 200 else []
    want = sorted({step_of(m["t"], 100) for m in cpu if m["service"] == "api"})
    check("series: one point per step with profiles, at multiples of step (100s)", pts == want,
          "points at %s, want %s" % (pts, want))
    # one function, flat (default by = service,function)
    series_case(url, cpu, tmp, "series: function=crypto/sha256\\.block flat per step = go tool pprof -top flat",
                dict(rng, query=CPU, step="2m", function=r"crypto/sha256\.block"), "cpu", 120,
                ["service"], r"crypto/sha256\.block", True)
    # a regex over many functions, flat and cum, each its own series
    for cum in (False, True):
        p = dict(rng, query=CPU, step="5m", function=r"main\..*", value="cum" if cum else "flat")
        b = series_case(url, cpu, tmp, "series: function=main\\..* value=%s: one series per function = go tool "
                        "pprof -top %s" % ("cum" if cum else "flat", "cum" if cum else "flat"),
                        p, "cpu", 300, ["service"], r"main\..*", True, cum)
    if b:
        text_forms(url, cpu, tmp, "series per function", p, b, ["service"])
    # by=service: the matching functions summed
    series_case(url, cpu, tmp, "series: function=main\\..*&by=service: the functions' flat summed per step",
                dict(rng, query=CPU, step="5m", function=r"main\..*", by="service"), "cpu", 300,
                ["service"], r"main\..*", False)
    # by=service,version
    b = series_case(url, cpu, tmp, "series: by=service,version: one series per label values",
                    dict(rng, query=CPU, step="2m", by="service,version"), "cpu", 120, ["service", "version"])
    # heap, another sample index
    heap = [m for m in man if m["type"] == "heap"]
    series_case(url, heap, tmp, "series: heap sample_index=alloc_space = go tool pprof -sample_index=alloc_space",
                dict(rng, query="heap", step="5m", sample_index="alloc_space"), "heap", 300, ["service"],
                si="alloc_space", unit="bytes")
    # n: the top series
    st, body = api(url, "/api/1/series", **dict(rng, query=CPU, step="5m", function=".*", n="3"))
    if st == 200:
        sums = [sum(abs(v) for _, v in s["points"]) for s in body["series"]]
        check("series: n=3 keeps the 3 largest series (series_matched says how many matched)",
              len(body["series"]) == 3 and body["series_matched"] > 3 and sums == sorted(sums, reverse=True),
              "%d series, matched %s, sums %s" % (len(body["series"]), body["series_matched"], sums))
    else:
        fail("series: n=3", "%s %s" % (st, body))
    # escaping: label values with every special character of both formats
    esc = [m for m in man if m["service"] == "esc"]
    p = dict(rng, query='cpu{service="esc"}', step="5m", by="service,version,function", function=r"main\..*")
    st, b = api(url, "/api/1/series", **p)
    if st == 200 and b["series"]:
        vs = {s["labels"]["version"] for s in b["series"]}
        check("series: label values with quotes, backslash, comma, space, equals round-trip in JSON",
              vs == {m["version"] for m in esc}, vs)
        text_forms(url, esc, tmp, "series escaping", p, b, ["service", "version"])
    else:
        fail("series: escaping", "%s %s" % (st, b))
    # a by label that clashes with a fixed label and one that is not a Prometheus name
    p = dict(rng, query='cpu{service="esc"}', step="5m", by="service,version")
    st, b = api(url, "/api/1/series", **p)
    if st == 200:
        text_forms(url, esc, tmp, "series by=service,version of the escaped values", p, b, ["service", "version"])


# ---- diff -------------------------------------------------------------------------------------

def files_of(man, **kw):
    return [m["file"] for m in man if all(m[k] == v for k, v in kw.items())]


def diff_case(url, man, tmp, name, params, base_files, target_files, normalize=False, si=None, unit="nanoseconds"):
    try:
        want = pprof_top(target_files, tmp, si=si, unit=unit, base=base_files, normalize=normalize)
    except RuntimeError as e:
        return fail(name, e)
    p = dict(params, n="100000")
    if normalize:
        p["normalize"] = "true"
    if si:
        p["sample_index"] = si
    st, body = api(url, "/api/1/diff", **p)
    if st != 200:
        return fail(name, "status %s: %s" % (st, body))
    got = [(r["name"], r["delta_flat"], r["delta_cum"], r.get("inline", "")) for r in body["rows"]]
    if not check(name + ": top rows = go tool pprof -top -diff_base%s (%d rows)" % (" -normalize" if normalize else "",
                                                                                    len(got)),
                 got == want["rows"] and body["total"] == want["total"] and body["functions"] == len(got),
                 "total %s want %s; first differences %s" % (
                     body["total"], want["total"],
                     [(g, w) for g, w in zip(got, want["rows"]) if g != w][:3] or (len(got), len(want["rows"])))):
        return
    bad = [r for r in body["rows"] if r["delta_flat"] != r["target_flat"] - r["base_flat"] or
           r["delta_cum"] != r["target_cum"] - r["base_cum"]]
    check(name + ": delta = target - base on every row", not bad, bad[:2])
    if not normalize:
        bt = {r[0]: r for r in pprof_top(base_files, tmp, si=si, unit=unit)["rows"]}
        tt = {r[0]: r for r in pprof_top(target_files, tmp, si=si, unit=unit)["rows"]}
        bad = [r for r in body["rows"] if (r["base_flat"], r["base_cum"]) != tuple(bt.get(r["name"], ("", 0, 0))[1:3]) or
               (r["target_flat"], r["target_cum"]) != tuple(tt.get(r["name"], ("", 0, 0))[1:3])]
        check(name + ": base and target columns = go tool pprof -top of each side", not bad, bad[:2])
    # the pprof form: go tool pprof -top of it = -diff_base
    st, b, ct = http_get(url, "/api/1/diff", dict(p, format="pprof"))
    path = os.path.join(tmp, "served-diff.pb.gz")
    with open(path, "wb") as f:
        f.write(b)
    try:
        served = pprof_top([path], tmp, si=si, unit=unit)
        check(name + ": format=pprof read by go tool pprof -top = -top -diff_base, line for line",
              st == 200 and served["text"] == want["text"],
              "status %s; %s" % (st, [(x, y) for x, y in zip(served["text"], want["text"]) if x != y][:3]))
    except RuntimeError as e:
        fail(name + ": format=pprof", e)
    # the flame graph: deltas, with base and target per node, every total kept
    st, fb = api(url, "/api/1/diff", **dict(p, format="flamegraph", max_nodes="40"))
    if st != 200:
        return fail(name + ": format=flamegraph", "%s %s" % (st, fb))
    errs = []

    def walk(n):
        for k, sk in (("value", "self"), ("base", "base_self"), ("target", "target_self")):
            if n[sk] + sum(c[k] for c in n["children"]) != n[k]:
                errs.append((n["name"], k))
        if n["value"] != n["target"] - n["base"]:
            errs.append((n["name"], "delta"))
        for c in n["children"]:
            walk(c)
    walk(fb["root"])
    r = fb["root"]
    check(name + ": format=flamegraph: value = target - base and value = self + children on every node, "
          "root = the totals (%d nodes)" % fb["nodes"],
          not errs and r["base"] == body["base"]["total"] and r["target"] == body["target"]["total"] and
          fb["nodes"] <= 40 + 40, (errs[:3], r["base"], r["target"]))


def run_diff(url, man, tmp):
    t0 = min(m["t"] for m in man)
    rng = {"from": "%d" % (t0 - 60), "to": "%d" % (t0 + 900)}
    diff_case(url, man, tmp, "diff api 1.0 vs 1.1",
              dict(rng, base='cpu{service="api",version="1.0"}', target='cpu{service="api",version="1.1"}'),
              files_of(man, service="api", type="cpu", version="1.0"),
              files_of(man, service="api", type="cpu", version="1.1"))
    diff_case(url, man, tmp, "diff api 1.0 vs 1.1 normalized",
              dict(rng, base='cpu{service="api",version="1.0"}', target='cpu{service="api",version="1.1"}'),
              files_of(man, service="api", type="cpu", version="1.0"),
              files_of(man, service="api", type="cpu", version="1.1"), normalize=True)
    diff_case(url, man, tmp, "diff of every service, version 1.0 vs 1.1 (query= as the target)",
              dict(rng, base='cpu{service=~"api|db",version="1.0"}', query='cpu{service=~"api|db",version="1.1"}'),
              [m["file"] for m in man if m["type"] == "cpu" and m["service"] in ("api", "db") and m["version"] == "1.0"],
              [m["file"] for m in man if m["type"] == "cpu" and m["service"] in ("api", "db") and m["version"] == "1.1"])
    # time ranges: the first 250 s against the rest, same selector
    early = [m["file"] for m in man if m["type"] == "cpu" and m["service"] == "db" and m["t"] < t0 + 260]
    late = [m["file"] for m in man if m["type"] == "cpu" and m["service"] == "db" and m["t"] >= t0 + 260]
    diff_case(url, man, tmp, "diff by time: base_from/base_to vs from/to",
              {"base": 'cpu{service="db"}', "target": 'cpu{service="db"}', "base_from": "%d" % (t0 - 60),
               "base_to": "%d" % (t0 + 259), "from": "%d" % (t0 + 260), "to": "%d" % (t0 + 900)}, early, late)
    diff_case(url, man, tmp, "diff heap sample_index=alloc_space",
              dict(rng, base='heap{version="1.0"}', target='heap{version="1.1"}'),
              files_of(man, type="heap", version="1.0"), files_of(man, type="heap", version="1.1"),
              si="alloc_space", unit="bytes")


# ---- bad queries ------------------------------------------------------------------------------

def run_bad(url, man):
    t0 = "%d" % (min(m["t"] for m in man) - 60)
    cases = [
        ("/api/1/series", {"query": 'cpu{service=}'}, 400, r'bad query "cpu\{service=\}": at 12: expected a quoted value'),
        ("/api/1/series", {"query": 'cpux{service="a"}'}, 400, r'unknown profile type "cpux"'),
        ("/api/1/series", {"query": "cpu", "from": "now-1h", "to": "now-2h"}, 400, r'"from" after "to"'),
        ("/api/1/series", {"query": "cpu", "from": "now-2000h"}, 400, r'range over the limit.*--max-query-range'),
        ("/api/1/series", {"query": "cpu", "function": "main.(foo"}, 400,
         r'bad "function" "main\.\(foo": regex "main\.\(foo" does not compile'),
        ("/api/1/series", {"query": "cpu", "function": "a(b)\\1"}, 400, r'bad "function".*unsupported in RE2/Prometheus selector syntax: back-reference'),
        ("/api/1/series", {"query": "cpu", "from": "now-24h", "step": "1s"}, 400,
         r'86401 steps of 1s .*over the limit of 11000 points per series; use a larger "step"'),
        ("/api/1/series", {"query": "cpu", "step": "fast"}, 400, r'bad "step" "fast"'),
        ("/api/1/series", {"query": "cpu", "step": "1500ms"}, 400, r'bad "step" "1500ms": want whole seconds'),
        ("/api/1/series", {"query": "cpu", "by": "service,9lives"}, 400, r'bad "by" .*"9lives" is not a label name'),
        ("/api/1/series", {"query": "cpu", "by": "service,service"}, 400, r'"service" given twice'),
        ("/api/1/series", {"query": "cpu", "by": "a,b,c,d,e,f,g,h,i"}, 400, r'over the limit of 8 labels'),
        ("/api/1/series", {"query": "cpu", "format": "csv"}, 400, r'bad "format" "csv": want json, prometheus or influx'),
        ("/api/1/series", {"query": "cpu", "value": "avg"}, 400, r'bad "value" "avg"'),
        ("/api/1/series", {"query": "cpu", "n": "0"}, 400, r'bad "n" "0": want an integer in \[1, 1000\]'),
        ("/api/1/series", {"query": "cpu", "from": t0, "sample_index": "bogus"}, 400,
         r'bad "sample_index" "bogus": the cpu profiles have sample types'),
        ("/api/1/series", {"query": "cpu", "function": "x" * 1100}, 413, r'regex of 1100 bytes, over the limit'),
        ("/api/1/diff", {"target": "cpu"}, 400, r'missing "base"'),
        ("/api/1/diff", {"base": "cpu"}, 400, r'missing "target"'),
        ("/api/1/diff", {"base": 'cpu{version="1.0"', "target": "cpu"}, 400, r'bad "base": bad query .*at 17'),
        ("/api/1/diff", {"base": "cpu", "target": "gpu"}, 400, r'bad "target": .*unknown profile type "gpu"'),
        ("/api/1/diff", {"base": "cpu", "target": "cpu", "from": "now", "to": "now-1h"}, 400, r'"from" after "to"'),
        ("/api/1/diff", {"base": "cpu", "target": "cpu", "base_from": "now-1h", "base_to": "now-2h"}, 400,
         r'"base_from" after "base_to"'),
        ("/api/1/diff", {"base": "cpu", "target": "cpu", "base_from": "now-2000h"}, 400,
         r'range over the limit: base_from .*narrow "base_from"/"base_to"'),
        ("/api/1/diff", {"base": "cpu", "target": "cpu", "base_to": "yesterday"}, 400, r'bad "base_to" timestamp'),
        ("/api/1/diff", {"base": "cpu", "target": "cpu", "format": "svg"}, 400, r'want top, pprof or flamegraph'),
        ("/api/1/diff", {"base": "cpu", "target": "cpu", "normalize": "yes"}, 400, r'bad "normalize" "yes"'),
        ("/api/1/diff", {"base": 'cpu{service="nosuch"}', "target": "cpu", "from": t0}, 404,
         r'^base: no profiles match cpu\{service="nosuch"\}'),
        ("/api/1/diff", {"base": "cpu", "target": 'cpu{service="nosuch"}', "from": t0}, 404,
         r'^target: no profiles match'),
        ("/api/1/diff", {"base": 'heap{service="api"}', "target": 'cpu{service="api"}', "from": t0}, 400,
         r'sample types'),
        ("/api/1/diff", {"base": "cpu", "target": "cpu", "from": t0, "sample_index": "bogus"}, 400,
         r'bad "sample_index" "bogus"'),
    ]
    for path, params, code, rx in cases:
        st, msg = api(url, path, **params)
        shown = {k: (v if len(v) < 40 else v[:20] + "...") for k, v in params.items()}
        check("bad query %s %s: %d naming the problem" % (path, shown, code),
              st == code and isinstance(msg, str) and re.search(rx, msg),
              "status %s: %s (want /%s/)" % (st, msg, rx))


# ---- export -----------------------------------------------------------------------------------

def run_export(url, man, tmp, recv, token, every=3, delay=1):
    """Post the manifest's cpu profiles of api and db into the window that opens next; check the push."""
    now = time.time()
    w = (int(now) // every + 1) * every
    if w - now < 0.3:
        w += every
    time.sleep(max(0, w - time.time()) + 0.05)
    sel = [m for m in man if m["type"] == "cpu" and m["service"] in ("api", "db") and m["version"] == "1.0"]
    posted = []
    for k, m in enumerate(sel):
        mm = dict(m, t=w + 0.1 + 0.01 * k)
        posted.append(mm)
    post_all(url, posted)
    if time.time() > w + every + delay - 0.2:
        return fail("export: posted within the window", "the machine is too slow: %.2fs" % (time.time() - w))
    deadline = time.time() + every + delay + 15
    want_ts = w * 10**9
    found = None
    while time.time() < deadline and not found:
        for f in sorted(os.listdir(recv)):
            p = os.path.join(recv, f)
            if f.endswith(".lp") and (" %d\n" % want_ts) in open(p).read():
                found = p
        time.sleep(0.2)
    bad = [f for f in os.listdir(recv) if f.endswith(".bad")]
    check("export: the receiver's InfluxDB parser accepted every push", not bad,
          [open(os.path.join(recv, f)).read()[-300:] for f in bad][:1])
    if not check("export: the window's lines arrived within every + delay", found, os.listdir(recv)):
        return
    meta = open(found[:-3] + ".meta").read()
    check("export: POST to the URL as given, with the token and a text/plain body",
          meta.startswith("POST /api/v2/write?org=o&bucket=b&precision=ns\n") and
          ("Authorization: Token %s\n" % token) in meta and "Content-Type: text/plain" in meta, meta)
    pts, err = influx_parse(open(found).read(), tmp)
    if pts is None:
        return fail("export: InfluxDB's parser", err)
    mine = [p for p in pts if p["time"] == want_ts]
    errs = []
    for svc in ("api", "db"):
        files = [m["file"] for m in posted if m["service"] == svc]
        top = pprof_top(files, tmp)
        want = {(None, top["total"])} | {(n, f) for n, f, _, _ in top["rows"][:3]}
        got = {(p["tags"].get("function"), p["value"]) for p in mine if p["tags"].get("service") == svc}
        if got != want:
            errs.append((svc, sorted(got, key=str), sorted(want, key=str)))
        tags = [p["tags"] for p in mine if p["tags"].get("service") == svc]
        if any(t.get("type") != "cpu" or t.get("unit") != "nanoseconds" or t.get("sample_type") != "cpu" for t in tags):
            errs.append((svc, "tags", tags[:1]))
    check("export: per service, the window's total and its top 3 functions = go tool pprof -top of the "
          "window's profiles (%d lines)" % len(mine), not errs and len(mine) == 8, errs)


def main():
    mode = sys.argv[1]
    url = sys.argv[2]
    if mode == "post":
        post_all(url, read_manifest(sys.argv[3]))
    elif mode == "series":
        run_series(url, read_manifest(sys.argv[3]), sys.argv[4])
    elif mode == "diff":
        run_diff(url, read_manifest(sys.argv[3]), sys.argv[4])
    elif mode == "bad":
        run_bad(url, read_manifest(sys.argv[3]))
    elif mode == "export":
        run_export(url, read_manifest(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
