#!/usr/bin/env python3
"""craft_prof.py — small gzip'd profile.proto files with exactly the fields a
test needs, for comparisons with go tool pprof on inputs Go never writes
(test_pprof.sh).

  craft_prof.py cpu OUT UNIT PERIOD V1 V2 [DURATION_NS [N1 N2]]
      a CPU-shaped profile: sample types samples/count and cpu/UNIT, period
      type cpu/UNIT with PERIOD; stacks main.main -> main.a (value V1) and
      main.main -> main.b (value V2), one sample each whose count is N1 and
      N2 (default 1); one mapping; and duration_nanos if given (0: none)
"""
import gzip
import sys

from pbenc import field, packed


def cpu(out, unit, period, v1, v2, duration=0, n1=1, n2=1):
    strings, index = [b""], {b"": 0}

    def s(x):
        x = x.encode()
        if x not in index:
            index[x] = len(strings)
            strings.append(x)
        return index[x]

    body = bytearray()
    body += field(1, field(1, s("samples")) + field(2, s("count")))
    body += field(1, field(1, s("cpu")) + field(2, s(unit)))
    for locs, v, n in (([2, 1], v1, n1), ([3, 1], v2, n2)):
        body += field(2, field(1, packed(locs)) + field(2, packed([n, v])))
    body += field(3, field(1, 1) + field(2, 0x400000) + field(3, 0x500000) + field(5, s("/bin/app"))
                  + field(6, s("b1d")) + field(7, 1) + field(8, 1) + field(9, 1))
    for i in (1, 2, 3):  # location i: function i at line 10*i
        body += field(4, field(1, i) + field(2, 1) + field(3, 0x400000 + 0x1000 * i)
                      + field(4, field(1, i) + field(2, 10 * i)))
    for i, n in ((1, "main.main"), (2, "main.a"), (3, "main.b")):
        body += field(5, field(1, i) + field(2, s(n)) + field(4, s("main.go")))
    body += field(11, field(1, s("cpu")) + field(2, s(unit)))
    body += field(12, period)
    if duration:
        body += field(10, duration)
    for x in strings:
        body += field(6, x)
    with open(out, "wb") as f:
        f.write(gzip.compress(bytes(body)))


def main():
    a = sys.argv[1:]
    if len(a) in (6, 7, 9) and a[0] == "cpu":
        cpu(a[1], a[2], int(a[3]), int(a[4]), int(a[5]), *[int(x) for x in a[6:]])
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
