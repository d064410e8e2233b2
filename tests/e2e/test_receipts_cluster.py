"""Receipts through a 3-node JetStream cluster (issue 27): hosts a and b,
real handoffds with receipts on (each its own Ed25519 host key made by
`handoffctl keygen --ed25519`, [relay] host_key and host_pubkey_dir), three
real nats-servers on loopback with the stream at R3.

1. A burst of N relayed handoffs a -> b of four kinds, each ending
   differently on b: consumed (alice's, taken by the consumer), delivered
   and left waiting (gordon's, never taken), rejected bad_mac (from carl,
   whose key only a holds), and for carol, whom b does not serve, rejected
   not_served (refused unwritten as they come).  In the middle of the
   burst, with handoffs and receipts both under way, the stream's leader is
   killed with SIGKILL.  Once every receipt of the burst is in, the killed
   node is started again.
2. Once the restarted node has caught up, b is reloaded with a
   resume_window of 2 s: gordon's waiting bootstraps expire; a third of the
   way into their receipts, the leader of a's consumer (where the acks of
   the receipts a applied go) is killed with SIGKILL in turn.

Each phase on a: every handoff archived as relayed once, its receipts
(remote_outcomes) exactly those of its kind, each once, the remote outcome,
host and reason right; a's counters: receipts applied = the receipts
expected, dropped 0 (a duplicate, a receipt redelivered after the kill and
known already, is counted and printed, never applied); a's log names each
receipt at most once; nothing rejected on a, nothing left in a's outbox/ or
the sent records of a's receipts/journal, nor in b's queued or owed; alice's each delivered
to the consumer once.  `handoffctl wait ID` on a for a sample of each
kind: 0 consumed; 1 rejected with b's reason (bad_mac, not_served);
3 (timeout) while gordon's wait on b and 0 with --until claimed; 1 expired
once they expired.  Prints N, the receipts applied, and the longest stall
after each kill (no handoff relayed and no receipt applied on a, up to the
end of the phase).

HD_RECEIPT_CLUSTER_N sets N (default 200; `make stress` runs 1,000)."""

import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RECEIPT_CLUSTER_N", "200"))
# carol's handoffs must be relayed before their ttl (a rejects them as
# expired_unrelayed after it), through a stall of several seconds (5-9 s
# here, sanitized or not)
CAROL_TTL = 30 + 10 * (hdtest.SLOW - 1)
RATE = min(max(N / 4.0, 20.0), 100.0)     # handoffs dropped per second

# (name, from, to, receipts after phase 1, after phase 2, outcome, reason,
# wait's exit code at the end)
KINDS = [
    ("consumed", "bob", "alice", ["consumed", "delivered"], ["consumed", "delivered"],
     "consumed", "", 0),
    ("waiting", "bob", "gordon", ["delivered"], ["delivered", "expired"], "expired", "", 1),
    ("bad_mac", "carl", "alice", ["rejected"], ["rejected"], "rejected", "bad_mac", 1),
    ("unserved", "bob", "carol", ["rejected"], ["rejected"], "rejected", "not_served", 1),
]


def kind(i):
    """carl's (bad_mac) no more than relaykit.UNVERIFIED_MAX, consumed ones
    after."""
    if KINDS[i % len(KINDS)][0] == "bad_mac" and i // len(KINDS) >= relaykit.UNVERIFIED_MAX:
        return KINDS[0]
    return KINDS[i % len(KINDS)]


wait = hdtest.wait_for


def stall_in(samples, t0, t1):
    """Longest span in [t0, t1] in which neither a's relayed count nor
    its receipts applied moved (samples: relaykit.Sampler's, of both)."""
    worst, last_t, last = 0.0, t0, None
    for t, rel, app in samples:
        if t < t0:
            last = (rel, app)
            continue
        if t > t1:
            break
        if (rel, app) != last:
            last_t, last = t, (rel, app)
        worst = max(worst, t - last_t)
    return worst


def phase_done(h, ids, phase):
    """How many ids have every receipt of their kind for this phase."""
    rel = h.relayed_on_a()
    n = 0
    for i, hid in enumerate(ids):
        want = kind(i)[3 if phase == 1 else 4]
        o = rel.get(hid)
        if want is None:
            n += o is not None
        elif o is not None and sorted(o.get("remote_outcomes", [])) == want:
            n += 1
    return n


def check_receipts(h, ids, phase):
    """Each id archived relayed on a with exactly its kind's receipts, each
    once; returns how many receipts that is."""
    rel = h.relayed_on_a()
    total = 0
    for i, hid in enumerate(ids):
        name, _, _, want1, want2, final, reason, _ = kind(i)
        o = rel.get(hid)
        check(o is not None, f"phase {phase}: {hid} ({name}) not archived as relayed on a")
        seen = o.get("remote_outcomes", [])
        want = want1 if phase == 1 else want2
        if want is None:            # carol's: rejected when its ttl passes
            want = sorted(seen) if seen in ([], ["rejected"]) else ["?"]
        check(sorted(seen) == want, f"phase {phase}: {hid} ({name}): receipts {seen}, want {want}")
        check(o["outcome"] == "relayed" and o.get("relayed_to") == "b", f"{hid}: {o}")
        if seen:
            check(o.get("remote_host") == "b" and o.get("remote_at"), f"{hid}: {o}")
        if phase == 2 or (seen and seen != ["delivered"]):
            check(o.get("remote_outcome") == final and o.get("remote_reason", "") == reason,
                  f"phase {phase}: {hid} ({name}): remote {o.get('remote_outcome')} "
                  f"{o.get('remote_reason')!r}, want {final} {reason!r}")
        elif seen:
            check(o.get("remote_outcome") == "delivered", f"{hid} ({name}): {o}")
        total += len(seen)
    return total


def logged_receipts(h):
    """(id, outcome) -> how many times a's log, over all its lives, names
    the receipt applied (whole lines: a full buffer is written out in the
    middle of one)."""
    logs = "".join(t[:t.rfind("\n") + 1] for t in (d.logs() for d in h.a.daemons))
    seen = {}
    for k in re.findall(r"Receipt for (\S+) from b: (\w+)", logs):
        seen[k] = seen.get(k, 0) + 1
    return seen


def check_logged_once(h):
    """a's log, over all its lives, names each receipt at most once."""
    seen = logged_receipts(h)
    twice = {k: n for k, n in seen.items() if n > 1}
    check(not twice, f"receipts applied more than once on a (its log): {list(twice.items())[:3]}")
    return len(seen)


def ctl_wait(h, a, hid, *args):
    p = h.a.ctl("wait", "-c", a.conf, hid, *args)
    return p.returncode, p.stdout.strip() + p.stderr.strip()


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts(nodes=3) as h:
        h.enable_receipts()
        carl_key_path = os.path.join(h.a.dir, "carl.key")
        carl_key = hdproto.make_key(carl_key_path)
        h.a.extra = (f"[agent carl]\nstate_dir = {os.path.join(h.a.dir, 'agents', 'carl')}\n"
                     f"key = {carl_key_path}\n\n[remote carol]\nhost = b\n")
        h.b.extra = "[spool]\nresume_window = 600\n"
        h.consumer.agents = ["alice"]   # gordon's wait
        a, b = h.start_a(), h.start_b()
        wait(lambda: (a.status().get("relay") or {}).get("ready") and
             (b.status().get("relay") or {}).get("ready"), 60,
             lambda: f"both relays set up on the cluster: a {a.status().get('relay')}, "
                     f"b {b.status().get('relay')}")
        hdtest.wait_for(h.ns.stream_leader, 30, "a stream leader")

        docs = []
        for i in range(N):
            _, frm, to, _, _, _, _, _ = kind(i)
            docs.append(hdproto.build(frm, to, carl_key if frm == "carl" else h.a.key,
                                      ttl=CAROL_TTL if to == "carol" else 600))
        ids = [d["handoff_id"] for d in docs]
        expected = sum(len(kind(i)[4]) for i in range(N))
        by_kind = {k[0]: [hid for i, hid in enumerate(ids) if kind(i)[0] == k[0]] for k in KINDS}

        # 1. The burst, the stream leader killed in the middle of it.
        s = relaykit.Sampler(a, lambda r: (r["relayed"], r["receipts"]["applied"]))
        s.start()
        t0 = time.monotonic()
        dropped = [0]

        def drop_all():
            # over about 4 s, so that the kill falls in the middle
            for k, d in enumerate(docs):
                hdproto.drop(h.a.spool, d)
                dropped[0] += 1
                delay = t0 + (k + 1) / RATE - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        dropper = threading.Thread(target=drop_all, daemon=True)
        dropper.start()
        wait(lambda: dropped[0] >= N // 2 and a.status()["relay"]["relayed"] > 0 and
             a.status()["relay"]["receipts"]["applied"] > 0, 120,
             lambda: f"{N // 2} dropped, relayed and receipts coming back: {a.status()['relay']}")
        leader = h.ns.stream_leader()
        check(leader is not None, "stream leader known")
        st = a.status()["relay"]
        at_relayed, at_applied = st["relayed"], st["receipts"]["applied"]
        at_dropped = dropped[0]
        t_kill = time.monotonic()
        h.ns.node(leader).kill()
        dropper.join()
        wait(lambda: phase_done(h, ids, 1) == N, 240,
             lambda: f"phase 1: every receipt of the burst on a ({phase_done(h, ids, 1)} of {N}; "
                     f"a {a.status()['relay']}, b {b.status()['relay']})")
        t_p1 = time.monotonic()
        stall = stall_in(s.samples, t_kill, t_p1)
        new_leader = h.ns.stream_leader()
        check(new_leader and new_leader != leader, f"a new leader ({new_leader}, was {leader})")
        got1 = check_receipts(h, ids, 1)
        check(h.a.names("rejected") == [], f"rejected on a: {h.a.names('rejected')[:4]}")
        check(h.a.count("outbox") == 0, "a's outbox/ is empty")
        c = dict(h.consumer.counts)
        bad = {hid: c.get(hid, 0) for hid in by_kind["consumed"] if c.get(hid, 0) != 1}
        check(not bad and set(c) == set(by_kind["consumed"]),
              f"alice's each taken once by the consumer, nothing else: {list(bad.items())[:3]}, "
              f"others {list(set(c) - set(by_kind['consumed']))[:3]}")
        sa = a.status()["relay"]["receipts"]
        check(sa["applied"] == got1 and sa["dropped"] == 0,
              f"phase 1: a applied {got1} receipts, once each: {sa}")
        print(f"1. {N} relayed a -> b ({RATE:.0f}/s); stream leader {leader} SIGKILLed after "
              f"{at_dropped} dropped, {at_relayed} relayed "
              f"and {at_applied} receipts applied; new leader {new_leader}; longest stall after "
              f"the kill {stall:.1f}s; {got1} receipts applied on a once each "
              f"(duplicates {sa['duplicate']}, dropped 0) {t_p1 - t0:.1f}s after the first drop")

        # wait on a: one of each kind decided so far.
        hid = by_kind["consumed"][0]
        rc, out = ctl_wait(h, a, hid, "--timeout", "10")
        check(rc == 0 and "relayed to b: consumed" in out, f"wait {hid} (consumed): rc {rc}: {out}")
        hid = by_kind["bad_mac"][0]
        rc, out = ctl_wait(h, a, hid, "--timeout", "10")
        check(rc == 1 and "relayed to b: rejected: bad_mac" in out, f"wait {hid} (bad_mac): rc {rc}: {out}")
        hid = by_kind["waiting"][0]
        rc, out = ctl_wait(h, a, hid, "--timeout", "0")
        check(rc == 3, f"wait {hid} (delivered, waiting on b): rc {rc} (want 3, timeout): {out}")
        rc, out = ctl_wait(h, a, hid, "--until", "claimed", "--timeout", "10")
        check(rc == 0 and "relayed to b: delivered" in out,
              f"wait --until claimed {hid} (delivered on b): rc {rc}: {out}")
        print("   wait on a: consumed 0, rejected 1 with bad_mac, waiting 3 (timeout) and "
              "0 --until claimed")

        # The killed node back, caught up.
        h.ns.node(leader).start()
        wait(h.ns.groups_current, 60,
             lambda: f"{leader} restarted and caught up in the stream's and consumers' groups")
        # 2. gordon's expire on b.
        sent_b = b.status()["relay"]["receipts"]["sent"]
        h.b.extra = "[spool]\nresume_window = 2\n"
        h.b.write_config("b", extra=h.b.extra + h.relay_conf("b"))
        b.send(signal.SIGHUP)
        wait(lambda: "Reloaded" in b.logs(), 20, lambda: f"b reloaded:\n{b.logs()[-2000:]}")
        # A node killed again, in the middle of gordon's expiries (their
        # resume_window passes one after the other, as they were claimed).
        n_wait, n_unserved = len(by_kind["waiting"]), len(by_kind["unserved"])
        wait(lambda: a.status()["relay"]["receipts"]["applied"] >= got1 + n_wait // 3,
             60, lambda: f"phase 2: a third of gordon's expired: "
                         f"{a.status()['relay']['receipts']}")
        # The leader of a's consumer this time (the stream's too, or
        # not): the acks of the receipts a applied go to it, and one lost
        # with it brings the receipt again, which a must know already.
        leader2 = h.ns.consumer_leader("handoffd-a")
        check(leader2 is not None, "the leader of a's consumer known")
        stream2 = h.ns.stream_leader()
        at_applied2 = a.status()["relay"]["receipts"]["applied"] - got1
        t_kill2 = time.monotonic()
        h.ns.node(leader2).kill()
        wait(lambda: phase_done(h, ids, 2) == N, 120,
             lambda: f"phase 2: every final receipt on a ({phase_done(h, ids, 2)} of {N}; "
                     f"a {a.status()['relay']}, b {b.status()['relay']})")
        t_p2 = time.monotonic()
        stall2 = stall_in(s.samples, t_kill2, t_p2)
        # Nothing more to come: b has nothing left to publish, and the
        # consumers nothing left to deliver (a receipt twice would be in).
        wait(lambda: b.status()["relay"]["receipts"]["owed"] == 0 and
             b.status()["relay"]["receipts"]["queued"] == 0, 30,
             lambda: f"b has nothing left to publish: {b.status()['relay']['receipts']}")
        wait(h.ns.consumers_drained, 60,
             lambda: "the stream's consumers delivered and acked everything")
        got = check_receipts(h, ids, 2)
        # The line of a receipt is an info line, written out when a's
        # loop next sleeps: after the .outcome that records it.
        wait(lambda: len(logged_receipts(h)) >= got, 10,
             lambda: f"a's log names the {got} receipts recorded: {len(logged_receipts(h))}")
        logged = check_logged_once(h)
        check(got == expected, f"{got} receipts recorded, want {expected}")
        check(logged == got, f"a's log names {logged} receipts, the items record {got}")
        sa, sb = a.status()["relay"]["receipts"], b.status()["relay"]["receipts"]
        check(sa["applied"] == got and sa["dropped"] == 0 and sa["awaited"] == 0,
              f"a applied each of the {got} receipts once, awaits none: {sa}")
        check(sb["sent"] >= got, f"b published each receipt: {sb} (want sent >= {got})")
        jb, ja = relaykit.journal(h.b.spool), relaykit.journal(h.a.spool)
        for sub in ("queued", "owed"):
            check(jb[sub] == {}, f"b's journal: nothing {sub}: {list(jb[sub])[:3]}")
        check(ja["sent"] == {}, f"a's journal: nothing awaited: {list(ja['sent'])[:3]}")
        check(h.a.names("rejected") == [], f"rejected on a: {h.a.names('rejected')[:4]}")
        check(dict(h.consumer.counts) == c, "nothing more taken by the consumer")
        print(f"2. the killed node {leader} back and caught up; b reloaded with resume_window 2: "
              f"{n_wait} waiting expired ({n_unserved} rejected not_served in phase 1); the leader "
              f"of a's consumer {leader2} (stream leader {stream2}) SIGKILLed after {at_applied2} of "
              f"their {n_wait} receipts, longest stall after {stall2:.1f}s; "
              f"{got} receipts applied on a once each ({got - got1} in phase 2; "
              f"duplicates {sa['duplicate']}, dropped 0; b published {sb['sent'] - sent_b} "
              f"in phase 2, {sb['sent']} in all) {t_p2 - t0:.1f}s after the first drop")

        for name, want_rc, text in (("consumed", 0, "relayed to b: consumed"),
                                    ("waiting", 1, "relayed to b: expired"),
                                    ("bad_mac", 1, "relayed to b: rejected: bad_mac"),
                                    ("unserved", 1, "relayed to b: rejected: not_served")):
            for hid in (by_kind[name][0], by_kind[name][-1]):
                rc, out = ctl_wait(h, a, hid, "--timeout", "10")
                check(rc == want_rc and text in out, f"wait {hid} ({name}): rc {rc}, want {want_rc} "
                      f"'{text}': {out}")
        print("   wait on a: consumed 0; expired, rejected bad_mac and rejected not_served 1 "
              "with b's reason")
        s.stop()
        print(f"receipts through a 3-node cluster: N {N}, receipts applied {got} (expected {expected}), "
              f"duplicates {sa['duplicate']}, dropped 0, lost 0, twice 0; longest stall after the "
              f"kills {stall:.1f}s, {stall2:.1f}s; publish errors a {a.status()['relay']['publish_errors']}, "
              f"b {b.status()['relay']['publish_errors']}")
        check(a.stop() == 0 and b.stop() == 0, "both exit 0")


hdtest.run(main)
