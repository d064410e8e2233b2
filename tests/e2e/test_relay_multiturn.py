"""A multi-turn A2A task whose agent is on another host continues there
(issue 46).  Two real handoffds, one real nats-server (tests/py/relaykit.py),
receipts on both hosts, the hub on a, carol on b ([agent carol] completes
= yes), driven by the official A2A SDK with the very script of the
one-host test (tests/a2a/multiturn.mjs, A2A 1.0 sections 3.2.2, 3.2.4,
3.4.2, 3.4.3, 3.1.2; see test_a2a_multiturn.py), its agent's part played
on b:

- carol's `handoffctl complete --input-required` on b travels back as an
  input_required result receipt: the blocking send on a answers
  INPUT_REQUIRED with her question, as its status message;
- the answer sent on a with the taskId is relayed to b as the next
  handoff of the same task (its payload names the task, read in carol's
  bootstrap on b); her result there ends the task COMPLETED on a with her
  artifact and the whole history, both ways; the streams' generations go
  on through the turns (1 to 3, then 4 to 7); a message to a task at work
  on b, or to a COMPLETED one, is UnsupportedOperationError;
- b's input_required receipt has the keys of the documented vector
  (tests/vectors/receipt/input_required.json), which regenerates byte for
  byte and verifies with OpenSSL, as b's real one does with b's key;
- on a, `handoffctl wait --until completed` exits 7 (input_required) for
  a turn whose agent asked, 0 for one that completed (handoffctl(1));
- after a restart of the hub ListTasks lists 3 tasks, not their 5 turns;
  a awaits no receipt and dropped none.
On the old code the first blocking send stays WORKING (b sends no
receipt for a question) and a message with a taskId to carol is -32004."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import a2akit  # noqa: E402
import hded25519  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

MARKER = "**Continues task:** "


def take(h, conf, seen, text=None, ask=None):
    """carol, on b, consumes her next handoff and reports text, or asks."""
    def fresh():
        return [n for n in h.b.bootstraps("carol") if n not in seen]
    hdtest.wait_for(fresh, 30 * hdtest.SLOW, "a handoff relayed to carol on b")
    name = fresh()[0]
    seen.add(name)
    with open(os.path.join(h.b.state["carol"], "handoffs", name)) as f:
        boot = f.read()
    hid = name[:-len(".json")]
    h.b.ctl("consume", "-c", conf, "--agent", "carol", hid, check_rc=0)
    if ask:
        h.b.ctl("complete", "-c", conf, "--agent", "carol", hid, "--input-required", ask,
                check_rc=0)
    else:
        h.b.ctl("complete", "-c", conf, "--agent", "carol", hid, "--text", text, check_rc=0)
    cont = None
    if MARKER in boot:
        cont = json.loads('"' + boot.split(MARKER, 1)[1].split(" ", 1)[0] + '"')
    return {"id": hid, "taskId": cont}



def check_vector(h, asked, tap):
    """The documented input_required vector, and b's real receipt."""
    import make_receipt_vector
    vpub, vec = make_receipt_vector.checked("input_required.json", check)
    check(hded25519.doc_verifies(vpub, vec), "the input_required vector verifies with OpenSSL")
    check(not hded25519.doc_verifies(vpub, dict(vec, outcome="completed")), "a changed one does not")
    # b's journal holds them unsigned: signed as they go, alone or in a
    # batch (handoffd(8), RELAY, receipts)
    rec = [json.loads(f[3]) for k, f in relaykit.journal_records(h.b.spool)[0]
           if k == "out" and f[1] == "input_required" and f[0] in asked]
    check(len(rec) == len(asked) and all("sig" not in x for x in rec),
          f"b's journal holds {len(asked)} input_required receipts, unsigned: {len(rec)}")
    hdtest.wait_for(lambda: len(relaykit.receipt_messages(tap, set(asked), "input_required")) >=
                    len(asked), 10, "b's input_required receipts seen on handoff.a.receipt.b")
    seen = relaykit.receipt_messages(tap, set(asked), "input_required")
    with open(os.path.join(h.b.dir, "host-b.pub")) as f:
        bpub = f.read()
    check(all(hded25519.doc_verifies(bpub, m) for m, _ in seen),
          "b's messages of the input_required receipts verify with OpenSSL")
    real = [dict(x, kid=m["kid"], sig=m["sig"]) for m, x in seen]
    r = real[0]
    check(sorted(r) == sorted(vec) and sorted(r["result"]) == sorted(vec["result"]) and
          sorted(r["result"]["result"]) == sorted(vec["result"]["result"]) and
          r["result"]["status"] == "input_required",
          f"b's receipt has the vector's keys: {r} vs {vec}")
    print(f"ok: the input_required vector regenerates and verifies with OpenSSL; b's "
          f"{len(real)} input_required receipts have its keys and verify with b's key")


def main():
    relaykit.skip_without_nats()
    a2akit.need_sdk()
    with relaykit.Hosts(b_agents=["carol"]) as h:
        a, b, hub = h.start_with_hub(completes="carol", extra="a2a_block_max = 60\n")
        tap = natsrv.Tap(h.ns.urls[0], "handoff.a.receipt.>")

        args = {"base": f"http://127.0.0.1:{hub.port}", "worker": "carol",
                "token": hub.tokens["bob"]}
        p = subprocess.Popen(["node", os.path.join(a2akit.A2A_DIR, "multiturn.mjs"),
                              json.dumps(args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, cwd=a2akit.A2A_DIR)
        seen, asked, turns = set(), [], []
        try:
            while True:
                line = p.stdout.readline()
                check(line, f"multiturn.mjs ended early (exit {p.poll()})")
                ev = json.loads(line)
                print(f"sdk: {json.dumps(ev)[:400]}")
                check(ev.get("ok", True), f"sdk step failed: {ev}")
                if ev.get("take"):
                    got = take(h, b.conf, seen, ev.get("text"), ev.get("ask"))
                    (asked if ev.get("ask") else turns).append(got["id"])
                    p.stdin.write(json.dumps(got) + "\n")
                    p.stdin.flush()
                if ev.get("done"):
                    break
            check(p.wait(timeout=60 * hdtest.SLOW) == 0, f"multiturn.mjs exit {p.returncode}")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        print(f"ok: multiturn.mjs passed against carol on b: {len(asked)} questions, "
              f"{len(turns)} answers taken on b")
        check_vector(h, asked, tap)

        # every turn ended on b came back: its receipts on a, the awaited none
        rel = h.relayed_on_a()
        ends = {i: (rel.get(i, {}).get("remote_outcomes") or [None])[-1] for i in asked + turns}
        check(all(ends[i] == "input_required" for i in asked) and
              all(ends[i] == "completed" for i in turns), f"a's records of the turns: {ends}")
        # handoffctl(1): wait --until completed exits 7 for a question
        w = h.a.ctl("wait", "-c", a.conf, asked[0], "--until", "completed", "--timeout", "5")
        check(w.returncode == 7 and w.stdout.strip().startswith(f"{asked[0]} input_required: "),
              f"wait --until completed on a for a turn that asked: {w.returncode} {w.stdout} "
              f"{w.stderr}")
        w = h.a.ctl("wait", "-c", a.conf, turns[0], "--until", "completed", "--timeout", "5")
        check(w.returncode == 0, f"wait for a turn that completed: {w.returncode} {w.stdout}")
        print(f"ok: wait --until completed on a: exit 7 ({asked[0]} input_required) for a turn "
              f"whose agent asked on b, 0 for one that completed")
        hdtest.wait_for(lambda: relaykit.receipt_status(a).get("awaited") == 0, 30,
                        "a awaits no receipt")
        rs = relaykit.receipt_status(a)
        check(rs.get("dropped") == 0, f"a's receipts: {rs}")
        hub.proc.stop()
        hub.start()
        st, ans = hub.request("POST", "/a2a/carol", json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).encode(),
            {"Content-Type": "application/json", "A2A-Version": "1.0",
             "Authorization": f"Bearer {hub.tokens['bob']}"})
        states = sorted(t["status"]["state"] for t in ans.get("result", {}).get("tasks", []))
        check(st == 200 and states == ["TASK_STATE_COMPLETED", "TASK_STATE_COMPLETED",
                                       "TASK_STATE_INPUT_REQUIRED"],
              f"after a restart ListTasks lists the three tasks, not their turns: {states}")
        print(f"ok: on a, each turn's end is b's receipt ({len(asked)} input_required, "
              f"{len(turns)} completed), none awaited or dropped ({rs}); after a restart of the "
              f"hub ListTasks lists 3 tasks")
    hdtest.finish("test_relay_multiturn")


if __name__ == "__main__":
    hdtest.run(main)
