#!/usr/bin/env python3
"""The power-cut harness checked before anything is proven with it (issue
26): tests/powercut/powercutfs must lose exactly what was not synced.

Each case writes through the mount as a program would, cuts the power,
mounts the backing directory again and reads what the "disk" kept:
- a rename whose directories were not synced is lost; one followed by an
  fsync of both directories is kept;
- a rename where only the destination was synced leaves the name in both
  directories (the strict model: two changes, one per directory);
- bytes written without fsync are lost (the old bytes come back); with an
  fsync they are kept;
- a new file synced, its directory not: gone; its directory synced, the file
  not: there, empty;
- an unlink not synced comes back; an unlink synced stays gone;
- an armed cut ("arm OP TEXT [OP2 TEXT2]") comes right after that
  operation: the sync it follows is kept, nothing after it happens; armed
  at the nth ("arm fsyncdir /c 3") it lets the first n-1 pass; armed at a
  create or an unlink it comes right after it; "trace on" logs each
  operation;
- --concurrent with a sync held ("delay fsyncdir TEXT MS"): a sync issued
  with the held one is applied first, one issued after it returned after.
Skipped (passes, says why) where FUSE cannot be mounted."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "powercut"))
import hdtest  # noqa: E402
import pcfs  # noqa: E402


def fsync_path(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(p, data, sync):
    with open(p, "wb") as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def read(p):
    try:
        with open(p, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def main():
    why = pcfs.unusable()
    if why:
        hdtest.skip(*why)
    print(f"model: {pcfs.MODEL}")
    with hdtest.tmpdir() as d:
        disk, mnt = os.path.join(d, "disk"), os.path.join(d, "mnt")
        log = open(os.path.join(d, "fs.log"), "w+")
        fs = [pcfs.Mount(disk, mnt, log=log)]

        def cut():
            fs[0].cut()
            fs[0].unmount()
            fs[0] = pcfs.Mount(disk, mnt, log=log)

        try:
            M = lambda *p: os.path.join(mnt, *p)  # noqa: E731

            # A durable start: a/ and b/ exist, a/f holds v1.
            os.mkdir(M("a"))
            os.mkdir(M("b"))
            write(M("a", "f"), b"v1", sync=True)
            fsync_path(M("a"))
            fsync_path(M("b"))
            fsync_path(mnt)
            cut()
            hdtest.expect(read(M("a", "f")) == b"v1", "synced file and directories survive a cut", True)

            os.rename(M("a", "f"), M("b", "f"))
            cut()
            hdtest.expect(read(M("a", "f")) == b"v1" and read(M("b", "f")) is None,
                          f"a rename without a directory fsync is lost (a/f {read(M('a', 'f'))!r}, "
                          f"b/f {read(M('b', 'f'))!r})", True)

            os.rename(M("a", "f"), M("b", "f"))
            fsync_path(M("b"))
            fsync_path(M("a"))
            cut()
            hdtest.expect(read(M("a", "f")) is None and read(M("b", "f")) == b"v1",
                          f"a rename followed by an fsync of both directories is kept "
                          f"(a/f {read(M('a', 'f'))!r}, b/f {read(M('b', 'f'))!r})", True)

            os.rename(M("b", "f"), M("a", "f"))
            fsync_path(M("a"))
            cut()
            hdtest.expect(read(M("a", "f")) == b"v1" and read(M("b", "f")) == b"v1",
                          "a rename with only the destination synced leaves the name in both "
                          f"(a/f {read(M('a', 'f'))!r}, b/f {read(M('b', 'f'))!r})", True)
            os.unlink(M("b", "f"))
            fsync_path(M("b"))

            write(M("a", "f"), b"v2 unsynced", sync=False)
            hdtest.expect(read(M("a", "f")) == b"v2 unsynced", "the mount reads what was written", True)
            cut()
            hdtest.expect(read(M("a", "f")) == b"v1",
                          f"bytes written without fsync are lost (a/f {read(M('a', 'f'))!r})", True)

            write(M("a", "f"), b"v3 synced", sync=True)
            cut()
            hdtest.expect(read(M("a", "f")) == b"v3 synced",
                          f"bytes written and fsynced are kept (a/f {read(M('a', 'f'))!r})", True)

            write(M("a", "g"), b"new", sync=True)
            cut()
            hdtest.expect(read(M("a", "g")) is None,
                          "a new file synced in a directory not synced is gone", True)

            write(M("a", "h"), b"data never synced", sync=False)
            fsync_path(M("a"))
            cut()
            hdtest.expect(read(M("a", "h")) == b"",
                          f"a new name synced, its bytes not: the file is there, empty "
                          f"({read(M('a', 'h'))!r})", True)

            os.unlink(M("a", "h"))
            cut()
            hdtest.expect(read(M("a", "h")) == b"", "an unlink not synced comes back", True)
            os.unlink(M("a", "h"))
            fsync_path(M("a"))
            cut()
            hdtest.expect(read(M("a", "h")) is None, "an unlink synced stays gone", True)

            # An inode number reused by the backing file system must not mix two
            # files: unlink (synced), create many, sync nothing of their bytes.
            for i in range(50):
                write(M("b", f"n{i}"), b"x" * i, sync=False)
            fsync_path(M("b"))
            cut()
            hdtest.expect(read(M("a", "f")) == b"v3 synced" and
                          all(read(M("b", f"n{i}")) == b"" for i in range(50)),
                          "new files whose bytes were not synced are empty, old ones intact", True)

            # Armed: the cut comes after the sync of b/ that follows a
            # rename into a/ (not after the earlier sync of b/), before c/.
            os.mkdir(M("c"))
            fsync_path(mnt)
            fs[0].arm("rename", "/a/", then=("fsyncdir", "/b"))
            write(M("b", "x"), b"", sync=False)
            fsync_path(M("b"))
            hdtest.expect(not fs[0].is_cut(), "armed: not cut before its first step", True)
            os.rename(M("b", "x"), M("a", "x"))
            fsync_path(M("a"))
            fsync_path(M("b"))
            hdtest.expect(fs[0].is_cut(), "armed: cut after its second step", True)
            try:
                fsync_path(M("c"))
                after = "worked"
            except OSError:
                after = "failed"
            fs[0].unmount()
            fs[0] = pcfs.Mount(disk, mnt, log=log)
            hdtest.expect(read(M("a", "x")) == b"" and read(M("b", "x")) is None and after == "failed",
                          f"armed cut: the syncs up to its operation kept, nothing after it "
                          f"(a/x {read(M('a', 'x'))!r}, b/x {read(M('b', 'x'))!r}, "
                          f"a sync after the cut {after})", True)

            # Armed at the nth: "arm fsyncdir /c 3" lets two syncs of c/
            # pass and cuts after the third; traced, each is logged.
            fs[0].trace()
            fs[0].arm("fsyncdir", "/c", nth=3)
            fsync_path(M("c"))
            fsync_path(M("c"))
            hdtest.expect(not fs[0].is_cut(), "armed at the 3rd: not cut after the 2nd", True)
            fsync_path(M("c"))
            hdtest.expect(fs[0].is_cut(), "armed at the 3rd: cut after it", True)
            fs[0].unmount()
            fs[0] = pcfs.Mount(disk, mnt, log=log)
            log.flush()
            log.seek(0)
            traced = log.read().count("powercutfs: op fsyncdir /c\n")
            hdtest.expect(traced == 3, f"traced: the 3 syncs of c/ logged ({traced})", True)

            # Armed at a new file and at an unlink: the cut comes right
            # after it (create: the name there, the directory not synced).
            fs[0].arm("create", "/c/")
            with open(M("a", "y"), "wb"):
                pass
            hdtest.expect(not fs[0].is_cut(), "armed at a create in c/: not cut by one in a/",
                          True)
            try:
                with open(M("c", "n"), "wb"):
                    pass
            except OSError:
                pass
            hdtest.expect(fs[0].is_cut(), "armed at a create: cut after it", True)
            fs[0].unmount()
            fs[0] = pcfs.Mount(disk, mnt, log=log)
            write(M("c", "u"), b"u", sync=True)
            fsync_path(M("c"))
            fs[0].arm("unlink", "/c/u")
            os.unlink(M("c", "u"))
            hdtest.expect(fs[0].is_cut(), "armed at an unlink: cut after it", True)
            fs[0].unmount()
            fs[0] = pcfs.Mount(disk, mnt, log=log)
            hdtest.expect(read(M("c", "u")) == b"u", "an armed unlink's cut: the name comes back",
                          True)
            os.unlink(M("c", "u"))
            fsync_path(M("c"))

            # --concurrent, syncs of a/ held: of two syncs issued together the
            # other goes first (a cut after it finds a/ not synced); a sync
            # issued after the held one returned still comes after it.
            import threading
            for together in (True, False):
                fs[0].unmount()
                fs[0] = pcfs.Mount(disk, mnt, log=log, concurrent=True)
                os.rename(M("a", "x"), M("b", "x"))
                fs[0].delay("/a", 300)
                fs[0].arm("fsyncdir", "/b")
                def sync_a():
                    try:
                        fsync_path(M("a"))
                    except OSError:
                        pass    # the cut came while it was held
                t = threading.Thread(target=sync_a)
                if together:
                    t.start()
                    time.sleep(0.05)
                else:
                    t.run()
                try:
                    fsync_path(M("b"))
                except OSError:
                    pass
                if together:
                    t.join()
                fs[0].unmount()
                fs[0] = pcfs.Mount(disk, mnt, log=log)
                a, b = read(M("a", "x")), read(M("b", "x"))
                if together:
                    hdtest.expect(a == b"" and b == b"",
                                  f"concurrent: a held sync of a/ is not applied before one issued "
                                  f"with it (a/x {a!r}, b/x {b!r}: in both)", True)
                    os.unlink(M("b", "x"))
                    fsync_path(M("b"))
                else:
                    hdtest.expect(a is None and b == b"",
                                  f"concurrent: a held sync that returned comes before the next "
                                  f"(a/x {a!r}, b/x {b!r})", True)
                    os.rename(M("b", "x"), M("a", "x"))
                    fsync_path(M("a"))
                    fsync_path(M("b"))
        finally:
            fs[0].unmount()
        log.seek(0)
        cuts = sum(1 for line in log if "cut: image written" in line)
        hdtest.expect(cuts == 17, f"{cuts} cuts written", True)
    hdtest.finish("powercut harness: loses what was not synced, keeps what was")


if __name__ == "__main__":
    main()
