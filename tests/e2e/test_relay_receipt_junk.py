"""Junk on the stream makes no host sign receipts for invented origins
(issue 43.12): a NATS publisher without any key publishes onto
handoff.b.alice, straight to the stream, 50 handoffs that do not verify
(signed with a key nobody holds), each naming another invented origin
host in Handoff-Origin, then 130 naming host a (whose key b has).  b
rejects all 180 (bad_mac); it owes no receipt to an origin without a key
in host_pubkey_dir (0 receipts for the 50), and receipts for unverified
messages to a 100 at once, then 1 a second; a handoff a really relayed
still gets its receipts.  Before, b signed and published a "rejected"
receipt for each of the 180.

Receipts counted from b's journal (SPOOL/receipts/journal, each receipt
written is one "out" record, signed) and b's status."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

GHOSTS = 50
FROM_A = 130
BURST = 100     # then 1 a second


def publish(cl, doc, origin):
    h, body = cl.request("handoff.b.alice", hdproto.dumps(doc),
                         {"Nats-Msg-Id": doc["handoff_id"], "Handoff-Origin": origin})
    check(body and b'"seq"' in body, f"no PubAck: {h!r} {body!r}")


def receipts_out(spool):
    """origin -> the receipts b wrote (signed) for it, from its journal."""
    out = {}
    for kind, f in relaykit.journal_records(spool)[0]:
        if kind == "out":
            out.setdefault(f[2], []).append((f[0], f[1]))
    return out


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        h.enable_receipts()
        a, b = h.start_a(), h.start_b()
        relaykit.wait_ready(a, b)
        nobody = os.urandom(32)
        cl = natsrv.Client(h.ns.urls[0])
        t0 = time.monotonic()
        junk = []
        for i in range(GHOSTS):
            doc = hdproto.build("bob", "alice", nobody, ttl=600, reason=f"junk {i}")
            publish(cl, doc, f"ghost{i}")
            junk.append(doc["handoff_id"])
        for i in range(FROM_A):
            doc = hdproto.build("bob", "alice", nobody, ttl=600, reason=f"junk from a {i}")
            publish(cl, doc, "a")
            junk.append(doc["handoff_id"])
        cl.close()
        hdtest.wait_for(lambda: len(h.b.items("rejected")) >= len(junk), 60 * hdtest.SLOW,
                        lambda: f"b rejects the {len(junk)} junk messages "
                                f"({len(h.b.items('rejected'))}); b's relay status: "
                                f"{b.status().get('relay')}; in b's handoff/: "
                                f"{len(h.b.names('handoff'))}\n{b.logs()[-2000:]}")
        took = time.monotonic() - t0
        reasons = {h.b.reason_of(n)["reason"] for n in h.b.items("rejected")}
        check(reasons == {"bad_mac"}, f"b's reasons: {reasons}")

        # a real handoff from a: its receipts as before
        ids = h.drop(1)
        h.wait_delivered(ids)
        hdtest.wait_for(lambda: any(i == ids[0] for i, _ in receipts_out(h.b.spool).get("a", [])),
                        30 * hdtest.SLOW, "b's receipt for a's real handoff")

        out = receipts_out(h.b.spool)
        ghosts = sum(len(v) for k, v in out.items() if k.startswith("ghost"))
        to_a_junk = [i for i, _ in out.get("a", []) if i in junk]
        st = b.status()["relay"]
        print(f"{GHOSTS} junk messages from invented origins: {ghosts} receipts signed; "
              f"{FROM_A} from a: {len(to_a_junk)} receipts; withheld {st.get('receipts_withheld')}; "
              f"a's real handoff: receipts {[o for i, o in out.get('a', []) if i == ids[0]]}")
        check(ghosts == 0, f"b signed {ghosts} receipts for invented origins")
        check(BURST <= len(to_a_junk) <= BURST + int(took) + 1,
              f"b signed {len(to_a_junk)} receipts for a's junk in {took:.1f} s")
        check(st.get("receipts_withheld") == GHOSTS + FROM_A - len(to_a_junk),
              f"receipts_withheld {st.get('receipts_withheld')}")
        said = [ln for ln in b.logs().splitlines() if "rejected without a receipt until" in ln]
        check(len(said) >= 1, "the withholding is said")
        check(a.stop() == 0 and b.stop() == 0, "both exit 0")
    hdtest.finish("test_relay_receipt_junk")


if __name__ == "__main__":
    hdtest.run(main)
