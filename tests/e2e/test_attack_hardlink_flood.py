"""Attack (issue 34.7): a hard-link flood.  Mallory, a member of the
spool's group (her own uid; the daemon under its own, with the shipped
modes), keeps one small file of hers in handoff/ under a dotfile name and
makes HD_ATTACK_HARDLINK_N (2,000; the issue's 20,000) links of it there.

Each name has a second link, so each is looked at as what a power cut
could leave of a move (a claim's file in spent/, a rejection, an
outbox/ entry beside the handoff/ name).  The daemon looked for the other
link by listing claimed/ and rejected/ in full for every name, found the
first name's rejection for every later one, synced and logged a
"left beside its rejection by a power cut" line for each, and bob's
handoffs waited meanwhile.  It now looks only where it would itself have
put the other link, and the names of a file it has rejected already go
with one line for the lot.

Figures: bob -> alice latency before and while the flood is decided (the
worst of the handoffs bob sends one after another until handoff/ holds
no link any more), the time the flood takes, and the daemon's log lines
naming the flood's files.  Asserted: bob's worst latency under 1 s, at
most 3 lines for the lot, the file kept in rejected/ once with its
reason, no error."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47490       # the spool's group ("handoff"); the daemon's group
DAEMON = 47491          # the daemon's user ("handoffd")
MALLORY = 47492         # a producer, in the spool's group
ALICE = 47493           # alice's user and group

N = int(os.environ.get("HD_ATTACK_HARDLINK_N", "2000"))
LIVED_IN = 100          # claimed items and rejections already in the spool
LATENCY_MAX = 1.0       # s: bob's worst handoff under the flood
LINES_MAX = 3
BOUND = 60 + N / 50     # s: the flood decided (7439fbb: ~4 ms a name)

# Mallory's side, as her own uid: handoff/.flood (a dotfile: never looked
# at), then N links of it, handoff/flood-<i>.json.
ATTACKER = r"""
import os, sys, time
h, n = sys.argv[1], int(sys.argv[2])
orig = os.path.join(h, ".flood")
with open(orig, "w") as f:
    f.write('{"flood": true}')
os.chmod(orig, 0o644)
t0 = time.monotonic()
for i in range(n):
    os.link(orig, os.path.join(h, "flood-%05d.json" % i))
print("%.2f" % (time.monotonic() - t0))
"""


def flood_names(env):
    return [n for n in os.listdir(env.path("handoff")) if n.startswith("flood-")]


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        text = env.config_text("d0").replace("rescan_interval = 5", "rescan_interval = 1")
        d, conf = dep.start(text=text)
        # A spool in use: claimed items, and rejections, to list.
        for i in range(LIVED_IN):
            hdproto.drop(env.spool, hdproto.build("bob", "alice", env.key, ttl=600))
            with open(env.path("handoff", f"junk-{i}.json"), "w") as f:
                f.write("{}")
        hdtest.wait_for(lambda: env.count("claimed") >= LIVED_IN and
                        env.count("rejected") >= LIVED_IN, 60, "the spool in use")
        before = [hdtest.handoff_latency(env) for _ in range(5)]
        lines0 = len(d.logs().splitlines())

        py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        p = subprocess.run([py, "-c", ATTACKER, env.path("handoff"), str(N)], user=MALLORY,
                           group=SPOOL_GID, extra_groups=[SPOOL_GID], capture_output=True,
                           text=True, timeout=120 * hdtest.SLOW)
        check(p.returncode == 0, f"the attacker failed: exit {p.returncode}: {p.stderr[-2000:]}")
        t0 = time.monotonic()
        # bob sends one handoff after another while the flood is decided
        # (at least 3, however soon it is)
        under, took = [], None
        deadline = t0 + BOUND * hdtest.SLOW
        while (flood_names(env) or len(under) < 3) and time.monotonic() < deadline:
            if took is None and not flood_names(env):
                took = time.monotonic() - t0
            under.append(hdtest.handoff_latency(env, timeout=BOUND))
        if took is None:
            took = time.monotonic() - t0
        left = len(flood_names(env))
        # a status answered (a later loop turn) before the log is read: the
        # lines of the turn that wrote the last bootstrap are out by then
        errors = d.status()["counters"]["errors"]
        logs = d.logs().splitlines()[lines0:]
        lines = [ln for ln in logs if "flood-" in ln]
        rej = [n for n in env.items("rejected") if n.startswith("flood-")]
        orig = os.stat(env.path("handoff", ".flood"))
        print(f"    {N} links made in {p.stdout.strip()}s; decided in {took:.1f}s ({left} left)")
        print(f"    bob -> alice before: worst {max(before) * 1000:.0f} ms; while the flood is "
              f"decided ({len(under)} handoffs): worst {max(under) * 1000:.0f} ms, median "
              f"{sorted(under)[len(under) // 2] * 1000:.0f} ms")
        print(f"    {len(lines)} log line(s) naming the flood's files; rejected/: {len(rej)} of them; "
              f"the file has {orig.st_nlink} link(s) left; errors {errors}")
        for ln in lines[:3]:
            print(f"      {ln}")
        check(left == 0, f"{left} of the {N} links still in handoff/ after {took:.0f}s")
        check(max(under) < LATENCY_MAX,
              f"bob's handoff took {max(under) * 1000:.0f} ms under the flood (before: worst "
              f"{max(before) * 1000:.0f} ms)")
        check(len(lines) <= LINES_MAX, f"{len(lines)} log lines for one file's {N} links")
        check(len(rej) == 1 and env.reason_of(rej[0])["reason"] == "hardlink" and
              os.stat(env.path("rejected", rej[0])).st_ino == orig.st_ino,
              f"the file is not kept once in rejected/ as a hardlink: {rej[:5]}")
        check(errors == 0, f"{errors} errors")
        check(d.stop() == 0, "exit 0")


if __name__ == "__main__":
    hdtest.run(main)
