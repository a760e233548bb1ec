#!/usr/bin/env python3
"""tiny_samples.py OUT [N] — a gzip'd pprof profile of N (default 8 Mi) tiny
samples: one location and one value each, ~6 bytes a sample on the wire, so
8 M samples gzip to ~73 KB. The hostile upload of the memory-budget tests
and of bench/robust.sh (a small body that decodes into ~1 GB)."""
import gzip
import sys


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


n = int(sys.argv[2]) if len(sys.argv) > 2 else 8 << 20
body = field(1, b"\x08\x01\x10\x02")  # sample_type samples/count
body += field(2, b"\x08\x01\x10\x01") * n  # sample: location_id 1, value 1
body += field(4, b"\x08\x01\x22\x04\x08\x01\x10\x01")  # location 1: line {function 1, line 1}
body += field(5, b"\x08\x01\x10\x03\x28\x01")  # function 1: name "main.f", start_line 1
for s in [b"", b"samples", b"count", b"main.f", b"main.go"]:
    body += field(6, s)
with gzip.open(sys.argv[1], "wb", compresslevel=9) as f:
    f.write(body)
