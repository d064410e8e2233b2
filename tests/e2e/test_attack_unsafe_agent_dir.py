"""Attack (issue 24.3): an agent blocks the daemon's start.  Mallory, a
member of the spool's group with an agent of her own, replaces the
handoffs/ in her own state_dir with a directory of mode 0777: the start
used to exit 2 and every SIGHUP was refused, for all agents.

Now only mallory's agent is out of service: the daemon starts, bob's
handoff to alice is delivered, the handoff to mallory waits in handoff/
(neither claimed nor rejected), `handoffctl status` (text and --json) and
the log say why; once the directory is fixed a SIGHUP serves it again.
A reload with her directory broken while running keeps the others served.

Runs as root; mallory and alice are throwaway uids/gids."""

import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47430
MALLORY = 47431
ALICE = 47432


def as_user(uid, gid, argv):
    return subprocess.run(argv, user=uid, group=gid, extra_groups=[gid, SPOOL_GID],
                          capture_output=True, text=True, timeout=30 * hdtest.SLOW)


def status(env, conf):
    p = env.ctl("status", "-c", conf, "--json")
    return p.returncode, json.loads(p.stdout)


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice", "mallory"]) as env:
        for d in ("", "tmp", "handoff"):
            p = os.path.join(env.spool, d)
            os.makedirs(p, exist_ok=True)
            os.chown(p, 0, SPOOL_GID)
            os.chmod(p, 0o3770 if d else 0o750)
        # The shipped layout: each state_dir setgid in the agent's group.
        for agent, gid in (("alice", ALICE), ("mallory", MALLORY)):
            sd = env.state[agent]
            os.makedirs(os.path.join(sd, "handoffs"))
            for p in (sd, os.path.join(sd, "handoffs")):
                os.chown(p, 0, gid)
                os.chmod(p, 0o2770)
        conf = env.write_config("d0")

        # Mallory swaps her handoffs/ for one anybody may write.
        sd = env.state["mallory"]
        p = as_user(MALLORY, MALLORY, ["/bin/sh", "-c",
                    f"mv '{sd}/handoffs' '{sd}/old' && mkdir '{sd}/handoffs' && "
                    f"chmod 0777 '{sd}/handoffs'"])
        check(p.returncode == 0, f"mallory could not swap her handoffs/: {p.stderr}")
        check(os.stat(os.path.join(sd, "handoffs")).st_mode & 0o777 == 0o777, "not 0777")

        d = env.start(name="d0", conf=conf, wait=False)
        started = True
        try:
            d.wait_message("READY=1", timeout=10 * hdtest.SLOW)
        except hdtest.Fail:
            started = False
        rc = d.proc.poll()
        check(started, f"the daemon did not start (exit {rc}) because of mallory's handoffs/:\n"
              f"{d.logs()}")
        print("- start with mallory's handoffs/ 0777: ready")

        to_m = hdproto.build("bob", "mallory", env.key, ttl=600)
        hdproto.drop(env.spool, to_m)
        t = hdtest.handoff_latency(env, "bob", "alice")
        print(f"- bob -> alice delivered in {t:.2f}s")
        hdtest.wait_for(lambda: "Left " in d.logs() and to_m["handoff_id"] in d.logs(),
                        what="the handoff to mallory looked at")
        check(to_m["handoff_id"] + ".json" in env.names("handoff"),
              f"the handoff to mallory did not wait: handoff {env.names('handoff')} "
              f"rejected {env.names('rejected')} claimed {env.names('claimed')}")
        check(not os.listdir(os.path.join(sd, "handoffs")), "a bootstrap went into the 0777 handoffs/")
        log = [ln for ln in d.logs().splitlines() if "Not serving agent mallory" in ln]
        check(log and "writable by others" in log[0], f"no log line for mallory:\n{d.logs()}")
        print(f"- log: {log[0].strip()}")

        rc, st = status(env, conf)
        oos = st.get("agents_out_of_service") or {}
        check(rc == 1 and "mallory" in oos and "alice" not in oos and
              "writable by others" in oos["mallory"],
              f"status --json: exit {rc}, agents_out_of_service {oos}, problems {st.get('problems')}")
        p = env.ctl("status", "-c", conf)
        line = [ln for ln in p.stdout.splitlines() if "agent mallory is out of service" in ln]
        check(line, f"status text without mallory's state:\n{p.stdout}")
        print(f"- status (exit {rc}): {line[0].strip()}")

        # A reload with it still broken is no refusal: alice stays served.
        d.send(signal.SIGHUP)
        hdtest.wait_for(lambda: d.logs().count("Reloaded") >= 1, what="reload")
        check("Reload failed" not in d.logs(), f"reload refused:\n{d.logs()}")
        t = hdtest.handoff_latency(env, "bob", "alice")
        print(f"- SIGHUP with mallory's handoffs/ still 0777: reloaded; bob -> alice in {t:.2f}s")

        # Fixed (the operator puts the directory back): a SIGHUP serves it.
        hd = os.path.join(sd, "handoffs")
        os.rmdir(hd)
        os.rename(os.path.join(sd, "old"), hd)
        d.send(signal.SIGHUP)
        hdtest.wait_for(lambda: d.logs().count("Reloaded") >= 2, what="second reload")
        boot = os.path.join(hd, to_m["handoff_id"] + ".json")
        hdtest.wait_for(lambda: os.path.exists(boot), timeout=10 * hdtest.SLOW,
                        what="mallory's handoff delivered after the fix")
        rc, st = status(env, conf)
        check(rc == 0 and not st.get("agents_out_of_service"),
              f"after the fix: exit {rc}, {st.get('agents_out_of_service')}, {st.get('problems')}")
        check(d.stop() == 0, "exit 0")
        print("- fixed and reloaded: mallory's handoff delivered, status healthy")


if __name__ == "__main__":
    hdtest.run(main)
