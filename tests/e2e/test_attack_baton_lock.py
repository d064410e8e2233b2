"""Attack (issue 18.1): a member of group handoff can open SPOOL/baton/ and
the spool directory itself, and hold flock(LOCK_EX) on them.  The daemon
must not wait for either: a Baton handoff and a plain one are delivered
while the locks are held, the control socket answers, and a daemon started
while the spool directory is locked still gets ready."""

import fcntl
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

WAIT_S = 20.0


class held:
    """flock(LOCK_EX) on path until join(): what the daemon does meanwhile
    it does while the lock is held, however long a loaded machine takes
    (a daemon that waited for the lock would time the waits out)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def join(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def test_attack_baton_lock_does_not_freeze(env):
    d = env.start()
    t = held(env.path("baton"))
    t0 = time.monotonic()
    try:
        b = hdproto.build("bob", "alice", env.key, ttl=600, extra={
            "payload_type": "baton/1", "payload": {
                "session_id": "sess-1", "stage_id": "plan",
                "baton": {"goal": "Add OAuth2 login flow.", "decision_log": ["Chose JWT"]}}})
        hdproto.drop(env.spool, b)
        lat = hdtest.handoff_latency(env, to="gordon", timeout=WAIT_S)
        ping = hdtest.ping_time(env.sockets["d0"], timeout=WAIT_S * hdtest.SLOW)
        hdtest.wait_for(lambda: b["handoff_id"] + ".json" in env.bootstraps("alice"),
                        timeout=WAIT_S, what="baton handoff delivered while baton/ is locked")
        t_baton = time.monotonic() - t0
    finally:
        t.join()
    rss = hdtest.proc_status(d.proc.pid, "VmHWM")
    print(f"baton/ locked by a member: plain handoff delivered in {lat:.2f}s, status answered "
          f"in {ping:.2f}s, baton handoff delivered after {t_baton:.2f}s, all with the lock "
          f"held; peak RSS {rss} kB")
    check(d.stop() == 0, "exit 0")


def test_attack_spool_lock_does_not_block_start(env):
    os.makedirs(env.spool, exist_ok=True)
    t = held(env.spool)
    try:
        t0 = time.monotonic()
        d = env.start(name="d1", wait=False)
        # fails once the daemon uses no CPU for WAIT_S (x SLOW): blocked
        d.wait_message("READY=1", timeout=WAIT_S)
        t_ready = time.monotonic() - t0
        lat = hdtest.handoff_latency(env, timeout=WAIT_S)
    finally:
        t.join()
    print(f"spool directory locked by a member: daemon ready after {t_ready:.2f}s, "
          f"a handoff delivered in {lat:.2f}s, both with the lock held")
    check(d.stop() == 0, "exit 0")


def main():
    with hdtest.Env(agents=["alice", "gordon"]) as env:
        test_attack_baton_lock_does_not_freeze(env)
        test_attack_spool_lock_does_not_block_start(env)


hdtest.run(main)
