"""Crash harness: a producer submits continuously and a consumer (the real
consumer's read-check-unlink) takes bootstraps, while handoffd is killed
with SIGKILL at random moments (HD_CRASH_CYCLES, default 20; `make stress`
runs 200).  Some kills land during start-up recovery, before READY=1.

After every restart (READY=1, producer and consumer parked) the invariant
holds (tests/py/invariant.py, settled: nothing in flight, no temp files).
At the end everything submitted was consumed and archived.

Figures: cycles, items, lost (must be 0), duplicated deliveries: a consumer
got the same handoff_id twice (must be 0: a bootstrap is published under
its name only after its claimed/<id>.delivered marker is on disk, so after
a crash the daemon always knows whether the agent may have seen it; see
handoffd(8), "Durability and crash windows").  Deliveries finished at
restart are logged and counted (status counters.recovered)."""

import collections
import os
import random
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import harness  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402

CYCLES = int(os.environ.get("HD_CRASH_CYCLES", "20"))
# Seconds of load between two kills: uniform in [0.05, MAX_RUN].
MAX_RUN = float(os.environ.get("HD_CRASH_MAX_RUN", "1.0"))
# Pause of the producer between two drops (seconds).
DELAY = float(os.environ.get("HD_CRASH_DELAY", "0.002"))
SEED = int(os.environ.get("HD_CRASH_SEED", str(int(time.time()))))
FSYNC = os.environ.get("HD_CRASH_FSYNC", "yes") == "yes"
AGENTS = ["alice", "gordon"]
REDELIVERED_RE = re.compile(r"(?:Delivered|Published) (\S+) to (\S+) after a restart")


class Producer(threading.Thread):
    def __init__(self, env, rnd):
        super().__init__(daemon=True)
        self.env, self.rnd = env, rnd
        self.gate = harness.Gate()
        self.submitted = []
        self.error = None

    def run(self):
        try:
            while self.gate.point():
                to = AGENTS[len(self.submitted) % len(AGENTS)]
                doc = hdproto.build("bob", to, self.env.key, ttl=900)
                hdproto.drop(self.env.spool, doc)
                self.submitted.append(doc["handoff_id"])
                time.sleep(DELAY * self.rnd.random() * 2)
        except Exception as e:  # noqa: BLE001
            self.error = e


class Consumer(threading.Thread):
    def __init__(self, env):
        super().__init__(daemon=True)
        self.env = env
        self.gate = harness.Gate()
        self.got = collections.Counter()
        self.error = None

    def run(self):
        try:
            while self.gate.point():
                n = 0
                for a in AGENTS:
                    for name in self.env.bootstraps(a):
                        if not self.gate.point():
                            return
                        if not name.endswith(".json"):
                            continue
                        b = invariant.real_consume(self.env.state[a], name[:-5])
                        if b is not None:
                            self.got[b["handoff_id"]] += 1
                            n += 1
                if n == 0:
                    time.sleep(0.005)
        except Exception as e:  # noqa: BLE001
            self.error = e


def main():
    rnd = random.Random(SEED)
    t0 = time.monotonic()
    print(f"seed {SEED}, cycles {CYCLES}, fsync {'yes' if FSYNC else 'no'}")
    with hdtest.Env(agents=AGENTS, fsync=FSYNC) as env:
        sentinel = os.path.join(env.dir, "sentinel")
        os.makedirs(os.path.join(sentinel, "sub"))
        with open(os.path.join(sentinel, "sub", "keep.json"), "w") as f:
            f.write('{"handoff_id":"sentinel"}\n')
        snap = invariant.snapshot(sentinel)

        prod, cons = Producer(env, rnd), Consumer(env)
        seq = [0]
        daemons = []

        def start(wait=True):
            name = f"c{seq[0]}"
            seq[0] += 1
            d = env.start(name=name, wait=wait)
            daemons.append(d)
            return d

        cache = {}
        at_ready = {"recovered": 0, "logged": 0}

        def checkpoint(d, label):
            """Producer and consumer parked, daemon just said READY=1."""
            v = invariant.check(env.spool, env.state, prod.submitted, consumed=cons.got,
                                settled=True, sentinels={sentinel: snap},
                                allow_states=("claimed", "archive"), cache=cache)
            check(not v, f"{label}: invariant violated ({len(v)}):\n  " + "\n  ".join(v[:20]))
            # Recovery before READY=1: the counter and the log lines agree.
            c = d.status()["counters"]
            logged = len(REDELIVERED_RE.findall(d.logs()))
            check(c["recovered"] == logged,
                  f"{label}: recovered counter {c['recovered']} != {logged} log lines")
            at_ready["recovered"] += c["recovered"]
            at_ready["logged"] += logged

        d = start()
        prod.start()
        cons.start()
        early_kills = 0
        for cycle in range(CYCLES):
            time.sleep(rnd.uniform(0.05, MAX_RUN))
            d.send(signal.SIGKILL)
            d.proc.wait()
            d.stop()
            # Sometimes kill again during recovery, before READY=1.
            if rnd.random() < 0.25:
                e = start(wait=False)
                time.sleep(rnd.uniform(0.0, 0.03))
                e.send(signal.SIGKILL)
                e.proc.wait()
                e.stop()
                early_kills += 1
            # Let producer and consumer work on the dead daemon's spool.
            time.sleep(rnd.uniform(0.0, 0.2))
            prod.gate.pause()
            cons.gate.pause()
            d = start()
            checkpoint(d, f"cycle {cycle + 1}")
            prod.gate.resume()
            cons.gate.resume()
            check(prod.error is None and cons.error is None,
                  f"worker failed: {prod.error or cons.error}")
        t_cycles = time.monotonic() - t0

        # Drain: no more kills, no more submissions.
        prod.gate.stop()
        prod.join()
        n = len(prod.submitted)

        def drained():
            return all(cons.got[i] for i in prod.submitted) and \
                env.count("claimed") == 0 and env.count("handoff") == 0
        hdtest.wait_for(drained, timeout=60, what=f"all {n} consumed and archived")
        cons.gate.pause()
        v = invariant.check(env.spool, env.state, prod.submitted, consumed=cons.got,
                            settled=True, sentinels={sentinel: snap}, allow_states=("archive",),
                            cache=cache)
        check(not v, "after drain: invariant violated:\n  " + "\n  ".join(v[:20]))
        st = d.status()
        check(d.stop() == 0, "SIGTERM: exit 0")
        # A clean restart finds nothing to do and leaves nothing behind.
        d = start()
        st2 = d.status()
        v = invariant.check(env.spool, env.state, prod.submitted, consumed=cons.got,
                            settled=True, sentinels={sentinel: snap}, allow_states=("archive",),
                            cache=cache)
        check(not v, "after clean restart: invariant violated:\n  " + "\n  ".join(v[:20]))
        check(st2["counters"]["recovered"] == 0 and st2["counters"]["claimed"] == 0,
              f"clean restart did work: {st2['counters']}")
        check(d.stop() == 0, "SIGTERM: exit 0")
        cons.gate.stop()
        cons.join()

        # Figures and the at-least-once accounting.
        redelivered_ids = collections.Counter()
        for dd in daemons:
            for m in REDELIVERED_RE.finditer(dd.logs()):
                redelivered_ids[m.group(1)] += 1
        lost = [i for i in prod.submitted if cons.got[i] == 0]
        dups = {i: c for i, c in cons.got.items() if c > 1}
        sub = set(prod.submitted)
        extra = [i for i in cons.got if i not in sub]
        outcomes = collections.Counter()
        for name in env.items("archive"):
            o = invariant._load(env.path("archive", name + ".outcome")) or {}
            outcomes[o.get("outcome")] += 1
        SUMMARY.append(f"cycles {CYCLES} (+{early_kills} kills before READY=1), items {n}, "
                       f"lost {len(lost)}, duplicated deliveries {sum(c - 1 for c in dups.values())}")
        print(f"cycles {CYCLES} (+{early_kills} kills before READY=1), items {n}, "
              f"lost {len(lost)}, duplicated deliveries {sum(c - 1 for c in dups.values())} "
              f"({len(dups)} ids), deliveries finished at restart {sum(redelivered_ids.values())} "
              f"(at READY=1: counter {at_ready['recovered']}, log {at_ready['logged']}), "
              f"archive {dict(outcomes)}, rejected {env.count('rejected')}, "
              f"{t_cycles:.1f}s of cycles")
        if dups:
            print("duplicated ids: " + ", ".join(f"{i} x{c}" for i, c in sorted(dups.items())[:10]))
        check(not lost, f"lost {len(lost)}: {lost[:10]}")
        check(not extra, f"consumed ids never submitted: {extra[:10]}")
        check(not dups, f"duplicated deliveries: {dict(list(dups.items())[:10])}")
        check(env.count("rejected") == 0, f"rejected: {env.names('rejected')[:10]}")
        check(outcomes == {"consumed": n}, f"archive outcomes {dict(outcomes)}, want consumed {n}")
        check(st["counters"]["errors"] == 0, f"errors: {st['counters']} {st.get('last_error')}")


# ---- targeted crash windows ------------------------------------------------
# strace --inject=SYSCALL:signal=SIGKILL, limited with -P to one directory,
# kills the daemon exactly at one step of the state machine; then restart.

def kill_at(env, d, syscall, path):
    """Arm a SIGKILL at the next `syscall` on `path` (a directory)."""
    s = harness.Strace(d.proc.pid, syscall, "signal=SIGKILL", [path])
    s.__enter__()
    return s


def window(label, syscall, path_of, *, consume=False, expire=False, restart_delay=0.0,
           reject=False, consume_first=False, ttl=600):
    """One targeted crash.  Returns (label, figures, [failures])."""
    extra = "[spool]\nresume_window = 1\n" if expire else None
    with hdtest.Env(agents=["alice"], extra=extra) as env:
        d = env.start(name="w0")
        s = kill_at(env, d, syscall, path_of(env))
        key = b"wrong key" if reject else env.key
        doc = hdproto.build("bob", "alice", key, ttl=ttl)
        name = hdproto.drop(env.spool, doc)
        hid = doc["handoff_id"]
        got = collections.Counter()
        if consume_first:
            # Consumed while the daemon runs: it archives, and dies there.
            hdtest.wait_for(lambda: env.bootstraps("alice"), timeout=5, what="bootstrap")
            if invariant.real_consume(env.state["alice"], hid):
                got[hid] += 1
        try:
            d.proc.wait(10 * hdtest.SLOW + (3 if expire else 0))
        except Exception:  # noqa: BLE001
            s.detach()
            d.stop()
            return label, "the armed syscall never came", [f"{label}: not reached"]
        s.detach()
        d.stop()
        before = invariant.summary(env.spool, env.state)
        if consume:
            b = invariant.real_consume(env.state["alice"], hid)
            if b:
                got[hid] += 1
        time.sleep(restart_delay)
        d2 = env.start(name="w1")
        time.sleep(0.3)
        if not expire:
            b = invariant.real_consume(env.state["alice"], hid)
            if b:
                got[hid] += 1
            hdtest.wait_for(lambda: reject or env.count("archive") == 1, timeout=5,
                            what=f"{label}: archived")
        else:
            hdtest.wait_for(lambda: env.count("archive") == 1, timeout=5,
                            what=f"{label}: expired and archived")
        c = d2.status()["counters"]
        logged = len(REDELIVERED_RE.findall(d2.logs()))
        v = invariant.check(env.spool, env.state, [hid], consumed=got, settled=True,
                            allow_states=("rejected",) if reject else ("archive",))
        oc = None
        for n in env.items("archive"):
            oc = (invariant._load(env.path("archive", n + ".outcome")) or {}).get("outcome")
        d2.stop()
        fig = (f"state at the kill {before}, consumer got it {got[hid]}x, "
               f"recovered {c['recovered']} (logged {logged}), outcome {oc}, "
               f"rejected/ {env.names('rejected') if reject else '-'}")
        fails = [f"{label}: {x}" for x in v]
        if got[hid] > 1:
            fails.append(f"{label}: delivered {got[hid]}x")
        if expire and oc != "expired":
            fails.append(f"{label}: killed while expiring, archived as {oc!r}, not 'expired'")
        if not expire and not reject and got[hid] == 0:
            fails.append(f"{label}: never consumed")
        return label, fig, fails


def targeted():
    claimed = lambda e: e.path("claimed")  # noqa: E731
    boots = lambda e: os.path.join(e.state["alice"], "handoffs")  # noqa: E731
    archive = lambda e: e.path("archive")  # noqa: E731
    rejected = lambda e: e.path("rejected")  # noqa: E731
    handoff = lambda e: e.path("handoff")  # noqa: E731
    # One run per window of handoffd(8)'s "Crash windows" table.
    runs = [
        ("verified, killed before the bootstrap (not claimed)",
         dict(syscall="openat", path_of=boots)),
        ("bootstrap written hidden, killed before the record (the claim)",
         dict(syscall="linkat", path_of=claimed)),
        ("bootstrap written hidden, killed before the record; a consumer tries while down",
         dict(syscall="linkat", path_of=claimed, consume=True)),
        # The producer's file leaves handoff/ for spent/ (a rename; an
        # unlink where that fails), freed later when intake is quiet.
        ("record made, killed before the producer's file leaves handoff/",
         dict(syscall="renameat2,unlinkat", path_of=handoff)),
        # The power-cut test found it: the producer's file, left beside
        # its record, had expired by the restart and was rejected as
        # expired, so its id was in claimed/ and rejected/ at once.
        ("record made, killed before the producer's file leaves handoff/; expired by the restart",
         dict(syscall="renameat2,unlinkat", path_of=handoff, expire=True, ttl=2, restart_delay=2.5)),
        ("record made, killed before the publish; a consumer tries while down",
         dict(syscall="renameat", path_of=boots, consume=True)),
        ("consumed, killed after the outcome sidecar, before the move to archive/",
         dict(syscall="renameat2", path_of=archive, consume_first=True, restart_delay=1.1)),
        # The move out of handoff/ is a link (fsync = yes: store_take()),
        # or a rename where no link can be made.
        ("rejected, killed after the reason sidecar, before the move to rejected/",
         dict(syscall="linkat,renameat2", path_of=rejected, reject=True)),
        ("expiring, killed after taking the bootstrap, before archiving",
         dict(syscall="openat", path_of=archive, expire=True)),
        ("archived as expired, killed before its .expire. name goes",
         dict(syscall="unlinkat", path_of=boots, expire=True)),
    ]
    fails = []
    for label, kw in runs:
        try:
            label, fig, f = window(label, **kw)
        except harness.Strace.Unavailable as e:
            hdtest.skip_part("strace", f"{label}: {e}")
            continue
        print(f"- {label}: {fig}")
        for x in f:
            print(f"    FAIL: {x}")
        fails += f
    return fails


SUMMARY = []


def all_tests():
    main()
    print("targeted crash windows (strace --inject=...:signal=SIGKILL):")
    fails = targeted()
    check(not fails, f"{len(fails)} targeted crash window(s) failed:\n  " + "\n  ".join(fails))
    print(f"{SUMMARY[0]}; targeted windows ok")


hdtest.run(all_tests)
