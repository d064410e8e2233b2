"""Attack (issues 18.5, 19.7): control-socket connections opened and held
without a request, hundreds at once, from a peer the daemon serves and
from one it refuses.  The daemon's file descriptors stay bounded (at most
64 connections, 8 per uid; the oldest makes room), a status request from
another uid is still answered, deliveries do not fail, and the log gets a
bounded number of lines about it."""

import grp
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = 400
MAX_FDS = 64 + 40       # connections + the daemon's own (spool, agents, loop)
ROOT = os.geteuid() == 0


def hold_connections(sock, n, uid, gid, until_full=False):
    """A child (as uid/gid when we are root) holding n connections open
    until told to go; returns ((pid, pipe to tell it), how many it holds).
    until_full: it connects without blocking and stops at the first
    EAGAIN, the listen backlog full."""
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.close(r2)
        try:
            if ROOT:
                os.setgroups([gid])
                os.setgid(gid)
                os.setuid(uid)
            held = []
            for _ in range(n):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                if until_full:
                    s.setblocking(False)
                else:
                    s.settimeout(5)
                try:
                    s.connect(sock)
                except BlockingIOError:
                    s.close()
                    if until_full:
                        break
                    continue
                except OSError:
                    s.close()
                    continue
                held.append(s)
            os.write(w2, b"%d" % len(held))
            os.read(r, 1)
        finally:
            os._exit(0)
    os.close(r)
    os.close(w2)
    held = int(os.read(r2, 16) or b"0")
    os.close(r2)
    return (pid, w), held


def release(child):
    pid, w = child
    os.write(w, b"x")
    os.close(w)
    os.waitpid(pid, 0)


def control_lines(d):
    return sum("Control socket" in line for line in d.logs().splitlines())


def test_attack_control_fds_bounded(env, d):
    sock = env.sockets["d0"]
    fds0 = hdtest.fd_count(d.proc.pid)
    t0 = time.monotonic()
    child, _ = hold_connections(sock, N, 65534, 65534)
    t_open = time.monotonic() - t0
    try:
        fds = 0
        for _ in range(10):     # while the daemon accepts the backlog
            fds = max(fds, hdtest.fd_count(d.proc.pid))
            time.sleep(0.05)
        ping = hdtest.ping_time(sock, timeout=10)
        lat = hdtest.handoff_latency(env)
    finally:
        release(child)
    rss = hdtest.proc_status(d.proc.pid, "VmHWM")
    print(f"{N} connections held by a served peer ({'uid 65534' if ROOT else 'our uid'}) "
          f"in {t_open:.1f}s: daemon fds {fds0} -> {fds}; status from root answered in "
          f"{ping:.2f}s; handoff delivered in {lat:.2f}s; peak RSS {rss} kB")
    check(fds <= MAX_FDS, f"daemon holds {fds} fds")
    check(ping < 2 * hdtest.SLOW and lat < 2 * hdtest.SLOW, "answers and delivers")


def test_attack_control_refusal_log_bounded(env, d):
    if not ROOT:
        hdtest.skip_part("root", "the refused-peer flood needs another uid")
        return
    sock = env.sockets["d0"]
    os.chmod(sock, 0o666)   # let the filesystem allow it: the daemon must refuse
    before = control_lines(d)
    child, _ = hold_connections(sock, N, 65533, 65533)
    release(child)
    # A status request of ours, queued behind every connection the child
    # made: answered once the daemon has taken (and refused) them all.
    hdtest.ping_time(sock, timeout=10)
    lines = control_lines(d) - before
    print(f"{N} connections from a refused peer: {lines} log line(s)")
    check(lines <= 3, f"{lines} log lines for {N} refused connections")


def in_connect(pid):
    """Whether process pid sleeps in connect(2) (x86_64 and arm64 numbers)."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            nr = f.read().split()[0]
    except (OSError, IndexError):
        return False
    return nr in ("42", "203")


def test_status_waits_for_full_backlog(env, d, conf):
    """Item 43.14: with the backlog full (the daemon stopped while a peer
    filled it), handoffctl status and the tests' own connect wait for room
    instead of failing EAGAIN; both are answered once the daemon accepts."""
    sock = env.sockets["d0"]
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        child, n = hold_connections(sock, 1000, 65534, 65534, until_full=True)
        check(n > 0, f"the backlog took {n} connections before EAGAIN")
        st = subprocess.Popen([hdtest.HANDOFFCTL, "status", "-c", conf, "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        hdtest.wait_for(lambda: in_connect(st.pid), 10 * hdtest.SLOW,
                        "handoffctl status waiting in connect()")
        got = {}

        def ping():
            try:
                got["s"] = hdtest.ping_time(sock, timeout=10 * hdtest.SLOW)
            except OSError as e:
                got["e"] = e
        t = threading.Thread(target=ping)
        t.start()
        hdtest.wait_for(lambda: "e" in got or in_connect(f"{os.getpid()}/task/{t.native_id}"),
                        10 * hdtest.SLOW, "the test's status request waiting in connect()")
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
    try:
        t.join()
        out, err = st.communicate(timeout=30 * hdtest.SLOW)
    finally:
        release(child)
    check("e" not in got, f"the test's own status request failed: {got.get('e')}")
    ping = got["s"]
    print(f"backlog full at {n} connections: status answered (rc {st.returncode}), "
          f"a second status in {ping:.2f}s")
    check(st.returncode in (0, 1), f"handoffctl status exited {st.returncode}: {err}")
    check('"running": true' in out or '"running":true' in out, f"status saw the daemon: {out[:300]}")


def main():
    group = grp.getgrgid(65534).gr_name
    with hdtest.Env(agents=["alice"], shared=True) as env:
        conf = env.write_config(text=env.config_text().replace(
            "[control]\n", f"[control]\ngroup = {group}\n", 1))
        d = env.start(conf=conf)
        test_attack_control_fds_bounded(env, d)
        test_attack_control_refusal_log_bounded(env, d)
        test_status_waits_for_full_backlog(env, d, conf)
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
