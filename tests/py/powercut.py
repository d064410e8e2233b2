"""The load and the tally of the power-cut tests, shared by
tests/e2e/test_powercut.py (one host) and test_powercut_relay.py (two
hosts and the relay):

    import powercut
    rep = powercut.Report("powercut", powercut.cuts(10))
    voice = powercut.VoiceWriter(env, rnd, agents, bad_every=5, ttl=3, pause=(0, 0.01))
    sub, cons = powercut.Submitter(env, agents, ttl=3), powercut.Consumer(env, ["alice"])
    ...                                 # each cut: powercut.pause(workers),
    rep.note(findings, cut)             # the checks, rep.note(), powercut.resume(workers)
    rep.finish(handoffs)
    rep.run(main)                       # main(), then the last line:
                                        # NAME: N cuts, N handoffs, lost N, twice N, left N

A worker is a thread doing one step after another until stopped; an
OSError (the power is off) is tried again later; harness.Gate parks it
between two steps, so that nothing of it is half done while the spool is
checked."""

import collections
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time

import harness
import hdproto
import hdtest
import invariant

MAX_RUN = float(os.environ.get("HD_POWERCUT_MAX_RUN", "0.5"))
SEED = int(os.environ.get("HD_POWERCUT_SEED", str(int(time.time()))))
# Findings fail the test (make check, make powercut, make stress);
# HD_POWERCUT_ENFORCE=0 only prints them as OPEN.
ENFORCE = os.environ.get("HD_POWERCUT_ENFORCE", "1") == "1"


def cuts(default):
    """How many cuts: HD_POWERCUT_CUTS (make stress runs 200), else default."""
    return int(os.environ.get("HD_POWERCUT_CUTS", str(default)))


class Worker(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.gate = harness.Gate()
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
    """gptme-voice's writer, as bob to agents in turn: temp file, rename,
    no sync; every bad_every-th with a wrong key (rejected, bad_mac); a
    pause of uniform(*pause) seconds after each.  born: id -> when it was
    written (the good ones)."""

    def __init__(self, env, rnd, agents, bad_every, ttl, pause):
        super().__init__()
        self.env, self.rnd, self.n = env, rnd, 0
        self.agents, self.bad_every, self.ttl, self.pause = agents, bad_every, ttl, pause
        self.born = {}

    def step(self):
        self.n += 1
        bad = self.n % self.bad_every == 0
        doc = hdproto.build("bob", self.agents[self.n % len(self.agents)],
                            b"wrong key" if bad else self.env.key, ttl=self.ttl)
        if not bad:
            self.born[doc["handoff_id"]] = time.time()
        hdproto.drop(self.env.spool, doc)
        time.sleep(self.rnd.uniform(*self.pause))


class Submitter(Worker):
    """handoffctl submit, as bob to agents in turn: acknowledged when it
    exits 0 (acked: id -> when it was started); a pause after each."""

    def __init__(self, env, agents, ttl, pause=0.0):
        super().__init__()
        self.env, self.agents, self.ttl, self.pause, self.n = env, agents, ttl, pause, 0
        self.acked = {}

    def step(self):
        self.n += 1
        hid = f"{int(time.time())}-bob-ctl-{secrets.token_hex(6)}"
        t = time.time()
        p = subprocess.run([hdtest.HANDOFFCTL, "submit", "--spool", self.env.spool, "--key",
                            self.env.key_path, "--from", "bob",
                            "--to", self.agents[self.n % len(self.agents)],
                            "--ttl", str(self.ttl), "--id", hid], capture_output=True, timeout=60)
        if p.returncode == 0:
            self.acked[hid] = t
        if self.pause:
            time.sleep(self.pause)


class Consumer(Worker):
    """Takes the agents' bootstraps (env.state[agent]/handoffs/) durably:
    read, rename to a private name, sync the directory (taken), remove.
    got: id -> times taken; took: id -> when it was first taken."""

    def __init__(self, env, agents):
        super().__init__()
        self.env, self.agents = env, agents
        self.got = collections.Counter()
        self.took = {}
        self.uncertain = []

    def settle(self):
        """After a restart: a take whose sync the cut interrupted happened
        only if its bootstrap did not come back."""
        for hid, d in self.uncertain:
            if os.path.exists(os.path.join(d, invariant.bootstrap_name(hid))):
                self.got[hid] -= 1
                if self.got[hid] <= 0:
                    del self.got[hid]
                    self.took.pop(hid, None)
        self.uncertain = []

    def twice(self):
        """The ids taken more than once, as findings."""
        return [f"twice: the consumer took {hid} {c}x" for hid, c in self.got.items() if c > 1]

    def step(self):
        took = 0
        for a in self.agents:
            d = os.path.join(self.env.state[a], "handoffs")
            for n in invariant.published(d):
                took += self.take(d, n)
        if not took:
            time.sleep(0.005)

    def take(self, d, n):
        p = os.path.join(d, n)
        try:
            with open(p, "rb") as f:
                b = json.loads(f.read())
        except (FileNotFoundError, ValueError):
            return 0
        priv = os.path.join(d, f".consume.{secrets.token_hex(4)}")
        # The directory is opened before the take: an open that the cut
        # fails after the rename is a take not synced either.
        fd = os.open(d, os.O_RDONLY)
        try:
            os.rename(p, priv)
        except OSError:
            os.close(fd)
            raise
        # Taken (it was read): if the power goes before the sync, whether
        # the take is on disk is seen after the restart.
        self.got[b["handoff_id"]] += 1
        self.took.setdefault(b["handoff_id"], time.time())
        try:
            os.fsync(fd)
        except OSError:
            self.uncertain.append((b["handoff_id"], d))
            raise
        finally:
            os.close(fd)
        os.unlink(priv)
        return 1


def pause(workers):
    """Parks the workers (a restart and the checks come next)."""
    for w in workers:
        w.gate.pause()


def resume(workers):
    """Lets the workers go on; a worker that failed fails the test."""
    for w in workers:
        if w.error:
            raise hdtest.Fail(f"worker failed: {w.error!r}")
        w.gate.resume()


def still(findings, again, keep=lambda x: False, settle=10.0):
    """What a running daemon is finishing right now (e.g. an expiry between
    the bootstrap's removal and the archive) is no finding: only what
    again() still finds after settle seconds (x SLOW) of looking for it to
    go (a loaded machine may take that long to finish), or what keep()
    says is final."""
    final = [x for x in findings if keep(x)]
    left = [x for x in findings if not keep(x)]
    deadline = time.monotonic() + settle * hdtest.SLOW
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        later = again()
        left = [x for x in left if x in later]
    return final + left


def aimed_cut(fs, op, text, then=None, nth=1, wait=10.0):
    """The power cut right after the nth op on a path holding text (then:
    after the nth then-op that follows it; pcfs.Mount.arm()), waiting up to
    wait seconds (x SLOW) for the program to get there.  True when the
    armed cut came; False when it did not, and the power was cut there and
    then instead."""
    fs.arm(op, text, then, nth)
    deadline = time.monotonic() + wait * hdtest.SLOW
    while not fs.is_cut() and time.monotonic() < deadline:
        time.sleep(0.002)
    try:
        fs.disarm()
        fs.cut()
    except OSError:
        return True     # the armed cut came first: the mount is off
    return False


def step_class(op, path, src=""):
    """A traced operation (powercutfs "trace on") with its names made
    generic: ids, hex, numbers and temp suffixes become ID, N and TMP, an
    agent's directory agents/A."""
    def norm(p):
        p = re.sub(r"/agents/[^/]+/", "/agents/A/", p or "")
        d, _, n = p.rpartition("/")
        n = re.sub(r"[0-9]{10}-[A-Za-z0-9_-]*[0-9a-f]{8,}", "ID", n)
        n = re.sub(r"\.[A-Za-z0-9]{6}$", ".TMP", n)
        n = re.sub(r"[0-9a-f]{8,}|[0-9]+", "N", n)
        return f"{d}/{n}" if p else ""
    return (op, norm(path), norm(src))


TRACE_RE = re.compile(r"powercutfs: op (\S+) (\S+)(?: <- (\S+))?")


def steps_not_aimed(trace, aims, others=()):
    """The step classes (step_class()) of the traced operations in trace
    (the mounts' log) that no aim (op, text[, then]) is aimed at: an aim
    covers an op on a path holding its text, and so does its then.  others:
    (op, regex) of steps that are not the daemon's (the producers', the
    consumer's); they are passed over.  {class: count}."""
    pairs = []
    for a in aims:
        if a and a[0]:
            pairs.append((a[0], a[1]))
            if len(a) > 2 and a[2]:
                pairs.append(a[2])
    out = collections.Counter()
    for m in TRACE_RE.finditer(trace):
        op, path, src = m.groups()
        if any(op == o and t in path for o, t in pairs):
            continue
        said = path + (" <- " + src if src else "")
        if any(op == o and re.search(rx, said) for o, rx in others):
            continue
        out[step_class(op, path, src)] += 1
    return dict(out)


def classify(finding):
    """lost, twice or left: by what the finding says first (invariant.check()'s
    wording, or the tests' own "lost ...", "twice ...")."""
    if finding.startswith(("lost", "acknowledged, not on disk", "rejected, acknowledged")):
        return "lost"
    if finding.startswith(("twice", "duplicated", "duplicate bootstraps")):
        return "twice"
    return "left"


class Report:
    """The findings of one run (each counted once, however many cuts find
    it again) and its last line, `NAME: N cuts, N handoffs, lost N, twice N,
    left N`, which tools parse."""

    def __init__(self, name, cuts):
        self.name, self.cuts = name, cuts
        self.found = {"lost": set(), "twice": set(), "left": set()}
        self.last = None
        self.skipped = False

    def skip(self, tool, why):
        """The run ends as skipped (hdtest.skip) after its last line."""
        print(f"skipped: needs {tool}: {why}")
        self.skipped = True
        self.last = f"{self.name}: 0 cuts, 0 handoffs, lost 0, twice 0, left 0 (skipped)"

    def note(self, findings, cut, word="finding", explain=str):
        """Counts the findings; prints the new ones, each as explain() says
        it (e.g. with what the logs and the files say of its id)."""
        new = [x for x in findings if x not in self.found[classify(x)]]
        for x in findings:
            self.found[classify(x)].add(x)
        if new:
            print(f"cut {cut}: {len(new)} new {word}(s):\n  " +
                  "\n  ".join(explain(x) for x in new[:10]))

    def finish(self, handoffs):
        """Prints the findings and sets the last line; any finding fails
        the test (HD_POWERCUT_ENFORCE=0: printed as OPEN)."""
        for k in ("lost", "twice", "left"):
            for x in sorted(self.found[k])[:15]:
                print(f"  {k}: {x}")
        lost, twice, left = (len(self.found[k]) for k in ("lost", "twice", "left"))
        self.last = (f"{self.name}: {self.cuts} cuts, {handoffs} handoffs, "
                     f"lost {lost}, twice {twice}, left {left}")
        if not ENFORCE and lost + twice + left:
            print(f"OPEN: {lost + twice + left} finding(s) above, not enforced here "
                  "(HD_POWERCUT_ENFORCE=0 is set)")
            return
        hdtest.check(lost == 0 and twice == 0 and left == 0,
                     f"power cuts: lost {lost}, twice {twice}, left {left}")

    def run(self, main):
        """main(), then the figures as the very last line; exits 1 on a
        failure."""
        rc = 0
        try:
            main()
        except hdtest.Fail as e:
            print(f"FAIL: {e}")
            rc = 1
        print(self.last or f"{self.name}: {self.cuts} cuts, 0 handoffs, "
              "lost ?, twice ?, left ? (did not finish)")
        sys.exit(hdtest.SKIP if rc == 0 and self.skipped else rc)


def relay_mounts(h, agents):
    """relaykit.Hosts h with each host's spool (and b's agents' state) on
    a powercutfs of its own (--concurrent), b's plain consumer stopped (the
    tests take durably, with Consumer): (disk, mnt, fs, fslog), each by
    host name but fslog."""
    import pcfs
    h.consumer.stop()
    fslog = open(os.path.join(h.a.dir, "powercutfs.log"), "w+")
    disk = {x: os.path.join(e.dir, "disk") for x, e in (("a", h.a), ("b", h.b))}
    mnt = {x: os.path.join(e.dir, "mnt") for x, e in (("a", h.a), ("b", h.b))}
    fs = {x: pcfs.Mount(disk[x], mnt[x], log=fslog, concurrent=True) for x in ("a", "b")}
    h.a.spool = os.path.join(mnt["a"], "spool")
    h.b.spool = os.path.join(mnt["b"], "spool")
    h.b.state = {a: os.path.join(mnt["b"], "agents", a) for a in agents}
    return disk, mnt, fs, fslog


def relay_skipped(report):
    """True, said in report, when a power-cut test of the relay cannot run
    here (no FUSE, no nats-server)."""
    import natsrv
    import pcfs
    why = pcfs.unusable() or (None if natsrv.available() else ("nats-server", "not installed"))
    if why:
        report.skip(*why)
    return bool(why)


def relay_teardown(daemons, fs):
    """Every daemon still running (daemons: host -> its lives) killed,
    both file systems unmounted."""
    for x in ("a", "b"):
        for d in daemons[x]:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
        fs[x].unmount()
