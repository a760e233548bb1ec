#!/usr/bin/env python3
"""tls_front.py UPSTREAM CERT KEY: an https:// front (python3 ssl) to the
http:// server at UPSTREAM (host:port), on a free loopback port; prints
"listening on PORT". Every GET is passed on; the upstream's status,
Content-Type and body come back as they are. For the scraper's TLS tests."""
import http.server, ssl, sys, urllib.error, urllib.request

up, cert, key = sys.argv[1:4]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        try:
            with urllib.request.urlopen("http://" + up + self.path, timeout=30) as r:
                code, ct, body = r.status, r.headers.get("Content-Type", ""), r.read()
        except urllib.error.HTTPError as e:
            code, ct, body = e.code, e.headers.get("Content-Type", ""), e.read()
        self.send_response(code)
        self.send_header("Content-Type", ct)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print("listening on %d" % s.server_address[1], flush=True)
s.serve_forever()
