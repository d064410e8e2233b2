"""The hub tells a sender the state of its own handoff (issue 34, 6), run
as packaged: the daemon its own user, the hub its own user in the spool's
group (handoff-hubd.sysusers), alice her own user; the record in claimed/
and archive/ is alice's bootstrap (mode 0640, her private group), which
the hub's user cannot read.

- bob posts with ?wait=claimed: 200, outcome claimed;
- GET /api/v1/handoffs/{id} with bob's token (the sender's) and alice's
  (the target's): 200, status claimed, from_agent bob, to_agent alice;
  carol's token: 403;
- alice consumes it: GET says consumed; still so once the hub's own
  record of the id is gone (pruned): the archive's outcome names both;
- a handoff a file producer dropped (not through the hub), claimed: the
  hub cannot read who sent it, and says so with a 5xx, never a 403; once
  archived, 200 from the archive's outcome;
- (issue 33) the same bytes posted while a producer's copy waits in
  handoff/ and the hub cannot write its record (a file size limit stops
  its journal growing):
  accepted (they are in the spool), and the failed record is logged.

Runs as root; the users and groups are throwaway ids."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check, expect  # noqa: E402

SPOOL_GID = 47460       # the spool's group ("handoff")
DAEMON = 47461          # handoffd's user
HUB = 47462             # handoff-hubd's user, primary group the spool's
ALICE = 47463           # alice's user and private group
PRODUCER = 47464        # a file producer, in the spool's group


def show(hub, hid, agent):
    st, ans = hub.get(f"/api/v1/handoffs/{hid}", agent)
    print(f"GET {hid} as {agent}: {st} {ans}")
    return st, ans


def consume(env, conf, hid):
    p = subprocess.run([env.for_others(hdtest.HANDOFFCTL), "consume", "-c", conf,
                        "--agent", "alice", hid],
                       user=ALICE, group=ALICE, extra_groups=[ALICE, SPOOL_GID],
                       capture_output=True, text=True, timeout=30 * hdtest.SLOW)
    check(p.returncode == 0, f"alice's consume of {hid}: exit {p.returncode}:\n{p.stdout}{p.stderr}")


def archived(env, hid):
    return any(hid in n for n in env.items("archive"))


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        hub = hubkit.Hub(env, tokens={"bob": None, "alice": None, "carol": None}, tls=False)
        hub.run_as(HUB, SPOOL_GID)
        d, conf = dep.start(text=open(hub.conf).read())
        check(conf == hub.conf, f"one config for both: {conf} {hub.conf}")
        hub.start()

        # The sender posts and waits for the claim.
        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = doc["handoff_id"]
        st, ans = hub.post(doc, "bob", query="?wait=claimed")
        print(f"POST ?wait=claimed: {st} {ans}")
        expect(st == 200 and ans.get("outcome") == "claimed",
              f"?wait=claimed as packaged: {st} {ans} (want 200, outcome claimed)")
        rec = env.path("claimed", hid + ".json")
        mode = os.stat(rec).st_mode & 0o777
        print(f"claimed/{hid}.json: mode {mode:o}, gid {os.stat(rec).st_gid}")

        # Its state, to either end's token; not to carol's.
        for agent in ("bob", "alice"):
            st, ans = show(hub, hid, agent)
            expect(st == 200 and ans.get("status") == "claimed" and
                  ans.get("from_agent") == "bob" and ans.get("to_agent") == "alice",
                  f"GET as {agent} (an end of it) while claimed: {st} {ans}")
        st, ans = show(hub, hid, "carol")
        expect(st == 403, f"GET as carol (neither end): {st} {ans}")

        # Consumed: archived, its outcome; also once the hub's record went.
        consume(env, conf, hid)
        hdtest.wait_for(lambda: archived(env, hid), what=f"{hid} archived")
        st, ans = show(hub, hid, "bob")
        expect(st == 200 and ans.get("status") == "consumed",
              f"GET as bob once consumed: {st} {ans}")
        # the record pruned: the hub restarted on a journal without it
        check(hub.proc.stop() == 0, "the hub stops with 0")
        journal = os.path.join(hub.state_dir, "accepted.log")
        with open(journal) as f:
            lines = f.read().splitlines(True)
        check(any(hid in ln for ln in lines), f"{hid} not in the hub's journal: {lines}")
        with open(journal, "w") as f:
            f.writelines(ln for ln in lines if hid not in ln)
            # enough recent records that a file size limit below the
            # journal's size still lets the hub write a document
            f.writelines(f"+ pad-{i} {'0' * 64} bob alice {int(time.time())}\n" for i in range(100))
        hub.start()
        for agent, want in (("bob", 200), ("alice", 200), ("carol", 403)):
            st, ans = show(hub, hid, agent)
            expect(st == want and (want != 200 or ans.get("status") == "consumed"),
                  f"GET as {agent} once consumed, the hub's record gone: {st} {ans} (want {want})")

        # Not through the hub: who sent it is in no file the hub may read
        # while it is claimed.
        doc2 = hdproto.build("bob", "alice", env.key, ttl=600)
        hid2 = doc2["handoff_id"]
        err = dep.as_user(PRODUCER, [], "drop", env.path("handoff", hid2 + ".json"),
                          hdproto.dumps(doc2).decode())
        check(err is None, f"the producer could not drop: {err}")
        hdtest.wait_for(lambda: os.path.exists(os.path.join(env.state["alice"], "handoffs",
                                                            hid2 + ".json")),
                        what=f"{hid2} delivered")
        st, ans = show(hub, hid2, "bob")
        expect(500 <= st < 600, f"GET of a claimed item the hub cannot read: {st} {ans} "
              "(want a 5xx: a read failure is not a refusal)")
        consume(env, conf, hid2)
        hdtest.wait_for(lambda: archived(env, hid2), what=f"{hid2} archived")
        st, ans = show(hub, hid2, "bob")
        expect(st == 200 and ans.get("status") == "consumed" and ans.get("from_agent") == "bob",
              f"GET of the producer's item once archived: {st} {ans}")

        # Accepted again from the spool's copy, no record written: said.
        check(d.stop() == 0, "the daemon stops with 0")
        doc3 = hdproto.build("bob", "alice", env.key, ttl=600)
        hid3 = doc3["handoff_id"]
        err = dep.as_user(PRODUCER, [], "drop", env.path("handoff", hid3 + ".json"),
                          hdproto.dumps(doc3).decode())
        check(err is None, f"the producer could not drop: {err}")
        # the journal cannot grow: a file size limit at its size (EFBIG)
        size = os.path.getsize(journal)
        # (as the hub's user, its soft limit only: root here may lack
        # CAP_SYS_RESOURCE)
        def limit(v):
            subprocess.run(["setpriv", f"--reuid={HUB}", f"--regid={SPOOL_GID}", "--clear-groups",
                            "prlimit", f"--pid={hub.proc.proc.pid}", f"--fsize={v}:"], check=True)
        limit(size)
        try:
            st, ans = hub.post(doc3, "bob")
        finally:
            limit("unlimited")
        print(f"POST of the bytes a producer dropped, the hub's journal full: {st} {ans}")
        expect(st == 200 and ans.get("status") == "accepted", f"the same bytes as in handoff/: {st} {ans}")
        with open(journal) as f:
            expect(hid3 not in f.read(), "a record was written")
        said = [ln for ln in hub.proc.logs().splitlines() if "Failed to record" in ln]
        print("hub: " + "\n     ".join(said))
        expect(len(said) == 1 and hid3 in said[0] and "too large" in said[0],
              f"the record the hub could not write is not said once: {said}")
        check(hub.proc.stop() == 0, "the hub stops with 0")
    hdtest.finish("ok")


if __name__ == "__main__":
    try:
        main()
    except hdtest.Fail as e:
        print(f"FAIL: {e}")
        sys.exit(1)
