"""A claim's leftover whose item was archived before it was looked at
goes as the claim's, not as a rejection.

A claim moves the producer's file out of handoff/ (to spent/), a move a
power cut may undo; the file then comes back beside the item its claim
made, and goes as that claim's leftover (claim_leftover() in decide.c).
A restart's sweep may archive that item (consumed, or expired) before
the start's scan looks at the file: the record has left claimed/ for
archive/, and the file was judged again, a duplicate_id (consumed) or
expired (expired since), so that one handoff_id sat in archive/ and in
rejected/ (test_powercut, "twice").  The archive's replay mark
ids/<id> is the other link of the item's .outcome, which says where
the archived record is; a file that record holds, written before it,
goes with "left by a crash".

Here the undone move is made by hand while the daemon is down: the
producer's bytes under their name with their mtime.  A copy written
later (a replay) is still rejected as duplicate_id."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def drop_dated(env, doc, mtime_ns):
    """hdproto.drop() with the file's mtime set (the producer's)."""
    name = f"{doc['handoff_id']}.json"
    tmp = env.path("tmp", "." + name + ".tmp")
    os.makedirs(env.path("tmp"), exist_ok=True)
    with open(tmp, "wb") as f:
        f.write(hdproto.dumps(doc))
    os.utime(tmp, ns=(mtime_ns, mtime_ns))
    os.rename(tmp, env.path("handoff", name))
    return name


def main():
    with hdtest.Env(agents=["alice"]) as env:
        conf = env.write_config("d0", text=env.config_text("d0").replace(
            "rescan_interval = 5", "rescan_interval = 1\nresume_window = 3"))
        d = env.start(conf=conf)
        t0 = time.time_ns() - 2_000_000_000

        # consumed: its leftover is fresh (the duplicate_id path)
        a = hdproto.build("bob", "alice", env.key, ttl=600)
        # expired: its leftover is past its expires_at (the stale path)
        b = hdproto.build("bob", "alice", env.key, ttl=3)
        for doc in (a, b):
            drop_dated(env, doc, t0)
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == 2, 20 * hdtest.SLOW,
                        "both delivered")
        check(hdtest.real_consumer(env.state["alice"], a["handoff_id"]) is not None,
              "alice consumes a")
        hdtest.wait_for(lambda: env.item(a["handoff_id"])["state"] == "archive" and
                        env.item(b["handoff_id"])["state"] == "archive", 30 * hdtest.SLOW,
                        "a archived consumed, b expired")
        check(env.item(b["handoff_id"]).get("outcome") == "expired",
              f"b expired: {env.item(b['handoff_id'])}")
        check(d.stop() == 0, "stop")

        # The claims' moves undone: the producer's files back, as they were.
        for doc in (a, b):
            drop_dated(env, doc, t0)
        d = env.start(conf=conf)
        said = [f"archived already as {doc['handoff_id']} (left by a crash)" for doc in (a, b)]
        # The daemon's info lines leave when its loop sleeps: after the
        # removals show, so the lines are waited for too.
        hdtest.wait_for(lambda: env.names("handoff") == [] and
                        all(x in d.logs() for x in said), 20 * hdtest.SLOW,
                        lambda: f"the leftovers gone from handoff/ ({env.names('handoff')}), "
                                f"each said:\n{d.logs()[-3000:]}")
        for doc in (a, b):
            hid = doc["handoff_id"]
            st = env.item(hid)
            check(st["state"] == "archive", f"{hid} stays archived only: {st}")
        check(env.names("rejected") == [], f"nothing rejected: {env.names('rejected')}")

        # A copy of a written now is a replay.
        hdproto.drop(env.spool, a)
        hdtest.wait_for(lambda: env.items("rejected") != [], 20 * hdtest.SLOW,
                        "the replay rejected")
        rj = env.items("rejected")
        check(len(rj) == 1 and env.reason_of(rj[0])["reason"] == "duplicate_id",
              f"the replay rejected as duplicate_id: {rj} {[env.reason_of(n) for n in rj]}")
        check(d.stop() == 0, "the daemon stops with exit 0")
        print("ok: two leftovers of archived items went, a replay was rejected")


hdtest.run(main)
