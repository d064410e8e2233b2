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
archive/ sync issued beside it held back: powercutfs delay); b: a relayed message renamed into handoff/,
handoff/ synced (before the ack to JetStream), claimed/ synced; and at a
random moment on either.  That host's handoffd is
SIGKILLed, its file system mounted again, handoffd started; the other
host runs on.  After each restart, the workers parked:
- lost: an acknowledged handoff (submit returned; a logged it "Queued"
  into outbox/ or "Relayed") is on a in none of handoff/ outbox/ archive/,
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
import secrets
import signal
import subprocess
import sys
import threading
import time

SRC = os.environ.get("HD_SRC", ".")
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
sys.path.insert(0, os.path.join(SRC, "tests", "powercut"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
import natsrv  # noqa: E402
import pcfs  # noqa: E402
import relaykit  # noqa: E402

CUTS = int(os.environ.get("HD_POWERCUT_CUTS", "11"))
MAX_RUN = float(os.environ.get("HD_POWERCUT_MAX_RUN", "0.5"))
SEED = int(os.environ.get("HD_POWERCUT_SEED", str(int(time.time()))))
ENFORCE = os.environ.get("HD_POWERCUT_ENFORCE", "1") == "1"
AGENTS = relaykit.B_AGENTS
# (host, operation, path text[, then]): the cut comes right after that
# operation (then: after the first such operation that follows it);
# (host, None, None): at a random moment.
OUTBOX_MOVE = ("rename", "/spool/archive/")     # PubAck'ed: outbox/ -> archive/
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
    ("a", *OUTBOX_MOVE),                    # moved, nothing synced
    ("a", "link", "/spool/outbox/", ("fsync", "/spool/handoff/")),  # queued, the next one synced
    ("b", None, None),
    ("a", None, None),
]
# HD_POWERCUT_AIMS=4,6: only those of AIMS (by index), to look at one step.
if os.environ.get("HD_POWERCUT_AIMS"):
    AIMS = [AIMS[int(i)] for i in os.environ["HD_POWERCUT_AIMS"].split(",")]
ACK_RE = re.compile(r"(?:Queued (\S+) for agent|Relayed (\S+) to )")
RELAYED_RE = re.compile(r"Relayed (\S+) to ")


class Worker(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.gate = invariant.Gate()
        self.error = None

    def run(self):
        try:
            while self.gate.point():
                try:
                    self.step()
                except OSError:
                    time.sleep(0.002)   # the power is off: try again later
        except Exception as e:  # noqa: BLE001
            self.error = e


class VoiceWriter(Worker):
    """gptme-voice's writer on a: temp file, rename, no sync."""

    def __init__(self, env, rnd):
        super().__init__()
        self.env, self.rnd, self.n = env, rnd, 0

    def step(self):
        self.n += 1
        bad = self.n % 7 == 0
        doc = hdproto.build("bob", AGENTS[self.n % 2], b"wrong key" if bad else self.env.key, ttl=600)
        hdproto.drop(self.env.spool, doc)
        # A few dozen a second: each remount reads the whole disk, so the
        # long run stays linear.
        time.sleep(self.rnd.uniform(0.01, 0.05))


class Submitter(Worker):
    """handoffctl submit on a: acknowledged when it exits 0."""

    def __init__(self, env):
        super().__init__()
        self.env, self.n = env, 0
        self.acked = set()

    def step(self):
        self.n += 1
        hid = f"{int(time.time())}-bob-ctl-{secrets.token_hex(6)}"
        p = subprocess.run([hdtest.HANDOFFCTL, "submit", "--spool", self.env.spool, "--key",
                            self.env.key_path, "--from", "bob", "--to", AGENTS[self.n % 2],
                            "--ttl", "600", "--id", hid], capture_output=True, timeout=60)
        if p.returncode == 0:
            self.acked.add(hid)
        time.sleep(0.02)    # as the writer: the long run stays linear


class Consumer(Worker):
    """Takes b's bootstraps durably (test_powercut.py's consumer, for
    every agent of b): read, rename to a private name, sync the directory
    (taken), remove."""

    def __init__(self, env):
        super().__init__()
        self.env = env
        self.got = collections.Counter()
        self.uncertain = []

    def settle(self):
        """After a cut of b: a take whose sync the cut interrupted happened
        only if its bootstrap did not come back."""
        for hid, d in self.uncertain:
            if os.path.exists(os.path.join(d, invariant.bootstrap_name(hid))):
                self.got[hid] -= 1
                if self.got[hid] <= 0:
                    del self.got[hid]
        self.uncertain = []

    def step(self):
        took = 0
        for a in AGENTS:
            d = os.path.join(self.env.state[a], "handoffs")
            try:
                names = [n for n in os.listdir(d) if n.endswith(".json") and not n.startswith(".")]
            except FileNotFoundError:
                names = []
            for n in names:
                p = os.path.join(d, n)
                try:
                    with open(p, "rb") as f:
                        b = json.loads(f.read())
                except (FileNotFoundError, ValueError):
                    continue
                priv = os.path.join(d, f".consume.{secrets.token_hex(4)}")
                fd = os.open(d, os.O_RDONLY)
                try:
                    os.rename(p, priv)
                except OSError:
                    os.close(fd)
                    raise
                self.got[b["handoff_id"]] += 1
                took += 1
                try:
                    os.fsync(fd)
                except OSError:
                    self.uncertain.append((b["handoff_id"], d))
                    raise
                finally:
                    os.close(fd)
                os.unlink(priv)
        if not took:
            time.sleep(0.005)


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


def places_a(spool):
    """id -> [(state, name)] on a, outbox/ included; and the half-made
    things (temps, orphan sidecars)."""
    s = invariant.scan(spool, {}, CACHE["a"])
    items = {k: list(v) for k, v in s["items"].items()}
    left = [f"temp file: {p}" for p in s["temps"]]
    left += [f"sidecar without item: {st}/{n}" for st, n in s["orphans"]]
    d = os.path.join(spool, "outbox")
    for n in invariant._listdir(d):
        if n.startswith("."):
            left.append(f"temp file: outbox/{n}")
            continue
        doc = invariant._load(os.path.join(d, n))
        hid = (doc or {}).get("handoff_id") or n[:-5]
        items.setdefault(hid, []).append(("outbox", n))
    return items, left


def check_a(spool, acked, reasons):
    """Violations on a after a restart: every acknowledged id in exactly
    one place, never rejected (ttl 600: nothing expires); nothing half
    made."""
    v = []
    items, left = places_a(spool)
    for hid in acked:
        where = items.get(hid, [])
        if not where:
            v.append(f"lost on a: {hid} acknowledged, in none of handoff/ outbox/ archive/")
        elif len(where) > 1:
            v.append(f"twice on a: {hid} in {where}")
        elif where[0][0] == "rejected":
            v.append(f"lost on a: {hid} acknowledged, rejected ({reasons(where[0][1])})")
    for hid, where in items.items():
        if hid not in acked and len(where) > 1:
            v.append(f"twice on a: {hid} in {where}")
    for x in left:
        v.append(f"left on a: {x}")
    return v


def on_b(env, got):
    s = invariant.scan(env.spool, env.state, CACHE["b"])
    have = set(s["items"]) | set(got)
    have |= set(invariant._listdir(os.path.join(env.spool, "ids")))
    return have


def classify(v):
    """Ours say lost/twice/left first; invariant.check()'s as in
    test_powercut.py."""
    if v.startswith(("lost", "acknowledged, not on disk")):
        return "lost"
    if v.startswith(("twice", "duplicated", "duplicate bootstraps")):
        return "twice"
    return "left"


def main():
    why = pcfs.unusable()
    if why or not natsrv.available():
        print(f"skipped: {why or 'nats-server not installed'}")
        LAST[0] = "powercut relay: 0 cuts, 0 handoffs, lost 0, twice 0, left 0 (skipped)"
        return
    rnd = random.Random(SEED)
    print(f"seed {SEED}, cuts {CUTS}, fsync yes on a and b; model: {pcfs.MODEL}")
    t0 = time.monotonic()
    with relaykit.Hosts() as h:
        h.consumer.stop()   # b's consumer here is a durable one (Consumer)
        fslog = open(os.path.join(h.a.dir, "powercutfs.log"), "w+")
        disk = {x: os.path.join(e.dir, "disk") for x, e in (("a", h.a), ("b", h.b))}
        mnt = {x: os.path.join(e.dir, "mnt") for x, e in (("a", h.a), ("b", h.b))}
        fs = {x: pcfs.Mount(disk[x], mnt[x], log=fslog, concurrent=True) for x in ("a", "b")}
        h.a.spool = os.path.join(mnt["a"], "spool")
        h.b.spool = os.path.join(mnt["b"], "spool")
        h.b.state = {a: os.path.join(mnt["b"], "agents", a) for a in AGENTS}
        seq = collections.Counter()
        daemons = {"a": [], "b": []}

        def start(x):
            seq[x] += 1
            d = (h.start_a if x == "a" else h.start_b)(name=f"{x}{seq[x]}")
            daemons[x].append(d)
            return d

        d = {"a": start("a"), "b": start("b")}
        voice, sub, cons = VoiceWriter(h.a, rnd), Submitter(h.a), Consumer(h.b)
        workers = (voice, sub, cons)
        for w in workers:
            w.start()
        violations = {"lost": set(), "twice": set(), "left": set()}
        aimed = collections.Counter()
        acked_log = set()

        def a_logs():
            return "".join(x.logs() for x in daemons["a"])

        def note(vs, cut):
            new = [x for x in vs if x not in violations[classify(x)]]
            for x in vs:
                violations[classify(x)].add(x)
            if new:
                print(f"cut {cut}: {len(new)} new finding(s):\n  " + "\n  ".join(new[:10]))

        def reasons(name):
            try:
                return h.a.reason_of(name).get("reason")
            except (OSError, ValueError):
                return None

        try:
            for cut in range(CUTS):
                x, op, text, *then = AIMS[cut % len(AIMS)]
                what = f"{x}: {op} {text}" + (" then %s %s" % then[0] if then else "")
                if len(then) > 1:
                    fs[x].delay(then[1], 100)
                    what += f" (syncs of {then[1]} held 100 ms)"
                if op:
                    fs[x].arm(op, text, then[0] if then else None)
                    deadline = time.monotonic() + 10 * hdtest.SLOW
                    while not fs[x].is_cut() and time.monotonic() < deadline:
                        time.sleep(0.002)
                    if fs[x].is_cut():
                        aimed[what] += 1
                    else:
                        aimed[what + " (not reached)"] += 1
                        fs[x].cut()
                else:
                    time.sleep(rnd.uniform(0.02, MAX_RUN))
                    aimed[f"{x}: random"] += 1
                    fs[x].cut()
                d[x].send(signal.SIGKILL)
                d[x].proc.wait()
                for w in workers:
                    w.gate.pause()
                for m in ACK_RE.finditer(d[x].logs() if x == "a" else ""):
                    acked_log.add(m.group(1) or m.group(2))
                d[x].stop()
                fs[x].unmount()
                fs[x] = pcfs.Mount(disk[x], mnt[x], log=fslog, concurrent=True)
                v = []
                if x == "b":
                    cons.settle()
                    # Whatever left the stream b acked: durable on b first.
                    relayed = set(m.group(1) for m in RELAYED_RE.finditer(a_logs()))
                    relayed |= {i for i, w in places_a(h.a.spool)[0].items()
                                if any(s == "archive" for s, _ in w)}
                    gone = relayed - stream_ids(h.ns.urls[0])
                    have = on_b(h.b, cons.got)
                    for hid in sorted(gone - have):
                        v.append(f"lost on b: {hid} left the stream (acked by b), "
                                 "not on b's disk after the cut")
                d[x] = start(x)
                acked = sub.acked | acked_log
                if x == "a":
                    v += check_a(h.a.spool, acked, reasons)
                v += invariant.check(h.b.spool, h.b.state, [], consumed=cons.got, settled=True,
                                     cache=CACHE["b"])
                if v:
                    # What a running daemon finishes right now is no
                    # finding: only what is still so a second later.
                    time.sleep(1.0)
                    v2 = check_a(h.a.spool, acked, reasons) if x == "a" else []
                    v2 += invariant.check(h.b.spool, h.b.state, [], consumed=cons.got, settled=True,
                                          cache=CACHE["b"])
                    v = [y for y in v if y in v2 or y.startswith("lost on b")]
                for hid, c in cons.got.items():
                    if c > 1:
                        v.append(f"twice: the consumer took {hid} {c}x")
                note(v, cut + 1)
                for w in workers:
                    if w.error:
                        raise hdtest.Fail(f"worker failed: {w.error!r}")
                    w.gate.resume()
            # The end: no more load; every acknowledged handoff reaches b's
            # consumer (a redelivery after b's cut waits for the ack wait).
            for w in (voice, sub):
                w.gate.stop()
                w.join(60)
            for m in ACK_RE.finditer(d["a"].logs()):
                acked_log.add(m.group(1) or m.group(2))
            acked = sub.acked | acked_log
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
            v += [f"twice: the consumer took {hid} {c}x" for hid, c in cons.got.items() if c > 1]
            v += check_a(h.a.spool, acked, reasons)
            v += invariant.check(h.b.spool, h.b.state, [], consumed=cons.got, settled=True,
                                 cache=CACHE["b"])
            v += [f"left on a: outbox/{n} at the end" for n in h.a.names("outbox")]
            note(v, "end")
            st = {x: d[x].status()["relay"] for x in ("a", "b")}
            for x in ("a", "b"):
                hdtest.check(d[x].stop() == 0, f"{x}: SIGTERM: exit 0")
        finally:
            for x in ("a", "b"):
                for dd in daemons[x]:
                    if dd.proc.poll() is None:
                        dd.proc.kill()
                        dd.proc.wait()
                fs[x].unmount()
        n = voice.n + sub.n
        print(f"{time.monotonic() - t0:.1f}s; cuts {CUTS}; handoffs {n} ({voice.n} written as "
              f"gptme-voice does, 1 in 7 with a wrong key; {sub.n} by handoffctl submit, "
              f"{len(sub.acked)} returned 0); acknowledged {len(sub.acked | acked_log)}; "
              f"delivered on b {len(cons.got)}; cuts aimed after: {dict(aimed)}; relay at the end: "
              f"a relayed {st['a']['relayed']}, b received {st['b']['received']}, "
              f"duplicates dropped {st['b']['duplicates']}")
        for k in ("lost", "twice", "left"):
            for y in sorted(violations[k])[:15]:
                print(f"  {k}: {y}")
        lost, twice, left = (len(violations[k]) for k in ("lost", "twice", "left"))
        LAST[0] = f"powercut relay: {CUTS} cuts, {n} handoffs, lost {lost}, twice {twice}, left {left}"
        if not ENFORCE and lost + twice + left:
            print(f"OPEN: {lost + twice + left} finding(s) above, not enforced here "
                  "(HD_POWERCUT_ENFORCE=0 is set)")
            return
        hdtest.check(lost == 0 and twice == 0 and left == 0,
                     f"power cuts: lost {lost}, twice {twice}, left {left}")


LAST = [None]


def run():
    """main(), then the figures as the very last line."""
    rc = 0
    try:
        main()
    except hdtest.Fail as e:
        print(f"FAIL: {e}")
        rc = 1
    print(LAST[0] or f"powercut relay: {CUTS} cuts, 0 handoffs, lost ?, twice ?, left ? (did not finish)")
    sys.exit(rc)


run()
