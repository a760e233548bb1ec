#!/usr/bin/env python3
"""abuse.py — hold bad clients against a collector while probing it.

Usage: abuse.py PORT PROFILE MODE N SECONDS [PID]

MODE is one of
  idle      N connections that connect and send nothing,
  slowloris N connections that send a request header one byte a second,
  stalled   N clients that ask for a merge and never read the answer,
spread over client addresses 127.0.0.2... (MAX_PER_IP each, default 50),
held while a probe from 127.0.0.1 runs for SECONDS: GET /healthz and a POST
of PROFILE (the file's bytes, service=probe&type=cpu) in turn, one request
at a time on fresh connections. Every probe must answer 200. Prints one
line of figures:

  mode=idle held=1000 refused=0 probes=123 failed=0 p50_ms=1.2 p99_ms=4.5 max_ms=9.9 rss_mb=30.1

(held = bad connections still open at the end; refused = ones the server
closed at once, e.g. over --max-connections-per-ip; rss_mb = the server's
VmRSS at the end when PID is given). Exits 1 if a probe failed.
Loopback only: every address used is in 127.0.0.0/8.
"""
import os
import socket
import sys
import threading
import time

port, profile, mode, n, seconds = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
pid = sys.argv[6] if len(sys.argv) > 6 else None
per_ip = int(os.environ.get("MAX_PER_IP", "50"))
body = open(profile, "rb").read()
stop = threading.Event()
bad = []


def src(i):
    k = 2 + i // per_ip
    return "127.0.%d.%d" % (k // 250, 2 + k % 250)


def connect(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind((src(i), 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


for i in range(n):
    try:
        s = connect(i)
    except OSError:
        continue
    if mode == "stalled":
        s.sendall(b"GET /api/0/profiles/merge?service=big&type=cpu&from=0&to=now HTTP/1.1\r\nHost: x\r\n\r\n")
    bad.append(s)


def slowloris():
    req = b"GET /api/0/services HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100000
    k = 0
    while not stop.is_set():
        for s in list(bad):
            try:
                s.send(req[k:k + 1])
            except OSError:
                pass
        k += 1
        stop.wait(1.0)


if mode == "slowloris":
    threading.Thread(target=slowloris, daemon=True).start()
time.sleep(0.5)


def request(raw):
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(raw)
    data = b""
    while b"\r\n\r\n" not in data:
        b = s.recv(65536)
        if not b:
            break
        data += b
    head = data.split(b"\r\n\r\n", 1)[0]
    status = head.split(b" ")[1] if b" " in head else b"?"
    s.close()
    return status, (time.monotonic() - t0) * 1000


post = b"POST /api/0/profiles?service=probe&type=cpu HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
health = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
lat, failed, probes = [], 0, 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    for raw in (health, post):
        probes += 1
        try:
            status, ms = request(raw)
            lat.append(ms)
            if status != b"200":
                failed += 1
                print("# probe answered %s" % status.decode(), file=sys.stderr)
        except OSError as e:
            failed += 1
            print("# probe failed: %s" % e, file=sys.stderr)
    time.sleep(0.02)
stop.set()
held = 0
for s in bad:
    try:
        s.setblocking(False)
        if s.recv(1, socket.MSG_PEEK):
            held += 1  # an answer waiting to be read: still open
    except BlockingIOError:
        held += 1  # nothing to read, not closed
    except OSError:
        pass  # reset
rss = ""
if pid:
    for line in open("/proc/%s/status" % pid):
        if line.startswith("VmRSS:"):
            rss = " rss_mb=%.1f" % (int(line.split()[1]) / 1024)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")
print("mode=%s held=%d refused=%d probes=%d failed=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f%s" % (
    mode, held, n - held, probes, failed, q(0.5), q(0.99), lat[-1] if lat else float("nan"), rss))
for s in bad:
    s.close()
sys.exit(1 if failed else 0)
