"""Attack (issue 25, c): an inflated file makes retention prune.

Mallory, a producer (her own user, in the spool's group), has handed over
4 handoffs, all consumed and archived, older than the replay window
(max_window + max_clock_skew), with archive_max_bytes = 1M.  She runs
`truncate -s 1536M` on her archived record (4 KiB on disk, 1.5 GiB by
st_size): a retention pass must not prune any record.  Where archive
records are the daemon's (issue 25's layout) her truncate fails (EACCES,
EPERM: the expected outcome); and retention counts what a record really
holds (st_blocks), so a sparse record (made here as root, the rule itself)
prunes nothing either.

Rejected items stay the producer's inodes: her junk file in rejected/,
inflated the same way, must not count its apparent size either (neither
in retention nor in the bytes `handoffctl status` says retention bounds).

A retention pass is known to have run after the inflation when the
metrics textfile, written right after each pass, has been written twice.

Runs as root; the daemon and mallory are throwaway uids/gids."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47460       # the spool's group ("handoff"); the daemon's group
DAEMON = 47461          # the daemon's user ("handoffd")
MALLORY = 47462         # a producer, in the spool's group
ALICE = 47463           # alice's group

WINDOW = 5              # max_window, s (max_clock_skew 0): the replay window; the handoffs live as long
N = 4
BIG = 1536 << 20        # truncate -s 1536M
MAX_BYTES = 1 << 20     # archive_max_bytes = 1M


def mtime_ino(path):
    try:
        st = os.stat(path)
        return (st.st_ino, st.st_mtime_ns)
    except FileNotFoundError:
        return None


def sizes(env, state):
    out = {}
    for n in env.names(state):
        st = os.stat(env.path(state, n))
        out[n] = (st.st_size, st.st_blocks * 512)
    return out


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        metrics = os.path.join(dep.run_dir, "metrics.prom")
        text = env.config_text("d0").replace(
            "rescan_interval = 5",
            f"rescan_interval = 1\nmax_window = {WINDOW}\nmax_clock_skew = 0") + \
            f"\n[retention]\narchive_max_bytes = 1M\n\n[metrics]\ntextfile = {metrics}\n"
        d, conf = dep.start(text=text)

        # 4 of hers, consumed and archived; 2 junk files of hers, rejected.
        ids = []
        for _ in range(N):
            doc = hdproto.build("bob", "alice", env.key, ttl=WINDOW)
            err = dep.as_user(MALLORY, [], "drop", env.path("handoff", doc["handoff_id"] + ".json"),
                              hdproto.dumps(doc).decode())
            check(err is None, f"mallory could not drop: {err}")
            ids.append(doc["handoff_id"])
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == N, what=f"{N} delivered")
        for i in ids:
            check(hdtest.real_consumer(env.state["alice"], i), f"{i} consumed")
        for k in range(2):
            err = dep.as_user(MALLORY, [], "drop", env.path("handoff", f"junk-{k}.json"), "not json")
            check(err is None, f"mallory could not drop junk: {err}")
        hdtest.wait_for(lambda: env.count("archive") == N and env.count("rejected") == 2 and
                        len(env.names("archive")) == 2 * N, what=f"{N} archived, 2 rejected")
        arch = env.items("archive")
        rej = env.items("rejected")
        check(all(i in "".join(arch) for i in ids), f"archive/ holds {arch}")

        # All of them older than the replay window: prunable, were they over.
        newest = max(os.stat(env.path(s, n)).st_ctime for s in ("archive", "rejected")
                     for n in env.names(s))
        hdtest.wait_for(lambda: time.time() > newest + WINDOW + 0.5, timeout=WINDOW + 10,
                        what="the records older than the replay window")
        hdtest.wait_for(lambda: mtime_ino(metrics), what="the metrics textfile")
        check(sorted(env.items("archive")) == sorted(arch), "pruned before any inflation")

        failed = []

        def two_passes(what):
            """Two metrics writes: at least one whole retention pass since."""
            seen = [mtime_ino(metrics)]

            def passes():
                m = mtime_ino(metrics)
                if m != seen[-1]:
                    seen.append(m)
                return len(seen) >= 3
            hdtest.wait_for(passes, timeout=15, what=f"two retention passes after {what}")
            left = env.items("archive")
            pruned = [ln.split("]: ", 1)[-1] for ln in d.logs().splitlines()
                      if "Retention removed" in ln and "ids/" not in ln]
            print(f"- two retention passes later: archive/ {len(left)} of {N} records left, "
                  f"rejected/ {len(env.items('rejected'))} of 2; pruned counter "
                  f"{d.status()['counters']['pruned']}; log {pruned}")
            for n, (size, disk) in sorted(sizes(env, "archive").items()) + \
                    sorted(sizes(env, "rejected").items()):
                if size >= BIG:
                    print(f"  {n}: st_size {size}, on disk {disk}")
            return sorted(set(arch) - set(left))

        # 1. Her archived record, her rejected junk.
        mine = [n for n in arch if os.stat(env.path("archive", n)).st_uid == MALLORY]
        victim = arch[0]
        err_a = dep.as_user(MALLORY, [], "truncate", env.path("archive", victim), str(BIG))
        err_r = dep.as_user(MALLORY, [], "truncate", env.path("rejected", rej[0]), str(BIG))
        print(f"- archive/ records owned by mallory: {len(mine)} of {N}; "
              f"mallory: truncate -s 1536M archive/{victim}: {'done' if err_a is None else err_a}; "
              f"rejected/{rej[0]}: {'done' if err_r is None else err_r}")
        check(err_a in (None, "EACCES", "EPERM"), f"truncate archive: unexpected {err_a}")
        check(err_r in (None, "EACCES", "EPERM"), f"truncate rejected: unexpected {err_r}")
        gone = two_passes("mallory's truncate")
        if gone:
            failed.append(f"mallory's truncate -s 1536M of her archived record "
                          f"({'done' if err_a is None else err_a}) made retention "
                          f"(archive_max_bytes {MAX_BYTES}) prune {len(gone)} of the {N - 1} other "
                          f"records older than the replay window: gone {gone}")
        if sorted(env.items("rejected")) != sorted(rej):
            failed.append(f"rejected/ pruned: {sorted(set(rej) - set(env.items('rejected')))}")

        # 2. The rule itself: a sparse record (as root) counts what it holds.
        if not gone:
            os.truncate(env.path("archive", arch[1]), BIG)
            print(f"- as root: truncate -s 1536M archive/{arch[1]} (a sparse record)")
            gone = two_passes("a sparse record")
            if gone:
                failed.append(f"a sparse archived record (1536M apparent, 4 KiB on disk) made "
                              f"retention prune {len(gone)} records: retention counts st_size, "
                              f"not st_blocks: gone {gone}")
        else:
            print("- the sparse record (as root): not tried, the records are gone already")

        # 3. What status says retention bounds in rejected/.
        p = env.ctl("status", "-c", conf, "--json")
        b = json.loads(p.stdout).get("bytes", {})
        print(f"- status bytes: archive {b.get('archive')}, rejected {b.get('rejected')}")
        if b.get("rejected", 0) >= MAX_BYTES:
            failed.append(f"rejected/ counted by apparent size: status says {b.get('rejected')} bytes "
                          f"for {len(env.items('rejected'))} small files (a producer's truncate "
                          f"-s 1536M of her rejected file counts)")
        for f in failed:
            print(f"FAIL: {f}")
        check(not failed, f"{len(failed)} failure(s): " + "; ".join(failed))
        check(d.stop() == 0, "exit 0")


if __name__ == "__main__":
    hdtest.run(main)
