"""Attack (issue 34.2): a producer swaps a directory of hers in for her file.

Mallory, a member of the spool's group (her own uid; the daemon under its
own, with the shipped modes), drops valid handoffs bob -> alice and, for
each, swaps handoff/NAME with a directory of hers (mode 0777, holding a
file: data she would store) in a tight loop (renameat2(RENAME_EXCHANGE)),
until the daemon takes what is at NAME.  Whatever the daemon checked
before a move by name may then be her directory:

 - moved to spent/ by a claim's leave_name(), the reaper met it, failed
   ("Is a directory") and stopped: every producer's file after it in
   spent/ stayed there for good;
 - moved to rejected/ by a rejection, where retention never removes it.

Asserted, after HD_ATTACK_SWAP_N rounds (60) of the swap loop: no
directory of hers is in spent/ or rejected/ (each is back in tmp/ or
handoff/, hers), spent/ empties once intake is quiet, and a later
handoff's file is freed from spent/ too (the reaper goes on).

A second part puts a directory into spent/ the way an earlier version
let her (as root, beside producers' files): the reaper frees the files,
skips the directory, says so in one line however many reaps follow, and
the daemon's error counter does not grow.  A third makes spent/
unlistable for the daemon's user (mode 0300) through several claims and
sweeps: one error line (issue 33: one every reap, without back-off), and
spent/ is emptied once it can be listed again.

Runs as root; the daemon, mallory and alice are throwaway uids/gids."""

import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47480       # the spool's group ("handoff"); the daemon's group
DAEMON = 47481          # the daemon's user ("handoffd")
MALLORY = 47482         # a producer, in the spool's group
ALICE = 47483           # alice's user and group

N = int(os.environ.get("HD_ATTACK_SWAP_N", "60"))
ROUND_MAX = 3.0         # s of swapping per round at most
BOUND = 20              # s: spent/ emptied, a handoff delivered (loaded machine)

# Mallory's side, as her own uid: for each (name, text) of the docs file,
# a directory tmp/d<i> (0777, a file in it), the handoff published as
# handoff/<name>, then the two exchanged until the exchange fails (the
# daemon moved what was at handoff/<name>) or ROUND_MAX passes.  Prints
# one JSON line of counts.
ATTACKER = r"""
import ctypes, errno, json, os, sys, time
spool, docs_path, round_max = sys.argv[1], sys.argv[2], float(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
AT_FDCWD, RENAME_EXCHANGE = -100, 2
with open(docs_path) as f:
    docs = json.load(f)
n = {"rounds": 0, "swaps": 0, "file_taken": 0, "dir_taken": 0, "timeout": 0, "errors": {}}
for i, (name, text) in enumerate(docs):
    d = os.path.join(spool, "tmp", "d%d" % i)
    os.mkdir(d)
    os.chmod(d, 0o777)
    with open(os.path.join(d, "stored"), "w") as f:
        f.write("mallory's data %d\n" % i)
    t = os.path.join(spool, "tmp", "." + name + ".tmp")
    with open(t, "w") as f:
        f.write(text)
    os.chmod(t, 0o644)
    x = os.path.join(spool, "handoff", name)
    os.rename(t, x)
    bx, bd = x.encode(), d.encode()
    end = time.monotonic() + round_max
    n["rounds"] += 1
    while True:
        if libc.renameat2(AT_FDCWD, bx, AT_FDCWD, bd, RENAME_EXCHANGE) != 0:
            e = errno.errorcode.get(ctypes.get_errno(), "?")
            n["errors"][e] = n["errors"].get(e, 0) + 1
            break
        n["swaps"] += 1
        if n["swaps"] % 64 == 0 and time.monotonic() > end:
            n["timeout"] += 1
            break
    if os.path.isdir(d):
        n["file_taken"] += 1
    else:
        n["dir_taken"] += 1
print(json.dumps(n))
"""


def dirs_in(env, state):
    p = env.path(state)
    try:
        return sorted(n for n in os.listdir(p) if os.path.isdir(os.path.join(p, n)))
    except FileNotFoundError:
        return []


def files_in(env, state):
    p = env.path(state)
    return sorted(n for n in os.listdir(p) if not os.path.isdir(os.path.join(p, n)))


def hers(env):
    """Where mallory's directories are: state -> count."""
    out = {}
    for state in ("tmp", "handoff", "spent", "rejected", "claimed", "archive"):
        p = env.path(state)
        for n in os.listdir(p):
            q = os.path.join(p, n)
            if os.path.isdir(q) and os.lstat(q).st_uid == MALLORY:
                out[state] = out.get(state, 0) + 1
    return out


def deployed(env):
    dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
    text = env.config_text("d0").replace("rescan_interval = 5", "rescan_interval = 1")
    d, conf = dep.start(text=text)
    return dep, d


def part_swap():
    """The swap loop against claims and rejections, N rounds."""
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep, d = deployed(env)
        docs = []
        for i in range(N):
            doc = hdproto.build("bob", "alice", env.key, ttl=600,
                                transcript=[{"role": "user", "text": f"swap {i}"}])
            docs.append([f"s{i:03d}-{doc['handoff_id']}.json", hdproto.dumps(doc).decode()])
        docs_path = os.path.join(env.dir, "docs.json")
        with open(docs_path, "w") as f:
            json.dump(docs, f)
        os.chmod(docs_path, 0o644)
        py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        t0 = time.monotonic()
        p = subprocess.run([py, "-c", ATTACKER, env.spool, docs_path, str(ROUND_MAX)],
                           user=MALLORY, group=SPOOL_GID, extra_groups=[SPOOL_GID],
                           capture_output=True, text=True, timeout=N * ROUND_MAX * 2 + 60)
        check(p.returncode == 0, f"the attacker failed: exit {p.returncode}: {p.stderr[-2000:]}")
        n = json.loads(p.stdout.strip().splitlines()[-1])
        print(f"    mallory, {time.monotonic() - t0:.1f}s: {n['rounds']} rounds, {n['swaps']} swaps; "
              f"the daemon took her file {n['file_taken']} times, her directory "
              f"{n['dir_taken']} times ({n['timeout']} rounds timed out); exchange ended by "
              f"{n['errors']}")
        # A plain handoff after the attack: delivered, and its file too
        # must leave spent/.
        lat = hdtest.handoff_latency(env)

        def spent_empty():
            return not os.listdir(env.path("spent"))
        emptied = True
        try:
            hdtest.wait_for(spent_empty, BOUND, "spent/ emptied")
        except hdtest.Fail:
            emptied = False
        where = hers(env)
        sdirs, rdirs = dirs_in(env, "spent"), dirs_in(env, "rejected")
        returned = len(re.findall(r"[Rr]eturned .* to handoff/", d.logs()))
        print(f"    after: spent/ {len(files_in(env, 'spent'))} files, {len(sdirs)} directories; "
              f"rejected/ {len(rdirs)} directories; her directories by state {where}; "
              f"bob->alice {lat * 1000:.0f} ms; {returned} returned by the daemon")
        check(not sdirs, f"{len(sdirs)} directories of hers were moved into spent/ "
              f"(by name, after her file was checked): {sdirs[:5]}")
        check(not rdirs, f"{len(rdirs)} directories of hers were moved into rejected/, where "
              f"retention never removes them: {rdirs[:5]}")
        check(emptied, f"spent/ not emptied {BOUND}s after the attack: "
              f"{len(files_in(env, 'spent'))} producers' files stay there for good "
              f"(first {files_in(env, 'spent')[:5]})")
        check(sum(where.values()) == N and set(where) <= {"tmp", "handoff"},
              f"her {N} directories are not all where she put them (tmp/, handoff/): {where}")
        check(d.stop() == 0, "exit 0")


def part_reaper_skips():
    """A directory in spent/ (an earlier version's swap), beside files:
    the files go, the directory stays, one line says so."""
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep, d = deployed(env)
        for i in range(3):
            hdtest.handoff_latency(env)
        hdtest.wait_for(lambda: not os.listdir(env.path("spent")), BOUND, "spent/ emptied")
        d.stop()
        stuck = env.path("spent", "1")
        os.mkdir(stuck)
        with open(os.path.join(stuck, "stored"), "w") as f:
            f.write("mallory's data\n")
        os.chown(stuck, MALLORY, SPOOL_GID)
        os.chmod(stuck, 0o777)
        spent = env.path("spent")
        for i in range(40):
            with open(os.path.join(spent, str(900000 + i)), "w") as f:
                f.write("{}")
        d, conf = dep.start(name="d1", text=env.config_text("d1").replace(
            "rescan_interval = 5", "rescan_interval = 1"))
        e0 = d.status()["counters"]["errors"]
        # claims, each followed by quiet: a reap after each
        for i in range(4):
            hdtest.handoff_latency(env)
            hdtest.wait_for(lambda: files_in(env, "spent") == [], BOUND, "spent/ files freed")
        # and a few seconds of rescans and sweeps, in which nothing is reaped
        c0 = d.status()["counters"]["rescans"]
        hdtest.wait_for(lambda: d.status()["counters"]["rescans"] >= c0 + 3, BOUND, "3 rescans")
        e1 = d.status()["counters"]["errors"]
        lines = [ln for ln in d.logs().splitlines() if "spent/" in ln and "1" in ln and
                 ("directory" in ln.lower() or "cannot" in ln.lower())]
        print(f"    spent/ after 4 claims: files {files_in(env, 'spent')}, directories "
              f"{dirs_in(env, 'spent')}; {len(lines)} line(s) about it; errors {e0} -> {e1}")
        for ln in lines[:3]:
            print(f"      {ln}")
        check(files_in(env, "spent") == [], "the reaper stopped at the directory")
        check(dirs_in(env, "spent") == ["1"], "the directory (not a producer's file) was removed")
        check(len(lines) == 1, f"{len(lines)} lines about the directory in spent/, not one")
        check(e1 == e0, f"the daemon's errors grew {e0} -> {e1} for a directory it skips")
        check(d.stop() == 0, "exit 0")


def part_reaper_backoff():
    """spent/ that the daemon's user cannot list (mode 0300: files still
    move in): tried again later and later, one error line, not one at
    each claim or sweep; reaped once it can be listed again."""
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep, d = deployed(env)
        spent = env.path("spent")
        os.chmod(spent, 0o300)
        e0 = d.status()["counters"]["errors"]
        for i in range(3):
            hdtest.handoff_latency(env)
        hdtest.wait_for(lambda: "Cannot empty spent/" in d.logs(), BOUND, "the reap failed")
        # claims and sweeps for a few seconds: each re-armed the reap
        t0 = time.monotonic()
        for i in range(4):
            hdtest.handoff_latency(env)
            c0 = d.status()["counters"]["rescans"]
            hdtest.wait_for(lambda: d.status()["counters"]["rescans"] >= c0 + 1, BOUND, "a rescan")
        lines = [ln for ln in d.logs().splitlines() if "Cannot empty spent/" in ln]
        e1 = d.status()["counters"]["errors"]
        print(f"    spent/ mode 0300, 7 claims over {time.monotonic() - t0 + 1:.1f}s: "
              f"{len(lines)} error line(s), errors {e0} -> {e1}")
        os.chmod(spent, 0o700)
        emptied = True
        try:
            hdtest.wait_for(lambda: not os.listdir(spent), 2 * BOUND, "spent/ emptied")
        except hdtest.Fail:
            emptied = False
        print(f"    mode 0700 again: spent/ {'emptied' if emptied else 'still holds'} "
              f"{len(os.listdir(spent))}")
        check(len(lines) == 1, f"{len(lines)} lines for one spent/ that cannot be listed, not one")
        check(e1 - e0 == 1, f"the daemon's errors grew {e0} -> {e1} for one failing reap")
        check(emptied, "spent/ not emptied once it could be listed again")
        check(d.stop() == 0, "exit 0")


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    failed = []
    parts = (part_swap, part_reaper_skips, part_reaper_backoff)
    for part in parts:
        print(f"{part.__name__}:")
        try:
            part()
        except hdtest.Fail as e:
            print(f"FAIL {part.__name__}: {e}")
            failed.append(f"{part.__name__}: {e}")
    check(not failed, f"{len(failed)} of {len(parts)} parts failed:\n  " + "\n  ".join(failed))


if __name__ == "__main__":
    hdtest.run(main)
