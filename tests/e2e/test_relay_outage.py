"""The engine down when host a starts: local delivery goes on, handoffs for
the remote host wait in outbox/ (status: not connected, outbox depth and
age; exit 1, degraded), survive a restart of a, and one whose expires_at
passes first is rejected as expired_unrelayed.  Then the server starts:
the other 200 drain from the outbox and are delivered once on b."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RELAY_OUTAGE_N", "200"))


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts(start_nats=False) as h:
        # a also serves a local agent: local delivery must not wait.
        h.a.agents.append("carl")
        a = h.start_a()
        st = a.status()["relay"]
        check(not st["connected"] and not st["ready"], f"not connected: {st}")

        ids = h.drop(N)
        local = hdproto.build("bob", "carl", h.a.key)
        hdproto.drop(h.a.spool, local)
        hdtest.wait_for(lambda: len(h.a.bootstraps("carl")) == 1, 10, "local delivery while the relay is down")
        hdtest.wait_for(lambda: h.a.count("outbox") == N, 20,
                        lambda: f"{N} in outbox/ (there: {h.a.count('outbox')})")
        p = h.a.ctl("show", "-c", a.conf, ids[0], check_rc=0)
        check("outbox" in p.stdout, f"show: waiting in outbox:\n{p.stdout}")
        p = h.a.ctl("status", "-c", a.conf)
        check(p.returncode == 1 and "relay: NOT connected" in p.stdout and f"outbox {N} " in p.stdout,
              f"status shows the outage (exit {p.returncode}):\n{p.stdout}")

        # One that expires in outbox/: dropped after the checks above,
        # which its expiry would race on a loaded machine.
        short = hdproto.build("bob", "alice", h.a.key, ttl=3)
        hdproto.drop(h.a.spool, short)
        name = short["handoff_id"] + ".json"
        hdtest.wait_for(lambda: name in h.a.names("rejected"), 20, "expired_unrelayed")
        check(h.a.reason_of(name)["reason"] == "expired_unrelayed",
              f"reason expired_unrelayed: {h.a.reason_of(name)}")
        check(os.path.exists(h.a.path("ids", short["handoff_id"])), "its id is remembered")
        hdtest.wait_for(lambda: h.a.count("outbox") == N, 10,
                        lambda: f"{N} left in outbox/ (there: {h.a.count('outbox')})")

        # The outbox survives a restart.
        check(a.stop() == 0, "a stops")
        a = h.start_a(name="a2")
        check(a.status()["relay"]["outbox"] == N, f"outbox after restart: {a.status()['relay']}")

        h.ns.start()
        t0 = time.monotonic()
        h.start_b()
        h.wait_delivered(ids, timeout=90)
        t = time.monotonic() - t0
        h.check_exactly_once(ids, rejected_on_a=[name])
        check(h.consumer.counts.get(short["handoff_id"]) is None, "the expired one never reached b")
        print(f"engine down at start: {N} waited in outbox/ (one expired_unrelayed), survived a restart, "
              f"drained and delivered once {t:.1f}s after the server started")


hdtest.run(main)
