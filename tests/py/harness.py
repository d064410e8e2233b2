"""Process-level tools the crash, fault and power-cut harnesses share
(stdlib only): Gate parks a worker thread between two operations,
Strace tampers with one syscall of a running process (strace inject),
tracer_pid and cpu_seconds read /proc.  The spool invariant itself and
the real consumer: invariant.py."""

import os


class Gate:
    """Pause/resume for a worker thread: pause() returns once the worker is
    parked between two operations (so nothing of it is half done)."""

    def __init__(self):
        import threading
        self._want = threading.Event()
        self._parked = threading.Event()
        self.stopping = threading.Event()

    def pause(self, timeout=30.0):
        self._want.set()
        if not self._parked.wait(timeout):
            raise RuntimeError("worker did not park")

    def resume(self):
        self._parked.clear()
        self._want.clear()

    def stop(self):
        self.stopping.set()
        self._want.clear()

    def point(self):
        """Called by the worker between operations; False once stopped."""
        import time
        if self._want.is_set():
            self._parked.set()
            while self._want.is_set() and not self.stopping.is_set():
                time.sleep(0.002)
        return not self.stopping.is_set()


def tracer_pid(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Strace:
    """strace attached to a running process, tampering with one syscall:

        with Strace(pid, "renameat2", "error=EIO", paths=[spool + "/handoff"]):
            ...     # every renameat2 on that directory fails with EIO

    paths (strace -P) limit the tampering to calls on those paths or on
    directory fds that are those paths.  action: "error=ENOSPC",
    "signal=SIGKILL", with ":when=N+" etc.  Leaving the block detaches.
    Raises Unavailable when strace is missing or ptrace is not allowed."""

    class Unavailable(Exception):
        pass

    def __init__(self, pid, syscall, action, paths=(), timeout=10.0):
        import shutil
        if not shutil.which("strace"):
            raise Strace.Unavailable("strace not installed")
        self.pid, self.timeout = pid, timeout
        self.args = ["strace", "-qq", "-f", "-o", "/dev/null", "-p", str(pid),
                     "-e", f"trace={syscall}", "-e", f"inject={syscall}:{action}"]
        for p in paths:
            self.args += ["-P", p]
        self.proc = None

    def __enter__(self):
        import subprocess
        import time
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + self.timeout
        while tracer_pid(self.pid) != self.proc.pid:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace").strip()
                if not os.path.exists(f"/proc/{self.pid}"):
                    return self     # the tracee is gone (signal=SIGKILL)
                raise Strace.Unavailable(f"strace exited {self.proc.returncode}: {err}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise Strace.Unavailable("strace did not attach")
            time.sleep(0.01)
        return self

    def detach(self):
        import signal
        import time
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(self.timeout)
        except Exception:  # noqa: BLE001
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()
        self.proc = None
        deadline = time.monotonic() + self.timeout
        while tracer_pid(self.pid) != 0 and time.monotonic() < deadline:
            time.sleep(0.01)

    def __exit__(self, *exc):
        self.detach()
        return False


def cpu_seconds(pid):
    """utime + stime of a process, in seconds, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
