"""The inbox quota holds for the spool, however many daemons serve it
(issue 33.6).  Four handoffd on one spool with [spool]
max_waiting_per_sender = HD_QUOTA_PER (default 100) and max_waiting =
HD_QUOTA_TOTAL (default 150); bob hands alice HD_QUOTA_N handoffs
(default 2,000) and carol HD_QUOTA_PER, dropped while the daemons run.
Each daemon counted in its own memory what it had claimed: 4 x 100 of
bob's were claimed (and all of carol's: 500 in all).  Now exactly 100 of
bob's wait and 150 in all (carol's the rest), every other one is
rejected as inbox_full, and the count the daemons keep in the spool
(quota/alice/ids/) names exactly the items in claimed/.

Then: alice consumes 10 of bob's (whichever daemon archives them, all
count them gone) and bob's next 20 give 10 claimed, 10 inbox_full.
Alice consumes 50 more, bob sends 100 more, and all four daemons are
killed (SIGKILL) as the first of those is claimed: after a restart,
every one of them decided, exactly 100 of bob's wait, and the count
again names exactly the claimed items (what the kill left counted
without a claim removed)."""

import collections
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_QUOTA_N", "2000"))
PER = int(os.environ.get("HD_QUOTA_PER", "100"))
TOTAL = int(os.environ.get("HD_QUOTA_TOTAL", "150"))
DAEMONS = int(os.environ.get("HD_QUOTA_DAEMONS", "4"))


def waiting_from(env):
    """The senders of the bootstraps waiting for alice, counted."""
    n = collections.Counter()
    d = os.path.join(env.state["alice"], "handoffs")
    for b in env.bootstraps("alice"):
        try:
            with open(os.path.join(d, b)) as f:
                doc = json.load(f)
        except FileNotFoundError:
            continue
        # ids are "TS-FROM-TO-RAND" (hdproto.build)
        n[doc["handoff_id"].split("-")[1]] += 1
    return n


def main():
    with hdtest.Env(agents=["alice"]) as env:
        text = env.config_text("d0") + \
            f"\n[spool]\nmax_waiting_per_sender = {PER}\nmax_waiting = {TOTAL}\n"
        confs = [env.write_config(f"d{i}", text=text.replace("d0.sock", f"d{i}.sock"))
                 for i in range(DAEMONS)]
        ds = [env.start(name=f"d{i}", conf=confs[i]) for i in range(DAEMONS)]
        dropped = [0]

        def drop(doc):
            hdproto.drop(env.spool, doc)
            dropped[0] += 1

        def settle(what):
            """Every handoff dropped so far decided: claimed, archived
            (consumed) or rejected; none left in handoff/; every claimed
            one's bootstrap published."""
            def decided():
                return env.count("claimed") + env.count("archive") + env.count("rejected")
            try:
                # as long as the daemons make progress: a loaded machine
                # (or a sanitized build) takes minutes for 2,100
                hdtest.wait_progress(decided, dropped[0], what=what)
                hdtest.wait_for(lambda: not env.names("handoff"), what=f"{what}: handoff/ empty")
                # A claim's record is in claimed/ (and its producer's name
                # gone from handoff/) before its bootstrap is renamed into
                # sight (delivery.c, steps 2 and 3): waiting_from() counts
                # the published ones.
                hdtest.wait_for(lambda: len(env.bootstraps("alice")) == env.count("claimed"),
                                what=f"{what}: every claimed one's bootstrap published")
            except hdtest.Fail as e:
                raise hdtest.Fail(f"{e}: {env.count('claimed')} claimed, {env.count('rejected')} "
                                  f"rejected, {len(env.names('handoff'))} in handoff/, "
                                  f"waiting {dict(waiting_from(env))}")

        def counted_is_claimed(when):
            """The spool's count names what claimed/ holds (no count
            where the daemon keeps none: the check then says so)."""
            ids = env.path("quota", "alice/ids")
            counted = set(os.listdir(ids)) if os.path.isdir(ids) else None
            claimed = set(n[:-5] for n in env.items("claimed"))
            check(counted == claimed,
                  f"{when}: quota/alice/ids/ is not claimed/: "
                  + ("no such directory" if counted is None else
                     f"{len(counted - claimed)} counted not claimed, "
                     f"{len(claimed - counted)} claimed not counted"))

        def take_bobs(n):
            archived = env.count("archive") + n
            taken = 0
            for b in env.bootstraps("alice"):
                if taken == n:
                    break
                if "-bob-" in b:
                    env.ctl("consume", "-c", confs[0], "--agent", "alice", b[:-5], check_rc=0)
                    taken += 1
            hdtest.wait_for(lambda: env.count("archive") >= archived, timeout=30,
                            what=f"the {n} consumed archived")
            # The count is let go just after the move into archive/: what
            # is sent next is judged against the count, so wait for it.
            ids = env.path("quota", "alice/ids")
            hdtest.wait_for(lambda: set(os.listdir(ids)) <= set(n[:-5] for n in env.items("claimed")),
                            timeout=30, what=f"the {n} consumed no longer counted")

        docs = [hdproto.build("bob", "alice", env.key, ttl=600) for _ in range(N)]
        docs += [hdproto.build("carol", "alice", env.key, ttl=600) for _ in range(PER)]
        # bob's and carol's interleaved at the end: both ask for the last places
        docs[N - PER:] = [d for pair in zip(docs[N - PER:N], docs[N:]) for d in pair]
        t0 = time.monotonic()
        for doc in docs:
            drop(doc)
        settle(f"{N + PER} handoffs decided")
        t = time.monotonic() - t0
        w = waiting_from(env)
        per_daemon = [d.status()["counters"]["claimed"] for d in ds]
        print(f"- {DAEMONS} daemons, bob {N}, carol {PER}: waiting {dict(w)}, "
              f"claims per daemon {per_daemon}, {env.count('rejected')} rejected, in {t:.1f}s")
        check(w["bob"] == PER, f"{w['bob']} of bob's wait, wanted {PER} (max_waiting_per_sender)")
        check(sum(w.values()) == TOTAL, f"{sum(w.values())} wait, wanted {TOTAL} (max_waiting)")
        check(env.count("claimed") == TOTAL, f"claimed/ holds {env.count('claimed')}")
        reasons = collections.Counter(env.reason_of(n).get("reason") for n in env.items("rejected"))
        check(reasons == {"inbox_full": N + PER - TOTAL}, f"reasons: {dict(reasons)}")
        counted_is_claimed("after the flood")

        # Whichever daemon archives them, every daemon counts them gone.
        take_bobs(10)
        rejected = env.count("rejected")
        for _ in range(20):
            drop(hdproto.build("bob", "alice", env.key, ttl=600))
        settle("bob's next 20 decided")
        w = waiting_from(env)
        check(w["bob"] == PER and sum(w.values()) == TOTAL and
              env.count("rejected") == rejected + 10,
              f"after 10 consumed and 20 more: {dict(w)} wait, "
              f"{env.count('rejected') - rejected} of the 20 rejected; wanted bob {PER}, "
              f"{TOTAL} in all, 10 rejected")
        counted_is_claimed("after 10 consumed and 20 more")
        print("- 10 of bob's consumed, 20 more sent: 10 claimed, 10 inbox_full")

        # Killed in the middle of claims: what a kill left counted goes.
        take_bobs(50)
        claimed = env.count("claimed")
        for _ in range(100):
            drop(hdproto.build("bob", "alice", env.key, ttl=600))
        hdtest.wait_for(lambda: env.count("claimed") > claimed or not env.names("handoff"),
                        what="a claim of bob's next 100")
        for d in ds:
            d.stop(signal.SIGKILL)
        left = len(env.names("handoff"))
        ds = [env.start(name=f"d{i}", conf=confs[i]) for i in range(DAEMONS)]
        settle("bob's next 100 decided after a kill and a restart")
        w = waiting_from(env)
        check(w["bob"] == PER and sum(w.values()) == TOTAL,
              f"after the kill: {dict(w)} wait, wanted bob {PER}, {TOTAL} in all")
        counted_is_claimed("after the kill and the restart")
        print(f"- 50 consumed, 100 more sent, all {DAEMONS} killed at the first claim "
              f"({left} still in handoff/): bob {w['bob']} waiting after the restart")
        for d in ds:
            check(d.stop() == 0, f"{d.name} exit 0")


if __name__ == "__main__":
    hdtest.run(main)
