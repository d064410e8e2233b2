"""Attack (issue 43.7, the cancel slots): the daemon keeps at most 1,024
cancel requests waiting for their handoff, 64 of one sender name.  The
default key signs for any name, so mallory (a member of the spool's
group) filled every slot in a moment with 1,100 requests for ids that
never come under 20 invented from_agent names, and every legitimate
cancel was refused for the hour the requests stay good.  Now a request
signed with a shared key also counts for its file's owner (at most 128
of one uid), such requests leave 256 slots to senders whose key is their
own, and a request past a bound is answered busy, not refused.

As packaged: the daemon its own user; bob (the default key), carol (an
[agent carol] key of her own, readable by her group) and the attackers
each their own user in the spool's group.

- mallory drops 1,100 requests signed with the default key under 20
  names; only 128 wait, the rest are answered busy; bob's cancel of his
  waiting handoff is then canceled (refused before);
- five more attacker uids drop 140 each: the 768 slots of shared keys
  are full, and bob's next cancel is answered busy (exit 1, "busy"), while
  carol's cancel of her waiting handoff, signed with her own key, is
  canceled;
- the busy answers are logged a line per 10 s (test_attack_cancel_junk_log.py
  for the refusals).

Runs as root; the users and groups are throwaway ids."""

import json
import os
import secrets
import subprocess
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47610       # the spool's group ("handoff")
DAEMON = 47611          # handoffd's user
ALICE = 47612           # alice's user and group
BOB = 47613             # a sender with the default key
CAROL = 47614           # a sender with a key of her own ...
CAROL_GID = 47615       # ... readable by her group
MALLORY = 47616         # the attacker
MORE = [47617, 47618, 47619, 47620, 47621]      # more attackers
PER_UID = 128           # src/handoffd/cancel.h
SHARED = 1024 - 256
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

# As an attacker: the requests of a JSON file, each through tmp/ into
# cancel/ under the name a requester gives it (ID.RANDOM).
FLOOD = r"""
import json, os, sys
src, spool = sys.argv[1], sys.argv[2]
for doc in json.load(open(src)):
    n = doc["handoff_id"] + "." + os.urandom(8).hex()
    t = os.path.join(spool, "tmp", "flood." + n)
    fd = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
    os.write(fd, json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
    os.close(fd)
    os.rename(t, os.path.join(spool, "cancel", n))
"""


def requests(env, tag, n, names):
    """n requests for ids that never come, from names invented senders."""
    at = hdproto.now()
    docs = [hdproto.sign({"protocol_version": 1, "type": "cancel/1",
                          "handoff_id": f"never-{tag}-{i:05d}", "from_agent": f"m{i % names}",
                          "initiated_at": hdproto.iso(at),
                          "expires_at": hdproto.iso(at + timedelta(seconds=3000))}, env.key)
            for i in range(n)]
    path = os.path.join(env.dir, f"flood-{tag}.json")
    with open(path, "w") as f:
        json.dump(docs, f)
    os.chmod(path, 0o644)
    return path


def processed(env, d):
    """Requests of the floods the daemon has read: kept, or answered."""
    kept = d.logs().count("Cancel request for never-")
    answered = sum(1 for n in os.listdir(env.path("cancel")) if n.startswith(".") and "never-" in n)
    return kept + answered


def flood(env, d, uid, n, names, done):
    path = requests(env, uid, n, names)
    p = subprocess.run([PY, "-c", FLOOD, path, env.spool], user=uid, group=SPOOL_GID,
                       extra_groups=[SPOOL_GID], capture_output=True, text=True,
                       timeout=120 * hdtest.SLOW)
    check(p.returncode == 0, f"the flood of uid {uid}: {p.stderr}")
    hdtest.wait_for(lambda: processed(env, d) >= done + n, timeout=60 * hdtest.SLOW,
                    what=lambda: f"{done + n} flood requests read ({processed(env, d)})")
    return done + n


def answers(env, word):
    return sum(1 for n in os.listdir(env.path("cancel")) if n.startswith(f".{word}.never-"))


def waiting(env, frm, key):
    doc = hdproto.build(frm, "alice", key, ttl=600)
    hid = doc["handoff_id"]
    hdproto.drop(env.spool, doc)
    hdtest.wait_for(lambda: hid + ".json" in env.bootstraps("alice"), what=f"{hid} delivered")
    return hid


def cancel(env, uid, groups, frm, key, hid):
    p = subprocess.run([env.for_others(hdtest.HANDOFFCTL), "cancel", "--spool", env.spool,
                        "--key", key, "--from", frm, hid, "--timeout", "20", "--json"],
                       user=uid, group=SPOOL_GID, extra_groups=[SPOOL_GID, *groups],
                       capture_output=True, text=True, timeout=60 * hdtest.SLOW)
    ans = json.loads(p.stdout) if p.stdout.startswith("{") else {}
    return p.returncode, ans.get("cancel"), p.stdout + p.stderr


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice", "carol"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE, "carol": CAROL_GID})
        carol_key_path = os.path.join(env.dir, "carol.key")
        carol_key = hdproto.make_key(carol_key_path)
        os.chown(carol_key_path, DAEMON, CAROL_GID)
        os.chmod(carol_key_path, 0o640)
        text = env.config_text().replace(
            f"[agent carol]\nstate_dir = {env.state['carol']}\n",
            f"[agent carol]\nstate_dir = {env.state['carol']}\nkey = {carol_key_path}\n")
        check(f"key = {carol_key_path}" in text, "carol's key in the configuration")
        d, conf = dep.start(text=text)
        hdtest.wait_for(lambda: os.path.isdir(env.path("cancel")), what="cancel/ made")

        t0 = time.monotonic()
        done = flood(env, d, MALLORY, 1100, 20, 0)
        kept = done - answers(env, "busy") - answers(env, "refused")
        print(f"- mallory's 1,100 requests under 20 names: {kept} wait, "
              f"{answers(env, 'busy')} answered busy, {answers(env, 'refused')} refused")
        hid = waiting(env, "bob", env.key)
        rc, said, out = cancel(env, BOB, [], "bob", env.key_path, hid)
        check(rc == 0 and said == "canceled", f"bob's cancel after mallory's flood: exit {rc}: {out}")
        check(kept == PER_UID, f"{kept} of mallory's requests wait, wanted {PER_UID}")
        print("ok: bob's cancel (another uid, the default key) is canceled")

        for uid in MORE:
            done = flood(env, d, uid, 140, 20, done)
        kept = done - answers(env, "busy") - answers(env, "refused")
        check(kept == SHARED, f"{kept} flood requests wait, wanted {SHARED}")
        print(f"- five more uids, 140 each: {kept} shared-key requests wait (the most)")
        busy = [ln for ln in d.logs().splitlines() if "Cancel request" in ln and ": busy" in ln]
        bound = 2 + int((time.monotonic() - t0) / 10)
        check(len(busy) <= bound, f"{len(busy)} lines for {answers(env, 'busy')} busy answers "
              f"(at most {bound})")
        print(f"- {answers(env, 'busy')} busy answers: {len(busy)} log line(s)")
        hid = waiting(env, "bob", env.key)
        rc, said, out = cancel(env, BOB, [], "bob", env.key_path, hid)
        check(rc == 1 and said == "busy", f"bob's cancel with the shared slots full: exit {rc}: {out}")
        check(env.item(hid)["state"] == "claimed", "a busy answer withdraws nothing")
        p = subprocess.run([env.for_others(hdtest.HANDOFFCTL), "cancel", "--spool", env.spool,
                            "--key", env.key_path, "--from", "bob", hid, "--timeout", "20"],
                           user=BOB, group=SPOOL_GID, extra_groups=[SPOOL_GID],
                           capture_output=True, text=True, timeout=60 * hdtest.SLOW)
        check(p.returncode == 1 and "try again later" in p.stdout, f"the text: {p.stdout}")
        print(f"ok: bob's cancel then: busy ({p.stdout.strip()})")
        hid = waiting(env, "carol", carol_key)
        rc, said, out = cancel(env, CAROL, [CAROL_GID], "carol", carol_key_path, hid)
        check(rc == 0 and said == "canceled", f"carol's cancel (her own key): exit {rc}: {out}")
        hdtest.wait_for(lambda: env.item(hid)["state"] == "archive", what=f"{hid} archived")
        print("ok: carol's cancel (her own key) takes a reserved slot: canceled")
        check(d.stop() == 0, "the daemon stops with 0")
    hdtest.finish("test_attack_cancel_slots")


if __name__ == "__main__":
    hdtest.run(main)
