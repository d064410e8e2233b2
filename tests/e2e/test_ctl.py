#!/usr/bin/env python3
"""handoffctl keygen / submit against the Python reference signer.

submit's files must be byte-identical to what the real writer would write
and carry an HMAC the reference computes; its options, durations and
--output; --version.  `handoffctl verify` (with --key and -c) and the
configuration's errors: test_ctl_verify.py, which uses this script's
helpers.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from datetime import timedelta

sys.path.insert(0, os.path.join(os.environ["HD_SRC"], "tests/py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402

CTL = os.path.join(os.environ["HD_BUILD"], "handoffctl")


def run(*args, stdin=None):
    p = subprocess.run([CTL, *args], capture_output=True, text=True,
                       input=stdin, timeout=60)
    print(f"$ handoffctl {' '.join(args)} -> {p.returncode}")
    for line in (p.stdout + p.stderr).splitlines()[:8]:
        print(f"    {line}")
    return p


def check(cond, what):
    hdtest.expect(cond, what, say_ok=True)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def hdproto_time(s):
    from datetime import datetime
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def verify(keyfile, *files, extra=()):
    return run("verify", "--key", keyfile, *extra, *files)


def test_keygen(tmp):
    p = run("keygen")
    check(p.returncode == 0, "keygen to stdout exits 0")
    check(re.fullmatch(r"[0-9a-f]{64}\n", p.stdout) is not None,
          "keygen prints 64 lowercase hex chars and a newline")
    check(run("keygen").stdout != p.stdout, "two keys differ")

    path = os.path.join(tmp, "k1")
    old = os.umask(0)
    try:
        p = run("keygen", "-o", path)
    finally:
        os.umask(old)
    check(p.returncode == 0 and p.stdout == "", "keygen -o exits 0, quiet")
    data = open(path, "rb").read()
    check(re.fullmatch(rb"[0-9a-f]{64}\n", data) is not None,
          "key file holds 64 hex + newline")
    check(mode(path) == 0o600, f"key file mode 0600 even with umask 0 "
          f"(got {oct(mode(path))})")
    p = run("keygen", "--output", path)
    check(p.returncode == 2, "keygen refuses to overwrite with exit 2")
    check(path in p.stderr and "exists" in p.stderr,
          "the refusal names the file")
    check(open(path, "rb").read() == data, "the existing key is unchanged")

    p = run("keygen", "--help")
    check(p.returncode == 0 and "Usage" in p.stdout, "keygen --help")
    check(run("keygen", "--bogus").returncode == 2, "keygen bad option -> 2")
    check(run("keygen", "extra").returncode == 2, "keygen stray arg -> 2")
    p = run("keygen", "-o", os.path.join(tmp, "nodir", "k"))
    check(p.returncode == 4, "keygen into a missing directory -> 4")


def spool_files(spool, sub):
    d = os.path.join(spool, sub)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_submit(tmp, keyfile, key):
    spool = os.path.join(tmp, "spool")
    p = run("submit", "--spool", spool, "--key", keyfile,
            "--from", "alice", "--to", "bob")
    check(p.returncode == 2 and p.stderr == f"handoffctl: submit: {spool}: no such spool "
          "(--create-spool makes one)\n" and not os.path.exists(spool),
          f"submit into a spool that does not exist: exit 2, one line, nothing made ({p.stderr!r})")
    p = run("submit", "--spool", spool, "--key", keyfile, "--create-spool",
            "--from", "alice", "--to", "bob")
    check(p.returncode == 0, "submit --create-spool exits 0")
    hid = p.stdout.strip()
    check(re.fullmatch(r"\d{9,}-alice-bob-[0-9a-f]{16}", hid) is not None,
          f"default handoff_id is UNIXTIME-FROM-TO-16HEX ({hid!r})")
    path = os.path.join(spool, "handoff", hid + ".json")
    check(os.path.isfile(path), "the file is in handoff/ as <id>.json")
    check(spool_files(spool, "tmp") == [], "tmp/ is empty afterwards")
    check(spool_files(spool, "handoff") == [hid + ".json"],
          "handoff/ holds only the new file")
    check(mode(path) == 0o640, f"file mode 0640 (got {oct(mode(path))})")
    for sub, want in (("tmp", 0o3770), ("handoff", 0o3770), ("claimed", 0o750),
                      ("archive", 0o750), ("rejected", 0o750)):
        got = mode(os.path.join(spool, sub))
        check(got == want, f"{sub}/ created with mode {oct(want)} "
              f"(got {oct(got)})")

    raw = open(path, "rb").read()
    doc = json.loads(raw)
    check(raw == hdproto.dumps(doc),
          "file bytes equal the real writer's json.dumps(sort_keys, compact)")
    check(doc.get("hmac") == hdproto.compute_hmac(doc, key),
          "hmac equals the reference HMAC")
    check(doc.get("protocol_version") == 1 and
          type(doc["protocol_version"]) is int, "protocol_version 1")
    check(doc.get("handoff_id") == hid, "handoff_id as printed")
    check(doc.get("from_agent") == "alice" and doc.get("to_agent") == "bob",
          "agents")
    check(doc.get("reason") == "handoff", "default reason 'handoff'")
    check(doc.get("transcript") == [], "default transcript []")
    check("caller_hash" not in doc and "context_summary" not in doc and
          "kid" not in doc and "payload" not in doc,
          "no optional fields unless asked")
    ini = hdproto_time(doc["initiated_at"])
    exp = hdproto_time(doc["expires_at"])
    check(exp - ini == timedelta(seconds=60), "default ttl 60 s")
    check(doc["initiated_at"].endswith("Z"), "times written with Z")
    check(abs((hdproto.now() - ini).total_seconds()) < 30,
          "initiated_at is now")

    p = run("verify", "--key", keyfile, path)
    check(p.returncode == 0 and p.stdout == f"{path}: ok\n",
          "handoffctl verify accepts the submitted file")

    # every option reflected in the file
    tr = [{"role": "user", "text": "caf\u00e9 \u2603 \U0001f600"},
          {"role": "assistant", "text": "sure", "extra": 1.5}]
    tfile = write(os.path.join(tmp, "tr.json"), json.dumps(tr).encode())
    p = run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
            "--to", "bob", "--ttl", "300", "--id", "my-id_1",
            "--transcript", tfile, "--context", "the context \u00fc",
            "--caller-hash", "0123456789abcdef", "--reason", "billing",
            "--kid", "main")
    check(p.returncode == 0 and p.stdout == "my-id_1\n",
          "submit --id prints that id")
    path2 = os.path.join(spool, "handoff", "my-id_1.json")
    raw = open(path2, "rb").read()
    doc = json.loads(raw)
    check(raw == hdproto.dumps(doc), "non-ASCII file bytes match the writer")
    check(doc.get("hmac") == hdproto.compute_hmac(doc, key),
          "non-ASCII hmac matches the reference")
    check(doc.get("transcript") == tr, "--transcript reflected")
    check(doc.get("context_summary") == "the context \u00fc",
          "--context sets context_summary")
    check(doc.get("caller_hash") == "0123456789abcdef", "--caller-hash")
    check(doc.get("reason") == "billing", "--reason")
    check(doc.get("kid") == "main", "--kid")
    ini = hdproto_time(doc["initiated_at"])
    exp = hdproto_time(doc["expires_at"])
    check(exp - ini == timedelta(seconds=300), "--ttl 300 reflected")
    check(run("verify", "--key", keyfile, path2).returncode == 0,
          "verify accepts the file with every option")

    # refusals, nothing written
    before = spool_files(spool, "handoff")
    p = run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
            "--to", "bob", "--id", "my-id_1")
    check(p.returncode == 1 and "exists" in p.stderr,
          "an id already pending is refused (exit 1)")
    p = run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
            "--to", "bob", "--id", "../evil")
    check(p.returncode == 1 and "bad_id" in p.stderr,
          "an invalid --id is refused locally with bad_id")
    p = run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
            "--to", "alice")
    check(p.returncode == 1 and "submit: self_handoff:" in p.stderr,
          "self handoff refused locally")
    p = run("submit", "--spool", spool, "--key", keyfile, "--from", "Alice",
            "--to", "bob")
    check(p.returncode == 2 and p.stderr == "handoffctl: submit: --from 'Alice': not a valid "
          "agent name (lowercase letters, digits, '-', '_')\n",
          f"bad agent name refused first, naming the option ({p.stderr!r})")
    bad_tr = write(os.path.join(tmp, "badtr.json"),
                   b'[{"role": "robot", "text": "x"}]')
    p = run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
            "--to", "bob", "--transcript", bad_tr)
    check(p.returncode == 1 and f"submit: {bad_tr}: bad_type:" in p.stderr,
          f"a transcript with a bad role is refused locally, naming the file ({p.stderr!r})")
    p = run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
            "--to", "bob", "--transcript", os.path.join(tmp, "missing.json"))
    check(p.returncode == 2, "a missing transcript file -> 2")
    check(run("submit", "--spool", spool, "--key", keyfile, "--from",
              "alice").returncode == 2, "no --to and no payload -> 2")
    check(run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
              "--to", "bob", "--ttl", "0").returncode == 2, "--ttl 0 -> 2")
    check(run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
              "--to", "bob", "--ttl", "12x").returncode == 2, "--ttl 12x -> 2")
    check(run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
              "--to", "bob", "--caller-hash", "XYZ").returncode == 2,
          "bad --caller-hash -> 2")
    check(run("submit", "--key", keyfile, "--from", "alice",
              "--to", "bob").returncode == 2, "no --spool -> 2")
    check(spool_files(spool, "handoff") == before,
          "refused submits wrote nothing")
    check(spool_files(spool, "tmp") == [], "and left nothing in tmp/")
    p = run("submit", "--help")
    check(p.returncode == 0 and "--spool" in p.stdout, "submit --help")
    p = run("submit", "--version")
    check(p.returncode == 0 and p.stdout.startswith("handoffctl "),
          "submit --version")

    # a vox payload: --to defaults to its target_agent
    vox = {"version": "1.0", "session_id": "sess-1", "source_agent": "alice",
           "target_agent": "carol", "goal": "ship it",
           "completed_steps": ["a"], "pending_blockers": []}
    vfile = write(os.path.join(tmp, "vox.json"), json.dumps(vox).encode())
    p = run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
            "--type", "vox/1.0", "--payload", vfile)
    check(p.returncode == 0, "submit with a vox/1.0 payload")
    if p.returncode == 0:
        vp = os.path.join(spool, "handoff", p.stdout.strip() + ".json")
        vd = json.loads(open(vp, "rb").read())
        check(vd.get("to_agent") == "carol", "--to defaults to target_agent")
        check(vd.get("payload_type") == "vox/1.0" and vd.get("payload") == vox,
              "payload_type and payload set")
        check(vd.get("hmac") == hdproto.compute_hmac(vd, key),
              "payload covered by the reference hmac")
        check(run("verify", "--key", keyfile, vp).returncode == 0,
              "verify accepts the vox handoff")
    p = run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
            "--type", "vox/1.0", "--payload", "-",
            stdin=json.dumps(dict(vox, version="2.0")))
    check(p.returncode == 1 and "payload_invalid" in p.stderr,
          "an invalid payload (from stdin) is refused with payload_invalid")
    p = run("submit", "--spool", spool, "--key", keyfile, "--from", "alice",
            "--to", "dave", "--type", "vox/1.0", "--payload", vfile)
    check(p.returncode == 1 and "payload_invalid" in p.stderr,
          "a payload whose target differs from --to is refused")
    return spool


def test_submit_output(tmp, keyfile, key):
    """submit --output: the signed file for a spool elsewhere (what a client
    posts to handoff-hubd), with no spool and no configuration."""
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    path = os.path.join(out, "handoff.json")
    p = subprocess.run([CTL, "submit", "--key", keyfile, "--from", "bob", "--to", "alice",
                        "--reason", "for the hub", "--output", path],
                       capture_output=True, text=True, timeout=60, cwd=out)
    print(f"$ handoffctl submit --key K --from bob --to alice --output FILE -> {p.returncode}: "
          f"{(p.stdout + p.stderr).strip()!r}")
    check(p.returncode == 0 and os.path.isfile(path),
          f"submit --output FILE writes FILE without a spool ({p.stderr!r})")
    if not os.path.isfile(path):
        return
    raw = open(path, "rb").read()
    doc = json.loads(raw)
    check(p.stdout == doc["handoff_id"] + "\n", "and prints its handoff_id")
    check(raw == hdproto.dumps(doc), "the file's bytes are the real writer's")
    check(doc.get("hmac") == hdproto.compute_hmac(doc, key) and doc["reason"] == "for the hub",
          "signed with --key, with the options given")
    check(mode(path) == 0o600, f"--output FILE has mode 0600 (got {oct(mode(path))})")
    check(sorted(os.listdir(out)) == ["handoff.json"], f"nothing else written: {os.listdir(out)}")
    check(verify(keyfile, path).returncode == 0, "verify accepts the --output file")
    p = run("submit", "--key", keyfile, "--from", "bob", "--to", "alice", "-o", path)
    check(p.returncode == 0 and json.loads(open(path, "rb").read())["handoff_id"] == p.stdout.strip()
          and p.stdout.strip() != doc["handoff_id"], "a second -o FILE replaces it")
    p = subprocess.run([CTL, "submit", "--key", keyfile, "--from", "bob", "--to", "alice",
                        "--output", "-"], capture_output=True, timeout=60)
    try:
        sdoc = json.loads(p.stdout)
    except ValueError:
        sdoc = {}
    check(p.returncode == 0 and p.stdout == hdproto.dumps(sdoc) and
          sdoc.get("hmac") == hdproto.compute_hmac(sdoc, key),
          f"--output - writes the file's bytes alone to stdout ({p.stdout[:80]!r})")
    p = run("submit", "--key", keyfile, "--from", "bob", "--to", "alice", "-o", path,
            "--spool", os.path.join(tmp, "spool"))
    check(p.returncode == 2 and "--output" in p.stderr, "--output with --spool -> 2")
    p = run("submit", "--key", keyfile, "--from", "bob", "--to", "alice", "-o",
            os.path.join(tmp, "nodir", "h.json"))
    check(p.returncode == 2 and "nodir" in p.stderr, "--output into a missing directory -> 2")


def test_durations(tmp, keyfile, key):
    """--ttl, --max-window and --max-clock-skew take a duration as every
    other option and key does (90, 5m, 1h)."""
    spool = os.path.join(tmp, "dspool")
    for ttl, secs in (("5m", 300), ("1h", 3600), ("90", 90), ("2d", 172800)):
        p = run("submit", "--key", keyfile, "--from", "alice", "--to", "bob",
                "--ttl", ttl, "--spool", spool, "--create-spool")
        ok = p.returncode == 0
        if ok:
            doc = json.loads(open(os.path.join(spool, "handoff", p.stdout.strip() + ".json")).read())
            ok = hdproto_time(doc["expires_at"]) - hdproto_time(doc["initiated_at"]) == \
                timedelta(seconds=secs)
        check(ok, f"submit --ttl {ttl}: expires_at = initiated_at + {secs} s")
    for bad in ("0", "12x", "367d", "5 m", "-1"):
        p = run("submit", "--key", keyfile, "--from", "alice", "--to", "bob", "--ttl", bad,
                "--spool", spool)
        check(p.returncode == 2 and "not a duration" in p.stderr and p.stdout == "",
              f"submit --ttl {bad!r} -> 2, not a duration")
    path = write(os.path.join(tmp, "long.json"), hdproto.dumps(hdproto.build(
        "alice", "bob", key, ttl=7200, at=hdproto.now() - timedelta(seconds=400))))
    p = verify(keyfile, path, extra=("--max-window", "5m"))
    check(p.returncode == 1 and ": expired:" in p.stdout, "verify --max-window 5m: 400 s old is expired")
    p = verify(keyfile, path, extra=("--max-window", "1h", "--max-clock-skew", "1m"))
    check(p.returncode == 0, "verify --max-window 1h --max-clock-skew 1m: fresh")


def test_version():
    """handoffctl -V and --version, as handoffd -V."""
    d = subprocess.run([hdtest.HANDOFFD, "-V"], capture_output=True, text=True, timeout=30)
    version = d.stdout.split()[-1] if d.stdout.split() else "?"
    for opt in ("-V", "--version"):
        p = run(opt)
        check(p.returncode == 0 and p.stdout == f"handoffctl {version}\n",
              f"handoffctl {opt} prints 'handoffctl {version}' as handoffd -V its version")
    check("-V, --version" in run("--help").stdout, "handoffctl --help names -V, --version")


def main():
    tmp = tempfile.mkdtemp(prefix="hdtest.")
    try:
        test_keygen(tmp)
        keyfile = os.path.join(tmp, "key")
        key = hdproto.make_key(keyfile)
        test_submit(tmp, keyfile, key)
        test_submit_output(tmp, keyfile, key)
        test_durations(tmp, keyfile, key)
        test_version()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    hdtest.finish("all passed")


if __name__ == "__main__":
    main()
