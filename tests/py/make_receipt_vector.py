"""The test vector of a result receipt (handoffd(8), RELAY, "Receipts"):
host b's receipt to origin a that carol completed a handoff, signed by
OpenSSL (tests/py/hded25519.py) with b's TEST-ONLY host key.  Writes
tests/vectors/receipt/TEST-ONLY-b.pub and result.json; Ed25519 is
deterministic, so running it again gives the same bytes.

    python3 -B tests/py/make_receipt_vector.py [DIR]
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hded25519  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vectors", "receipt")
ID = "1796000000-bob-carol-0123456789abcdef"


def vector():
    """(public key line, signed receipt)"""
    key = hded25519.Key(hded25519.seed_from("receipt host b"))
    try:
        # the agent's own result document as b recorded it (its hmac is
        # b's to check, not the origin's: the host's signature covers it)
        result = {"agent": "carol", "handoff_id": ID, "recorded_at": "2026-12-02T01:00:01.000000Z",
                  "status": "completed",
                  "result": {"type": "handoff-result", "protocol_version": 1, "handoff_id": ID,
                             "from_agent": "carol", "status": "completed",
                             "completed_at": "2026-12-02T01:00:00.500000Z",
                             "text": "la traduction est faite",
                             "hmac": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}}
        receipt = {"type": "handoff-receipt", "version": 1, "handoff_id": ID,
                   "outcome": "completed", "reason": "", "detail": "", "host": "b",
                   "origin": "a", "at": "2026-12-02T01:00:01.000000Z", "result": result}
        return key.pub_line(), key.sign(receipt)
    finally:
        key.close()


def write(d):
    pub, receipt = vector()
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "TEST-ONLY-b.pub"), "w") as f:
        f.write(pub)
    with open(os.path.join(d, "result.json"), "w") as f:
        f.write(json.dumps(receipt, sort_keys=True, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else HERE)
