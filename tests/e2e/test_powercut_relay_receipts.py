#!/usr/bin/env python3
"""Power cuts aimed at the receipts' journal (SPOOL/receipts/journal),
receipts on, fsync = yes on both hosts.

Host a (agent bob; alice and gordon [remote] on b) and host b each run
handoffd on a powercutfs of its own (--concurrent), nats-server beside
them on a plain disk (relaykit.Hosts).  Load all the time: `handoffctl
submit` on a, a durable consumer of alice's and gordon's bootstraps on b.
HD_PC_RECEIPT_CUTS times (default 8) the power of one host is cut right
after, in turn:
- b: a relayed message renamed into handoff/: its owe record appended
  to the journal, the journal not synced, the message not acked;
- b: the journal synced (an owe, or the out record of an outcome), the
  state it precedes (handoff/'s or claimed/'s sync, the ack) not yet;
- a: the journal synced (sent records, the archive's receipts), what
  follows not;
- a: a receipt's .outcome renamed into archive/, not synced, its
  message not acked;
- b and a at a random moment.
That host's handoffd is SIGKILLed, its disk mounted again, handoffd
started.  At the end the load stops, and
- lost: an acknowledged handoff never consumed on b, or a receipt of
  one (delivered, consumed) never recorded on a;
- twice: a receipt recorded twice in an item's remote_outcomes, a
  handoff consumed twice;
- left: b's journal still owes or queues a receipt, a's journal awaits
  one, a record torn in either journal (the start cuts it back).
Then: a torn last record (half a line, as a cut in an append leaves it)
written into b's journal with b stopped: the start drops it, says so,
and keeps every whole record before it.
The last line: `powercut receipts: N cuts, N handoffs, lost N, twice N, left N`."""

import os
import random
import signal
import sys
import time

SRC = os.environ.get("HD_SRC", ".")
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
sys.path.insert(0, os.path.join(SRC, "tests", "powercut"))
import hdtest  # noqa: E402
import pcfs  # noqa: E402
import powercut  # noqa: E402
import relaykit  # noqa: E402
from powercut import MAX_RUN, SEED  # noqa: E402

CUTS = int(os.environ.get("HD_PC_RECEIPT_CUTS", str(powercut.cuts(8))))
REPORT = powercut.Report("powercut receipts", CUTS)
AGENTS = relaykit.B_AGENTS
AIMS = [
    ("b", "rename", "/spool/handoff/"),         # owe appended, not synced, not acked
    ("b", "fsync", "/receipts/journal"),        # journal synced, what it precedes not
    ("a", "fsync", "/receipts/journal"),
    ("a", "rename", "/spool/archive/"),         # an archive .outcome (or a relayed item) renamed
    ("b", None, None),
    ("a", None, None),
]


def receipts_check(h, acked, consumed):
    """Findings at the end (see the docstring)."""
    v = []
    rel = h.relayed_on_a()
    for hid in sorted(acked):
        if hid not in consumed:
            v.append(f"lost: {hid} acknowledged on a, never consumed on b")
            continue
        seen = rel.get(hid, {}).get("remote_outcomes", [])
        if len(seen) != len(set(seen)):
            v.append(f"twice: {hid}: a receipt recorded twice on a: {seen}")
        for o in ("delivered", "consumed"):
            if o not in seen:
                v.append(f"lost: {hid}: its {o} receipt is not recorded on a: {seen}")
    jb, ja = relaykit.journal(h.b.spool), relaykit.journal(h.a.spool)
    v += [f"left: b's journal still owes {i}" for i in sorted(jb["owed"])]
    v += [f"left: b's journal still queues {i}" for i in sorted(jb["queued"])]
    v += [f"left: a's journal still awaits {i}" for i in sorted(ja["sent"]) if i in consumed]
    for x, e in (("a", h.a), ("b", h.b)):
        torn = relaykit.journal_records(e.spool)[1]
        if torn:
            v.append(f"left: {x}'s journal ends in {torn} bytes of a torn record")
    return v


def explain(finding, daemons):
    """A finding with what the hosts' logs say of its id."""
    hid = finding.split(": ")[1] if ": " in finding else ""
    lines = [f"    {x}{k + 1}: {ln}" for x in ("a", "b") for k, dd in enumerate(daemons[x])
             for ln in dd.logs().splitlines() if hid and hid in ln]
    return "\n".join([finding] + lines[:40])


def torn_tail(h, start_b):
    """b stopped, a whole record and then half of another appended to its
    journal (a cut in the second append): the start drops the half, says
    so, and applies every whole record before it."""
    before, torn0 = relaykit.journal_records(h.b.spool)
    hdtest.check(torn0 == 0, f"b's journal whole before: {torn0} bytes torn")
    kept, cut = "1795700000-bob-alice-0123456789abcdef", "1795700001-bob-alice-0123456789abcdef"
    whole, line = relaykit.journal_line("owe", kept, "a"), relaykit.journal_line("owe", cut, "a")
    with open(os.path.join(h.b.spool, "receipts", "journal"), "ab") as f:
        f.write(whole + line[:len(line) // 2])
    hdtest.check(relaykit.journal_records(h.b.spool)[1] == len(line) // 2, "the torn tail written")
    d = start_b()
    after, torn = relaykit.journal_records(h.b.spool)
    hdtest.check(torn == 0, f"the start cut the torn record back: {torn} bytes left")
    hdtest.check("a power cut in an append" in d.logs(), "the start said so")
    st = relaykit.journal(h.b.spool)
    hdtest.check(kept in st["owed"] and cut not in st["owed"],
                 f"the whole record applied, the torn one not: owed {sorted(st['owed'])}")
    hdtest.check(d.status()["relay"]["receipts"]["owed"] == len(st["owed"]),
                 f"status owed as the journal: {d.status()['relay']['receipts']}, {len(st['owed'])}")
    print(f"torn tail: {len(line) // 2} bytes dropped at the start, the whole record before them "
          f"kept ({len(before) + 1} records before the start's rewrite, {len(after)} after)")
    return d


def main():
    if powercut.relay_skipped(REPORT):
        return
    t0, rnd = time.monotonic(), random.Random(SEED)
    with relaykit.Hosts() as h:
        print(f"seed {SEED}, cuts {CUTS}, receipts on, fsync yes on a and b; model: {pcfs.MODEL}")
        h.enable_receipts()
        disk, mnt, fs, fslog = powercut.relay_mounts(h, AGENTS)
        daemons = {"a": [], "b": []}

        def start(x):
            dd = (h.start_a if x == "a" else h.start_b)(name=f"{x}{len(daemons[x]) + 1}")
            daemons[x].append(dd)
            return dd

        d = {"a": start("a"), "b": start("b")}
        sub = powercut.Submitter(h.a, AGENTS, ttl=600, pause=0.02)
        cons = powercut.Consumer(h.b, AGENTS)
        workers = (sub, cons)
        for w in workers:
            w.start()
        aimed = {}
        try:
            for cut in range(CUTS):
                x, op, text = AIMS[cut % len(AIMS)]
                what = f"{x}: {op} {text}" if op else f"{x}: random"
                if op:
                    fs[x].arm(op, text)
                    deadline = time.monotonic() + 10 * hdtest.SLOW
                    while not fs[x].is_cut() and time.monotonic() < deadline:
                        time.sleep(0.002)
                    if not fs[x].is_cut():
                        what += " (not reached)"
                        fs[x].cut()
                else:
                    time.sleep(rnd.uniform(0.02, MAX_RUN))
                    fs[x].cut()
                aimed[what] = aimed.get(what, 0) + 1
                d[x].send(signal.SIGKILL)
                d[x].proc.wait()
                powercut.pause(workers)
                d[x].stop()
                fs[x].unmount()
                fs[x] = pcfs.Mount(disk[x], mnt[x], log=fslog, concurrent=True)
                if x == "b":
                    cons.settle()
                d[x] = start(x)
                REPORT.note(cons.twice(), cut + 1)
                powercut.resume(workers)
            sub.gate.stop()
            sub.join(60)
            acked = set(sub.acked)

            def settled():
                rel = h.relayed_on_a()
                return (acked <= set(cons.got) and
                        all(len(rel.get(i, {}).get("remote_outcomes", [])) >= 2 for i in acked) and
                        not relaykit.journal(h.b.spool)["queued"])
            try:
                # a receipt fetched by a killed a comes again after the
                # consumer's ack wait
                hdtest.wait_for(settled, 120, "every handoff consumed on b, its receipts on a")
            except hdtest.Fail:
                pass
            cons.gate.stop()
            cons.join(30)
            REPORT.note(receipts_check(h, acked, set(cons.got)) + cons.twice(), "end",
                        explain=lambda f: explain(f, daemons))
            hdtest.check(d["b"].stop() == 0, "b: SIGTERM: exit 0")
            d["b"] = torn_tail(h, lambda: start("b"))
            for x in ("a", "b"):
                hdtest.check(d[x].stop() == 0, f"{x}: SIGTERM: exit 0")
        finally:
            powercut.relay_teardown(daemons, fs)
        print(f"{time.monotonic() - t0:.1f}s; cuts {CUTS}; handoffs {sub.n} submitted, "
              f"{len(sub.acked)} acknowledged, consumed on b {len(cons.got)}; cuts aimed after: {aimed}")
        REPORT.finish(sub.n)


REPORT.run(main)
