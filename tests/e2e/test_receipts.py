"""Receipts through the relay (issue 27), two real handoffds and a real
nats-server, each host with its own Ed25519 host key made by `handoffctl
keygen --ed25519` ([relay] host_key) and the other's public key in its
[relay] host_pubkey_dir:

- a mixed batch relayed from a to b, each kind ending differently on b:
  consumed (alice's, taken by the consumer), expired (gordon's, never
  taken), rejected bad_mac (from carl, whose key only a holds), rejected
  not_served (for carol, whom b does not serve: refused unwritten); each outcome's
  receipt reaches a once: the archived item stays "relayed" with the
  remote outcome, host, time and reason beside it; `handoffctl wait` on a
  returns 0 / 1 with b's reason (a wait started before the drop too),
  `--until relayed` returns 5, `show` and status say it; `handoffctl
  status` shows the receipts b owes and a awaits (non-zero under way, 0
  once every final receipt is in) with the sent/applied/dropped counts;
- b's rejection of carl's handoff says that it came through the relay and
  from host a (log, show, .reason);
- forged receipts published straight onto handoff.a.receipt.b (signed by
  another key, another key under b's kid, no signature, and b's own valid
  receipt of one id replayed as another's) change nothing on a and are
  counted as dropped.

HD_RECEIPT_N sets the batch (default 80; `make stress` runs 500)."""

import base64
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hded25519  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RECEIPT_N", "80"))
FINAL = ("consumed", "expired", "rejected")


wait = hdtest.wait_for


def kinds(i):
    """(from, to, ttl, final outcome on b, its reason) of the i-th handoff;
    carl's (bad_mac) no more than relaykit.UNVERIFIED_MAX, bob's to alice
    after."""
    k = [("bob", "alice", 600, "consumed", ""),
         ("bob", "gordon", 600, "expired", ""),
         ("carl", "alice", 600, "rejected", "bad_mac"),
         ("bob", "carol", 600, "rejected", "not_served")]
    if i % 4 == 2 and i // 4 >= relaykit.UNVERIFIED_MAX:
        return k[0]
    return k[i % 4]


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        keys = h.enable_receipts()
        carl_key_path = os.path.join(h.a.dir, "carl.key")
        carl_key = hdproto.make_key(carl_key_path)
        h.a.extra = (f"[agent carl]\nstate_dir = {os.path.join(h.a.dir, 'agents', 'carl')}\n"
                     f"key = {carl_key_path}\n\n[remote carol]\nhost = b\n")
        h.b.extra = "[spool]\nresume_window = 3\n"
        h.consumer.agents = ["alice"]   # gordon's are never taken: they expire
        a, b = h.start_a(), h.start_b()
        relaykit.wait_ready(a, b)
        p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", a.conf], capture_output=True, text=True)
        check(p.returncode == 0 and "receipts: sent (host_key), accepted" in p.stdout,
              f"handoffd -n says receipts are on:\n{p.stdout}{p.stderr}")

        docs = []
        for i in range(N):
            frm, to, ttl, _, _ = kinds(i)
            docs.append(hdproto.build(frm, to, carl_key if frm == "carl" else h.a.key, ttl=ttl))
        ids = [d["handoff_id"] for d in docs]
        # A wait started before the handoff exists follows it through.
        early = subprocess.Popen([hdtest.HANDOFFCTL, "wait", "-c", a.conf, ids[0], "--timeout", "120"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        for d in docs:
            hdproto.drop(h.a.spool, d)

        # status while they are under way: a awaits final receipts, b owes
        # them (gordon's are delivered, not final, for resume_window)
        peak = {"awaited": 0, "owed": 0}

        def done():
            ra, rb = a.status()["relay"]["receipts"], b.status()["relay"]["receipts"]
            peak["awaited"] = max(peak["awaited"], ra.get("awaited", 0))
            peak["owed"] = max(peak["owed"], rb.get("owed", 0))
            rel = h.relayed_on_a()
            return sum(1 for i in ids if rel.get(i, {}).get("remote_outcome") in FINAL)
        # as long as receipts come in (a loaded machine takes minutes)
        hdtest.wait_progress(done, N, stall=120, what="every receipt's final outcome on a")
        took = time.monotonic() - t0
        rel = h.relayed_on_a()
        want_applied = 0
        for i, hid in enumerate(ids):
            _, _, _, final, reason = kinds(i)
            o = rel[hid]
            check(o["outcome"] == "relayed" and o.get("remote_outcome") == final and
                  o.get("remote_host") == "b" and o.get("remote_reason", "") == reason and
                  o.get("remote_at"), f"{hid}: {o}")
            seen = sorted(o.get("remote_outcomes", []))
            want = sorted(["delivered", final] if final != "rejected" else [final])
            check(seen == want, f"{hid}: receipts {seen}, want {want}")
            want_applied += len(want)
        sa = a.status()["relay"]["receipts"]
        check(sa["applied"] == want_applied and sa["dropped"] == 0,
              f"a applied each receipt once: {sa}, want {want_applied}")
        wait(lambda: b.status()["relay"]["receipts"]["sent"] == want_applied, 20,
                        lambda: f"b's receipts all acked: {b.status()['relay']['receipts']}")
        jb = relaykit.journal(h.b.spool)
        out, owed = list(jb["queued"]), list(jb["owed"])
        check(out == [] and owed == [], f"b's journal: nothing left to publish: queued {out[:3]}, owed {owed[:3]}")
        print(f"{N} relayed, {want_applied} receipts applied on a once each, after {took:.1f}s")
        # handoffctl status: both halves' figures, owed and awaited back to 0
        sa, sb = a.status()["relay"]["receipts"], b.status()["relay"]["receipts"]
        check(sa.get("sending") is True and sa.get("accepting") is True and sa.get("awaited") == 0 and
              sb.get("owed") == 0 and sb.get("queued") == 0 and 0 < peak["awaited"] <= N and
              0 < peak["owed"] <= N, f"status receipts: a {sa}, b {sb}, seen under way {peak}")
        js = json.loads(h.a.ctl("status", "-c", a.conf, "--json").stdout)
        check(js.get("relay", {}).get("receipts") == sa, f"status --json on a: {js.get('relay')}")
        p = h.b.ctl("status", "-c", b.conf)
        want = (f"receipts: sending on: owed 0, queued 0, sent {sb['sent']}; accepting on: awaited 0, "
                f"applied {sb['applied']}, duplicates 0, dropped 0")
        check(want in p.stdout, f"status text on b has '{want}':\n{p.stdout}")
        print(f"status: a awaited up to {peak['awaited']}, b owed up to {peak['owed']}, both 0 after")

        rc = early.wait(30)
        eo = early.stdout.read()
        check(rc == 0 and "relayed to b: consumed" in eo, f"early wait: rc {rc}: {eo}{early.stderr.read()}")
        for i in range(4):
            hid = ids[i]
            _, _, _, final, reason = kinds(i)
            p = h.a.ctl("wait", "-c", a.conf, hid, "--timeout", "10")
            check(p.returncode == (0 if final == "consumed" else 1) and
                  f"relayed to b: {final}" in p.stdout and reason in p.stdout,
                  f"wait {hid} ({final} {reason}): rc {p.returncode}: {p.stdout}{p.stderr}")
            p = h.a.ctl("wait", "-c", a.conf, hid, "--until", "relayed", "--timeout", "10")
            check(p.returncode == 5, f"wait --until relayed: rc {p.returncode}: {p.stdout}")
            if final == "consumed":
                # issue 46: a result comes back from b (test_relay_results);
                # until it does, wait waits for it as for a local one
                p = h.a.ctl("wait", "-c", a.conf, hid, "--until", "completed", "--timeout", "1")
                check(p.returncode == 3 and p.stdout.strip() == f"{hid} timeout (relayed)",
                      f"wait --until completed, relayed: rc {p.returncode}: {p.stdout}")
            js = json.loads(h.a.ctl("wait", "-c", a.conf, hid, "--json", "--timeout", "10").stdout)
            check(js.get("remote_outcome") == final and js.get("status") == "relayed",
                  f"wait --json: {js}")
            p = h.a.ctl("show", "-c", a.conf, hid, check_rc=0)
            check(f"there {final} (receipt signed by b" in p.stdout, f"show:\n{p.stdout}")
        print("wait on a: consumed 0, expired 1, rejected 1 with b's reason; --until relayed 5; show")

        # b's rejection of carl's: through the relay, from a.
        name = ids[2] + ".json"
        r = h.b.reason_of(name)
        check(r["reason"] == "bad_mac" and r.get("relayed_from") == "a" and
              "came through the relay from host a" in r["detail"], f"b's .reason: {r}")
        p = h.b.ctl("show", "-c", b.conf, ids[2])
        check("came through the relay from host a" in p.stdout, f"show on b:\n{p.stdout}")
        # b's "Rejected" (notice) leaves when its loop sleeps
        hdtest.wait_for(lambda: "came through the relay from host a" in b.logs(), 10,
                        "b's log says so")
        check("came through the relay from host a" in b.logs(), "b's log says so")

        # Forged receipts straight onto the subject.
        snap = h.relayed_on_a()
        before = a.status()["relay"]["receipts"]
        cl = natsrv.Client(h.ns.urls[0])
        target = ids[1]         # expired on b: claim it was consumed
        base = {"type": "handoff-receipt", "version": 1, "handoff_id": target, "outcome": "consumed",
                "reason": "", "detail": "", "host": "b", "origin": "a",
                "at": hdproto.iso(hdproto.now())}
        mallory = hded25519.Key(hded25519.seed_from("mallory"))
        line = open(keys["b"]).read().split()
        real_b = hded25519.Key(base64.b64decode(line[1]), kid=line[2])
        m2 = hded25519.Key(hded25519.seed_from("m2"), kid=line[2])
        forged = [
            ("another key", mallory.sign(base)),
            ("another key under b's kid", m2.sign(base)),
            ("no signature", dict(base)),
        ]
        m2.close()
        # b's own valid receipt of one id (signed here, by a second
        # implementation), published as another's.
        replay = real_b.sign(dict(base, handoff_id=ids[0]))
        forged.insert(0, ("replayed", replay))
        for k, (what, doc) in enumerate(forged):
            # the first under the target's own Nats-Msg-Id, the others
            # under new ones, past the stream's dedup
            ack = cl.js_publish("handoff.a.receipt.b", json.dumps(doc).encode(),
                                msg_id=f"{target}:consumed" if k == 0 else f"f{k}-{target}:consumed")
            check(ack.get("stream") == "HANDOFF" and not ack.get("duplicate"), f"{what}: PubAck {ack}")
        mallory.close()
        real_b.close()
        cl.close()
        wait(lambda: a.status()["relay"]["receipts"]["dropped"] >= before["dropped"] + 4, 15,
                        lambda: f"a drops the forged receipts: {a.status()['relay']['receipts']}")
        time.sleep(0.5)
        after = a.status()["relay"]["receipts"]
        check(after["dropped"] == before["dropped"] + 4 and after["applied"] == before["applied"],
              f"each forged receipt dropped, none applied: {before} -> {after}")
        check(h.relayed_on_a() == snap, "nothing changed on a")
        check("a replay" in a.logs(), "the replay is named in a's log")
        p = h.a.ctl("wait", "-c", a.conf, target, "--timeout", "5")
        check(p.returncode == 1 and "expired" in p.stdout, f"still expired: {p.stdout}")
        print("forged receipts (another key, b's kid on another key, no signature, replay): "
              "dropped and counted, nothing changed")
        check(a.stop() == 0 and b.stop() == 0, "both exit 0")


hdtest.run(main)
