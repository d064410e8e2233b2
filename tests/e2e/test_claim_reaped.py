"""A claim whose producer file another daemon frees from spent/ at once
stands.

With fsync = no, a plain claim moves the producer's file from handoff/NAME
to spent/INO after its record, then looks at what arrived there
(store_leave_name()).  Every daemon on the spool empties spent/ once its
own intake is quiet (store_reap_spent(), no lock), so with several daemons
on one spool the file may be gone again before that look.  The claim must
stand then: its record is the daemon's own copy, and the producer's name
is gone with her file, so a claim withdrawn there loses the item
(test_daemon_multi lost 1 of 5,000 so, about one run in twenty).

The test holds the daemon just after the move (strace delays that
renameat2's return) and frees the file from spent/ as another daemon's
reaper does (an unlink), while the daemon is still held.  Then: the
bootstrap is published, the record stays, nothing is withdrawn.

On the code before (what arrived looked at by name, and a name gone taken
for a file swapped away), the claim was withdrawn: record and hidden
bootstrap removed, nothing published, the item lost.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import harness  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def main():
    with hdtest.Env(agents=["alice"], fsync=False) as env:
        d = env.start()
        spent = env.path("spent")
        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = doc["handoff_id"]
        record = env.path("claimed", hid + ".json")
        boot = os.path.join(env.state["alice"], "handoffs", hid + ".json")
        delay = int(10 * hdtest.SLOW * 1e6)
        try:
            s = harness.Strace(d.proc.pid, "renameat2", f"delay_exit={delay}:when=1", [spent])
            s.__enter__()
        except harness.Strace.Unavailable as e:
            hdtest.skip("strace", str(e))
        try:
            hdproto.drop(env.spool, doc)
            moved = hdtest.wait_for(lambda: os.listdir(spent), what="the producer's file in spent/")
            check(os.path.exists(record), "the record is there before the move")
            os.unlink(os.path.join(spent, moved[0]))
            # still held in the move's return: the look comes after the unlink
            check(state(d.proc.pid) == "t", "the daemon is still held after the move")
        finally:
            s.detach()
        hdtest.wait_for(lambda: os.path.exists(boot), what="the bootstrap published")
        check(os.path.exists(record), f"claimed/{hid}.json stays")
        hdtest.wait_for(lambda: f"Claimed {hid} for alice" in d.logs(), what="the claim logged")
        check("Withdrew" not in d.logs(), "nothing withdrawn")
        with open(boot) as f:
            check(hid in f.read(), "the bootstrap is the handoff's")
        check(d.stop() == 0, "exit code")
        print(f"ok: {hid} claimed and published, its file freed from spent/ before the look")
    hdtest.finish("test_claim_reaped")


if __name__ == "__main__":
    main()
