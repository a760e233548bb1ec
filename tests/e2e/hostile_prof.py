#!/usr/bin/env python3
"""hostile_prof.py — gzip'd CPU profiles (profile.proto) of strings an
untrusted uploader chooses, for the web UI's tests (test_web.sh, test_ui.sh).

  hostile_prof.py names OUT NAME...   main -> NAME, one stack per NAME (value
                                      100, 200, ...); NAME is also the file
                                      name; a comment and a mapping name with
                                      markup
  hostile_prof.py wide OUT N          main -> fN for N functions whose
                                      locations have no address and the same
                                      line: they differ by function only

Names are UTF-8 with surrogateescape (invalid bytes can be passed through).
"""
import gzip
import sys

from pbenc import field, packed


def build(stacks):
    strings, index = [b""], {b"": 0}

    def s(x):
        x = x.encode("utf-8", "surrogateescape") if isinstance(x, str) else x
        if x not in index:
            index[x] = len(strings)
            strings.append(x)
        return index[x]

    body = bytearray(field(1, field(1, s("samples")) + field(2, s("count"))))
    fns = {}
    for names, _ in stacks:
        for n in names:
            fns.setdefault(n, len(fns) + 1)
    for names, v in stacks:
        body += field(2, field(1, packed(fns[n] for n in reversed(names))) + field(2, packed([v])))
    body += field(3, field(1, 1) + field(2, 0x1000) + field(3, 0x100000) + field(5, s("/bin/<img src=x onerror=alert(1)>")))
    for i in fns.values():  # location i: function i, line 1, no address
        body += field(4, field(1, i) + field(2, 1) + field(4, field(1, i) + field(2, 1)))
    for n, i in fns.items():
        body += field(5, field(1, i) + field(2, s(n)) + field(3, s(n)) + field(4, s(n + ".go")))
    body += field(11, field(1, s("cpu")) + field(2, s("nanoseconds")))
    body += field(12, 10000000)
    body += field(13, packed([s("</script><script>alert(1)</script>")]))
    for x in strings:
        body += field(6, x)
    return gzip.compress(bytes(body), mtime=0)


def main():
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "names":
        stacks = [(["main", n], 100 * (i + 1)) for i, n in enumerate(sys.argv[3:])]
    elif kind == "wide":
        stacks = [(["main", "f%d" % i], 1 + i % 7) for i in range(int(sys.argv[3]))]
    else:
        sys.exit("usage: hostile_prof.py names OUT NAME... | wide OUT N")
    with open(out, "wb") as f:
        f.write(build(stacks))


if __name__ == "__main__":
    main()
