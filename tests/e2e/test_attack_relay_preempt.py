"""Attack (issue 24.2): a junk file reserves a relayed id.  The attacker has
no key and no say in NATS, but is in group handoff on both hosts: she sees
the names in host a's handoff/ and drops, into host b's handoff/, a file
under the same name with the same handoff_id (for an agent b does not
serve, an unknown kid, a bogus MAC).  b leaves it ("not served here"),
and the real message relayed from a must still win: an id counts as known
only when a document that verified holds it (or the bytes are the same).

- file variant: junk first in b's handoff/<id>.json, then the real handoff
  on a: delivered once to alice on b, the junk rejected with its own
  reason (unknown_key), not left, and not counted as the id's duplicate;
- publisher variant: junk published onto the stream first, under the same
  Nats-Msg-Id as the real one will use (its handoff_id) and under another
  one: the real handoff still reaches alice, once (a junk copy for an
  agent b does not serve is refused unwritten; one for gordon, whom b
  serves, is written and decided);
- local variant on b: a junk file for an id already claimed here is
  rejected at once (unknown_key), never left to sit; a junk file never
  keeps a verified local file of the same id from its claim;
- the same signed bytes again (a redelivery) are still dropped as a
  duplicate, never delivered twice."""

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


def junk_of(doc, to="zed"):
    """The attacker's copy: the same id, another agent, a kid nobody
    knows, a MAC made with no key anyone has."""
    j = dict(doc)
    j.pop("hmac", None)
    j["to_agent"] = to
    j["kid"] = "attacker-kid"
    j["reason"] = "junk"
    return hdproto.sign(j, b"no key anyone has" * 2)


def reasons(env):
    out = {}
    for n in env.items("rejected"):
        try:
            out[n] = env.reason_of(n)
        except OSError:
            pass
    return out


def logs_tail(d, n=30):
    return "\n".join(d.logs().splitlines()[-n:])


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        a, b = h.start_a(), h.start_b()
        relaykit.wait_ready(a, b)

        # ---- file variant: junk in b's handoff/ under the same name first.
        real = hdproto.build("bob", "alice", h.a.key, ttl=600)
        hid = real["handoff_id"]
        name = hid + ".json"
        hdproto.drop(h.b.spool, junk_of(real), name=name)
        hdtest.wait_for(lambda: "Left " in b.logs() and hid in b.logs(), 10, "b leaves the junk")
        hdproto.drop(h.a.spool, real)
        try:
            hdtest.wait_for(lambda: h.consumer.counts.get(hid, 0) >= 1, 20,
                            "the relayed handoff delivered to alice on b")
        except hdtest.Fail:
            print(f"b relay: {b.status().get('relay')}\nb handoff/: {h.b.names('handoff')}\n"
                  f"b log:\n{logs_tail(b)}")
            raise
        hdtest.wait_for(lambda: name in h.b.items("rejected"), 10, "the junk rejected on b")
        r = h.b.reason_of(name)
        check(r["reason"] == "unknown_key", f"junk rejected for what it is, not as a duplicate: {r}")
        check("handoff_id" not in r, f"the junk's id is not remembered as authenticated: {r}")
        print(f"file variant: relayed {hid[:24]}... delivered once on b; the junk "
              f"rejected as {r['reason']} ({r['detail'][:90]})")

        # ---- publisher variant: junk on the stream before a relays.
        cl = natsrv.Client(h.ns.urls[0])
        got = {}
        for how in ("same-msg-id", "other-msg-id"):
            real2 = hdproto.build("bob", "gordon", h.a.key, ttl=600)
            hid2 = real2["handoff_id"]
            mid = hid2 if how == "same-msg-id" else "x-" + hid2
            # for an agent b does not serve: refused unwritten (issue 34.4),
            # so it cannot hold the name; for gordon, whom b serves: written
            # and decided by the pipeline
            refused = (b.status()["counters"].get("rejected") or {}).get("not_served", 0)
            ack = cl.js_publish("handoff.b.gordon", hdproto.dumps(junk_of(real2)), msg_id="zed-" + mid)
            check(ack.get("stream") == "HANDOFF" and not ack.get("duplicate"), f"junk PubAck {ack}")
            hdtest.wait_for(lambda: (b.status()["counters"].get("rejected") or {}).get("not_served", 0)
                            > refused, 15, "the junk for zed refused on b")
            check(hid2 + ".json" not in h.b.names("handoff"), "the junk for zed not written")
            ack = cl.js_publish("handoff.b.gordon", hdproto.dumps(junk_of(real2, to="gordon")), msg_id=mid)
            check(ack.get("stream") == "HANDOFF" and not ack.get("duplicate"), f"junk PubAck {ack}")
            hdtest.wait_for(lambda: hid2 + ".json" in h.b.names("handoff") or
                            hid2 + ".json" in h.b.items("rejected"), 15, "the junk message on b")
            hdproto.drop(h.a.spool, real2)
            try:
                hdtest.wait_for(lambda: h.consumer.counts.get(hid2, 0) >= 1, 20,
                                f"{how}: the relayed handoff delivered to gordon on b")
            except hdtest.Fail:
                print(f"b relay: {b.status().get('relay')}\nb handoff/: {h.b.names('handoff')}\n"
                      f"a relayed: {hid2 in h.relayed_on_a()}\nb log:\n{logs_tail(b)}")
                raise
            got[how] = hid2
        cl.close()
        print("publisher variant: junk published first (same and other Nats-Msg-Id): "
              "the real handoff delivered once both times")

        # ---- redelivery of the same bytes: a duplicate, not a second delivery.
        before = b.status()["relay"]["duplicates"]
        cl = natsrv.Client(h.ns.urls[0])
        ack = cl.js_publish("handoff.b.alice", hdproto.dumps(real), msg_id="again-" + hid)
        cl.close()
        hdtest.wait_for(lambda: b.status()["relay"]["duplicates"] == before + 1, 15,
                        "b drops the same bytes again as a duplicate")

        # ---- local variant on b: junk for a claimed id is rejected at once.
        late = "late-" + name
        hdproto.drop(h.b.spool, junk_of(real), name=late)
        hdtest.wait_for(lambda: late in h.b.items("rejected") or
                        ("Left " in b.logs() and late in b.logs()), 10, "b decides the late junk")
        check(late in h.b.items("rejected"),
              f"a junk file for an id claimed here is rejected, not left:\n{logs_tail(b, 5)}")
        r = h.b.reason_of(late)
        check(r["reason"] == "unknown_key", f"late junk: {r}")
        # A junk file first, then a verified local file of the same id under
        # another name: the verified one is claimed.
        loc = hdproto.build("bob", "alice", h.b.key, ttl=600)
        hdproto.drop(h.b.spool, junk_of(loc), name="squat-" + loc["handoff_id"] + ".json")
        hdtest.wait_for(lambda: "squat-" + loc["handoff_id"] in b.logs(), 10, "b leaves the squatter")
        hdproto.drop(h.b.spool, loc, name="real-" + loc["handoff_id"] + ".json")
        hdtest.wait_for(lambda: h.consumer.counts.get(loc["handoff_id"], 0) >= 1, 10,
                        "the verified local file claimed despite the squatter")
        print(f"local variant: junk for a claimed id rejected at once ({r['reason']}); "
              "a verified local file claimed past a squatter")

        time.sleep(0.5)     # a second delivery would show up by now
        c = dict(h.consumer.counts)
        twice = {i: k for i, k in c.items() if k > 1}
        check(not twice, f"delivered more than once on b: {twice}")
        for i in (hid, *got.values()):
            check(c.get(i) == 1, f"{i}: delivered {c.get(i)} time(s)")
        hdtest.wait_for(lambda: h.a.count("outbox") == 0, 15, "a's outbox/ drained")
        rel = h.relayed_on_a()
        check(all(i in rel for i in (hid, *got.values())), f"archived as relayed on a: {sorted(rel)}")
        rej = reasons(h.b)
        check(all(v["reason"] != "duplicate_id" for v in rej.values()),
              f"nothing rejected on b as duplicate_id: {json.dumps(rej)[:600]}")
        check(a.stop() == 0, "a exits 0")
        check(b.stop() == 0, "b exits 0")


hdtest.run(main)
