"""pbenc.py — the protobuf wire format, as much as the tests' profile writers
(hostile_prof.py, craft_prof.py) need to write profile.proto by hand."""


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def field(num, payload):  # varint for ints, length-delimited for bytes
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def packed(vals):
    return b"".join(varint(v) for v in vals)
