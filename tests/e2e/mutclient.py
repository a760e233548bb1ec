#!/usr/bin/env python3
"""mutclient.py BASE SEEDS [PROFILE] — a client that sends a collector the
requests of its API with their parameters damaged, for the collector's
tests against clients that misbehave in ways nobody wrote down.

For each seed (1..SEEDS) every template request below is sent once with one
to three of its parameters changed (deterministically per seed and template):
an odd value (empty, negative, zero, huge, fractional, beyond 64 bits, NaN,
a date that does not exist, a long string, control characters, invalid
percent-encoding, a selector or regex that does not parse), the parameter
given twice or left out, or an unknown one added. Each answer must be one a
server gives a bad request — 200, 204, 400, 404, 405, 413, 414, 416, 422,
429 or 503 — never a 500 or no answer, with a JSON error body on a 4xx of
API v0 and v1 where JSON was asked for. Every 50 requests, and at the end,
/healthz must still answer 200 at once. With PROFILE (a gzip'd pprof file),
uploads of it (POST /api/0/profiles) are among the templates. Prints one line per failure,
"FAIL seed S: METHOD URL -> why", then "N requests, N failures";
exit 1 on any failure.
"""
import http.client
import json
import random
import sys
import time
import urllib.parse

Q = 'cpu{service="goapp"}'
TEMPLATES = [
    ("GET", "/api/0/profiles", {"service": "goapp", "type": "cpu", "from": "now-1h", "to": "now", "labels": "version=1.0", "limit": "5"}),
    ("GET", "/api/0/profiles/merge", {"service": "goapp", "type": "cpu", "from": "now-1h", "to": "now"}),
    ("GET", "/api/0/services", {}),
    ("GET", "/api/0/version", {}),
    ("GET", "/api/1/profiles", {"query": Q, "from": "now-1h", "to": "now", "n": "5"}),
    ("GET", "/api/1/merge", {"query": Q, "from": "now-1h", "to": "now", "format": "top", "n": "5", "value": "flat"}),
    ("GET", "/api/1/merge", {"query": Q, "from": "now-1h", "format": "flame", "max_nodes": "100"}),
    ("GET", "/api/1/merge", {"query": Q, "from": "now-1h", "format": "folded", "normalize": "false"}),
    ("GET", "/api/1/top", {"query": "cpu{}", "from": "now-1h", "to": "now", "n": "10", "by": "function", "value": "cum"}),
    ("GET", "/api/1/labels", {"query": "cpu", "from": "now-1h"}),
    ("GET", "/api/1/labels/version/values", {"query": "cpu", "from": "now-1h"}),
    ("GET", "/api/1/types", {"from": "now-1h"}),
    ("GET", "/api/1/series", {"query": Q, "from": "now-1h", "to": "now", "step": "5m", "function": "main\\..*", "by": "service", "format": "json"}),
    ("GET", "/api/1/series", {"query": Q, "from": "now-1h", "step": "1m", "format": "prometheus", "value": "flat", "unit": "cores"}),
    ("GET", "/api/1/diff", {"base": 'cpu{version="1.0"}', "target": 'cpu{version="1.1"}', "from": "now-1h", "format": "top", "n": "10"}),
    ("GET", "/api/1/diff", {"base": 'cpu{version="1.0"}', "target": 'cpu{version="1.1"}', "base_from": "now-2h", "base_to": "now", "from": "now-1h", "format": "pprof"}),
    ("GET", "/api/1/rollouts", {"query": "cpu{}", "from": "now-2h", "label": "version"}),
    ("GET", "/api/1/regressions", {"query": "cpu{}", "from": "now-2h", "min_change": "5%", "format": "json", "n": "10"}),
    ("GET", "/api/1/regressions", {"base": 'cpu{version="1.0"}', "target": 'cpu{version="1.1"}', "from": "now-2h", "format": "table"}),
    ("GET", "/metrics/profiles", {}),
    ("DELETE", "/api/0/profiles/00000000000000000000", {}),
]
UPLOAD = ("POST", "/api/0/profiles", {"service": "mut", "type": "cpu", "labels": "version=1.0,pod=a",
                                      "created_at": "now-5m", "instance_id": "i-1"})
ODD = [
    "", "-1", "0", "1", "99999999999999999999999", "-9223372036854775809", "1.5", "1e309", "NaN", "inf",
    "2026-13-45T99:99:99Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "now-100000000h", "now+1y", "-1s",
    "x" * 5000, "\x1b[2J\n", "%zz", "%00", "\u00e9\u2028", "cpu{", "cpu{a=~\"(\"}", "cpu{a=~\".*.*.*.*.*.*.*.*x\"}",
    "{}", "heap", "threadcreate", ",,,", "=", "k=v,k=v", "table", "pprof", "flame", "json", "influx", "true",
    "1ns", "1h", "100000h", "0s",
]
EXTRA = ["format", "n", "from", "to", "query", "by", "value", "step", "si", "nope", "type", "service"]
OK = {200, 204, 400, 404, 405, 413, 414, 416, 422, 429, 503}


def request(host, port, method, url, timeout=120, body=None):
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request(method, url, body=body)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type") or "", r.read()
    finally:
        c.close()


def damaged(rng, params):
    items = list(params.items())
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        if op < 0.6 and items:
            i = rng.randrange(len(items))
            items[i] = (items[i][0], rng.choice(ODD))
        elif op < 0.7 and items:
            items.pop(rng.randrange(len(items)))
        elif op < 0.85 and items:
            k = rng.choice(items)[0]
            items.append((k, rng.choice(ODD)))
        else:
            items.append((rng.choice(EXTRA), rng.choice(ODD)))
    q = []
    for k, v in items:
        if v.startswith("%") and len(v) == 3:  # a broken escape, sent as it is
            q.append(urllib.parse.quote(k) + "=" + v)
        else:
            q.append(urllib.parse.quote(k) + "=" + urllib.parse.quote(v, safe=""))
    return "&".join(q)


def main():
    base, seeds = sys.argv[1], int(sys.argv[2])
    profile = None
    templates = TEMPLATES
    if len(sys.argv) > 3:
        with open(sys.argv[3], "rb") as f:
            profile = f.read()
        templates = TEMPLATES + [UPLOAD]
    u = urllib.parse.urlsplit(base)
    host, port = u.hostname, u.port
    n = fails = 0

    def fail(seed, method, url, why):
        nonlocal fails
        fails += 1
        print("FAIL seed %d: %s %s -> %s" % (seed, method, url[:300], why), flush=True)

    for seed in range(1, seeds + 1):
        for ti, (method, path, params) in enumerate(templates):
            rng = random.Random(seed * 7919 + ti)
            url = path + "?" + damaged(rng, params)
            n += 1
            try:
                status, ctype, body = request(host, port, method, url, body=profile if method == "POST" else None)
            except Exception as e:  # noqa: BLE001 (any failure to answer is the finding)
                fail(seed, method, url, "no answer: %r" % e)
                continue
            if status not in OK:
                fail(seed, method, url, "HTTP %d: %r" % (status, body[:300]))
            elif 400 <= status < 500 and path.startswith("/api/") and ctype.startswith("application/json"):
                try:
                    j = json.loads(body)
                    if not (isinstance(j, dict) and isinstance(j.get("error"), str) and j["error"]):
                        fail(seed, method, url, "a %d without an error text: %r" % (status, body[:300]))
                except ValueError:
                    fail(seed, method, url, "a %d whose JSON does not parse: %r" % (status, body[:300]))
            if n % 50 == 0:
                t0 = time.time()
                try:
                    st, _, _ = request(host, port, "GET", "/healthz", timeout=5)
                    if st != 200 or time.time() - t0 > 2:
                        fail(seed, "GET", "/healthz", "HTTP %d after %.1f s" % (st, time.time() - t0))
                except Exception as e:  # noqa: BLE001
                    fail(seed, "GET", "/healthz", "no answer: %r" % e)
    try:
        st, _, _ = request(host, port, "GET", "/healthz", timeout=5)
        if st != 200:
            fail(0, "GET", "/healthz", "HTTP %d at the end" % st)
    except Exception as e:  # noqa: BLE001
        fail(0, "GET", "/healthz", "no answer at the end: %r" % e)
    print("%d requests, %d failures" % (n, fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
