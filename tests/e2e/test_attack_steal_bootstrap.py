"""Attack (issue 19.1, theft): a member of the spool's group runs
`handoffctl consume --state-dir <alice's state dir>` and takes bob's
handoff to alice; the daemon archives it as consumed and alice gets "no
fresh handoff".

- with the agents' directories of the README's old advice (group of the
  spool, 2770) the daemon does not serve alice (issue 24.3: it still
  starts), so nothing is delivered where the group could take it;
- with the shipped layout (owner the daemon, group alice's own, 2770,
  made by the daemon itself under a setgid state_dir of alice's group)
  the member's consume fails on permissions, the bootstrap stays, the
  item stays claimed, and alice then takes it.

Runs as root; the member and alice are throwaway uids/gids."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47420
MALLORY = 47421
ALICE = 47422


def as_user(uid, gid, groups, argv):
    return subprocess.run(argv, user=uid, group=gid, extra_groups=groups,
                          capture_output=True, text=True, timeout=30 * hdtest.SLOW)


def main():
    with hdtest.Env(agents=["alice"], shared=True) as env:
        for d in ("", "tmp", "handoff"):
            p = os.path.join(env.spool, d)
            os.makedirs(p, exist_ok=True)
            os.chown(p, 0, SPOOL_GID)
            os.chmod(p, 0o3770 if d else 0o750)
        sd = env.state["alice"]
        os.makedirs(sd)

        # The old advice: the state dir in the spool's group, 2770.
        os.chown(sd, 0, SPOOL_GID)
        os.chmod(sd, 0o2770)
        d = env.start()
        early = hdproto.build("bob", "alice", env.key, ttl=600)
        hdproto.drop(env.spool, early)
        hdtest.wait_for(lambda: early["handoff_id"] in d.logs(), what="the handoff looked at")
        check("Not serving agent alice" in d.logs() and "writable by the spool's group" in d.logs(),
              f"reason not logged:\n{d.logs()}")
        check(early["handoff_id"] + ".json" in env.names("handoff") and
              not os.path.exists(os.path.join(sd, "handoffs")),
              f"delivered into a state_dir the spool's group may write: {env.names('handoff')}")
        os.unlink(env.path("handoff", early["handoff_id"] + ".json"))
        check(d.stop() == 0, "exit 0")
        print("- state_dir group-writable by the spool's group: alice not served, the handoff waits")

        # The shipped layout: alice's group on a setgid state_dir; the
        # daemon makes handoffs/ itself (it inherits alice's group).
        os.chown(sd, 0, ALICE)
        os.chmod(sd, 0o2770)
        d = env.start(name="d1")
        hd = os.path.join(sd, "handoffs")
        st = os.stat(hd)
        check(st.st_gid == ALICE and (st.st_mode & 0o7777) == 0o2770,
              f"handoffs/ made as group {st.st_gid} mode {oct(st.st_mode & 0o7777)}")
        doc = hdproto.build("bob", "alice", env.key)
        hdproto.drop(env.spool, doc)
        boot = os.path.join(hd, doc["handoff_id"] + ".json")
        hdtest.wait_for(lambda: os.path.exists(boot), what="bootstrap")

        p = as_user(MALLORY, SPOOL_GID, [SPOOL_GID],
                    [env.for_others(hdtest.HANDOFFCTL), "consume", "--state-dir", sd, "--no-verify"])
        check(p.returncode != 0, f"the member took alice's handoff:\n{p.stdout}")
        check(os.path.exists(boot), "the bootstrap is gone")
        time.sleep(0.3)
        check(env.count("claimed") == 1 and env.count("archive") == 0,
              f"item no longer claimed: claimed {env.names('claimed')} archive {env.names('archive')}")
        print(f"- the member's consume --state-dir: exit {p.returncode}: {p.stderr.strip()}")
        p = as_user(MALLORY, SPOOL_GID, [SPOOL_GID], ["/bin/ls", hd])
        check(p.returncode != 0, "the member can list alice's handoffs/")

        # Alice takes it.
        p = as_user(ALICE, ALICE, [ALICE],
                    [env.for_others(hdtest.HANDOFFCTL), "consume", "--state-dir", sd, doc["handoff_id"]])
        check(p.returncode == 0, f"alice could not consume: {p.returncode}: {p.stderr}")
        check(json.loads(p.stdout)["handoff_id"] == doc["handoff_id"], "alice got another one")
        check("origin is not checked" in p.stderr, f"no warning without a key: {p.stderr!r}")
        hdtest.wait_for(lambda: env.count("archive") == 1, what="archived as consumed")
        check(d.stop() == 0, "exit 0")
        print("- alice consumes it; archived as consumed")


if __name__ == "__main__":
    hdtest.run(main)
