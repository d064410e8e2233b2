"""Attack (issue 19.6): alice's state_dir/handoffs is replaced by a symlink
to bob's state dir; after SIGHUP the daemon used to write a bootstrap over
bob's settings.json (handoff_id "settings") and delete it later.

- after the swap and SIGHUP, and across a restart with the link in place,
  nothing in bob's directory is created, changed or removed, however long
  the item waits (resume_window 1 s);
- the daemon says it does not serve alice and why, keeps serving bob, and
  keeps running;
- once the link is replaced by a directory again and the daemon reloads,
  the handoff waiting for alice is claimed into her real directory."""

import os
import signal
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402

EXTRA = "[spool]\nresume_window = 1\n"


def past_a_sweep(env, bob):
    """Wait (a condition, not a fixed time) until the daemon has let a
    handoff to bob pass its resume_window and archived it as expired: its
    sweep and timers have run since, which is when harm through the link
    would show."""
    canary = hdproto.build("carol", "bob", env.key, ttl=600)
    hdproto.drop(env.spool, canary)
    hdtest.wait_for(lambda: [n for n in env.items("archive") if n.endswith(canary["handoff_id"] + ".json")],
                    timeout=30, what="a handoff to bob archived as expired (resume_window 1 s)")


def main():
    with hdtest.Env(agents=["alice", "bob"]) as env:
        conf = env.write_config("d0")
        with open(conf) as f:
            text = f.read().replace("rescan_interval = 5", "rescan_interval = 1\nresume_window = 1")
        with open(conf, "w") as f:
            f.write(text)
        d = env.start(conf=conf)
        bob = env.state["bob"]
        with open(os.path.join(bob, "settings.json"), "w") as f:
            f.write('{"theme": "dark"}\n')
        snap = invariant.snapshot(bob, exclude=(os.path.join(bob, "handoffs"),))

        hd = os.path.join(env.state["alice"], "handoffs")
        os.rename(hd, hd + ".moved")
        os.symlink(bob, hd)
        d.send(signal.SIGHUP)
        hdtest.wait_for(lambda: "Reload" in d.logs() or "Not serving" in d.logs(), what="reload")
        doc = hdproto.build("carol", "alice", env.key, handoff_id="settings", ttl=600)
        hdproto.drop(env.spool, doc)
        to_bob = hdproto.build("carol", "bob", env.key, ttl=600)
        hdproto.drop(env.spool, to_bob)
        hdtest.wait_for(lambda: os.path.exists(os.path.join(bob, "handoffs", to_bob["handoff_id"] + ".json")),
                        what="bob still served")
        past_a_sweep(env, bob)
        v = invariant.compare(bob, snap, exclude=(os.path.join(bob, "handoffs"),))
        check(not v, "after SIGHUP: bob's directory touched:\n  " + "\n  ".join(v))
        check(d.proc.poll() is None, "the daemon exited")
        check("Not serving agent alice" in d.logs(), "no report that alice is not served")
        check("settings.json" in env.names("handoff"), f"the handoff to alice is not waiting: {env.names('handoff')}")
        line = [ln for ln in d.logs().splitlines() if "Not serving agent alice" in ln][0]
        print(f"- handoffs swapped for a link, SIGHUP: bob's dir untouched; {line.strip()}")

        # A restart with the link still there: starts, still untouched.
        check(d.stop() == 0, "exit 0")
        d = env.start(name="d1", conf=conf)
        past_a_sweep(env, bob)
        v = invariant.compare(bob, snap, exclude=(os.path.join(bob, "handoffs"),))
        check(not v, "after a restart: bob's directory touched:\n  " + "\n  ".join(v))
        print("- restart with the link in place: started, bob's dir untouched")

        # Repaired: the waiting handoff reaches alice's real directory.
        os.unlink(hd)
        os.rename(hd + ".moved", hd)
        d.send(signal.SIGHUP)
        hdtest.wait_for(lambda: os.path.exists(os.path.join(hd, "settings.json")), what="claim after repair")
        check(not invariant.compare(bob, snap, exclude=(os.path.join(bob, "handoffs"),)), "bob's directory touched")
        check(d.stop() == 0, "exit 0")
        print("- link replaced by the directory, SIGHUP: claimed into alice's own handoffs/")


if __name__ == "__main__":
    hdtest.run(main)
