"""The power-cut harness from Python: mount tests/powercut/powercutfs over
a backing directory, cut the power, mount it again.

    fs = pcfs.Mount(backing, mnt)      # mounted when this returns
    ...                                # work under mnt
    fs.cut()                           # the disk is now what was synced
    (or fs.arm("fsyncdir", "/spool/outbox"): the same right after that sync)
    kill what used mnt; fs.unmount()
    fs = pcfs.Mount(backing, mnt)      # the reboot

MODEL is the one-line statement of what survives (powercutfs.c's header)."""

import os
import subprocess
import time

MODEL = ("strict file system: a file's bytes survive a cut only as of its last "
         "fsync/fdatasync, a directory's entries only as of that directory's last "
         "fsync; no ordering beyond that (a rename between two directories is a "
         "change in each)")


def binary():
    return os.path.join(os.environ.get("HD_BUILD", "build"), "tests", "powercutfs")


def unusable():
    """(what it needs, why) when the harness cannot run here, or None:
    hdtest.skip(*why)."""
    if not os.path.exists(binary()):
        return "powercutfs", f"no {binary()} (make {binary()})"
    if not os.path.exists("/dev/fuse"):
        return "fuse-device", "no /dev/fuse"
    if os.geteuid() != 0:
        return "root", "the harness mounts with allow_other"
    return None


def _mounted(mnt):
    mnt = os.path.realpath(mnt)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mnt for line in f)


class Mount:
    def __init__(self, backing, mnt, log=None, concurrent=False):
        """concurrent: syncs issued together may be applied in any order
        (powercutfs --concurrent; see delay())."""
        self.backing, self.mnt = backing, mnt
        os.makedirs(backing, exist_ok=True)
        os.makedirs(mnt, exist_ok=True)
        self.log = log
        self.proc = subprocess.Popen([binary(), backing, mnt] + (["--concurrent"] if concurrent else []),
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=log or subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not _mounted(mnt):
            if self.proc.poll() is not None:
                raise RuntimeError(f"powercutfs exited {self.proc.returncode} before mounting {mnt}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"powercutfs did not mount {mnt} in 20 s")
            time.sleep(0.01)

    def stats(self):
        with open(os.path.join(self.mnt, ".powercut")) as f:
            return dict((k, int(v)) for k, v in (line.split() for line in f))

    def cut(self):
        """The power goes: the backing directory becomes what was synced;
        every later operation on the mount fails with EIO."""
        fd = os.open(os.path.join(self.mnt, ".powercut"), os.O_WRONLY)
        try:
            os.write(fd, b"cut\n")
        finally:
            os.close(fd)

    def arm(self, op, text, then=None, nth=1):
        """The power goes right after the next op ("fsync", "fsyncdir",
        "rename", "link", "unlink", "create") on a path holding text (a rename's or
        link's destination), as cut() would; then=(op2, text2): after the
        first op2 on text2 that follows it; nth: after the nth such
        operation of the last stage.  See powercutfs.c."""
        self._ctl(f"arm {op} {text}{' %s %s' % then if then else ''} {nth}\n".encode())

    def delay(self, text, ms):
        """(concurrent mounts) each sync of a directory whose path holds
        text waits ms before it is applied: a sync issued at the same time
        goes first; one issued after it returned still comes after."""
        fd = os.open(os.path.join(self.mnt, ".powercut"), os.O_WRONLY)
        try:
            os.write(fd, f"delay fsyncdir {text} {ms}\n".encode())
        finally:
            os.close(fd)

    def trace(self, on=True):
        """Log every operation a cut can be armed at to the mount's log:
        "powercutfs: op OP PATH" (a rename's or link's "PATH <- SOURCE")."""
        self._ctl(b"trace on\n" if on else b"trace off\n")

    def _ctl(self, line):
        fd = os.open(os.path.join(self.mnt, ".powercut"), os.O_WRONLY)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def disarm(self):
        fd = os.open(os.path.join(self.mnt, ".powercut"), os.O_WRONLY)
        try:
            os.write(fd, b"disarm\n")
        finally:
            os.close(fd)

    def is_cut(self):
        """Whether the power went (every operation fails from then on)."""
        try:
            os.stat(os.path.join(self.mnt, ".powercut"))
            return False
        except OSError:
            return True

    def unmount(self):
        if _mounted(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], check=False)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
