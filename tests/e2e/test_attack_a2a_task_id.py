"""A2A task ids a group member cannot take first (issue 43.4), run as
packaged: the daemon its own user, the hub its own user in the spool's
group, alice her own user, mallory a producer in the spool's group who
reads the default key (its shipped mode, 0640 in the group) and knows
bob's next messageIds (a client that numbers them).

- the id as it was (sha256 of sender, target and messageId, no secret):
  mallory drops her own handoff to alice under bob's next id before bob
  sends; it is rejected as bad_a2a_id (not the task id of its own
  document), its id not remembered; bob's SendMessage is SUBMITTED,
  alice's bootstrap holds bob's words, consumed: COMPLETED.  Before the
  change mallory's handoff was delivered under bob's id and bob's task
  REJECTED duplicate_id;
- the keyed id computed with the default key (mallory can read it): her
  handoff, from_agent mallory, under it is rejected as bad_a2a_id too,
  and bob's task succeeds;
- an a2a- id on a handoff whose payload is not a2a/1: bad_a2a_id.

Runs as root; the users and groups are throwaway ids."""

import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47480       # the spool's group ("handoff")
DAEMON = 47481          # handoffd's user
HUB = 47482             # handoff-hubd's user, primary group the spool's
ALICE = 47483           # alice's user and private group
MALLORY = 47484         # a producer, in the spool's group


def old_id(frm, to, mid):
    """The task id before issue 43.4: anyone could compute it."""
    h = hashlib.sha256(b"a2a/1\0" + frm.encode() + b"\0" + to.encode() + b"\0" + mid.encode())
    return "a2a-" + h.hexdigest()[:40]


def keyed_id(key, frm, to, mid):
    """payload_a2a_task_id(): BLAKE2b keyed with a subkey of the HMAC key."""
    sub = hashlib.blake2b(b"handoffd a2a task id 1\0" + key, digest_size=32).digest()
    h = hashlib.blake2b(frm.encode() + b"\0" + to.encode() + b"\0" + mid.encode(),
                        key=sub, digest_size=20)
    return "a2a-" + h.hexdigest()


def rpc(hub, method, params, agent="bob"):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    st, ans = hub.request("POST", "/a2a/alice", body, {
        "Content-Type": "application/json", "A2A-Version": "1.0",
        "Authorization": f"Bearer {hub.tokens[agent]}"})
    check(st == 200 and "result" in ans, f"{method}: {st} {ans}")
    return ans["result"]


def forge(env, dep, name, hid, mid, ptype="a2a/1"):
    """mallory's own handoff to alice under hid, signed with the default key."""
    payload = ({"messageId": mid, "contextId": "ctx-mallory", "role": "ROLE_USER",
                "parts": [{"text": "mallory's words, under bob's task"}]}
               if ptype == "a2a/1" else None)
    extra = {"payload_type": ptype, "payload": payload} if payload else {}
    doc = hdproto.build("mallory", "alice", env.key, handoff_id=hid, extra=extra)
    err = dep.as_user(MALLORY, [], "drop", env.path("handoff", name), hdproto.dumps(doc).decode())
    check(err is None, f"mallory could not drop {name}: {err}")
    hdtest.wait_for(lambda: os.path.exists(env.path("rejected", name + ".reason"))
                    or env.bootstraps("alice"), what=f"{name} decided")
    check(not env.bootstraps("alice"), f"mallory's handoff delivered: {env.bootstraps('alice')}")
    why = env.reason_of(name)
    check(why.get("reason") == "bad_a2a_id", f"{name}: {why}")
    print(f"ok: mallory's {name} under {hid}: rejected {why['reason']} ({why.get('detail')})")


def bob_sends(env, hub, conf, mid):
    task = rpc(hub, "SendMessage", {"message": {"messageId": mid, "role": "ROLE_USER",
                                                "parts": [{"text": f"bob's words {mid}"}]},
                                    "configuration": {"returnImmediately": True}})["task"]
    check(task["status"]["state"] == "TASK_STATE_SUBMITTED", f"bob's task: {task}")
    hid = task["id"]
    hdtest.wait_for(lambda: env.bootstraps("alice") == [hid + ".json"], what=f"{hid} delivered")
    boot = json.load(open(os.path.join(env.state["alice"], "handoffs", hid + ".json")))
    check(boot["from_agent"] == "bob" and boot["payload"]["parts"] == [{"text": f"bob's words {mid}"}],
          f"alice's bootstrap: {boot}")
    env.ctl("consume", "-c", conf, "--agent", "alice", hid, check_rc=0)
    hdtest.wait_for(lambda: rpc(hub, "GetTask", {"id": hid})["status"]["state"]
                    == "TASK_STATE_COMPLETED", what=f"{hid} COMPLETED")
    print(f"ok: bob's task {hid}: SUBMITTED, bob's words delivered, COMPLETED")
    return hid


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        hub = hubkit.Hub(env, tokens={"bob": None}, tls=False)
        hub.run_as(HUB, SPOOL_GID)
        d, conf = dep.start(text=open(hub.conf).read())
        hub.start()
        key = hdproto.load_key(env.key_path)   # 0640 in the group: mallory's to read

        forge(env, dep, "mal-1.json", old_id("bob", "alice", "bob-1"), "bob-1")
        hid = bob_sends(env, hub, conf, "bob-1")
        check(hid != old_id("bob", "alice", "bob-1"), "the task id is still the public hash")

        forge(env, dep, "mal-2.json", keyed_id(key, "bob", "alice", "bob-2"), "bob-2")
        hid2 = bob_sends(env, hub, conf, "bob-2")
        check(hid2 == keyed_id(key, "bob", "alice", "bob-2"), f"{hid2}: not the keyed id")

        forge(env, dep, "mal-3.json", "a2a-plain", None, ptype=None)
        # a notice line is written out when the daemon's loop next sleeps,
        # after the .reason it reports
        def said():
            return [ln for ln in d.logs().splitlines() if "bad_a2a_id" in ln]
        hdtest.wait_for(lambda: len(said()) >= 3, 10 * hdtest.SLOW, "the daemon's three lines")
        check(len(said()) == 3, f"the daemon's lines: {said()}")
        check(hub.proc.stop() == 0, "the hub stops with 0")
        check(d.stop() == 0, "the daemon stops with 0")
    hdtest.finish("test_attack_a2a_task_id")


if __name__ == "__main__":
    hdtest.run(main)
