"""Four handoffd processes on one spool, 5,000 files dropped while they run:
every file claimed exactly once, exactly one bootstrap each, and the
daemons' own counters add up to exactly 5,000 claims and deliveries."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_MULTI_N", "5000"))
DAEMONS = 4


def main():
    agents = ["alice", "gordon"]
    with hdtest.Env(agents=agents, fsync=False) as env:
        ds = [env.start(name=f"d{i}") for i in range(DAEMONS)]
        t0 = time.monotonic()
        ids = []
        for i in range(N):
            doc = hdproto.build("bob", agents[i % 2], env.key, ttl=600)
            hdproto.drop(env.spool, doc)
            ids.append(doc["handoff_id"])
        t_drop = time.monotonic() - t0

        def all_claimed():
            return env.count("claimed") == N and \
                sum(len(env.bootstraps(a)) for a in agents) == N
        hdtest.wait_for(all_claimed, timeout=120, what=f"{N} claimed with bootstraps")
        t_all = time.monotonic() - t0
        claimed = set(n[:-5] for n in env.items("claimed"))
        check(claimed == set(ids), "claimed/ holds exactly the submitted ids")
        boots = [b[:-5] for a in agents for b in env.bootstraps(a)]
        check(len(boots) == len(set(boots)) == N and set(boots) == set(ids),
              "one bootstrap per id")
        check(env.count("rejected") == 0, f"rejected: {env.names('rejected')[:5]}")
        # The producers' names leave handoff/ after their batch's sync.
        hdtest.wait_for(lambda: env.names("handoff") == [], 30,
                        lambda: f"handoff/ to drain: left {env.names('handoff')[:5]}")
        per = [d.status()["counters"] for d in ds]
        tot_claimed = sum(c["claimed"] for c in per)
        tot_delivered = sum(c["delivered"] for c in per)
        tot_redelivered = sum(c["recovered"] + c["retried"] for c in per)
        check(tot_claimed == N, f"sum of claims {tot_claimed} != {N}: {[c['claimed'] for c in per]}")
        check(tot_delivered == N and tot_redelivered == 0,
              f"deliveries {tot_delivered}, redeliveries {tot_redelivered}")
        for d in ds:
            check(d.stop() == 0, f"{d.name} exit code")
        print(f"{N} files, {DAEMONS} daemons: claims per daemon {[c['claimed'] for c in per]}, "
              f"dropped in {t_drop:.1f}s, all delivered after {t_all:.1f}s")


hdtest.run(main)
