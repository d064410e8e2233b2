#!/usr/bin/env python3
"""handoffd benchmark (`make bench`), stdlib only.

handoffd against bench/floor (a plain C loop doing the same work per item
with the same library calls, see floor.c), on the same generated items
(about 2 KB each), each run on a fresh temp spool, alternating floor,
handoffd, floor, handoffd ... within each round; medians of the rounds.
Both programs run through the test kit's runner (tests/py/hdtest.py
Daemon: a NOTIFY_SOCKET read for the whole run, the clock starting at
READY=1).  Phases, each for the floor and for handoffd:

  burst    N items dropped back to back (fsync off, then on: the floor
           --watch syncs per item): items/s, CPU per item, memory after
  burst_tmpfs  the fsync-off burst with the temp spools on tmpfs (--tmpfs,
           /dev/shm): no disk, the programs' own cost
  syscalls a burst of --strace-n (1,000), fsync off, the program alone
           under strace -f: system calls per item by call, and the inodes
           it creates, renames, links and unlinks per item
  latency  items dropped one at a time at a fixed rate (fsync off and on):
           drop-to-bootstrap p50/p99; before the first drop of the fsync
           off run, the idle wake-ups per second
  backlog  items already in handoff/ when the program starts (floor
           --batch): time from start to the last bootstrap, memory after

One table at the end: each figure for the floor, for handoffd and as the
ratio handoffd/floor; the syscalls phase's per-call table (floor,
handoffd, handoffd - floor); and one machine-readable line
"BENCH_JSON {...}".
See bench/README.md.
"""

import argparse
import ctypes
import ctypes.util
import json
import os
import platform
import re
import select
import shlex
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.environ.get("HD_SRC", os.path.join(HERE, "..")))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
import hdproto  # noqa: E402
import hdtest   # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
AGENT = "alice"
PROGS = ("floor", "handoffd")
PHASES = ("burst", "burst_tmpfs", "syscalls", "latency", "backlog", "relay", "hub")
ITEM_BYTES = 2048    # about this many bytes per handoff file


class BenchError(Exception):
    pass


# ---------------------------------------------------------------- inotify

IN_MOVED_TO = 0x00000080
IN_Q_OVERFLOW = 0x00004000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_EVHDR = struct.Struct("iIII")  # wd, mask, cookie, len

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.inotify_init1.argtypes = [ctypes.c_int]
_libc.inotify_init1.restype = ctypes.c_int
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
_libc.inotify_add_watch.restype = ctypes.c_int
_libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_libc.read.restype = ctypes.c_ssize_t


class Watcher(threading.Thread):
    """Records time.monotonic() of each IN_MOVED_TO name in one directory:
    the moment a bootstrap is renamed into place, when its agent could read
    it.  The thread blocks in poll(2) and read(2) (libc through ctypes:
    both release the GIL), so a timestamp is taken as soon as the thread
    runs after the kernel queued the event."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if _libc.inotify_add_watch(self.fd, path.encode(), IN_MOVED_TO | IN_Q_OVERFLOW) < 0:
            e = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(e, f"inotify_add_watch {path}")
        self.seen = {}          # name -> first monotonic time
        self.dups = {}          # name -> extra IN_MOVED_TO count
        self.overflow = False
        self.cond = threading.Condition()
        self.stop_r, self.stop_w = os.pipe()
        self.buf = ctypes.create_string_buffer(1 << 18)

    def run(self):
        p = select.poll()
        p.register(self.fd, select.POLLIN)
        p.register(self.stop_r, select.POLLIN)
        while True:
            ready = p.poll()
            if any(fd == self.stop_r for fd, _ in ready):
                return
            n = _libc.read(self.fd, self.buf, len(self.buf))
            now = time.monotonic()
            if n <= 0:
                continue
            data = self.buf.raw[:n]
            off = 0
            while off < n:
                wd, mask, cookie, ln = _EVHDR.unpack_from(data, off)
                name = data[off + 16:off + 16 + ln].split(b"\0", 1)[0].decode("utf-8", "replace")
                off += 16 + ln
                if mask & IN_Q_OVERFLOW:
                    self.overflow = True
                    continue
                if not name or name.startswith("."):
                    continue
                if name in self.seen:
                    self.dups[name] = self.dups.get(name, 0) + 1
                else:
                    self.seen[name] = now
            with self.cond:
                self.cond.notify_all()

    def count(self):
        """Bootstraps seen; after a queue overflow, the names on disk."""
        if self.overflow:
            return len([x for x in os.listdir(self.path) if not x.startswith(".")])
        return len(self.seen)

    def wait_count(self, n, timeout, alive=lambda: True):
        """True once n bootstraps are there; False after timeout or when
        alive() says the program is gone and nothing more comes."""
        deadline = time.monotonic() + timeout
        dead_since = None
        while True:
            with self.cond:
                if self.count() >= n:
                    if self.overflow:   # the time of the last one is lost
                        self.t_done = time.monotonic()
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.05 if self.overflow else 0.5))
            if not alive():
                dead_since = dead_since or time.monotonic()
                if time.monotonic() - dead_since > 1.0:
                    return self.count() >= n

    def last(self):
        if self.overflow and hasattr(self, "t_done"):
            return self.t_done
        return max(self.seen.values()) if self.seen else None

    def close(self):
        os.write(self.stop_w, b"x")
        self.join(5)
        for fd in (self.fd, self.stop_r, self.stop_w):
            os.close(fd)


# ---------------------------------------------------------------- /proc

def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = int(v.split()[0])   # kB
    return out


def proc_cpu(pid):
    """utime+stime of the process (all its threads) in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    # fields[0] is field 3 (state): utime is field 14, stime field 15
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_switches(pid):
    """Context switches of all the process's threads: each time a thread
    blocks (voluntary) or is preempted counts one, so an idle wake-up
    (a timer, a poll that returns) adds at least one."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass    # a thread that just ended
    return total


# ---------------------------------------------------------------- runs

def presign(key, n):
    """(file name, bytes) for n valid handoffs to alice of about ITEM_BYTES
    each (a longer transcript), signed now by the reference signer."""
    turn = "I need to move my appointment to next week, and check the invoice too. "
    out = []
    for i in range(n):
        transcript = [{"role": "user" if t % 2 == 0 else "assistant", "text": f"{t}: {turn * 3}"}
                      for t in range(7)]
        doc = hdproto.build("bob", AGENT, key, ttl=3000, transcript=transcript)
        data = hdproto.dumps(doc)
        out.append((doc["handoff_id"] + ".json", data))
    return out


def stage_one(tmp_fd, name, data):
    """The real writer's first step: the whole file under a temp name in tmp/."""
    tname = "." + name + ".tmp"
    fd = os.open(tname, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=tmp_fd)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return tname


def publish_one(tmp_fd, hand_fd, tname, name):
    """Its second step, the drop: the rename into handoff/."""
    os.rename(tname, name, src_dir_fd=tmp_fd, dst_dir_fd=hand_fd)
    return time.monotonic()


def drop_one(tmp_fd, hand_fd, name, data):
    return publish_one(tmp_fd, hand_fd, stage_one(tmp_fd, name, data), name)


def pct(sorted_vals, p):
    if not sorted_vals:
        return None
    # nearest-rank percentile
    k = max(0, min(len(sorted_vals) - 1, int(-(-p * len(sorted_vals) // 100)) - 1))
    return sorted_vals[k]


class Run:
    """One fresh temp spool (hdtest.Env: a dir, a key, a config) and one
    program on it, the floor or handoffd, run by hdtest.Daemon."""

    def __init__(self, paths, prog, fsync, tag, key_hex, base=None, quota=0):
        self.paths = paths
        self.prog = prog
        self.fsync = fsync
        self.tag = tag
        self.pid = None     # the program's own pid (not a tracer's)
        # base: where the temp dir goes (the tmpfs phase), else $TMPDIR or
        # /tmp; hdtest.Env takes tempfile's default, so set that meanwhile.
        saved = tempfile.tempdir
        try:
            if base:
                tempfile.tempdir = base
            self.env = hdtest.Env(agents=[AGENT], fsync=fsync, keep=True, prefix=f"hdbench.{tag}.")
        finally:
            tempfile.tempdir = saved
        e = self.env
        with open(e.key_path, "w") as f:   # the round's key: the same items for both
            f.write(key_hex + "\n")
        self.spool = e.spool
        self.state = e.state[AGENT]
        self.handoffs = os.path.join(self.state, "handoffs")
        for d in ("tmp", "handoff"):
            os.makedirs(os.path.join(self.spool, d))
        os.makedirs(self.handoffs)
        self.conf = e.write_config(prog, text="\n".join([
            "[spool]",
            f"dir = {self.spool}",
            f"fsync = {'yes' if fsync else 'no'}",
            "rescan_interval = 30",
            "resume_window = 600",
            # the inbox quota off (0), or both limits at --quota: every
            # item still claimed, each one counted (its cost)
            f"max_waiting = {quota}",
            f"max_waiting_per_sender = {quota}",
            "",
            "[keys]",
            f"default = {e.key_path}",
            "",
            "[control]",
            f"socket = {os.path.join(e.dir, prog + '.sock')}",
            "",
            f"[agent {AGENT}]",
            f"state_dir = {self.state}",
            "",
        ]))
        self.d = None

    def start(self, mode="watch", wait=True, wrap=None):
        """Starts the program (under wrap, a tracer's argv, if given) and
        returns its pid: with wrap, the tracer's child."""
        if self.prog == "floor":
            argv = [self.paths["floor"], "--" + mode, self.spool, "--key", self.env.key_path,
                    "--agent", AGENT, "--state", self.state] + (["--fsync"] if self.fsync else [])
        else:
            argv = [self.paths["handoffd"], "-f", "-c", self.conf]
        self.d = hdtest.Daemon(self.env, self.conf, self.prog, argv=list(wrap or []) + argv)
        self.env.daemons.append(self.d)
        if wait:
            self.d.wait_message("READY=1", timeout=60)
        self.pid = self.d.proc.pid
        if wrap:
            self.pid = traced_child(self.d.proc)
        return self.pid

    def alive(self):
        return self.d.proc.poll() is None

    def counters(self):
        """handoffd's counters from its control socket."""
        try:
            return self.d.status().get("counters", {})
        except (OSError, ValueError) as e:
            return {"error": str(e)}

    def floor_report(self):
        for line in self.d.logs().splitlines():
            if line.startswith("FLOOR "):
                return json.loads(line[6:])
        return {}

    def stop(self):
        try:
            if self.pid != self.d.proc.pid and self.d.proc.poll() is None:
                # strace -o FILE PROG blocks SIGTERM: the program gets it,
                # strace exits with the program's status.
                try:
                    os.kill(self.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            return self.d.stop(timeout=30)
        except hdtest.Fail as e:
            raise BenchError(str(e)) from None

    def cleanup(self):
        for d in self.env.daemons:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
        shutil.rmtree(self.env.dir, ignore_errors=True)


def start_attach(cmd, pid, tag, prog):
    """--attach: a profiler on the running program, e.g.
    'strace -c -f -p {pid} -o /tmp/strace.{tag}'."""
    if not cmd:
        return None
    argv = [x.format(pid=pid, tag=tag, prog=prog) for x in shlex.split(cmd)]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    time.sleep(1.0)   # let it attach before the clock starts
    return p


def stop_attach(p):
    if p is None:
        return
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


# ---------------------------------------------------------------- strace

def strace_argv(prefix):
    """The tracer for the syscalls phase: every thread (-f), one file per
    thread (-ff: no <unfinished ...> lines to join), wall-clock time of
    each call's entry (-ttt) to cut out the burst, short strings."""
    return ["strace", "-f", "-ff", "-ttt", "-s", "24", "-o", prefix, "--"]


def traced_child(proc, timeout=10.0):
    """The pid of the program strace (proc) runs: its only child."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for tid in os.listdir(f"/proc/{proc.pid}/task"):
                with open(f"/proc/{proc.pid}/task/{tid}/children") as f:
                    kids = f.read().split()
                if kids:
                    return int(kids[0])
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    raise BenchError(f"no traced child under strace (pid {proc.pid}, exit {proc.poll()})")


def quiesce(pid, quiet=0.5, timeout=20.0):
    """Waits until the program makes no system call for `quiet` seconds:
    under ptrace every call stops the tracee, so its context switch count
    stands still only when it does nothing.  After the last bootstrap a
    program may still finish that item (a log line, a counter): part of
    its per-item cost."""
    deadline = time.monotonic() + timeout
    last, since = proc_switches(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = proc_switches(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return True
    return False


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"(?:\.\.\.)?')
_CALL = re.compile(r"^(\d+\.\d+) ([a-z_][a-z0-9_]*)\(")
OPENS = ("open", "openat", "openat2", "creat")
RENAMES = ("rename", "renameat", "renameat2")
LINKS = ("link", "linkat")
UNLINKS = ("unlink", "unlinkat", "rmdir")
MAKES = ("mkdir", "mkdirat", "mknod", "mknodat", "symlink", "symlinkat")


def strace_count(prefix, t0, t1):
    """Counts the calls in strace's per-thread files prefix.TID whose entry
    time is within [t0, t1] (time.time()).  Returns calls by name, failed
    calls by name, and the file-system operations that succeeded: inodes
    created (an open with O_CREAT|O_EXCL, one with O_CREAT alone (strace
    cannot tell whether that one created the file: counted, and counted
    apart as creates_maybe), O_TMPFILE, mkdir, mknod, symlink), renames,
    links and unlinks.  strace prints flags symbolically (O_RDWR|O_CREAT|
    O_EXCL|O_CLOEXEC; O_TMPFILE or __O_TMPFILE|O_DIRECTORY): quoted
    strings are cut out before the flags are looked at."""
    d = os.path.dirname(prefix) or "."
    base = os.path.basename(prefix) + "."
    calls, failed = {}, {}
    ops = {"creates": 0, "creates_excl": 0, "creates_maybe": 0, "tmpfiles": 0, "mkdirs": 0,
           "renames": 0, "links": 0, "unlinks": 0}
    for fn in os.listdir(d):
        if not fn.startswith(base):
            continue
        with open(os.path.join(d, fn), errors="replace") as f:
            for line in f:
                m = _CALL.match(line)
                if not m or not t0 <= float(m.group(1)) <= t1:
                    continue   # signals, exits, <... resumed>, out of the window
                name = m.group(2)
                calls[name] = calls.get(name, 0) + 1
                # the return value: after the last " = " (strace pads
                # short calls with spaces before it; a string argument may
                # hold " = " too, but comes before)
                i = line.rfind(" = ")
                ret = line[i + 3:].split() if i >= 0 else []
                ret = ret[0] if ret else "?"
                if ret.startswith("-"):
                    failed[name] = failed.get(name, 0) + 1
                    continue
                if ret == "?":
                    continue   # exit, or a call the trace did not see return
                if name in OPENS:
                    args = _QUOTED.sub('""', line[m.end():])
                    if "O_TMPFILE" in args:          # also __O_TMPFILE|O_DIRECTORY
                        ops["tmpfiles"] += 1
                        ops["creates"] += 1
                    elif name == "creat" or "O_CREAT" in args:
                        ops["creates"] += 1
                        if name != "creat" and "O_EXCL" in args:
                            ops["creates_excl"] += 1
                        else:
                            ops["creates_maybe"] += 1
                elif name in MAKES:
                    ops["creates"] += 1
                    if name.startswith("mkdir"):
                        ops["mkdirs"] += 1
                elif name in RENAMES:
                    ops["renames"] += 1
                elif name in LINKS:
                    ops["links"] += 1
                elif name in UNLINKS:
                    ops["unlinks"] += 1
    return calls, failed, ops


def run_one(a, paths, phase, fsync, prog, items, key_hex, tag, runs, settle):
    """One program, one phase, one fresh spool.  Returns its figures.
    burst_tmpfs is the burst with the temp dir under a.tmpfs; syscalls is
    a burst (of a.strace_n) with the program run under strace."""
    tmpfs = phase == "burst_tmpfs"
    traced = phase == "syscalls"
    burst = phase in ("burst", "burst_tmpfs", "syscalls")
    r = Run(paths, prog, fsync, tag, key_hex, base=a.tmpfs if tmpfs else None, quota=a.quota)
    runs.append(r)
    n = len(items)
    res = {"prog": prog, "phase": phase, "fsync": "on" if fsync else "off", "n": n}
    res["create_us"], res["settle_s"] = warm_up(settle)
    problems = []
    prof = None
    st_prefix = os.path.join(r.env.dir, "strace")
    if traced and not shutil.which("strace"):
        raise BenchError("strace not found (apt-get install strace; it is in mk/build-deps)")
    w = Watcher(r.handoffs)
    w.start()
    try:
        if phase == "backlog":
            hand = os.path.join(r.spool, "handoff")
            tmp_fd = os.open(os.path.join(r.spool, "tmp"), os.O_RDONLY | os.O_DIRECTORY)
            hand_fd = os.open(hand, os.O_RDONLY | os.O_DIRECTORY)
            try:
                for name, data in items:
                    drop_one(tmp_fd, hand_fd, name, data)
            finally:
                os.close(tmp_fd)
                os.close(hand_fd)
            os.sync()   # the writer's dirty pages are not the program's work
            t0 = time.monotonic()
            pid = r.start("batch", wait=False)
            done = w.wait_count(n, a.timeout, r.alive)
            t_last = w.last()
            res["startup_s"] = round(t_last - t0, 4) if done and t_last else None
            if prog == "handoffd" and r.alive():
                mem = proc_status(pid)
                res["cpu_s"] = proc_cpu(pid)
            else:
                r.d.proc.wait(60)
                mem = {}
        else:
            pid = r.start("watch", wrap=strace_argv(st_prefix) if traced else None)
            if not traced:
                prof = start_attach(a.attach, pid, tag, prog)
            if phase == "latency" and not fsync and a.idle > 0:
                time.sleep(0.5)   # READY=1 was just sent: let it settle
                s0, t = proc_switches(pid), time.monotonic()
                time.sleep(a.idle)
                res["wakeups_per_s"] = round((proc_switches(pid) - s0) / (time.monotonic() - t), 2)
            tmp_fd = os.open(os.path.join(r.spool, "tmp"), os.O_RDONLY | os.O_DIRECTORY)
            hand_fd = os.open(os.path.join(r.spool, "handoff"), os.O_RDONLY | os.O_DIRECTORY)
            drops = [0.0] * n
            try:
                if burst:
                    # Written into tmp/ before the clock starts, so that
                    # the burst is only the renames: a Python writer that
                    # also creates each file would set the pace itself.
                    staged = [stage_one(tmp_fd, name, data) for name, data in items]
                    os.sync()
                mem0, cpu0 = proc_status(pid), proc_cpu(pid)
                if traced:
                    quiesce(pid)    # whatever start-up left, done before the window
                wall0 = time.time()
                t0 = time.monotonic()
                if burst:
                    for i, (name, _) in enumerate(items):
                        drops[i] = publish_one(tmp_fd, hand_fd, staged[i], name)
                else:
                    step = 1.0 / a.rate
                    for i, (name, data) in enumerate(items):
                        due = t0 + i * step
                        while True:
                            left = due - time.monotonic()
                            if left <= 0:
                                break
                            time.sleep(left if left > 0.0003 else 0)
                        drops[i] = drop_one(tmp_fd, hand_fd, name, data)
                t_dropped = time.monotonic()
            finally:
                os.close(tmp_fd)
                os.close(hand_fd)
            done = w.wait_count(n, a.timeout, r.alive)
            # 1 s of quiet: work a program defers a little after the last
            # bootstrap (a batched unlink, a flush) is still its per-item cost
            if traced and done and not quiesce(pid, quiet=1.0):
                problems.append("still making system calls 20s after the last bootstrap")
            wall1 = time.time()
            if not r.alive():
                raise BenchError(f"{prog} exited {r.d.proc.returncode} during the run:\n{r.d.logs()[-4000:]}")
            cpu1, mem = proc_cpu(pid), proc_status(pid)
            res["cpu_s"] = round(cpu1 - cpu0, 3)
            res["cpu_us_per_item"] = round((cpu1 - cpu0) / n * 1e6, 1)
            res["rss_ready_kb"] = mem0.get("VmRSS")
            res["drop_rate"] = round(n / (t_dropped - t0), 1) if t_dropped > t0 else None
            lat = sorted((w.seen[name] - drops[i]) * 1000.0
                         for i, (name, _) in enumerate(items) if name in w.seen)
            last = w.last()
            span = (last - drops[0]) if last else None
            if burst:
                res["throughput"] = round(n / span, 1) if done and span else None
                # the last bootstrap came right after the last drop: the
                # program kept up and the writer set the pace
                res["writer_bound"] = bool(span and span <= (t_dropped - t0) * 1.05 + 0.05)
            res["lat_p50_ms"] = round(pct(lat, 50), 3) if lat else None
            res["lat_p99_ms"] = round(pct(lat, 99), 3) if lat else None
            res["lat_max_ms"] = round(lat[-1], 3) if lat else None
            if phase == "latency" and lat:
                # Half the items waited longer than the gap between two
                # drops: it did not keep up, and latency is queueing.
                res["saturated"] = pct(lat, 50) > 1000.0 / a.rate
            if a.dump and phase == "latency":
                with open(a.dump.format(tag=tag), "w") as f:
                    f.write("i,drop_s,latency_ms\n")
                    for i, (name, _) in enumerate(items):
                        if name in w.seen:
                            f.write(f"{i},{drops[i] - drops[0]:.6f},{(w.seen[name] - drops[i]) * 1000.0:.3f}\n")
        res["vmrss_kb"] = mem.get("VmRSS")
        res["vmhwm_kb"] = mem.get("VmHWM")
        counters = r.counters() if prog == "handoffd" and r.alive() else {}
    finally:
        w.close()
        stop_attach(prof)
        rc = r.stop() if r.d is not None else None
    res["exit"] = rc
    if traced:
        # Counted once strace has exited (its files are complete), only
        # the calls made from the first drop to the quiet after the last
        # bootstrap: not start-up, not the status query, not the exit.
        calls, failed, ops = strace_count(st_prefix, wall0, wall1)
        total = sum(calls.values())
        if not total:
            problems.append(f"strace recorded no system call in the burst ({st_prefix}.*)")
        res["syscalls"] = total
        res["syscalls_per_item"] = round(total / n, 2)
        res["failed_per_item"] = round(sum(failed.values()) / n, 2)
        res["calls_per_item"] = {k: round(v / n, 3) for k, v in sorted(calls.items())}
        res["failed_calls_per_item"] = {k: round(v / n, 3) for k, v in sorted(failed.items())}
        res["file_ops"] = ops
        for k in ("creates", "creates_maybe", "tmpfiles", "mkdirs", "renames", "links", "unlinks"):
            res[k + "_per_item"] = round(ops[k] / n, 3)
        for k in ("throughput", "writer_bound", "cpu_s", "cpu_us_per_item"):
            res.pop(k, None)    # under strace: not the program's speed

    # Both must have delivered every item exactly once and exited 0.
    names = {name for name, _ in items}
    on_disk = {x for x in os.listdir(r.handoffs) if not x.startswith(".")}
    if not done:
        problems.append(f"timed out after {a.timeout:g}s: {w.count()}/{n} bootstraps")
    if w.overflow:
        problems.append("inotify queue overflow in the bench's watcher: times are approximate")
    if on_disk != names:
        problems.append(f"handoffs/ holds {len(on_disk & names)} of the {n} bootstraps"
                        f" and {len(on_disk - names)} other names")
    if w.dups:
        problems.append(f"{sum(w.dups.values())} bootstraps renamed into place more than once")
    if rc != 0:
        problems.append(f"{prog} exit status {rc}")
    if prog == "handoffd":
        res["counters"] = {k: counters.get(k) for k in ("claimed", "delivered", "rejected", "error")
                           if k in counters}
        for k in ("claimed", "delivered"):
            if counters.get(k) != n:
                problems.append(f"handoffd counter {k} = {counters.get(k)}, expected {n}")
        if os.path.isdir(os.path.join(r.spool, "rejected")) and \
                any(not x.startswith(".") for x in os.listdir(os.path.join(r.spool, "rejected"))):
            problems.append("handoffd rejected items")
    else:
        rep = r.floor_report()
        res["floor"] = rep
        if rep.get("claimed") != n or rep.get("errors"):
            problems.append(f"floor claimed {rep.get('claimed')} of {n}, errors {rep.get('errors')}")
        if phase == "backlog":
            res["vmrss_kb"] = rep.get("vmrss_kb")
            res["vmhwm_kb"] = rep.get("vmhwm_kb")
            res["cpu_s"] = round(rep.get("utime_s", 0) + rep.get("stime_s", 0), 3)
    res["problems"] = problems
    res["ok"] = not problems
    return res


# ---------------------------------------------------------------- file system

def fs_info(path):
    try:
        t = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True,
                           text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        t = "?"
    # the exact type and mount options from /proc/self/mounts (longest prefix)
    best = ("", "?", "", "")
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                dev, mnt, typ, opts = line.split()[:4]
                mnt = mnt.replace("\\040", " ")
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[0]):
                    best = (mnt, typ, opts, dev)
    except OSError:
        pass
    info = {"stat_f": t, "mount": best[0], "type": best[1], "options": best[2], "dev": best[3]}
    if best[1] in ("ext3", "ext4"):
        # jbd2 lists journalled ext3/4 devices as NAME-8 (journal inode 8)
        dev = os.path.basename(os.path.realpath(best[3]))
        try:
            info["journal"] = any(x.startswith(dev + "-") for x in os.listdir("/proc/fs/jbd2"))
        except OSError:
            info["journal"] = False
    return info


def create_cost_in(parent, n):
    """Microseconds per empty-file create (open O_CREAT|O_EXCL + close) in a
    fresh directory under parent: the file system's inode allocation cost,
    which bounds the writer, the floor and handoffd alike."""
    d = tempfile.mkdtemp(prefix="c.", dir=parent)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        t = time.monotonic()
        for i in range(n):
            os.close(os.open(f"c{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=fd))
        us = (time.monotonic() - t) / n * 1e6
    finally:
        os.close(fd)
    return round(us, 1)


def warm_up(settle):
    """The create cost now; with a budget left, first create (and keep)
    batches of files while a create costs more than settle["us"]: ext4
    without a journal skips inodes freed in the last minutes, so creates
    are slow for a while after anyone's mass delete, and some thousands of
    creates of our own make them cheap again (bench/README.md)."""
    us = create_cost_in(settle["dir"], 100)
    waited = 0.0
    while us > settle["us"] and settle["left"] > 0:
        t = time.monotonic()
        create_cost_in(settle["dir"], 1000)
        us = create_cost_in(settle["dir"], 100)
        dt = time.monotonic() - t
        settle["left"] -= dt
        waited += dt
    return us, round(waited, 1)


def machine(tmpbase):
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count()
    return {"nproc": nproc, "cpu": cpu, "kernel": platform.release(),
            "python": platform.python_version(), "tmpdir": tmpbase, "fs": fs_info(tmpbase)}


# ---------------------------------------------------------------- report

# (label, phase, fsync, key, better).  better: which way is good for handoffd.
def figures(a):
    k = f"{a.n / 1000:g}k"
    sk = f"{a.strace_n / 1000:g}k burst:"
    b = f"{a.backlog / 1000:g}k"
    rate = f"{a.rate:g}/s"
    return [
        ("burst items/s, fsync off", "burst", "off", "throughput", "higher"),
        ("burst items/s, fsync on (floor: per item)", "burst", "on", "throughput", "higher"),
        ("burst items/s, fsync off, tmpfs", "burst_tmpfs", "off", "throughput", "higher"),
        (f"latency p50 ms at {rate}, fsync off", "latency", "off", "lat_p50_ms", "lower"),
        (f"latency p99 ms at {rate}, fsync off", "latency", "off", "lat_p99_ms", "lower"),
        (f"latency p50 ms at {rate}, fsync on", "latency", "on", "lat_p50_ms", "lower"),
        (f"latency p99 ms at {rate}, fsync on", "latency", "on", "lat_p99_ms", "lower"),
        ("CPU us/item, burst, fsync off", "burst", "off", "cpu_us_per_item", "lower"),
        ("CPU us/item, burst, fsync on", "burst", "on", "cpu_us_per_item", "lower"),
        ("CPU us/item, burst, fsync off, tmpfs", "burst_tmpfs", "off", "cpu_us_per_item", "lower"),
        (f"{sk} syscalls/item, fsync off (strace)", "syscalls", "off", "syscalls_per_item", "lower"),
        (f"{sk} file creations/item (inodes)", "syscalls", "off", "creates_per_item", "lower"),
        (f"{sk} renames/item", "syscalls", "off", "renames_per_item", "lower"),
        (f"{sk} links/item", "syscalls", "off", "links_per_item", "lower"),
        (f"{sk} unlinks/item", "syscalls", "off", "unlinks_per_item", "lower"),
        (f"VmRSS kB after a {k} burst", "burst", "off", "vmrss_kb", "lower"),
        (f"VmHWM kB after a {k} burst", "burst", "off", "vmhwm_kb", "lower"),
        (f"startup s, {b} backlog (floor --batch)", "backlog", "off", "startup_s", "lower"),
        (f"VmRSS kB after a {b} backlog", "backlog", "off", "vmrss_kb", "lower"),
        (f"VmHWM kB after a {b} backlog", "backlog", "off", "vmhwm_kb", "lower"),
        (f"idle wake-ups/s ({a.idle:g} s)", "latency", "off", "wakeups_per_s", "lower"),
    ]


def median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v):
    if v is None:
        return "-"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def summarize(a, results):
    """One row per figure: medians of the floor and of handoffd over the
    rounds, and the median of the per-round ratios handoffd/floor (each
    ratio from two runs a few seconds apart, so machine noise cancels)."""
    rows = []
    for label, phase, fsync, key, better in figures(a):
        by = {p: [x for x in results if x["phase"] == phase and x["fsync"] == fsync and x["prog"] == p]
              for p in PROGS}
        if not by["floor"] and not by["handoffd"]:
            continue
        # A run that failed its checks gives no figure.
        fl = [x.get(key) if x.get("ok") else None for x in by["floor"]]
        hd = [x.get(key) if x.get("ok") else None for x in by["handoffd"]]
        ratios, saturated = [], []
        for f, h, fv, hv in zip(by["floor"], by["handoffd"], fl, hd):
            ratios.append(hv / fv if fv and hv is not None else None)
            saturated.append([p for p, x in (("floor", f), ("handoffd", h))
                              if x.get("saturated") and key.startswith("lat_")])
        rr = [x for x in ratios if x is not None]
        rows.append({"figure": label, "phase": phase, "fsync": fsync, "key": key, "better": better,
                     "floor": median(fl), "handoffd": median(hd), "ratio": median(ratios),
                     "ratio_min": round(min(rr), 3) if rr else None,
                     "ratio_max": round(max(rr), 3) if rr else None,
                     "ratios": [None if x is None else round(x, 3) for x in ratios],
                     "saturated": saturated, "floor_rounds": fl, "handoffd_rounds": hd})
    return rows


def spread(r):
    """min-max of the floor's, handoffd's and the ratio's rounds."""
    def mm(vals):
        vals = [v for v in vals if v is not None]
        return f"{fmt(min(vals))}-{fmt(max(vals))}" if vals else "-"
    return (f"floor {mm(r['floor_rounds'])}, handoffd {mm(r['handoffd_rounds'])}, "
            f"ratio {mm(r['ratios'])} ({len(r['ratios'])} rounds)")


def table(rows):
    w = max(len(r["figure"]) for r in rows)
    head = f"{'figure':<{w}}  {'floor':>9}  {'handoffd':>9}  {'ratio':>6}  {'better':>6}  per round"
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        per = " ".join(("-" if x is None else f"{x:.2f}") + ("*" if sat else "")
                       for x, sat in zip(r["ratios"], r["saturated"]))
        lines.append(f"{r['figure']:<{w}}  {fmt(r['floor']):>9}  {fmt(r['handoffd']):>9}  "
                     f"{ratio:>6}  {r['better']:>6}  {per}")
    return "\n".join(lines)


TOP_CALLS = 12


def syscall_rows(results):
    """The syscalls phase per call: per item, median over the rounds of
    each program's ok runs, the TOP_CALLS calls largest in either program,
    then the rest, the total, the failed calls and the file operations."""
    runs = {p: [x for x in results if x["phase"] == "syscalls" and x["prog"] == p and x.get("ok")]
            for p in PROGS}
    if not runs["floor"] and not runs["handoffd"]:
        return []

    def med(p, get):
        return median([get(x) for x in runs[p]]) if runs[p] else None

    names = {k for p in PROGS for x in runs[p] for k in x.get("calls_per_item", {})}
    per = {k: {p: med(p, lambda x: x["calls_per_item"].get(k, 0.0)) for p in PROGS} for k in names}
    top = sorted(names, key=lambda k: (-max(v or 0 for v in per[k].values()), k))
    rows = []

    def add(what, kind, f, h):
        f, h = (None if v is None else round(v, 3) for v in (f, h))
        rows.append({"what": what, "kind": kind, "floor": f, "handoffd": h,
                     "diff": None if f is None or h is None else round(h - f, 3)})
    for k in top[:TOP_CALLS]:
        add(k, "call", per[k]["floor"], per[k]["handoffd"])
    rest = top[TOP_CALLS:]
    if rest:
        add(f"{len(rest)} other calls", "other",
            *(None if not runs[p] else sum(per[k][p] or 0 for k in rest) for p in PROGS))
    add("all system calls", "total", med("floor", lambda x: x["syscalls_per_item"]),
        med("handoffd", lambda x: x["syscalls_per_item"]))
    add("of which failed (ENOENT, EAGAIN, ...)", "failed", med("floor", lambda x: x["failed_per_item"]),
        med("handoffd", lambda x: x["failed_per_item"]))
    for what, key in (("file creations (inodes)", "creates_per_item"),
                      ("  of which O_CREAT without O_EXCL", "creates_maybe_per_item"),
                      ("  of which O_TMPFILE", "tmpfiles_per_item"),
                      ("renames", "renames_per_item"), ("links", "links_per_item"),
                      ("unlinks", "unlinks_per_item")):
        add(what, "file", med("floor", lambda x: x.get(key)), med("handoffd", lambda x: x.get(key)))
    return rows


def syscall_table(a, rows):
    w = max(40, max(len(r["what"]) for r in rows))
    head = (f"{f'per item, {a.strace_n}-item burst under strace':<{w}}  {'floor':>8}  {'handoffd':>8}  "
            f"{'hd-floor':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r["kind"] in ("total", "file") and r["what"] in ("all system calls", "file creations (inodes)"):
            lines.append("-" * len(head))
        diff = "-" if r["diff"] is None else f"{r['diff']:+.2f}"
        lines.append(f"{r['what']:<{w}}  {fmt2(r['floor']):>8}  {fmt2(r['handoffd']):>8}  {diff:>8}")
    return "\n".join(lines)


def fmt2(v):
    return "-" if v is None else f"{v:.2f}"


def run_relay(a, paths, rows, leave=None):
    """The relay phase (bench/bench_relay.py), fsync off then on: a burst
    and a fixed rate through host a -> one nats-server -> host b.  There is
    no floor for it: its figures are absolute.  True when a run failed."""
    import bench_relay
    failed = False
    for fsync in (False, True):
        # receipts off then on (issue 27's cost of receipts), each with its
        # own local reference burst on b (lburst)
        for receipts in (False, True):
            t = time.monotonic()
            for res in bench_relay.run(paths["handoffd"], fsync, a.relay_n, a.relay_rate, a.timeout,
                                       a.keep, receipts=receipts, leave=leave):
                rows.append(res)
                rc = "receipts" if receipts else "no-receipts"
                print(f"  relay-{res['fsync']}-{rc}-{res['phase']:10} {fmt(res.get('throughput')):>8} items/s "
                      f"p99 {fmt(res.get('lat_p99_ms'))} ms, cpu {fmt(res.get('cpu_ms_per_1000'))} us/item"
                      f"{'' if res.get('ok') else '  FAIL'}")
                for p in res.get("problems", []):
                    print(f"    problem: {p}")
                failed |= not res.get("ok")
            print(f"    (relay a -> nats-server -> b, fsync {'on' if fsync else 'off'}, receipts "
                  f"{'on' if receipts else 'off'}: {time.monotonic() - t:.1f}s)")
            sys.stdout.flush()
    return failed


def relay_ratios(rows):
    """The relay's targets as ratios in the same run, per fsync: relay burst
    / local burst (with and without receipts), CPU per relayed item (a and
    b) / per local one, receipts on / off.  A list of (what, value,
    target) rows."""
    def get(fsync, receipts, phase, key):
        for r in rows:
            if (r.get("fsync"), bool(r.get("receipts")), r.get("phase")) == (fsync, receipts, phase):
                return r.get(key)
        return None

    def ratio(x, y):
        return x / y if x and y else None

    out = []
    for fsync in ("off", "on"):
        for receipts in (False, True):
            rc = "receipts on" if receipts else "receipts off"
            out.append((f"relay/local burst items/s, fsync {fsync}, {rc}",
                        ratio(get(fsync, receipts, "rburst", "throughput"),
                              get(fsync, receipts, "lburst", "throughput")), ">= 0.5"))
            out.append((f"relay/local CPU per item, fsync {fsync}, {rc}",
                        ratio(get(fsync, receipts, "rburst", "cpu_ms_per_1000"),
                              get(fsync, receipts, "lburst", "cpu_ms_per_1000")), "<= 2.0"))
        out.append((f"receipts on/off relay burst items/s, fsync {fsync}",
                    ratio(get(fsync, True, "rburst", "throughput"),
                          get(fsync, False, "rburst", "throughput")), ">= 0.9"))
        out.append((f"receipts on/off CPU per relayed item, fsync {fsync}",
                    ratio(get(fsync, True, "rburst", "cpu_ms_per_1000"),
                          get(fsync, False, "rburst", "cpu_ms_per_1000")), ""))
    return out


def relay_table(a, rows):
    head = (f"{'relay a -> nats-server -> b (no floor)':<40}  {'items/s':>8}  {'p50 ms':>7}  {'p99 ms':>7}  "
            f"{'max ms':>7}  {'cpu us/item':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        what = {"rburst": f"burst of {r.get('n')}", "rrate": f"{r.get('n')} at {a.relay_rate:g}/s",
                "lburst": f"local burst of {r.get('n')} on b"}.get(r.get("phase"), r.get("phase"))
        what += f", fsync {r.get('fsync')}" + (", receipts" if r.get("receipts") else "")
        cpu = r.get("cpu_ms_per_1000")
        lines.append(f"{what:<40}  {fmt(r.get('throughput')):>8}  "
                     f"{fmt(r.get('lat_p50_ms')):>7}  {fmt(r.get('lat_p99_ms')):>7}  {fmt(r.get('lat_max_ms')):>7}  "
                     f"{fmt(None if cpu is None else cpu):>11}{'' if r.get('ok') else '  FAIL'}")
    rat = relay_ratios(rows)
    if any(v is not None for _, v, _ in rat):
        lines += ["", f"{'relay ratios, same run':<52}  {'ratio':>6}  target", "-" * 70]
        lines += [f"{w:<52}  {fmt2(v):>6}  {t}" for w, v, t in rat]
    return "\n".join(lines)


def run_hub(a, paths, rows):
    """The hub phase (bench/bench_hub.py), fsync off then on: the file drop
    and handoff-hubd (TLS, 8 keep-alive clients) in the same run, a burst
    and a fixed rate.  True when a run failed."""
    import bench_hub
    failed = False
    for fsync in (False, True):
        t = time.monotonic()
        for res in bench_hub.run(paths["handoffd"], paths["hubd"], fsync, a.hub_n, a.rate_n,
                                 a.rate, a.timeout, a.keep):
            rows.append(res)
            print(f"  hub-{res['fsync']}-{res['phase']}-{res['how']:16} {fmt(res.get('throughput')):>8} items/s "
                  f"p99 {fmt(res.get('lat_p99_ms'))} ms{'' if res.get('ok') else '  FAIL'}")
            for p in res.get("problems", []):
                print(f"    problem: {p}")
            failed |= not res.get("ok")
        print(f"    (file drop and hub, fsync {'on' if fsync else 'off'}: {time.monotonic() - t:.1f}s)")
        sys.stdout.flush()
    return failed


def hub_table(a, rows):
    head = (f"{'hub against the file drop (same run)':<40}  {'items/s':>8}  {'p50 ms':>7}  {'p99 ms':>7}  "
            f"{'max ms':>7}  {'cpu us/item':>11}  {'in p50/p99':>11}  {'hd p50/p99':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        what = {"burst": f"burst of {r.get('n')}", "rate": f"{r.get('n')} at {a.rate:g}/s"}.get(
            r.get("phase"), r.get("phase"))
        what = f"{r.get('how')}: {what}, fsync {r.get('fsync')}"
        lines.append(f"{what:<40}  {fmt(r.get('throughput')):>8}  {fmt(r.get('lat_p50_ms')):>7}  "
                     f"{fmt(r.get('lat_p99_ms')):>7}  {fmt(r.get('lat_max_ms')):>7}  "
                     f"{fmt(r.get('cpu_ms_per_1000')):>11}  "
                     f"{fmt(r.get('lat_in_p50_ms')) + '/' + fmt(r.get('lat_in_p99_ms')):>11}  "
                     f"{fmt(r.get('lat_daemon_p50_ms')) + '/' + fmt(r.get('lat_daemon_p99_ms')):>11}"
                     f"{'' if r.get('ok') else '  FAIL'}")
    return "\n".join(lines)


def parse_rate(s):
    s = str(s).strip().lower()
    for suf in ("/s", "/sec", "per s", "hz"):
        if s.endswith(suf):
            s = s[: -len(suf)].strip()
    v = float(s)
    if v <= 0:
        raise argparse.ArgumentTypeError("rate must be > 0")
    return v


def main():
    env = os.environ.get
    ap = argparse.ArgumentParser(description="handoffd against bench/floor (see bench/README.md)")
    ap.add_argument("--build", default=env("HD_BUILD", os.path.join(SRC, "build")),
                    help="build dir holding handoffd and bench/floor (default: build/)")
    ap.add_argument("-n", "--n", type=int, default=int(env("BENCH_N", "10000")),
                    help="items per burst (default 10000)")
    ap.add_argument("--rounds", type=int, default=int(env("BENCH_ROUNDS", "3")),
                    help="rounds; each runs every phase for the floor then handoffd (default 3)")
    ap.add_argument("--rate", type=parse_rate, default=parse_rate(env("BENCH_RATE", "200")),
                    help="latency phase: drops per second (default 200)")
    ap.add_argument("--rate-n", type=int, default=int(env("BENCH_RATE_N", "1000")),
                    help="latency phase: items (default 1000)")
    ap.add_argument("--backlog", type=int, default=int(env("BENCH_BACKLOG", "20000")),
                    help="backlog phase: items in handoff/ at start (default 20000)")
    ap.add_argument("--idle", type=float, default=float(env("BENCH_IDLE", "5")),
                    help="seconds of idle before the fsync-off latency run, wake-ups counted (default 5)")
    ap.add_argument("--only", default=",".join(PHASES),
                    help=f"phases to run, of {','.join(PHASES)} (default all)")
    ap.add_argument("--tmpfs", default=env("BENCH_TMPFS", "/dev/shm"),
                    help="burst_tmpfs phase: a tmpfs directory for its temp spools (default /dev/shm)")
    ap.add_argument("--strace-n", type=int, default=int(env("BENCH_STRACE_N", "1000")),
                    help="syscalls phase: items in its burst under strace (default 1000)")
    ap.add_argument("--quota", type=int, default=int(env("BENCH_QUOTA", "0")),
                    help="handoffd's [spool] max_waiting and max_waiting_per_sender (default 0: "
                         "no inbox quota; set it above the items of a phase to count its cost)")
    ap.add_argument("--hub-n", type=int, default=int(env("BENCH_HUB_N", "2000")),
                    help="hub phase: handoffs per burst (default 2000; the rate run uses --rate-n)")
    ap.add_argument("--relay-n", type=int, default=int(env("BENCH_RELAY_N", "1000")),
                    help="relay phase: handoffs per run (default 1000)")
    ap.add_argument("--relay-rate", type=parse_rate, default=parse_rate(env("BENCH_RELAY_RATE", "200")),
                    help="relay phase: fixed rate (default 200/s)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds to wait for the last bootstrap (default 300)")
    ap.add_argument("--attach", default=env("BENCH_ATTACH"),
                    help="command run against each program during its watch runs, {pid} {tag} {prog} "
                         "substituted, stopped with SIGINT, e.g. 'strace -c -f -p {pid} -o /tmp/st.{tag}'")
    ap.add_argument("--dump", default=None,
                    help="latency runs: per-item CSV to this path ({tag} substituted)")
    ap.add_argument("--settle", type=float, default=float(env("BENCH_SETTLE", "0")),
                    help="seconds, shared by all runs, to spend creating throwaway files before a run "
                         "while a create costs more than --settle-us (default 0)")
    ap.add_argument("--settle-us", type=float, default=float(env("BENCH_SETTLE_US", "50")),
                    help="create cost in us below which a run starts at once (default 50)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs")
    a = ap.parse_args()
    if min(a.n, a.rounds, a.rate_n, a.backlog, a.strace_n) < 1:
        ap.error("--n, --rounds, --rate-n, --backlog and --strace-n must be >= 1")
    paths = {"handoffd": os.path.join(a.build, "handoffd"),
             "floor": os.path.join(a.build, "bench", "floor"),
             "hubd": os.path.join(a.build, "handoff-hubd")}
    for p in paths.values():
        if not os.access(p, os.X_OK):
            ap.error(f"{p}: not built (run make bench-floor, or make bench)")
    only = [x.strip() for x in a.only.split(",") if x.strip()]
    if any(x not in PHASES for x in only):
        ap.error(f"--only takes {','.join(PHASES)}")
    plan = [(ph, fs) for ph, fs in (("burst", False), ("burst", True), ("burst_tmpfs", False),
                                    ("syscalls", False), ("latency", False), ("latency", True),
                                    ("backlog", False)) if ph in only]
    sizes = {"burst": a.n, "burst_tmpfs": a.n, "syscalls": a.strace_n, "latency": a.rate_n,
             "backlog": a.backlog}
    if "burst_tmpfs" in only:
        if not os.path.isdir(a.tmpfs):
            ap.error(f"--tmpfs {a.tmpfs}: not a directory (burst_tmpfs phase)")
        a.tmpfs = os.path.realpath(a.tmpfs)
    if "syscalls" in only and not shutil.which("strace"):
        ap.error("the syscalls phase needs strace (apt-get install strace; make deps)")

    # The watcher thread takes its timestamps as soon as it holds the GIL:
    # keep the writer's hold short.
    sys.setswitchinterval(0.0005)

    tmpbase = os.path.realpath(env("TMPDIR") or "/tmp")
    m = machine(tmpbase)
    fs = m["fs"]
    cal_dir = tempfile.mkdtemp(prefix="hdbench.cal.", dir=tmpbase)
    m["create_us"] = create_cost_in(cal_dir, 300)
    jr = {True: ", journal", False: ", NO journal"}.get(fs.get("journal"), "")
    print(f"handoffd bench: {paths['handoffd']} against {paths['floor']}")
    print(f"machine: nproc {m['nproc']}, {m['cpu']}, Linux {m['kernel']}, python {m['python']}")
    print(f"temp dir: {tmpbase} on {fs['mount']} ({fs['type']}{jr}; stat -f: {fs['stat_f']}; {fs['options']})")
    print(f"file create cost there: {m['create_us']:.0f} us per empty file")
    tmpfs_cal = None
    if "burst_tmpfs" in only:
        tfs = fs_info(a.tmpfs)
        tmpfs_cal = tempfile.mkdtemp(prefix="hdbench.cal.", dir=a.tmpfs)
        m["tmpfs"] = {"dir": a.tmpfs, "fs": tfs, "create_us": create_cost_in(tmpfs_cal, 300)}
        warn = "" if tfs["type"] in ("tmpfs", "ramfs") else "  (NOT a tmpfs: --tmpfs DIR or BENCH_TMPFS)"
        print(f"burst_tmpfs temp dir: {a.tmpfs} on {tfs['mount']} ({tfs['type']}; "
              f"{m['tmpfs']['create_us']:.0f} us per empty file){warn}")
    what = {"burst": f"burst {a.n} (fsync off, on)",
            "burst_tmpfs": f"burst {a.n} on tmpfs (fsync off)",
            "syscalls": f"burst {a.strace_n} under strace (fsync off)",
            "latency": f"latency {a.rate_n} at {a.rate:g}/s (fsync off, on; {a.idle:g}s idle before the off run)",
            "backlog": f"backlog {a.backlog} (fsync off)",
            "relay": f"once: relay {a.relay_n} (burst and at {a.relay_rate:g}/s, fsync off, on)",
            "hub": f"once: hub against file drop, burst {a.hub_n} and {a.rate_n} at {a.rate:g}/s (fsync off, on)"}
    print((f"{a.rounds} round(s) of: " + ", ".join(what[x] for x in what if x in only and x not in ("relay", "hub"))
           + f"; items of about {ITEM_BYTES} bytes" if plan else "")
          + (("; " if plan else "") + what["relay"] if "relay" in only else "")
          + ("; " + what["hub"] if "hub" in only else "")
          + (f"; warm-up up to {a.settle:g}s while creates cost > {a.settle_us:g} us" if a.settle > 0 else ""))
    sys.stdout.flush()

    settle = {"us": a.settle_us, "left": a.settle, "dir": cal_dir}
    # tmpfs: creates cost the same whatever was deleted before, no warm-up
    settle_tmpfs = {"us": a.settle_us, "left": 0, "dir": tmpfs_cal}
    results, runs, relay_rows, hub_rows, relay_dirs = [], [], [], [], []
    failed = False

    def on_term(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    def cleanup():
        # Only now, once: on ext4 without a journal, creates right after a
        # mass delete are slower, and one run must not slow the next.
        for r in runs:
            if a.keep:
                print(f"  (temp dir kept: {r.env.dir})", file=sys.stderr)
            else:
                r.cleanup()
        runs.clear()
        shutil.rmtree(cal_dir, ignore_errors=True)
        for d in relay_dirs:
            shutil.rmtree(d, ignore_errors=True)
        relay_dirs.clear()
        if tmpfs_cal:
            shutil.rmtree(tmpfs_cal, ignore_errors=True)

    t_all = time.monotonic()
    try:
        try:
            for rnd in range(a.rounds if plan else 0):
                # Signed per round, so items stay fresh however long the bench.
                key_hex = os.urandom(32).hex()
                items = presign(key_hex.encode(), max(sizes[ph] for ph, _ in plan)) if plan else []
                # floor first in odd rounds, handoffd first in even ones: a
                # file system that gets faster or slower during the bench
                # favours neither.
                order = PROGS if rnd % 2 == 0 else PROGS[::-1]
                for phase, fsync in plan:
                    for prog in order:
                        tag = f"r{rnd + 1}-{phase}-{'on' if fsync else 'off'}-{prog}"
                        t = time.monotonic()
                        try:
                            res = run_one(a, paths, phase, fsync, prog, items[:sizes[phase]], key_hex,
                                          tag, runs, settle_tmpfs if phase == "burst_tmpfs" else settle)
                        except (BenchError, hdtest.Fail, OSError) as e:
                            res = {"prog": prog, "phase": phase, "fsync": "on" if fsync else "off",
                                   "ok": False, "problems": [f"{type(e).__name__}: {e}"]}
                        res["round"] = rnd + 1
                        results.append(res)
                        if phase == "burst_tmpfs" and not a.keep and runs and runs[-1].tag == tag:
                            # in memory: removed now (the ext4 runs wait
                            # for the end, see cleanup())
                            runs.pop().cleanup()
                        fig = {"burst": ("throughput", "items/s"), "burst_tmpfs": ("throughput", "items/s"),
                               "syscalls": ("syscalls_per_item", "calls/it"),
                               "latency": ("lat_p99_ms", "ms p99"), "backlog": ("startup_s", "s")}[phase]
                        warm = f", warmed {res['settle_s']:g}s" if res.get("settle_s") else ""
                        print(f"  {tag:28} {fmt(res.get(fig[0])):>8} {fig[1]:8} "
                              f"(create {fmt(res.get('create_us'))} us{warm}; {time.monotonic() - t:.1f}s)"
                              f"{'' if res.get('ok') else '  FAIL'}")
                        for p in res.get("problems", []):
                            print(f"    problem: {p}")
                        sys.stdout.flush()
                        failed |= not res.get("ok")
            if "relay" in only:
                failed |= run_relay(a, paths, relay_rows, relay_dirs)
            if "hub" in only:
                failed |= run_hub(a, paths, hub_rows)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            failed = True

        rows = summarize(a, results)
        sc_rows = syscall_rows(results)
        print()
        if rows:
            print(table(rows))
        if sc_rows:
            print()
            print(syscall_table(a, sc_rows))
        if relay_rows:
            print()
            print(relay_table(a, relay_rows))
        if hub_rows:
            print()
            print(hub_table(a, hub_rows))
        print()
        print("floor, handoffd: medians over the rounds.  ratio: median of the per-round ratios handoffd/floor;")
        print("better: the direction that is good for handoffd (items/s: higher; times, CPU, memory: lower).")
        print("burst: N dropped back to back, items/s = N / (last bootstrap - first drop).  latency: drop")
        print("(rename into handoff/) to the bootstrap's IN_MOVED_TO, one item at a time.  CPU: utime+stime.")
        print("backlog: items in handoff/ before the start; time from start to the last bootstrap.")
        if "burst_tmpfs" in only:
            print(f"tmpfs: the fsync-off burst again with the temp spools in {a.tmpfs} (no disk, so the "
                  "programs' own cost).")
        if sc_rows:
            print(f"syscalls: a burst of {a.strace_n} (fsync off) with the program alone under strace -f "
                  "(not the writer), calls from")
            print("the first drop until it is quiet after the last bootstrap, per item; creates: inodes it "
                  "allocated (O_CREAT")
            print("or O_TMPFILE opens, mkdir, mknod, symlink), renames, links, unlinks: the ones that "
                  "succeeded.")
        if relay_rows:
            print("relay: host a -> one local nats-server -> host b, from the drop on a to the bootstrap on b;")
            print("cpu us/item is a's and b's together; the local burst drops into b's handoff/ in the same setup.")
        if hub_rows:
            print("hub: handoff-hubd (TLS, 8 keep-alive clients) against the file drop on the same spool; latency")
            print("from the start of the POST (or the drop) to the bootstrap; cpu us/item is handoffd's and the hub's;")
            print("in: to the item's arrival in handoff/ (the hub's way in; about 0 for the drop), hd: from there")
            print("to the bootstrap (the daemon's part), both seen by inotify watchers in the bench's process.")
        sat = [f"{x['prog']} fsync {x['fsync']} round {x['round']}" for x in results if x.get("saturated")]
        if sat:
            print(f"NOTE (*): at {a.rate:g}/s these did not keep up (p50 above the {1000.0 / a.rate:g} ms between "
                  f"drops), so their latency is queueing: {', '.join(sat)}.")
        wb = sorted({f"{x['prog']} fsync {x['fsync']}" + (" on tmpfs" if x["phase"] == "burst_tmpfs" else "")
                     for x in results if x.get("writer_bound")})
        if wb:
            print(f"NOTE: the writer set the pace in the burst of {', '.join(wb)}: items/s there is a lower bound.")
        for r in rows:
            if r["key"] == "throughput" and len([x for x in r["ratios"] if x is not None]) > 1:
                print(f"spread, {r['figure']}: " + spread(r))
        cr = [x["create_us"] for x in results if x.get("create_us") is not None and x["phase"] != "burst_tmpfs"]
        if cr:
            print(f"file create cost before the runs: {min(cr):.0f} to {max(cr):.0f} us "
                  f"(median {statistics.median(cr):.0f})")
        sys.stdout.flush()
        t = time.monotonic()
        cleanup()
        print(f"total {time.monotonic() - t_all:.1f}s (of which {time.monotonic() - t:.1f}s removing "
              f"the temp dirs); {sum(1 for x in results + relay_rows + hub_rows if x.get('ok'))}/"
              f"{len(results) + len(relay_rows) + len(hub_rows)} runs ok")
    finally:
        cleanup()
    out = {"version": 3, "machine": m,
           "params": {"n": a.n, "rounds": a.rounds, "rate": a.rate, "rate_n": a.rate_n,
                      "backlog": a.backlog, "idle_s": a.idle, "phases": only,
                      "relay_n": a.relay_n, "relay_rate": a.relay_rate, "hub_n": a.hub_n,
                      "tmpfs": a.tmpfs if "burst_tmpfs" in only else None, "strace_n": a.strace_n},
           "figures": rows, "syscalls": sc_rows, "runs": results, "relay": relay_rows, "hub": hub_rows,
           "relay_ratios": [{"figure": w, "ratio": v, "target": t} for w, v, t in relay_ratios(relay_rows)],
           "ok": not failed}
    print("BENCH_JSON " + json.dumps(out, sort_keys=True, separators=(",", ":")))
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
