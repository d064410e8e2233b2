"""A first start where everything runs as one user (issue 36.3): the
agents' state_dirs made beforehand with a plain mkdir (mode 0755, the
daemon's own user and group), the spool made by the daemon.  Each
handoffs/ it creates is 0700, and the agent -- the same user -- consumes
from it: no warning "agent alice cannot consume unless it runs as the
daemon's user", neither from -n nor from the start; an info line says
why 0700 is fine.  The agent does consume.

Where it is true the warning stays (root only: a state_dir owned by
another uid), from the start and, before it, from -n.

Runs the real daemon on a temp dir."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

OTHER_UID = 47433


def warnings_of(text):
    return [ln for ln in text.splitlines() if ln.startswith("handoffd[warning]: ")]


def check_config(conf):
    p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", conf], capture_output=True, text=True,
                       timeout=30 * hdtest.SLOW)
    print(f"handoffd -n: exit {p.returncode}")
    for ln in (p.stderr + p.stdout).splitlines():
        print(f"  | {ln}")
    return p


def main():
    with hdtest.Env(agents=["alice", "bob"]) as env:
        for a in ("alice", "bob"):
            os.makedirs(env.state[a])
            os.chmod(env.state[a], 0o755)
        conf = env.write_config("d0")
        p = check_config(conf)
        check(p.returncode == 0 and not warnings_of(p.stderr), f"-n warns: {warnings_of(p.stderr)}")

        d = env.start(conf=conf)
        logs = d.logs()
        for ln in logs.splitlines():
            if "Created '" in ln:
                print(f"the start: {ln}")
        warned = warnings_of(logs)
        check(not warned, "a start as one user warns:\n" + "\n".join(warned))
        for a in ("alice", "bob"):
            mode = os.stat(os.path.join(env.state[a], "handoffs")).st_mode & 0o7777
            check(mode == 0o700, f"{a}'s handoffs/ made {oct(mode)}")
            check(any(f"Created '{env.state[a]}/handoffs' with mode 0700: agent {a} consumes as the "
                      "daemon's user" in ln for ln in logs.splitlines()),
                  f"no line says why 0700 is fine for {a}:\n{logs}")

        # The agent, the same user, consumes from it.
        doc = hdproto.build("bob", "alice", env.key)
        hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: any(n.endswith(".json") and not n.startswith(".")
                                    for n in os.listdir(os.path.join(env.state["alice"], "handoffs"))),
                        what="alice's bootstrap")
        q = env.ctl("consume", "-c", conf, "--agent", "alice")
        check(q.returncode == 0 and doc["handoff_id"] in q.stdout,
              f"alice does not consume as the daemon's user: {q.returncode} {q.stdout} {q.stderr}")
        print("alice consumed as the daemon's user")
        check(d.stop() == 0, "the daemon stops")

    if os.geteuid() != 0:
        print("- a state_dir of another user: not tried (needs root to chown)")
        print("ok: no warning where the agent is the daemon's user")
        return
    with hdtest.Env(agents=["dave"]) as env:
        os.makedirs(env.state["dave"])
        os.chmod(env.state["dave"], 0o755)
        os.chown(env.state["dave"], OTHER_UID, -1)
        conf = env.write_config("d0")
        p = check_config(conf)
        w = warnings_of(p.stderr)
        check(p.returncode == 0 and len(w) == 1 and "agent dave cannot consume" in w[0]
              and f"is owned by uid {OTHER_UID}" in w[0], f"-n does not warn for dave: {w}")
        d = env.start(conf=conf)
        w = warnings_of(d.logs())
        check(d.stop() == 0, "the daemon stops")
        print(f"the start, dave's state_dir owned by uid {OTHER_UID}: {w}")
        check(len(w) == 1 and "Created" in w[0] and "agent dave cannot consume" in w[0],
              f"the start does not warn for dave: {w}")
    print("ok: no warning where the agent is the daemon's user; one where state_dir names another")


hdtest.run(main)
