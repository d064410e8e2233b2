"""The service manager's notifications, which handoffd writes itself
(src/lib/private/notify.c, no libsystemd), as a real datagram socket receives
them:

- NOTIFY_SOCKET as an abstract name ("@name"): READY=1, STATUS=,
  RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC, in the same datagram)
  then READY=1 on SIGHUP, STOPPING=1 on SIGTERM;
- WATCHDOG_USEC with WATCHDOG_PID set to another process's pid: no
  WATCHDOG=1 (the variables are for a process up the tree), as
  sd_watchdog_enabled(3) says; with WATCHDOG_PID our own pid: WATCHDOG=1;
- a WATCHDOG_USEC that is not a number: no WATCHDOG=1, the daemon runs.
(A path NOTIFY_SOCKET and WATCHDOG_USEC without WATCHDOG_PID are what
every other test and test_daemon_watch.py use.)"""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

WATCHDOG_USEC = "200000"        # WATCHDOG=1 every 100 ms when enabled


def start(env, name, **kw):
    conf = env.write_config(name)
    d = hdtest.Daemon(env, conf, name, **kw)
    env.daemons.append(d)
    d.wait_message("READY=1")
    return d


def watchdogs(d, seconds=1.0):
    time.sleep(seconds * hdtest.SLOW)
    return d.messages.count("WATCHDOG=1")


def test_abstract_socket(env):
    d = start(env, "abs", notify_abstract=True)
    check(d.notify_path.startswith("@"), f"an abstract NOTIFY_SOCKET: {d.notify_path}")
    doc = hdproto.build("bob", "alice", env.key)
    hdproto.drop(env.spool, doc)
    hdtest.wait_for(lambda: any(m.startswith("STATUS=claimed 1,") for m in d.messages),
                    what=f"STATUS= with the claim: {d.messages}")
    d.send(signal.SIGHUP)
    hdtest.wait_for(lambda: d.messages.count("READY=1") >= 2, what="READY=1 after the reload")
    i = d.messages.index("RELOADING=1")
    mono = d.messages[i + 1] if i + 1 < len(d.messages) else ""
    check(mono.startswith("MONOTONIC_USEC="), f"MONOTONIC_USEC= with RELOADING=1: {d.messages}")
    usec = int(mono.split("=", 1)[1])
    now = time.monotonic_ns() // 1000
    check(0 <= now - usec < 30 * 1000000, f"MONOTONIC_USEC on CLOCK_MONOTONIC: {usec} vs {now}")
    check(d.stop() == 0, "stop")
    check("STOPPING=1" in d.messages, f"STOPPING=1 on the abstract socket: {d.messages}")


def test_watchdog_pid_other(env):
    # pid 1 is never us: the keep-alives are expected of another process.
    d = start(env, "wdother", env_vars={"WATCHDOG_USEC": WATCHDOG_USEC, "WATCHDOG_PID": "1"})
    n = watchdogs(d)
    check(n == 0, f"no WATCHDOG=1 for WATCHDOG_PID=1: {n} sent")
    check(d.stop() == 0, "stop")


def test_watchdog_pid_ours(env):
    # The shell's pid is the daemon's after exec: WATCHDOG_PID names it.
    conf = env.write_config("wdours")
    argv = ["/bin/sh", "-c", 'WATCHDOG_PID=$$ exec "$0" "$@"', hdtest.HANDOFFD,
            "-f", "-v", "-c", conf]
    d = hdtest.Daemon(env, conf, "wdours", env_vars={"WATCHDOG_USEC": WATCHDOG_USEC},
                      argv=argv)
    env.daemons.append(d)
    d.wait_message("READY=1")
    n = watchdogs(d)
    check(n >= 3, f"WATCHDOG=1 every WATCHDOG_USEC/2 for our own WATCHDOG_PID: {n} in 1 s")
    check(d.stop() == 0, "stop")


def test_watchdog_usec_bad(env):
    d = start(env, "wdbad", env_vars={"WATCHDOG_USEC": "200ms"})
    n = watchdogs(d, 0.5)
    check(n == 0, f"no WATCHDOG=1 for WATCHDOG_USEC=200ms: {n} sent")
    check(d.proc.poll() is None, "still running")
    check(d.stop() == 0, "stop")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        test_abstract_socket(env)
        test_watchdog_pid_other(env)
        test_watchdog_pid_ours(env)
        test_watchdog_usec_bad(env)
        print("abstract NOTIFY_SOCKET: READY/STATUS/RELOADING+MONOTONIC_USEC/STOPPING; "
              "WATCHDOG_PID of another pid: none, ours: sent; bad WATCHDOG_USEC: none")


hdtest.run(main)
