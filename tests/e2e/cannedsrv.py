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
import http.server
import os
import sys


def main():
    portfile, args = sys.argv[1], sys.argv[2:]
    if len(args) % 3:
        sys.exit("cannedsrv.py: rules come in threes: 'METHOD PATH-PREFIX' STATUS BODY")
    rules = []
    for i in range(0, len(args), 3):
        method, prefix = args[i].split(" ", 1)
        rules.append((method, prefix, int(args[i + 1]), codecs.escape_decode(args[i + 2].encode())[0]))

    class H(http.server.BaseHTTPRequestHandler):
        def answer(self):
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            status, body = 404, b'{"code":404,"error":"no rule"}'
            for method, prefix, st, b in rules:
                if method == self.command and self.path.startswith(prefix):
                    status, body = st, b
                    break
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = answer

        def log_message(self, *a):
            pass

    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(s.server_address[1]))
    os.rename(portfile + ".tmp", portfile)
    s.serve_forever()


main()
