"""A2A CancelTask (issue 35) against the real hub and the real daemon,
over TLS: the hub drops a cancel request signed for the token's agent into
the spool's cancel/, the daemon takes the bootstrap back by the rename a
consumer makes and archives the item as canceled.  A stdlib JSON-RPC
client here, and the official SDK (tests/a2a/cancel.mjs).

- before its agent took it: the Task CANCELED; the bootstrap gone;
  `handoffctl show` says canceled, `handoffctl wait` prints it and exits
  1; GetTask CANCELED; the daemon's counters say canceled 1; a second
  CancelTask: TaskNotCancelableError (-32002);
- after the consume: TaskNotCancelableError (-32002), the archive says
  consumed;
- another agent's token: TaskNotFoundError (-32001), as GetTask; the
  bootstrap stays;
- before its claim (the daemon stopped): the hub answers the task as it
  is (SUBMITTED, metadata.cancel "requested") once its wait is over; the
  daemon, started, claims it and archives it as canceled without ever
  publishing its bootstrap (delivered 0);
- the race: CancelTask and a consumer (handoffctl consume) at once, HD_
  CANCEL_RACES rounds (default 20): each round ends in exactly one
  outcome, and the CancelTask answer, the consumer's exit and the
  archive agree on it;
- handoffctl cancel: 0 canceled (and again: canceled already), 1 when the
  request is not the sender's (refused), 1 after the consume;
- the SDK: CANCELED, CANCELED again by GetTask, TaskNotCancelableError
  twice, TaskNotFoundError with another token, and its own race rounds.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdtest  # noqa: E402
import hubkit  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402

A2A_DIR = os.path.join(hdtest.SRC, "tests", "a2a")
RACES = int(os.environ.get("HD_CANCEL_RACES", "20"))
SDK_RACES = int(os.environ.get("HD_CANCEL_SDK_RACES", "8"))


class Rpc:
    def __init__(self, hub, name):
        self.hub, self.name, self.n = hub, name, 0

    def call(self, method, params, agent="bob", conn=None):
        self.n += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                           "params": params}).encode()
        headers = {"Content-Type": "application/json", "A2A-Version": "1.0",
                   "Authorization": f"Bearer {self.hub.tokens[agent]}"}
        return self.hub.request("POST", f"/a2a/{self.name}", body, headers, conn=conn)

    def result(self, method, params, **kw):
        st, ans = self.call(method, params, **kw)
        check(st == 200 and isinstance(ans, dict) and "result" in ans,
              f"{method}: want a result, got {st} {ans}")
        return ans["result"]

    def error(self, what, code, method, params, **kw):
        st, ans = self.call(method, params, **kw)
        got = ans.get("error", {}).get("code") if isinstance(ans, dict) else None
        check(st == 200 and got == code, f"{what}: want error {code}, got {st} {ans}")
        print(f"ok: {what}: {code} {ans['error']['message']!r}")
        return ans

    def send(self, text):
        t = self.result("SendMessage", {"message": {
            "messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]},
            "configuration": {"returnImmediately": True}})
        return t["task"]["id"]


def state(task):
    return task["status"]["state"]


def delivered(env, hid):
    hdtest.wait_for(lambda: hid + ".json" in env.bootstraps("alice"), what=f"{hid} delivered")


def outcome(env, hid):
    return env.item(hid)["outcome"] if env.item(hid)["state"] == "archive" else None


def archived(env, hid):
    """Its outcome, once archived and its taken bootstrap name gone: a
    cancel removes .cancel.NAME after the archive is synced (item_act.c
    drop_taken()), a moment after the item shows in archive/."""
    hdtest.wait_for(lambda: outcome(env, hid) and not env.item(hid)["hidden"],
                    what=lambda: f"{hid} archived, no name of its bootstrap left: {env.item(hid)}")
    return outcome(env, hid)


def consume(env, conf, hid):
    return env.ctl("consume", "-c", conf, "--agent", "alice", hid)


def stdlib_client(env, hub, conf, d):
    rpc = Rpc(hub, "alice")

    # before the consume: CANCELED, the bootstrap gone
    hid = rpc.send("take this back")
    delivered(env, hid)
    t = rpc.result("CancelTask", {"id": hid})
    check(t["id"] == hid and state(t) == "TASK_STATE_CANCELED"
          and t["metadata"]["handoffStatus"] == "canceled", f"CancelTask: {t}")
    check(hid + ".json" not in env.bootstraps("alice"), "the bootstrap is gone")
    check(archived(env, hid) == "canceled", f"archived as {outcome(env, hid)}")
    show = env.ctl("show", "-c", conf, hid, check_rc=0).stdout
    check(any(ln.split() == ["status", "canceled"] for ln in show.splitlines())
          and any(ln.split() == ["outcome", "canceled"] for ln in show.splitlines()),
          f"handoffctl show: {show}")
    w = env.ctl("wait", "-c", conf, hid, "--timeout", "5")
    check(w.returncode == 1 and w.stdout.strip() == f"{hid} canceled",
          f"handoffctl wait: {w.returncode} {w.stdout!r} {w.stderr!r}")
    w = env.ctl("wait", "-c", conf, hid, "--until", "claimed", "--timeout", "5")
    check(w.returncode == 1, f"wait --until claimed of a canceled one: {w.returncode}")
    check(state(rpc.result("GetTask", {"id": hid})) == "TASK_STATE_CANCELED", "GetTask: CANCELED")
    c = d.status()["counters"]
    check(c["canceled"] == 1, f"counters: {c}")
    print(f"ok: CancelTask before the consume: CANCELED, bootstrap gone, show and wait "
          f"(exit 1) say canceled, counters canceled {c['canceled']}")
    rpc.error("CancelTask again", -32002, "CancelTask", {"id": hid})

    # another agent's token: not found, nothing withdrawn
    hid2 = rpc.send("only bob may take this back")
    delivered(env, hid2)
    rpc.error("CancelTask with another agent's token", -32001, "CancelTask", {"id": hid2},
              agent="alice")
    check(hid2 + ".json" in env.bootstraps("alice") and env.item(hid2)["state"] == "claimed",
          "another token's CancelTask withdraws nothing")

    # after the consume: not cancelable
    check(consume(env, conf, hid2).returncode == 0, "consume")
    rpc.error("CancelTask after the consume", -32002, "CancelTask", {"id": hid2})
    check(archived(env, hid2) == "consumed", f"archived as {outcome(env, hid2)}")
    print("ok: after the consume: TaskNotCancelableError, archived as consumed")

    # before its claim: the request waits for it, and it is never published
    d.stop()
    hid3 = rpc.send("cancel me before anyone claims me")
    check(env.item(hid3)["state"] == "handoff", f"waits in handoff/: {env.item(hid3)}")
    t = rpc.result("CancelTask", {"id": hid3})
    check(state(t) == "TASK_STATE_SUBMITTED" and t["metadata"].get("cancel") == "requested",
          f"no daemon: the task as it is: {t}")
    req = os.listdir(env.path("cancel"))
    check(len(req) == 1 and req[0].startswith(hid3 + "."), f"the request stands: {req}")
    d = env.start(conf=conf)
    check(archived(env, hid3) == "canceled", f"archived as {outcome(env, hid3)}")
    c = d.status()["counters"]
    check(c["delivered"] == 0 and c["canceled"] == 1 and c["claimed"] == 1,
          f"claimed and canceled, never published: {c}")
    check(state(rpc.result("GetTask", {"id": hid3})) == "TASK_STATE_CANCELED", "GetTask: CANCELED")
    hdtest.wait_for(lambda: os.listdir(env.path("cancel")) == [f".canceled.{req[0]}"],
                    what="the request answered canceled (the daemon removes an answer "
                    "nobody took in time)")
    print(f"ok: before its claim: the hub answered SUBMITTED (cancel requested) after its wait; "
          f"the daemon, started, archived it canceled, never published (counters {c})")
    return d


def race(env, hub, conf, rounds):
    """CancelTask and handoffctl consume at once: one winner a round."""
    rpc = Rpc(hub, "alice")
    conn = hub.connect()
    won = {"canceled": 0, "consumed": 0}
    rnd = random.Random(os.getpid())
    for i in range(rounds):
        hid = rpc.send(f"race {i}")
        delivered(env, hid)
        gate = threading.Barrier(2)
        res = {}
        # each side first now and then: a CancelTask (HTTP, the hub's look
        # at the spool, a synced request, the daemon) takes longer than
        # handoffctl consume's start, so the consumer waits a little in
        # half the rounds
        late = rnd.random() * 0.03 if rnd.random() < 0.5 else 0

        def take():
            gate.wait()
            threading.Event().wait(late)
            res["consume"] = consume(env, conf, hid).returncode

        th = threading.Thread(target=take)
        th.start()
        gate.wait()
        st, ans = rpc.call("CancelTask", {"id": hid}, conn=conn)
        th.join()
        canceled = st == 200 and "result" in ans and state(ans["result"]) == "TASK_STATE_CANCELED"
        refused = st == 200 and ans.get("error", {}).get("code") == -32002
        oc = archived(env, hid)
        check(canceled != refused, f"round {i}: CancelTask {st} {ans}")
        check((canceled and res["consume"] != 0 and oc == "canceled") or
              (refused and res["consume"] == 0 and oc == "consumed"),
              f"round {i}: CancelTask {'CANCELED' if canceled else '-32002'}, consume exit "
              f"{res['consume']}, archived {oc}")
        won[oc] += 1
    conn.close()
    v = invariant.check(env.spool, env.state, [], settled=True)
    check(not v, f"invariant: {v}")
    print(f"ok: {rounds} races of CancelTask against a consume: one outcome each "
          f"(canceled {won['canceled']}, consumed {won['consumed']})")


def ctl_cancel(env, conf):
    def submit(hid):
        env.ctl("submit", "-c", conf, "--from", "bob", "--to", "alice", "--id", hid, check_rc=0)
        delivered(env, hid)

    submit("ctl-1")
    p = env.ctl("cancel", "-c", conf, "--from", "bob", "ctl-1")
    check(p.returncode == 0 and p.stdout.strip() == "ctl-1 canceled", f"cancel: {p}")
    check(archived(env, "ctl-1") == "canceled" and "ctl-1.json" not in env.bootstraps("alice"),
          "ctl-1 canceled")
    p = env.ctl("cancel", "-c", conf, "--from", "bob", "ctl-1", "--json")
    j = json.loads(p.stdout)
    check(p.returncode == 0 and j == {"handoff_id": "ctl-1", "cancel": "not_cancelable",
                                      "status": "canceled"}, f"cancel again: {p}")
    submit("ctl-2")
    p = env.ctl("cancel", "-c", conf, "--from", "alice", "ctl-2")
    check(p.returncode == 1 and "refused" in p.stdout, f"cancel by another agent: {p}")
    check("ctl-2.json" in env.bootstraps("alice"), "a refused request withdraws nothing")
    check(consume(env, conf, "ctl-2").returncode == 0, "consume ctl-2")
    p = env.ctl("cancel", "-c", conf, "--from", "bob", "ctl-2")
    check(p.returncode == 1 and p.stdout.strip() in ("ctl-2 not canceled: consumed",
                                                     "ctl-2 not canceled: claimed"),
          f"cancel after the consume: {p}")
    answers = [n for n in os.listdir(env.path("cancel")) if "ctl-" in n]
    check(answers == [], f"the answers were taken by their requesters: {answers}")
    print("ok: handoffctl cancel: 0 canceled (again: canceled already), 1 refused (another "
          "agent), 1 after the consume")


def sdk_client(env, hub, conf):
    sdk = os.path.join(A2A_DIR, "node_modules", "@a2a-js", "sdk", "package.json")
    check(shutil.which("node") and os.path.exists(sdk),
          "no node or no tests/a2a/node_modules: run `make a2a-deps` (npm ci); "
          "HD_A2A_SDK=0 runs the stdlib half alone")
    args = {"base": f"https://127.0.0.1:{hub.port}", "agent": "alice",
            "token": hub.tokens["bob"], "other": hub.tokens["alice"], "races": SDK_RACES}
    p = subprocess.Popen(["node", os.path.join(A2A_DIR, "cancel.mjs"), json.dumps(args)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, NODE_EXTRA_CA_CERTS=hub.cert))
    racer = None
    won = {"canceled": 0, "not_cancelable": 0}
    try:
        def step():
            line = p.stdout.readline()
            check(line, f"cancel.mjs ended early (exit {p.poll()})")
            return json.loads(line)

        def reply():
            p.stdin.write("go\n")
            p.stdin.flush()

        while True:
            ev = step()
            print(f"sdk: {json.dumps(ev)[:300]}")
            check(ev.get("ok", True), f"sdk step failed: {ev}")
            if ev.get("delivered"):
                delivered(env, ev["delivered"])
                reply()
            if ev.get("canceled"):
                hid = ev["canceled"]
                check(hid + ".json" not in env.bootstraps("alice")
                      and archived(env, hid) == "canceled", f"sdk: {hid} canceled")
                reply()
            if ev.get("consume"):
                check(consume(env, conf, ev["consume"]).returncode == 0, "consume")
                reply()
            if ev.get("race"):
                res = {}
                hid = ev["race"]
                racer = threading.Thread(
                    target=lambda: res.update(rc=consume(env, conf, hid).returncode))
                racer.start()
            if ev.get("result"):
                racer.join()
                oc = archived(env, ev["id"])
                check((ev["result"] == "canceled" and res["rc"] != 0 and oc == "canceled") or
                      (ev["result"] == "not_cancelable" and res["rc"] == 0 and oc == "consumed"),
                      f"sdk race {ev['id']}: {ev['result']}, consume exit {res['rc']}, "
                      f"archived {oc}")
                won[ev["result"]] += 1
                reply()
            if ev.get("done"):
                break
        check(p.wait(timeout=60 * hdtest.SLOW) == 0, f"cancel.mjs exit {p.returncode}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    print(f"ok: the SDK: CancelTask CANCELED, TaskNotCancelableError, TaskNotFoundError; "
          f"{SDK_RACES} races one outcome each ({won})")


def main():
    with hdtest.Env(agents=["alice", "bob"]) as env:
        hub = hubkit.Hub(env, tokens={"bob": None, "alice": None})
        d = env.start(conf=hub.conf)
        hub.start()
        d = stdlib_client(env, hub, hub.conf, d)
        race(env, hub, hub.conf, RACES)
        ctl_cancel(env, hub.conf)
        if os.environ.get("HD_A2A_SDK", "1") != "0":
            sdk_client(env, hub, hub.conf)
        c = d.status()["counters"]
        check(c["errors"] == 0, f"daemon errors: {c}")
    hdtest.finish("test_a2a_cancel")


if __name__ == "__main__":
    hdtest.run(main)
