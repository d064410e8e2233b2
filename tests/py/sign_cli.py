"""Test driver around hdproto (stdlib only), run by the Check suites.

    sign_cli.py sign KEYFILE OUT [--at ISO] [--ttl S] [--extra JSON]
                                 [--transcript JSON] [--id ID]
        write one document signed the way gptme-voice signs it
    sign_cli.py tamper IN OUTDIR
        for every field of IN (and a few nested spots), write a copy with
        that one value changed and NOT re-signed; print the names written

The C side must verify the first and reject every second as bad_mac.
"""

import argparse
import json
import os
import sys
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hdproto  # noqa: E402


def cmd_sign(a):
    key = hdproto.load_key(a.keyfile)
    at = datetime.fromisoformat(a.at) if a.at else None
    extra = json.loads(a.extra) if a.extra else None
    transcript = json.loads(a.transcript) if a.transcript else None
    doc = hdproto.build("alice", "bob", key, ttl=a.ttl, at=at, extra=extra,
                        transcript=transcript, handoff_id=a.id)
    with open(a.out, "wb") as f:
        f.write(hdproto.dumps(doc))


def changed(v):
    """A different value of the same JSON type, still plausible."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v + 1.0
    if isinstance(v, str):
        if not v:
            return "x"
        # Flip the case of a letter or bump a digit, so that ids, agents,
        # hex and times keep their shape and only the MAC can notice.
        for i in range(len(v) - 1, -1, -1):
            if v[i] in "012345678":
                return v[:i] + str(int(v[i]) + 1) + v[i + 1:]
        for i in range(len(v) - 1, -1, -1):
            c = v[i]
            if c.isascii() and c.islower():
                o = "b" if c == "a" else "a"
                return v[:i] + o + v[i + 1:]
        return v + "x"
    if isinstance(v, list):
        return v + [v[-1]] if v else [{"role": "user", "text": "x"}]
    if isinstance(v, dict):
        d = dict(v)
        d["x-tamper"] = 1
        return d
    if v is None:
        return 0
    raise TypeError(type(v))


def cmd_tamper(a):
    with open(a.infile, "rb") as f:
        doc = json.load(f)
    out = {}
    for k in sorted(doc):
        if k == "hmac":
            continue
        d = dict(doc)
        d[k] = changed(doc[k])
        out[f"tamper-{k}.json"] = d
    d = dict(doc)
    d["x_added"] = "extra"
    out["tamper-added-field.json"] = d
    for k in ("reason", "transcript", "caller_hash"):
        if k in doc:
            d = dict(doc)
            del d[k]
            out[f"tamper-removed-{k}.json"] = d
    if doc.get("transcript"):
        d = json.loads(json.dumps(doc))
        d["transcript"][0]["text"] = changed(d["transcript"][0]["text"])
        out["tamper-transcript0-text.json"] = d
        d = json.loads(json.dumps(doc))
        d["transcript"][0]["role"] = "system" if d["transcript"][0]["role"] != "system" else "user"
        out["tamper-transcript0-role.json"] = d
    os.makedirs(a.outdir, exist_ok=True)
    for name, d in out.items():
        with open(os.path.join(a.outdir, name), "wb") as f:
            f.write(hdproto.dumps(d))
        print(name)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sign")
    s.add_argument("keyfile")
    s.add_argument("out")
    s.add_argument("--at")
    s.add_argument("--ttl", type=int, default=60)
    s.add_argument("--extra")
    s.add_argument("--transcript")
    s.add_argument("--id")
    t = sub.add_parser("tamper")
    t.add_argument("infile")
    t.add_argument("outdir")
    a = ap.parse_args()
    {"sign": cmd_sign, "tamper": cmd_tamper}[a.cmd](a)


if __name__ == "__main__":
    main()
