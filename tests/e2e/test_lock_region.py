"""A daemon alone on its spool lets go of the id bytes a burst kept.

Alone, handoffd takes the lock bytes of every handoff_id at once with the
first claim of a batch and keeps them over the batches of a burst
(lock.h, lock_try_claim(): one F_OFD_GETLK a batch instead of a lock and
an unlock), and lets them go IDS_KEEP_MS (50 ms) after it took them
(daemon.c; the next batch takes them again).  Were
they kept for good, a second daemon on the spool could claim nothing, and
no sweep of another could look at an item.  The test holds an id's byte
as another daemon would (hdtest.lock_id()): it cannot while the daemon
holds them all, and can once the burst is over; then the daemon, alone
again, claims the next burst.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = 200


def takeable(spool, hid):
    fd = hdtest.try_lock_id(spool, hid)
    if fd is None:
        return False
    os.close(fd)
    return True


def main():
    with hdtest.Env(agents=["alice"], fsync=False) as env:
        d = env.start()
        boots = os.path.join(env.state["alice"], "handoffs")
        probe = hdproto.build("bob", "alice", env.key, ttl=600)["handoff_id"]
        for burst in range(2):
            docs = [hdproto.build("bob", "alice", env.key, ttl=600) for _ in range(N)]
            for doc in docs:
                hdproto.drop(env.spool, doc)
            hdtest.wait_for(lambda: all(os.path.exists(os.path.join(boots, x["handoff_id"] + ".json"))
                                        for x in docs), 60, f"burst {burst + 1}: {N} claimed")
            hdtest.wait_for(lambda: takeable(env.spool, probe), 10,
                            f"burst {burst + 1}: an id's lock byte free once the burst is over")
        check(env.count("rejected") == 0, f"rejected: {env.names('rejected')[:3]}")
        check(d.status()["counters"]["claimed"] == 2 * N, "every handoff claimed")
        check(d.stop() == 0, "exit code")
        print(f"2 bursts of {N}: each claimed, the id bytes free after each")


hdtest.run(main)
