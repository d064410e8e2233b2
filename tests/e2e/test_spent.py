"""The producers' files of claims go to spent/ and are freed once intake is
quiet for 0.5 s (spool.c leave_name(), slice.c on_reap()): in a burst no inode is
freed (on ext4 without a journal a freed inode makes the next creations
dearer), after it spent/ is emptied, and a power cut's twin (the
producer's file in handoff/ and in spent/, one inode) is a claim's
leftover: removed, not rejected as a hardlink, not delivered twice."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = 200


def burst_then_quiet():
    with hdtest.Env(agents=["alice"]) as env:
        d = env.start()
        spent = env.path("spent")
        check(os.path.isdir(spent) and os.stat(spent).st_mode & 0o777 == 0o700,
              "spent/ made at start, mode 0700")
        docs = [hdproto.build("bob", "alice", env.key) for _ in range(N)]
        for doc in docs:
            hdproto.drop(env.spool, doc)
        # spent/ sampled at each look (every 20 ms) until the last
        # bootstrap: it fills and is not reaped while claims come (the
        # reaper waits for 0.5 s without one), whatever the load.
        seen = []

        def delivered():
            seen.append(len(os.listdir(spent)))
            return len(env.bootstraps("alice")) == N
        hdtest.wait_for(delivered, what=f"{N} bootstraps")
        t_last = time.monotonic()
        held = max(seen)
        check(env.count("handoff") == 0, "handoff/ empty after the burst")
        check(held > 0, f"spent/ holds the producers' files during the burst (at most {held})")
        check(all(a <= b for a, b in zip(seen, seen[1:])),
              f"spent/ not reaped during the burst: {seen[:40]}")
        hdtest.wait_for(lambda: not os.listdir(spent), timeout=10, what="spent/ emptied")
        quiet = time.monotonic() - t_last
        for doc in docs[:3]:
            it = env.item(doc["handoff_id"])
            check(it["state"] == "claimed" and it["handoff"] == doc, f"record intact: {it}")
        check(d.status()["counters"]["errors"] == 0, "no errors")
        print(f"    burst of {N}: spent/ held up to {held}, never fewer during the burst, "
              f"emptied {quiet:.2f}s after the last bootstrap")


def power_cut_twin():
    """A claim's move to spent/ that a power cut kept in both directories."""
    with hdtest.Env(agents=["alice"]) as env:
        doc = hdproto.build("bob", "alice", env.key)
        d = env.start()
        hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: env.bootstraps("alice"), what="delivered")
        d.stop()
        # Put the producer's file back beside its spent/ name (one inode),
        # as a cut that kept the rename's new name and lost its removal.
        spent = env.path("spent")
        names = os.listdir(spent)
        check(len(names) == 1, f"the producer's file waits in spent/: {names}")
        twin = os.path.join(env.spool, "handoff", "twin.json")
        os.link(os.path.join(spent, names[0]), twin)
        d2 = env.start(name="d1")
        hdtest.wait_for(lambda: not os.path.exists(twin), timeout=5, what="twin removed")
        check(env.count("rejected") == 0, f"not rejected: {env.names('rejected')}")
        check(len(env.bootstraps("alice")) == 1, "delivered once")
        check("left beside its claim's move to spent/" in d2.logs(), "logged as a leftover")
        hdtest.wait_for(lambda: not os.listdir(spent), timeout=10, what="spent/ emptied at start")
        print("    power cut's twin in handoff/ and spent/: removed, not rejected, delivered once")


def main():
    burst_then_quiet()
    power_cut_twin()
    print("ok")


if __name__ == "__main__":
    hdtest.run(main)
