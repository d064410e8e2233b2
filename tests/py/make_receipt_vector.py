"""The test vectors of receipts (handoffd(8), RELAY, "Receipts"):
host b's receipts to origin a that carol completed a handoff
(result.json) and that she asked a question of its sender
(input_required.json), and a batch of three receipts under one signature
(batch.json: delivered and consumed of one handoff, rejected of another),
signed by OpenSSL (tests/py/hded25519.py) with
b's TEST-ONLY host key.  Writes them and TEST-ONLY-b.pub into
tests/vectors/receipt/; Ed25519 is deterministic, so running it again
gives the same bytes.

    python3 -B tests/py/make_receipt_vector.py [DIR]
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hded25519  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vectors", "receipt")
ID = "1796000000-bob-carol-0123456789abcdef"


def receipt(key, status, text):
    """b's receipt to a of carol's result status, its text."""
    # the agent's own result document as b recorded it (its hmac is
    # b's to check, not the origin's: the host's signature covers it)
    result = {"agent": "carol", "handoff_id": ID, "recorded_at": "2026-12-02T01:00:01.000000Z",
              "status": status,
              "result": {"type": "handoff-result", "protocol_version": 1, "handoff_id": ID,
                         "from_agent": "carol", "status": status,
                         "completed_at": "2026-12-02T01:00:00.500000Z",
                         "text": text,
                         "hmac": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}}
    return key.sign({"type": "handoff-receipt", "version": 1, "handoff_id": ID,
                     "outcome": status, "reason": "", "detail": "", "host": "b",
                     "origin": "a", "at": "2026-12-02T01:00:01.000000Z", "result": result})


def batch(key):
    """b's batch to a: one signature over the batch's canonical bytes,
    its receipts unsigned inside."""
    def one(hid, outcome, at, **extra):
        return dict({"type": "handoff-receipt", "version": 1, "handoff_id": hid,
                     "outcome": outcome, "reason": "", "detail": "", "host": "b",
                     "origin": "a", "at": at}, **extra)
    other = "1796000000-bob-alice-fedcba9876543210"
    return key.sign({"type": "handoff-receipts", "version": 1, "host": "b", "origin": "a",
                     "receipts": [
                         one(ID, "delivered", "2026-12-02T01:00:00.000000Z"),
                         one(ID, "consumed", "2026-12-02T01:00:00.250000Z", completes=True),
                         one(other, "rejected", "2026-12-02T01:00:00.250000Z",
                             reason="bad_mac", detail="came through the relay from host a"),
                     ]})


def vectors():
    """(public key line, {file name: signed receipt})"""
    key = hded25519.Key(hded25519.seed_from("receipt host b"))
    try:
        return key.pub_line(), {
            "result.json": receipt(key, "completed", "la traduction est faite"),
            # a question: the task's next turn is a handoff of its own
            "input_required.json": receipt(key, "input_required", "into which language?"),
            "batch.json": batch(key),
        }
    finally:
        key.close()


def write(d):
    pub, receipts = vectors()
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "TEST-ONLY-b.pub"), "w") as f:
        f.write(pub)
    for name, r in receipts.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n")


def checked(name, check):
    """tests/vectors/receipt/TEST-ONLY-b.pub and name, each check()ed to
    be what write() makes now, then read: (the public key line, the
    signed document)."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="hd-receipt-vector.")
    try:
        write(d)
        for n in ("TEST-ONLY-b.pub", name):
            with open(os.path.join(d, n), "rb") as f, open(os.path.join(HERE, n), "rb") as g:
                check(f.read() == g.read(), f"tests/vectors/receipt/{n} is what its generator makes")
    finally:
        shutil.rmtree(d)
    with open(os.path.join(HERE, "TEST-ONLY-b.pub")) as f:
        pub = f.read()
    with open(os.path.join(HERE, name)) as f:
        return pub, json.load(f)


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else HERE)
