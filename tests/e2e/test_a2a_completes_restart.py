"""The setting of [agent] completes at the consume decides an A2A task's
state for good (issue 47.4), with the real daemon and the real hub,
restarted as an operator does after changing the setting:

- alice consumes task 1 with completes = no: COMPLETED; completes becomes
  yes (the daemon reloaded, the hub restarted): task 1 stays COMPLETED
  (before: WORKING again, waiting for a result that never comes);
- task 2 consumed with completes = yes: WORKING; completes back to no and
  the hub restarted: task 2 stays WORKING until alice reports its result,
  then COMPLETED with it;
- the daemon records the setting in the item's outcome (archive/*.outcome
  "completes"), which `handoffctl show --json` carries too.
"""

import glob
import json
import os
import signal
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402


def rpc(hub, method, params):
    st, ans = hub.request("POST", "/a2a/alice", json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode(), {
            "Content-Type": "application/json", "A2A-Version": "1.0",
            "Authorization": f"Bearer {hub.tokens['bob']}"})
    check(st == 200 and "result" in ans, f"{method}: {st} {ans}")
    return ans["result"]


def state(hub, hid):
    return rpc(hub, "GetTask", {"id": hid})["status"]["state"]


def send(env, hub, conf, text):
    hid = rpc(hub, "SendMessage", {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                                               "parts": [{"text": text}]},
                                    "configuration": {"returnImmediately": True}})["task"]["id"]
    hdtest.wait_for(lambda: hid + ".json" in env.bootstraps("alice"), what=f"{hid} delivered")
    env.ctl("consume", "-c", conf, "--agent", "alice", hid, check_rc=0)
    hdtest.wait_for(lambda: glob.glob(os.path.join(env.spool, "archive", f"*{hid}*.outcome")),
                    what=f"{hid} archived")
    return hid


def outcome(env, hid):
    path, = glob.glob(os.path.join(env.spool, "archive", f"*{hid}*.outcome"))
    with open(path) as f:
        return json.load(f)


def set_completes(env, d, hub, conf, value):
    """completes = value in the file; the daemon reloads it, the hub is
    restarted (it reads [agent] only at start)."""
    text = open(conf).read()
    old = "completes = no" if value == "yes" else "completes = yes"
    check(old in text, f"{old} in the config")
    with open(conf, "w") as f:
        f.write(text.replace(old, f"completes = {value}"))
    d.messages.clear()
    d.send(signal.SIGHUP)
    d.wait_message("READY=1")
    hdtest.wait_for(lambda: "Reloaded" in d.logs(), what="the daemon reloaded")
    check(hub.proc.stop(signal.SIGTERM) == 0, "the hub stopped")
    hub.start()


def main():
    with hdtest.Env(agents=["alice", "bob"]) as env:
        env.extra = "[agent alice]\ncompletes = no\n"
        hub = hubkit.Hub(env, tokens={"bob": None})
        conf = hub.conf
        d = env.start(conf=conf)
        hub.start()

        first = send(env, hub, conf, "the first, ended at its consume")
        hdtest.wait_for(lambda: state(hub, first) == "TASK_STATE_COMPLETED", what="COMPLETED")
        check(outcome(env, first).get("completes") is False, f"outcome: {outcome(env, first)}")
        show = json.loads(env.ctl("show", "-c", conf, first, "--json", check_rc=0).stdout)
        check(show.get("completes") is False, f"handoffctl show --json: {show}")
        print("ok: consumed with completes = no: COMPLETED, the outcome says completes false")

        set_completes(env, d, hub, conf, "yes")
        check(state(hub, first) == "TASK_STATE_COMPLETED",
              f"after completes = yes and a restart: {rpc(hub, 'GetTask', {'id': first})}")
        print("ok: completes = yes, the hub restarted: the first task stays COMPLETED")

        second = send(env, hub, conf, "the second, to report on")
        check(outcome(env, second).get("completes") is True, f"outcome: {outcome(env, second)}")
        hdtest.wait_for(lambda: state(hub, second) == "TASK_STATE_WORKING", what="WORKING")
        print("ok: consumed with completes = yes: WORKING")

        set_completes(env, d, hub, conf, "no")
        check(state(hub, second) == "TASK_STATE_WORKING",
              f"after completes = no and a restart: {rpc(hub, 'GetTask', {'id': second})}")
        check(state(hub, first) == "TASK_STATE_COMPLETED", "the first still COMPLETED")
        env.ctl("complete", "-c", conf, "--agent", "alice", second, "--text", "reported",
                check_rc=0)
        t = rpc(hub, "GetTask", {"id": second})
        check(t["status"]["state"] == "TASK_STATE_COMPLETED"
              and t["artifacts"][0]["parts"] == [{"text": "reported"}], f"reported: {t}")
        print("ok: completes = no, the hub restarted: the second stays WORKING until its "
              "result, then COMPLETED with it")
    hdtest.finish("test_a2a_completes_restart")


if __name__ == "__main__":
    hdtest.run(main)
