"""Attack (issue 18.1): a member of group handoff can open SPOOL/baton/ and
the spool directory itself, and hold flock(LOCK_EX) on them.  The daemon
must not wait for either: a Baton handoff and a plain one are delivered
while the locks are held, the control socket answers, and a daemon started
while the spool directory is locked still gets ready."""

import fcntl
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

HOLD_S = 6.0
QUICK_S = 2.0 * hdtest.SLOW


class held:
    """flock(LOCK_EX) on path, released after HOLD_S at the latest (so the
    old daemon's wait can be measured), or at join() once the test is done."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        self.lock = threading.Lock()
        self.timer = threading.Timer(HOLD_S, self.release)
        self.timer.start()

    def release(self):
        with self.lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1

    def join(self):
        self.timer.cancel()
        self.release()


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
        time.sleep(0.2)
        lat = hdtest.handoff_latency(env, to="gordon", timeout=HOLD_S + 5)
        ping = hdtest.ping_time(env.sockets["d0"])
        hdtest.wait_for(lambda: b["handoff_id"] + ".json" in env.bootstraps("alice"),
                        timeout=HOLD_S + 5, what="baton handoff delivered")
        t_baton = time.monotonic() - t0
    finally:
        t.join()
    rss = hdtest.proc_status(d.proc.pid, "VmHWM")
    print(f"baton/ locked by a member: plain handoff delivered in {lat:.2f}s, status answered "
          f"in {ping:.2f}s, baton handoff delivered after {t_baton:.2f}s; peak RSS {rss} kB")
    check(lat < QUICK_S, f"a plain handoff waited {lat:.1f}s behind a lock on baton/")
    check(ping < QUICK_S, f"status waited {ping:.1f}s")
    check(t_baton < QUICK_S, f"the baton handoff waited {t_baton:.1f}s")
    check(d.stop() == 0, "exit 0")


def test_attack_spool_lock_does_not_block_start(env):
    os.makedirs(env.spool, exist_ok=True)
    t = held(env.spool)
    try:
        t0 = time.monotonic()
        d = env.start(name="d1", wait=False)
        try:
            d.wait_message("READY=1", timeout=HOLD_S / 2)
        except hdtest.Fail:
            pass
        t_ready = time.monotonic() - t0
        ready = "READY=1" in d.messages
        lat = hdtest.handoff_latency(env, timeout=HOLD_S + 5)
    finally:
        t.join()
    print(f"spool directory locked by a member: daemon ready after {t_ready:.2f}s "
          f"({'ready' if ready else 'NOT ready'}), handoff latency "
          f"{lat:.2f}s")
    check(ready, f"daemon not ready {t_ready:.1f}s after start while the spool is locked")
    check(lat < QUICK_S, f"handoff waited {lat:.1f}s")
    check(d.stop() == 0, "exit 0")


def main():
    with hdtest.Env(agents=["alice", "gordon"]) as env:
        test_attack_baton_lock_does_not_freeze(env)
        test_attack_spool_lock_does_not_block_start(env)


hdtest.run(main)
