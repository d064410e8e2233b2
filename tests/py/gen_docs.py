#!/usr/bin/env python3
"""Random JSON documents and their canonical bytes, stdlib only.

For each document writes two lines to stdout:

    the document as some JSON writer might send it (random key order,
    whitespace, raw UTF-8 or \\u escapes in either case, "\\/", float
    spellings that read back as the same double)

    json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)

The documents stay inside what the protocol (and jansson) accept: integers
in 64 bits, finite floats, no U+0000, no lone surrogates, nesting well
under the depth limit.  Used by tests/unit/test_canon.c.

    python3 -B gen_docs.py --seed 1 --count 10000

With --hard-floats, documents {"x": [...]} of 1000 doubles each that are
hard to print shortest: every power of two (normal and subnormal) and
its neighbours, the subnormal range, 17-digit values, random bit
patterns, the largest and smallest doubles.
"""

import argparse
import json
import math
import random
import struct
import sys

INT_MIN = -(2 ** 63)
INT_MAX = 2 ** 63 - 1

BMP_EDGES = [
    0x01, 0x08, 0x09, 0x0A, 0x0C, 0x0D, 0x1F, 0x20, 0x22, 0x2F, 0x5C, 0x7E,
    0x7F, 0x80, 0x9F, 0xA0, 0xFF, 0x100, 0x7FF, 0x800, 0xFFF, 0x1000,
    0xD7FF, 0xE000, 0xF8FF, 0xFDD0, 0xFEFF, 0xFFFC, 0xFFFD, 0xFFFE, 0xFFFF,
    0x2028, 0x2029, 0x200B, 0x0300, 0x05D0, 0x4E2D,
]
ASTRAL_EDGES = [0x10000, 0x1F600, 0x1F9FF, 0x20000, 0x2FFFF, 0xE0001,
                0xFFFFD, 0x100000, 0x10FFFD, 0x10FFFF]
# Keys that sort differently by UTF-16 unit than by code point, and keys
# that are prefixes of each other.
KEY_POOL = [
    "a", "ab", "a\u00e9", "A", "Z", "_", "-", "0", "10", "9", "hmac",
    "protocol_version", "\u00e9", "\ue000", "\uffff", "\U0001F600",
    "\U00010000", "\U0010FFFF", "\ufeffbom", "a b", "a\"b", "a\\b", "a/b",
    "\x7f", "\x01", "tab\there", "",
]

SPECIAL_FLOATS = [
    0.0, -0.0, 0.1, -0.1, 0.5, 1.0, -1.0, 100000.0, 1e16, 1e15, 1e17,
    9999999999999998.0, 1e+20, 1e22, 1e23, 1e-05, 1.5e-05, 0.0001, 0.001,
    1e-4 * 9.99, 123456789012345.6, 1234567890123456.7, 5e-324, 1e-323,
    2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308,
    1 / 3, 2 / 3, math.pi, math.e, 0.3, 2.0 ** 53, 2.0 ** 53 + 2, 2.0 ** -1074,
    4.35e-322, 9007199254740993.0, 1e300, 1e-300,
]


def rand_char(rng):
    k = rng.random()
    if k < 0.45:
        return chr(rng.randint(0x20, 0x7E))
    if k < 0.55:
        return chr(rng.randint(0x01, 0x1F))
    if k < 0.60:
        return "\x7f"
    if k < 0.70:
        return chr(rng.choice(BMP_EDGES))
    if k < 0.82:
        while True:
            c = rng.randint(0x80, 0xFFFF)
            if not 0xD800 <= c <= 0xDFFF:
                return chr(c)
    if k < 0.90:
        return chr(rng.choice(ASTRAL_EDGES))
    # every plane
    return chr(rng.randint(0x10000, 0x10FFFF))


def rand_string(rng, maxlen=24):
    return "".join(rand_char(rng) for _ in range(rng.randint(0, maxlen)))


def rand_key(rng):
    if rng.random() < 0.4:
        return rng.choice(KEY_POOL)
    if rng.random() < 0.3:
        return rng.choice(KEY_POOL) + rand_string(rng, 3)
    return rand_string(rng, 10)


def rand_float(rng):
    k = rng.random()
    if k < 0.2:
        return rng.choice(SPECIAL_FLOATS) * rng.choice([1, -1])
    if k < 0.45:
        # any finite bit pattern, subnormals and all
        while True:
            f = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
            if math.isfinite(f):
                return f
    if k < 0.55:
        # subnormals
        bits = rng.getrandbits(52) | (rng.getrandbits(1) << 63)
        return struct.unpack("<d", bits.to_bytes(8, "little"))[0]
    if k < 0.65:
        # powers of two, where the round-trip interval is lopsided
        return math.ldexp(1.0, rng.randint(-1074, 1023)) * rng.choice([1, -1])
    if k < 0.80:
        # short decimals of every magnitude
        return float("%de%d" % (rng.randint(1, 99999), rng.randint(-330, 300)))
    if k < 0.90:
        return rng.uniform(-1e6, 1e6)
    return float(rng.randint(-(10 ** 17), 10 ** 17))


def rand_int(rng):
    k = rng.random()
    if k < 0.2:
        return rng.choice([0, -1, 1, INT_MIN, INT_MAX, INT_MIN + 1, INT_MAX - 1,
                           2 ** 53, 2 ** 53 + 1, -(2 ** 53) - 1, 2 ** 32, -(2 ** 31)])
    if k < 0.6:
        return rng.randint(INT_MIN, INT_MAX)
    return rng.randint(-1000, 1000)


def rand_value(rng, depth):
    k = rng.random()
    if depth < 6 and k < 0.12:
        return {rand_key(rng): rand_value(rng, depth + 1)
                for _ in range(rng.randint(0, 6))}
    if depth < 6 and k < 0.22:
        return [rand_value(rng, depth + 1) for _ in range(rng.randint(0, 6))]
    k = rng.random()
    if k < 0.35:
        return rand_string(rng)
    if k < 0.6:
        return rand_float(rng)
    if k < 0.85:
        return rand_int(rng)
    return rng.choice([True, False, None])


def rand_doc(rng):
    doc = {}
    for _ in range(rng.randint(0, 12)):
        doc[rand_key(rng)] = rand_value(rng, 1)
    if rng.random() < 0.05:
        # a deep chain, still under the default depth limit of 64
        v = rand_value(rng, 6)
        for _ in range(rng.randint(10, 60)):
            v = [v] if rng.random() < 0.5 else {rand_key(rng): v}
        doc["deep"] = v
    return doc


# ---- a deliberately different writer for the input side -----------------

SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
         "\b": "\\b", "\f": "\\f"}


def ws(rng):
    return rng.choice(["", "", "", " ", "\n", "\t", " \r\n  "]) if rng.random() < 0.3 else ""


def enc_u(rng, u):
    s = "\\u%04x" % u
    return s.upper().replace("\\U", "\\u") if rng.random() < 0.5 else s


def enc_string(rng, s):
    out = ['"']
    for ch in s:
        c = ord(ch)
        r = rng.random()
        if ch in SHORT and r < 0.7:
            out.append(SHORT[ch])
        elif ch == "/" and r < 0.5:
            out.append("\\/")
        elif c < 0x20 or ch in SHORT:
            out.append(enc_u(rng, c))
        elif r < 0.25:
            if c >= 0x10000:
                c -= 0x10000
                out.append(enc_u(rng, 0xD800 | (c >> 10)))
                out.append(enc_u(rng, 0xDC00 | (c & 0x3FF)))
            else:
                out.append(enc_u(rng, c))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def enc_float(rng, f):
    k = rng.random()
    if k < 0.5:
        s = repr(f)
    elif k < 0.75:
        s = "%.17e" % f
    else:
        s = "%.20E" % f
    # JSON needs a digit before any exponent and a fraction or exponent to
    # stay a real: repr always has one of them.
    assert float(s) == f or (f != f)
    return s


def enc(rng, v):
    if isinstance(v, dict):
        items = list(v.items())
        rng.shuffle(items)
        parts = [ws(rng) + enc_string(rng, k) + ws(rng) + ":" + ws(rng) + enc(rng, x) + ws(rng)
                 for k, x in items]
        return "{" + ",".join(parts) + ws(rng) + "}"
    if isinstance(v, list):
        return "[" + ",".join(ws(rng) + enc(rng, x) + ws(rng) for x in v) + ws(rng) + "]"
    if isinstance(v, str):
        return enc_string(rng, v)
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int):
        return str(v)
    return enc_float(rng, v)


def canonical(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def bits_float(u):
    return struct.unpack("<d", struct.pack("<Q", u))[0]


def float_bits(f):
    return struct.unpack("<Q", struct.pack("<d", f))[0]


def hard_floats(rng, count):
    """count doubles (finite, positive and negative) hard to print."""
    vals = []
    for e in range(-1074, 1024):
        p = math.ldexp(1.0, e)
        u = float_bits(p)
        vals += [p, bits_float(u + 1)]
        if u > 1:
            vals.append(bits_float(u - 1))
    vals += [5e-324, 2.2250738585072014e-308, 2.225073858507201e-308,
             1.7976931348623157e308, 9007199254740993.0, 0.1, 1 / 3,
             1e16, 1e15 + 0.5, 123456789012345678.0, 1e23, 8.41e21, 5e-310]
    while len(vals) < count:
        k = rng.random()
        if k < 0.3:   # 17 significant digits
            f = float("%d.%016de%d" % (rng.randint(1, 9), rng.randint(0, 10 ** 16 - 1),
                                       rng.randint(-320, 300)))
        elif k < 0.5:   # subnormal
            f = bits_float(rng.randint(1, (1 << 52) - 1))
        elif k < 0.7:   # 15 and 16 digits
            f = float("%d.%0*de%d" % (rng.randint(1, 9), rng.choice((14, 15)),
                                      rng.randint(0, 10 ** 14 - 1), rng.randint(-300, 300)))
        else:   # any bit pattern that is finite
            f = bits_float(rng.getrandbits(64))
            if math.isinf(f) or math.isnan(f):
                continue
        vals.append(f)
    vals = [v if rng.random() < 0.5 else -v for v in vals[:count]]
    rng.shuffle(vals)
    return vals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--hard-floats", action="store_true")
    a = ap.parse_args()

    rng = random.Random(a.seed)
    out = []
    if a.hard_floats:
        vals = hard_floats(rng, a.count)
        for i in range(0, len(vals), 1000):
            doc = {"x": vals[i:i + 1000]}
            text = "{\"x\":[" + ",".join(enc_float(rng, f) for f in doc["x"]) + "]}"
            out.append(text)
            out.append(canonical(doc))
        sys.stdout.buffer.write(("\n".join(out) + "\n").encode("utf-8"))
        return
    for _ in range(a.count):
        doc = rand_doc(rng)
        text = ws(rng) + enc(rng, doc) + ws(rng)
        text = text.replace("\n", " ").replace("\r", " ")
        want = canonical(doc)
        # The input must mean the same document to Python's own reader.
        if canonical(json.loads(text)) != want:
            sys.exit("gen_docs: input does not round-trip:\n%s\n%s" % (text, want))
        out.append(text)
        out.append(want)
    sys.stdout.buffer.write(("\n".join(out) + "\n").encode("utf-8"))


if __name__ == "__main__":
    main()
