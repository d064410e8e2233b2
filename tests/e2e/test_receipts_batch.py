"""Batched receipts (issue 48; handoffd(8), RELAY, "Receipts", batches),
two real handoffds and a real nats-server, receipts on both hosts:

- a burst relayed from a to b and consumed there: the 2N receipts
  (delivered, consumed) reach a in far fewer NATS messages on
  handoff.a.receipt.b (counted by a core subscription of the test's own,
  not by handoffd; b is stopped while the burst reaches the stream and
  while its bootstraps are taken, so that it has them at once whatever
  the machine's load), most of them batches (type handoff-receipts, one
  signature over them all); b's status counts the messages, batches and
  signatures (fewer than the receipts), a's the batches it verified; on
  a each item's .outcome holds each outcome once;
- an origin that does not say it takes batches (a handoff published by
  hand under Handoff-Origin a without the Handoff-Receipts header, as an
  older handoffd publishes) gets single receipts, each its own message
  under its Nats-Msg-Id ID:OUTCOME;
- an old-format single receipt (signed here with b's host key by a second
  implementation, tests/py/hded25519.py, as an older b sends it) is still
  applied on a;
- the format: tests/vectors/receipt/batch.json, made by OpenSSL
  (tests/py/make_receipt_vector.py), comes again byte for byte and
  verifies with OpenSSL (a changed receipt inside does not); b's real
  batches verify with OpenSSL against b's host key and have its keys.
"""

import base64
import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hded25519  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
import natsrv  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RECEIPT_N", "60"))
wait = hdtest.wait_for


def bodies(tap):
    return [(h, json.loads(d)) for _, h, d in tap.taken()]


def carried(body):
    """The receipts one message carries."""
    return body["receipts"] if body.get("type") == "handoff-receipts" else [body]





def check_vector(bpub, real):
    """The documented batch vector, and b's real batches beside it."""
    import make_receipt_vector
    vpub, vec = make_receipt_vector.checked("batch.json", check)
    check(hded25519.doc_verifies(vpub, vec), "the batch vector verifies with OpenSSL")
    bad = json.loads(json.dumps(vec))
    bad["receipts"][2]["outcome"] = "consumed"
    check(not hded25519.doc_verifies(vpub, bad), "one receipt changed in it: it does not")
    check(all(hded25519.doc_verifies(bpub, m) for m in real), "b's batches verify with OpenSSL")
    keys = {k for r in vec["receipts"] for k in r}
    check(all(sorted(m) == sorted(vec) and all(set(r) <= keys for r in m["receipts"])
              for m in real), f"b's batches have the vector's keys: {sorted(real[0])}")
    print(f"the batch vector regenerates and verifies with OpenSSL; b's {len(real)} batches "
          "verify with b's key and have its keys")


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts(fsync=False, b_agents=["alice"]) as h:
        keys = h.enable_receipts()
        a, b = h.start_a(), h.start_b()
        relaykit.wait_ready(a, b)
        tap = natsrv.Tap(h.ns.urls[0], "handoff.a.receipt.>")

        # How many outcomes share one message depends on how many b has
        # at once, so the test gives it them at once, whatever the load:
        # b stopped (SIGSTOP) while a relays the burst to the stream, and
        # again while the bootstraps are taken.  b's consumer (the test)
        # takes them only then.
        boots = os.path.join(h.b.state["alice"], "handoffs")
        h.consumer.agents = []
        b.proc.send_signal(signal.SIGSTOP)
        ids = h.drop(N, agents=["alice"])
        wait(lambda: set(ids) <= set(h.relayed_on_a()), 60, "the burst relayed from a")
        b.proc.send_signal(signal.SIGCONT)
        wait(lambda: len(invariant.published(boots)) == N, 60,
             lambda: f"{N} delivered on b: {len(invariant.published(boots))}")
        b.proc.send_signal(signal.SIGSTOP)
        for n in invariant.published(boots):
            priv = os.path.join(boots, f".consume.{os.getpid()}.t.{n}")
            os.rename(os.path.join(boots, n), priv)
            os.unlink(priv)
        b.proc.send_signal(signal.SIGCONT)
        h.consumer.agents = ["alice"]
        wait(lambda: all((h.relayed_on_a().get(i) or {}).get("remote_outcome") == "consumed"
                         for i in ids), 60, "every item's consumed receipt applied on a")
        wait(lambda: relaykit.receipt_status(b)["queued"] == 0, 20, "b's receipts all PubAck'ed")
        msgs = bodies(tap)
        got = [(r["handoff_id"], r["outcome"]) for _, m in msgs for r in carried(m)]
        want = {(i, o) for i in ids for o in ("delivered", "consumed")}
        check(want <= set(got), f"every receipt went: missing {sorted(want - set(got))[:3]}")
        batches = [m for _, m in msgs if m.get("type") == "handoff-receipts"]
        check(batches and all(len(m["receipts"]) >= 2 and m.get("sig") and m.get("kid")
                              and all("sig" not in r for r in m["receipts"]) for m in batches),
              "batches carry 2 or more receipts under one signature, none of their own")
        check(len(msgs) <= len(want) // 2,
              f"{len(want)} receipts in {len(msgs)} NATS messages ({len(batches)} batches)")
        sb, sa = relaykit.receipt_status(b), relaykit.receipt_status(a)
        check(sb["sent"] == len(want) and sb["messages_sent"] == len(msgs) and
              sb["batches_sent"] == len(batches) and sb["signed"] <= len(msgs),
              f"b's counters: {len(want)} receipts, {len(msgs)} messages, "
              f"{len(batches)} batches: {sb}")
        check(sa["applied"] == len(want) and sa["batches_in"] == len(batches) and
              sa["verified"] == len(msgs) and sa["dropped"] == 0,
              f"a's counters: verified once per message: {sa}")
        rel = h.relayed_on_a()
        twice = [i for i in ids if sorted(rel[i].get("remote_outcomes") or []) !=
                 ["consumed", "delivered"]]
        check(not twice, f"each outcome once in a's .outcome: {[rel[i] for i in twice[:2]]}")
        with open(os.path.join(h.b.dir, "host-b.pub")) as f:
            check_vector(f.read(), batches)
        per = {o: sum(1 for _, m in msgs if any(r["outcome"] == o for r in carried(m)))
               for o in ("delivered", "consumed")}
        print(f"{len(want)} receipts of {N} items in {len(msgs)} NATS messages "
              f"({per['delivered']} with delivered ones, {per['consumed']} with consumed ones), "
              f"{len(batches)} of them batches; b signed {sb['signed']}, a verified {sa['verified']}")

        # An origin that does not say it takes batches: singles.
        cl = natsrv.Client(h.ns.urls[0])
        old = [hdproto.build("bob", "alice", h.a.key, ttl=600) for _ in range(4)]
        for d in old:
            _, ack = cl.request("handoff.b.alice", json.dumps(d).encode(),
                                {"Nats-Msg-Id": d["handoff_id"], "Handoff-Origin": "a"})
            check(json.loads(ack).get("stream") == "HANDOFF", f"published: {ack!r}")
        oids = {d["handoff_id"] for d in old}
        seen = len(msgs)

        def old_receipts():
            return [(hd, m) for hd, m in bodies(tap)[seen:]
                    if any(r["handoff_id"] in oids for r in carried(m))]
        wait(lambda: len(old_receipts()) >= 8, 30,
             lambda: f"b's delivered and consumed receipts of the 4: {len(old_receipts())}")
        singles = old_receipts()
        check(all(m.get("type") == "handoff-receipt" and
                  f"Nats-Msg-Id: {m['handoff_id']}:{m['outcome']}".encode() in hd
                  for hd, m in singles),
              f"each a single receipt under its own Nats-Msg-Id: {[m.get('type') for _, m in singles]}")
        print("an origin that does not say Handoff-Receipts: batch: single receipts")

        # An old b's single receipt, applied on a.
        check(b.stop() == 0, "b exits 0")
        one = h.drop(1, agents=["alice"])[0]
        wait(lambda: one in h.relayed_on_a(), 30, "relayed from a")
        before = relaykit.receipt_status(a)
        line = open(keys["b"]).read().split()
        real_b = hded25519.Key(base64.b64decode(line[1]), kid=line[2])
        doc = real_b.sign({"type": "handoff-receipt", "version": 1, "handoff_id": one,
                           "outcome": "consumed", "reason": "", "detail": "", "host": "b",
                           "origin": "a", "at": hdproto.iso(hdproto.now())})
        real_b.close()
        ack = cl.js_publish("handoff.a.receipt.b", json.dumps(doc).encode(),
                            msg_id=f"{one}:consumed")
        check(ack.get("stream") == "HANDOFF", f"PubAck {ack}")
        cl.close()
        wait(lambda: (h.relayed_on_a().get(one) or {}).get("remote_outcome") == "consumed", 20,
             "the single receipt applied on a")
        after = relaykit.receipt_status(a)
        check(after["applied"] == before["applied"] + 1 and
              after["batches_in"] == before["batches_in"],
              f"applied as a single one: {before} -> {after}")
        p = h.a.ctl("wait", "-c", a.conf, one, "--timeout", "5")
        check(p.returncode == 0 and "consumed" in p.stdout, f"wait on a: {p.stdout}")
        print("an old-format single receipt: applied")
        tap.close()
        check(a.stop() == 0, "a exits 0")


hdtest.run(main)
