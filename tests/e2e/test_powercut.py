#!/usr/bin/env python3
"""Power cuts under handoffd with fsync = yes (issue 26).

The spool and the agents' state dirs live on tests/powercut/powercutfs, a
FUSE file system that keeps only what was synced (tests/powercut/pcfs.py
MODEL; test_powercut_harness.py checks the harness).  Load, all the time:
- a producer as gptme-voice writes (temp file, rename, no fsync: nothing
  acknowledged until the daemon logs the claim), every 5th with a wrong key
  (rejected, bad_mac);
- a producer running `handoffctl submit` (acknowledged when it exits 0);
- a consumer for alice that reads a bootstrap, renames it to a private name
  (taken) and syncs the directory, then removes it; a take whose sync the
  cut interrupted counts only if the bootstrap did not come back;
  gordon's bootstraps are never taken: they expire (resume_window = 2) and
  are archived as expired;
- retention prunes archive/ and rejected/ (max_window 4 s + skew 2 s).
Then HD_POWERCUT_CUTS times (default 10; make powercut runs 100, make
stress 200) the power is cut (everything not synced is gone), handoffd is
SIGKILLed, the file system mounted again, handoffd started (some cuts land
during its start-up recovery, before READY=1).  The cuts are aimed in turn
(AIMS, powercutfs "arm") right after each operation of each step of the
storage layer's sync rounds: the take from handoff/, the claim (hidden
bootstrap, record, claimed/ synced), the publish, the reject (link,
.reason sidecar, rejected/ synced, the handoff/ name removed), the archive
(.outcome sidecar, ids/ mark, the move, archive/ then claimed/ synced),
handoff/'s round, the expiry, the reaper, retention, a recovery's
removals; a few after a log line, a few at random moments.  The first
mounts are traced: a step of the daemon that no aim covers fails the test,
and so, in a run of two passes over AIMS or more, does an aim never
reached (a recovery's step only happens when an earlier cut made its
case).  After each restart, with
the workers parked (tests/py/invariant.py, settled):
- lost: an acknowledged handoff (submit returned, or the daemon logged it
  claimed or archived, or the consumer took it) is in none of the states,
  or was rejected for anything but age; a delivered marker without a
  bootstrap nobody took;
- twice: the consumer took a handoff_id twice; two bootstraps for one id;
  one item in two places;
- left: anything half made: temp files, sidecars without their item, a
  bootstrap for an archived item, a claimed item without its bootstrap.
Acknowledged items older than the retention floor (6 s) may be pruned and
are not counted, nor is one that only submit acknowledged, once past its
expires_at: rejected as expired, it guards no id and retention may prune
it at once, and the kill may have lost the log line that says so.  Findings fail the test (make check, make powercut, make
stress); with HD_POWERCUT_ENFORCE=0 they are printed as OPEN.  The last line is
`powercut: N cuts, N handoffs, lost N, twice N, left N`."""

import collections
import os
import random
import re
import signal
import sys
import time

SRC = os.environ.get("HD_SRC", ".")
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
sys.path.insert(0, os.path.join(SRC, "tests", "powercut"))
import hdtest  # noqa: E402
import invariant  # noqa: E402
import pcfs  # noqa: E402
import powercut  # noqa: E402
from powercut import MAX_RUN, SEED  # noqa: E402

CUTS = powercut.cuts(10)
REPORT = powercut.Report("powercut", CUTS)
AGENTS = ["alice", "gordon"]
FLOOR = 6.0          # max_window + max_clock_skew: retention may prune after this
TTL = 3              # the producers' handoffs expire after this
EXTRA = """[spool]
resume_window = 2
max_window = 4
max_clock_skew = 2

[retention]
archive_max_items = 20
rejected_max_items = 5
"""
# The cuts are aimed, in turn, right after each operation of the storage
# layer's steps (src/handoffd/store/; handoffd(8), "Durability and crash
# windows"), as the file system sees it: (what, op, path text[, then]),
# powercutfs "arm" (then: the first such operation after it).  Each pass
# over the list takes the nth matching operation, n = 1, 2, 3, 1 ...  Then
# a few after a log line, and at random moments (None).
AIMS = [
    ("take: handoff/ name to spent/", "rename", "/spool/spent/"),
    ("claim: the hidden bootstrap made", "create", "/handoffs/.pending."),
    ("claim: the hidden bootstrap synced", "fsync", "/handoffs/.pending."),
    ("claim: the record linked into claimed/", "link", "/spool/claimed/"),
    ("round 1: claimed/ synced", "fsyncdir", "/spool/claimed"),
    ("publish-bootstrap: .pending.NAME renamed to NAME", "rename", "/handoffs/1"),
    ("round 0: an agent's handoffs/ synced", "fsyncdir", "/handoffs"),
    ("round 2: handoff/ synced", "fsyncdir", "/spool/handoff"),
    ("reject: linked into rejected/", "link", "/spool/rejected/"),
    ("sidecar: .reason made", "create", ".reason."),
    ("sidecar: .reason synced", "fsync", ".reason."),
    ("sidecar: .reason renamed in", "rename", ".reason"),
    ("round 0: rejected/ synced", "fsyncdir", "/spool/rejected"),
    ("reject: the handoff/ name removed", "unlink", "/spool/handoff/"),
    ("sidecar: .outcome made", "create", ".outcome."),
    ("sidecar: .outcome synced", "fsync", ".outcome."),
    ("sidecar: .outcome renamed in", "rename", ".outcome"),
    ("archive: claimed/ to archive/", "rename", ".outcome", ("rename", "/spool/archive/")),
    ("round 0: archive/ synced", "fsyncdir", "/spool/archive"),
    ("round 1 after an archive: claimed/ synced", "rename", "/spool/archive/",
     ("fsyncdir", "/spool/claimed")),
    ("archive: the id marked in ids/", "create", "/spool/ids/"),
    ("round 0: ids/ synced", "fsyncdir", "/spool/ids"),
    ("retention: ids/ pruned", "unlink", "/spool/ids/"),
    ("expiry: the bootstrap taken back", "rename", "/.expire."),
    ("expiry: the taken bootstrap removed", "unlink", "/.expire."),
    ("spent/ reaped", "unlink", "/spool/spent/"),
    ("retention: archive/ pruned", "unlink", "/spool/archive/"),
    ("retention: rejected/ pruned", "unlink", "/spool/rejected/"),
    # only after a cut that left a claimed/ name beside its archive, or a
    # hidden bootstrap without its record
    ("recovery: a claimed/ name beside its archive removed", "unlink", "/spool/claimed/"),
    ("recovery: a .pending.NAME without its record removed", "unlink", "/.pending."),
    ("after the log line: as consumed", "log", "as consumed"),
    ("after the log line: Rejected", "log", "Rejected "),
    None,
    None,
]
# Not the daemon's steps (the producers', the consumer's, handoffctl
# submit's): passed over when the trace is checked against AIMS.
OTHERS = [("fsync", r"^/spool/tmp/"), ("fsyncdir", r"^/spool/tmp$"),
          ("rename", r"^/spool/(tmp|handoff)/\S* <- /spool/tmp/"),
          ("create", r"^/spool/tmp/"), ("rename", r"/\.consume\.[0-9a-f]+ <- "),
          ("unlink", r"/\.consume\.[0-9a-f]+$")]
# The first operations of a start (directories made and synced once).
START = [("create", r"^/spool/\.lock$"),
         ("fsyncdir", r"^/(spool|agents)(/(alice|gordon|baton|cancel|outbox|quota|spent|"
                      r"claimed|archive|rejected|ids|handoff|tmp))?$")]
# Mounts traced (every operation logged) for the check that AIMS leaves no
# step of the daemon out: the first ones.
TRACED = 10
EXPIRED_RE = re.compile(r"Rejected '(\S+)\.json': expired")
ACK_RE = re.compile(r"(?:Claimed (\S+) for|Archived (\S+) as)")
KIND_RE = re.compile(r"handoffd\[\w+\]: (Claimed|Archived \S+ as (\w+)|Rejected|Retention|"
                     r"Recovered|Delivered|Published|Removed|handoffd \S+ ready)")


def main():
    why = pcfs.unusable()
    if why:
        REPORT.skip(*why)
        return
    rnd = random.Random(SEED)
    print(f"seed {SEED}, cuts {CUTS}, fsync yes; model: {pcfs.MODEL}")
    t0 = time.monotonic()
    with hdtest.Env(agents=AGENTS, extra=EXTRA) as env:
        disk, mnt = os.path.join(env.dir, "disk"), os.path.join(env.dir, "mnt")
        fslog = open(os.path.join(env.dir, "powercutfs.log"), "w+")
        fs = pcfs.Mount(disk, mnt, log=fslog)
        fs.trace()
        env.spool = os.path.join(mnt, "spool")
        env.state = {a: os.path.join(mnt, "agents", a) for a in AGENTS}
        daemons = []
        seq = [0]

        def start(wait=True):
            d = env.start(name=f"p{seq[0]}", wait=wait)
            seq[0] += 1
            daemons.append(d)
            return d

        # Every 5th with a wrong key; ttl 3: gordon's expire.
        voice = powercut.VoiceWriter(env, rnd, AGENTS, bad_every=5, ttl=TTL, pause=(0, 0.01))
        sub = powercut.Submitter(env, AGENTS, ttl=TTL)
        cons = powercut.Consumer(env, ["alice"])
        workers = (voice, sub, cons)
        kinds = collections.Counter()
        aimed = collections.Counter()
        acked_log = {}
        aged = set()
        early = 0
        def whereabouts(hid, now):
            """What the run knows of one handoff, for a finding: how it was
            acknowledged, what every daemon logged of it, and every file of
            the spool and the agents' dirs that holds it (by name or bytes)."""
            how = []
            if hid in sub.acked:
                how.append(f"handoffctl submit returned 0, {now - sub.acked[hid]:.1f}s before the check")
            if hid in acked_log:
                how.append(f"a daemon logged it claimed or archived, {now - acked_log[hid]:.1f}s before")
            if hid in voice.born:
                how.append(f"written as gptme-voice does, {now - voice.born[hid]:.1f}s before")
            if cons.got.get(hid):
                how.append(f"the consumer took it {cons.got[hid]}x")
            out = ["acknowledged: " + ("; ".join(how) or "not by this run")]
            for dd in daemons:
                for ln in dd.logs().splitlines():
                    if hid in ln:
                        out.append(f"{dd.name} logged: {ln.strip()[:300]}")
            roots = [(st, os.path.join(env.spool, st)) for st in
                     ("tmp", "handoff", "spent", "claimed", "archive", "rejected")]
            roots += [(f"{a}:handoffs", os.path.join(env.state[a], "handoffs")) for a in AGENTS]
            held = []
            for st, root in roots:
                try:
                    entries = os.listdir(root)
                except OSError:
                    continue
                for n in entries:
                    p = os.path.join(root, n)
                    try:
                        with open(p, "rb") as f:
                            body = f.read(1 << 20)
                    except OSError:
                        body = b""
                    if hid in n or hid[-8:] in n or hid.encode() in body:
                        held.append(f"{st}/{n}")
            out.append(f"the spool after the cut holds it in: {held or 'nothing'}")
            return out

        try:
            d = start()
            # The producers need handoff/ and tmp/ on disk: the daemon made
            # them; wait until they are there, then start the load.
            for w in workers:
                w.start()
            for cut in range(CUTS):
                # make check's short run starts at another aim each time.
                k = cut + SEED % len(AIMS)
                aim, nth = AIMS[k % len(AIMS)], 1 + (k // len(AIMS)) % 3
                if aim is None:
                    time.sleep(rnd.uniform(0.02, MAX_RUN))
                    aimed["random"] += 1
                    fs.cut()
                elif aim[1] == "log":
                    # right after the daemon logs it: the cut lands
                    # anywhere in the next few operations
                    mark = len(d.logs())
                    deadline = time.monotonic() + 4 * hdtest.SLOW
                    while aim[2] not in d.logs()[mark:] and time.monotonic() < deadline:
                        time.sleep(0.002)
                    seen = aim[2] in d.logs()[mark:]
                    aimed[aim[0] if seen else aim[0] + " (not seen)"] += 1
                    time.sleep(rnd.uniform(0, 0.03))
                    fs.cut()
                else:
                    # armed after a while: the step of a round in full
                    # flow, not only the first after the restart
                    time.sleep(rnd.uniform(0, MAX_RUN))
                    what, op, text, *then = aim
                    hit = powercut.aimed_cut(fs, op, text, then[0] if then else None, nth,
                                             wait=2 if what.startswith("recovery") else
                                             20 if what.startswith("retention") else 10)
                    aimed[what if hit else what + " (not reached)"] += 1
                d.send(signal.SIGKILL)
                d.proc.wait()
                powercut.pause(workers)
                logs = d.logs()
                d.stop()
                m = None
                for m in KIND_RE.finditer(logs):
                    pass
                kinds[(m.group(2) and f"archived {m.group(2)}") or m.group(1).split()[0].lower()
                      if m else "start"] += 1
                for m in ACK_RE.finditer(logs):
                    hid = m.group(1) or m.group(2)
                    acked_log.setdefault(hid, time.time())
                fs.unmount()
                fs = pcfs.Mount(disk, mnt, log=fslog)
                fs.trace(cut + 1 < TRACED)
                if rnd.random() < 0.15:
                    # A cut during start-up recovery.
                    e = start(wait=False)
                    time.sleep(rnd.uniform(0.0, 0.05))
                    fs.cut()
                    e.send(signal.SIGKILL)
                    e.proc.wait()
                    for m in ACK_RE.finditer(e.logs()):
                        acked_log.setdefault(m.group(1) or m.group(2), time.time())
                    e.stop()
                    fs.unmount()
                    fs = pcfs.Mount(disk, mnt, log=fslog)
                    fs.trace(cut + 1 < TRACED)
                    early += 1
                cons.settle()
                d = start()
                now = time.time()
                born = dict(voice.born)
                acked = {}
                for hid, t in list(sub.acked.items()) + list(acked_log.items()):
                    acked[hid] = min(t, born.get(hid, t), acked.get(hid, t))
                # Taken by the consumer: acknowledged since it was born, as
                # the others (the daemon's lines of its claim and archive
                # may be lost with a kill).  Its archive, made right after
                # the take, ages past the floor and retention may prune it
                # (archive_max_items); counted from now, it never aged, and
                # one taken 42 s before, archived and pruned, was "lost".
                for hid in cons.got:
                    acked.setdefault(hid, min(born.get(hid, now), cons.took.get(hid, now)))

                def young():
                    """The acknowledged ids that must be on disk.  Rejected
                    as expired (the daemon was down past expires_at): decided,
                    not lost, and retention may prune it at once, as the
                    expiry is checked before the MAC and the rejection guards
                    no id.  The log line says so, unless the kill lost it (a
                    daemon killed in its start-up may leave no line at all):
                    so a handoff only submit acknowledged, no daemon logged
                    claimed and the consumer never took, once past its
                    expires_at, counts as one."""
                    t = time.time()
                    for dd in daemons[-4:]:
                        for m in EXPIRED_RE.finditer(dd.logs()):
                            aged.add(m.group(1))
                    return [h for h, a in acked.items() if now - a < FLOOR - 0.5 and h not in aged
                            and not (h in sub.acked and h not in acked_log and h not in cons.got
                                     and sub.acked[h] + TTL < t)]

                def check():
                    # Rejected for anything but age: lost.
                    return invariant.check(env.spool, env.state, young(), consumed=cons.got,
                                           settled=True, reject_ok=("expired", "expired_unclaimed"))

                v = powercut.still(check(), check) + cons.twice()

                def explain(x):
                    m = re.search(r"(\d{10}-bob-[\w-]+)", x)
                    if not m:
                        return x
                    hid = m.group(1)
                    return x + "\n    " + "\n    ".join(whereabouts(hid, now))

                REPORT.note(v, cut + 1, "violation", explain)
                powercut.resume(workers)
            for w in workers:
                w.gate.stop()
            for w in workers:
                w.join(30)
            if any(REPORT.found.values()):
                # The run's logs outlive its temp dir: the next loss can be read.
                keep = os.path.join(os.environ.get("HD_BUILD", "build"), "tests", "logs",
                                    f"powercut-{SEED}")
                os.makedirs(keep, exist_ok=True)
                for dd in daemons:
                    with open(os.path.join(keep, f"{dd.name}.log"), "w") as f:
                        f.write(dd.logs())
                print(f"findings: the daemons' logs are kept in {keep}")
            st = d.status()
            hdtest.check(d.stop() == 0, "SIGTERM: exit 0")
        finally:
            for dd in daemons:
                if dd.proc.poll() is None:
                    dd.proc.kill()
            fs.unmount()
        fslog.flush()
        fslog.seek(0)
        missed = powercut.steps_not_aimed(fslog.read(), [a[1:] for a in AIMS if a and a[1] != "log"],
                                           OTHERS + START)
        reached = {a[0] for a in AIMS if a and aimed[a[0]]}
        n = voice.n + sub.n
        print(f"{time.monotonic() - t0:.1f}s; cuts {CUTS} (+{early} during start-up); "
              f"handoffs {n} ({voice.n} written as gptme-voice does, 1 in 5 with a wrong key; "
              f"{sub.n} by handoffctl submit, {len(sub.acked)} returned 0); acknowledged "
              f"{len(set(sub.acked) | set(acked_log) | set(cons.got))}; consumer took {len(cons.got)}; "
              f"last decision before each cut: {dict(kinds)}; counters at the end: "
              f"{ {k: v for k, v in st['counters'].items() if v} }")
        print(f"cuts aimed after (of {sum(1 for a in AIMS if a)} aims, {len(reached)} reached):")
        for what, c in sorted(aimed.items()):
            print(f"  {c:3d}  {what}")
        REPORT.finish(n)
        # Every step of the daemon the traced mounts saw is aimed at.
        hdtest.check(not missed, f"the daemon took steps no cut is aimed at: {missed}")
        # A full pass over AIMS cuts after each of its steps.
        # (a recovery's step only when an earlier cut left its case).
        if CUTS >= 2 * len(AIMS):
            want = {a[0] for a in AIMS if a and not a[0].startswith("recovery")}
            hdtest.check(want <= reached, f"aims never reached: {sorted(want - reached)}")


REPORT.run(main)
