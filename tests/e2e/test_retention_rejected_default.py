"""[retention] rejected_max_bytes defaults to 256M (issue 43, item 12):
junk for a served agent is anyone's to send and is kept in rejected/, and
with no bound set 283 MB of it stayed there.  With no [retention] section
at all, 34 junk files of 8 MiB each (272 MiB, each rejected: too large,
naming no handoff_id, so not held by the replay window) leave rejected/
pruned to at most 256 MiB, oldest first.  On tmpfs (/dev/shm when there
is one): nothing here is about the disk."""

import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

MIB = 1 << 20
N, SIZE = 34, 8 * MIB
BOUND = 256 * MIB


def rejected_bytes(env):
    total = 0
    for n in env.names("rejected"):
        try:
            st = os.stat(env.path("rejected", n))
        except FileNotFoundError:
            continue
        total += min(st.st_size, st.st_blocks * 512)
    return total


def main():
    if os.access("/dev/shm", os.W_OK):
        tempfile.tempdir = "/dev/shm"
    with hdtest.Env(agents=["alice"]) as env:
        d = env.start()
        junk = b"x" * SIZE
        for i in range(N):
            tmp = env.path("tmp", f".junk-{i}.tmp")
            with open(tmp, "wb") as f:
                f.write(junk)
            os.rename(tmp, env.path("handoff", f"junk-{i:02d}.json"))
        hdtest.wait_for(lambda: not env.names("handoff"), 60 * hdtest.SLOW, "all junk decided")
        try:
            hdtest.wait_for(lambda: rejected_bytes(env) <= BOUND, 10 * hdtest.SLOW,
                            "rejected/ pruned to 256 MiB")
        finally:
            kept = sorted(env.items("rejected"))
            print(f"- {N} junk files of 8 MiB rejected: rejected/ holds {len(kept)} of them, "
                  f"{rejected_bytes(env) / MIB:.0f} MiB")
        check(kept and kept[0] > "junk-00.json" and kept[-1] == f"junk-{N - 1}.json",
              f"not the oldest pruned: {kept[:3]} ... {kept[-2:]}")
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
