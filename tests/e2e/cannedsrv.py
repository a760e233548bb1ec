#!/usr/bin/env python3
"""cannedsrv.py PORTFILE RULE... — an HTTP server that answers from rules, for
the clients' tests against a collector that misbehaves.

Each RULE is three arguments: "METHOD PATH-PREFIX" STATUS BODY. A request gets
the first rule whose method and path prefix match (404 otherwise), its body
read and dropped; BODY is written as given, after Python's backslash escapes
(\\x1b, \\n, \\xc2\\x9b: raw bytes), as application/json. The chosen port is
written to PORTFILE once listening; the server runs until killed.
"""
import codecs
import sys

import testhttp


def main():
    portfile, args = sys.argv[1], sys.argv[2:]
    if len(args) % 3:
        sys.exit("cannedsrv.py: rules come in threes: 'METHOD PATH-PREFIX' STATUS BODY")
    rules = []
    for i in range(0, len(args), 3):
        method, prefix = args[i].split(" ", 1)
        rules.append((method, prefix, int(args[i + 1]), codecs.escape_decode(args[i + 2].encode())[0]))

    def answer(req):
        n = int(req.headers.get("Content-Length") or 0)
        if n:
            req.rfile.read(n)
        status, body = 404, b'{"code":404,"error":"no rule"}'
        for method, prefix, st, b in rules:
            if method == req.command and req.path.startswith(prefix):
                status, body = st, b
                break
        return status, [("Content-Type", "application/json")], body

    testhttp.serve(portfile, answer)


main()
