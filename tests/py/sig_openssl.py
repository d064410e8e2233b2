"""Cross-check Ed25519 signatures with openssl, run by tests/unit/test_sig_vectors.c.

    sig_openssl.py verify PUBFILE DIR
        every DIR/*.json (signed by libhandoff) is read with Python's json,
        its canonical bytes without "sig" made by json.dumps, and its "sig"
        checked with `openssl pkeyutl -verify -rawin`; one in ten is also
        changed in one value and must then fail.  Prints
        "verified N tampered-rejected M"; exit 1 on any disagreement.
    sig_openssl.py sign SECRETFILE OUTDIR --count N [--seed S]
        N random documents (gen_docs.py) signed by openssl, written as
        OUTDIR/NNNN.json for libhandoff to verify.

SECRETFILE / PUBFILE are key files as handoffctl keygen --ed25519 writes.
"""

import argparse
import base64
import json
import os
import random
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_docs  # noqa: E402
import hded25519  # noqa: E402


def tamper(doc):
    d = json.loads(json.dumps(doc))
    for k in sorted(d):
        if k in ("sig", "kid"):
            continue
        v = d[k]
        d[k] = [v] if not isinstance(v, list) else v + [0]
        return d
    d["x_added"] = 1
    return d


def cmd_verify(a):
    pk, _ = hded25519.parse_pub_line(open(a.pubfile).readline())
    work = tempfile.mkdtemp(prefix="sigcheck.")
    pem = os.path.join(work, "pub.pem")
    with open(pem, "w") as f:
        f.write(hded25519.pem_public(pk))
    names = sorted(n for n in os.listdir(a.dir) if n.endswith(".json"))
    bad = []

    def one(i_name):
        i, name = i_name
        sub = os.path.join(work, str(i))
        os.mkdir(sub)
        with open(os.path.join(a.dir, name), "rb") as f:
            doc = json.load(f)
        sig = base64.b64decode(doc["sig"], validate=True)
        ok = hded25519.verify_bytes(pem, hded25519.canonical(doc), sig, sub)
        if not ok:
            bad.append(f"{name}: openssl rejects libhandoff's signature")
        tampered = 0
        if i % 10 == 0:
            t = tamper(doc)
            if hded25519.verify_bytes(pem, hded25519.canonical(t), sig, sub):
                bad.append(f"{name}: openssl accepts a tampered copy")
            tampered = 1
        for n in os.listdir(sub):
            os.unlink(os.path.join(sub, n))
        os.rmdir(sub)
        return tampered

    with ThreadPoolExecutor(max_workers=2) as ex:
        tampered = sum(ex.map(one, enumerate(names)))
    os.unlink(pem)
    os.rmdir(work)
    print(f"verified {len(names) - len(bad)} tampered-rejected {tampered}")
    for b in bad[:20]:
        print(b)
    return 1 if bad or not names else 0


def cmd_sign(a):
    line = open(a.secretfile).readline().strip().split(" ")
    if line[0] != "ed25519-secret":
        sys.exit("not an Ed25519 secret key file")
    key = hded25519.Key(base64.b64decode(line[1], validate=True), kid=line[2])
    rng = random.Random(a.seed)
    os.makedirs(a.outdir, exist_ok=True)
    try:
        for i in range(a.count):
            doc = gen_docs.rand_doc(rng)
            d = key.sign(doc)
            with open(os.path.join(a.outdir, f"{i:04d}.json"), "wb") as f:
                f.write(json.dumps(d, sort_keys=True, separators=(",", ":")).encode())
    finally:
        key.close()
    print(f"signed {a.count}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify")
    v.add_argument("pubfile")
    v.add_argument("dir")
    s = sub.add_parser("sign")
    s.add_argument("secretfile")
    s.add_argument("outdir")
    s.add_argument("--count", type=int, default=50)
    s.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    sys.exit({"verify": cmd_verify, "sign": cmd_sign}[a.cmd](a))


if __name__ == "__main__":
    main()
