"""handoff-hubd's A2A server against what A2A 1.0 requires and what a
plain client of the official SDK sends (issues 45 and 47), with the real
hub and the real daemon over TLS.  A stdlib JSON-RPC client here, and
tests/a2a/spec.mjs (@a2a-js/sdk, pinned) for what the SDK does.  The
specification quoted is A2A 1.0 (a2aproject/A2A, docs/specification.md at
v1.0.1, and specification/a2a.proto).

- the card asked for relative to /a2a/NAME without its trailing slash
  (/a2a/.well-known/agent-card.json, what the SDK's createFromUrl()
  fetches then): a 404 that names /a2a/NAME/.well-known/agent-card.json
  and the slash;
- ListTasks with the SDK's unset status ("UNRECOGNIZED") or
  TASK_STATE_UNSPECIFIED: no filter;
- the root card, GET /.well-known/agent-card.json (A2A 1.0 section 8.2:
  the domain's well-known card): without [hub] default_agent one card
  whose supportedInterfaces are each agent's endpoint, in the file's
  order (the SDK's createFromUrl of the host sends to the last); with
  it (the hub restarted), that agent's own card; a default_agent not of
  this file: handoff-hubd -n and the start refuse it at its line;
- A2A 1.0's MUSTs and REQUIREDs (issue 45's "smaller departures"), each
  check naming its section: ListTasks omits artifacts unless asked
  (3.1.4), filters by statusTimestampAfter and refuses a malformed one
  (a2a.proto), refuses a negative historyLength (3.2.4; GetTask too), a
  taskId that does not exist is TaskNotFoundError (3.4.2), a message
  without role is refused (a2a.proto: REQUIRED), null members are unset
  (ProtoJSON, 5.5), GetExtendedAgentCard is UnsupportedOperationError
  where the card says extendedAgentCard: false (3.3.4), a messageId sent
  again with another message is refused naming it (3.3.1), the same
  message again is the same task.
"""

import datetime
import json
import os
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import a2akit  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

A2A_DIR = os.path.join(hdtest.SRC, "tests", "a2a")


class Rpc:
    def __init__(self, hub, name, agent="bob"):
        self.hub = hub
        self.name = name
        self.agent = agent
        self.n = 0

    def call(self, method, params, raw=None):
        self.n += 1
        body = raw if raw is not None else json.dumps(
            {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode()
        return self.hub.request("POST", f"/a2a/{self.name}", body, {
            "Content-Type": "application/json", "A2A-Version": "1.0",
            "Authorization": f"Bearer {self.hub.tokens[self.agent]}"})

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
        return ans["error"]["message"]


def message(text, mid=None, **extra):
    m = {"messageId": mid or str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    m.update(extra)
    return {"message": m, "configuration": {"returnImmediately": True}}


def state(task):
    return task["status"]["state"]


def card_misplaced(hub):
    st, ans = hub.get("/a2a/.well-known/agent-card.json")
    check(st == 404 and isinstance(ans, dict) and ans.get("reason") == "not_found"
          and ans.get("card") == "/a2a/NAME/.well-known/agent-card.json"
          and "/a2a/NAME/.well-known/agent-card.json" in ans.get("detail", "")
          and "trailing slash" in ans["detail"]
          and f"https://127.0.0.1:{hub.port}/a2a/NAME/" in ans["detail"], f"misplaced card: {st} {ans}")
    print(f"ok: GET /a2a/.well-known/agent-card.json: 404 {ans['detail']!r}")
    st, ans = hub.get("/a2a/alice/.well-known/agent-card.json")
    check(st == 200 and ans["name"] == "alice", f"the card where it says: {st} {ans}")


def list_unset(hub):
    """issue 47.12: ListTasks.status is a TaskState; its zero value,
    TASK_STATE_UNSPECIFIED, is unset (ProtoJSON), and "UNRECOGNIZED" is
    what the SDK's generated toJSON() writes for an undefined one."""
    rpc = Rpc(hub, "alice")
    t = rpc.result("SendMessage", message("to be listed"))["task"]
    for st in ("UNRECOGNIZED", "TASK_STATE_UNSPECIFIED"):
        lst = rpc.result("ListTasks", {"status": st})
        check(t["id"] in [x["id"] for x in lst["tasks"]], f"ListTasks status {st}: {lst}")
    rpc.error("ListTasks of a state A2A does not have", -32602, "ListTasks",
              {"status": "TASK_STATE_DONE"})
    print("ok: ListTasks with status UNRECOGNIZED or TASK_STATE_UNSPECIFIED: no filter")

def consume(env, conf, hid, agent):
    hdtest.wait_for(lambda: hid + ".json" in env.bootstraps(agent), what=f"{hid} delivered")
    env.ctl("consume", "-c", conf, "--agent", agent, hid, check_rc=0)


def when(ts):
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00"))


def iso(dt):
    return dt.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def list_artifacts(env, hub, conf):
    """A2A 1.0 section 3.1.4: "When `includeArtifacts` is false (the
    default), the artifacts field MUST be omitted entirely from each Task
    object in the response. The field should not be present as an empty
    array or null value. When `includeArtifacts` is true, the artifacts
    field should be included with its actual content (which may be an
    empty array if the task has no artifacts)."
    """
    rpc = Rpc(hub, "erin")
    hid = rpc.result("SendMessage", message("translate this"))["task"]["id"]
    consume(env, conf, hid, "erin")
    env.ctl("complete", "-c", conf, "--agent", "erin", hid, "--text", "c'est fait", check_rc=0)
    t = rpc.result("GetTask", {"id": hid})
    check(state(t) == "TASK_STATE_COMPLETED" and t["artifacts"][0]["parts"] == [{"text": "c'est fait"}],
          f"GetTask has the artifact: {t}")
    for params in ({}, {"includeArtifacts": False}):
        lst = rpc.result("ListTasks", params)
        check(lst["tasks"] and all("artifacts" not in x for x in lst["tasks"]),
              f"ListTasks {params}: no artifacts member: {lst}")
    lst = rpc.result("ListTasks", {"includeArtifacts": True})
    got = {x["id"]: x.get("artifacts") for x in lst["tasks"]}
    check(got.get(hid) == t["artifacts"], f"ListTasks includeArtifacts: {lst}")
    rpc.error("3.1.4: includeArtifacts not a bool", -32602, "ListTasks", {"includeArtifacts": "yes"})
    print("ok: 3.1.4: ListTasks omits artifacts by default and with includeArtifacts false, "
          "has them with true")
    return hid, t["status"]["timestamp"]


def list_after(env, hub, first, first_at):
    """a2a.proto ListTasksRequest.status_timestamp_after: "Filter tasks
    which have a status updated after the provided timestamp in ISO 8601
    format (e.g., "2023-10-27T10:00:00Z"). Only tasks with a status
    timestamp time greater than or equal to this value will be
    returned."
    """
    rpc = Rpc(hub, "erin")
    # the next task's status changes after first's (its file is made later)
    hdtest.wait_for(lambda: time.time() > when(first_at).timestamp() + 0.05,
                    what="the clock past the first task's status time")
    later = rpc.result("SendMessage", message("one more"))["task"]["id"]
    ids = lambda params: [x["id"] for x in rpc.result("ListTasks", params)["tasks"]]  # noqa: E731
    check(ids({"statusTimestampAfter": first_at}) == [later, first],
          f"after {first_at} (the first's own time: >=): {ids({'statusTimestampAfter': first_at})}")
    just_after = iso(when(first_at) + datetime.timedelta(microseconds=1))
    check(ids({"statusTimestampAfter": just_after}) == [later], f"after {just_after}")
    future = iso(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
    check(ids({"statusTimestampAfter": future}) == [], f"after {future}")
    check(ids({"statusTimestampAfter": "2000-01-01T00:00:00Z"}) == [later, first], "after 2000")
    for bad in ("yesterday", "2026-13-01T00:00:00Z", "2026-01-01T00:00:00", 1700000000):
        rpc.error(f"a2a.proto: statusTimestampAfter {bad!r} is no timestamp", -32602, "ListTasks",
                  {"statusTimestampAfter": bad})
    print("ok: ListTasks filters by statusTimestampAfter (>=) and refuses a malformed one")


def history_length(hub, hid):
    """A2A 1.0 section 3.2.4 (historyLength): "Unset/undefined: No limit
    imposed ... 0: No history should be returned ... > 0: Return at most
    this many recent messages"; its validation example (section 6.5)
    answers historyLength=-5 with "Must be non-negative integer"."""
    rpc = Rpc(hub, "erin")
    for method, params in (("GetTask", {"id": hid}), ("ListTasks", {})):
        rpc.error(f"3.2.4: {method} historyLength -1", -32602, method, {**params, "historyLength": -1})
        rpc.error(f"3.2.4: {method} historyLength 1.5", -32602, method, {**params, "historyLength": 1.5})
        for n in (0, 3, "2"):
            rpc.result(method, {**params, "historyLength": n})
    print("ok: 3.2.4: a negative historyLength refused (GetTask, ListTasks); 0, 3 and \"2\" taken")


def task_id(env, hub, done):
    """A2A 1.0 section 3.4.2: "When a client includes a `taskId` in a
    Message, it MUST reference an existing task" and "Agents MUST return
    a TaskNotFoundError if the provided `taskId` does not correspond to an
    existing task"; section 3.1.1: "Messages sent to Tasks that are in a
    terminal state ... cannot accept further messages"
    (UnsupportedOperationError)."""
    rpc = Rpc(hub, "erin")
    before = env.bootstraps("erin")
    rpc.error("3.4.2: a taskId that does not exist", -32001, "SendMessage",
              message("go on", taskId="a2a-" + "0" * 40))
    Rpc(hub, "erin", agent="alice").error("3.4.2: bob's task is none of alice's", -32001,
                                          "SendMessage", message("go on", taskId=done))
    msg = rpc.error("3.1.1: a taskId of a terminal task", -32004, "SendMessage",
                    message("go on", taskId=done))
    check("ended" in msg and "COMPLETED" in msg, f"says it ended: {msg}")
    check(env.bootstraps("erin") == before, "nothing delivered")
    print("ok: 3.4.2: an unknown taskId is TaskNotFoundError -32001; an ended one -32004")


def role_required(env, hub):
    """a2a.proto, message Message: "Role role = 4
    [(google.api.field_behavior) = REQUIRED];"
    """
    rpc = Rpc(hub, "alice")
    before = env.bootstraps("alice")
    m = message("who am I")
    del m["message"]["role"]
    rpc.error("a2a.proto Message.role REQUIRED: absent", -32602, "SendMessage", m)
    m["message"]["role"] = "ROLE_UNSPECIFIED"
    rpc.error("a2a.proto Message.role REQUIRED: ROLE_UNSPECIFIED", -32602, "SendMessage", m)
    check(env.bootstraps("alice") == before, "nothing delivered")
    print("ok: a message without role refused, nothing delivered")


def nulls(env, hub):
    """ProtoJSON (A2A 1.0 section 5.5: "Enum values MUST be represented
    according to the ProtoJSON specification"; the protobuf JSON mapping:
    "null is an accepted value for all field types and treated as the
    default value of the corresponding field type"): a null member is
    unset.  Inside a data part (a google.protobuf.Value) null is a value."""
    rpc = Rpc(hub, "alice")
    m = message("with nulls", contextId=None, taskId=None, metadata=None, referenceTaskIds=None)
    m["message"]["parts"] = [{"text": "with nulls", "mediaType": None, "filename": None},
                             {"data": {"kept": None}, "mediaType": "application/json"}]
    m["configuration"] = {"returnImmediately": True, "acceptedOutputModes": None}
    m["metadata"] = None
    t = rpc.result("SendMessage", m)["task"]
    check(state(t) == "TASK_STATE_SUBMITTED" and t["contextId"].startswith("ctx-"), f"nulls: {t}")
    hdtest.wait_for(lambda: t["id"] + ".json" in env.bootstraps("alice"), what="delivered")
    boot = json.load(open(os.path.join(env.state["alice"], "handoffs", t["id"] + ".json")))
    check(boot["payload"]["parts"] == [{"text": "with nulls"},
                                       {"data": {"kept": None}, "mediaType": "application/json"}]
          and "metadata" not in boot["payload"], f"bootstrap: {boot['payload']}")
    lst = rpc.result("ListTasks", {"status": None, "pageSize": None, "contextId": None,
                                   "pageToken": None, "historyLength": None,
                                   "includeArtifacts": None, "statusTimestampAfter": None})
    check(t["id"] in [x["id"] for x in lst["tasks"]] and lst["pageSize"] == 50, f"ListTasks nulls: {lst}")
    rpc.result("GetTask", {"id": t["id"], "historyLength": None})
    print("ok: ProtoJSON: null members are unset (SendMessage, ListTasks, GetTask); "
          "null inside a data part kept")
    return t["id"]


def extended_card(hub):
    """A2A 1.0 section 3.3.4: "If `AgentCard.capabilities.extendedAgentCard`
    is `false` or not present, attempts to call the Get Extended Agent
    Card operation MUST return UnsupportedOperationError."
    """
    st, card = hub.get("/a2a/alice/.well-known/agent-card.json")
    check(st == 200 and card["capabilities"]["extendedAgentCard"] is False, f"card: {card}")
    Rpc(hub, "alice").error("3.3.4: GetExtendedAgentCard", -32004, "GetExtendedAgentCard", {})


def message_id_again(env, hub):
    """A2A 1.0 section 3.3.1: "Agents may utilize the messageId to detect
    duplicate messages"; a messageId names one message (a2a.proto: "The
    unique identifier (e.g. UUID) of the message"): the same one again is
    the same task, another message under it is refused, naming it."""
    rpc = Rpc(hub, "alice")
    mid = "m-again-" + uuid.uuid4().hex
    t = rpc.result("SendMessage", message("the first words", mid=mid))["task"]
    again = rpc.result("SendMessage", message("the first words", mid=mid))["task"]
    check(again["id"] == t["id"], f"the same message: the same task: {again}")
    msg = rpc.error("3.3.1: the messageId with another message", -32602, "SendMessage",
                    message("other words", mid=mid))
    check(mid in msg and t["id"] in msg, f"names the messageId and its task: {msg}")
    hdtest.wait_for(lambda: t["id"] + ".json" in env.bootstraps("alice"), what="delivered")
    boot = json.load(open(os.path.join(env.state["alice"], "handoffs", t["id"] + ".json")))
    check(boot["payload"]["parts"] == [{"text": "the first words"}], f"the first stands: {boot}")
    again = rpc.result("SendMessage", message("the first words", mid=mid))["task"]
    check(again["id"] == t["id"], "the same message after the refusal: the same task")
    print("ok: 3.3.1: a messageId again with another message refused naming it; the same "
          "message again: the same task")


def root_card(env, hub):
    base = f"https://127.0.0.1:{hub.port}"
    st, card = hub.get("/.well-known/agent-card.json")
    urls = [f"{base}/a2a/{a}" for a in ("alice", "bob", "erin")]
    check(st == 200 and card["name"] == "handoffd"
          and [i["url"] for i in card["supportedInterfaces"]] == urls
          and all(i["protocolBinding"] == "JSONRPC" and i["protocolVersion"] == "1.0"
                  for i in card["supportedInterfaces"])
          and [s["id"] for s in card["skills"]] == ["alice", "bob", "erin"]
          and card["securitySchemes"] == hub.get("/a2a/alice/.well-known/agent-card.json")[1]
          ["securitySchemes"], f"root card: {st} {card}")
    print(f"ok: the root card without default_agent: an interface per agent {urls}")
    # A2A's interfaces are one agent's alternatives: the SDK (1.3.0)
    # keeps the last JSONRPC 1.0 one, erin's here, and sends there
    before = set(env.bootstraps("erin"))
    evs = sdk(hub, ["root"], root={"name": "handoffd", "urls": urls, "send": True})
    sent = [e["task"] for e in evs if e.get("step") == "sent"]
    hdtest.wait_for(lambda: set(env.bootstraps("erin")) - before == {sent[0] + ".json"},
                    what="the root card's message at erin")
    print("ok: the SDK's createFromUrl of the host: the root card; its message went to the "
          "interface it picked (the last: erin)")


def root_default(env, hub):
    """[hub] default_agent: the root card is that agent's."""
    text = open(hub.conf).read()
    ghost = os.path.join(env.dir, "ghost.conf")
    with open(ghost, "w") as f:
        f.write(text.replace("[hub]\n", "[hub]\ndefault_agent = ghost\n", 1))
    line = open(ghost).read().split("\n").index("default_agent = ghost") + 1
    p = subprocess.run([hubkit.HUBD, "-n", "-c", ghost], capture_output=True, text=True)
    check(p.returncode == 2 and p.stderr.startswith(f"{ghost}:{line}: [hub] default_agent ghost "
                                                    "is neither"), f"-n: {p.returncode} {p.stderr!r}")
    print(f"ok: default_agent = ghost: handoff-hubd -n exit 2: {p.stderr.strip()}")
    with open(hub.conf, "w") as f:
        f.write(text.replace("[hub]\n", "[hub]\ndefault_agent = erin\n", 1))
    check(hub.proc.stop() == 0, "the hub stopped")
    hub.start()
    st, card = hub.get("/.well-known/agent-card.json")
    check(st == 200 and card == hub.get("/a2a/erin/.well-known/agent-card.json")[1],
          f"root card with default_agent erin: {card}")
    sdk(hub, ["root"], root={"name": "erin", "urls": [f"https://127.0.0.1:{hub.port}/a2a/erin"]})
    print("ok: default_agent = erin (the hub restarted): the root card is erin's")


def sdk(hub, steps, **extra):
    """tests/a2a/spec.mjs: its steps' JSON lines."""
    a2akit.need_sdk()
    args = {"base": f"https://127.0.0.1:{hub.port}", "agent": "alice",
            "token": hub.tokens["bob"], "steps": steps, **extra}
    p = subprocess.run(["node", os.path.join(A2A_DIR, "spec.mjs"), json.dumps(args)],
                       capture_output=True, text=True, timeout=120 * hdtest.SLOW,
                       env=dict(os.environ, NODE_EXTRA_CA_CERTS=hub.cert))
    evs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    for ev in evs:
        print(f"sdk: {json.dumps(ev)[:300]}")
    check(p.returncode == 0 and evs and evs[-1].get("done"),
          f"spec.mjs exit {p.returncode}: {p.stderr[-2000:]}")
    return evs


def main():
    with hdtest.Env(agents=["alice", "bob", "erin"]) as env:
        env.extra = "[agent erin]\ncompletes = yes\n"
        hub = hubkit.Hub(env, tokens={"bob": None, "alice": None})
        env.start(conf=hub.conf)
        hub.start()
        card_misplaced(hub)
        list_unset(hub)
        done, done_at = list_artifacts(env, hub, hub.conf)
        list_after(env, hub, done, done_at)
        history_length(hub, done)
        task_id(env, hub, done)
        role_required(env, hub)
        nulls(env, hub)
        extended_card(hub)
        message_id_again(env, hub)
        sdk(hub, ["card", "list"])
        root_card(env, hub)
        root_default(env, hub)
    hdtest.finish("test_a2a_spec")


if __name__ == "__main__":
    a2akit.run(main)
