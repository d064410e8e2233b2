"""A cancel on host a of a handoff relayed to host b withdraws it on b when
b's agent has not taken it, and is answered on a (issue 46): two real
handoffds, one real nats-server (tests/py/relaykit.py), receipts on.

- bob's handoff to alice goes from a through the relay to b, delivered
  there, not taken; `handoffctl cancel --from bob` on a: a sends the
  signed request to b (handoff.b.cancel.a), b checks it with its own keys
  and withdraws the bootstrap, b's canceled receipt answers a's request:
  exit 0, "ID canceled"; on b the item is archived canceled, on a its
  record says remote_outcome canceled.
- The same through the hub on a: an A2A SendMessage for alice (on b),
  then CancelTask (A2A 1.0 section 3.1.5, "Cancel Task"): the answer is
  the task, TASK_STATE_CANCELED.
- One taken on b first: the cancel on a is answered not_cancelable
  (exit 1), and b's item stays consumed.
- Both daemons SIGKILLed mid-way: b down, the request dropped on a (no
  wait), a publishes it and is killed; b comes back and withdraws the
  handoff, then a, which reads its request again and answers it canceled
  when b's receipt comes: b archived it canceled once, a recorded each
  receipt once.
On the old code a answers every cancel of a relayed item not_cancelable
at once, and b's bootstrap stays."""

import json
import os
import signal
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402


def rpc(hub, agent, method, params):
    st, ans = hub.request("POST", f"/a2a/{agent}", json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode(), {
            "Content-Type": "application/json", "A2A-Version": "1.0",
            "Authorization": f"Bearer {hub.tokens['bob']}"})
    check(st == 200, f"{method}: {st} {ans}")
    return ans


def archived_on_b(h, hid):
    for n in h.b.names("archive"):
        if n.endswith(".outcome") and hid in n:
            with open(h.b.path("archive", n)) as f:
                return json.load(f).get("outcome")
    return None


def kill(d):
    d.send(signal.SIGKILL)
    d.proc.wait()


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        a, b, hub = h.start_with_hub()

        def delivered(hid):
            boot = os.path.join(h.b.state["alice"], "handoffs", hid + ".json")
            hdtest.wait_for(lambda: os.path.exists(boot), 30, f"{hid} delivered on b")
            hdtest.wait_for(lambda: h.relayed_on_a().get(hid, {}).get("remote_outcome") ==
                            "delivered", 30, "the receipt 'delivered' on a")
            return boot

        doc = hdproto.build("bob", "alice", h.a.key, ttl=600)
        hid = doc["handoff_id"]
        hdproto.drop(h.a.spool, doc)
        boot = delivered(hid)
        p = h.a.ctl("cancel", "-c", a.conf, "--from", "bob", hid, "--timeout", "60")
        check(p.returncode == 0 and p.stdout.strip() == f"{hid} canceled",
              f"cancel on a: {p.returncode} {p.stdout} {p.stderr}")
        check(not os.path.exists(boot), "the bootstrap is gone on b")
        check(archived_on_b(h, hid) == "canceled", f"b archived it: {archived_on_b(h, hid)}")
        o = h.relayed_on_a()[hid]
        check(o.get("remote_outcome") == "canceled", f"a's record: {o}")
        print(f"ok: canceled on a before b's consume: {p.stdout.strip()!r}; b archived it "
              f"canceled; a's record {o['remote_outcomes']}")

        ans = rpc(hub, "alice", "SendMessage", {
            "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                        "parts": [{"text": "cancel me"}]},
            "configuration": {"returnImmediately": True}})
        tid = ans["result"]["task"]["id"]
        tboot = delivered(tid)
        ans = rpc(hub, "alice", "CancelTask", {"id": tid})
        check(ans.get("result", {}).get("status", {}).get("state") == "TASK_STATE_CANCELED",
              f"CancelTask on a: {ans}")
        check(not os.path.exists(tboot) and archived_on_b(h, tid) == "canceled",
              "the A2A task's handoff withdrawn on b")
        print(f"ok: A2A CancelTask on a's hub for alice on b: TASK_STATE_CANCELED, withdrawn on b")

        doc = hdproto.build("bob", "alice", h.a.key, ttl=600)
        cid = doc["handoff_id"]
        hdproto.drop(h.a.spool, doc)
        delivered(cid)
        h.b.ctl("consume", "-c", b.conf, "--agent", "alice", cid, check_rc=0)
        p = h.a.ctl("cancel", "-c", a.conf, "--from", "bob", cid, "--timeout", "60")
        check(p.returncode == 1 and "not canceled" in p.stdout,
              f"cancel on a after b's consume: {p.returncode} {p.stdout} {p.stderr}")
        check(archived_on_b(h, cid) == "consumed", f"b's item: {archived_on_b(h, cid)}")
        print(f"ok: after b's consume the cancel on a: exit 1, {p.stdout.strip()!r}")

        doc = hdproto.build("bob", "alice", h.a.key, ttl=600)
        kid = doc["handoff_id"]
        hdproto.drop(h.a.spool, doc)
        kboot = delivered(kid)
        kill(b)
        # --timeout 0: the request dropped, its answer not waited for (3)
        h.a.ctl("cancel", "-c", a.conf, "--from", "bob", kid, "--timeout", "0", check_rc=3)
        hdtest.wait_for(lambda: f"Cancel request for {kid} relayed to host b" in a.logs(), 30,
                        "a published the request")
        kill(a)
        b = h.start_b(name="b2")
        hdtest.wait_for(lambda: archived_on_b(h, kid) == "canceled", 30, "b withdrew it")
        check(not os.path.exists(kboot), "the bootstrap is gone on b")
        a = h.start_a(name="a2")
        answered = lambda: [n for n in os.listdir(h.a.path("cancel")) if n.startswith(".")]
        hdtest.wait_for(lambda: answered(), 30, "a answered its request")
        check(all(n.startswith(".canceled.") for n in answered()),
              f"a's answer: {answered()} (and left {os.listdir(h.a.path('cancel'))})")
        o = h.relayed_on_a()[kid]
        check(o.get("remote_outcomes") == ["delivered", "canceled"], f"a's record: {o}")
        outs = [n for n in h.b.names("archive") if kid in n and n.endswith(".outcome")]
        check(len(outs) == 1, f"b archived it once: {outs}")
        print(f"ok: b and a SIGKILLed mid-way: withdrawn on b once, a answered {answered()}, "
              f"its record {o['remote_outcomes']}")
    hdtest.finish("test_relay_cancel")


if __name__ == "__main__":
    hdtest.run(main)
