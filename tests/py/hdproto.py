"""Independent reference for the handoff wire format, stdlib only.

Signs documents the way the real producer (gptme-voice) does, so the C code
is checked against something it did not write:

    hmac = base64(HMAC-SHA256(key, json.dumps(doc_without_hmac,
                  sort_keys=True, separators=(",", ":"))))

and writes files the way its HandoffWriter does (sorted keys, compact).
"""

import base64
import hashlib
import hmac as _hmac
import json
import os
import secrets
from datetime import datetime, timedelta, timezone


def canonical(doc):
    stripped = {k: v for k, v in doc.items() if k != "hmac"}
    return json.dumps(stripped, sort_keys=True, separators=(",", ":")).encode("utf-8")


def compute_hmac(doc, key):
    mac = _hmac.new(key, canonical(doc), hashlib.sha256).digest()
    return base64.b64encode(mac).decode("ascii")


def sign(doc, key):
    doc = dict(doc)
    doc["hmac"] = compute_hmac(doc, key)
    return doc


def iso(dt):
    return dt.isoformat().replace("+00:00", "Z")


def now():
    return datetime.now(timezone.utc)


def caller_hash(caller_id):
    return hashlib.sha256(caller_id.encode("utf-8")).hexdigest()[:16]


def build(from_agent, to_agent, key, *, reason="transfer", transcript=None,
          ttl=60, at=None, caller="+15550100", handoff_id=None, extra=None):
    """A signed protocol_version 1 handoff, as gptme-voice's build_handoff."""
    at = at or now()
    ch = caller_hash(caller)
    doc = {
        "protocol_version": 1,
        "handoff_id": handoff_id or f"{int(at.timestamp())}-{from_agent}-{to_agent}-{secrets.token_hex(8)}",
        "caller_hash": ch,
        "from_agent": from_agent,
        "to_agent": to_agent,
        "reason": reason,
        "initiated_at": iso(at),
        "expires_at": iso(at + timedelta(seconds=ttl)),
        "transcript": list(transcript if transcript is not None else
                           [{"role": "user", "text": "hello"},
                            {"role": "assistant", "text": "let me transfer you"}]),
    }
    if extra:
        doc.update(extra)
    return sign(doc, key)


def dumps(doc):
    """File bytes as the real writer produces them."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def drop(spool, doc, name=None):
    """Publish into spool/handoff/ via a temp file and rename."""
    name = name or f"{doc.get('handoff_id', secrets.token_hex(8))}.json"
    os.makedirs(os.path.join(spool, "handoff"), exist_ok=True)
    os.makedirs(os.path.join(spool, "tmp"), exist_ok=True)
    tmp = os.path.join(spool, "tmp", "." + name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(dumps(doc))
    os.rename(tmp, os.path.join(spool, "handoff", name))
    return name


def make_key(path, nbytes=32):
    """A key file as `handoffctl keygen` writes it: hex + newline, 0600."""
    hexkey = secrets.token_hex(nbytes)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(hexkey + "\n")
    return hexkey.encode()


def load_key(path):
    data = open(path, "rb").read()
    if data.endswith(b"\n"):
        data = data[:-1]
    return data
