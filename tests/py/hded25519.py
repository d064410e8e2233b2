"""Ed25519 for the tests, from a second implementation: the openssl command
(OpenSSL's own Ed25519, not libsodium's).  Python's stdlib has no Ed25519,
so signing and verifying go through `openssl pkeyutl -rawin`; the canonical
bytes are Python's own json.dumps, as for the MAC.

    seed  32 bytes (RFC 8032 secret key); the key files hold base64 of it
    pk    32 bytes; kid = first 16 hex chars of SHA-256(pk)
"""

import base64
import hashlib
import json
import os
import subprocess
import tempfile

# PKCS#8 and SubjectPublicKeyInfo for Ed25519 (RFC 8410): a fixed prefix
# and the 32 key bytes.
_PRIV_DER = bytes.fromhex("302e020100300506032b657004220420")
_PUB_DER = bytes.fromhex("302a300506032b6570032100")


def canonical(doc):
    """The signed bytes: the document without "sig" (and without "hmac")."""
    stripped = {k: v for k, v in doc.items() if k not in ("sig", "hmac")}
    return json.dumps(stripped, sort_keys=True, separators=(",", ":")).encode("utf-8")


def kid_of(pk):
    return hashlib.sha256(pk).hexdigest()[:16]


def seed_from(label):
    """A fixed, public, test-only seed from a label."""
    return hashlib.sha256(b"TEST-ONLY handoffd ed25519 seed: " + label.encode()).digest()


def _run(args, data=None):
    p = subprocess.run(["openssl", *args], input=data, capture_output=True)
    return p.returncode, p.stdout, p.stderr


def pem_public(pk):
    b = base64.encodebytes(_PUB_DER + pk).decode().replace("\n", "")
    return f"-----BEGIN PUBLIC KEY-----\n{b}\n-----END PUBLIC KEY-----\n"


def pem_private(seed):
    b = base64.encodebytes(_PRIV_DER + seed).decode().replace("\n", "")
    return f"-----BEGIN PRIVATE KEY-----\n{b}\n-----END PRIVATE KEY-----\n"


class Key:
    """An Ed25519 key pair known to openssl, kept in a private temp dir."""

    def __init__(self, seed, kid=None):
        self.seed = seed
        self.dir = tempfile.mkdtemp(prefix="hded25519.")
        self.priv_pem = os.path.join(self.dir, "key.pem")
        fd = os.open(self.priv_pem, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(pem_private(seed))
        rc, out, err = _run(["pkey", "-in", self.priv_pem, "-pubout", "-outform", "DER"])
        if rc != 0 or len(out) != len(_PUB_DER) + 32:
            raise RuntimeError(f"openssl pkey: {err.decode(errors='replace')}")
        self.pk = out[-32:]
        self.kid = kid or kid_of(self.pk)
        self.pub_pem = os.path.join(self.dir, "pub.pem")
        with open(self.pub_pem, "w") as f:
            f.write(pem_public(self.pk))

    def close(self):
        for n in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, n))
        os.rmdir(self.dir)

    def pub_line(self):
        return f"ed25519 {base64.b64encode(self.pk).decode()} {self.kid}\n"

    def secret_line(self):
        return f"ed25519-secret {base64.b64encode(self.seed).decode()} {self.kid}\n"

    def sign_bytes(self, data):
        msg = os.path.join(self.dir, "msg")
        with open(msg, "wb") as f:
            f.write(data)
        rc, out, err = _run(["pkeyutl", "-sign", "-rawin", "-inkey", self.priv_pem, "-in", msg])
        if rc != 0 or len(out) != 64:
            raise RuntimeError(f"openssl pkeyutl -sign: {err.decode(errors='replace')}")
        return out

    def sign(self, doc):
        """doc signed the way handoffctl signs: kid set, hmac dropped."""
        d = {k: v for k, v in doc.items() if k not in ("sig", "hmac")}
        d["kid"] = self.kid
        d["sig"] = base64.b64encode(self.sign_bytes(canonical(d))).decode()
        return d


def verify_bytes(pub_pem, data, sig, workdir):
    """True when openssl accepts sig over data with the PEM public key."""
    msg = os.path.join(workdir, "msg")
    sigf = os.path.join(workdir, "sig")
    with open(msg, "wb") as f:
        f.write(data)
    with open(sigf, "wb") as f:
        f.write(sig)
    rc, _, _ = _run(["pkeyutl", "-verify", "-rawin", "-pubin", "-inkey", pub_pem,
                     "-in", msg, "-sigfile", sigf])
    return rc == 0


def parse_pub_line(line):
    tag, b64, kid = line.strip().split(" ")
    if tag != "ed25519":
        raise ValueError("not a public key line")
    pk = base64.b64decode(b64, validate=True)
    if len(pk) != 32:
        raise ValueError("not 32 bytes")
    return pk, kid


def doc_verifies(pub_line, doc):
    """True when openssl accepts doc's "sig" over its canonical bytes
    (without "sig"), with the key of a .pub line ("ed25519 B64 KID")."""
    import shutil
    pk, _ = parse_pub_line(pub_line)
    d = tempfile.mkdtemp(prefix="hd-ed25519-verify.")
    try:
        pem = os.path.join(d, "pub.pem")
        with open(pem, "w") as f:
            f.write(pem_public(pk))
        return verify_bytes(pem, canonical(doc), base64.b64decode(doc["sig"]), d)
    finally:
        shutil.rmtree(d)
