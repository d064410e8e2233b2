"""What an operator meets with a [remote NAME] a2a (issue 46), against
the real daemon and the official SDK's server (tests/a2a/server.mjs):

- submit: `handoffctl submit --to far` says where it goes (the A2A
  server's URL), never "rejected as expired_unclaimed", and the handoff
  reaches the server; `handoffd -n --strict` on a config whose only
  target is an A2A remote is clean (no "nothing will be claimed") and
  names the remote.
- reload: a daemon started without an A2A remote, a handoff for far
  waiting in handoff/; SIGHUP with [remote far] a2a: it reaches the
  server.  SIGHUP with far's URL moved to a second server: the next one
  reaches that one.  SIGHUP without far: its helper stops; SIGHUP with
  it again: a handoff reaches the server.
- status: the server down and a handoff waiting: `handoffctl status`
  exits 1, degraded, its problem names the remote, and the text lists
  the remote NOT reachable with its waiting item and last error; the
  server back, the item sent: exit 0, healthy, the remote reachable.
- show: an item the remote completed names the server's answer over
  plain http to loopback with the bearer token as what vouches for it,
  no signature; never "receipt signed by a2a:far".

Needs node and tests/a2a's packages (make a2a-deps)."""

import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
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


def reload(env, d, conf, text):
    with open(conf, "w") as f:
        f.write(text)
    n = d.logs().count("Reloaded ")
    d.send(signal.SIGHUP)
    hdtest.wait_for(lambda: d.logs().count("Reloaded ") > n, 20, "the reload")


def a2a_status(env, conf):
    return json.loads(env.ctl("status", "-c", conf, "--json").stdout).get("a2a")


def reload_adds_a2a(env, srv, port, tf):
    conf = env.write_config("r")
    d = env.start("r", conf=conf)
    check(a2a_status(env, conf) is None, "an A2A sender without an A2A remote")
    doc = hdproto.build("bob", "far", env.key, reason="waits for a reload", ttl=600)
    hdproto.drop(env.spool, doc)
    hid = doc["handoff_id"]
    hdtest.wait_for(lambda: "for agent far, not served here" in d.logs(), 20,
                    "the daemon left it in handoff/ (no agent far)")
    check(env.count("handoff") == 1 and hid not in srv.ids(), "waits in handoff/ before")
    reload(env, d, conf, env.config_text("r", extra=remote_section(port, tf)))
    hdtest.wait_for(lambda: hid in srv.ids(), 30, "the waiting handoff at the server after SIGHUP")
    rc, it, _ = a2akit.wait_code(env, conf, hid)
    check(rc == 0 and it.get("remote_outcome") == "completed", f"after the reload: {rc} {it}")
    print(f"SIGHUP adding [remote far] a2a: {hid} sent, {it.get('remote_outcome')}")

    port2 = natsrv.free_port()
    token = open(tf).read().strip()
    srv2 = a2akit.Server(env, port2, token, os.path.join(env.dir, "server2.log"))
    srv2.start()
    reload(env, d, conf, env.config_text("r", extra=remote_section(port2, tf)))
    doc = hdproto.build("bob", "far", env.key, reason="to the moved server", ttl=600)
    hdproto.drop(env.spool, doc)
    hdtest.wait_for(lambda: doc["handoff_id"] in srv2.ids(), 30, "the handoff at the new URL")
    rc, it, _ = a2akit.wait_code(env, conf, doc["handoff_id"])
    check(rc == 0 and doc["handoff_id"] not in srv.ids(), f"at the new URL: {rc} {it}")
    print(f"SIGHUP moving far to port {port2}: the next handoff went there")

    reload(env, d, conf, env.config_text("r"))
    hdtest.wait_for(lambda: not a2a_status(env, conf)["remotes"]["far"]["helper_running"], 20,
                    "far's helper stopped")
    far = a2a_status(env, conf)["remotes"]["far"]
    check(far["waiting"] == 0 and far["following"] == 0, f"far after its removal: {far}")
    print(f"SIGHUP removing far: {far}")
    reload(env, d, conf, env.config_text("r", extra=remote_section(port, tf)))
    doc = hdproto.build("bob", "far", env.key, reason="after it came back", ttl=600)
    hdproto.drop(env.spool, doc)
    hdtest.wait_for(lambda: doc["handoff_id"] in srv.ids(), 30, "the handoff after far came back")
    rc, it, _ = a2akit.wait_code(env, conf, doc["handoff_id"])
    check(rc == 0, f"after far came back: {rc} {it}")
    print("SIGHUP adding far again: a handoff reaches it")
    d.stop()
    srv2.stop()


def status_lists_a2a(env, srv, port, tf):
    conf = env.write_config("s", extra=remote_section(port, tf))
    d = env.start("s", conf=conf)
    srv.stop()
    doc = hdproto.build("bob", "far", env.key, reason="while it is down", ttl=600)
    hdproto.drop(env.spool, doc)
    hdtest.wait_for(lambda: (a2a_status(env, conf)["remotes"]["far"]["last_error"] or "") != "",
                    30, "a failed try at far")
    p = env.ctl("status", "-c", conf)
    print(f"status, far down: exit {p.returncode}\n{p.stdout}")
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("  a2a remote far ")]
    check(p.returncode == 1 and "health: degraded" in p.stdout and
          "problem: A2A remote far is failing, 1 handoff(s) waiting" in p.stdout and
          len(line) == 1 and "NOT reachable, waiting 1" in line[0] and "last error" in line[0],
          f"status with far down: exit {p.returncode}\n{p.stdout}")
    srv.start()
    rc, it, _ = a2akit.wait_code(env, conf, doc["handoff_id"], "90")
    check(rc == 0, f"sent once far was back: {rc} {it}")
    p = env.ctl("status", "-c", conf)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("  a2a remote far ")]
    print(f"status, far back: exit {p.returncode}: {line}")
    check(p.returncode == 0 and "health: healthy" in p.stdout and len(line) == 1 and
          "reachable, waiting 0" in line[0] and "NOT" not in line[0],
          f"status with far back: exit {p.returncode}\n{p.stdout}")

    p = env.ctl("show", "-c", conf, doc["handoff_id"], check_rc=0)
    there = [ln for ln in p.stdout.splitlines() if ln.startswith("there ")]
    print(f"show: {there}")
    check(len(there) == 1 and "receipt signed" not in p.stdout and
          there[0].startswith(f"there completed (the answer of a2a:far's server for task "
                              f"{it['a2a_task']}, over plain http to this host's loopback, with "
                              "the bearer token of its token_file; no signature"),
          f"show of an A2A outcome:\n{p.stdout}")
    d.stop()


def main():
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)
        port = natsrv.free_port()
        srv = a2akit.Server(env, port, token, os.path.join(env.dir, "server.log"))
        srv.start()
        submit_knows_a2a(env, srv, port, tf)
        env.daemons[-1].stop()
        reload_adds_a2a(env, srv, port, tf)
        status_lists_a2a(env, srv, port, tf)
    print("A2A remotes, as an operator meets them")


if __name__ == "__main__":
    a2akit.run(main)
