"""Attack (issue 43.1): forged cancel answers.  The daemon answers a cancel
request by renaming the requester's file cancel/NAME to cancel/.WORD.NAME;
cancel/ is the spool group's to write (3770), so mallory, a member
watching it with inotify, dropped her own .canceled.NAME first and
`handoffctl cancel` said "canceled", exit 0, for a handoff alice had
consumed.  Now an answer counts only as the request's own inode (the
rename keeps it), owned by the requester, with one link and the request's
name gone; a file of anyone else under an answer's name is ignored, left
for the daemon to sweep, and the wait goes on for the real answer.

As packaged: the daemon its own user, bob (the sender, signing with the
default key, 0640 in the spool's group) and mallory each their own user
in the spool's group.  Mallory's watcher (tests/py/cancelkit.py, inotify through ctypes) drops
her file under the answer's name she wants bob to read the moment his
request appears.  She must win each race: the test holds the item's lock
(hdtest.lock_id, as a daemon busy with it would) until her file is there,
so the daemon answers after her (within its 1-s busy retry).

- RUNS (5) handoffs consumed by alice first: mallory drops
  .canceled.NAME; bob's cancel must say not_cancelable, exit 1;
- RUNS handoffs still waiting: mallory drops .not_cancelable.NAME; bob's
  cancel must say canceled, exit 0, and the item be archived canceled;
- in each run her file is still there, hers, untouched by bob (the
  daemon removes it with the other leftovers), and bob's answer is gone.

Runs as root; the users and groups are throwaway ids."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import cancelkit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47600       # the spool's group ("handoff")
DAEMON = 47601          # handoffd's user
ALICE = 47602           # alice's user and group
BOB = 47603             # the sender, in the spool's group
MALLORY = 47604         # the attacker, in the spool's group
RUNS = int(os.environ.get("HD_ATTACK_CANCEL_RUNS", "5"))

def bob_cancel(env, hid):
    return subprocess.Popen([env.for_others(hdtest.HANDOFFCTL), "cancel", "--spool", env.spool,
                             "--key", env.key_path, "--from", "bob", hid, "--timeout", "20",
                             "--json"], user=BOB, group=SPOOL_GID, extra_groups=[SPOOL_GID],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def one_run(env, conf, word, consumed, want):
    """Bob cancels one handoff with mallory dropping .WORD.NAME first:
    his --json answer and exit."""
    doc = hdproto.build("bob", "alice", env.key, ttl=600)
    hid = doc["handoff_id"]
    hdproto.drop(env.spool, doc)
    hdtest.wait_for(lambda: hid + ".json" in env.bootstraps("alice"), what=f"{hid} delivered")
    if consumed:
        env.ctl("consume", "-c", conf, "--agent", "alice", hid, check_rc=0)
        hdtest.wait_for(lambda: env.item(hid)["state"] == "archive", what=f"{hid} archived")
    mal = cancelkit.forger(env, MALLORY, SPOOL_GID, word)
    lock = cancelkit.hold_lock(env, hid)
    try:
        p = bob_cancel(env, hid)
        line = mal.stdout.readline().split()
        check(line[:1] == ["forged"], f"mallory's watcher: {line}")
        name = line[1]
        forged = env.path("cancel", f".{word}.{name}")
        check(os.stat(forged).st_uid == MALLORY, "her file is hers")
    finally:
        os.close(lock)          # the daemon answers at its busy retry
    try:
        out, err = p.communicate(timeout=30 * hdtest.SLOW)
    finally:
        mal.kill()
        mal.wait()
    ans = json.loads(out) if out.startswith("{") else {}
    if ans.get("cancel") != want:
        return hid, p.returncode, ans.get("cancel"), err
    check(os.path.exists(forged) and os.stat(forged).st_uid == MALLORY,
          "her file is left for the daemon to sweep")
    left = [n for n in os.listdir(env.path("cancel")) if name in n and n != f".{word}.{name}"]
    check(left == [], f"bob's answer left in cancel/: {left}")
    return hid, p.returncode, ans.get("cancel"), err


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        # the busy retry of a cancel is the sweep's
        d, conf = dep.start(text=env.config_text().replace("rescan_interval = 5",
                                                           "rescan_interval = 1"))
        hdtest.wait_for(lambda: os.path.isdir(env.path("cancel")), what="cancel/ made")

        wrong = []
        for i in range(RUNS):
            hid, rc, said, err = one_run(env, conf, "canceled", True, "not_cancelable")
            if rc != 1 or said != "not_cancelable":
                wrong.append(f"consumed {hid}: exit {rc}, {said} {err}")
            check(env.item(hid)["outcome"] == "consumed", f"{hid}: {env.item(hid)['outcome']}")
        if wrong:
            print("\n".join(wrong))
        print(f"- consumed, mallory forging 'canceled': {RUNS - len(wrong)} of {RUNS} "
              f"answered not_cancelable")
        n_bad = len(wrong)
        for i in range(RUNS):
            hid, rc, said, err = one_run(env, conf, "not_cancelable", False, "canceled")
            if rc != 0 or said != "canceled":
                wrong.append(f"waiting {hid}: exit {rc}, {said} {err}")
            hdtest.wait_for(lambda: env.item(hid)["state"] == "archive", what=f"{hid} archived")
            check(rc != 0 or env.item(hid)["outcome"] == "canceled", f"{hid}: {env.item(hid)['outcome']}")
        print(f"- waiting, mallory forging 'not_cancelable': {RUNS - len(wrong) + n_bad} of "
              f"{RUNS} answered canceled")
        check(not wrong, "forged answers believed:\n" + "\n".join(wrong))
        print("ok: bob's cancel believes only the daemon's rename of his own request")
        check(d.stop() == 0, "the daemon stops with 0")
    hdtest.finish("test_attack_cancel_forged")


if __name__ == "__main__":
    hdtest.run(main)
