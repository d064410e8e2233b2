"""A burst of consumes (issue 33, watch.c on_inotify): the items of
bootstraps gone from an agent's handoffs/ are looked at in the loop's
idle turns, a slice at a time with the slice's syncs shared, each item
on its own, never by a sweep of every claimed item.  The daemon used to
archive them inside the inotify callback, the archive and its syncs
each, and past 10 ms of that left the rest to a sweep, which opens every
claimed item.

K handoffs for alice are claimed, and M more that nobody consumes.  The
daemon is stopped (SIGSTOP), the K bootstraps are consumed as the real
consumer does (read, unlink), and the daemon continued (SIGCONT): all K
are archived as consumed, the M others stay claimed, and none of their
records in claimed/ is opened meanwhile (the test's own inotify watch on
claimed/, IN_OPEN).  HD_CONSUME_BURST_K (300) scales the burst."""

import ctypes
import ctypes.util
import os
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

K = int(os.environ.get("HD_CONSUME_BURST_K", "300"))
M = 20
IN_OPEN = 0x20
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def watch_opens(path):
    fd = libc.inotify_init1(IN_NONBLOCK)
    check(fd >= 0, f"inotify_init1: errno {ctypes.get_errno()}")
    wd = libc.inotify_add_watch(fd, path.encode(), IN_OPEN)
    check(wd >= 0, f"inotify_add_watch {path}: errno {ctypes.get_errno()}")
    return fd


def opened(fd):
    """Names opened since the last call ("" for the directory itself)."""
    names = []
    while True:
        try:
            buf = os.read(fd, 65536)
        except BlockingIOError:
            return names
        off = 0
        while off < len(buf):
            _, mask, _, ln = struct.unpack_from("iIII", buf, off)
            name = buf[off + 16:off + 16 + ln].split(b"\0", 1)[0].decode()
            names.append("" if mask & IN_ISDIR and not name else name)
            off += 16 + ln


def main():
    with hdtest.Env(agents=["alice"]) as env:
        # No periodic sweep within the test (at most once a minute).
        text = env.config_text("d0").replace("rescan_interval = 5", "rescan_interval = 60")
        d = env.start(conf=env.write_config("d0", text=text))
        ids = []
        for _ in range(K + M):
            doc = hdproto.build("bob", "alice", env.key, ttl=900)
            hdproto.drop(env.spool, doc)
            ids.append(doc["handoff_id"])
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == K + M, 60, f"{K + M} delivered")
        burst, others = ids[:K], ids[K:]
        fd = watch_opens(env.path("claimed"))
        d.send(signal.SIGSTOP)
        try:
            for hid in burst:
                check(hdtest.real_consumer(env.state["alice"], hid), f"{hid} consumed")
            opened(fd)
        finally:
            d.send(signal.SIGCONT)
        t0 = time.monotonic()
        hdtest.wait_for(lambda: d.status()["counters"]["consumed"] >= K, 60, f"{K} archived")
        took = time.monotonic() - t0
        seen = opened(fd)
        os.close(fd)
        archived = " ".join(env.items("archive"))
        other_opened = sorted({n for n in seen if n[:-5] in others})
        c = d.status()["counters"]
        print(f"{K} consumed while the daemon was stopped: archived {c['consumed']} in "
              f"{took:.2f}s after SIGCONT; records opened in claimed/: {len(seen)} "
              f"({seen.count('')} of the directory), of the {M} not consumed: "
              f"{len(other_opened)}")
        check(c["consumed"] == K and c["errors"] == 0, f"consumed {c['consumed']}, errors {c['errors']}")
        check(all(h in archived for h in burst), "not every consumed one archived")
        check(sorted(x[:-5] for x in env.items("claimed")) == sorted(others),
              "the others are no longer claimed")
        check(not other_opened and "" not in seen,
              f"a sweep looked at every claimed item: opened {other_opened[:5]}"
              f"{' and claimed/ itself' if '' in seen else ''}")
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
