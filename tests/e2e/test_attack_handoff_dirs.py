"""Attack (issue 34.5): directories in handoff/.  Mallory (her own user,
in the spool's group) makes N directories in handoff/ (modes 0755, 0700
and 0777, one holding a file, one whose name is not a safe name),
with the daemon as its own user, as packaged, rescanning every second.

A directory is no handoff and is never moved (in rejected/ it would be
hers to fill, out of retention's reach): each is reported once and left
where it is.  Over three rescans after every one has been reported: one
line per directory, no daemon error, no last_error, `handoffctl status`
healthy, every directory still in handoff/ and none in rejected/; and
bob's handoff is delivered meanwhile.  The daemon used to try to move
each, fail ("Permission denied"), and retry it for ever: an error line
per directory per retry and per rescan, a last_error that never cleared.

HD_ATTACK_DIRS_N (200) scales it (the issue's: 1000).  Runs as root; the
daemon, mallory and alice are throwaway uids/gids."""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47590       # the spool's group ("handoff"); the daemon's group
DAEMON = 47591          # the daemon's user ("handoffd")
MALLORY = 47592         # a member of the spool's group: the attacker
ALICE = 47593           # alice's group

N = int(os.environ.get("HD_ATTACK_DIRS_N", "200"))
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

# As her own user: the directories, then one file inside one of them.
MKDIRS = r"""
import os, sys
h, n = sys.argv[1], int(sys.argv[2])
names = ["dir-%04d" % i for i in range(n - 1)] + ["dir\tunsafe"]
for i, name in enumerate(names):
    p = os.path.join(h, name)
    os.mkdir(p)
    os.chmod(p, (0o755, 0o700, 0o777)[i % 3])
with open(os.path.join(h, "dir-0000", "inside.json"), "w") as f:
    f.write("{}")
print("\n".join(names))
"""


def main():
    check(os.geteuid() == 0, "needs root: mallory and the daemon are separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        text = env.config_text("d0").replace("rescan_interval = 5", "rescan_interval = 1")
        d, conf = dep.start(text=text)
        p = subprocess.run([PY, "-c", MKDIRS, env.path("handoff"), str(N)], user=MALLORY,
                           group=SPOOL_GID, extra_groups=[SPOOL_GID], capture_output=True,
                           text=True, timeout=60 * hdtest.SLOW)
        check(p.returncode == 0, f"mallory's mkdir: {p.stderr}")
        names = p.stdout.splitlines()

        def said(name):
            quoted = "".join(f"\\x{ord(ch):02x}" if ord(ch) < 0x20 else ch for ch in name)
            return d.logs().count(f"Left '{quoted}' in handoff/: a directory")

        # Each reported (the periodic rescan finds a mkdir: no inotify
        # event for it), then three more rescans.
        try:
            hdtest.wait_for(lambda: all(said(n) for n in names), 30, "every directory reported")
        except hdtest.Fail:
            pass
        r0 = d.status()["counters"]["rescans"]
        hdtest.wait_for(lambda: d.status()["counters"]["rescans"] >= r0 + 3, 30, "3 more rescans")
        lat = hdtest.handoff_latency(env, timeout=10)
        st = d.status()
        c = st["counters"]
        lines = {n: said(n) for n in names}
        ctl = env.ctl("status", "-c", conf, "--json")
        health = json.loads(ctl.stdout).get("health") if ctl.stdout.strip() else None
        errors_logged = len(re.findall(r"(?i)cannot process|permission denied", d.logs()))
        left = [n for n in names if os.path.isdir(env.path("handoff", n))]
        moved = [n for n in os.listdir(env.path("rejected")) if not n.endswith(".reason")]
        counts = sorted(set(lines.values()))
        print(f"{N} directories of mallory's in handoff/, {c['rescans'] - r0}+ rescans after: "
              f"lines per directory {counts}, {errors_logged} error lines, daemon errors "
              f"{c['errors']}, last_error {st.get('last_error')!r}, status {health} "
              f"(exit {ctl.returncode}); {len(left)} still in handoff/, {len(moved)} in "
              f"rejected/; bob's handoff {lat:.2f}s")
        check(all(v == 1 for v in lines.values()),
              f"not one line per directory: {[(n, v) for n, v in lines.items() if v != 1][:5]}")
        check(c["errors"] == 0 and st.get("last_error") is None and errors_logged == 0,
              f"daemon errors {c['errors']}, last_error {st.get('last_error')!r}, "
              f"{errors_logged} error lines")
        check(health == "healthy", f"status {health}: {ctl.stdout}")
        check(len(left) == N and not moved, f"{N - len(left)} gone from handoff/, rejected/ holds {moved[:5]}")
        check(os.path.exists(env.path("handoff", "dir-0000/inside.json")), "her file inside is gone")
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
