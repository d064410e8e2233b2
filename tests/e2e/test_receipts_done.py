"""A crash on the origin between a final receipt's record (the archived
item's .outcome) and its done record in receipts/journal leaves the item
awaited, and the receipt, not acked then, comes again as a duplicate:
it must end the wait (status awaited 0, no sent record left in a's
journal), or the item is awaited until retention prunes it.

Made without aiming a kill, two real handoffds and a real nats-server,
receipts on: a handoff relayed from a to b and delivered (its delivered
receipt applied on a); a stopped; b's agent consumes it and b publishes
the consumed receipt, which waits in the stream; the .outcome on a is
given the consumed receipt as applying it writes it (what the crash
leaves); a started again: the receipt is counted a duplicate and the
item is no longer awaited."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        h.enable_receipts()
        h.consumer.agents = []          # nothing is consumed yet
        a, b = h.start_a(), h.start_b()
        relaykit.wait_ready(a, b)
        [hid] = h.drop(1, agents=["alice"])
        hdtest.wait_for(lambda: (h.relayed_on_a().get(hid) or {}).get("remote_outcome") == "delivered",
                        60, lambda: f"the delivered receipt on a: {h.relayed_on_a().get(hid)}")
        hdtest.wait_for(lambda: relaykit.receipt_status(a).get("awaited") == 1, 10,
                        lambda: f"a awaits the final receipt: {relaykit.receipt_status(a)}")
        check(a.stop() == 0, "a stops")

        h.consumer.agents = ["alice"]
        hdtest.wait_for(lambda: h.consumer.counts.get(hid) == 1, 30, "consumed on b")
        hdtest.wait_for(lambda: relaykit.receipt_status(b).get("sent") == 2, 60,
                        lambda: f"b published the consumed receipt: {relaykit.receipt_status(b)}")
        # What a crash after the .outcome's write and before the journal's
        # done record leaves: the .outcome as receipt_merge() makes it.
        [name] = [n for n in h.a.names("archive") if n.endswith(f"-{hid}.json.outcome")]
        path = h.a.path("archive", name)
        with open(path) as f:
            o = json.load(f)
        o["remote_outcomes"] = o.get("remote_outcomes", []) + ["consumed"]
        o["remote_outcome"] = "consumed"
        tmp = path + ".t"
        with open(tmp, "w") as f:
            json.dump(o, f)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
        check(hid in relaykit.journal(h.a.spool)["sent"], "a's journal awaits the item")

        a = h.start_a(name="a2")
        hdtest.wait_for(lambda: relaykit.receipt_status(a).get("duplicate", 0) >= 1, 60,
                        lambda: f"the consumed receipt again on a, a duplicate: "
                                f"{relaykit.receipt_status(a)}")
        st = relaykit.receipt_status(a)
        check(st.get("awaited") == 0 and st.get("applied") == 0 and st.get("dropped") == 0,
              f"the duplicate final receipt ends the wait: a's receipts {st}")
        hdtest.wait_for(lambda: hid not in relaykit.journal(h.a.spool)["sent"], 10,
                        lambda: f"a's journal still awaits {hid}")
        print(f"a final receipt recorded in the .outcome before a crash, its done record not: "
              f"the receipt came again as a duplicate and ended the wait ({st})")
        check(a.stop() == 0 and b.stop() == 0, "both stop")
    hdtest.finish("a duplicate final receipt ends the wait the crash left")


hdtest.run(main)
