#!/usr/bin/env python3
"""handoffctl keygen / submit / verify against the Python reference signer.

submit's files must be byte-identical to what the real writer would write
and carry an HMAC the reference computes; files the reference signs must
pass `handoffctl verify`; every reject reason a file can earn is reached
through `handoffctl verify` with a Python-made file.
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


def test_verify_config(tmp, keyfile, key):
    """verify -c: the configuration's keys (a sender's own, public keys),
    limits and window, as the daemon checks a file."""
    d = os.path.join(tmp, "vc")
    os.makedirs(os.path.join(d, "pub"), mode=0o755)
    alice_keyfile = os.path.join(d, "alice.key")
    alice_key = hdproto.make_key(alice_keyfile)
    carol = os.path.join(d, "carol.key")
    run("keygen", "--ed25519", "-o", carol)
    shutil.move(os.path.join(d, "carol.pub"), os.path.join(d, "pub", "carol.pub"))
    conf = write(os.path.join(d, "v.conf"), (
        f"[spool]\ndir = {d}/spool\nmax_window = 10m\n[keys]\ndefault = {keyfile}\n"
        f"pubkey_dir = {d}/pub\n[agent alice]\nstate_dir = {d}/alice\nkey = {alice_keyfile}\n"
        f"[agent bob]\nstate_dir = {d}/bob\n").encode())
    by_alice = write(os.path.join(d, "by-alice.json"),
                     hdproto.dumps(hdproto.build("alice", "bob", alice_key)))
    by_bob = write(os.path.join(d, "by-bob.json"), hdproto.dumps(hdproto.build("bob", "alice", key)))
    p = run("submit", "--key", carol, "--from", "carol", "--to", "bob", "--output",
            os.path.join(d, "by-carol.json"))
    by_carol = os.path.join(d, "by-carol.json")
    p = run("verify", "-c", conf, by_alice, by_bob, by_carol)
    check(p.returncode == 0 and p.stdout == f"{by_alice}: ok\n{by_bob}: ok\n{by_carol}: ok\n",
          "verify -c: alice's own key, the default key, carol's public key in pubkey_dir")
    p = verify(keyfile, by_alice)
    check(p.returncode == 1 and "bad_mac" in p.stdout, "(verify --key DEFAULT of alice's: bad_mac)")
    # the sender's own key and no other: the default key does not sign for alice
    forged = write(os.path.join(d, "forged.json"), hdproto.dumps(hdproto.build("alice", "bob", key)))
    p = run("verify", "--config", conf, forged)
    check(p.returncode == 1 and f"{forged}: bad_mac:" in p.stdout,
          "verify -c: alice's handoff signed with the default key is bad_mac, as the daemon says")
    # the configuration's window (10m), and an option above it
    old = write(os.path.join(d, "old.json"), hdproto.dumps(hdproto.build(
        "bob", "alice", key, ttl=7200, at=hdproto.now() - timedelta(minutes=20))))
    p = run("verify", "-c", conf, old)
    check(p.returncode == 1 and f"{old}: expired:" in p.stdout, "verify -c: max_window of the config")
    p = run("verify", "-c", conf, "--max-window", "1h", old)
    check(p.returncode == 0, "verify -c --max-window 1h: the option outranks the config")
    p = run("verify", "-c", conf, "--key", keyfile, by_bob)
    check(p.returncode == 2 and "not both" in p.stderr, "verify -c with --key -> 2")
    p = run("verify", "-c", os.path.join(d, "none.conf"), by_bob)
    check(p.returncode == 2, "verify -c of a missing configuration -> 2")


def sample_keys():
    """(section, key) of etc/handoffd.conf, commented-out ones too; not
    [keys], whose names are kids."""
    pairs, section = [], None
    for line in open(os.path.join(os.environ["HD_SRC"], "etc", "handoffd.conf")):
        m = re.match(r"^[;#]?\s*\[([a-z]+)(?: [^\]]*)?\]\s*$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^[;#]?\s*([a-z_][a-z0-9_]*)\s*=", line)
        if m and section and section != "keys":
            pairs.append((section, m.group(1)))
    return pairs


def test_config_errors(tmp, keyfile):
    """An unknown key gets a "did you mean" as an unknown section does, for
    every key of the sample config; a key file that cannot be loaded is
    an error of the line that names it."""
    d = os.path.join(tmp, "ce")
    os.mkdir(d)
    pairs = sample_keys()
    missed = []
    for section, key in pairs:
        typo = key[:-1]
        header = {"agent": "agent alice", "remote": "remote zed"}.get(section, section)
        conf = write(os.path.join(d, "t.conf"), f"[{header}]\n{typo} = 1\n".encode())
        p = run("list", "-c", conf)
        want = f"handoffctl: {conf}:2: unknown key '{typo}' in [{header}] (did you mean {key}?)\n"
        if p.returncode != 2 or p.stderr != want:
            missed.append(f"{typo!r} in [{header}]: {p.stderr.strip()!r}")
    check(len(pairs) > 40 and not missed,
          f"each of the {len(pairs)} keys of etc/handoffd.conf is suggested for its typo; not: {missed}")
    p = run("list", "-c", write(os.path.join(d, "f.conf"), b"[spool]\nfrobnicate = 1\n"))
    check(p.stderr.endswith("unknown key 'frobnicate' in [spool]\n"), "no suggestion when none is close")

    good = f"[spool]\ndir = {d}/spool\n[control]\nsocket = {d}/s.sock\n"
    for body, line, what in (
            (f"[keys]\ndefault = {d}/missing.key\n", 6, "[keys] default"),
            (f"[keys]\ndefault = {keyfile}\nmain = {d}/missing.key\n", 7, "a [keys] kid"),
            (f"[keys]\ndefault = {keyfile}\n[agent alice]\nstate_dir = {d}/a\n"
             f"key = {d}/missing.key\n", 9, "[agent] key"),
            (f"[keys]\ndefault = {keyfile}\n[agent alice]\nstate_dir = {d}/a\n"
             f"pubkeys = {d}/missing.pub\n", 9, "[agent] pubkeys"),
            (f"[keys]\ndefault = {keyfile}\npubkey_dir = {d}/missing\n", 7, "[keys] pubkey_dir")):
        conf = write(os.path.join(d, "k.conf"), (good + body).encode())
        p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", conf], capture_output=True, text=True,
                           timeout=30)
        print(f"$ handoffd -n ({what} missing) -> {p.returncode}: {p.stderr.strip()!r}")
        check(p.returncode != 0 and p.stderr.startswith(f"{conf}:{line}: ") and "missing" in p.stderr,
              f"{what} that cannot be loaded: an error of its line {line}")


def hdproto_time(s):
    from datetime import datetime
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def verify(keyfile, *files, extra=()):
    return run("verify", "--key", keyfile, *extra, *files)


def expect_reason(keyfile, path, reason, extra=()):
    p = verify(keyfile, path, extra=extra)
    want = f"{path}: {reason}:"
    check(p.returncode == 1 and p.stdout.startswith(want),
          f"{os.path.basename(path)} -> {reason}")


def test_verify(tmp, keyfile, key):
    d = os.path.join(tmp, "v")
    os.mkdir(d)

    def put(name, doc=None, raw=None):
        return write(os.path.join(d, name),
                     raw if raw is not None else hdproto.dumps(doc))

    good = put("good.json", hdproto.build("alice", "bob", key))
    p = verify(keyfile, good)
    check(p.returncode == 0 and p.stdout == f"{good}: ok\n",
          "a python-signed file passes")
    odd = put("odd.json", hdproto.build(
        "alice", "bob", key, caller="x",
        transcript=[{"role": "system", "text": "\x01\x1f\x7f\t\n\u2028 </> \"q\" \\"},
                    {"role": "user", "text": "\U0001f600 caf\u00e9"}],
        extra={"score": 0.1, "big": 1e20, "small": 1e-05, "round": 100000.0,
               "neg": -0.0, "n": -12345678901234, "nested": {"b": [1, None,
               True, False], "a": {}}, "\u00e9key": "v"}))
    check(verify(keyfile, odd).returncode == 0,
          "a python-signed file with floats, escapes and non-ASCII passes")

    # each single-field tamper -> bad_mac
    base = hdproto.build("alice", "bob", key, caller="+1555",
                         extra={"context_summary": "ctx", "n": 7})
    for field, val in base.items():
        if field == "hmac":
            continue
        t = dict(base)
        if isinstance(val, bool) or val is None:
            t[field] = not val
        elif isinstance(val, int):
            t[field] = val + 1
        elif isinstance(val, str):
            t[field] = val[:-1] + ("0" if val[-1] != "0" else "1")
        elif isinstance(val, list):
            t[field] = val + [{"role": "user", "text": "injected"}]
        else:
            t[field] = {"x": 1}
        expect_reason(keyfile, put(f"tamper-{field}.json", t), "bad_mac")
    t = dict(base, extra_field="x")
    expect_reason(keyfile, put("tamper-add.json", t), "bad_mac")
    t = dict(base)
    del t["context_summary"]
    expect_reason(keyfile, put("tamper-del.json", t), "bad_mac")
    t = dict(base)
    t["transcript"] = [dict(base["transcript"][0], text="changed")] + \
        base["transcript"][1:]
    expect_reason(keyfile, put("tamper-inner.json", t), "bad_mac")

    # exit codes
    p = verify(keyfile, good, os.path.join(d, "tamper-add.json"))
    check(p.returncode == 1 and p.stdout.startswith(f"{good}: ok\n"),
          "one ok and one rejected -> 1, both reported")
    check(verify(keyfile).returncode == 2, "no files -> 2")
    check(verify(keyfile, good, extra=("--now", "yesterday")).returncode == 2,
          "bad --now -> 2")
    check(verify(keyfile, good, extra=("--max-window", "x")).returncode == 2,
          "bad --max-window -> 2")
    check(run("verify", good).returncode == 2, "no --key -> 2")
    check(verify(os.path.join(tmp, "nokey"), good).returncode == 2,
          "missing key file -> 2")
    check(verify(keyfile, os.path.join(d, "absent.json")).returncode == 4,
          "a file that is not there -> 4")
    p = run("verify", "--help")
    check(p.returncode == 0 and "--key" in p.stdout, "verify --help")
    check(run("verify", "--bogus").returncode == 2, "verify bad option -> 2")

    # key file readable by others
    loose = os.path.join(tmp, "loose.key")
    write(loose, b"a" * 64 + b"\n")
    os.chmod(loose, 0o644)
    p = verify(loose, good)
    check(p.returncode == 2 and loose in p.stderr and "0644" in p.stderr,
          "a 0644 key file is refused, naming the file and its mode")

    # every reason a file can earn
    big = hdproto.build("alice", "bob", key, transcript=[
        {"role": "user", "text": "x" * (1024 * 1024)}])
    expect_reason(keyfile, put("big.json", big), "too_large")
    expect_reason(keyfile, good, "too_large", extra=("--max-size", "100"))
    fifo = os.path.join(d, "fifo.json")
    os.mkfifo(fifo)
    expect_reason(keyfile, fifo, "not_regular")
    link = os.path.join(d, "link.json")
    os.symlink(good, link)
    expect_reason(keyfile, link, "not_regular")
    expect_reason(keyfile, d, "not_regular")
    hl_src = put("hl.json", hdproto.build("alice", "bob", key))
    os.link(hl_src, os.path.join(d, "hl2.json"))
    expect_reason(keyfile, hl_src, "hardlink")
    expect_reason(keyfile, put("parse.json", raw=b'{"a": '), "parse_error")
    expect_reason(keyfile, put("dup.json",
                               raw=b'{"a": 1, "a": 2, "hmac": "x"}'),
                  "duplicate_key")
    deep = [[]]
    for _ in range(200):
        deep = [deep]
    expect_reason(keyfile, put("deep.json", hdproto.build(
        "alice", "bob", key, extra={"deep": deep})), "too_deep")

    def signed(name, **changes):
        doc = hdproto.build("alice", "bob", key)
        doc = {k: v for k, v in doc.items() if k != "hmac"}
        for k, v in changes.items():
            if v is DROP:
                doc.pop(k, None)
            else:
                doc[k] = v
        return put(name, hdproto.sign(doc, key))

    expect_reason(keyfile, signed("ver.json", protocol_version=2),
                  "bad_version")
    expect_reason(keyfile, signed("ver-str.json", protocol_version="1"),
                  "bad_version")
    expect_reason(keyfile, signed("missing.json", to_agent=DROP),
                  "missing_field")
    nomac = dict(hdproto.build("alice", "bob", key))
    del nomac["hmac"]
    expect_reason(keyfile, put("nomac.json", nomac), "missing_field")
    expect_reason(keyfile, signed("type.json", reason=5), "bad_type")
    expect_reason(keyfile, signed("type-tr.json", transcript={"a": 1}),
                  "bad_type")
    expect_reason(keyfile, signed("id.json", handoff_id="../etc/passwd"),
                  "bad_id")
    expect_reason(keyfile, signed("agent.json", from_agent="Alice"),
                  "bad_agent")
    expect_reason(keyfile, put("self.json",
                               hdproto.build("bob", "bob", key)),
                  "self_handoff")
    expect_reason(keyfile, put("macfmt.json",
                               dict(hdproto.build("alice", "bob", key),
                                    hmac="not-base64")), "bad_mac_format")
    other = b"b" * 64
    expect_reason(keyfile, put("otherkey.json",
                               hdproto.build("alice", "bob", other)),
                  "bad_mac")
    # named keys: a kid that is not configured is unknown_key
    kid_main = signed("kid-main.json", kid="main")
    kid_other = signed("kid-other.json", kid="other")
    p = verify(keyfile, kid_main, extra=("--kid", f"main={keyfile}"))
    check(p.returncode == 0, "a document with a configured kid passes")
    expect_reason(keyfile, kid_other, "unknown_key",
                  extra=("--kid", f"main={keyfile}"))
    check(run("verify", "--kid", "nokeyfile", good).returncode == 2,
          "--kid without NAME=FILE -> 2")
    expect_reason(keyfile, signed("ts.json", initiated_at="yesterday"),
                  "bad_timestamp")
    expect_reason(keyfile, signed("ts-naive.json",
                                  expires_at="2030-01-01T00:00:00"),
                  "bad_timestamp")
    expect_reason(keyfile, put("expired.json", hdproto.build(
        "alice", "bob", key, at=hdproto.now() - timedelta(hours=2))),
        "expired")
    expect_reason(keyfile, good, "expired",
                  extra=("--now", hdproto.iso(hdproto.now() +
                                              timedelta(hours=1))))
    check(verify(keyfile, good, extra=(
        "--now", hdproto.iso(hdproto.now() + timedelta(seconds=30)))
    ).returncode == 0, "--now within the ttl passes")
    expect_reason(keyfile, put("future.json", hdproto.build(
        "alice", "bob", key, at=hdproto.now() + timedelta(hours=1))),
        "future_timestamp")
    expect_reason(keyfile, put("long.json", hdproto.build(
        "alice", "bob", key, ttl=7200,
        at=hdproto.now() - timedelta(seconds=120))), "expired",
        extra=("--max-window", "60"))
    expect_reason(keyfile, put("num.json", hdproto.build(
        "alice", "bob", key, extra={"n": 2 ** 70})), "number_out_of_range")


class _Drop:
    pass


DROP = _Drop()


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
        test_verify_config(tmp, keyfile, key)
        test_config_errors(tmp, keyfile)
        test_verify(tmp, keyfile, key)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    hdtest.finish("all passed")


if __name__ == "__main__":
    main()
