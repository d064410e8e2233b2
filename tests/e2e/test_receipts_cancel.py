"""A handoff relayed from host a to host b and canceled on b reaches a as
canceled (receipts, issue 27; cancel, issue 35): two real handoffds and a
real nats-server (tests/py/relaykit.py), receipts on.

- bob's handoff to alice goes from a through the relay to b, is delivered
  there; on b, `handoffctl cancel --from bob` (bob's key: the hosts share
  it) takes it back: b archives it canceled;
- b's signed receipt "canceled" reaches a: a's archived item stays
  "relayed" with remote_outcome canceled, host b; `handoffctl wait` on a
  exits 1 with "relayed to b: canceled", started before the cancel;
- on a a cancel of the relayed handoff is not cancelable (it left a):
  `handoffctl cancel` on a exits 1."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        h.enable_receipts()
        h.consumer.agents = []          # nobody takes it on b
        a, b = h.start_a(), h.start_b()
        relaykit.wait_ready(a, b)
        doc = hdproto.build("bob", "alice", h.a.key, ttl=600)
        hid = doc["handoff_id"]
        hdproto.drop(h.a.spool, doc)
        boot = os.path.join(h.b.state["alice"], "handoffs", hid + ".json")
        hdtest.wait_for(lambda: os.path.exists(boot), 30, f"{hid} delivered on b")
        hdtest.wait_for(lambda: h.relayed_on_a().get(hid, {}).get("remote_outcome") == "delivered",
                        30, "the receipt 'delivered' on a")
        w = subprocess.Popen([hdtest.HANDOFFCTL, "wait", "-c", a.conf, hid, "--timeout", "60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        hdtest.wait_watching(w, what="handoffctl wait on a")

        p = h.b.ctl("cancel", "-c", b.conf, "--from", "bob", hid)
        check(p.returncode == 0 and p.stdout.strip() == f"{hid} canceled",
              f"cancel on b: {p.returncode} {p.stdout} {p.stderr}")
        check(not os.path.exists(boot), "the bootstrap is gone on b")
        hdtest.wait_for(lambda: h.relayed_on_a().get(hid, {}).get("remote_outcome") == "canceled",
                        30, "the receipt 'canceled' on a")
        o = h.relayed_on_a()[hid]
        check(o["outcome"] == "relayed" and o.get("remote_host") == "b" and
              sorted(o.get("remote_outcomes", [])) == ["canceled", "delivered"], f"a's record: {o}")
        out, err = w.communicate(timeout=30)
        check(w.returncode == 1 and out.strip() == f"{hid} relayed to b: canceled",
              f"wait on a: {w.returncode} {out!r} {err!r}")
        print(f"ok: canceled on b; a's wait: exit 1, {out.strip()!r}; a's record {o['remote_outcomes']}")

        p = h.a.ctl("cancel", "-c", a.conf, "--from", "bob", hid)
        check(p.returncode == 1 and "not canceled" in p.stdout,
              f"cancel on a of a relayed one: {p.returncode} {p.stdout} {p.stderr}")
        print(f"ok: on a: {p.stdout.strip()}")
    hdtest.finish("test_receipts_cancel")


if __name__ == "__main__":
    hdtest.run(main)
