"""A 3-node JetStream cluster (real nats-servers on loopback, R3 stream):
the stream's leader is killed with SIGKILL in the middle of a burst from
host a to host b.  0 lost, 0 delivered twice; prints how long publishing
stalled (the longest time a's relayed count did not move while items
waited in its outbox/, after the kill).

make check runs 1,500 items; `make stress` the full 5,000
(HD_RELAY_CLUSTER_N)."""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RELAY_CLUSTER_N", "1500"))


def stall_after(samples, t_kill):
    """Longest span after t_kill with no new relayed item while the
    outbox was not empty (samples: relaykit.Sampler's, of relayed and
    outbox)."""
    worst, last_t, last_n = 0.0, None, None
    for t, n, ob in samples:
        if t < t_kill:
            last_t, last_n = t, n
            continue
        if last_n is None or n != last_n or ob == 0:
            last_t, last_n = t, n
            continue
        worst = max(worst, t - last_t)
    return worst


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts(nodes=3) as h:
        a, b = h.start_a(), h.start_b()
        hdtest.wait_for(lambda: a.status()["relay"]["ready"] and b.status()["relay"]["ready"],
                        60, "both relays set up on the cluster")
        hdtest.wait_for(h.ns.stream_leader, 30, "a stream leader")
        s = relaykit.Sampler(a, lambda r: (r["relayed"], r["outbox"]))
        s.start()
        t0 = time.monotonic()
        ids = []
        dropper = threading.Thread(target=lambda: ids.extend(h.drop(N)), daemon=True)
        dropper.start()
        hdtest.wait_for(lambda: a.status()["relay"]["relayed"] >= N // 4, 120, f"{N // 4} relayed")
        leader = h.ns.stream_leader()
        check(leader is not None, "stream leader known")
        at = a.status()["relay"]["relayed"]
        t_kill = time.monotonic()
        h.ns.node(leader).kill()
        dropper.join()
        h.wait_delivered(ids, timeout=240)
        t_all = time.monotonic() - t0
        s.stop()
        h.check_exactly_once(ids, settle=2.0)
        new_leader = h.ns.stream_leader()
        check(new_leader and new_leader != leader, f"a new leader ({new_leader})")
        stall = stall_after(s.samples, t_kill)
        ra, rb = a.status()["relay"], b.status()["relay"]
        print(f"3-node cluster, R3: leader {leader} SIGKILLed after {at} of {N} relayed; "
              f"new leader {new_leader}; publishing stalled {stall:.1f}s; 0 lost, 0 twice; "
              f"a publish errors {ra['publish_errors']}, b duplicates dropped {rb['duplicates']}; "
              f"all delivered in {t_all:.1f}s")
        check(a.stop() == 0 and b.stop() == 0, "both exit 0")


hdtest.run(main)
