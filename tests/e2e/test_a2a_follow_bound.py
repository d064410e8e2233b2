"""An A2A task that never ends is not followed for ever (issue 43.13):
the SDK server (tests/a2a/server.mjs) answers a message holding
"forever" with a task that stays working at every GetTask.  handoffd
follows a task at most [remote NAME] a2a_follow_max (default 24 h; 4 s
here) after its item entered outbox/, then archives it as relayed with
remote_outcome expired_unfinished and a line saying so; `handoffctl
wait` exits 1.  Before, the item stayed in
outbox/, asked every 60 s for ever.  A task that ends before the bound
is untouched by it (completed).

Needs node and tests/a2a's packages (make a2a-deps)."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

BOUND_S = 4


def main():
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)
        port = natsrv.free_port()
        srv = a2akit.Server(env, port, token, os.path.join(env.dir, "server.log"))
        srv.start()
        conf = env.write_config("d0", extra=f"[remote remote]\na2a = http://127.0.0.1:{port}/a2a\n"
                                            f"token_file = {tf}\na2a_follow_max = {BOUND_S}s\n")
        d = hdtest.Daemon(env, conf, "d0")
        env.daemons.append(d)
        d.wait_message("READY=1")
        never = hdproto.build("bob", "remote", env.key, ttl=600, reason="work on this forever")
        done = hdproto.build("bob", "remote", env.key, ttl=600, reason="please complete this")
        hdproto.drop(env.spool, never)
        hdproto.drop(env.spool, done)
        rc, it, p = a2akit.wait_code(env, conf, done["handoff_id"], "20")
        check(rc == 0 and it.get("remote_outcome") == "completed", f"the task that ends: {rc} {it}")
        # the bound, then the next look (GetTask every 1, 2, 4 s...)
        rc, it, p = a2akit.wait_code(env, conf, never["handoff_id"], str(BOUND_S + 20))
        check(rc == 1 and it.get("remote_outcome") == "expired_unfinished" and
              "no longer followed" in it.get("remote_detail", "") and
              "working" in it.get("remote_detail", ""),
              f"the task that never ends: wait {rc} {it}\n{p.stderr}\n{d.logs()[-2000:]}")
        said = [ln for ln in d.logs().splitlines() if "no longer followed" in ln]
        check(len(said) == 1 and never["handoff_id"] in said[0], f"the line: {said}")
        check(not env.names("outbox"), f"left in outbox/: {env.names('outbox')}")
        print(f"a task working for ever: archived expired_unfinished after the {BOUND_S}-s bound "
              f"({it.get('remote_detail')}); one that completes: completed")
        check(d.stop() == 0, "exit 0")
    hdtest.finish("test_a2a_follow_bound")


if __name__ == "__main__":
    a2akit.run(main)
