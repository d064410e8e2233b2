#!/usr/bin/env python3
"""handoffctl verify against the Python reference signer: files the
reference signs pass `handoffctl verify`; every reject reason a file can
earn is reached through it with a Python-made file; verify -c checks a
file as the daemon configured by it would.  And the configuration's
errors: a "did you mean" for every key of the sample config, a key file
that cannot be loaded an error of its line.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import timedelta

sys.path.insert(0, os.path.join(os.environ["HD_SRC"], "tests/py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from test_ctl import check, run, verify, write  # noqa: E402


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
        keyfile = os.path.join(tmp, "key")
        key = hdproto.make_key(keyfile)
        test_verify_config(tmp, keyfile, key)
        test_config_errors(tmp, keyfile)
        test_verify(tmp, keyfile, key)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    hdtest.finish("all passed")


if __name__ == "__main__":
    main()
