#!/usr/bin/env python3
"""Power cuts under the relay, fsync = yes on both hosts (issue 26).

Host a (agent bob; alice and gordon are [remote] on host b) and host b
each run handoffd on a spool of its own powercutfs (tests/powercut/pcfs.py
MODEL; --concurrent: syncs issued together are applied in any order);
nats-server, the other side and not under test, keeps its store in
a plain temp dir (tests/py/natsrv.py, relaykit.Hosts).  Load, all the time:
- on a, a producer as gptme-voice writes (temp file, rename, no fsync;
  1 in 7 with a wrong key, rejected on a) and a producer running
  `handoffctl submit` (acknowledged when it exits 0);
- on b, a consumer takes alice's and gordon's bootstraps durably (rename
  to a private name, sync the directory, remove), as test_powercut.py's.
Then HD_POWERCUT_CUTS times (default 11; make stress runs 200) the power
of one host is cut, aimed (powercutfs "arm") right after a step of the
item's life, in turn: a: the link handoff/ -> outbox/, outbox/ synced
after it, the next item's file synced after a link (the first one logged
Queued, the batch not yet synced), the move outbox/ -> archive/ after
the PubAck and each of its two directories synced (outbox/ with the
archive/ sync issued beside it held back: powercutfs delay), each step of
the take's note of the producer's file (outbox/.<id>.src: made in place,
synced with the loop turn's other files before outbox/ is) and of the
daemon's copy (made, synced, linked in: powercutfs has no O_TMPFILE, so
the copy takes write_linked()'s temp name and is synced at once), each
step of the archive from outbox/ (the .outcome sidecar made, named,
synced before archive/ with the other files of the turn; the
note copied into ids/, ids/ synced; the move; the note removed; outbox/
and handoff/ synced after it); b: a relayed message renamed into handoff/,
handoff/ synced (before the ack to JetStream), claimed/ synced; and at a
random moment on either.  a's first mounts are traced: a step of the way
out (outbox/, ids/, archive/) that no aim covers fails the test.  That
host's handoffd is SIGKILLed, its file system mounted again, handoffd
started; the other host runs on.  After each restart, the workers parked:
- lost: an acknowledged handoff (submit returned; a logged it "Queued"
  into outbox/, which it says once outbox/ is synced, or "Relayed") is on
  a in none of handoff/ outbox/ archive/,
  or rejected there; after a cut of b: a message gone from the stream
  (b acked it: the stream is a work queue) that b's disk does not hold
  (handoff/ claimed/ archive/ rejected/ ids/ or taken by the consumer):
  acked before it was durable;
- twice: one id in two places on either host (outbox/ and archive/, two
  archive records); two bootstraps for one id; the consumer took an id
  twice;
- left: anything half made on either host: temp files, sidecars without
  their item, an item in handoff/ beside its outbox/ entry.
At the end the load stops and every acknowledged handoff must reach b's
consumer exactly once.  Findings fail the test (HD_POWERCUT_ENFORCE=0
prints them as OPEN).  The last line is
`powercut relay: N cuts, N handoffs, lost N, twice N, left N`."""

import base64
import collections
import json
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
import natsrv  # noqa: E402
import pcfs  # noqa: E402
import powercut  # noqa: E402
import relaykit  # noqa: E402
from powercut import MAX_RUN, SEED  # noqa: E402

CUTS = powercut.cuts(11)
REPORT = powercut.Report("powercut relay", CUTS)
AGENTS = relaykit.B_AGENTS
# (host, operation, path text[, then]): the cut comes right after that
# operation (then: after the first such operation that follows it);
# (host, None, None): at a random moment.
# PubAck'ed: the first rename into archive/, the .outcome sidecar's; the
# move outbox/ -> archive/ comes next, before any sync
OUTBOX_MOVE = ("rename", "/spool/archive/")
AIMS = [
    ("a", "link", "/spool/outbox/"),        # handoff/ -> outbox/, nothing synced
    ("b", "rename", "/spool/handoff/"),     # a relayed message in handoff/, not synced
    ("a", "fsyncdir", "/spool/outbox"),     # outbox/ synced (a take), handoff/ not yet
    ("b", "fsyncdir", "/spool/handoff"),    # synced, the ack to JetStream not yet sent
    # the move's source synced, its destination's sync (issued with it,
    # held: powercutfs delay) not yet
    ("a", *OUTBOX_MOVE, ("fsyncdir", "/spool/outbox"), "/spool/archive"),
    ("b", "fsyncdir", "/spool/claimed"),    # the claim on b
    ("a", *OUTBOX_MOVE, ("fsyncdir", "/spool/archive")),  # the move's destination synced
    ("a", "link", "/spool/outbox/", ("fsync", "/spool/handoff/")),  # queued, the next one synced
    # the take's note of the producer's file (outbox/.<id>.src) and the
    # daemon's copy (outbox/.<id>.json.TMP, linked in as outbox/<id>.json)
    ("a", "create", ".src"),                # the note made in place, unsynced, the copy not begun
    ("a", "fsync", ".src"),                 # the note synced (store_flush(), files first)
    ("a", "create", "/spool/outbox/.1"),    # the copy begun
    ("a", "fsync", "/spool/outbox/.1"),     # the copy synced, not linked in
    ("a", "unlink", "/spool/outbox/.1"),    # linked in, its temp name removed
    # the archive from outbox/ after the PubAck: the .outcome sidecar, the
    # note copied into ids/, the move, the note removed; the rounds after
    ("a", "create", ".outcome."),
    ("a", "rename", ".outcome"),            # the sidecar named, not synced, the item not moved
    ("a", "fsync", ".outcome"),             # synced (store_flush(), files first), archive/ not
    ("a", "create", "/spool/ids/"),         # the note in ids/, not synced
    ("a", "fsyncdir", "/spool/ids"),
    ("a", "rename", ".outcome", ("rename", "/spool/archive/")),  # moved
    ("a", "unlink", ".src"),                # the note gone from outbox/
    # an item that expired in outbox/ (slow relay, loaded machine): linked
    # into rejected/ as expired_unrelayed, then its outbox/ name removed
    ("a", "unlink", "/spool/outbox/1"),
    ("a", "create", "/spool/ids/", ("fsyncdir", "/spool/outbox")),  # round 1 after it
    ("a", "create", "/spool/ids/", ("fsyncdir", "/spool/handoff")),  # round 2 after it
    ("b", None, None),
    ("a", None, None),
]
# a's mounts traced (every operation logged) for the check that AIMS
# leaves no step of the way out (outbox/, ids/, archive/) out: the first
# ones.  What is not that way (the claims and rejections of a's own
# agent, the producers') is test_powercut.py's.
TRACED = 6
OTHERS_A = [(op, r"^(?!/spool/(outbox|ids|archive)(/|$))") for op in
            ("fsync", "fsyncdir", "rename", "link", "unlink", "create")]
# HD_POWERCUT_AIMS=4,6: only those of AIMS (by index), to look at one step.
if os.environ.get("HD_POWERCUT_AIMS"):
    AIMS = [AIMS[int(i)] for i in os.environ["HD_POWERCUT_AIMS"].split(",")]
ACK_RE = re.compile(r"(?:Queued (\S+) for agent|Relayed (\S+) to )")
RELAYED_RE = re.compile(r"Relayed (\S+) to ")


def stream_ids(url, stream="HANDOFF"):
    """The handoff_ids of the messages still in the stream (a work queue:
    a message leaves it when b acks it)."""
    cl = natsrv.Client(url)
    try:
        st = cl.js_api(f"STREAM.INFO.{stream}").get("state", {})
        ids = set()
        if not st.get("messages"):
            return ids
        for seq in range(st["first_seq"], st["last_seq"] + 1):
            m = cl.js_api(f"STREAM.MSG.GET.{stream}", {"seq": seq}).get("message")
            if not m:
                continue
            try:
                ids.add(json.loads(base64.b64decode(m.get("data", ""))).get("handoff_id"))
            except ValueError:
                pass
        return ids
    finally:
        cl.close()


CACHE = {"a": {}, "b": {}}   # invariant.scan()'s: archive/ and rejected/ read once


def items_a(spool):
    """id -> [(state, name)] on a, outbox/ included."""
    return invariant.scan(spool, {}, CACHE["a"], extra_dirs=("outbox",))["items"]


def check_a(spool, acked):
    """Violations on a after a restart: every acknowledged id in exactly
    one of handoff/ outbox/ archive/, never rejected (ttl 600: nothing
    expires); nothing half made (temps, outbox/'s too; orphan sidecars)."""
    return [f"{x} (on a)" for x in invariant.check(spool, {}, acked, settled=True, cache=CACHE["a"],
                                                   extra_dirs=("outbox",), reject_ok=())]


def on_b(env, got):
    s = invariant.scan(env.spool, env.state, CACHE["b"])
    have = set(s["items"]) | set(got)
    have |= set(invariant._listdir(os.path.join(env.spool, "ids")))
    return have


def main():
    if powercut.relay_skipped(REPORT):
        return
    rnd = random.Random(SEED)
    print(f"seed {SEED}, cuts {CUTS}, fsync yes on a and b; model: {pcfs.MODEL}")
    t0 = time.monotonic()
    with relaykit.Hosts() as h:
        disk, mnt, fs, fslog = powercut.relay_mounts(h, AGENTS)
        fs["a"].trace()
        seq = collections.Counter()
        daemons = {"a": [], "b": []}

        def start(x):
            seq[x] += 1
            d = (h.start_a if x == "a" else h.start_b)(name=f"{x}{seq[x]}")
            daemons[x].append(d)
            return d

        d = {"a": start("a"), "b": start("b")}
        # On a: 1 in 7 with a wrong key; a few dozen a second: each remount
        # reads the whole disk, so the long run stays linear.  On b: a
        # consumer for every agent.
        voice = powercut.VoiceWriter(h.a, rnd, AGENTS, bad_every=7, ttl=600, pause=(0.01, 0.05))
        sub = powercut.Submitter(h.a, AGENTS, ttl=600, pause=0.02)
        cons = powercut.Consumer(h.b, AGENTS)
        workers = (voice, sub, cons)
        for w in workers:
            w.start()
        aimed = collections.Counter()
        acked_log = set()

        def a_logs():
            return "".join(x.logs() for x in daemons["a"])

        try:
            for cut in range(CUTS):
                # make check's short run starts at another aim each time.
                x, op, text, *then = AIMS[(cut + SEED % len(AIMS)) % len(AIMS)]
                what = f"{x}: {op} {text}" + (" then %s %s" % then[0] if then else "")
                if len(then) > 1:
                    fs[x].delay(then[1], 100)
                    what += f" (syncs of {then[1]} held 100 ms)"
                if op:
                    hit = powercut.aimed_cut(fs[x], op, text, then[0] if then else None)
                    aimed[what if hit else what + " (not reached)"] += 1
                else:
                    time.sleep(rnd.uniform(0.02, MAX_RUN))
                    aimed[f"{x}: random"] += 1
                    fs[x].cut()
                d[x].send(signal.SIGKILL)
                d[x].proc.wait()
                powercut.pause(workers)
                for m in ACK_RE.finditer(d[x].logs() if x == "a" else ""):
                    acked_log.add(m.group(1) or m.group(2))
                d[x].stop()
                fs[x].unmount()
                fs[x] = pcfs.Mount(disk[x], mnt[x], log=fslog, concurrent=True)
                if x == "a":
                    fs[x].trace(cut + 1 < TRACED)
                v = []
                if x == "b":
                    cons.settle()
                    # Whatever left the stream b acked: durable on b first.
                    relayed = set(m.group(1) for m in RELAYED_RE.finditer(a_logs()))
                    relayed |= {i for i, w in items_a(h.a.spool).items()
                                if any(s == "archive" for s, _ in w)}
                    gone = relayed - stream_ids(h.ns.urls[0])
                    have = on_b(h.b, cons.got)
                    for hid in sorted(gone - have):
                        v.append(f"lost on b: {hid} left the stream (acked by b), "
                                 "not on b's disk after the cut")
                d[x] = start(x)
                acked = sub.acked.keys() | acked_log

                def check():
                    return (check_a(h.a.spool, acked) if x == "a" else []) + \
                        invariant.check(h.b.spool, h.b.state, [], consumed=cons.got, settled=True,
                                        cache=CACHE["b"])

                # lost on b: the stream has it no more, final.
                v = powercut.still(v + check(), check, keep=lambda y: y.startswith("lost on b"))
                REPORT.note(v + cons.twice(), cut + 1)
                powercut.resume(workers)
            # The end: no more load; every acknowledged handoff reaches b's
            # consumer (a redelivery after b's cut waits for the ack wait).
            for w in (voice, sub):
                w.gate.stop()
                w.join(60)
            for m in ACK_RE.finditer(d["a"].logs()):
                acked_log.add(m.group(1) or m.group(2))
            acked = sub.acked.keys() | acked_log
            try:
                hdtest.wait_for(lambda: acked <= set(cons.got) and h.a.count("outbox") == 0 and
                                h.a.count("handoff") == 0, 60,
                                "every acknowledged handoff delivered on b")
            except hdtest.Fail:
                pass
            time.sleep(1.0)     # a second delivery would show up by now
            cons.gate.stop()
            cons.join(30)
            v = [f"lost: {hid} acknowledged on a, never delivered on b"
                 for hid in sorted(acked - set(cons.got))]
            v += cons.twice()
            v += check_a(h.a.spool, acked)

            def end():
                return invariant.check(h.b.spool, h.b.state, [], consumed=cons.got, settled=True,
                                       cache=CACHE["b"])
            v += powercut.still(end(), end)
            v += [f"left on a: outbox/{n} at the end" for n in h.a.names("outbox")]
            REPORT.note(v, "end")
            st = {x: d[x].status()["relay"] for x in ("a", "b")}
            for x in ("a", "b"):
                hdtest.check(d[x].stop() == 0, f"{x}: SIGTERM: exit 0")
        finally:
            powercut.relay_teardown(daemons, fs)
        fslog.flush()
        fslog.seek(0)
        missed = powercut.steps_not_aimed(fslog.read(), [a[1:] for a in AIMS if a[1]], OTHERS_A)
        n = voice.n + sub.n
        print(f"{time.monotonic() - t0:.1f}s; cuts {CUTS}; handoffs {n} ({voice.n} written as "
              f"gptme-voice does, 1 in 7 with a wrong key; {sub.n} by handoffctl submit, "
              f"{len(sub.acked)} returned 0); acknowledged {len(sub.acked.keys() | acked_log)}; "
              f"delivered on b {len(cons.got)}; cuts aimed after: {dict(aimed)}; relay at the end: "
              f"a relayed {st['a']['relayed']}, b received {st['b']['received']}, "
              f"duplicates dropped {st['b']['duplicates']}")
        REPORT.finish(n)
        hdtest.check(not missed, f"a took steps of the way out no cut is aimed at: {missed}")


REPORT.run(main)
