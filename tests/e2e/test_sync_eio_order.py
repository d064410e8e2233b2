"""A failed fsync of a move's destination holds its source's sync until a
retry succeeds (issue 43, item 9).

flush_rounds() syncs a move's destination before its source (archive/
before claimed/, claimed/ before handoff/).  It used to clear a
directory's dirty mark before its fsync and run the next round after a
failure: with EIO injected on fsync(archive/), fsync(claimed/) = 0
followed, so the archive's removal from claimed/ was made durable before
its arrival in archive/, and archive/ was never synced again.

An LD_PRELOAD shim (tests/py/fsyncshim.py) fails the first HD_SHIM_FAIL_N fsync()s of
the spool's archive/ with EIO once the test arms it (a file), and logs
every fsync() of the test's tree with its result and a monotonic time.
alice consumes her handoff (the item is archived: claimed/ -> archive/),
and the shim's log must show, after the first failed fsync(archive/): no
fsync(claimed/) before a successful fsync(archive/); archive/ tried again
with a back-off (1 s, then 2 s); then claimed/ synced.  The daemon says
the failure in one line for the three failed tries, and the recovery in
one.  A handoff dropped while archive/ fails is claimed once it recovers
(its record's sync waits with claimed/'s)."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import fsyncshim  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

FAILS = 3

def shim_log(path):
    """[(t, path, rc)] of the fsync()s the shim logged."""
    return [x[:3] for x in fsyncshim.read_log(path) if x[3] == "fsync"]


def main():
    with hdtest.Env(agents=["alice"]) as env:
        so = fsyncshim.build(env)
        log = os.path.join(env.dir, "fsync.log")
        arm = os.path.join(env.dir, "arm")
        archive = os.path.join(env.spool, "archive")
        claimed = os.path.join(env.spool, "claimed")
        e = fsyncshim.env_vars(so, env.dir, log, fail_suffix="/spool/archive", arm=arm,
                               fail_n=FAILS)
        conf = env.write_config()
        d = hdtest.Daemon(env, conf, "d0", env_vars=e)
        env.daemons.append(d)
        d.wait_message("READY=1")

        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = doc["handoff_id"]
        hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: env.item(hid)["state"] == "claimed" and env.bootstraps("alice"),
                        20 * hdtest.SLOW, "the handoff claimed and delivered")
        open(arm, "w").close()
        check(hdtest.real_consumer(env.state["alice"], hid) is not None, "alice consumes it")

        def failed_tries():
            return [x for x in shim_log(log) if x[1] == archive and x[2] < 0]

        hdtest.wait_for(lambda: len(failed_tries()) >= 1, 20 * hdtest.SLOW,
                        "the first fsync(archive/) failing")
        # Dropped while archive/ fails: its record in claimed/ waits too.
        later = hdproto.build("bob", "alice", env.key, ttl=600)
        hdproto.drop(env.spool, later)

        def recovered():
            ents = shim_log(log)
            i = next(k for k, x in enumerate(ents) if x[1] == archive and x[2] < 0)
            ok = [k for k, x in enumerate(ents) if k > i and x[1] == archive and x[2] == 0]
            return ok and any(x[1] == claimed and x[2] == 0 for x in ents[ok[0]:])

        def order():
            ents = shim_log(log)
            first = next(k for k, x in enumerate(ents) if x[1] == archive and x[2] < 0)
            t0 = ents[first][0]
            return [(f"{x[0] - t0:+.2f}s", os.path.basename(x[1]), x[2])
                    for x in ents[first:] if x[1] in (archive, claimed)][:8]

        try:
            hdtest.wait_for(recovered, 30 * hdtest.SLOW, "archive/ synced again, then claimed/")
        finally:
            print(f"fsync order from the first failure: {order()}")
        ents = shim_log(log)
        first = next(k for k, x in enumerate(ents) if x[1] == archive and x[2] < 0)
        ok = next(k for k, x in enumerate(ents) if k > first and x[1] == archive and x[2] == 0)
        between = [x for x in ents[first:ok] if x[1] == claimed]
        check(not between, f"fsync(claimed/) between the failed fsync(archive/) and its retry: "
              f"{between}")
        fails = failed_tries()
        check(len(fails) == FAILS, f"{len(fails)} failed tries of archive/, want {FAILS}")
        gaps = [round(b[0] - a[0], 1) for a, b in zip(fails, fails[1:] + [ents[ok]])]
        print(f"archive/ tried again after {gaps} s")
        check(len(gaps) == FAILS and all(g >= 0.9 * (2 ** k) for k, g in enumerate(gaps)),
              f"tries of archive/ backed off 1 s, 2 s, 4 s: {gaps}")
        hdtest.wait_for(lambda: env.item(hid)["state"] == "archive", 10 * hdtest.SLOW,
                        "the consumed item in archive/")
        # Its rename into claimed/ came before the failure; its delivery
        # (the bootstrap) waits for the recovery.
        hdtest.wait_for(lambda: env.item(later["handoff_id"])["state"] == "claimed" and
                        len(env.bootstraps("alice")) >= 1 and
                        f"Claimed {later['handoff_id']}" in d.logs(),
                        30 * hdtest.SLOW, "the handoff dropped meanwhile claimed and delivered")
        # The shim logs the fsync before the daemon, back from it, says
        # the recovery: wait for the line, then count.
        recovery = f"fsync of archive/ succeeded again after {FAILS} failed tries"
        hdtest.wait_for(lambda: recovery in d.logs(), 10 * hdtest.SLOW, "the recovery said")
        logs = d.logs()
        said = logs.count("Cannot fsync archive/")
        check(said == 1, f"the failure said {said} times, want once:\n{logs[-3000:]}")
        check(logs.count(recovery) == 1, f"the recovery said once:\n{logs[-3000:]}")
        check(d.stop() == 0, "the daemon stops with exit 0")


hdtest.run(main)
