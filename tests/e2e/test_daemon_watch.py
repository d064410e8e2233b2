"""The watch on handoff/: when the directory disappears (removed, or moved
away) the daemon re-creates and re-watches it and goes on, never spinning;
WATCHDOG=1 is sent when WATCHDOG_USEC is set; STATUS= carries counts."""

import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        conf = env.write_config("d0")
        d = hdtest.Daemon(env, conf, "d0", env_vars={"WATCHDOG_USEC": "200000"})
        env.daemons.append(d)
        d.wait_message("READY=1")

        for how in ("rmdir", "move away"):
            hd = env.path("handoff")
            if how == "rmdir":
                os.rmdir(hd)
            else:
                os.rename(hd, os.path.join(env.dir, "moved-away"))
            hdtest.wait_for(lambda: os.path.isdir(hd), what=f"handoff/ re-created after {how}")
            # the new watch in place (not a fixed pause): then a drop is
            # claimed through it, well before the next rescan
            hdtest.wait_for(lambda: d.status()["daemon"]["watch_ok"] is True, timeout=10,
                            what=f"the watch on handoff/ back after {how}")
            doc = hdproto.build("bob", "alice", env.key)
            hdproto.drop(env.spool, doc)
            hdtest.wait_for(lambda: doc["handoff_id"] + ".json" in env.bootstraps("alice"),
                            timeout=3, what=f"claim through the new watch after {how}")
            check(d.proc.poll() is None, "still running")
        c0 = cpu_s(d.proc.pid)
        time.sleep(1.0)
        check(cpu_s(d.proc.pid) - c0 < 0.2, "idle after re-watching: no spin")
        st = d.status()
        check(st["daemon"]["watch_ok"] is True, "watch healthy again")
        wd = [m for m in d.messages if m == "WATCHDOG=1"]
        check(len(wd) >= 3, f"WATCHDOG=1 sent every WATCHDOG_USEC/2: {len(wd)} in the run")
        check(any(m.startswith("STATUS=claimed 2") for m in d.messages) or
              any(m.startswith("STATUS=") for m in d.messages), f"STATUS= sent: {d.messages[:5]}")
        check("disappeared" in d.logs(), "the loss is logged")
        shutil.rmtree(os.path.join(env.dir, "moved-away"), ignore_errors=True)
        check(d.stop() == 0, "stop")
        print(f"handoff/ removed and moved away: re-created and re-watched; {len(wd)} WATCHDOG=1")


hdtest.run(main)
