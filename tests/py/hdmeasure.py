"""What the e2e tests measure of a process: its CPU time, peak memory,
descriptors and inotify watches, a control socket's answer time.  stdlib
only; hdtest re-exports each (hdtest.cpu_s, ...).

A bound on work is one on CPU time (cpu_s, children_cpu, timed_ctl): a
loaded machine stretches wall time many times over, not the work done."""

import os
import resource
import socket
import struct
import time


def inotify_watches(pid):
    """How many inotify watches process pid holds (0 when it has none or
    is gone): /proc/PID/fdinfo lists one "inotify wd:" line per watch."""
    n = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                n += sum(1 for ln in f if ln.startswith("inotify wd:"))
        except OSError:
            continue
    return n


def proc_status(pid, field):
    """A field of /proc/PID/status in kB (VmHWM: peak RSS), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_s(pid):
    """utime + stime of process pid, in seconds: the work it did, which a
    loaded machine does not stretch as it stretches wall time."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu(fn, *args, **kw):
    """(CPU seconds of the child processes fn started and waited for, what
    fn returned): for a bound on a command's work that a loaded machine
    does not break (its wall time, printed beside, may be many times it)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    v = fn(*args, **kw)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, v


def timed_ctl(env, *args, daemon=None):
    """env.ctl(*args): (CPU seconds of handoffctl, and of daemon (a Daemon)
    meanwhile when given; wall seconds; its CompletedProcess)."""
    t0 = time.monotonic()
    c0 = cpu_s(daemon.proc.pid) if daemon else 0.0
    cpu, p = children_cpu(env.ctl, *args)
    if daemon:
        cpu += cpu_s(daemon.proc.pid) - c0
    return cpu, time.monotonic() - t0, p


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def connect_unix(sock, timeout):
    """A stream socket connected to the Unix socket at sock, having waited
    up to timeout seconds for room in its listen backlog.  Python's
    settimeout() makes a socket non-blocking, and a non-blocking connect
    to a Unix socket with a full backlog fails EAGAIN at once: connect
    blocking instead, bounded by SO_SNDTIMEO (the kernel's wait for a
    Unix connect), as handoffctl status does."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        left = max(0.001, deadline - time.monotonic())
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                     struct.pack("ll", int(left), int(left % 1 * 1e6)))
        try:
            s.connect(sock)
        except BlockingIOError:
            s.close()
            if time.monotonic() >= deadline:
                raise
            continue
        except BaseException:
            s.close()
            raise
        s.settimeout(timeout)
        return s


def ping_time(sock, timeout=30.0):
    """Seconds the control socket takes to answer one status request."""
    t0 = time.monotonic()
    s = connect_unix(sock, timeout)
    try:
        s.sendall(b'{"command":"status"}\n')
        while s.recv(65536):
            pass
    finally:
        s.close()
    return time.monotonic() - t0
