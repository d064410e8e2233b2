#!/usr/bin/env python3
"""handoffd benchmark (`make bench`), stdlib only.

For fsync on and fsync off, each run on a fresh temp spool with one daemon
(the real binary, started with a NOTIFY_SOCKET, timed from READY=1) and one
served agent:

  burst  N handoffs, signed in memory before the clock starts, dropped as
         fast as one Python writer can (write tmp/, rename into handoff/);
         throughput = N / (last bootstrap seen - first drop).
  rate   N handoffs dropped at a fixed rate (paced); per item the latency
         from just after the rename to the bootstrap's IN_MOVED_TO in the
         agent's handoffs/ dir (inotify via ctypes, read in its own thread).

After each run: the daemon's VmHWM / VmRSS (/proc/PID/status) and its CPU
time (utime+stime, /proc/PID/stat) per 1000 items; every id must have got
exactly one bootstrap and nothing may be rejected.  One table at the end and
one machine-readable line prefixed "BENCH_JSON ".  See bench/README.md.
"""

import argparse
import ctypes
import ctypes.util
import json
import os
import platform
import select
import shlex
import shutil
import signal
import socket
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

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


class BenchError(Exception):
    pass


# ---------------------------------------------------------------- inotify

IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
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
    """Records time.monotonic() of each IN_MOVED_TO name in one directory.

    The thread blocks in poll(2) and then read(2) (libc, through ctypes:
    both release the GIL), so a timestamp is taken as soon as the thread
    runs after the kernel queued the event."""

    def __init__(self, path):
        super().__init__(daemon=True)
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
            new = 0
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
                    new += 1
            if new:
                with self.cond:
                    self.cond.notify_all()

    def wait_count(self, n, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.seen) < n and not self.overflow:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.5))
        return len(self.seen) >= n

    def close(self):
        os.write(self.stop_w, b"x")
        self.join(5)
        for fd in (self.fd, self.stop_r, self.stop_w):
            os.close(fd)


# ---------------------------------------------------------------- daemon

def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = int(v.split()[0])   # kB
    return out


def proc_cpu(pid):
    """utime+stime of the process in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    # fields[0] is field 3 (state): utime is field 14, stime field 15
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Run:
    """One temp spool, one key, one agent, one daemon."""

    def __init__(self, handoffd, fsync, tag):
        base = os.environ.get("TMPDIR") or "/tmp"
        self.dir = tempfile.mkdtemp(prefix=f"hdbench.{tag}.", dir=base)
        os.chmod(self.dir, 0o755)
        self.spool = os.path.join(self.dir, "spool")
        self.agent = "alice"
        self.state = os.path.join(self.dir, "agents", self.agent)
        self.handoffs = os.path.join(self.state, "handoffs")
        for d in ("tmp", "handoff"):
            os.makedirs(os.path.join(self.spool, d), exist_ok=True)
        os.makedirs(self.handoffs, exist_ok=True)
        self.key_path = os.path.join(self.dir, "default.key")
        self.key = hdproto.make_key(self.key_path)
        self.sock = os.path.join(self.dir, "control.sock")
        self.conf = os.path.join(self.dir, "handoffd.conf")
        with open(self.conf, "w") as f:
            f.write("\n".join([
                "[spool]",
                f"dir = {self.spool}",
                f"fsync = {'yes' if fsync else 'no'}",
                "rescan_interval = 30",
                "resume_window = 600",
                "",
                "[keys]",
                f"default = {self.key_path}",
                "",
                "[control]",
                f"socket = {self.sock}",
                "",
                f"[agent {self.agent}]",
                f"state_dir = {self.state}",
                "",
            ]))
        self.handoffd = handoffd
        self.keep = False
        self.proc = None
        self.log = None
        self.notify = None

    def start(self, timeout=20.0):
        npath = os.path.join(self.dir, "notify.sock")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(npath)
        self.notify.settimeout(0.1)
        env = dict(os.environ)
        env["NOTIFY_SOCKET"] = npath
        for k in ("JOURNAL_STREAM", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS"):
            env.pop(k, None)
        self.log_path = os.path.join(self.dir, "handoffd.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([self.handoffd, "-f", "-c", self.conf],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.notify.recv(4096).decode(errors="replace")
            except socket.timeout:
                msg = ""
            if "READY=1" in msg.split("\n"):
                return
            if self.proc.poll() is not None:
                raise BenchError(f"handoffd exited {self.proc.returncode} before READY=1:\n{self.logs()}")
        raise BenchError(f"handoffd not READY after {timeout}s:\n{self.logs()}")

    def logs(self, tail=4000):
        try:
            self.log.flush()
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-tail:]
        except (OSError, ValueError, AttributeError):
            return ""

    def status(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(self.sock)
            s.sendall(b'{"command":"status"}\n')
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return json.loads(data)
        finally:
            s.close()

    def stop(self):
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                rc = "killed"
        for x in (self.log, self.notify):
            if x is not None:
                try:
                    x.close()
                except OSError:
                    pass
        return rc

    def cleanup(self, keep):
        if keep:
            print(f"  (temp dir kept: {self.dir})", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- workload

def presign(key, n):
    """(handoff_id, file name, bytes) for n valid handoffs to alice, signed
    now with a ttl long enough for the slowest run."""
    out = []
    for _ in range(n):
        doc = hdproto.build("bob", "alice", key, ttl=1800)
        hid = doc["handoff_id"]
        out.append((hid, hid + ".json", hdproto.dumps(doc)))
    return out


def drop_one(tmp_fd, hand_fd, name, data):
    tname = "." + name + ".tmp"
    fd = os.open(tname, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=tmp_fd)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.rename(tname, name, src_dir_fd=tmp_fd, dst_dir_fd=hand_fd)
    return time.monotonic()


def pct(sorted_vals, p):
    if not sorted_vals:
        return None
    # nearest-rank percentile
    k = max(0, min(len(sorted_vals) - 1, int(-(-p * len(sorted_vals) // 100)) - 1))
    return sorted_vals[k]


def start_attach(cmd, pid, tag):
    """--attach: a profiler on the running daemon, e.g.
    'strace -c -f -p {pid} -o /tmp/strace.{tag}' or
    'perf record -g -p {pid} -o /tmp/perf.{tag}'."""
    if not cmd:
        return None
    argv = [x.format(pid=pid, tag=tag) for x in shlex.split(cmd)]
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


def bench_one(handoffd, fsync, phase, n, rate, timeout, keep, attach=None, cleanup=None,
              dump=None, settle=None):
    tag = f"{'on' if fsync else 'off'}-{phase}"
    r = Run(handoffd, fsync, tag)
    if cleanup is not None:
        cleanup.append(r)
    ok = False
    prof = None
    res = {"fsync": "on" if fsync else "off", "phase": phase, "n": n}
    try:
        items = presign(r.key, n)
        # the file system's create cost right now, next to this run's spool
        scratch = os.path.join(r.dir, "create-cost")
        os.mkdir(scratch)
        res["create_us"] = _create_cost_in(scratch, 100)
        # --settle: ext4 without a journal skips inodes freed in the last
        # 60 s (360 s while their inode table block is dirty), so creates
        # are slow for minutes after anyone's mass delete.  Observed here:
        # they get cheap again after some thousands of creates, so warm up
        # by creating (and keeping) files, within a time budget shared by
        # all runs, until a create is cheap.
        waited = 0.0
        while settle is not None and res["create_us"] > settle["us"] and settle["left"] > 0:
            t = time.monotonic()
            _create_cost_in(scratch, 1000)
            res["create_us"] = _create_cost_in(scratch, 100)
            dt = time.monotonic() - t
            settle["left"] -= dt
            waited += dt
        res["settle_s"] = waited
        w = Watcher(r.handoffs)
        w.start()
        try:
            r.start()
            pid = r.proc.pid
            prof = start_attach(attach, pid, tag)
            mem0 = proc_status(pid)
            cpu0 = proc_cpu(pid)
            tmp_fd = os.open(os.path.join(r.spool, "tmp"), os.O_RDONLY | os.O_DIRECTORY)
            hand_fd = os.open(os.path.join(r.spool, "handoff"), os.O_RDONLY | os.O_DIRECTORY)
            drops = [0.0] * n
            try:
                t0 = time.monotonic()
                if phase == "burst":
                    for i, (_, name, data) in enumerate(items):
                        drops[i] = drop_one(tmp_fd, hand_fd, name, data)
                else:
                    step = 1.0 / rate
                    for i, (_, name, data) in enumerate(items):
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
            done = w.wait_count(n, timeout)
            t_end = time.monotonic()
            if r.proc.poll() is not None:
                raise BenchError(f"handoffd exited {r.proc.returncode} during the run:\n{r.logs()}")
            cpu1 = proc_cpu(pid)
            mem1 = proc_status(pid)
            try:
                st = r.status()
                counters = st.get("counters", {})
            except (OSError, ValueError) as e:
                counters = {"error": str(e)}
        finally:
            w.close()

        # cross-checks
        names = {name: hid for hid, name, _ in items}
        on_disk = sorted(x for x in os.listdir(r.handoffs) if not x.startswith("."))
        missing = [x for x in names if x not in w.seen]
        extra = [x for x in w.seen if x not in names]
        dups = sum(w.dups.values())
        rejected = [x for x in os.listdir(os.path.join(r.spool, "rejected"))
                    if not x.startswith(".") and not x.endswith(".reason")] \
            if os.path.isdir(os.path.join(r.spool, "rejected")) else []
        problems = []
        if w.overflow:
            problems.append("inotify overflow in the bench watcher (latencies incomplete)")
        if not done and not w.overflow:
            problems.append(f"timed out after {timeout}s: {len(w.seen)}/{n} bootstraps seen")
        if missing:
            problems.append(f"{len(missing)} ids without a bootstrap event, e.g. {missing[:3]}")
        if extra:
            problems.append(f"{len(extra)} unexpected bootstrap names, e.g. {extra[:3]}")
        if dups:
            problems.append(f"{dups} bootstraps delivered more than once")
        if sorted(names) != on_disk and not missing:
            problems.append(f"handoffs/ holds {len(on_disk)} files, expected exactly the {n} ids")
        if rejected:
            problems.append(f"{len(rejected)} rejected, e.g. {rejected[:3]}")
        for k in ("claimed", "delivered"):
            if isinstance(counters.get(k), int) and counters[k] != n:
                problems.append(f"daemon counter {k} = {counters[k]}, expected {n}")

        if dump:
            with open(dump.format(tag=tag), "w") as f:
                f.write("i,drop_s,latency_ms\n")
                for i, (_, name, _) in enumerate(items):
                    if name in w.seen:
                        f.write(f"{i},{drops[i] - drops[0]:.6f},{(w.seen[name] - drops[i]) * 1000.0:.3f}\n")
        lat = sorted((w.seen[name] - drops[i]) * 1000.0
                     for i, (_, name, _) in enumerate(items) if name in w.seen)
        last = max(w.seen.values()) if w.seen else t_end
        span = last - drops[0] if n else 0.0
        res.update({
            "drop_s": round(t_dropped - t0, 4),
            "drop_rate": round(n / (t_dropped - t0), 1) if t_dropped > t0 else None,
            "target_rate": rate if phase == "rate" else None,
            "span_s": round(span, 4),
            "throughput": round(len(w.seen) / span, 1) if span > 0 else None,
            "lat_p50_ms": round(pct(lat, 50), 3) if lat else None,
            "lat_p99_ms": round(pct(lat, 99), 3) if lat else None,
            "lat_max_ms": round(lat[-1], 3) if lat else None,
            "cpu_s": round(cpu1 - cpu0, 3),
            "cpu_ms_per_1000": round((cpu1 - cpu0) * 1000.0 / n * 1000, 1) if n else None,
            "rss_ready_kb": mem0.get("VmRSS"),
            "vmhwm_kb": mem1.get("VmHWM"),
            "vmrss_kb": mem1.get("VmRSS"),
            "bootstraps": len(w.seen),
            "counters": {k: counters.get(k) for k in ("claimed", "delivered", "recovered", "rejected")
                         if k in counters},
            "ok": not problems,
            "problems": problems,
        })
        ok = not problems
        return res
    finally:
        stop_attach(prof)
        rc = r.stop()
        res["exit"] = rc
        if rc not in (0, None) and res.get("ok"):
            res["ok"] = False
            res.setdefault("problems", []).append(f"handoffd exit status {rc}")
            ok = False
        r.keep = keep or (not ok and bool(os.environ.get("HD_KEEP_TMP")))
        if cleanup is None:
            r.cleanup(r.keep)


# ---------------------------------------------------------------- machine

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


def create_cost(base, n=300):
    """Microseconds per empty-file create (open O_CREAT|O_EXCL + close) in a
    fresh directory under base: the file system's inode allocation cost,
    which bounds both the writer and the daemon (3 creates per item).
    Returns (us, dir); the dir is removed at the very end, as deleting
    files makes later creates slower on ext4 without a journal."""
    d = tempfile.mkdtemp(prefix="hdbench.cal.", dir=base)
    return _create_cost_in(d, n), d


def _create_cost_in(parent, n):
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

def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(results):
    cols = [("fsync", 5, "s"), ("phase", 5, "s"), ("N", 6, "d"),
            ("drop/s", 8, ".0f"), ("items/s", 8, ".0f"), ("p50 ms", 8, ".2f"),
            ("p99 ms", 8, ".2f"), ("max ms", 8, ".2f"), ("cpu ms/1k", 9, ".1f"),
            ("HWM kB", 7, "d"), ("RSS kB", 7, "d"), ("fs us/cr", 8, ".0f"), ("check", 5, "s")]
    keys = ["fsync", "phase", "n", "drop_rate", "throughput", "lat_p50_ms", "lat_p99_ms",
            "lat_max_ms", "cpu_ms_per_1000", "vmhwm_kb", "vmrss_kb", "create_us", None]
    head = "  ".join(f"{c:>{w}}" for c, w, _ in cols)
    lines = [head, "-" * len(head)]
    for r in results:
        cells = []
        for (c, w, spec), k in zip(cols, keys):
            v = ("ok" if r.get("ok") else "FAIL") if k is None else r.get(k)
            cells.append(f"{fmt(v, spec):>{w}}")
        lines.append("  ".join(cells))
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


def run_relay(handoffd, mode, a, results):
    """The relay phase (bench/bench_relay.py): rburst and rrate rows."""
    import bench_relay
    t = time.monotonic()
    rows = bench_relay.run(handoffd, mode == "on", a.relay_n, a.relay_rate, a.timeout, a.keep)
    for res in rows:
        results.append(res)
        print(f"  fsync {mode:3} {res['phase']:6}: {fmt(res.get('throughput'), '.0f')} items/s, "
              f"p50 {fmt(res.get('lat_p50_ms'), '.2f')} ms, p99 {fmt(res.get('lat_p99_ms'), '.2f')} ms"
              f"{'' if res.get('ok') else '  FAIL'}")
        for p in res.get("problems", []):
            print(f"    problem: {p}")
    print(f"    (relay a -> nats-server -> b, {time.monotonic() - t:.1f}s)")
    sys.stdout.flush()
    return not all(r.get("ok") for r in rows)


def main():
    ap = argparse.ArgumentParser(description="handoffd benchmark (see bench/README.md)")
    ap.add_argument("--build", default=os.environ.get("HD_BUILD", os.path.join(SRC, "build")),
                    help="build dir holding handoffd (default: build/)")
    ap.add_argument("-n", "--n", type=int, default=int(os.environ.get("BENCH_N", "5000")),
                    help="handoffs per run (default 5000)")
    ap.add_argument("--rate", type=parse_rate, default=parse_rate(os.environ.get("BENCH_RATE", "500")),
                    help="fixed-rate phase: drops per second (default 500)")
    ap.add_argument("--fsync", default="on,off", help="modes to run: on,off (default both)")
    ap.add_argument("--phases", default="burst,rate,relay",
                    help="phases: burst,rate,relay (default all; relay: bench/bench_relay.py)")
    ap.add_argument("--relay-n", type=int, default=int(os.environ.get("BENCH_RELAY_N", "2000")),
                    help="relay phase: handoffs per run (default 2000)")
    ap.add_argument("--relay-rate", type=parse_rate, default=parse_rate(os.environ.get("BENCH_RELAY_RATE", "200")),
                    help="relay phase: fixed rate (default 200/s)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds to wait for the last bootstrap after the last drop")
    ap.add_argument("--attach", default=os.environ.get("BENCH_ATTACH"),
                    help="command run against the daemon during each run, {pid} and {tag} "
                         "substituted, stopped with SIGINT, e.g. 'strace -c -f -p {pid} -o /tmp/st.{tag}'")
    ap.add_argument("--dump", default=None,
                    help="write per-item drop time and latency as CSV to this path ({tag} substituted)")
    ap.add_argument("--settle", type=float, default=float(os.environ.get("BENCH_SETTLE", "0")),
                    help="seconds, shared by all runs, to spend creating throwaway files before a run "
                         "while a create in the temp dir costs more than --settle-us (default 0)")
    ap.add_argument("--settle-us", type=float, default=100.0,
                    help="create cost in us below which a run starts at once (default 100)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs")
    a = ap.parse_args()
    if a.n < 1:
        ap.error("N must be >= 1")
    handoffd = os.path.join(a.build, "handoffd")
    if not os.access(handoffd, os.X_OK):
        ap.error(f"{handoffd}: not built (run make)")
    modes = [m.strip() for m in a.fsync.split(",") if m.strip()]
    phases = [p.strip() for p in a.phases.split(",") if p.strip()]
    if any(m not in ("on", "off") for m in modes) or any(p not in ("burst", "rate", "relay") for p in phases):
        ap.error("--fsync takes on,off and --phases burst,rate,relay")

    # The watcher thread takes its timestamps as soon as it holds the GIL:
    # keep the writer's hold short.
    sys.setswitchinterval(0.0005)

    tmpbase = os.path.realpath(os.environ.get("TMPDIR") or "/tmp")
    m = machine(tmpbase)
    fs = m["fs"]
    m["create_us"], cal_dir = create_cost(tmpbase)
    jr = {True: ", journal", False: ", NO journal"}.get(fs.get("journal"), "")
    print(f"handoffd bench: {handoffd}")
    print(f"machine: nproc {m['nproc']}, {m['cpu']}, Linux {m['kernel']}, python {m['python']}")
    print(f"temp dir: {tmpbase} on {fs['mount']} ({fs['type']}{jr}; stat -f: {fs['stat_f']}; {fs['options']})")
    print(f"file create cost there: {m['create_us']:.0f} us per empty file (the daemon creates 3 per item)")
    print(f"N = {a.n} per run, fixed rate {a.rate:g}/s, fsync {'+'.join(modes)}, phases {'+'.join(phases)}"
          + (f", warm-up up to {a.settle:g}s while creates cost > {a.settle_us:g} us" if a.settle > 0 else ""))
    sys.stdout.flush()

    settle = {"us": a.settle_us, "left": a.settle} if a.settle > 0 else None
    results = []
    runs = []
    failed = False

    def on_term(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    t_all = time.monotonic()
    try:
        for mode in modes:
            for phase in phases:
                t = time.monotonic()
                if phase == "relay":
                    failed |= run_relay(handoffd, mode, a, results)
                    continue
                try:
                    res = bench_one(handoffd, mode == "on", phase, a.n, a.rate, a.timeout,
                                    a.keep, a.attach, runs, a.dump, settle)
                except BenchError as e:
                    res = {"fsync": mode, "phase": phase, "n": a.n, "ok": False, "problems": [str(e)]}
                except Exception as e:  # noqa: BLE001 -- report, and go on with the next run
                    res = {"fsync": mode, "phase": phase, "n": a.n, "ok": False,
                           "problems": [f"{type(e).__name__}: {e}"]}
                if phase == "rate" and res.get("throughput"):
                    res["saturated"] = res["throughput"] < 0.95 * a.rate
                if phase == "burst" and res.get("drop_s") is not None:
                    # the last bootstrap came right after the last drop: the
                    # daemon kept up and the writer set the pace
                    res["writer_bound"] = res["span_s"] <= res["drop_s"] * 1.05 + 0.05
                results.append(res)
                if res.get("settle_s"):
                    print(f"  (warmed the file system for {res['settle_s']:.0f}s: "
                          f"now {res['create_us']:.0f} us per create)")
                print(f"  fsync {mode:3} {phase:5}: "
                      f"{fmt(res.get('throughput'), '.0f')} items/s, "
                      f"p50 {fmt(res.get('lat_p50_ms'), '.2f')} ms, "
                      f"p99 {fmt(res.get('lat_p99_ms'), '.2f')} ms "
                      f"({time.monotonic() - t:.1f}s){'' if res.get('ok') else '  FAIL'}")
                for p in res.get("problems", []):
                    print(f"    problem: {p}")
                sys.stdout.flush()
                failed |= not res.get("ok")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        failed = True
    finally:
        # Removed only now: on ext4 without a journal, creates right after a
        # mass delete are slower, and one run must not slow the next.
        for r in runs:
            r.cleanup(r.keep)
        shutil.rmtree(cal_dir, ignore_errors=True)

    print()
    print(table(results))
    print()
    print("items/s: N / (last bootstrap - first drop).  drop/s: what the writer achieved.")
    print("p50/p99/max: from just after the rename into handoff/ to the bootstrap's IN_MOVED_TO.")
    print("cpu ms/1k: daemon utime+stime per 1000 items.  HWM/RSS: daemon VmHWM/VmRSS after the run.")
    print("fs us/cr: microseconds per empty-file create in the temp dir just before the run.")
    if "relay" in phases:
        print("rburst/rrate: the relay, host a -> one local nats-server -> host b; items/s and p50/p99 from the")
        print(f"drop on a to the bootstrap on b; N = {a.relay_n}, rate {a.relay_rate:g}/s; cpu ms/1k is a + b.")
    sat = [r for r in results if r.get("saturated")]
    if sat:
        print(f"NOTE: at {a.rate:g}/s the daemon was saturated (fsync "
              f"{', '.join(r['fsync'] for r in sat)}): the rate run's latency is queueing, "
              f"not service time; try BENCH_RATE below its burst items/s.")
    wb = [r for r in results if r.get("writer_bound")]
    if wb:
        print(f"NOTE: burst with fsync {', '.join(r['fsync'] for r in wb)}: the daemon kept up with the "
              f"writer, so items/s there is a lower bound of its throughput.")
    print(f"total {time.monotonic() - t_all:.1f}s")
    out = {"version": 1, "machine": m, "params": {"n": a.n, "rate": a.rate, "fsync": modes, "phases": phases},
           "runs": results, "ok": not failed}
    print("BENCH_JSON " + json.dumps(out, sort_keys=True, separators=(",", ":")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
