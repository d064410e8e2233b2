"""handoffctl cancel --timeout bounds (issue 43.12): `--timeout 30d` put
2,592,000,000 ms into poll()'s int and polled with a negative timeout,
for ever.  A wait longer than a day is pointless (a request is answered
unknown once it expires), so more than 1d is a usage error (exit 2, one
line, nothing dropped), and the wait of the most, 1d, polls with a
timeout poll() takes (strace: 0 < ms <= 86,400,000).

The spool is a daemon's that then stops, so no answer comes: before the
fix `--timeout 30d` waits past the test's bound."""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

DAY_MS = 86400 * 1000


def cancel(env, timeout, hid="1796000000-bob-alice-0000000000000000"):
    return [hdtest.HANDOFFCTL, "cancel", "--spool", env.spool, "--key", env.key_path,
            "--from", "bob", hid, "--timeout", timeout]


def requests(env):
    return [n for n in os.listdir(env.path("cancel")) if not n.startswith(".")]


def main():
    with hdtest.Env(agents=["alice"]) as env:
        d = env.start()
        check(d.stop() == 0, "the daemon stops with 0")      # cancel/ made, nobody answers

        try:
            p = subprocess.run(cancel(env, "30d"), capture_output=True, text=True,
                               timeout=10 * hdtest.SLOW)
        except subprocess.TimeoutExpired:
            check(False, "handoffctl cancel --timeout 30d still waits after 10 s")
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and "--timeout" in lines[0] and
              "1d" in lines[0], f"--timeout 30d: exit {p.returncode}: {p.stderr!r}")
        check(requests(env) == [], f"a request dropped all the same: {requests(env)}")
        print(f"ok: --timeout 30d refused: {lines[0]}")

        if not os.access("/usr/bin/strace", os.X_OK):
            check(False, "strace is needed for the poll() timeout")
        log = os.path.join(env.dir, "poll.strace")
        s = subprocess.Popen(["/usr/bin/strace", "-f", "-qq", "-e", "trace=poll", "-o", log,
                              *cancel(env, "1d", "1796000000-bob-alice-0000000000000001")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            def first_poll():
                try:
                    m = re.search(r"poll\(\[.*?\], 1, (-?\d+)", open(log).read())
                except FileNotFoundError:
                    return None
                return int(m.group(1)) if m else None
            ms = hdtest.wait_for(lambda: first_poll() is not None, timeout=20,
                                 what="handoffctl's poll() for the answer") and first_poll()
        finally:
            s.kill()
            s.wait()
        check(0 < ms <= DAY_MS, f"--timeout 1d polls with {ms} ms")
        print(f"ok: --timeout 1d polls with {ms} ms (at most {DAY_MS})")
    hdtest.finish("test_cancel_timeout")


if __name__ == "__main__":
    hdtest.run(main)
