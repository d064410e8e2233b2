"""handoff-hubd's blocking SendMessage and its SSE streams (issue 45),
with the real hub and the real daemon over TLS: the official A2A SDK
(tests/a2a/stream.mjs) and a stdlib client here.  The specification
quoted is A2A 1.0 (a2aproject/A2A, docs/specification.md).

- SDK: a default (blocking) sendMessage answers COMPLETED with the agent's
  artifact (3.2.2); sendMessageStream yields the Task, WORKING, the
  artifact, COMPLETED, numbered 1 to 4 (3.1.2, 9.4.2); resubscribeTask
  after a returnImmediately send yields the Task first and ends COMPLETED
  (3.1.6); of an ended task UnsupportedOperationError, of none
  TaskNotFoundError (3.1.6); a stream cut by a SIGKILL of the hub after
  WORKING, the task completed while the hub is down, resumed with
  Last-Event-ID: the Task as it was, then generations 3 and 4, none
  missed;
- a blocking SendMessage whose agent never consumes answers after
  [hub] a2a_block_max (4 s here, the one place the hub departs from
  3.2.2) with the task SUBMITTED;
- 32 open streams and 32 blocking sends of bob's (64 connections, 8 pool
  threads) hold no thread: carol's GetTask is answered meanwhile, at once.
"""

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

A2A_DIR = os.path.join(hdtest.SRC, "tests", "a2a")
BLOCK_MAX = 4


def body(method, params, rid=1):
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def headers(hub, agent):
    return {"Content-Type": "application/json", "A2A-Version": "1.0",
            "Authorization": f"Bearer {hub.tokens[agent]}"}


def message(text, **conf):
    p = {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                     "parts": [{"text": text}]}}
    if conf:
        p["configuration"] = conf
    return p


def rpc(hub, method, params, agent="bob", to="alice"):
    st, ans = hub.request("POST", f"/a2a/{to}", body(method, params), headers(hub, agent))
    check(st == 200 and "result" in ans, f"{method}: {st} {ans}")
    return ans["result"]


def take(env, conf, agent, text=None):
    """The agent consumes its one handoff (and reports text, if any)."""
    hdtest.wait_for(lambda: env.bootstraps(agent), what=f"a handoff delivered to {agent}")
    hid = env.bootstraps(agent)[0][:-len(".json")]
    env.ctl("consume", "-c", conf, "--agent", agent, hid, check_rc=0)
    if text:
        env.ctl("complete", "-c", conf, "--agent", agent, hid, "--text", text, check_rc=0)


def sdk(env, hub, conf):
    sdk_pkg = os.path.join(A2A_DIR, "node_modules", "@a2a-js", "sdk", "package.json")
    check(shutil.which("node") and os.path.exists(sdk_pkg),
          "no node or no tests/a2a/node_modules: run `make a2a-deps` (npm ci)")
    args = {"base": f"https://127.0.0.1:{hub.port}", "agent": "alice", "worker": "erin",
            "token": hub.tokens["bob"]}
    p = subprocess.Popen(["node", os.path.join(A2A_DIR, "stream.mjs"), json.dumps(args)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, NODE_EXTRA_CA_CERTS=hub.cert))
    try:
        while True:
            line = p.stdout.readline()
            check(line, f"stream.mjs ended early (exit {p.poll()})")
            ev = json.loads(line)
            print(f"sdk: {json.dumps(ev)[:400]}")
            check(ev.get("ok", True), f"sdk step failed: {ev}")
            if ev.get("take"):
                take(env, conf, ev["take"], ev.get("text"))
            if ev.get("kill"):
                hub.proc.stop(signal.SIGKILL)
                # the task ends while the hub is down: those events are missed
                env.ctl("complete", "-c", conf, "--agent", "erin", ev["complete"], "--text",
                        ev["text"], check_rc=0)
                hub.start()
            if ev.get("take") or ev.get("kill"):
                p.stdin.write("go on\n")
                p.stdin.flush()
            if ev.get("done"):
                break
        check(p.wait(timeout=60 * hdtest.SLOW) == 0, f"stream.mjs exit {p.returncode}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def open_request(hub, path, data, hdrs):
    """A request sent on its own TLS connection, its answer not read."""
    raw = socket.create_connection(("127.0.0.1", hub.port), timeout=30 * hdtest.SLOW)
    s = hub.context().wrap_socket(raw, server_hostname="127.0.0.1")
    head = "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(data)}"
              f"\r\n\r\n".encode() + data)
    return s


def still_held(s):
    """No byte of an answer on s yet."""
    s.setblocking(False)
    try:
        return not s.recv(1)
    except (BlockingIOError, ssl.SSLWantReadError):
        return True
    finally:
        s.setblocking(True)


def read_until(s, token):
    buf = b""
    while token not in buf:
        chunk = s.recv(65536)
        check(chunk, f"closed before {token!r}: {buf[-300:]!r}")
        buf += chunk
    return buf


def held(env, hub):
    """A2A 1.0 section 3.2.2 (blocking) departs at a2a_block_max; the
    waits and streams hold no pool thread (8 of them): 64 of bob's at once
    leave carol's GetTask answered at once."""
    t0 = time.monotonic()
    late = rpc(hub, "SendMessage", message("nobody consumes this"))["task"]
    took = time.monotonic() - t0
    check(late["status"]["state"] == "TASK_STATE_SUBMITTED" and BLOCK_MAX - 0.5 <= took
          < BLOCK_MAX + 5 * hdtest.SLOW, f"a blocking send, never consumed: {took:.2f} s {late}")
    print(f"ok: a blocking SendMessage whose agent never consumes: SUBMITTED after {took:.2f} s "
          f"(a2a_block_max = {BLOCK_MAX})")
    # the rest with a block longer than any load makes the test: what it
    # checks is that carol is answered while bob's 64 are all still held
    hub.proc.stop()
    with open(hub.conf) as f:
        text = f.read()
    with open(hub.conf, "w") as f:
        f.write(text.replace(f"a2a_block_max = {BLOCK_MAX}\n", "a2a_block_max = 1h\n"))
    hub.start()
    carol = rpc(hub, "SendMessage", message("carol's", returnImmediately=True), agent="carol")
    streams = []
    for i in range(32):
        s = open_request(hub, "/a2a/alice", body("SubscribeToTask", {"id": late["id"]}),
                         headers(hub, "bob"))
        streams.append(s)
    for s in streams:
        first = read_until(s, b"\n\n")
        check(b"text/event-stream" in first and b"id: 1\n" in first, f"a stream: {first[:400]!r}")
    # one at a time: a token's requests being made at once are bounded
    # (max_requests_per_token); once made, each waits on no thread
    sends = []
    for i in range(32):
        n = len(env.bootstraps("alice"))
        sends.append(open_request(hub, "/a2a/alice", body("SendMessage", message(f"held {i}")),
                                  headers(hub, "bob")))
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) > n, what=f"held send {i} delivered")
    t0 = time.monotonic()
    got = rpc(hub, "GetTask", {"id": carol["task"]["id"]}, agent="carol")
    took = time.monotonic() - t0
    check(got["id"] == carol["task"]["id"], f"carol's GetTask with bob's 64 held: {got}")
    answered = sum(1 for s in sends if not still_held(s))
    check(answered == 0, f"{answered} of bob's 32 blocking sends answered: not held")
    print(f"ok: 32 streams and 32 blocking sends of bob's open, all still held: carol's GetTask "
          f"in {took * 1000:.0f} ms")
    for s in streams + sends:
        s.close()


def main():
    with hdtest.Env(agents=["alice", "bob", "carol", "erin"]) as env:
        env.extra = "[agent erin]\ncompletes = yes\n"
        hub = hubkit.Hub(env, tokens={"bob": None, "carol": None},
                         extra=f"a2a_block_max = {BLOCK_MAX}\nmax_waits_per_token = 100\n"
                               "max_per_address = 200\n")
        conf = hub.conf
        env.start(conf=conf)
        hub.start()
        sdk(env, hub, conf)
        held(env, hub)
    hdtest.finish("test_a2a_stream")


if __name__ == "__main__":
    hdtest.run(main)
