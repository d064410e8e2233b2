"""The receipts' files of the layout before receipts/journal (one file per
receipt: receipts/owed/ID, out/ID.OUTCOME, sent/ID) are read into the
journal at the start and their directories removed: a host upgraded with
receipts owed, unpublished or awaited keeps them.

b (receipts on, the server down so nothing is published) is given an
owed item, the unpublished receipt of another (its real signed bytes,
taken from b's own journal), and a file that is no receipt; a is given a
sent entry.  After the restart: b's journal owes the one, queues the
receipt, status says so; a's journal awaits the one; the old directories
are gone; then the server comes back and a records that receipt."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        h.enable_receipts()
        h.consumer.agents = []
        a, b = h.start_a(), h.start_b()
        relaykit.wait_ready(a, b)
        ids = h.drop(2, agents=["alice"])
        hdtest.wait_for(lambda: [o.get("remote_outcome") for o in h.relayed_on_a().values()] ==
                        ["delivered"] * 2 and not relaykit.journal(h.b.spool)["queued"], 60,
                        "2 relayed, delivered on b, their delivered receipts on a")
        h.ns.nodes[0].kill()
        h.consumer.agents = relaykit.B_AGENTS
        hdtest.wait_for(lambda: sorted(relaykit.journal(h.b.spool)["queued"]) ==
                        sorted(f"{i}:consumed" for i in ids), 60, "2 consumed receipts waiting on b")
        jb = relaykit.journal(h.b.spool)
        owed_id = ids[0]
        receipt = jb["queued"][f"{ids[1]}:consumed"]
        check(json.loads(receipt)["origin"] == "a", "a real receipt for a")
        check(a.stop() == 0 and b.stop() == 0, "both stop")
        # The old layout, the journal gone: as a host before it left them.
        archived = [n for n in h.a.names("archive") if n.endswith(f"-{ids[1]}.json")]
        check(len(archived) == 1, f"{ids[1]} archived on a: {archived}")
        for sp in (h.a.spool, h.b.spool):
            os.unlink(os.path.join(sp, "receipts", "journal"))
        rb = os.path.join(h.b.spool, "receipts")
        write(os.path.join(rb, "owed", owed_id), "a")
        write(os.path.join(rb, "out", f"{ids[1]}.consumed"), receipt)
        write(os.path.join(rb, "out", "junk.consumed"), "not a receipt")
        write(os.path.join(h.a.spool, "receipts", "sent", ids[1]), archived[0])
        b = h.start_b(name="b2")
        a = h.start_a(name="a2")
        jb, ja = relaykit.journal(h.b.spool), relaykit.journal(h.a.spool)
        check(jb["owed"] == {owed_id: "a"}, f"b owes {owed_id} to a: {jb['owed']}")
        check(list(jb["queued"]) == [f"{ids[1]}:consumed"] and
              jb["queued"][f"{ids[1]}:consumed"] == receipt, f"b queues the receipt: {list(jb['queued'])}")
        check(ja["sent"] == {ids[1]: archived[0]}, f"a awaits {ids[1]}: {ja['sent']}")
        for sp, sub in ((h.b.spool, "owed"), (h.b.spool, "out"), (h.a.spool, "sent")):
            check(not os.path.exists(os.path.join(sp, "receipts", sub)), f"receipts/{sub}/ removed")
        st = b.status()["relay"]["receipts"]
        check(st["owed"] == 1 and st["queued"] == 1, f"b's status: {st}")
        check(a.status()["relay"]["receipts"]["awaited"] == 1, f"a's status: {a.status()['relay']}")
        h.ns.nodes[0].start()
        hdtest.wait_for(lambda: h.relayed_on_a().get(ids[1], {}).get("remote_outcome") == "consumed",
                        60, "the imported receipt recorded on a")
        check(a.status()["relay"]["receipts"]["awaited"] == 0, "a awaits nothing more")
        print(f"old layout read into the journals: b owes {owed_id}, published {ids[1]}:consumed, "
              f"which a recorded; the directories removed")
        check(a.stop() == 0 and b.stop() == 0, "both exit 0")


hdtest.run(main)
