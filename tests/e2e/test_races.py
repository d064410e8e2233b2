"""Races: several daemons (3) and several consumers (3) on one spool under
load (HD_RACES_N items, default 1,000): exactly one claim and one consume
per item.

Consumers: threads running the real consumer's logic (read, check,
unlink; the unlink decides who got it), plus `handoffctl consume` in a
loop once that command exists (`handoffctl consume --help` exits 0); with
it, one of the three consumers is handoffctl.  The real consumer logic
counts a bootstrap as its own only when its unlink succeeded (two readers
can both read before one unlinks: the known weakness of read-then-unlink).
Figures: claims per daemon, consumes per consumer."""

import collections
import json
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RACES_N", "1000"))
DAEMONS = int(os.environ.get("HD_RACES_DAEMONS", "3"))
CONSUMERS = int(os.environ.get("HD_RACES_CONSUMERS", "3"))
AGENTS = ["alice", "gordon"]


def have_ctl_consume():
    try:
        p = subprocess.run([hdtest.HANDOFFCTL, "consume", "--help"], capture_output=True,
                           timeout=10)
        return p.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class Consumer(threading.Thread):
    def __init__(self, env, name, conf=None):
        super().__init__(daemon=True)
        self.env, self.name, self.conf = env, name, conf
        self.got = collections.Counter()
        self.errors = []
        self.done = threading.Event()

    def take_real(self, agent, bname):
        b = invariant.real_consume(self.env.state[agent], bname[:-5])
        return b["handoff_id"] if b else None

    def take_ctl(self, agent):
        p = subprocess.run([hdtest.HANDOFFCTL, "consume", "-c", self.conf, "--agent", agent],
                           capture_output=True, text=True, timeout=30)
        if p.returncode == 0:
            return json.loads(p.stdout)["handoff_id"]
        if p.returncode not in (1,):
            self.errors.append(f"handoffctl consume exit {p.returncode}: {p.stderr.strip()}")
        return None

    def run(self):
        rnd = random.Random(self.name)
        while not self.done.is_set():
            n = 0
            for agent in rnd.sample(AGENTS, len(AGENTS)):
                if self.conf:
                    while True:
                        hid = self.take_ctl(agent)
                        if not hid:
                            break
                        self.got[hid] += 1
                        n += 1
                    continue
                names = self.env.bootstraps(agent)
                rnd.shuffle(names)
                for bn in names:
                    if bn.endswith(".json"):
                        hid = self.take_real(agent, bn)
                        if hid:
                            self.got[hid] += 1
                            n += 1
            if n == 0:
                time.sleep(0.005)


def main():
    use_ctl = have_ctl_consume()
    with hdtest.Env(agents=AGENTS, fsync=False) as env:
        ds = [env.start(name=f"d{i}") for i in range(DAEMONS)]
        conf0 = os.path.join(env.dir, "d0.conf")
        cons = []
        for i in range(CONSUMERS):
            cons.append(Consumer(env, f"c{i}", conf=conf0 if (use_ctl and i == 0) else None))
        for c in cons:
            c.start()
        t0 = time.monotonic()
        ids = []
        for i in range(N):
            doc = hdproto.build("bob", AGENTS[i % 2], env.key, ttl=600)
            hdproto.drop(env.spool, doc)
            ids.append(doc["handoff_id"])
        t_drop = time.monotonic() - t0

        def all_consumed():
            return all(any(c.got[i] for c in cons) for i in ids) and \
                env.count("claimed") == 0 and env.count("archive") == N
        hdtest.wait_for(all_consumed, timeout=120, what=f"{N} consumed and archived")
        t_all = time.monotonic() - t0
        for c in cons:
            c.done.set()
        for c in cons:
            c.join()
        got = collections.Counter()
        for c in cons:
            got.update(c.got)
        per_d = [d.status()["counters"] for d in ds]
        v = invariant.check(env.spool, env.state, ids, consumed=got, settled=True,
                            allow_states=("archive",))
        archive_ids = collections.Counter()
        for n in env.items("archive"):
            o = json.load(open(env.path("archive", n + ".outcome")))
            archive_ids[(o["handoff_id"], o["outcome"])] += 1
        for d in ds:
            check(d.stop() == 0, f"{d.name}: exit 0")

        claims = [c["claimed"] for c in per_d]
        delivered = sum(c["delivered"] for c in per_d)
        redelivered = sum(c["recovered"] + c["retried"] for c in per_d)
        consumed_d = sum(c["consumed"] for c in per_d)
        dup = {i: n for i, n in got.items() if n > 1}
        print(f"{N} items, {DAEMONS} daemons, {CONSUMERS} consumers "
              f"({'1 handoffctl consume + ' + str(CONSUMERS - 1) if use_ctl else str(CONSUMERS)} "
              f"real-consumer threads{'' if use_ctl else '; handoffctl consume not available yet'}): "
              f"claims per daemon {claims}, consumes per consumer {[sum(c.got.values()) for c in cons]}, "
              f"archived-as-consumed per daemon {[c['consumed'] for c in per_d]}; "
              f"dropped in {t_drop:.1f}s, all consumed after {t_all:.1f}s")
        f = []
        if v:
            f.append("invariant:\n    " + "\n    ".join(v[:20]))
        if sum(claims) != N:
            f.append(f"sum of claims {sum(claims)} != {N}")
        if delivered != N or redelivered != 0:
            f.append(f"deliveries {delivered}, redeliveries {redelivered} (no crash here: want {N}, 0)")
        if dup:
            f.append(f"consumed more than once: {list(dup.items())[:10]}")
        if set(got) != set(ids):
            f.append("consumed ids != submitted ids")
        if consumed_d != N:
            f.append(f"daemons archived {consumed_d} as consumed, want {N}")
        if not (all(archive_ids[(i, 'consumed')] == 1 for i in ids) and sum(archive_ids.values()) == N):
            f.append("not exactly one archive entry with outcome consumed per id")
        if env.count("rejected"):
            f.append(f"rejected: {env.names('rejected')[:5]}")
        errs = [e for c in cons for e in c.errors]
        if errs:
            f.append(f"consumer errors: {errs[:5]}")
        check(not f, f"{len(f)} race expectation(s) failed:\n  " + "\n  ".join(f))

hdtest.run(main)
