"""The measuring tools of `make bench`, stdlib only, shared by bench.py and
its relay and hub phases (bench_relay.py, bench_hub.py): an inotify
watcher that timestamps each bootstrap as it is renamed into place,
/proc readings (CPU, memory, context switches), the generated items and
their drop (stage in tmp/, rename into handoff/), percentiles, and the
file system's facts (its type, the cost of creating a file there, the
machine).  Its importers put tests/py on sys.path first (hdproto).
"""

import ctypes
import ctypes.util
import os
import platform
import select
import struct
import subprocess
import tempfile
import threading
import time

import hdproto

CLK_TCK = os.sysconf("SC_CLK_TCK")
AGENT = "alice"
PROGS = ("floor", "handoffd")


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


# ---------------------------------------------------------------- items

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
