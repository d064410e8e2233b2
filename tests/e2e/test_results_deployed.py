"""Results with the packaged layout and separate users (root only): the
daemon as its own user in the spool's group, agent alice as hers (her own
group, and the spool's to read the key), a producer in the spool's group
only.

- alice consumes and completes as herself: the daemon (another user)
  reads her result in her handoffs/ and records archive/NAME.result, its
  own file (owner the daemon, the spool's group, 0640), which the
  producer reads with `handoffctl show`;
- the producer cannot speak for alice: her handoffs/ is closed to him
  (`handoffctl complete --agent alice` fails, a file cannot be made
  there), and archive/ is the daemon's (nobody else writes it);
- alice's second result is refused and her handoffctl reads and removes
  the daemon's .refused.<id> (the daemon's file, in her group);
- a result the daemon may not read (0600: the daemon reads results as
  others, hd_complete() writes them 0644) is refused as unreadable, not
  an error at every look."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47430
DAEMON = 47431
ALICE = 47432
MALLORY = 47433
# a python others may run (sys.executable may be under a private home)
PY = "/usr/bin/python3"
CREATE = "import os, sys; os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)"
WRITE600 = ("import os, sys; t = sys.argv[1] + '.tmp'; "
            "fd = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600); "
            "os.write(fd, sys.argv[2].encode()); os.close(fd); os.rename(t, sys.argv[1])")


def as_user(uid, groups, argv):
    return subprocess.run(argv, user=uid, group=groups[0], extra_groups=groups,
                          capture_output=True, text=True, timeout=60 * hdtest.SLOW)


def main():
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        d, conf = dep.start()
        ctl = env.for_others(hdtest.HANDOFFCTL)
        hd = os.path.join(env.state["alice"], "handoffs")

        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = doc["handoff_id"]
        hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: os.path.exists(os.path.join(hd, hid + ".json")), what="delivered")
        p = as_user(ALICE, [ALICE, SPOOL_GID], [ctl, "consume", "-c", conf, "--agent", "alice", hid])
        check(p.returncode == 0, f"alice's consume: {p.returncode} {p.stderr}")
        p = as_user(ALICE, [ALICE, SPOOL_GID], [ctl, "complete", "-c", conf, "--agent", "alice", hid,
                                                "--text", "done as alice"])
        check(p.returncode == 0, f"alice's complete: {p.returncode} {p.stdout}{p.stderr}")
        side = [n for n in os.listdir(env.path("archive")) if n.endswith(hid + ".json.result")]
        check(len(side) == 1, f"archive/: {os.listdir(env.path('archive'))}")
        st = os.stat(env.path("archive", side[0]))
        check(st.st_uid == DAEMON and st.st_gid == SPOOL_GID and (st.st_mode & 0o777) == 0o640,
              f"NAME.result: uid {st.st_uid} gid {st.st_gid} mode {oct(st.st_mode & 0o777)}")
        print("ok: alice completes as herself; NAME.result is the daemon's file (0640, spool's group)")

        p = as_user(MALLORY, [SPOOL_GID], [ctl, "show", "-c", conf, hid, "--json"])
        check(p.returncode == 0 and json.loads(p.stdout)["result"]["text"] == "done as alice",
              f"the producer's show: {p.returncode} {p.stdout}{p.stderr}")
        print("ok: a producer in the spool's group reads the result (handoffctl show)")

        doc2 = hdproto.build("bob", "alice", env.key, ttl=600)
        hdproto.drop(env.spool, doc2)
        hdtest.wait_for(lambda: os.path.exists(os.path.join(hd, doc2["handoff_id"] + ".json")),
                        what="delivered")
        p = as_user(MALLORY, [SPOOL_GID], [ctl, "complete", "-c", conf, "--agent", "alice",
                                           doc2["handoff_id"], "--text", "forged"])
        check(p.returncode == 4 and "Permission denied" in p.stderr,
              f"the producer's complete for alice: {p.returncode} {p.stderr}")
        for path in (os.path.join(hd, ".result." + doc2["handoff_id"]),
                     env.path("archive", "x.json.result")):
            p = as_user(MALLORY, [SPOOL_GID], [PY, "-c", CREATE, path])
            check(p.returncode != 0 and "PermissionError" in p.stderr, f"{path} made: {p.stderr}")
        print("ok: a producer cannot write alice's handoffs/ or archive/: no result in her name")

        p = as_user(ALICE, [ALICE, SPOOL_GID], [ctl, "complete", "-c", conf, "--agent", "alice", hid,
                                                "--failed", "changed my mind"])
        check(p.returncode == 1 and "already_completed" in p.stderr, f"second: {p.returncode} {p.stderr}")
        check(not any(n.startswith(".refused.") for n in os.listdir(hd)),
              f"alice's handoffctl removed the refusal: {os.listdir(hd)}")
        print("ok: alice's second result refused; her handoffctl read and removed the daemon's refusal")

        # one the daemon may not read (0600, alice's): refused as such, once
        rname = os.path.join(hd, ".result." + doc2["handoff_id"])
        p = as_user(ALICE, [ALICE, SPOOL_GID], [PY, "-c", WRITE600, rname, "{}"])
        check(p.returncode == 0, f"alice's 0600 result: {p.stderr}")
        ref = os.path.join(hd, ".refused." + doc2["handoff_id"])
        hdtest.wait_for(lambda: os.path.exists(ref) and not os.path.exists(rname),
                        what="the unreadable result refused")
        with open(ref) as f:
            why = json.load(f)
        check(why["reason"] == "unreadable", f"refused as {why}")
        check("Cannot take the result" not in d.logs(), "an error, not a refusal")
        print(f"ok: a result the daemon may not read: refused as unreadable ({why['detail']})")
        check(d.stop() == 0, "stop")
    hdtest.finish("test_results_deployed")


if __name__ == "__main__":
    hdtest.run(main)
