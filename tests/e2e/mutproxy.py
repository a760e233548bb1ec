#!/usr/bin/env python3
"""mutproxy.py PORTFILE UPSTREAM — an HTTP proxy in front of a real collector
that damages its answers, for the clients' tests against a collector that
misbehaves in ways nobody wrote down.

Every request is forwarded to UPSTREAM (http://HOST:PORT, or https:// with
its certificate not checked) as it came. The
answer is then damaged as the request's header `X-Mutate: SEED` says (no
header, or SEED -1: passed on unchanged), deterministically per seed:

  - a JSON answer: one to three of its values replaced by a value of another
    kind (null, a boolean, 0, -1, huge and fractional numbers, integers
    beyond 64 bits, "", a long string, control characters and invalid
    escapes' results, an empty or a deeply nested array or object), a key
    removed, an array's items repeated many times, or the text truncated;
  - any answer: the body cut short, emptied, replaced by HTML, or its
    status changed (200 <-> 4xx/5xx) with the body kept;
  - or (a quarter of the routes of each seed) nothing, so that a command
    meets damaged and sound answers together.

Which was done is written to stderr, one line per request, so a failing case
can be replayed with the same seed. The chosen port is written to PORTFILE
once listening; the proxy runs until killed.
"""
import json
import random
import ssl
import sys
import urllib.error
import urllib.request
import zlib

import testhttp

ODD_VALUES = [
    None, True, False, 0, -1, 1.5, -0.0, 1e308, -1e308, 2**63, 2**64 + 7, -(2**63) - 1,
    "", "x" * 70000, "\x1b[2J\n\u009bforged\x00nul", "\ud7ff\ue000", "-1", "1e999",
    "2026-13-45T99:99:99Z", [], {}, json.loads("[" * 40 + "]" * 40),
    {"a": {"b": {"c": {"d": {}}}}}, [None, 1, "x", {}], {"code": 200, "body": None},
]


def nodes(v):
    """Every (container, key) under v, depth first."""
    out = []
    if isinstance(v, dict):
        for k in list(v):
            out.append((v, k))
            out.extend(nodes(v[k]))
    elif isinstance(v, list):
        for i in range(len(v)):
            out.append((v, i))
            out.extend(nodes(v[i]))
    return out


def mutate_json(rng, doc, log):
    for _ in range(rng.randint(1, 3)):
        ns = nodes(doc)
        if not ns:
            log.append("root replaced")
            return json.loads(json.dumps(rng.choice(ODD_VALUES)))
        c, k = rng.choice(ns)
        op = rng.random()
        if op < 0.6:
            c[k] = json.loads(json.dumps(rng.choice(ODD_VALUES)))
            log.append("%r := %.40r" % (k, c[k]))
        elif op < 0.75 and isinstance(c, dict):
            del c[k]
            log.append("del %r" % (k,))
        elif op < 0.9 and isinstance(c[k], list) and c[k]:
            c[k] = c[k] * rng.choice([2, 50, 3000])
            log.append("%r repeated to %d items" % (k, len(c[k])))
        else:
            # a sibling's value of another kind: e.g. a string where a number was
            ns2 = nodes(doc)
            c2, k2 = rng.choice(ns2)
            try:
                c[k] = json.loads(json.dumps(c2[k2]))
            except (KeyError, IndexError, TypeError):
                pass
            log.append("%r := a copy of %r" % (k, k2))
    return doc


def damage(seed, status, ctype, body):
    rng = random.Random(seed)
    log = []
    if rng.random() < 0.25:  # a quarter of the routes answer as they are: mixed outcomes
        return status, ctype, body, ["unchanged"]
    r = rng.random()
    if r < 0.7 and ctype.startswith("application/json"):
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if doc is not None:
            doc = mutate_json(rng, doc, log)
            body = json.dumps(doc).encode()
            if rng.random() < 0.1:
                body = body[: rng.randrange(len(body) + 1)]
                log.append("then truncated to %d bytes" % len(body))
            return status, ctype, body, log
    if r < 0.8:
        body = body[: rng.randrange(len(body) + 1)]
        log.append("body truncated to %d bytes" % len(body))
    elif r < 0.85:
        body = b""
        log.append("body emptied")
    elif r < 0.9:
        body, ctype = b"<html><body>502 Bad Gateway</body></html>", "text/html"
        log.append("an HTML page")
    else:
        status = rng.choice([200, 400, 404, 500, 503]) if status != 200 else rng.choice([400, 404, 500, 503])
        log.append("status := %d" % status)
    return status, ctype, body, log


def main():
    portfile, upstream = sys.argv[1], sys.argv[2].rstrip("/")
    # an https upstream (tests/kubeapi) is a test server with its own CA:
    # not verified (the client's own TLS is what its tests check)
    tls = ssl._create_unverified_context() if upstream.startswith("https:") else None

    def answer(req):
        n = int(req.headers.get("Content-Length") or 0)
        data = req.rfile.read(n) if n else None
        hdrs = {k: v for k, v in req.headers.items()
                if k.lower() not in ("host", "content-length", "connection")}
        seed, path = -1, req.path
        parts = path.split("/", 3)
        if len(parts) == 4 and parts[1] == "m" and parts[2].isdigit():
            seed, path = int(parts[2]), "/" + parts[3]
        r = urllib.request.Request(upstream + path, data=data, method=req.command, headers=hdrs)
        try:
            with urllib.request.urlopen(r, timeout=60, context=tls) as u:
                status, rh, body = u.status, u.headers, u.read()
        except urllib.error.HTTPError as e:
            status, rh, body = e.code, e.headers, e.read()
        ctype, cenc = rh.get("Content-Type", ""), rh.get("Content-Encoding")
        if seed >= 0:
            route = path.split("?")[0].encode()
            status, ctype, body, log = damage(seed * 1000003 + zlib.crc32(route), status, ctype, body)
            sys.stderr.write("%s %s seed %d: %s\n" % (req.command, path[:120], seed, "; ".join(log)))
            sys.stderr.flush()
        return status, [("Content-Type", ctype)] + ([("Content-Encoding", cenc)] if cenc else []), body

    testhttp.serve(portfile, answer, "HTTP/1.1")

if __name__ == "__main__":
    main()
