"""Sender signatures end to end, against the real daemon:

- carol (require = sig) signs with her Ed25519 key (handoffctl keygen
  --ed25519, handoffctl submit --key carol.key): the daemon claims it;
- an HMAC file from carol (default key) is refused: signature_required;
- a file signed by mallory's key (pubkey_dir/mallory.pub) with from_agent
  carol is refused: key_agent_mismatch;
- rotation: two public keys listed, both verify; one removed from the file
  and SIGHUP: it is refused (unknown_key), the other still verifies;
- a document signed by openssl (a second Ed25519 implementation) with
  carol's key is claimed, and `handoffctl verify --key carol.pub` accepts it;
- the kid keygen writes is the first 16 hex chars of SHA-256 of the public
  key, checked in Python;
- a secret key given to the daemon is refused at start."""

import base64
import hashlib
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hded25519  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def keygen(env, name, *extra):
    path = os.path.join(env.dir, name + ".key")
    p = env.ctl("keygen", "--ed25519", "-o", path, *extra, check_rc=0)
    pub = path[:-4] + ".pub"
    check(oct(os.stat(path).st_mode & 0o777) == "0o600", f"{path} is 0600")
    check(oct(os.stat(pub).st_mode & 0o777) == "0o644", f"{pub} is 0644")
    line = open(pub).read()
    check(p.stdout == line, "keygen prints the public line")
    return path, pub, line


def submit(env, key, frm, to="bob"):
    p = env.ctl("submit", "--spool", env.spool, "--key", key, "--from", frm, "--to", to,
                check_rc=0)
    return p.stdout.strip()


def reason(env, hid, timeout=10.0):
    def found():
        for n in env.items("rejected"):
            if hid in n:
                return env.reason_of(n)["reason"]
        return None
    return hdtest.wait_for(found, timeout, f"{hid} rejected")


def claimed(env, hid):
    hdtest.wait_for(lambda: f"{hid}.json" in env.names("claimed"), what=f"{hid} claimed")


def main():
    with hdtest.Env(agents=["bob"]) as env:
        carol, carol_pub, carol_line = keygen(env, "carol")
        carol2, carol2_pub, carol2_line = keygen(env, "carol2", "--kid", "carol-2027")
        mallory, mallory_pub, _ = keygen(env, "mallory")

        # The default kid, recomputed from the public key here.
        pk, kid = hded25519.parse_pub_line(carol_line)
        check(kid == hashlib.sha256(pk).hexdigest()[:16], f"kid {kid} is sha256(pk)[:16]")
        check(carol2_line.endswith(" carol-2027\n"), "--kid is written")

        pubdir = os.path.join(env.dir, "pubkeys")
        os.mkdir(pubdir, 0o755)
        os.rename(mallory_pub, os.path.join(pubdir, "mallory.pub"))
        listed = os.path.join(env.dir, "carol-keys.pub")
        with open(listed, "w") as f:
            f.write("# carol, two keys while rotating\n" + carol_line + carol2_line)
        os.chmod(listed, 0o644)
        conf_text = env.config_text("d0").replace("[keys]\n", "[keys]\n" + f"pubkey_dir = {pubdir}\n", 1)
        conf_text += (f"[agent carol]\nstate_dir = {env.dir}/agents/carol\n"
                      f"pubkeys = {listed}\nrequire = sig\n")
        conf = env.write_config("d0", text=conf_text)

        # A secret key where public keys belong: refused before start.
        bad = env.write_config("bad", text=conf_text.replace(listed, carol))
        p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", bad], capture_output=True, text=True)
        check(p.returncode != 0, "a secret key in pubkeys is refused")
        check("the daemon needs only public keys" in p.stderr, f"message: {p.stderr!r}")

        d = env.start(conf=conf)

        # carol signs; the daemon claims and delivers.
        hid = submit(env, carol, "carol")
        claimed(env, hid)
        hdtest.wait_for(lambda: env.bootstraps("bob") == [hid + ".json"], what="bootstrap for bob")
        signed = open(os.path.join(env.spool, "claimed", hid + ".json")).read()
        check('"sig":' in signed and '"hmac"' not in signed, "the claimed file carries sig, not hmac")

        # HMAC from carol: signature_required.
        h = hdproto.build("carol", "bob", env.key)
        hdproto.drop(env.spool, h)
        r = reason(env, h["handoff_id"])
        check(r == "signature_required", f"hmac from carol: {r}")

        # mallory's key, carol's name: key_agent_mismatch.
        hid_m = submit(env, mallory, "carol")
        r = reason(env, hid_m)
        check(r == "key_agent_mismatch", f"mallory as carol: {r}")
        # and signs for mallory himself
        hid_mm = submit(env, mallory, "mallory", to="bob")
        claimed(env, hid_mm)

        # Rotation: both keys verify.
        hid2 = submit(env, carol2, "carol")
        claimed(env, hid2)

        # openssl signs with carol-2027's key: claimed, and handoffctl verify agrees.
        seed = base64.b64decode(open(carol2).read().split()[1])
        k = hded25519.Key(seed, kid="carol-2027")
        try:
            doc = k.sign(hdproto.build("carol", "bob", b"unused-hmac-key-xxxxxxxxxxxxxxxxxxx"))
        finally:
            k.close()
        outside = os.path.join(env.dir, "openssl-signed.json")
        with open(outside, "wb") as f:
            f.write(hdproto.dumps(doc))
        v = env.ctl("verify", "--key", carol2_pub, outside)
        check(v.returncode == 0 and v.stdout.endswith(": ok\n"), f"verify: {v.stdout} {v.stderr}")
        hdproto.drop(env.spool, doc)
        claimed(env, doc["handoff_id"])

        # Drop the old key from the list, reload: it is refused, the new one verifies.
        with open(listed, "w") as f:
            f.write(carol2_line)
        d.messages.clear()
        d.send(signal.SIGHUP)
        d.wait_message("READY=1")
        # "Reloaded" is an info line: written out when the loop next
        # sleeps, after the READY=1 of the reload went out.
        hdtest.wait_for(lambda: "Reloaded" in d.logs(), what="reload logged")
        hid_old = submit(env, carol, "carol")
        r = reason(env, hid_old)
        check(r == "unknown_key", f"the removed key after SIGHUP: {r}")
        hid_new = submit(env, carol2, "carol")
        claimed(env, hid_new)

        st = d.status()
        print(f"claimed {env.count('claimed')}, rejected {env.count('rejected')}: "
              f"signature_required, key_agent_mismatch, unknown_key after rotation")
        check(env.count("rejected") == 3, f"three rejections: {env.names('rejected')}")
        check(st is not None, "status answers")
        t0 = time.monotonic()
        rc = d.stop(signal.SIGTERM)
        check(rc == 0, f"SIGTERM exit {rc} ({time.monotonic() - t0:.1f}s)")


hdtest.run(main)
