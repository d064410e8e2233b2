"""Following an A2A task by stream (issue 46, "Follow by stream where the
card says streaming"): A2A 1.0 section 3.1.6 SubscribeToTask, answered
as Server-Sent Events, where the agent card's capabilities.streaming is
true (section 4.4.3 AgentCapabilities); else GetTask as before.  The
remote is the official SDK's server (tests/a2a/server.mjs), `a2a =` its
card's URL, a task that works until the test lets it complete:

- the task followed by SubscribeToTask: the stream held to its 20-s
  bound with the task still working is opened again at once (no GetTask
  between the two), and the end comes on the open stream: after it the
  server is asked one GetTask (the task whole, its artifacts) and the
  handoff is archived completed with the artifact's text and data part.
  Before, the task was followed by GetTask alone (no SubscribeToTask);
- a server whose card says streaming but answers SubscribeToTask with
  -32004 (UnsupportedOperationError): followed by GetTask, completed.

Needs node and tests/a2a's packages (make a2a-deps)."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

STREAM_S = 20   # a stream's time bound (src/a2a/main.c)


def remote(env, name, token, tf, **knobs):
    port = natsrv.free_port()
    done = os.path.join(env.dir, f"{name}.done")
    srv = a2akit.Server(env, port, token, os.path.join(env.dir, f"{name}.log"),
                        calls=os.path.join(env.dir, f"{name}.calls"), streaming=True,
                        complete_file=done, **knobs)
    srv.start()
    conf = (f"[remote {name}]\na2a = http://127.0.0.1:{port}/.well-known/agent-card.json\n"
            f"token_file = {tf}\n")
    return srv, done, conf


def main():
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)
        srv, done, c1 = remote(env, "streamy", token, tf)
        plain, pdone, c2 = remote(env, "nosub", token, tf, no_subscribe=True)
        conf = env.write_config("d0", extra=c1 + c2)
        d = env.start("d0", conf=conf)

        # ---- by stream
        doc = hdproto.build("bob", "streamy", env.key, ttl=600, reason="finish this later")
        hdproto.drop(env.spool, doc)
        opens = lambda: [i for i, c in enumerate(srv.calls())  # noqa: E731
                         if c["method"] == "SubscribeToTask:open"]
        hdtest.wait_for(lambda: len(opens()) >= 2, 3 * STREAM_S,
                        "a second stream after the first's time bound")
        calls = srv.calls()
        first, second = opens()[:2]
        between = [c["method"] for c in calls[first + 1:second]]
        check(between == ["SubscribeToTask"],
              f"between the two streams: {between} (wanted the new SubscribeToTask alone)")
        check(calls[first]["id"] == calls[second]["id"], f"two tasks streamed: {calls}")
        print(f"stream held {STREAM_S} s to its bound, opened again at once: {between}")
        mark = len(calls)
        open(done, "w").close()
        rc, it, p = a2akit.wait_code(env, conf, doc["handoff_id"], "60")
        res = it.get("result", {})
        check(rc == 0 and it.get("remote_outcome") == "completed", f"by stream: {rc} {it}")
        check(res.get("text") == "done: finish this later" and
              {"data": {"late": True}, "mediaType": "application/json"} in
              res.get("data", {}).get("artifacts", [{}])[0].get("parts", []),
              f"the result: {res}")
        after = [c["method"] for c in srv.calls()[mark:]]
        check(after == ["GetTask"], f"after the end: {after} (wanted the one GetTask)")
        print(f"the end came on the open stream, then {after}: completed, {res['text']!r} "
              f"and its data part")

        # ---- a card that says streaming, a server that refuses it
        doc = hdproto.build("bob", "nosub", env.key, ttl=600, reason="finish this later too")
        hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: [c["method"] for c in plain.calls()][-2:] ==
                        ["SubscribeToTask", "GetTask"], 30,
                        "SubscribeToTask refused, then GetTask")
        open(pdone, "w").close()
        rc, it, p = a2akit.wait_code(env, conf, doc["handoff_id"], "60")
        check(rc == 0 and it.get("remote_outcome") == "completed", f"no stream: {rc} {it}")
        methods = [c["method"] for c in plain.calls()]
        check("SubscribeToTask:open" not in methods and methods.count("GetTask") >= 2,
              f"the refusing server's calls: {methods}")
        print(f"SubscribeToTask refused (-32004): followed by GetTask "
              f"({methods.count('GetTask')} calls), completed")
        check(d.stop() == 0, "exit 0")
    hdtest.finish("an A2A task is followed by stream where the card says so, else by GetTask")


if __name__ == "__main__":
    a2akit.run(main)
