"""testhttp.py — the HTTP servers of the e2e tests' helper scripts
(cannedsrv.py, mutproxy.py): one on a free loopback port, its port written
to a file once it listens, serving until killed."""
import http.server
import os


def serve(portfile, answer, protocol="HTTP/1.0"):
    """answer(handler) -> (status, headers [(name, value)], body bytes) for
    every GET, POST and DELETE; the request body is the answer's to read."""

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = protocol

        def handle_one(self):
            status, headers, body = answer(self)
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = handle_one

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()
