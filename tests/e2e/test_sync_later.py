"""The files the relay writes are synced with the other files of their
loop turn, before any directory that names them (issue 48: the relay
with fsync = yes).

With fsync = yes, handoffd used to fsync each of these files alone, in
the loop, before its name was made: on a, the take's copy in outbox/ and
its note (outbox/.<id>.src), the .outcome of an archive from outbox/ and
a receipt's rewrite of it; on b, a relayed message's file in handoff/.
That was four or five waits for the disk per item, one after the other.
Now each is written, named, and its descriptor kept
(store_sync_later()); the next store_flush() syncs them together
(fsync_many_at()) before it syncs any directory.

An LD_PRELOAD shim (tests/py/fsyncshim.py) logs every fsync() and every
name made (renameat, renameat2, linkat) on both hosts.
- 40 handoffs relayed a -> b, receipts on: each file of those kinds is
  synced after its name was made and before the first sync of its
  directory after that, so a name that a flush makes durable never
  holds an empty file after a power cut; and its writeback was begun
  (sync_file_range) before the name, so that a journal commit of ext4
  or XFS forced by another file's fsync does not make the name durable
  before the bytes.  Every one is delivered on b
  exactly once; nothing is rejected.
- The shim then fails the first 2 fsync()s of a copy in a's outbox/ (an
  O_TMPFILE linked in: its descriptor's path is "#N (deleted)")
  with EIO.  The syncs of the directories wait: no fsync of a's outbox/
  or handoff/ from the first failure until the retry succeeds.  The
  failure is logged once, and so is the recovery.  The 10 handoffs
  dropped meanwhile are relayed exactly once.
On the code before this change the first check fails: each file was
synced before its name existed, and never after."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import fsyncshim  # noqa: E402
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

FAILS = 2
# the files synced later, by host: a path under the host's directory
LATER = {"a": re.compile(r"/spool/(outbox/[^/]+\.json|outbox/\.[^/]+\.src|archive/[^/]+\.outcome)$"),
         "b": re.compile(r"/spool/handoff/[^/.][^/]*\.json$")}


def unstarted_names(events, rx):
    """The names made (rx) whose file's writeback was not begun before
    the name (write_start()): [path]."""
    started, bad = set(), []
    for t, path, rc, op, _, ino in events:
        if op == "start" and rc == 0:
            started.add(ino)
        elif op == "name" and rx.search(path) and ino not in started:
            bad.append(path)
    return bad


def unsynced_names(events, rx):
    """The names made (rx) whose file (its inode) was not synced after the
    name and before the next sync of its directory: [(path, why)]."""
    bad = []
    for i, (t, path, _, op, _, ino) in enumerate(events):
        if op != "name" or not rx.search(path):
            continue
        d = os.path.dirname(path)
        later = events[i + 1:]
        dsync = next((x for x in later if x[3] == "fsync" and x[1] == d), None)
        if dsync is None:
            continue        # its directory not synced since: nothing durable names it
        ok = any(x[3] == "fsync" and x[5] == ino and x[2] == 0 and x[4] >= t and x[0] <= dsync[4]
                 for x in later)
        if not ok:
            bad.append((path, f"{os.path.basename(d)}/ synced {dsync[4] - t:.4f}s after the name, "
                              "the file not before it"))
    return bad


def settled(h, a, n):
    """n relayed from a, each with its remote outcome, none awaited."""
    hdtest.wait_for(lambda: sum(1 for o in h.relayed_on_a().values() if o.get("remote_outcome"))
                    >= n and relaykit.receipt_status(a).get("awaited") == 0,
                    30 * hdtest.SLOW, f"the receipts of {n} applied on a")


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts(fsync=True) as h:
        h.enable_receipts()
        so = fsyncshim.build(h.a)
        logs = {x: os.path.join(env.dir, "fsync.log") for x, env in (("a", h.a), ("b", h.b))}
        arm = os.path.join(h.a.dir, "arm")
        a = h.start_a(env_vars=fsyncshim.env_vars(so, h.a.dir, logs["a"], names=1, arm=arm,
                                                  fail_suffix="(deleted)", fail_n=FAILS))
        b = h.start_b(env_vars=fsyncshim.env_vars(so, h.b.dir, logs["b"], names=1))
        relaykit.wait_ready(a, b)

        ids = h.drop(40)
        h.wait_delivered(ids)
        settled(h, a, len(ids))
        counts = {}
        for x in ("a", "b"):
            ev = fsyncshim.read_log(logs[x])
            names = [e for e in ev if e[3] == "name" and LATER[x].search(e[1])]
            counts[x] = len(names)
            bad = unsynced_names(ev, LATER[x])
            check(not bad, f"{x}: {len(bad)} of {len(names)} names not synced before their "
                           f"directory, e.g. {bad[:3]}")
            cold = unstarted_names(ev, LATER[x])
            check(not cold, f"{x}: {len(cold)} of {len(names)} named before their writeback "
                            f"began, e.g. {cold[:3]}")
        print(f"names checked: a {counts['a']}, b {counts['b']}")
        # a: per item its copy, its note, its .outcome, the receipt's rewrite
        check(counts["a"] >= 3 * len(ids) and counts["b"] >= len(ids),
              f"too few names seen: {counts} for {len(ids)} items")
        h.check_exactly_once(ids)

        # A copy's fsync fails: the rounds wait for its retry.
        open(arm, "w").close()
        more = h.drop(10)
        expect = "fsync of a file in outbox/ succeeded again after"
        hdtest.wait_for(lambda: expect in a.logs(), 30 * hdtest.SLOW, "the recovery")
        h.wait_delivered(ids + more)
        ev = fsyncshim.read_log(logs["a"])
        fails = [e for e in ev if e[3] == "fsync" and e[2] < 0]
        check(len(fails) == FAILS and all("/spool/outbox/" in e[1] or "/spool/archive/" in e[1]
                                          for e in fails), f"the failed fsyncs: {fails}")
        t0, t1 = fails[0][0], fails[-1][0]
        dirs = {os.path.join(h.a.spool, "outbox"), os.path.join(h.a.spool, "handoff")}
        between = [e for e in ev if e[3] == "fsync" and e[1] in dirs and t0 <= e[4] <= t1]
        check(not between, f"directories synced between the failures: {between[:3]}")
        after = [e for e in ev if e[3] == "fsync" and e[1] in dirs and e[4] > t1]
        check(after, "outbox/ and handoff/ never synced after the retry")
        print(f"a copy's fsync failed {FAILS} times over {t1 - t0:.1f}s; outbox/ and handoff/ "
              f"waited, synced {after[0][4] - t1:.3f}s after the last failure")
        said = a.logs()
        check(said.count("Cannot fsync a file in outbox/") == 1,
              f"the failure said once:\n{said[-3000:]}")
        check(said.count(expect) == 1, f"the recovery said once:\n{said[-3000:]}")
        settled(h, a, len(ids) + len(more))
        h.check_exactly_once(ids + more)
        check(a.stop() == 0 and b.stop() == 0, "both exit 0")


hdtest.run(main)
