"""Attack (issue 43.12, the log): the daemon answered each junk file in
cancel/ refused with a log line of its own, so a member of the spool's
group wrote 5,000 lines in 3 s.  Refusals (and busy answers) are now
logged at most once per 10 s each (log_quiet_due(), as the control
socket's refusals), the line saying how many it stands for.

Mallory (her own user, in the spool's group; the daemon its own user, as
packaged) drops N (5,000) junk requests: empty objects, bytes that are no
JSON, and requests of bob's with a MAC that does not match.  Each is still
answered refused (a requester waits for an answer); the daemon's lines of
refused cancel requests number at most 2 + 1 per 10 s of the flood, and
bob's cancel of his waiting handoff right after is canceled.

Runs as root; the users and groups are throwaway ids."""

import json
import os
import subprocess
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47630       # the spool's group ("handoff")
DAEMON = 47631          # handoffd's user
ALICE = 47632           # alice's user and group
BOB = 47633             # a sender
MALLORY = 47634         # the attacker
N = int(os.environ.get("HD_ATTACK_CANCEL_JUNK_N", "5000"))
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

# As mallory: each of the bodies in a JSON file through tmp/ into cancel/.
FLOOD = r"""
import json, os, sys
src, spool = sys.argv[1], sys.argv[2]
for i, body in enumerate(json.load(open(src))):
    n = "junk-%06d.%s" % (i, os.urandom(8).hex())
    t = os.path.join(spool, "tmp", "flood." + n)
    fd = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
    os.write(fd, body.encode())
    os.close(fd)
    os.rename(t, os.path.join(spool, "cancel", n))
"""


def bodies(env):
    at = hdproto.now()
    bad = hdproto.sign({"protocol_version": 1, "type": "cancel/1", "handoff_id": "junk-0",
                        "from_agent": "bob", "initiated_at": hdproto.iso(at),
                        "expires_at": hdproto.iso(at + timedelta(seconds=600))}, b"x" * 32)
    kinds = ["{}", "not json at all", json.dumps(bad)]
    return [kinds[i % 3] for i in range(N)]


def refused_lines(d):
    return [ln for ln in d.logs().splitlines() if "Cancel request" in ln and ": refused" in ln]


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        d, conf = dep.start()
        hdtest.wait_for(lambda: os.path.isdir(env.path("cancel")), what="cancel/ made")
        src = os.path.join(env.dir, "junk.json")
        with open(src, "w") as f:
            json.dump(bodies(env), f)
        os.chmod(src, 0o644)

        t0 = time.monotonic()
        p = subprocess.run([PY, "-c", FLOOD, src, env.spool], user=MALLORY, group=SPOOL_GID,
                           extra_groups=[SPOOL_GID], capture_output=True, text=True,
                           timeout=120 * hdtest.SLOW)
        check(p.returncode == 0, f"mallory's flood: {p.stderr}")

        def answered():
            return sum(1 for n in os.listdir(env.path("cancel")) if n.startswith(".refused.junk-"))
        hdtest.wait_for(lambda: answered() == N, timeout=60 * hdtest.SLOW,
                        what=lambda: f"{N} junk requests answered refused ({answered()})")
        took = time.monotonic() - t0
        lines = refused_lines(d)
        bound = 2 + int(took / 10)
        print(f"- {N} junk requests answered refused in {took:.2f} s: {len(lines)} log line(s) "
              f"(at most {bound})")
        check(len(lines) <= bound, f"{len(lines)} lines for {N} refusals:\n" +
              "\n".join(lines[:5]))
        check(lines and "refused: " in lines[0], f"the first says why: {lines[:1]}")

        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = doc["handoff_id"]
        hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: hid + ".json" in env.bootstraps("alice"), what=f"{hid} delivered")
        p = subprocess.run([env.for_others(hdtest.HANDOFFCTL), "cancel", "--spool", env.spool,
                            "--key", env.key_path, "--from", "bob", hid, "--timeout", "20",
                            "--json"], user=BOB, group=SPOOL_GID, extra_groups=[SPOOL_GID],
                           capture_output=True, text=True, timeout=60 * hdtest.SLOW)
        check(p.returncode == 0 and '"canceled"' in p.stdout, f"bob's cancel: {p.stdout}{p.stderr}")
        print("ok: the refusals are answered each and logged a line per 10 s; bob's cancel works")
        check(d.stop() == 0, "the daemon stops with 0")
    hdtest.finish("test_attack_cancel_junk_log")


if __name__ == "__main__":
    hdtest.run(main)
