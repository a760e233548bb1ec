#!/usr/bin/env python3
"""chfault.py — a ClickHouse HTTP interface that fails on demand, for
tests/e2e/test_clickhouse.sh: a proxy to a real ClickHouse whose behaviour
is the first word of MODE_FILE, read at every request:

  pass      forwards the request and the answer as they are
  page503   503 with a 12 KB HTML page (a load balancer's error page)
  code241   500 "Code: 241 ... Memory limit (total) exceeded" (a ClickHouse
            out of memory: its state, not the query's fault)
  code243   500 "Code: 243 ... not enough space" (its disk is full)
  cut       forwards, then sends half of the answer (Content-Length of the
            whole) and closes the connection
  hang      reads the request and answers nothing for 120 s (a ClickHouse
            that stopped answering)

  chfault.py TARGET_PORT MODE_FILE    prints "chfault: listening on PORT"

Standard library only.
"""
import http.client
import http.server
import socketserver
import sys
import time

TARGET = int(sys.argv[1])
MODE_FILE = sys.argv[2]


def mode():
    try:
        with open(MODE_FILE) as f:
            return (f.read().split() or ["pass"])[0]
    except OSError:
        return "pass"


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, body, ctype="text/plain; charset=UTF-8"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        m = mode()
        if m == "hang":
            time.sleep(120)
            self.close_connection = True
            return
        if m == "page503":
            page = b"<!DOCTYPE html>\n<html><head><title>503 Service Unavailable</title></head><body>\n"
            page += b"<p>" + b"upstream is down " * 700 + b"</p></body></html>\n"
            return self.reply(503, page, "text/html")
        if m == "code241":
            return self.reply(500, b"Code: 241, e.displayText() = DB::Exception: Memory limit (total) exceeded: "
                              b"would use 9.31 GiB (attempt to allocate chunk of 4194304 bytes), maximum: 9.31 GiB, "
                              b"e.what() = DB::Exception\n")
        if m == "code243":
            return self.reply(500, b"Code: 243, e.displayText() = DB::Exception: Cannot reserve 1.00 MiB, not enough "
                              b"space, e.what() = DB::Exception\n")
        c = http.client.HTTPConnection("127.0.0.1", TARGET, timeout=60)
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "accept-encoding")}
        c.request(self.command, self.path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        c.close()
        if m == "cut" and len(data) > 1:
            self.send_response(r.status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.reply(r.status, data, r.getheader("Content-Type") or "text/plain")

    do_GET = do_POST = handle_any


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = S(("127.0.0.1", 0), H)
print("chfault: listening on %d" % srv.server_address[1], flush=True)
srv.serve_forever()
