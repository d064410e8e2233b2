"""handoffctl wait against the real daemon: each outcome and its exit code.

- consumed (0): wait started before the take does not return at the claim,
  returns when the bootstrap is consumed; --json says so too;
- claimed with --until claimed (0), wait started before the handoff even
  exists (an id not in the spool yet is waited for);
- expired (1): claimed, never taken, past the resume window;
- rejected (1): expired on arrival (the file of that name), and
  expired_unclaimed for an agent not served here (the .reason names it);
- a forged file (bad MAC) that claims the id is not taken for its outcome;
- timeout (3) after --timeout, not before; --timeout 0 looks once;
- relayed (5): an archive record with outcome "relayed";
- no polling: while it waits, wait makes a handful of system calls.
"""

import json
import os
import re
import shutil
import subprocess
import threading
import sys
import tempfile
import time
from datetime import timedelta

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check, HANDOFFCTL  # noqa: E402

WINDOW = 2


def start_wait(conf, hid, *args):
    return subprocess.Popen([HANDOFFCTL, "wait", "-c", conf, hid, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, timeout=20):
    out, err = p.communicate(timeout=timeout * hdtest.SLOW)
    return p.returncode, out.strip(), err.strip()


def still_running(p, secs):
    """p reached its wait (its inotify watches are up: a condition, not a
    guess of how long start-up takes) and is still waiting secs later."""
    hdtest.wait_watching(p, what="handoffctl wait")
    time.sleep(secs)
    return p.poll() is None


def submit(env, to="alice", hid=None, ttl=600):
    args = ["submit", "--spool", env.spool, "--key", env.key_path, "--from", "bob",
            "--to", to, "--reason", "wait test", "--ttl", str(ttl)]
    if hid:
        args += ["--id", hid]
    return env.ctl(*args, check_rc=0).stdout.strip()


def main():
    with hdtest.Env(agents=["alice"]) as env:
        conf = env.write_config("d0", text=env.config_text("d0").replace(
            "rescan_interval = 5", f"rescan_interval = 1\nresume_window = {WINDOW}"))
        d = env.start(conf=conf)

        # --- claimed, with --until claimed, started before the handoff exists
        hid = "wait-claimed-1"
        w = start_wait(conf, hid, "--until", "claimed")
        check(still_running(w, 0.3), "wait for an id not in the spool yet keeps waiting")
        submit(env, hid=hid)
        rc, out, err = finish(w)
        check(rc == 0 and out == f"{hid} claimed", f"--until claimed: rc {rc} out {out!r} err {err!r}")
        check(f"{hid} is not in {env.spool} (yet); waiting for it to arrive" in err,
              f"the wait for an id not there yet said so: {err!r}")
        print(f"ok: --until claimed -> 0: {out}")

        # --- a mistyped id (issue 47.7): said at once, not after the timeout
        w = subprocess.Popen([HANDOFFCTL, "wait", "-c", conf, "wait-claimde-1", "--timeout", "1h"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = []
        reader = threading.Thread(target=lambda: first.append(w.stderr.readline()), daemon=True)
        reader.start()
        reader.join(10 * hdtest.SLOW)
        w.kill()
        w.wait()
        check(first and "wait-claimde-1 is not in" in first[0] and "waiting up to 3600s" in first[0],
              f"a mistyped id is told at once: {first!r}")
        print(f"ok: an id not in the spool: {first[0].strip()}")

        # --- consumed: not at the claim, at the take
        w = start_wait(conf, hid, "--json")
        check(still_running(w, 0.5), "without --until, a claimed handoff is still waited for")
        env.ctl("consume", "-c", conf, "--agent", "alice", hid, check_rc=0)
        rc, out, err = finish(w)
        j = json.loads(out)
        check(rc == 0 and j["status"] == "consumed" and j["handoff_id"] == hid and j["outcome"] == "consumed",
              f"consumed: rc {rc} out {out!r} err {err!r}")
        print(f"ok: consumed -> 0 (--json status {j['status']}, to_agent {j.get('to_agent')})")
        # and once it is over, wait answers at once
        p = env.ctl("wait", "-c", conf, hid, "--timeout", "0")
        check(p.returncode == 0 and p.stdout.strip() == f"{hid} consumed", f"wait after the end: {p.returncode} {p.stdout!r}")

        # --- expired: claimed, never taken
        hid = submit(env)
        w = start_wait(conf, hid)
        t0 = time.monotonic()
        rc, out, err = finish(w, timeout=30)
        check(rc == 1 and out == f"{hid} expired", f"expired: rc {rc} out {out!r} err {err!r}")
        print(f"ok: expired -> 1 after {time.monotonic() - t0:.1f} s (resume window {WINDOW} s)")

        # --- rejected: expired on arrival (rejected before it counts as
        # authenticated: the file of that name is the record)
        doc = hdproto.build("bob", "alice", env.key, at=hdproto.now() - timedelta(seconds=120), ttl=60)
        hid = doc["handoff_id"]
        w = start_wait(conf, hid)
        hdproto.drop(env.spool, doc)
        rc, out, err = finish(w)
        check(rc == 1 and out.startswith(f"{hid} rejected: expired"), f"rejected: rc {rc} out {out!r} err {err!r}")
        print(f"ok: rejected (expired on arrival) -> 1: {out}")

        # --- rejected: expired_unclaimed, an authenticated rejection under
        # another file name
        doc = hdproto.build("bob", "carol", env.key, ttl=3)
        hid = doc["handoff_id"]
        w = start_wait(conf, hid, "--json")
        hdproto.drop(env.spool, doc, name="some-other-name.json")
        rc, out, err = finish(w, timeout=30)
        j = json.loads(out) if out else {}
        check(rc == 1 and j.get("status") == "rejected" and j.get("reason") == "expired_unclaimed",
              f"expired_unclaimed: rc {rc} out {out!r} err {err!r}")
        print(f"ok: rejected (expired_unclaimed, file some-other-name.json) -> 1")

        # --- a forged file naming the id is no outcome for it
        real = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = real["handoff_id"]
        forged = dict(real, reason="forged")  # the MAC no longer matches
        hdproto.drop(env.spool, forged, name="forged.json")
        hdtest.wait_for(lambda: "forged.json" in env.items("rejected"), what="forged file rejected")
        p = env.ctl("wait", "-c", conf, hid, "--timeout", "1")
        check(p.returncode == 3, f"a forged file claiming {hid}: wait must time out, got {p.returncode} {p.stdout!r}")
        print("ok: a forged file (bad_mac) claiming the id does not end the wait")

        # --- timeout: after the time, not before
        t0 = time.monotonic()
        p = env.ctl("wait", "-c", conf, "never-submitted-1", "--timeout", "1")
        dt = time.monotonic() - t0
        check(p.returncode == 3 and "timeout" in p.stdout and 0.9 <= dt < 5 * hdtest.SLOW,
              f"timeout: rc {p.returncode} after {dt:.2f} s: {p.stdout!r}")
        print(f"ok: timeout -> 3 after {dt:.2f} s")
        p = env.ctl("wait", "-c", conf, "never-submitted-1", "--timeout", "0", "--json")
        j = json.loads(p.stdout)
        check(p.returncode == 3 and j["status"] == "timeout" and j["last_status"] == "unknown",
              f"--timeout 0: {p.returncode} {p.stdout!r}")
        hid = submit(env, hid="pending-one-1", to="dave")    # nobody serves dave: stays pending
        p = env.ctl("wait", "-c", conf, hid, "--timeout", "0", "--json")
        check(p.returncode == 3 and json.loads(p.stdout)["last_status"] == "pending", f"pending: {p.stdout!r}")

        # --- no polling: count system calls while it waits
        if shutil.which("strace"):
            hid = "wait-idle-1"
            trace = os.path.join(env.dir, "wait.strace")
            w = subprocess.Popen(["strace", "-f", "-qq", "-o", trace, HANDOFFCTL, "wait", "-c", conf, hid,
                                  "--until", "claimed"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 # LeakSanitizer cannot run under ptrace
                                 env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))

            def traced():
                try:
                    with open(trace) as f:
                        return f.read()
                except FileNotFoundError:
                    return ""
            # its watches up (a start under strace on a loaded machine may
            # take longer than the window), then 2 s of waiting counted
            hdtest.wait_for(lambda: re.search(r"^\d+\s+inotify_add_watch", traced(), re.M), 30,
                            lambda: f"the traced wait's inotify watches:\n{traced()[-2000:]}")
            time.sleep(2 * hdtest.SLOW)
            idle = traced().splitlines()
            submit(env, hid=hid)
            rc, out, err = finish(w)
            check(rc == 0, f"traced wait: {rc} {out!r} {err!r}")
            i = max(n for n, l in enumerate(idle) if re.match(r"\d+\s+inotify_add_watch", l))
            after = idle[i + 1:]
            wakeups = [l for l in after if re.search(r"\b(poll|ppoll|nanosleep|clock_nanosleep|select|pselect6|epoll_wait)\(", l)]
            print(f"ok: idle for 2 s after its watches: {len(after)} system calls, {len(wakeups)} waits")
            check(len(wakeups) <= 2 and len(after) < 200,
                  f"wait polls: {len(wakeups)} waits, {len(after)} calls in 2 s:\n" + "\n".join(after[-20:]))
        else:
            hdtest.skip_part("strace", "the no-polling check")

        d.stop()

    # --- relayed: the record a relaying daemon leaves in archive/ (outcome
    # "relayed", issue 13's format); no daemon needed to read it.
    with tempfile.TemporaryDirectory(prefix="hd-wait-") as t:
        spool = os.path.join(t, "spool")
        for s in ("tmp", "handoff", "claimed", "archive", "rejected"):
            os.makedirs(os.path.join(spool, s))
        hid = "1700000000-bob-erin-0123456789abcdef"
        w = subprocess.Popen([HANDOFFCTL, "wait", "--spool", spool, hid], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        hdtest.wait_watching(w, what="handoffctl wait")
        name = f"1700000001-bob-erin-{hid}.json"
        with open(os.path.join(spool, "archive", name + ".outcome"), "w") as f:
            json.dump({"handoff_id": hid, "outcome": "relayed", "from_agent": "bob", "to_agent": "erin"}, f)
        with open(os.path.join(spool, "tmp", name), "w") as f:
            json.dump({"handoff_id": hid, "from_agent": "bob", "to_agent": "erin"}, f)
        os.rename(os.path.join(spool, "tmp", name), os.path.join(spool, "archive", name))
        rc, out, err = finish(w)
        check(rc == 5 and out == f"{hid} relayed", f"relayed: rc {rc} out {out!r} err {err!r}")
        print("ok: relayed -> 5")

    # --- usage
    for args, what in ((["wait"], "no id"), (["wait", "../x"], "bad id"),
                       (["wait", "x1", "--until", "consumed"], "--until other than claimed"),
                       (["wait", "x1", "--timeout", "soon"], "bad --timeout")):
        p = subprocess.run([HANDOFFCTL, *args, "--spool", "/nonexistent"], capture_output=True, text=True)
        check(p.returncode == 2, f"{what}: exit {p.returncode}")
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
