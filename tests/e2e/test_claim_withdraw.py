"""A claim whose file leaves its name before the move is withdrawn.

With fsync = no, a plain claim writes the record (claimed/<id>.json, a
link of the hidden bootstrap) and then moves the producer's file from
handoff/NAME to spent/.  The look at what that move took is the claim's
last look at the file (decide_claim() makes no other with fsync = no):
when the name no longer holds the file decided on, the claim is
withdrawn before anything of it is published (intake.c withdraw()).

The test holds the daemon just after the record's link (strace delays
that linkat's return), and the producer swaps her file with a dotfile of
hers (renameat2(RENAME_EXCHANGE)), which no decision looks at.  Then:

 - the record and the hidden bootstrap are gone, no bootstrap is
   published, and the daemon says it withdrew the claim;
 - what the swap put under NAME is not kept in spent/: it is back in
   handoff/ and decided as itself (rejected: it is not a handoff);
 - her file, renamed to a plain name again, is claimed once.

On the code before (a look under the id's lock, none after the record),
the claim stood and was published although its file had left the name.
"""

import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import harness  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
AT_FDCWD, RENAME_EXCHANGE = -100, 2


def exchange(a, b):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


def main():
    with hdtest.Env(agents=["alice"], fsync=False) as env:
        d = env.start()
        hs = env.path("handoff")
        theirs = os.path.join(hs, ".hers")
        with open(theirs, "w") as f:
            f.write("not a handoff\n")
        junk_ino = os.stat(theirs).st_ino
        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = doc["handoff_id"]
        name = "swapped.json"
        record = env.path("claimed", hid + ".json")
        handoffs = os.path.join(env.state["alice"], "handoffs")
        boot = os.path.join(handoffs, hid + ".json")
        try:
            s = harness.Strace(d.proc.pid, "linkat", "delay_exit=3000000:when=1",
                               [env.path("claimed")])
            s.__enter__()
        except harness.Strace.Unavailable as e:
            hdtest.skip("strace", str(e))
        try:
            hdproto.drop(env.spool, doc, name=name)
            hdtest.wait_for(lambda: os.path.exists(record), what="the record linked")
            ino = os.stat(os.path.join(hs, name)).st_ino
            exchange(os.path.join(hs, name), theirs)
            check(os.stat(theirs).st_ino == ino, "her file is now handoff/.hers")
        finally:
            s.detach()
        hdtest.wait_for(lambda: f"Withdrew the claim of {hid}" in d.logs(),
                        what="the claim withdrawn")
        check(not os.path.exists(record), f"claimed/{hid}.json removed")
        check(not os.path.exists(boot), "no bootstrap published")
        check(not any(hid in n for n in os.listdir(handoffs)), "no hidden bootstrap left")
        print(f"ok: the claim of {hid} withdrawn, nothing of it published")
        # what the swap put under the name: decided as itself, not in spent/
        hdtest.wait_for(lambda: os.path.exists(env.path("rejected", name)),
                        what=f"handoff/{name} (the swapped-in file) rejected")
        check(os.stat(env.path("rejected", name)).st_ino == junk_ino,
              "rejected/ holds the swapped-in file")
        spent = env.path("spent")
        check(all(os.stat(os.path.join(spent, n)).st_ino != junk_ino for n in os.listdir(spent)),
              "the swapped-in file is not in spent/")
        check(os.stat(theirs).st_ino == ino, "her file stays as handoff/.hers, untouched")
        print("ok: the swapped-in file went back to handoff/ and was rejected as itself")
        # her file under a plain name again: claimed once
        os.rename(theirs, os.path.join(hs, "again.json"))
        hdtest.wait_for(lambda: os.path.exists(boot), what="the handoff claimed")
        hdtest.wait_for(lambda: not os.path.exists(os.path.join(hs, "again.json")),
                        what="handoff/ drained")
        # "Claimed" is an info line: written out when the loop next sleeps,
        # after the bootstrap shows; waited for, then counted.
        hdtest.wait_for(lambda: f"Claimed {hid} for alice" in d.logs(), what="the claim logged")
        claims = d.logs().count(f"Claimed {hid} for alice")
        check(claims == 1, f"claimed once, got {claims}")
        print(f"ok: renamed back, {hid} claimed once")
        d.stop()
    hdtest.finish("test_claim_withdraw")


if __name__ == "__main__":
    main()
