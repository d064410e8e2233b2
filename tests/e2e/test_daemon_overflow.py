"""Forced inotify overflow: the daemon is stopped with SIGSTOP, more files
than fs.inotify.max_queued_events are dropped, SIGCONT: every one is
processed, and the overflow and rescan counters rose."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    with open("/proc/sys/fs/inotify/max_queued_events") as f:
        maxq = int(f.read())
    n = maxq + 500
    with hdtest.Env(agents=["alice"], fsync=False) as env:
        d = env.start()
        before = d.status()["counters"]
        d.send(signal.SIGSTOP)
        doc = hdproto.build("bob", "alice", env.key, ttl=900)
        # One signed document, many ids: sign each (cheap) to stay honest.
        ids = []
        for i in range(n):
            doc = hdproto.build("bob", "alice", env.key, ttl=900)
            hdproto.drop(env.spool, doc)
            ids.append(doc["handoff_id"])
        t0 = time.monotonic()
        d.send(signal.SIGCONT)
        hdtest.wait_progress(lambda: min(env.count("claimed"), len(env.bootstraps("alice"))), n,
                             what=f"{n} claimed and delivered")
        drain = time.monotonic() - t0
        after = d.status()["counters"]
        check(after["overflows"] > before["overflows"], f"overflow counter {before['overflows']} -> {after['overflows']}")
        check(after["rescans"] > before["rescans"], "rescan counter rose")
        check(set(x[:-5] for x in env.items("claimed")) == set(ids), "every id claimed")
        check(len(env.bootstraps("alice")) == n, "every bootstrap written")
        check(d.stop() == 0, "exit 0")
        print(f"burst of {n} (max_queued_events {maxq}) while stopped; drained in {drain:.1f}s; "
              f"overflows {after['overflows']}, rescans {after['rescans']}")


hdtest.run(main)
