"""handoff-hubd's multi-turn A2A tasks (issue 45), with the real hub and
the real daemon over TLS, driven by the official A2A SDK
(tests/a2a/multiturn.mjs).  The specification quoted is A2A 1.0
(a2aproject/A2A, docs/specification.md).

The agent asks for input with `handoffctl complete ID --input-required
TEXT`: a blocking send answers at INPUT_REQUIRED (3.2.2), the question the
task's status message; a SendMessage with the taskId and contextId is the
next handoff of the same task, to the same agent, its payload naming the
task (read here in the agent's bootstrap); the task ends COMPLETED with
its history, both ways, per historyLength (3.2.4); an unknown taskId is
TaskNotFoundError, a COMPLETED one UnsupportedOperationError (3.4.2); a
stream ends at INPUT_REQUIRED and the next turn's stream goes on with the
same numbering; a task still at work takes no message; another contextId
is InvalidParams.
"""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

A2A_DIR = os.path.join(hdtest.SRC, "tests", "a2a")


def take(env, conf, agent, seen, text=None, ask=None):
    """The agent consumes its next handoff and reports text, or asks."""
    def fresh():
        return [b for b in env.bootstraps(agent) if b not in seen]
    hdtest.wait_for(fresh, what=f"a handoff delivered to {agent}")
    name = fresh()[0]
    seen.add(name)
    with open(os.path.join(env.state[agent], "handoffs", name)) as f:
        boot = f.read()
    hid = name[:-len(".json")]
    env.ctl("consume", "-c", conf, "--agent", agent, hid, check_rc=0)
    if ask:
        env.ctl("complete", "-c", conf, "--agent", agent, hid, "--input-required", ask,
                check_rc=0)
    else:
        env.ctl("complete", "-c", conf, "--agent", agent, hid, "--text", text, check_rc=0)
    # the payload's rendering names the task an answer continues
    cont = None
    marker = "**Continues task:** "
    if marker in boot:
        cont = json.loads('"' + boot.split(marker, 1)[1].split(" ", 1)[0] + '"')
    return {"id": hid, "taskId": cont}


def main():
    sdk_pkg = os.path.join(A2A_DIR, "node_modules", "@a2a-js", "sdk", "package.json")
    check(shutil.which("node") and os.path.exists(sdk_pkg),
          "no node or no tests/a2a/node_modules: run `make a2a-deps` (npm ci)")
    with hdtest.Env(agents=["bob", "erin"]) as env:
        env.extra = "[agent erin]\ncompletes = yes\n"
        hub = hubkit.Hub(env, tokens={"bob": None}, extra="a2a_block_max = 60\n")
        conf = hub.conf
        env.start(conf=conf)
        hub.start()
        # a bad question is refused before anything is written
        r = env.ctl("complete", "-c", conf, "--agent", "erin", "a2a-x", "--input-required",
                    "why?", "--text", "both")
        check(r.returncode == 2, f"--input-required with --text: exit {r.returncode}")
        args = {"base": f"https://127.0.0.1:{hub.port}", "worker": "erin",
                "token": hub.tokens["bob"]}
        p = subprocess.Popen(["node", os.path.join(A2A_DIR, "multiturn.mjs"), json.dumps(args)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, NODE_EXTRA_CA_CERTS=hub.cert))
        seen = set()
        try:
            while True:
                line = p.stdout.readline()
                check(line, f"multiturn.mjs ended early (exit {p.poll()})")
                ev = json.loads(line)
                print(f"sdk: {json.dumps(ev)[:400]}")
                check(ev.get("ok", True), f"sdk step failed: {ev}")
                if ev.get("take"):
                    got = take(env, conf, ev["take"], seen, ev.get("text"), ev.get("ask"))
                    p.stdin.write(json.dumps(got) + "\n")
                    p.stdin.flush()
                if ev.get("done"):
                    break
            check(p.wait(timeout=60 * hdtest.SLOW) == 0, f"multiturn.mjs exit {p.returncode}")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        # the hub's index of turns survives its restart
        hub.proc.stop()
        hub.start()
        st, ans = hub.request("POST", "/a2a/erin", json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).encode(),
            {"Content-Type": "application/json", "A2A-Version": "1.0",
             "Authorization": f"Bearer {hub.tokens['bob']}"})
        tasks = ans.get("result", {}).get("tasks", [])
        states = sorted(t["status"]["state"] for t in tasks)
        check(st == 200 and states == ["TASK_STATE_COMPLETED", "TASK_STATE_COMPLETED",
                                       "TASK_STATE_INPUT_REQUIRED"],
              f"after a restart ListTasks lists the three tasks, not their turns: {states}")
        print("ok: after a restart of the hub, ListTasks lists 3 tasks (2 COMPLETED, 1 "
              "INPUT_REQUIRED), not their 5 turns")
    hdtest.finish("test_a2a_multiturn")


if __name__ == "__main__":
    main()
