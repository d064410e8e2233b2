"""What an operator meets with a [remote NAME] a2a (issue 46), against
the real daemon and the official SDK's server (tests/a2a/server.mjs):

- submit: `handoffctl submit --to far` says where it goes (the A2A
  server's URL), never "rejected as expired_unclaimed", and the handoff
  reaches the server; `handoffd -n --strict` on a config whose only
  target is an A2A remote is clean (no "nothing will be claimed") and
  names the remote.

Needs node and tests/a2a's packages (make a2a-deps)."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402


def remote_section(port, tf, name="far"):
    return f"[remote {name}]\na2a = http://127.0.0.1:{port}/a2a\ntoken_file = {tf}\n"


def submit_knows_a2a(env, srv, port, tf):
    conf = env.write_config("n", agents=[], extra=remote_section(port, tf))
    p = subprocess.run([hdtest.HANDOFFD, "-n", "--strict", "-c", conf], capture_output=True,
                       text=True)
    print(f"handoffd -n --strict, only an A2A remote: exit {p.returncode}: "
          f"{(p.stdout + p.stderr).strip()}")
    check(p.returncode == 0 and "nothing will be claimed" not in p.stderr and
          f"a2a: [remote far] sent to http://127.0.0.1:{port}/a2a" in p.stdout,
          f"-n of an A2A-only config: {p.returncode}\n{p.stdout}{p.stderr}")

    conf = env.write_config("d0", extra=remote_section(port, tf))
    env.start("d0", conf=conf)
    p = env.ctl("submit", "-c", conf, "--from", "bob", "--to", "far", "--reason",
                "please complete this", check_rc=0)
    hid = p.stdout.strip()
    print(f"submit --to far: {p.stderr.strip()}")
    check("expired_unclaimed" not in p.stderr and "warning" not in p.stderr and
          f"sent to http://127.0.0.1:{port}/a2a" in p.stderr,
          f"submit's words for an A2A remote: {p.stderr!r}")
    hdtest.wait_for(lambda: hid in srv.ids(), 30, "the submitted handoff at the SDK server")
    rc, it, _ = a2akit.wait_code(env, conf, hid)
    check(rc == 0 and it.get("remote_outcome") == "completed", f"wait: {rc} {it}")
    print(f"{hid}: at the SDK server, {it.get('remote_outcome')}")
    return conf


def main():
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)
        port = natsrv.free_port()
        srv = a2akit.Server(env, port, token, os.path.join(env.dir, "server.log"))
        srv.start()
        submit_knows_a2a(env, srv, port, tf)
    print("A2A remotes, as an operator meets them")


if __name__ == "__main__":
    a2akit.run(main)
