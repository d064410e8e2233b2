"""Receipts survive the crashes and outages the handoffs survive (issue
27), two real handoffds with receipts on and a real nats-server:

1. a down (SIGKILL) while b's agent consumes and b publishes the receipts:
   they wait in the stream and reach a when it comes back;
2. a SIGKILLed in the middle of a stream of receipts, then restarted;
3. b SIGKILLed in the middle of its outcomes, then restarted;
4. b SIGKILLed between the outcome and the publish: the server is down,
   the receipts wait in b's receipts/journal (queued, unpublished); b is
   killed and comes back
   (status: N queued on b, N awaited on a), then the server, and they are
   published (status: 0 and 0).

Every phase: each handoff's receipts (delivered, consumed) recorded on a
exactly once (a's logs, over all its lives, name each at most once),
nothing left to publish on b.  HD_RECEIPT_CRASH_N per phase (default 60)."""

import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RECEIPT_CRASH_N", "60"))


wait = hdtest.wait_for


def kill(d):
    d.send(signal.SIGKILL)
    d.proc.wait()


def final(h, ids):
    rel = h.relayed_on_a()
    return sum(1 for i in ids if rel.get(i, {}).get("remote_outcome") == "consumed")


def both(h, ids):
    rel = h.relayed_on_a()
    return sum(1 for i in ids if len(rel.get(i, {}).get("remote_outcomes", [])) >= 2)


def queued(h):
    return list(relaykit.journal(h.b.spool)["queued"])


def check_once(h, ids, what):
    # A receipt fetched by a killed a comes again after the consumer's
    # AckWait (10 s).
    wait(lambda: final(h, ids) == len(ids) and both(h, ids) == len(ids), 90,
         lambda: f"{what}: both receipts of each on a (consumed {final(h, ids)}, both "
                 f"{both(h, ids)} of {len(ids)})")
    rel = h.relayed_on_a()
    for i in ids:
        seen = sorted(rel[i].get("remote_outcomes", []))
        check(seen == ["consumed", "delivered"], f"{what}: {i}: {seen}")
    # A status answered by the running a comes from a later loop turn than
    # the receipts waited for: their info lines (and any twice) are out.
    h.a.daemons[-1].status()
    logs = "".join(d.logs() for d in h.a.daemons)
    applied = re.findall(r"Receipt for (\S+) from b: (\w+)", logs)
    seen = {}
    for k in applied:
        seen[k] = seen.get(k, 0) + 1
    twice = {k: n for k, n in seen.items() if n > 1}
    check(not twice, f"{what}: applied more than once on a: {list(twice.items())[:3]}")
    wait(lambda: queued(h) == [], 30, lambda: f"{what}: b's journal: nothing queued: {queued(h)[:3]}")


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        h.enable_receipts()
        a, b = h.start_a(), h.start_b()
        relaykit.wait_ready(a, b)

        # 1. a down while b publishes.
        h.consumer.agents = []
        ids = h.drop(N)
        wait(lambda: len(h.b.names("claimed")) >= N and len(h.relayed_on_a()) >= N, 60,
             lambda: f"phase 1: {N} relayed and delivered (claimed on b {len(h.b.names('claimed'))})")
        kill(a)
        h.consumer.agents = relaykit.B_AGENTS
        wait(lambda: b.status()["relay"]["receipts"]["sent"] >= 2 * N, 60,
             lambda: f"phase 1: b published while a is down: {b.status()['relay']['receipts']}")
        # A sent record whose archived item is gone (pruned): dropped at
        # the start's rewrite of the journal.
        relaykit.journal_append(h.a.spool, "sent", "1-bob-alice-stale", "1-1-bob-alice-stale.json")
        check("1-bob-alice-stale" in relaykit.journal(h.a.spool)["sent"], "the stale record written")
        a = h.start_a(name="a2")
        check("1-bob-alice-stale" not in relaykit.journal(h.a.spool)["sent"],
              "a stale sent record is dropped at start")
        check_once(h, ids, "a down")
        print(f"1. a down while b published {2 * N} receipts: each applied once after its restart")

        # 2. a SIGKILLed mid-stream.
        h.consumer.agents = []
        ids2 = h.drop(N)
        wait(lambda: h.consumer.total() == 0 or len(h.relayed_on_a()) >= 2 * N, 60,
             lambda: "phase 2: relayed")
        wait(lambda: len(h.relayed_on_a()) >= 2 * N, 60, lambda: "phase 2: relayed")
        base = a.status()["relay"]["receipts"]["applied"]
        h.consumer.agents = relaykit.B_AGENTS
        wait(lambda: a.status()["relay"]["receipts"]["applied"] >= base + N // 2 + N // 4, 60,
             lambda: f"phase 2: receipts arriving: {a.status()['relay']['receipts']}")
        kill(a)
        at = final(h, ids2)
        a = h.start_a(name="a3")
        check_once(h, ids + ids2, "a killed")
        print(f"2. a SIGKILLed with {at} of {N} final receipts in: each applied once")

        # 3. b SIGKILLed mid-outcomes.
        h.consumer.agents = []
        ids3 = h.drop(N)
        wait(lambda: len(h.relayed_on_a()) >= 3 * N and len(h.b.names("claimed")) >= N, 60,
             lambda: "phase 3: relayed and delivered")
        sent = b.status()["relay"]["receipts"]["sent"]
        h.consumer.agents = relaykit.B_AGENTS
        wait(lambda: b.status()["relay"]["receipts"]["sent"] >= sent + 3, 60,
             lambda: f"phase 3: receipts of the outcomes being sent: {b.status()['relay']['receipts']}")
        kill(b)
        at = final(h, ids3)
        b = h.start_b(name="b2")
        check_once(h, ids + ids2 + ids3, "b killed")
        print(f"3. b SIGKILLed with {at} of {N} consumed receipts in: each applied once after its restart")

        # 4. b SIGKILLed between outcome and publish: the server is down.
        h.consumer.agents = []
        delivered0 = b.status()["counters"]["delivered"]
        ids4 = h.drop(N)
        # Published (the delivered receipt is owed at the publish, which
        # comes right after the record: count publishes, not records).
        wait(lambda: len(h.relayed_on_a()) >= 4 * N and
             b.status()["counters"]["delivered"] >= delivered0 + N, 60,
             lambda: "phase 4: relayed and delivered")
        wait(lambda: queued(h) == [], 30, lambda: "phase 4: delivered receipts out")
        h.ns.nodes[0].kill()
        before = h.consumer.total()
        h.consumer.agents = relaykit.B_AGENTS
        wait(lambda: len([n for n in queued(h) if n.endswith(":consumed")]) == N, 60,
             lambda: f"phase 4: {N} consumed receipts waiting in b's journal ({len(queued(h))})")
        kill(b)
        # b comes back first: status counts what the crash left (read at
        # its start), and a awaits the final receipts of phase 4
        b = h.start_b(name="b3")
        rb, ra = b.status()["relay"]["receipts"], a.status()["relay"]["receipts"]
        check(rb.get("queued") == N and rb.get("owed") == 0 and ra.get("awaited") == N,
              f"phase 4 status after b's restart, the server down: b {rb}, a {ra} (want queued "
              f"{N}, owed 0 on b, awaited {N} on a)")
        h.ns.nodes[0].start()
        check_once(h, ids + ids2 + ids3 + ids4, "b killed before publishing")
        wait(lambda: b.status()["relay"]["receipts"]["queued"] == 0 and
             a.status()["relay"]["receipts"]["awaited"] == 0, 30,
             lambda: f"phase 4: status queued 0 on b, awaited 0 on a: b {b.status()['relay']['receipts']}, "
                     f"a {a.status()['relay']['receipts']}")
        print(f"4. server down, b SIGKILLed with {N} receipts unpublished: published after the restart, "
              f"once each; status said queued {N} on b and awaited {N} on a meanwhile")
        sent = list(relaykit.journal(h.a.spool)["sent"])
        check(sent == [], f"a's journal awaits nothing once every final receipt is in: {sent[:3]}")
        check(a.stop() == 0 and b.stop() == 0, "both exit 0")


hdtest.run(main)
