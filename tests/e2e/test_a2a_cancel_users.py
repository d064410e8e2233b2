"""A2A CancelTask run as packaged (issue 35): the daemon its own user, the
hub its own user in the spool's group (handoff-hubd.sysusers), alice her
own user, a file producer another member of the spool's group.

- the hub's user can neither write alice's bootstrap nor its record in
  claimed/ (the premise: only the daemon can withdraw it);
- cancel/ is the daemon's, 3770 (the group writes, sticky, setgid), made
  by the daemon at its start;
- bob's CancelTask: CANCELED, the bootstrap gone, archived as canceled;
  the answer (the hub's own request file, renamed by the daemon) removed
  by the hub: nothing left in cancel/;
- the producer, who may write cancel/ but holds no key of bob's, asks to
  cancel bob's next handoff with a key of her own (handoffctl cancel
  --key): refused, the bootstrap stays; her answer removed by her;
- the producer forges answers (issue 43.1: tests/py/cancelkit.py drops
  .not_cancelable.NAME the moment the hub's request appears, the item's
  lock held by the test until she has): bob's CancelTask is still
  CANCELED, her file left for the daemon.

Runs as root; the users and groups are throwaway ids."""

import json
import os
import stat
import subprocess
import sys
import threading
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import cancelkit  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47470       # the spool's group ("handoff")
DAEMON = 47471          # handoffd's user
HUB = 47472             # handoff-hubd's user, primary group the spool's
ALICE = 47473           # alice's user and private group
PRODUCER = 47474        # a file producer, in the spool's group


def rpc(hub, method, params, agent="bob"):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    st, ans = hub.request("POST", "/a2a/alice", body, {
        "Content-Type": "application/json", "A2A-Version": "1.0",
        "Authorization": f"Bearer {hub.tokens[agent]}"})
    check(st == 200 and "result" in ans, f"{method}: {st} {ans}")
    return ans["result"]


def send(hub, text):
    return rpc(hub, "SendMessage", {"message": {"messageId": str(uuid.uuid4()),
                                                "role": "ROLE_USER",
                                                "parts": [{"text": text}]},
                                    "configuration": {"returnImmediately": True}})["task"]["id"]


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        hub = hubkit.Hub(env, tokens={"bob": None, "alice": None}, tls=False)
        hub.run_as(HUB, SPOOL_GID)
        # the busy retry of a cancel is the sweep's: within the hub's wait
        d, conf = dep.start(text=open(hub.conf).read().replace("rescan_interval = 5",
                                                                "rescan_interval = 1"))
        hub.start()
        st = os.stat(env.path("cancel"))
        check(stat.S_IMODE(st.st_mode) == 0o3770 and st.st_uid == DAEMON and st.st_gid == SPOOL_GID,
              f"cancel/: mode {stat.S_IMODE(st.st_mode):o} owner {st.st_uid}:{st.st_gid}")

        hid = send(hub, "take this back")
        boot = os.path.join(env.state["alice"], "handoffs", hid + ".json")
        hdtest.wait_for(lambda: os.path.exists(boot), what=f"{hid} delivered")
        for p in (boot, env.path("claimed", hid + ".json")):
            err = dep.as_user(HUB, [], "write", p, "{}")
            check(err == "EACCES", f"the hub's user may write {p}: {err}")
        print("ok: the hub's user can write neither the bootstrap nor the record")

        t = rpc(hub, "CancelTask", {"id": hid})
        check(t["status"]["state"] == "TASK_STATE_CANCELED", f"CancelTask: {t}")
        check(not os.path.exists(boot), "the bootstrap is gone")
        hdtest.wait_for(lambda: env.item(hid)["state"] == "archive", what="archived")
        check(env.item(hid)["outcome"] == "canceled", f"archived as {env.item(hid)['outcome']}")
        check(os.listdir(env.path("cancel")) == [], f"left in cancel/: {os.listdir(env.path('cancel'))}")
        print("ok: CancelTask as packaged: CANCELED, archived canceled, the hub took its answer")

        # a member of the spool's group without bob's key
        hid2 = send(hub, "only bob may take this back")
        boot2 = os.path.join(env.state["alice"], "handoffs", hid2 + ".json")
        hdtest.wait_for(lambda: os.path.exists(boot2), what=f"{hid2} delivered")
        own = os.path.join(env.dir, "producer.key")
        with open(own, "wb") as f:
            f.write(os.urandom(48))
        os.chown(own, PRODUCER, SPOOL_GID)
        os.chmod(own, 0o600)
        p = subprocess.run([env.for_others(hdtest.HANDOFFCTL), "cancel", "--spool", env.spool,
                            "--key", own, "--from", "bob", hid2, "--timeout", "10"],
                           user=PRODUCER, group=SPOOL_GID, extra_groups=[SPOOL_GID],
                           capture_output=True, text=True, timeout=30 * hdtest.SLOW)
        check(p.returncode == 1 and "refused" in p.stdout,
              f"the producer's cancel: exit {p.returncode} {p.stdout} {p.stderr}")
        check(os.path.exists(boot2) and env.item(hid2)["state"] == "claimed",
              "a refused request withdraws nothing")
        check(os.listdir(env.path("cancel")) == [], f"left in cancel/: {os.listdir(env.path('cancel'))}")
        # The daemon renames the request to its answer, then logs it
        # (cancel.c answer_file()): the line may come a moment after the
        # producer's handoffctl read the answer and exited.
        said = hdtest.wait_for(lambda: [ln for ln in d.logs().splitlines()
                                        if "refused" in ln and hid2 in ln],
                               what=lambda: f"the daemon's line for the refused request:\n"
                                            f"{d.logs()[-2000:]}")
        check("bad_mac" in said[0], f"the daemon says why: {said}")
        print(f"ok: a group member without bob's key: refused ({said[0].split(': ', 1)[1]})")

        hid3 = send(hub, "the producer says this cannot be taken back")
        boot3 = os.path.join(env.state["alice"], "handoffs", hid3 + ".json")
        hdtest.wait_for(lambda: os.path.exists(boot3), what=f"{hid3} delivered")
        forger = cancelkit.forger(env, PRODUCER, SPOOL_GID, "not_cancelable")
        lock = cancelkit.hold_lock(env, hid3)
        got = {}
        t = threading.Thread(target=lambda: got.update(rpc(hub, "CancelTask", {"id": hid3})))
        try:
            t.start()
            line = forger.stdout.readline().split()
            check(line[:1] == ["forged"], f"the forger: {line}")
        finally:
            os.close(lock)
            t.join(30 * hdtest.SLOW)
            forger.kill()
            forger.wait()
        check(got.get("status", {}).get("state") == "TASK_STATE_CANCELED",
              f"CancelTask with a forged answer there: {got}")
        hdtest.wait_for(lambda: env.item(hid3)["state"] == "archive", what=f"{hid3} archived")
        check(os.listdir(env.path("cancel")) == [f".not_cancelable.{line[1]}"],
              f"left in cancel/: {os.listdir(env.path('cancel'))}")
        print("ok: a forged not_cancelable beside the hub's request: CANCELED all the same")
        check(hub.proc.stop() == 0, "the hub stops with 0")
        check(d.stop() == 0, "the daemon stops with 0")
    hdtest.finish("test_a2a_cancel_users")


if __name__ == "__main__":
    hdtest.run(main)
