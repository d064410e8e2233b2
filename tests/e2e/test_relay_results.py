"""Results travel back across the relay (issue 46): an A2A message on host
a for carol, an agent of host b, ends on a with the result carol reported
on b, as if carol were local.  Two real handoffds, one real nats-server
(tests/py/relaykit.py), receipts on both hosts, the hub on a, the
official A2A JavaScript SDK as the client (tests/a2a/blocking.mjs).

- A blocking SendMessage (A2A 1.0 section 3.2.2: without
  returnImmediately the answer waits for the task's end) through a's hub
  for carol ([agent carol] completes = yes on b): relayed, delivered and
  consumed on b; b's consumed receipt says carol reports results, so the
  task stays WORKING on a; carol's `handoffctl complete --text` on b; the
  SDK's send returns TASK_STATE_COMPLETED with carol's text as its
  artifact.
- On a: `handoffctl wait --until completed`, started before the consume,
  exits 0 and prints "ID completed" (--json: carol's result, agent carol);
  `handoffctl show --json` and the hub's GET /api/v1/handoffs/ID carry
  the result; archive/NAME.result on a is the document b recorded.
- The receipt's format: tests/vectors/receipt/result.json, made by
  OpenSSL (tests/py/make_receipt_vector.py), comes again byte for byte and
  verifies with OpenSSL; b's own result receipt (its receipts/journal) has
  the vector's keys and verifies with OpenSSL against b's host key.
- A second handoff that carol reports failed: wait exits 6 with carol's
  reason, the hub's GET has it; GetTask of the first says COMPLETED with
  carol's artifact.
On the old code the send returns COMPLETED without an artifact at the
consume, and wait --until completed exits 5."""

import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import a2akit  # noqa: E402
import hded25519  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402


def result_file(env, hid):
    got = glob.glob(os.path.join(env.spool, "archive", f"*{hid}*.result"))
    return got[0] if got else None





def check_vector(h, hid, tap):
    """The documented vector, and b's real receipt beside it."""
    import make_receipt_vector
    vpub, vec = make_receipt_vector.checked("result.json", check)
    check(hded25519.doc_verifies(vpub, vec), "the vector verifies with OpenSSL")
    bad = dict(vec, outcome="failed")
    check(not hded25519.doc_verifies(vpub, bad), "a changed vector does not")
    # b's journal holds it unsigned: it is signed as it goes, alone or
    # in a batch (handoffd(8), RELAY, receipts)
    rec = [json.loads(f[3]) for k, f in relaykit.journal_records(h.b.spool)[0]
           if k == "out" and f[0] == hid and f[1] == "completed"]
    check(rec and "sig" not in rec[0], f"b's journal holds the result receipt of {hid}, unsigned")
    hdtest.wait_for(lambda: relaykit.receipt_messages(tap, {hid}, "completed"), 10,
                    "b's result receipt seen on handoff.a.receipt.b")
    msg, r = relaykit.receipt_messages(tap, {hid}, "completed")[0]
    with open(os.path.join(h.b.dir, "host-b.pub")) as f:
        bpub = f.read()
    check(hded25519.doc_verifies(bpub, msg), "b's message of the result receipt verifies with OpenSSL")
    real = [dict(r, kid=msg["kid"], sig=msg["sig"])]
    check(sorted(real[0]) == sorted(vec) and sorted(real[0]["result"]) == sorted(vec["result"]),
          f"b's receipt has the vector's keys: {sorted(real[0])} vs {sorted(vec)}")
    print(f"ok: the receipt vector regenerates and verifies with OpenSSL; b's result receipt "
          f"({len(json.dumps(real[0]))} bytes) has its keys and verifies too")


def rpc(hub, agent, method, params):
    st, ans = hub.request("POST", f"/a2a/{agent}", json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode(), {
            "Content-Type": "application/json", "A2A-Version": "1.0",
            "Authorization": f"Bearer {hub.tokens['bob']}"})
    check(st == 200 and "result" in ans, f"{method}: {st} {ans}")
    return ans["result"]


def main():
    relaykit.skip_without_nats()
    a2akit.need_sdk()
    with relaykit.Hosts(b_agents=["carol"]) as h:
        a, b, hub = h.start_with_hub(completes="carol")
        tap = natsrv.Tap(h.ns.urls[0], "handoff.a.receipt.>")

        args = {"base": f"http://127.0.0.1:{hub.port}", "agent": "carol",
                "token": hub.tokens["bob"], "text": "translate this, please"}
        send = subprocess.Popen(["node", os.path.join(a2akit.A2A_DIR, "blocking.mjs"),
                                 json.dumps(args)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=a2akit.A2A_DIR)
        hdtest.wait_for(lambda: h.b.bootstraps("carol"), 30 * hdtest.SLOW,
                        "the message delivered to carol on b")
        hid = h.b.bootstraps("carol")[0][:-5]
        w = subprocess.Popen([hdtest.HANDOFFCTL, "wait", "-c", a.conf, hid, "--until",
                              "completed", "--json", "--timeout", "120"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        hdtest.wait_watching(w, what="handoffctl wait on a")
        h.b.ctl("consume", "-c", b.conf, "--agent", "carol", hid, check_rc=0)
        hdtest.wait_for(lambda: h.relayed_on_a().get(hid, {}).get("remote_outcome") == "consumed",
                        30, "the receipt 'consumed' on a")
        o = h.relayed_on_a()[hid]
        check(o.get("completes") is True, f"a's record says carol reports results: {o}")
        t = rpc(hub, "carol", "GetTask", {"id": hid})
        check(t["status"]["state"] == "TASK_STATE_WORKING", f"after the consume on b: {t}")
        check(send.poll() is None, "the blocking send still waits after the consume")
        print(f"ok: {hid} consumed on b; on a WORKING, the blocking send waits")

        text = "la traduction est faite"
        h.b.ctl("complete", "-c", b.conf, "--agent", "carol", hid, "--text", text, check_rc=0)
        out, err = send.communicate(timeout=60 * hdtest.SLOW)
        check(send.returncode == 0, f"blocking.mjs: {send.returncode} {err}{out}")
        task = json.loads(out)["task"]
        parts = [p.get("text") or (p.get("content") or {}).get("value")
                 for a_ in task.get("artifacts", []) for p in a_.get("parts", [])]
        # 3: TASK_STATE_COMPLETED in the SDK's enum
        check(task["status"]["state"] in (3, "TASK_STATE_COMPLETED") and parts == [text],
              f"the blocking send's answer: {task}")
        print(f"ok: the SDK's blocking send: COMPLETED with carol's artifact {parts}")

        wout, werr = w.communicate(timeout=30)
        got = json.loads(wout)
        check(w.returncode == 0 and got.get("status") == "completed" and
              got.get("result", {}).get("text") == text and
              got["result"].get("agent") == "carol", f"wait on a: {w.returncode} {wout} {werr}")
        p = h.a.ctl("wait", "-c", a.conf, hid, "--until", "completed", "--timeout", "5")
        check(p.returncode == 0 and p.stdout.strip() == f"{hid} completed",
              f"wait again: {p.returncode} {p.stdout} {p.stderr}")
        print(f"ok: wait --until completed on a: exit 0, {p.stdout.strip()!r}, result {got['result']}")

        show = json.loads(h.a.ctl("show", "-c", a.conf, hid, "--json", check_rc=0).stdout)
        check(show.get("result", {}).get("text") == text, f"show on a: {show}")
        st, item = hub.get(f"/api/v1/handoffs/{hid}", "bob")
        check(st == 200 and item.get("result", {}).get("text") == text, f"GET on a: {st} {item}")
        with open(result_file(h.a, hid)) as fa, open(result_file(h.b, hid)) as fb:
            ra, rb = json.load(fa), json.load(fb)
        check(ra == rb, f"a's .result is b's: {ra} vs {rb}")
        print("ok: show and the hub's GET on a give carol's result; a's .result is b's document")
        check_vector(h, hid, tap)

        doc = hdproto.build("bob", "carol", h.a.key, ttl=600)
        fid = doc["handoff_id"]
        hdproto.drop(h.a.spool, doc)
        hdtest.wait_for(lambda: fid + ".json" in h.b.bootstraps("carol"), 30, "the second on b")
        h.b.ctl("consume", "-c", b.conf, "--agent", "carol", fid, check_rc=0)
        h.b.ctl("complete", "-c", b.conf, "--agent", "carol", fid, "--failed", "no dictionary",
                check_rc=0)
        p = h.a.ctl("wait", "-c", a.conf, fid, "--until", "completed", "--timeout", "60")
        check(p.returncode == 6 and p.stdout.strip() == f"{fid} failed: no dictionary",
              f"wait for the failed one: {p.returncode} {p.stdout} {p.stderr}")
        st, item = hub.get(f"/api/v1/handoffs/{fid}", "bob")
        check(st == 200 and item.get("result", {}).get("status") == "failed" and
              item["result"].get("reason") == "no dictionary", f"GET of the failed one: {item}")
        t = rpc(hub, "carol", "GetTask", {"id": hid})
        check(t["status"]["state"] == "TASK_STATE_COMPLETED" and
              t["artifacts"][0]["parts"] == [{"text": text}], f"GetTask of the first: {t}")
        rs = relaykit.receipt_status(a)
        check(rs.get("awaited") == 0 and rs.get("dropped") == 0, f"a's receipts: {rs}")
        print(f"ok: reported failed on b: wait on a exits 6 ({p.stdout.strip()!r}), "
              f"GET says failed; a awaits nothing ({rs})")
    hdtest.finish("test_relay_results")


if __name__ == "__main__":
    hdtest.run(main)
