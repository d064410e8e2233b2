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
- the MUSTs and REQUIREDs named at each check below.
"""

import json
import os
import subprocess
import sys
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
    return {"message": m}


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
        sdk(hub, ["card", "list"])
    hdtest.finish("test_a2a_spec")


if __name__ == "__main__":
    a2akit.run(main)
