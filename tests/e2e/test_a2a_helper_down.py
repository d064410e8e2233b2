"""A2A outward when handoff-a2a fails in the middle of an answer
(a2a_out.c, helper_down()): a handoff to a [remote NAME] a2a, the remote
the official SDK's server (tests/a2a/server.mjs), the helper the real
handoff-a2a behind tests/py/a2a_cut.py, which breaks its first answer
once:

- half: the answer's first half, no newline, then the helper is gone
  (its output closed, it exits);
- junk: a whole line that is no answer, the helper still running.

Each time handoffd logs once that the helper is stopped or gone (why: its
output closed or its exit, whichever the loop sees first; the line),
counts one helper error, starts a new one (a second later) and sends the handoff again
under the same messageId; the half line is not taken for an answer nor
joined to the next helper's; the handoff ends completed with the
server's artifact, archived once, nothing rejected.

Needs node and tests/a2a's packages (make a2a-deps)."""

import json
import os
import sys

SRC = os.environ.get("HD_SRC", ".")
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

WHY = {"half": ("stopping handoff-a2a of remote remote: closed its output",
                "handoff-a2a of remote remote exited (status 0, signal 0)"),
       "junk": ("stopping handoff-a2a of remote remote: a line that does not check",)}


def one(env, srv, port, tf, mode):
    mark = os.path.join(env.dir, f"cut.{mode}")
    conf = env.write_config(mode, extra=f"[remote remote]\na2a = http://127.0.0.1:{port}/a2a\n"
                                        f"token_file = {tf}\n")
    d = hdtest.Daemon(env, conf, mode, env_vars={
        "HD_A2A_HELPER": os.path.join(SRC, "tests", "py", "a2a_cut.py"),
        "HD_REAL_A2A": os.path.join(hdtest.BUILD, "handoff-a2a"),
        "HD_CUT_MARK": mark, "HD_CUT_MODE": mode})
    env.daemons.append(d)
    d.wait_message("READY=1")
    doc = hdproto.build("bob", "remote", env.key, reason=f"please complete this ({mode})")
    hid = doc["handoff_id"]
    hdproto.drop(env.spool, doc)
    rc, it, p = a2akit.wait_code(env, conf, hid)
    cut = open(mark).read()
    check(cut.startswith(hid + "\tsend\tok\t"), f"the answer broken was not the send's: {cut!r}")
    check(rc == 0 and it.get("remote_outcome") == "completed" and
          it.get("remote_detail") == f"done: please complete this ({mode})",
          f"{mode}: wait exit {rc} {it}\n{p.stderr}")
    # half: its output's end or its exit, whichever the loop sees first
    said = [ln for ln in d.logs().splitlines()
            if "A2A: stopping handoff-a2a" in ln or
            ("A2A: handoff-a2a of remote" in ln and " exited " in ln)]
    check(len(said) == 1 and any(w in said[0] for w in WHY[mode]), f"{mode}: the stop said: {said}")
    st = json.loads(env.ctl("status", "-c", conf, "--json", check_rc=0).stdout).get("a2a", {})
    check(st.get("helper_errors") == 1, f"{mode}: status a2a: {st}")
    ran = [i for i in srv.ids() if i == hid]
    check(len(ran) in (1, 2), f"{mode}: the server ran {hid} {len(ran)} times")
    arch = [n for n in env.items("archive") if n.endswith(f"-{hid}.json")]
    check(len(arch) == 1 and not env.names("rejected") and not env.names("outbox"),
          f"{mode}: archived {arch}, rejected/ {env.names('rejected')}, outbox/ {env.names('outbox')}")
    check(d.stop() == 0, f"{mode}: the daemon stops with 0")
    print(f"{mode}: the answer to {hid}'s send broken ({len(cut)} bytes); "
          f"the helper stopped once ({said[0].split(': ', 1)[1]}), the handoff sent again under "
          f"its messageId (the server ran it {len(ran)}x) and archived once as completed")


def main():
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)
        port = natsrv.free_port()
        srv = a2akit.Server(env, port, token, os.path.join(env.dir, "server.log"))
        srv.start()
        for mode in ("half", "junk"):
            one(env, srv, port, tf, mode)
    hdtest.finish("a helper that breaks an answer is stopped and replaced; the handoff is sent again "
                  "under its messageId and ends once")


if __name__ == "__main__":
    a2akit.run(main)
