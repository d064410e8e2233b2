#!/usr/bin/env python3
"""Doubles and Python's repr of each, stdlib only: the reference for the
canonical form of reals (tests/unit/test_canon.c, test_canon_repr_doubles).

One line per double on stdout, its 64 bits in hex and repr(x):

    3fb999999999999a 0.1

First every double of the classes where shortest printing goes wrong (in
this order, each with both signs, cut at --count):

- every power of two, normal and subnormal, and its neighbours 1 and 2
  units in the last place away (the round-trip interval of a power of two
  is lopsided);
- the double nearest to every power of ten 1e-323 .. 1e308 and its
  neighbours (the shortest digits are one digit, or 17);
- the first and last mantissa of every binary exponent (the exponent
  boundaries) and the smallest subnormals;
- the repr's switch points: around 1e16 and 1e-4 (fixed against
  exponent notation), 2**53, the largest and smallest doubles;

then random doubles from --seed, in equal parts: any finite bit pattern;
subnormals; decimals of 1 to 17 significant digits at any exponent;
doubles in [0, 1) as random.random() gives them; integers near 2**53;
values near the switch points.

    python3 -B repr_doubles.py --seed 1 --count 200000
"""

import argparse
import math
import random
import struct
import sys

MANT = (1 << 52) - 1
INF_BITS = 0x7FF << 52


def bits_of(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def of_bits(u):
    return struct.unpack("<d", struct.pack("<Q", u))[0]


def finite(u):
    return (u & INF_BITS) != INF_BITS


def around(u, k):
    """u and its neighbours up to k units away, positive and finite."""
    for d in range(-k, k + 1):
        v = u + d
        if 0 <= v < INF_BITS:
            yield v


def hard_bits():
    """The bit patterns of the hard classes (positive; sign added later)."""
    for e in range(-1074, 1024):
        yield from around(bits_of(math.ldexp(1.0, e)), 2)
    for k in range(-323, 309):
        yield from around(bits_of(float("1e%d" % k)), 1)
    for be in range(0, 2047):
        yield be << 52
        yield (be << 52) | MANT
    for m in range(1, 64):
        yield m
    for x in (1e16, 9999999999999998.0, 1e-4, 1e-5, 0.001, 9.999999999999999e-05,
              2.0 ** 53, 2.0 ** 53 + 2, 9007199254740993.0, 1.7976931348623157e308,
              2.2250738585072014e-308, 5e-324, 0.1, 1 / 3):
        yield from around(bits_of(x), 3)


def random_bits(rng):
    k = rng.randrange(6)
    if k == 0:
        while True:
            u = rng.getrandbits(63)
            if finite(u):
                return u
    if k == 1:
        return rng.randint(1, MANT)
    if k == 2:
        nd = rng.randint(1, 17)
        s = "%d.%0*de%d" % (rng.randint(1, 9), nd - 1, rng.randrange(10 ** (nd - 1)),
                            rng.randint(-324, 308))
        x = float(s)
        return bits_of(x) if math.isfinite(x) else bits_of(1.0)
    if k == 3:
        return bits_of(rng.random())
    if k == 4:
        return bits_of(float(rng.randint(2 ** 52, 2 ** 54)))
    base = rng.choice((1e16, 1e-4, 1e-5, 1e15, 1e17, 0.001))
    return bits_of(base) + rng.randint(-1000, 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=200000)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    out = sys.stdout
    buf = []
    n = 0

    def emit(u, signed=True):
        nonlocal n
        if signed and rng.random() < 0.5:
            u |= 1 << 63
        buf.append("%016x %r\n" % (u, of_bits(u)))
        n += 1
        if len(buf) >= 4096:
            out.write("".join(buf))
            buf.clear()

    emit(0, signed=False)
    emit(1 << 63, signed=False)
    for u in hard_bits():
        if n >= a.count:
            break
        emit(u)
    while n < a.count:
        emit(random_bits(rng))
    out.write("".join(buf))
    out.flush()


if __name__ == "__main__":
    main()
