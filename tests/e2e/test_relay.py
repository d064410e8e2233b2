"""The relay between two hosts through one real nats-server (JetStream, temp
store dir, loopback port):

- 1,000 handoffs from bob on host a to alice and gordon on host b: each
  delivered exactly once on b, each archived as relayed on a; `handoffctl
  show` on a says "relayed to b"; status (socket and CLI) and the metrics
  textfile show the relay;
- a forged file (bad MAC) for a remote agent is rejected on a and never
  published;
- a message published straight onto handoff.b.alice with a bad MAC is
  rejected on b (bad_mac);
- the same signed handoff published again under another Nats-Msg-Id (past
  JetStream's dedup) is dropped on b as a duplicate: not rejected, not
  delivered twice."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RELAY_N", "1000"))


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        metrics = os.path.join(h.a.dir, "a.prom")
        h.a.extra = f"[metrics]\ntextfile = {metrics}\n"
        a, b = h.start_a(), h.start_b()
        relaykit.wait_ready(a, b)

        t0 = time.monotonic()
        ids = h.drop(N)
        t_drop = time.monotonic() - t0
        h.wait_delivered(ids, timeout=120)
        t_all = time.monotonic() - t0
        h.check_exactly_once(ids)
        sa, sb = a.status()["relay"], b.status()["relay"]
        check(sa["relayed"] == N and sa["outbox"] == 0, f"a's relay counters: {sa}")
        check(sb["received"] == N and sb["duplicates"] == 0, f"b's relay counters: {sb}")
        check(sa["connected"] and sa["host"] == "a" and sa["server"].startswith("nats://127.0.0.1:"),
              f"a's relay state: {sa}")
        print(f"{N} handoffs a -> b: dropped in {t_drop:.1f}s, all delivered once on b "
              f"after {t_all:.1f}s ({N / t_all:.0f}/s)")

        # show on a: where it went.
        p = h.a.ctl("show", "-c", a.conf, ids[0], check_rc=0)
        check("relayed to b" in p.stdout, f"show says relayed to b:\n{p.stdout}")
        js = json.loads(h.a.ctl("show", "-c", a.conf, "--json", ids[0], check_rc=0).stdout)
        check(js.get("outcome") == "relayed" and js.get("relayed_to") == "b", f"show --json: {js}")
        st = json.loads(h.a.ctl("status", "-c", a.conf, "--json").stdout)
        check(st["relay"]["connected"] is True and st["relay"]["relayed"] == N, f"status --json relay: {st.get('relay')}")
        txt = h.a.ctl("status", "-c", a.conf).stdout
        check("relay: connected" in txt, f"status text shows the relay:\n{txt}")
        # An empty outbox has no oldest age: null on the control socket.
        ra = a.status()["relay"]
        check(ra["outbox"] == 0 and "outbox_oldest_s" in ra and ra["outbox_oldest_s"] is None
              and (ra["last_error"] is None) == (ra["last_error_age_s"] is None),
              f"control socket relay: nulls, not -1: {ra}")
        hdtest.wait_for(lambda: os.path.exists(metrics) and
                        "handoffd_relay_connected 1" in open(metrics).read(), 15, "metrics textfile")
        # Rewritten every rescan_interval: one written during the burst
        # still shows it until the next.
        hdtest.wait_for(lambda: "handoffd_relay_outbox_oldest_seconds -1\n" in open(metrics).read(),
                        15, "metrics: an empty outbox's oldest age is -1 there, as its HELP says")

        # A forged file for a remote agent: rejected on a, never published.
        forged = hdproto.build("bob", "alice", b"not the key" * 4)
        hdproto.drop(h.a.spool, forged, name="forged.json")
        hdtest.wait_for(lambda: "forged.json" in h.a.names("rejected"), 10, "forged rejected on a")
        check(h.a.reason_of("forged.json")["reason"] == "bad_mac", "forged: bad_mac on a")
        check(a.status()["relay"]["relayed"] == N, "the forged file was not published")

        # Straight onto the stream, bad MAC: b rejects it.
        cl = natsrv.Client(h.ns.urls[0])
        bad = hdproto.build("mallory", "alice", b"another wrong key" * 2)
        ack = cl.js_publish("handoff.b.alice", hdproto.dumps(bad), msg_id=bad["handoff_id"])
        check(ack.get("stream") == "HANDOFF", f"PubAck {ack}")
        name = bad["handoff_id"] + ".json"
        hdtest.wait_for(lambda: name in h.b.names("rejected"), 15, "bad-MAC message rejected on b")
        check(h.b.reason_of(name)["reason"] == "bad_mac", "bad_mac on b")

        # A second publish of a delivered handoff, past the stream's dedup
        # (another Nats-Msg-Id): dropped on b as a duplicate.
        again = json.load(open([os.path.join(h.a.path("archive"), n) for n in h.a.names("archive")
                                if n.endswith(ids[1] + ".json")][0]))
        before = b.status()["relay"]["duplicates"]
        ack = cl.js_publish("handoff.b." + again["to_agent"], hdproto.dumps(again), msg_id="other-" + ids[1])
        check(not ack.get("duplicate"), f"second publish reached the stream: {ack}")
        hdtest.wait_for(lambda: b.status()["relay"]["duplicates"] == before + 1, 15, "b drops the duplicate")
        cl.close()
        time.sleep(0.5)
        check(h.consumer.counts.get(ids[1]) == 1, "the duplicate was not delivered again")
        check([n for n in h.b.names("rejected") if not n.startswith(bad["handoff_id"])] == [],
              f"nothing else rejected on b: {h.b.names('rejected')}")

        check(a.stop() == 0, "a exits 0")
        check(b.stop() == 0, "b exits 0")
        print(f"forged on a: rejected (bad_mac), not published; bad MAC on the stream: rejected on b; "
              f"republished id: dropped on b as duplicate ({before + 1} duplicate(s))")


hdtest.run(main)
