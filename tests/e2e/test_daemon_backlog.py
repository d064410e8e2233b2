"""Memory does not grow with the number of waiting files (issue 12): a
backlog in handoff/ at start is read a chunk at a time (not listed whole),
and a burst while running is read from inotify only as fast as it is
decided.  The same run is made with a small and a large count; the large
one's peak RSS (VmHWM) may not be more than a little above the small one's,
and every handoff is delivered exactly once in both."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402

SMALL = int(os.environ.get("HD_BACKLOG_SMALL", "1000"))
LARGE = int(os.environ.get("HD_BACKLOG_LARGE", "12000"))
# The old daemon held every name of a listing or of the inotify queue:
# about 200 bytes each, 2.2 MB more for LARGE than for SMALL.
MAX_GROWTH_KB = 768


def run(n):
    with hdtest.Env(agents=["alice"], fsync=False) as env:
        ids = []
        for _ in range(n):
            doc = hdproto.build("bob", "alice", env.key, ttl=900)
            hdproto.drop(env.spool, doc)
            ids.append(doc["handoff_id"])
        d = env.start()         # READY=1 once the start scan has decided them all
        check(env.count("claimed") == n, f"backlog {n}: {env.count('claimed')} claimed at READY")
        # The burst: built first, then published as fast as renames go.
        staged = []
        os.makedirs(env.path("tmp"), exist_ok=True)
        for _ in range(n):
            doc = hdproto.build("bob", "alice", env.key, ttl=900)
            name = doc["handoff_id"] + ".json"
            tmp = env.path("tmp", "." + name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(hdproto.dumps(doc))
            staged.append((tmp, name))
            ids.append(doc["handoff_id"])
        for tmp, name in staged:
            os.rename(tmp, env.path("handoff", name))
        hdtest.wait_progress(lambda: len(env.bootstraps("alice")), 2 * n,
                             what=f"{2 * n} delivered")
        hwm = hdtest.proc_status(d.proc.pid, "VmHWM")
        v = invariant.check(env.spool, env.state, ids)
        check(not v, f"n={n}: {v[:5]}")
        check(sorted(x[:-5] for x in env.items("claimed")) == sorted(ids),
              f"n={n}: every id claimed once")
        st = d.status()["counters"]
        check(st["delivered"] == 2 * n, f"n={n}: delivered {st['delivered']}")
        check(d.stop() == 0, "exit 0")
        return hwm


def main():
    small = run(SMALL)
    large = run(LARGE)
    print(f"peak RSS: {small} kB after a backlog and a burst of {SMALL} each, "
          f"{large} kB after {LARGE} each (growth {large - small} kB, bound {MAX_GROWTH_KB})")
    # AddressSanitizer keeps freed memory in quarantine: no bound there.
    check(large - small <= MAX_GROWTH_KB or hdtest.SANITIZE,
          f"peak RSS grew by {large - small} kB from {SMALL} to {LARGE} waiting files")


hdtest.run(main)
