#!/usr/bin/env python3
"""A move out of claimed/ is on disk in archive/ before claimed/ is synced,
whatever syncs claimed/ (issue 33, the power-cut loss of one handoff in 100
cuts: `lost: ... is in none of handoff/ claimed/ archive/ rejected/`).

The recovery sweep looks at the claimed items one after another and flushes
at the end of its slice: a taken item is archived (claimed/ -> archive/, a
change in each directory), and a later item whose bootstrap is still hidden
is published, which syncs claimed/ first.  That sync must not make the
taken item's removal from claimed/ durable before its arrival in archive/:
the power is cut right after the first sync of claimed/ that follows a move
into archive/ (powercutfs "arm rename /archive/ fsyncdir /claimed"), and
every taken item must then be in claimed/ or archive/.

The spool (on tests/powercut/powercutfs, fsync = yes) is made by the real
daemon: N handoffs delivered to alice, the daemon stopped; then every
other one in readdir order taken as a consumer takes it, the rest hidden
again (.pending.NAME, as a crash between the record and the publish leaves
them), so that the sweep archives a taken one, then publishes the next.
Ten rounds, a fresh spool each (the sweep's order and slices vary): on the
code before the fix 2 to 3 rounds in 10 lost the taken item.  Skipped (says why) where
FUSE cannot be mounted."""

import os
import signal
import sys

SRC = os.environ.get("HD_SRC", ".")
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
sys.path.insert(0, os.path.join(SRC, "tests", "powercut"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
import pcfs  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_PC_ORDER_N", "16"))
ROUNDS = int(os.environ.get("HD_PC_ORDER_ROUNDS", "10"))


def fsync_dir(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    why = pcfs.unusable()
    if why:
        hdtest.skip(*why)
    # The sweep's slice may end between the archive and the next look:
    # each round is a fresh spool, and any loss fails.
    for rnd in range(ROUNDS):
        one_round(rnd)


def one_round(rnd):
    with hdtest.Env(agents=["alice"], extra="[spool]\nresume_window = 3600\n") as env:
        disk, mnt = os.path.join(env.dir, "disk"), os.path.join(env.dir, "mnt")
        fs = pcfs.Mount(disk, mnt)
        env.spool = os.path.join(mnt, "spool")
        env.state = {"alice": os.path.join(mnt, "agents", "alice")}
        try:
            d = env.start(name="a")
            ids = []
            for _ in range(N):
                doc = hdproto.build("bob", "alice", env.key, ttl=3600)
                ids.append(doc["handoff_id"])
                hdproto.drop(env.spool, doc)
            hb = os.path.join(env.state["alice"], "handoffs")
            hdtest.wait_for(lambda: len(invariant.published(hb)) == N, 30, f"{N} bootstraps published")
            check(d.stop() == 0, "first daemon: exit 0")
            # Every other one taken (gone, as after a consumer's take), in
            # the order claimed/ is listed; the others hidden again
            # (.pending.NAME), so the publish of the next one syncs
            # claimed/ in the same sweep.  Every change synced: the cut
            # keeps it.
            order = [n[:-5] for n in os.listdir(os.path.join(env.spool, "claimed")) if n.endswith(".json")]
            check(sorted(order) == sorted(ids), f"claimed/ holds the {N} records")
            taken, hidden = order[0::2], order[1::2]
            for hid in order:
                name = invariant.bootstrap_name(hid)
                if hid in taken:
                    os.unlink(os.path.join(hb, name))
                else:
                    os.rename(os.path.join(hb, name), os.path.join(hb, ".pending." + name))
            fsync_dir(hb)
            fs.arm("rename", "/archive/", then=("fsyncdir", "/claimed"))
            e = env.start(name="b", wait=False)
            hdtest.wait_for(fs.is_cut, 30, "the cut after a claimed/ sync that follows a move into archive/")
            e.send(signal.SIGKILL)
            e.proc.wait()
            e.stop()
            fs.unmount()
            fs = pcfs.Mount(disk, mnt)
            names = {st: os.listdir(os.path.join(env.spool, st)) for st in ("claimed", "archive")}
            lost = [h for h in taken
                    if f"{h}.json" not in names["claimed"]
                    and not any(n.endswith(f"-{h}.json") for n in names["archive"])]
            print(f"round {rnd + 1}: {N} items: {len(taken)} taken, {len(hidden)} hidden at the start; "
                  f"after the cut: claimed/ {len([n for n in names['claimed'] if n.endswith('.json')])}, "
                  f"archive/ {len([n for n in names['archive'] if n.endswith('.json')])}; lost {len(lost)}")
            check(not lost, f"taken items in neither claimed/ nor archive/ after the cut: {lost}")
        finally:
            fs.unmount()


if __name__ == "__main__":
    hdtest.run(main)
