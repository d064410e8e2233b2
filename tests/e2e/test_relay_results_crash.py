"""Results across the relay survive a SIGKILL of either daemon, each one
arriving once (issue 46): two real handoffds with receipts on, one real
nats-server (tests/py/relaykit.py), alice and gordon on b with
[agent] completes = yes.

1. N handoffs relayed from a, consumed on b; their agents report a result
   each (`handoffctl complete --no-wait`); a SIGKILLed while the result
   receipts come in, then restarted;
2. N more; b SIGKILLed while it records the results (some recorded, some
   still the agents' files in handoffs/), then restarted;
3. the state a SIGKILL of b between its archive/NAME.result and the
   receipt's record in its journal leaves, made without aiming a kill (b
   stopped, the agent's file and the daemon's .result written as b
   writes them): b's start finds the result recorded and sends its
   receipt, with the document as recorded.
After each: every id has its archive/NAME.result on a, the very document
b recorded (none lost, none recorded twice with another time), a's logs
over all its lives name each result receipt at most once, a dropped no
receipt and awaits none, b's journal owes no result and queues no
receipt, no agent's result was refused.  HD_RESULT_CRASH_N per phase
(default 40)."""

import glob
import json
import os
import re
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RESULT_CRASH_N", "40"))
wait = hdtest.wait_for


def kill(d):
    d.send(signal.SIGKILL)
    d.proc.wait()


def results(env):
    """id -> the .result document of each archived item of env."""
    out = {}
    for p in glob.glob(os.path.join(env.spool, "archive", "*.result")):
        with open(p) as f:
            doc = json.load(f)
        out[doc["handoff_id"]] = doc
    return out


def consumed_on_a(h, ids):
    rel = h.relayed_on_a()
    return sum(1 for i in ids if rel.get(i, {}).get("remote_outcome") == "consumed")


def complete_all(h, b, ids):
    """The agents' results, written by a thread (--no-wait: the agent's
    file alone, whether b runs or not) while the test kills a daemon."""
    def run():
        for k, hid in enumerate(ids):
            agent = relaykit.B_AGENTS[k % 2]
            h.b.ctl("complete", "-c", b.conf, "--agent", agent, hid, "--text", f"done: {hid}",
                    "--no-wait", check_rc=0)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def check_phase(h, a, b, ids, a_lives, what):
    wait(lambda: len(set(ids) & set(results(h.a))) == len(ids), 90,
         lambda: f"{what}: results on a: {len(set(ids) & set(results(h.a)))} of {len(ids)}")
    ra, rb = results(h.a), results(h.b)
    differ = [i for i in ids if ra.get(i) != rb.get(i)]
    check(not differ, f"{what}: a's .result is not b's for {differ[:3]}: "
          f"{[(ra.get(i), rb.get(i)) for i in differ[:1]]}")
    check(all(ra[i]["result"]["text"] == f"done: {i}" for i in ids), f"{what}: the texts")
    # a status from a later loop turn of a than the results waited for:
    # the receipts' info lines (and any twice) are out
    a.status()
    for i in ids:
        n = sum(len(re.findall(rf"Receipt for {re.escape(i)} from b: completed", d.logs()))
                for d in a_lives)
        check(n <= 1, f"{what}: a's logs name the result receipt of {i} {n} times")
    wait(lambda: relaykit.receipt_status(a).get("awaited") == 0, 30,
         lambda: f"{what}: a awaits nothing: {relaykit.receipt_status(a)}")
    wait(lambda: not relaykit.journal(h.b.spool)["queued"], 30,
         lambda: f"{what}: b's journal queues {list(relaykit.journal(h.b.spool)['queued'])[:3]}")
    jb = relaykit.journal(h.b.spool)
    left = [i for i in ids if i in jb["results"]]
    check(not left, f"{what}: b's journal still owes the results of {left[:3]}")
    check(relaykit.receipt_status(a).get("dropped") == 0, f"{what}: a dropped none")
    for agent in relaykit.B_AGENTS:
        d = os.path.join(h.b.state[agent], "handoffs")
        stray = [n for n in os.listdir(d) if n.startswith((".result.", ".refused."))]
        check(not stray, f"{what}: left in {agent}'s handoffs/: {stray[:3]}")


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        h.enable_receipts()
        h.b.extra += "".join(f"[agent {x}]\ncompletes = yes\n" for x in relaykit.B_AGENTS)
        a, b = h.start_a(), h.start_b()
        relaykit.wait_ready(a, b)
        a_lives = [a]

        # 1. a SIGKILLed while the result receipts come in.
        ids1 = h.drop(N)
        wait(lambda: consumed_on_a(h, ids1) == N, 90,
             lambda: f"phase 1: consumed receipts on a {consumed_on_a(h, ids1)} of {N}")
        t = complete_all(h, b, ids1)
        wait(lambda: len(set(ids1) & set(results(h.a))) >= N // 4, 60,
             lambda: f"phase 1: results arriving on a ({len(results(h.a))})")
        kill(a)
        at = len(set(ids1) & set(results(h.a)))
        t.join()
        a = h.start_a(name="a2")
        a_lives.append(a)
        check_phase(h, a, b, ids1, a_lives, "a killed")
        print(f"1. a SIGKILLed with {at} of {N} results in: all {N} on a once each, b's documents")

        # 2. b SIGKILLed while it records the results.
        ids2 = h.drop(N)
        wait(lambda: consumed_on_a(h, ids2) == N, 90,
             lambda: f"phase 2: consumed receipts on a {consumed_on_a(h, ids2)} of {N}")
        t = complete_all(h, b, ids2)
        wait(lambda: len(set(ids2) & set(results(h.b))) >= N // 4, 60,
             lambda: f"phase 2: results recorded on b ({len(results(h.b))})")
        kill(b)
        at = len(set(ids2) & set(results(h.b)))
        t.join()
        b = h.start_b(name="b2")
        check_phase(h, a, b, ids1 + ids2, a_lives, "b killed")
        print(f"2. b SIGKILLed with {at} of {N} results recorded: all {N} on a once each, "
              f"b's documents; nothing owed or queued on b")
        # 3. b killed between its .result and the receipt's record.
        ids3 = h.drop(4)
        wait(lambda: consumed_on_a(h, ids3) == 4, 90, lambda: "phase 3: consumed on a")
        wait(lambda: all(i in relaykit.journal(h.b.spool)["results"] for i in ids3), 30,
             lambda: "phase 3: b's journal owes their results")
        kill(b)
        t = complete_all(h, b, ids3)
        t.join()
        made = {}
        for k, hid in enumerate(ids3):
            agent = relaykit.B_AGENTS[k % 2]
            with open(os.path.join(h.b.state[agent], "handoffs", f".result.{hid}")) as f:
                doc = json.load(f)
            outcome, = glob.glob(os.path.join(h.b.spool, "archive", f"*{hid}*.outcome"))
            made[hid] = {"agent": agent, "handoff_id": hid, "recorded_at":
                         "2026-01-02T03:04:05.678901Z", "result": doc, "status": "completed"}
            path = outcome[:-len(".outcome")] + ".result"
            with open(path, "w") as f:
                json.dump(made[hid], f, sort_keys=True, separators=(",", ":"))
            os.chmod(path, 0o640)
        b = h.start_b(name="b3")
        check_phase(h, a, b, ids1 + ids2 + ids3, a_lives, "b killed after its .result")
        ra = results(h.a)
        check(all(ra[i] == made[i] for i in ids3), f"phase 3: a has b's recorded documents: "
              f"{[(ra[i], made[i]) for i in ids3 if ra[i] != made[i]][:1]}")
        print("3. b killed between its .result and the receipt's record: its start sends the "
              "receipts, the documents as recorded")
        check(a.stop() == 0 and b.stop() == 0, "both exit 0")
    hdtest.finish("test_relay_results_crash")


if __name__ == "__main__":
    hdtest.run(main)
