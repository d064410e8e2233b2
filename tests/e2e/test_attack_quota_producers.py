"""Attack (issue 43, item 7, the handoff half): quotas counted by names the
attacker chooses.  max_waiting_per_sender counted by the from_agent in
the file, and the default key signs any: one user of the group, under ten
made-up names, filled max_waiting and closed carol's inbox to everyone
(1,000 handoffs from 10 names on the defaults).

As separate users with the shipped modes (the daemon its own user, each
producer her own uid in the spool's group), [spool] max_waiting = 20,
max_waiting_per_sender = 3, alice with a key of her own:

- uid A drops 30 handoffs for carol under 10 made-up names (default key):
  3 wait (a producer may have max_waiting_per_sender waiting, whatever
  the names), 27 are rejected as inbox_full saying so;
- dave's, from another uid (default key), and alice's, from hers (her own
  key), still get in;
- six more uids drop 3 each under the default key: what shared keys sign
  fills max_waiting less a reserve of 2 (18), the rest inbox_full saying
  so; alice's second still gets in (the reserve), a new uid's under the
  default key does not.

On the code before, A's flood filled the inbox (20 waiting) and dave's
and alice's were rejected (max_waiting)."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47490
DAEMON = 47491
CAROL = 47493
ALICE_GID = 47494
A = 47500               # the attacker
DAVE = 47501
ALICE = 47502
CROWD = list(range(47503, 47509))
LATE = 47509

# Drops each document of a JSON list as the user it runs as: tmp/, then a
# rename into handoff/, mode 0644 (as a producer writes).
DROPPER = r"""
import json, os, sys
spool, docs = sys.argv[1], json.load(open(sys.argv[2]))
for d in docs:
    n = d["handoff_id"] + ".json"
    t = os.path.join(spool, "tmp", "." + n + ".tmp")
    fd = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.fchmod(fd, 0o644)
    os.write(fd, json.dumps(d, sort_keys=True, separators=(",", ":")).encode())
    os.close(fd)
    os.rename(t, os.path.join(spool, "handoff", n))
"""


def drop_as(env, uid, docs, tag):
    path = os.path.join(env.dir, f"docs-{tag}.json")
    with open(path, "w") as f:
        json.dump(docs, f)
    os.chmod(path, 0o644)
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    p = subprocess.run([py, "-c", DROPPER, env.spool, path], user=uid, group=SPOOL_GID,
                       extra_groups=[SPOOL_GID], capture_output=True, text=True,
                       timeout=60 * hdtest.SLOW)
    check(p.returncode == 0, f"dropping as uid {uid}: exit {p.returncode}: {p.stderr[-2000:]}")
    return [d["handoff_id"] for d in docs]


def where(env, ids):
    """(waiting for carol, rejected with their details) of ids."""
    boots = set(env.bootstraps("carol"))
    waiting = [i for i in ids if f"{i}.json" in boots]
    rejected = {}
    for n in env.items("rejected"):
        hid = n[:-5] if n.endswith(".json") else n
        for i in ids:
            if i in hid:
                rejected[i] = env.reason_of(n)
    return waiting, rejected


def settled(env, ids, what):
    def done():
        w, r = where(env, ids)
        return not env.names("handoff") and len(w) + len(r) == len(ids)
    try:
        hdtest.wait_for(done, 30 * hdtest.SLOW, what)
    except hdtest.Fail:
        w, r = where(env, ids)
        raise hdtest.Fail(f"{what}: {len(w)} waiting, {len(r)} rejected of {len(ids)}; "
                          f"handoff/ {len(env.names('handoff'))}")
    return where(env, ids)


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["carol", "alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"carol": CAROL, "alice": ALICE_GID})
        alice_key_path = os.path.join(env.dir, "alice.key")
        alice_key = hdproto.make_key(alice_key_path)
        os.chown(alice_key_path, DAEMON, SPOOL_GID)
        text = env.config_text("d0") + (
            "\n[spool]\nmax_waiting = 20\nmax_waiting_per_sender = 3\n"
            f"\n[agent alice]\nkey = {alice_key_path}\n")
        d, conf = dep.start(text=text)

        def docs(names, key=env.key, n=1):
            return [hdproto.build(f, "carol", key, ttl=600) for f in names for _ in range(n)]

        flood = drop_as(env, A, docs([f"made-up{i}" for i in range(10)], n=3), "flood")
        w, r = settled(env, flood, "uid A's flood decided")
        print(f"- uid A, 30 handoffs under 10 made-up names: {len(w)} waiting, {len(r)} rejected")
        details = {x.get("detail") for x in r.values()}
        check(len(w) == 3 and all(x.get("reason") == "inbox_full" for x in r.values()),
              f"uid A: {len(w)} waiting (want 3), reasons {sorted(details)[:3]}")
        check(details == {f"3 handoffs dropped by uid {A} already wait for carol, under any "
                          "names (max_waiting_per_sender)"}, f"details: {details}")

        dave = drop_as(env, DAVE, docs(["dave"]), "dave")
        alice = drop_as(env, ALICE, docs(["alice"], key=alice_key), "alice")
        w, r = settled(env, dave + alice, "dave's and alice's decided")
        print(f"- after it: dave (another uid, default key) {'in' if dave[0] in w else 'rejected'}, "
              f"alice (her own key) {'in' if alice[0] in w else 'rejected'}")
        check(not r, f"rejected: {r}")

        crowd = []
        for k, uid in enumerate(CROWD):
            crowd += drop_as(env, uid, docs([f"crowd{k}-{i}" for i in range(3)]), f"crowd{k}")
        w, r = settled(env, crowd, "six more uids' handoffs decided")
        details = {x.get("detail") for x in r.values()}
        print(f"- six more uids, 3 each under the default key: {len(w)} waiting, {len(r)} rejected")
        check(len(w) == 14 and len(r) == 4, f"the crowd: {len(w)} waiting (want 14), {len(r)} rejected")
        check(details == {"18 handoffs signed with a shared key already wait for carol "
                          "(max_waiting, less 2 kept for senders with keys of their own)"},
              f"details: {details}")

        alice2 = drop_as(env, ALICE, docs(["alice"], key=alice_key), "alice2")
        late = drop_as(env, LATE, docs(["late"]), "late")
        w, r = settled(env, alice2 + late, "alice's second and the late uid's decided")
        print(f"- then alice's second {'in' if alice2[0] in w else 'rejected'}, a new uid's "
              f"(default key) {'in' if late[0] in w else 'rejected'}")
        check(alice2[0] in w, f"alice's second (her own key) rejected: {r}")
        check(late[0] in r and r[late[0]].get("reason") == "inbox_full",
              f"the late uid's not rejected as inbox_full: {r}")
        check(len(env.bootstraps("carol")) == 20, f"{len(env.bootstraps('carol'))} wait for carol")
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
