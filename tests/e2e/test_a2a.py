"""handoff-hubd as an A2A 1.0 server (issue 35), against the real hub and
the real daemon, over TLS.  Two clients: a stdlib JSON-RPC client here
(every error path, byte for byte what the specification names), and the
official A2A JavaScript SDK (@a2a-js/sdk, pinned in tests/a2a) driven by
tests/a2a/client.mjs.

- the card of alice: name, the configured description and skills,
  protocol 1.0 over JSONRPC at /a2a/alice, bearer security, streaming
  true with the generation extension, push notifications false; no card for an agent not served (404);
- SendMessage from bob's token (a text part and a data part): a Task
  SUBMITTED whose id is the handoff's; alice's bootstrap carries payload
  a2a/1 with the parts, from_agent bob, signed with the key the daemon
  checks bob with; GetTask SUBMITTED, then COMPLETED once alice consumed
  it; the same messageId again: the same task, delivered once;
- a message to an agent that is not here: REJECTED, unknown_agent; to
  bob himself: REJECTED, self_handoff; not consumed within the resume
  window: CANCELED, expired;
- ListTasks for bob: his tasks, newest first, bounded by pageSize;
- an agent that reports its result ([agent erin] completes = yes): its
  task is WORKING from the consume until `handoffctl complete`, then
  COMPLETED with the result (a data part) as the task's artifact, or
  FAILED with the agent's reason and its text as the artifact; the hub's
  GET /api/v1/handoffs/{id} has the result too;
- refused: no token, a token not ours (HTTP 401 with a JSON-RPC error),
  GetTask with another agent's token (TaskNotFoundError -32001), a
  sender with require = sig (the hub holds no key that signs for it:
  -32004);
- errors as A2A names them: no A2A-Version (0.3) -32009, parse error
  -32700, a batch -32600, unknown method -32601, no messageId -32602,
  inline file bytes -32005, SubscribeToTask of an ended task -32004,
  push -32003, CancelTask of
  a consumed task -32002 (test_a2a_cancel.py: the rest of CancelTask), a
  task continued by taskId -32004.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

A2A_DIR = os.path.join(hdtest.SRC, "tests", "a2a")


class Rpc:
    def __init__(self, hub, name):
        self.hub = hub
        self.name = name
        self.n = 0

    def call(self, method, params, agent="bob", token=None, version="1.0", raw=None):
        """(HTTP status, the JSON-RPC response)."""
        self.n += 1
        body = raw if raw is not None else json.dumps(
            {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode()
        headers = {"Content-Type": "application/json"}
        tok = token if token is not None else self.hub.tokens.get(agent)
        if tok:
            headers["Authorization"] = f"Bearer {tok}"
        if version is not None:
            headers["A2A-Version"] = version
        return self.hub.request("POST", f"/a2a/{self.name}", body, headers)

    def result(self, method, params, **kw):
        st, ans = self.call(method, params, **kw)
        check(st == 200 and isinstance(ans, dict) and "result" in ans,
              f"{method}: want a result, got {st} {ans}")
        return ans["result"]

    def error(self, what, code, method, params, status=200, **kw):
        st, ans = self.call(method, params, **kw)
        got = ans.get("error", {}).get("code") if isinstance(ans, dict) else None
        check(st == status and got == code and ans.get("jsonrpc") == "2.0",
              f"{what}: want HTTP {status} error {code}, got {st} {ans}")
        print(f"ok: {what}: {status} {code} {ans['error']['message']!r}")
        return ans


def message(text, data=None, mid=None, ctx=None, **extra):
    parts = [{"text": text}]
    if data is not None:
        parts.append({"data": data, "mediaType": "application/json"})
    m = {"messageId": mid or str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
    if ctx:
        m["contextId"] = ctx
    m.update(extra)
    return {"message": m, "configuration": {"returnImmediately": True}}


def state(task):
    return task["status"]["state"]


def carol_sig(env):
    """carol sends with Ed25519 only (require = sig)."""
    path = os.path.join(env.dir, "carol.key")
    env.ctl("keygen", "--ed25519", "-o", path, check_rc=0)
    return (f"[agent carol]\nstate_dir = {env.dir}/agents/carol\n"
            f"pubkeys = {path[:-4]}.pub\nrequire = sig\n")


def consume(env, conf, hid, agent="alice"):
    # the SDK's SendMessage answers at the drop, before the claim
    hdtest.wait_for(lambda: hid + ".json" in env.bootstraps(agent), what=f"{hid} delivered")
    env.ctl("consume", "-c", conf, "--agent", agent, hid, check_rc=0)


def complete(env, conf, hid, *args, agent="erin"):
    env.ctl("complete", "-c", conf, "--agent", agent, hid, *args, check_rc=0)


def results(env, hub, conf):
    """erin reports results (completes = yes): WORKING until it does."""
    rpc = Rpc(hub, "erin")
    task = rpc.result("SendMessage", message("translate the call", {"call": 43}))["task"]
    hid = task["id"]
    check(state(task) == "TASK_STATE_SUBMITTED", f"to erin: {task}")
    hdtest.wait_for(lambda: env.bootstraps("erin") == [hid + ".json"], what="delivered to erin")
    consume(env, conf, hid, agent="erin")
    hdtest.wait_for(lambda: state(rpc.result("GetTask", {"id": hid})) == "TASK_STATE_WORKING",
                    what="WORKING")
    t = rpc.result("GetTask", {"id": hid})
    check(t["metadata"]["handoffStatus"] == "consumed" and "artifacts" not in t, f"working: {t}")
    by_state = rpc.result("ListTasks", {"status": "TASK_STATE_WORKING"})
    check([x["id"] for x in by_state["tasks"]] == [hid], f"ListTasks WORKING: {by_state}")
    print("ok: completes = yes: consumed is WORKING, not COMPLETED")
    data = os.path.join(env.dir, "translation.json")
    with open(data, "w") as f:
        json.dump({"lang": "fr", "words": 42}, f)
    complete(env, conf, hid, "--data", data)
    t = rpc.result("GetTask", {"id": hid})
    check(state(t) == "TASK_STATE_COMPLETED" and t["artifacts"] == [{
        "artifactId": f"{hid}-result", "name": "result",
        "parts": [{"data": {"lang": "fr", "words": 42}, "mediaType": "application/json"}],
        "metadata": t["artifacts"][0]["metadata"]}]
        and t["artifacts"][0]["metadata"]["agent"] == "erin", f"completed: {t}")
    st, item = hub.get(f"/api/v1/handoffs/{hid}", "bob")
    check(st == 200 and item["result"]["data"] == {"lang": "fr", "words": 42}, f"hub GET: {st} {item}")
    print("ok: then COMPLETED with the result as its artifact (a data part); the hub's GET has it")

    task = rpc.result("SendMessage", message("translate another"))["task"]
    hid2 = task["id"]
    hdtest.wait_for(lambda: env.bootstraps("erin") == [hid2 + ".json"], what="delivered to erin")
    consume(env, conf, hid2, agent="erin")
    complete(env, conf, hid2, "--failed", "no French speaker today", "--text", "half done")
    t = rpc.result("GetTask", {"id": hid2})
    check(state(t) == "TASK_STATE_FAILED"
          and t["status"]["message"]["parts"][0]["text"] == "failed: no French speaker today"
          and t["artifacts"][0]["parts"] == [{"text": "half done"}], f"failed: {t}")
    print("ok: a result that says failed: FAILED with the agent's reason, its text the artifact")


def stdlib_client(env, hub, conf):
    rpc = Rpc(hub, "alice")

    # the card
    st, card = hub.get("/a2a/alice/.well-known/agent-card.json")
    check(st == 200, f"card: {st} {card}")
    iface = card["supportedInterfaces"][0]
    check(card["name"] == "alice" and card["description"] == "Takes over a call"
          and iface == {"url": f"https://127.0.0.1:{hub.port}/a2a/alice",
                        "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
          f"card: {card}")
    caps = card["capabilities"]
    check({k: caps.get(k) for k in ("streaming", "pushNotifications", "extendedAgentCard")}
          == {"streaming": True, "pushNotifications": False, "extendedAgentCard": False}
          and [e["uri"] for e in caps["extensions"]] == ["urn:handoffd:a2a:generation:1"],
          f"capabilities: {card}")
    check(card["securitySchemes"] == {"bearer": {"httpAuthSecurityScheme": {
        "scheme": "Bearer", "description": card["securitySchemes"]["bearer"]
        ["httpAuthSecurityScheme"]["description"]}}}, f"security: {card}")
    check([s["id"] for s in card["skills"]] == ["summarize", "translate"]
          and card["skills"][0]["description"] == "Summarizes a call", f"skills: {card}")
    print("ok: the card of alice")
    st, _ = hub.get("/a2a/ghost/.well-known/agent-card.json")
    check(st == 404, f"card of ghost: {st}")
    print("ok: no card for an agent not served")

    # SendMessage -> a handoff, delivered
    mid = str(uuid.uuid4())
    task = rpc.result("SendMessage", message("please summarize", {"call": 42}, mid=mid,
                                             ctx="ctx-1"))["task"]
    hid = task["id"]
    check(state(task) == "TASK_STATE_SUBMITTED" and task["contextId"] == "ctx-1"
          and hid.startswith("a2a-"), f"task: {task}")
    hdtest.wait_for(lambda: env.bootstraps("alice") == [hid + ".json"], what="delivered")
    boot = json.load(open(os.path.join(env.state["alice"], "handoffs", hid + ".json")))
    check(boot.get("payload_type") == "a2a/1" and boot.get("from_agent") == "bob"
          and boot["payload"]["parts"] == [{"text": "please summarize"},
                                           {"data": {"call": 42}, "mediaType": "application/json"}]
          and boot["payload"]["messageId"] == mid, f"bootstrap: {boot}")
    check("please summarize" in boot["resume_context"], f"resume_context: {boot['resume_context']}")
    print(f"ok: SendMessage is handoff {hid}, delivered to alice with payload a2a/1")
    t = rpc.result("GetTask", {"id": hid})
    check(state(t) == "TASK_STATE_SUBMITTED", f"GetTask before consume: {t}")
    consume(env, conf, hid)
    hdtest.wait_for(lambda: state(rpc.result("GetTask", {"id": hid})) == "TASK_STATE_COMPLETED",
                    what="COMPLETED")
    print("ok: GetTask SUBMITTED, then COMPLETED once consumed")
    again = rpc.result("SendMessage", message("please summarize", {"call": 42}, mid=mid,
                                              ctx="ctx-1"))["task"]
    check(again["id"] == hid and state(again) == "TASK_STATE_COMPLETED", f"again: {again}")
    archived = [n for n in env.items("archive") if hid in n]
    check(len(archived) == 1 and env.bootstraps("alice") == [], f"once: {archived}")
    print("ok: the same messageId: the same task, delivered once")

    # REJECTED, CANCELED
    ghost = Rpc(hub, "ghost").result("SendMessage", message("hello"))["task"]
    check(state(ghost) == "TASK_STATE_REJECTED" and ghost["metadata"]["reason"] == "unknown_agent"
          and "unknown_agent" in ghost["status"]["message"]["parts"][0]["text"], f"ghost: {ghost}")
    print("ok: to an agent not here: REJECTED unknown_agent")
    self_t = Rpc(hub, "bob").result("SendMessage", message("hello"))["task"]
    check(state(self_t) == "TASK_STATE_REJECTED" and self_t["metadata"]["reason"] == "self_handoff",
          f"self: {self_t}")
    print("ok: to the sender itself: REJECTED self_handoff")
    late = rpc.result("SendMessage", message("nobody takes this"))["task"]
    hdtest.wait_for(lambda: state(rpc.result("GetTask", {"id": late["id"]})) == "TASK_STATE_CANCELED",
                    timeout=30 * hdtest.SLOW, what="CANCELED (expired)")
    t = rpc.result("GetTask", {"id": late["id"]})
    check(t["metadata"]["reason"] and "expired" in t["status"]["message"]["parts"][0]["text"],
          f"expired: {t}")
    print(f"ok: not consumed in the resume window: CANCELED ({t['status']['message']['parts'][0]['text']})")

    # ListTasks
    lst = rpc.result("ListTasks", {})
    ids = [x["id"] for x in lst["tasks"]]
    check(ids == [late["id"], hid] and lst["totalSize"] == 2 and lst["nextPageToken"] == "",
          f"ListTasks: {lst}")
    page = rpc.result("ListTasks", {"pageSize": 1})
    check([x["id"] for x in page["tasks"]] == [late["id"]] and page["nextPageToken"] == "1",
          f"page 1: {page}")
    page = rpc.result("ListTasks", {"pageSize": 1, "pageToken": "1"})
    check([x["id"] for x in page["tasks"]] == [hid] and page["nextPageToken"] == "", f"page 2: {page}")
    check(rpc.result("ListTasks", {"contextId": "ctx-1"})["totalSize"] == 1, "ListTasks by context")
    by_state = rpc.result("ListTasks", {"status": "TASK_STATE_CANCELED"})
    check([x["id"] for x in by_state["tasks"]] == [late["id"]], f"ListTasks by state: {by_state}")
    rpc.error("ListTasks of a state not A2A's", -32602, "ListTasks", {"status": "TASK_STATE_DONE"})
    check(rpc.result("ListTasks", {}, agent="alice").get("tasks", []) == [], "alice sent none")
    print("ok: ListTasks: bob's, newest first, paged")

    # refusals
    rpc.error("no token", -32600, "GetTask", {"id": hid}, status=401, agent=None)
    rpc.error("a token not ours", -32600, "GetTask", {"id": hid}, status=401,
              token="not-a-token-of-this-hub")
    rpc.error("GetTask with another agent's token", -32001, "GetTask", {"id": hid}, agent="alice")
    rpc.error("a sender with require = sig", -32004, "SendMessage", message("hi"), agent="carol")
    # errors
    rpc.error("no A2A-Version (0.3)", -32009, "GetTask", {"id": hid}, version=None)
    rpc.error("A2A-Version 0.3", -32009, "GetTask", {"id": hid}, version="0.3")
    rpc.error("parse error", -32700, None, None, raw=b'{"jsonrpc": "2.0", "id": 1,')
    rpc.error("a batch", -32600, None, None, raw=b'[{"jsonrpc": "2.0", "id": 1}]')
    rpc.error("unknown method", -32601, "message/send", message("x"))
    rpc.error("no messageId", -32602, "SendMessage", {"message": {"parts": [{"text": "x"}]}})
    rpc.error("no parts", -32602, "SendMessage", {"message": {"messageId": "m-1"}})
    rpc.error("a part of two kinds", -32602, "SendMessage",
              {"message": {"messageId": "m-2", "parts": [{"text": "x", "url": "https://a/b"}]}})
    rpc.error("inline file bytes", -32005, "SendMessage",
              {"message": {"messageId": "m-3", "parts": [
                  {"raw": base64.b64encode(b"x").decode(), "mediaType": "text/plain"}]}})
    rpc.error("a task continued", -32004, "SendMessage", message("x", taskId=hid))
    rpc.error("3.1.6: subscribe to a terminal task", -32004, "SubscribeToTask", {"id": hid})
    rpc.error("push", -32003, "CreateTaskPushNotificationConfig", {"taskId": hid})
    rpc.error("CancelTask of a consumed task", -32002, "CancelTask", {"id": hid})
    rpc.error("CancelTask of no task", -32001, "CancelTask", {"id": "a2a-nothing"})
    rpc.error("GetTask of no task", -32001, "GetTask", {"id": "a2a-nothing"})
    # a file by URI is carried
    t = rpc.result("SendMessage", {"message": {"messageId": "m-url", "role": "ROLE_USER", "parts": [
        {"url": "https://example.org/a.pdf", "filename": "a.pdf", "mediaType": "application/pdf"}]},
        "configuration": {"returnImmediately": True}})
    check(state(t["task"]) == "TASK_STATE_SUBMITTED", f"url part: {t}")
    print("ok: a file by URI")
    return hid


def sdk_client(env, hub, conf):
    """The official SDK: tests/a2a/client.mjs prints one JSON line per step."""
    sdk = os.path.join(A2A_DIR, "node_modules", "@a2a-js", "sdk", "package.json")
    check(shutil.which("node") and os.path.exists(sdk),
          "no node or no tests/a2a/node_modules: run `make a2a-deps` (npm ci); "
          "HD_A2A_SDK=0 runs the stdlib half alone")
    pinned = json.load(open(os.path.join(A2A_DIR, "package.json")))["dependencies"]["@a2a-js/sdk"]
    have = json.load(open(sdk))["version"]
    check(have == pinned, f"installed SDK {have} is the pinned {pinned} (make a2a-deps)")
    args = {"base": f"https://127.0.0.1:{hub.port}", "agent": "alice", "worker": "erin",
            "token": hub.tokens["bob"], "other": hub.tokens["alice"]}
    p = subprocess.Popen(["node", os.path.join(A2A_DIR, "client.mjs"), json.dumps(args)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, NODE_EXTRA_CA_CERTS=hub.cert))
    try:
        def step():
            line = p.stdout.readline()
            check(line, f"client.mjs ended early (exit {p.poll()})")
            return json.loads(line)
        while True:
            ev = step()
            print(f"sdk: {json.dumps(ev)[:300]}")
            check(ev.get("ok", True), f"sdk step failed: {ev}")
            if ev.get("consume"):
                consume(env, conf, ev["consume"], agent=ev.get("agent", "alice"))
                p.stdin.write("consumed\n")
                p.stdin.flush()
            if ev.get("complete"):
                complete(env, conf, ev["complete"], "--text", ev["text"], agent=ev["agent"])
                p.stdin.write("completed\n")
                p.stdin.flush()
            if ev.get("done"):
                break
        check(p.wait(timeout=60 * hdtest.SLOW) == 0, f"client.mjs exit {p.returncode}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def main():
    with hdtest.Env(agents=["alice", "bob", "erin"]) as env:
        env.extra = ("[agent erin]\ncompletes = yes\n"
                     "[agent alice]\ndescription = Takes over a call\n"
                     "skill = summarize: Summarizes a call\nskill = translate: Translates a call\n"
                     + carol_sig(env))
        hub = hubkit.Hub(env, tokens={"bob": None, "alice": None, "carol": None})
        text = open(hub.conf).read().replace("rescan_interval = 5\n",
                                             "rescan_interval = 5\nresume_window = 3\n", 1)
        # [agent alice] twice: keys of one section may come in two parts
        with open(hub.conf, "w") as f:
            f.write(text)
        env.start(conf=hub.conf)
        hub.start()
        stdlib_client(env, hub, hub.conf)
        results(env, hub, hub.conf)
        if os.environ.get("HD_A2A_SDK", "1") != "0":
            sdk_client(env, hub, hub.conf)
    hdtest.finish("test_a2a")


if __name__ == "__main__":
    hdtest.run(main)
