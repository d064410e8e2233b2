"""A2A outward, exactly once across crashes to a server that does not
deduplicate (issue 46): the SDK's DefaultRequestHandler (tests/a2a/
server.mjs) makes a new task for a messageId it has seen.  The server
holds each answer 250 ms after its task is stored, so a SIGKILL of
handoffd as soon as the server has run some message lands between the
server's acceptance and the task id handoffd keeps:

- 60 handoffs, handoffd SIGKILLed three times mid-burst (when the server
  has run 10, 25 and 40 of them) and started again: the server is sent
  each messageId once (its SendMessage log), runs each once (its task
  store), each with contextId and Idempotency-Key equal to the
  handoff_id; every handoff ends completed.  Before the change the
  message in flight at each kill was sent again and ran twice;
- a remote whose server has no ListTasks (-32601): a send whose outcome
  a kill left unknown is sent again (the one remote that may get a
  message twice), and status says so for that remote.

Needs node and tests/a2a's packages (make a2a-deps)."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

N = 60
KILLS = (10, 25, 40)


def kill_and_restart(env, d, conf):
    d.proc.kill()
    d.proc.wait()
    d.stop()
    d2 = hdtest.Daemon(env, conf, "d0")
    env.daemons.append(d2)
    d2.wait_message("READY=1")
    return d2


def burst(env, token, tf):
    port = natsrv.free_port()
    sends = os.path.join(env.dir, "sends.log")
    srv = a2akit.Server(env, port, token, os.path.join(env.dir, "server.log"), sends=sends,
                        answer_delay_ms=250)
    srv.start()
    conf = env.write_config("d0", extra=f"[remote remote]\na2a = http://127.0.0.1:{port}/a2a\n"
                                        f"token_file = {tf}\n")
    d = env.start("d0", conf=conf)
    docs = [hdproto.build("bob", "remote", env.key, ttl=600, reason=f"burst {i} complete")
            for i in range(N)]
    for doc in docs:
        hdproto.drop(env.spool, doc)
    for k in KILLS:
        hdtest.wait_for(lambda: len(srv.ids()) >= k, 60, f"the server has run {k}")
        d = kill_and_restart(env, d, conf)
    hdtest.wait_for(lambda: env.count("archive") >= N, 120, "all archived")
    want = {doc["handoff_id"] for doc in docs}
    ran, sent = srv.ids(), srv.sends()
    twice = sorted({i for i in ran if ran.count(i) > 1})
    sent_twice = sorted({s["messageId"] for s in sent if [t["messageId"] for t in sent].count(s["messageId"]) > 1})
    check(set(ran) == want and not twice,
          f"the server ran {len(ran)} messages for {N} handoffs: twice {twice}, "
          f"missing {sorted(want - set(ran))}")
    check({s["messageId"] for s in sent} == want and not sent_twice,
          f"SendMessage {len(sent)} times for {N} handoffs, twice for {sent_twice}")
    bad = [s for s in sent if not (s["messageId"] == s["contextId"] == s["idempotencyKey"])]
    check(not bad, f"contextId / Idempotency-Key not the handoff_id: {bad[:3]}")
    for doc in docs:
        rc, it, p = a2akit.wait_code(env, conf, doc["handoff_id"], "10")
        check(rc == 0 and it.get("remote_outcome") == "completed",
              f"{doc['handoff_id']}: wait {rc} {it}")
    adopted = sum(ln.count("already has") for ln in d.logs().splitlines())
    print(f"{N} handoffs, handoffd SIGKILLed at {KILLS} tasks run: the server ran {len(ran)} "
          f"tasks, was sent {len(sent)} SendMessage (each messageId once), every handoff "
          f"completed ({adopted} found by ListTasks and adopted, not sent again)")
    check(d.stop() == 0, "exit 0")
    srv.stop()


def no_list(env, token, tf):
    port = natsrv.free_port()
    srv = a2akit.Server(env, port, token, os.path.join(env.dir, "plain.log"), answer_delay_ms=500,
                        no_list=True)
    srv.start()
    conf = env.write_config("d1", extra=f"[remote plain]\na2a = http://127.0.0.1:{port}/a2a\n"
                                        f"token_file = {tf}\n")
    d = env.start("d1", conf=conf)
    doc = hdproto.build("bob", "plain", env.key, ttl=600, reason="please complete this")
    hdproto.drop(env.spool, doc)
    hdtest.wait_for(lambda: len(srv.ids()) >= 1, 30, "the server has run it")
    d.proc.kill()
    d.proc.wait()
    d.stop()
    d = hdtest.Daemon(env, conf, "d1")
    env.daemons.append(d)
    d.wait_message("READY=1")
    rc, it, p = a2akit.wait_code(env, conf, doc["handoff_id"], "30")
    check(rc == 0 and it.get("remote_outcome") == "completed", f"no ListTasks: wait {rc} {it}")
    st = json.loads(env.ctl("status", "-c", conf, "--json", check_rc=0).stdout)["a2a"]
    r = st["remotes"]["plain"]
    check(r.get("list_tasks") is False and r.get("resent_unchecked") == 1,
          f"status of a remote without ListTasks: {r}")
    print(f"no ListTasks: the unknown send sent again (the server ran it {len(srv.ids())}x); "
          f"status: list_tasks {r['list_tasks']}, resent_unchecked {r['resent_unchecked']}")
    check(d.stop() == 0, "exit 0")


def main():
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)
        burst(env, token, tf)
        no_list(env, token, tf)
    hdtest.finish("each messageId reaches a non-deduplicating A2A server once across 3 SIGKILLs")


if __name__ == "__main__":
    a2akit.run(main)
