"""Attack (issues 18.1, 19.3): producers' files are group-readable, so a
member can flock(LOCK_EX) every file staged in tmp/ (before it reaches
handoff/) and every claimed/<id>.json.  The daemon must neither take that
for "another handoffd is deciding" nor wait: each handoff is claimed and
delivered at once, and a consumed one is archived although its claimed
file is locked."""

import fcntl
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = 6
QUICK_S = 2.0 * hdtest.SLOW


def test_attack_lock_producer_files_not_blocked(env, d):
    locks, docs = [], []
    t0 = time.monotonic()
    for _ in range(N):
        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        tmp = env.path("tmp", doc["handoff_id"] + ".json")
        with open(tmp, "wb") as f:
            f.write(hdproto.dumps(doc))
        fd = os.open(tmp, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)      # the member's lock, held throughout
        locks.append(fd)
        os.rename(tmp, env.path("handoff", doc["handoff_id"] + ".json"))
        docs.append(doc)
    try:
        def delivered():
            return sum(d_["handoff_id"] + ".json" in env.bootstraps("alice") for d_ in docs)
        try:
            hdtest.wait_for(lambda: delivered() == N, timeout=QUICK_S * 2, what="all delivered")
        except hdtest.Fail:
            pass
        t = time.monotonic() - t0
        got = delivered()
        print(f"{N} handoffs whose files a member locked: {got} delivered after {t:.2f}s")
        check(got == N, f"only {got} of {N} delivered while their files were locked")
        check(t < QUICK_S, f"took {t:.1f}s")

        # The member's locks moved with the inodes: claimed/<id>.json is
        # locked now.  Consume one: it is archived all the same.
        t0 = time.monotonic()
        check(hdtest.real_consumer(env.state["alice"], docs[0]["handoff_id"]), "consumed")
        try:
            hdtest.wait_for(lambda: env.count("archive") == 1, timeout=QUICK_S * 2,
                            what="consumed item archived")
        except hdtest.Fail:
            pass
        t = time.monotonic() - t0
        print(f"consumed item whose claimed file a member locked: archived "
              f"{'after %.2fs' % t if env.count('archive') == 1 else 'NEVER'}")
        check(env.count("archive") == 1 and t < QUICK_S, "consumed item with a locked claimed file not archived")
    finally:
        for fd in locks:
            os.close(fd)
    print(f"peak RSS {hdtest.proc_status(d.proc.pid, 'VmHWM')} kB")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        d = env.start()
        test_attack_lock_producer_files_not_blocked(env, d)
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
