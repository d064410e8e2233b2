"""handoff-hubd under load and killed, with the real daemon behind it.

- 2,000 posts from 50 concurrent keep-alive TLS clients: every one answered
  200, every accepted handoff delivered exactly once; the same 2,000 posted
  again: the same answers, nothing new in the spool, no second delivery.
- The hub SIGKILLed in the middle of a burst from 20 clients: every
  handoff that got a success answer is delivered exactly once, and after
  the next start nothing of the hub's is left in tmp/ (and another
  producer's file is left alone).
- No file per POST in the hub's state_dir: its records of the ids it
  accepted are one journal (accepted.log), which the restarted hub reads:
  a post accepted before the kill, changed, is duplicate_id.
"""

import os
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

CLIENTS = 50
PER_CLIENT = 40


def burst(hub, docs, clients, stop=None):
    """Post docs split over clients, each on one keep-alive connection:
    {handoff_id: (status, answer)} of those that got an answer."""
    answers, lock = {}, threading.Lock()

    def client(part):
        conn = None
        for doc in part:
            if stop and stop.is_set():
                return
            try:
                conn = conn or hub.connect()
                st, a = hub.post(doc, "bob", conn=conn)
            except Exception:  # the hub was killed: this one got no answer
                if conn:
                    conn.close()
                conn = None
                if stop and stop.is_set():
                    return
                continue
            with lock:
                answers[doc["handoff_id"]] = (st, a)
        if conn:
            conn.close()

    threads = [threading.Thread(target=client, args=(docs[i::clients],)) for i in range(clients)]
    for t in threads:
        t.start()
    return threads, answers


def delivered_once(env, ids, what):
    """Each id: its bootstrap there, one item in claimed/ or archive/, none rejected."""
    want = {i + ".json" for i in ids}
    hdtest.wait_for(lambda: want <= set(env.bootstraps("alice")), 120,
                    f"{what}: {len(want)} delivered")
    # claimed/ID.json, or archive/TS-FROM-TO-ID.json once consumed
    count = {}
    for n in env.items("claimed"):
        count[n[:-5]] = count.get(n[:-5], 0) + 1
    for n in env.items("archive"):
        for i in ids:
            if n.endswith("-" + i + ".json"):
                count[i] = count.get(i, 0) + 1
    for i in ids:
        check(count.get(i, 0) == 1, f"{what}: {i} kept {count.get(i, 0)} times in claimed/ and archive/")
    rej = env.items("rejected")
    check(not rej, f"{what}: rejected/: {rej[:5]}")


def main():
    with hdtest.Env(agents=["alice"], fsync=False) as env:
        # one token's whole load on purpose: its rate and share unlimited here
        # (test_hub_fair.py holds them)
        hub = hubkit.Hub(env, tokens={"bob": None},
                         extra="max_per_address = 64\nrate_per_token = 0\n"
                               "max_requests_per_token = 64\n")
        env.start(conf=hub.conf)
        hd = hub.start()

        docs = [hdproto.build("bob", "alice", env.key, ttl=900) for _ in range(CLIENTS * PER_CLIENT)]
        ids = [d["handoff_id"] for d in docs]
        threads, answers = burst(hub, docs, CLIENTS)
        for t in threads:
            t.join()
        check(len(answers) == len(docs), f"answered {len(answers)} of {len(docs)}")
        bad = [(i, a) for i, a in answers.items()
               if a != (200, {"status": "accepted", "handoff_id": i})]
        check(not bad, f"not accepted: {len(bad)}: {bad[:3]}")
        delivered_once(env, ids, "burst")
        print(f"ok: {len(docs)} posts from {CLIENTS} clients accepted and delivered once")

        threads, again = burst(hub, docs, CLIENTS)
        for t in threads:
            t.join()
        check(again == answers, "the same posts again: the same answers")
        hdtest.wait_for(lambda: env.names("handoff") == [], 30,
                        lambda: f"nothing new in handoff/: {env.names('handoff')[:5]}")
        check(len(env.bootstraps("alice")) == len(docs) and env.count("rejected") == 0,
              f"no second delivery: {len(env.bootstraps('alice'))} bootstraps, "
              f"rejected {env.names('rejected')[:4]}")
        print("ok: the same 2,000 again: the same answers, no second delivery")

        # SIGKILL mid-burst.
        docs2 = [hdproto.build("bob", "alice", env.key, ttl=900) for _ in range(1000)]
        stop = threading.Event()
        threads, got = burst(hub, docs2, 20, stop)
        hdtest.wait_for(lambda: len(got) >= 200, 60, "200 answers before the kill")
        hd.proc.send_signal(signal.SIGKILL)
        hd.proc.wait()
        stop.set()
        for t in threads:
            t.join()
        ok = [i for i, (st, a) in got.items() if st == 200 and a.get("status") == "accepted"]
        check(len(ok) == len(got), f"every answer before the kill was a success: {len(ok)}/{len(got)}")
        at_kill = sorted(os.listdir(env.path("tmp")))
        # what a kill inside write_atomic() leaves, and another producer's file
        for n in ("hub.x-1.json", ".hub.x-2.json.a1b2c3", ".other.json.d4e5f6"):
            open(env.path("tmp", n), "w").close()
        hd2 = hub.start("hub2")
        left = sorted(os.listdir(env.path("tmp")))
        check(left == [".other.json.d4e5f6"],
              f"tmp/ after the next start: {left[:5]} (at the kill: {at_kill[:5]})")
        os.unlink(env.path("tmp", ".other.json.d4e5f6"))
        delivered_once(env, ok, "after SIGKILL")
        print(f"ok: hub SIGKILLed after {len(got)} answers: each delivered once, tmp/ empty after restart")
        # The unanswered ones, retried: accepted (or answered from the record), once each.
        rest = [d for d in docs2 if d["handoff_id"] not in got]
        threads, got2 = burst(hub, rest, 10)
        for t in threads:
            t.join()
        check(all(st == 200 for st, _ in got2.values()) and len(got2) == len(rest),
              f"retries answered: {len(got2)} of {len(rest)}")
        delivered_once(env, [d["handoff_id"] for d in docs2], "retries")
        print(f"ok: {len(rest)} retries after the restart: each delivered once")

        kept = sorted(os.listdir(hub.state_dir))
        check(set(kept) <= {"accepted.log", "status.json", "a2a.d", "push.d"},
              f"the hub's state_dir holds {len(kept)} names: {kept[:5]}")
        with open(os.path.join(hub.state_dir, "accepted.log")) as f:
            journal = {ln.split()[1] for ln in f if ln.startswith("+ ")}
        missing = [i for i in ids + [d["handoff_id"] for d in docs2] if i not in journal]
        check(not missing, f"{len(missing)} accepted ids not in the journal, e.g. {missing[:3]}")
        # the same id, other bytes, after the restart (and once claimed): refused
        d0 = docs[0]
        changed = hdproto.build("bob", "alice", env.key, ttl=900, reason="changed",
                                handoff_id=d0["handoff_id"])
        st, a = hub.post(changed, "bob")
        check(st == 409 and a.get("reason") == "duplicate_id",
              f"another document under an id accepted before the kill: {st} {a}")
        st, a = hub.post(d0, "bob")
        check(st == 200 and a.get("status") == "accepted", f"the same bytes again: {st} {a}")
        print(f"ok: the state_dir holds {kept}, the journal all {len(journal)} ids; "
              "another document under a known id is duplicate_id after the restart")


if __name__ == "__main__":
    hdtest.run(main)
