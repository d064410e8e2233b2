"""A forger of cancel answers (issue 43.1), for the tests of cancel/: a
member of the spool's group who watches cancel/ with inotify and, for
each new request NAME, creates .WORD.NAME of her own at once, the answer
she wants its requester to read.  stdlib only (inotify through ctypes)."""

import os
import subprocess
import sys

import hdtest
from hdtest import check

PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

# Prints "watching", then "forged NAME" (or "failed NAME ERROR") a file.
_FORGER = r"""
import ctypes, os, struct, sys
d, word = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
ifd = libc.inotify_init1(0)
IN_MOVED_TO, IN_CREATE = 0x80, 0x100
if ifd < 0 or libc.inotify_add_watch(ifd, d.encode(), IN_MOVED_TO | IN_CREATE) < 0:
    print("inotify failed", ctypes.get_errno(), flush=True)
    sys.exit(1)
print("watching", flush=True)
while True:
    buf = os.read(ifd, 65536)
    i = 0
    while i < len(buf):
        _, mask, _, ln = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16:i + 16 + ln].rstrip(b"\0").decode()
        i += 16 + ln
        if not name or name.startswith("."):
            continue
        try:
            fd = os.open(os.path.join(d, "." + word + "." + name),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, b"{}")
            os.close(fd)
            print("forged", name, flush=True)
        except OSError as e:
            print("failed", name, e, flush=True)
"""


def forger(env, uid, gid, word):
    """The forger as user uid in group gid (the spool's), watching
    env's cancel/ and answering WORD; returns its Popen once it watches
    (read its stdout for "forged NAME"; kill it when done)."""
    p = subprocess.Popen([PY, "-c", _FORGER, env.path("cancel"), word], user=uid, group=gid,
                         extra_groups=[gid], stdout=subprocess.PIPE, text=True)
    check(p.stdout.readline().strip() == "watching", f"the forger (uid {uid}) did not start")
    return p


def hold_lock(env, hid):
    """The daemons' lock of hid held (hdtest.lock_id), waited for while a
    daemon holds it (just delivered, it may be at work on the item): the
    fd, whose close releases it."""
    return hdtest.wait_for(lambda: hdtest.try_lock_id(env.spool, hid),
                           what=f"the lock of {hid}")
