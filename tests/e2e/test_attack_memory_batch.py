"""Attack (issue 19.4): files of 1 MiB of '{"x":[{},{},...]}' (an object, so
it parses, then fails the MAC) parse to tens of MB each.  The daemon must not hold every parsed document of a batch until
the batch ends: with the files already in handoff/ at start (the restart
case), its peak RSS (VmHWM) stays under a bound close to one document's
worth, and a legitimate handoff still goes through."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_ATTACK_MEM_N", "8"))
MIB = 1024 * 1024
# One parsed document of this kind is ~80 MB with jansson (less once the
# parser bounds what one document may allocate); N of them at once is not.
MAX_RSS_KB = 160 * 1024


def test_attack_memory_batch_bounded(env):
    os.makedirs(env.path("handoff"), exist_ok=True)
    blob = b'{"x":[' + b"{}," * ((MIB - 16) // 3) + b"{}]}"
    for i in range(N):
        with open(env.path("handoff", f"objs{i}.json"), "wb") as f:
            f.write(blob)
        os.utime(env.path("handoff", f"objs{i}.json"), (0, 0))
    d = env.start()     # READY=1 after the start scan has decided them all
    hdtest.wait_for(lambda: env.count("rejected") == N, what="all rejected")
    lat = hdtest.handoff_latency(env)
    rss = hdtest.proc_status(d.proc.pid, "VmHWM")
    print(f"{N} files of 1 MiB '{{\"x\":[{{}},{{}},...]}}' in handoff/ at start: peak RSS {rss / 1024:.0f} MB "
          f"(bound {MAX_RSS_KB // 1024} MB); legitimate handoff then delivered in {lat:.2f}s")
    # AddressSanitizer keeps freed memory in quarantine: no bound there.
    check(rss < MAX_RSS_KB or hdtest.SANITIZE, f"peak RSS {rss} kB")
    check(d.stop() == 0, "exit 0")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        test_attack_memory_batch_bounded(env)


hdtest.run(main)
