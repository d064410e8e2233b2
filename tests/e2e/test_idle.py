"""An idle handoffd sleeps: no STATUS= and no wake-up while nothing
changes (rescan_interval 60 s, a real NOTIFY_SOCKET), and STATUS= follows
the counts within a couple of seconds when something does change.

Wake-ups are the daemon's voluntary context switches (/proc/PID/status)
over an idle window.  Prints the figures.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

IDLE_S = float(os.environ.get("HD_IDLE_S", "11"))


def switches(pid):
    """Voluntary context switches of every thread of pid."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total


def main():
    with hdtest.Env(agents=["alice"]) as env:
        text = env.config_text().replace("rescan_interval = 5", "rescan_interval = 60")
        d = env.start(conf=env.write_config("d0", text=text))
        # The STATUS= sent right after READY=1 (service.c mark_ready()) in,
        # and the start settled, before the idle window is counted.
        hdtest.wait_for(lambda: any(m.startswith("STATUS=") for m in d.messages),
                        what=lambda: f"the STATUS= of the start: {d.messages}")
        time.sleep(1.5 * hdtest.SLOW)
        status_before = [m for m in d.messages if m.startswith("STATUS=")]
        sw0 = switches(d.proc.pid)
        time.sleep(IDLE_S)
        sw1 = switches(d.proc.pid)
        status_idle = [m for m in d.messages if m.startswith("STATUS=")][len(status_before):]
        print(f"idle {IDLE_S:.0f}s (rescan_interval 60s): {sw1 - sw0} wake-up(s), "
              f"{len(status_idle)} STATUS= message(s)")
        check(status_idle == [], f"STATUS= sent while idle: {status_idle}")
        check(sw1 - sw0 == 0, f"the idle daemon woke up {sw1 - sw0} time(s) in {IDLE_S:.0f}s")

        # A change is told, once, soon.
        t0 = time.monotonic()
        hdproto.drop(env.spool, hdproto.build("bob", "alice", env.key))
        hdtest.wait_for(lambda: any(m.startswith("STATUS=claimed 1,") for m in d.messages),
                        timeout=5, what="STATUS= with claimed 1")
        took = time.monotonic() - t0
        time.sleep(2.5 * hdtest.SLOW)
        claimed = [m for m in d.messages if m.startswith("STATUS=claimed 1,")]
        print(f"a claim: STATUS= after {took:.1f}s, {len(claimed)} message(s) for it")
        check(len(claimed) == 1, f"STATUS= for one change sent {len(claimed)} times: {claimed}")
        check(d.stop() == 0, "stop")


hdtest.run(main)
