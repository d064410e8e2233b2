"""kill -9 of either host's handoffd in the middle of a burst relayed
through a real nats-server, then a restart: 0 lost, 0 delivered twice.

- b killed: messages it had fetched but not acked come again (after the
  consumer's ack wait); those already in its spool are dropped as
  duplicates, the others written once.
- a killed: items whose PubAck it had not archived are published again at
  the restart; the stream's Nats-Msg-Id dedup (or b's own) removes them."""

import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RELAY_KILL_N", "2000"))


def burst(h, n):
    """Drop n on a in a thread; returns (thread, ids list filled as it goes)."""
    ids = []

    def run():
        ids.extend(h.drop(n))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, ids


def kill_b():
    with relaykit.Hosts() as h:
        h.start_a()
        b = h.start_b()
        t0 = time.monotonic()
        t, ids = burst(h, N)
        hdtest.wait_for(lambda: h.consumer.total() >= N // 4, 60, f"{N // 4} delivered on b")
        b.send(signal.SIGKILL)
        b.proc.wait()
        at = h.consumer.total()
        t.join()
        b2 = h.start_b(name="b2")
        h.wait_delivered(ids, timeout=120)
        h.check_exactly_once(ids)
        dup = b2.status()["relay"]["duplicates"]
        print(f"kill -9 of b after {at} of {N} delivered: 0 lost, 0 twice; "
              f"{dup} redelivered message(s) dropped as duplicates; {time.monotonic() - t0:.1f}s")


def kill_a():
    with relaykit.Hosts() as h:
        a = h.start_a()
        h.start_b()
        t0 = time.monotonic()
        t, ids = burst(h, N)
        hdtest.wait_for(lambda: len(h.relayed_on_a()) >= N // 4, 60, f"{N // 4} relayed from a")
        a.send(signal.SIGKILL)
        a.proc.wait()
        at = len(h.relayed_on_a())
        t.join()
        a2 = h.start_a(name="a2")
        h.wait_delivered(ids, timeout=120)
        h.check_exactly_once(ids)
        st = a2.status()["relay"]
        dup = sum(1 for o in h.relayed_on_a().values() if o.get("duplicate"))
        print(f"kill -9 of a after {at} of {N} relayed: 0 lost, 0 twice; a2 relayed {st['relayed']} "
              f"after the restart, {dup} of them already in the stream (Nats-Msg-Id), "
              f"{h.db.status()['relay']['duplicates']} dropped by b; {time.monotonic() - t0:.1f}s")


def main():
    relaykit.skip_without_nats()
    kill_b()
    kill_a()


hdtest.run(main)
