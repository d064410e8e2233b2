"""Attack (issue 19.5): files that are expensive to decide (1 MiB of
17-digit reals: parse and canonical bytes before the MAC compare) dropped
at once.  One batch must not hold the loop for all of them: the daemon
yields between files (a batch decides for at most 10 ms, then the next
turn of the loop), so the control socket keeps answering.  Figures: the
longest wait for a status answer while they are decided, the latency of a
legitimate handoff dropped behind them, the peak RSS.

What is bounded is the daemon's CPU time while one status request waits:
at most a few files' worth.  A loaded machine stretches the wall time of
a wait (the daemon is not scheduled) but not the work the daemon does
before it answers."""

import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_ATTACK_REALS_N", "40"))
MIB = 1024 * 1024


def reals_blob():
    rnd = random.Random(19)
    parts, n = [], 0
    while n < MIB - 64:
        s = "%.17g" % rnd.random()
        parts.append(s)
        n += len(s) + 1
    return ('{"x":[' + ",".join(parts) + "]}").encode()


def test_attack_loop_stall_bounded(env):
    d = env.start()
    blob = reals_blob()
    for i in range(N):
        with open(env.path("tmp", f"reals{i}.json"), "wb") as f:
            f.write(blob)
    stalls, held, stop = [], [], threading.Event()

    def pinger():
        while not stop.is_set():
            c0 = hdtest.cpu_s(d.proc.pid)
            stalls.append(hdtest.ping_time(env.sockets["d0"]))
            held.append(hdtest.cpu_s(d.proc.pid) - c0)
            time.sleep(0.01)
    th = threading.Thread(target=pinger)
    t0, c0 = time.monotonic(), hdtest.cpu_s(d.proc.pid)
    for i in range(N):
        os.rename(env.path("tmp", f"reals{i}.json"), env.path("handoff", f"reals{i}.json"))
    th.start()
    try:
        lat = hdtest.handoff_latency(env, timeout=300)
        hdtest.wait_for(lambda: env.count("rejected") == N, timeout=300, what="all rejected")
    finally:
        stop.set()
        th.join()
    t_all, cpu_all = time.monotonic() - t0, hdtest.cpu_s(d.proc.pid) - c0
    rss = hdtest.proc_status(d.proc.pid, "VmHWM")
    worst, worst_cpu = max(stalls), max(held)
    print(f"{N} files of 1 MiB of 17-digit reals: all decided in {t_all:.1f}s, "
          f"{cpu_all:.1f}s CPU ({cpu_all / N * 1000:.0f} ms CPU a file); longest status wait "
          f"{worst:.2f}s, the most CPU the daemon spent while one waited {worst_cpu:.2f}s, over "
          f"{len(stalls)} requests; legitimate handoff behind them delivered in {lat:.2f}s; "
          f"peak RSS {rss / 1024:.0f} MB")
    # One file is the unit of work; the loop answers between files.
    check(worst_cpu < max(0.5, 3 * cpu_all / N),
          f"the loop was held for {worst_cpu:.2f}s of CPU ({cpu_all / N:.2f}s a file)")
    check(d.stop() == 0, "exit 0")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        test_attack_loop_stall_bounded(env)


hdtest.run(main)
