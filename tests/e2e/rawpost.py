#!/usr/bin/env python3
"""rawpost.py PORT QUERY BYTES [NEXT_PATH] [HEADER...]: on one connection to
127.0.0.1:PORT, POST BYTES zero bytes to /api/0/profiles?QUERY as a client
that does not wait for 100 Continue (Go's, the profefe agent's), then GET
NEXT_PATH (default /api/0/version); print "send failed"/"recv failed" on a
socket error, then what came back. A server that answers the POST before
reading its body resets the connection under the answer: the send fails and
no second answer comes."""
import socket
import sys

port, query, nbytes = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
nxt = sys.argv[4] if len(sys.argv) > 4 else "/api/0/version"
extra = "".join(h + "\r\n" for h in sys.argv[5:])
s = socket.create_connection(("127.0.0.1", port), timeout=20)
body = b"\0" * nbytes
try:
    s.sendall(("POST /api/0/profiles?%s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n"
               % (query, extra, len(body))).encode() + body)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (nxt, extra)).encode())
except OSError as e:
    print("send failed:", e)


def complete(data):
    """two answers, the second with all of its Content-Length"""
    second = data.find(b"HTTP/1.1 ", data.find(b"HTTP/1.1 ") + 1)
    if second < 0:
        return False
    head_end = data.find(b"\r\n\r\n", second)
    if head_end < 0:
        return False
    length = 0
    for line in data[second:head_end].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return len(data) >= head_end + 4 + length


data = b""
try:
    while not complete(data):
        b = s.recv(65536)
        if not b:
            break
        data += b
except OSError as e:
    print("recv failed:", e)
print(data.decode("latin-1"))
