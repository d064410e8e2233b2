"""Attack (issue 24.1): sweep starvation.  Valid handoffs of 1 MiB (65,400
reals, the costliest documents to parse and MAC) that stay claimed:

 1. sent by a member of the group to her own agent, whose bootstraps she
    renames to `.consume.` names (a consumer "in progress", looked at
    again every second);
 2. sent as a plain producer to an agent that does not consume yet, with
    small bad-MAC files for an agent not served here whose expires_at come
    0.5 s apart (a deadline every half second).

A sweep that re-read and re-verified every claimed item took longer than
the gap to the next deadline, the timer was re-armed at 0 ms and the loop
never polled I/O or signals again.  Now a claimed item is verified when it
changes (not at every look; a big one is remembered from its claim, so not
even the first look reads it) and a sweep runs in slices between which the
loop polls.  Figures, under each attack: the latency of a legitimate
bob->alice handoff, the longest wait for a status answer, the time SIGTERM
takes; and for the first spool, the time a restart takes to READY=1.
The bounds are on the daemon's CPU time in each of these waits (the work
it does before it answers, delivers or exits), which a loaded machine does
not stretch as it stretches the wall times printed beside.

The attacker is played by the test's own user (the daemon's behaviour is
the same whoever renames the bootstraps).  HD_ATTACK_SWEEP_N (60) and
HD_ATTACK_SWEEP_M (40) scale the attacks (the issue's: 200 and 120)."""

import base64
import hashlib
import hmac
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_ATTACK_SWEEP_N", "60"))
M = int(os.environ.get("HD_ATTACK_SWEEP_M", "40"))
SLOW = hdtest.SLOW
WINDOW = 3.0            # seconds of pinging under attack
PING_CAP = 5.0          # a status wait longer than this counts as this


def reals(n=65400):
    rnd = random.Random(24)
    return [round(rnd.random(), 12) for _ in range(n)]


BIG = reals()
T0 = time.monotonic()


def note(what):
    print(f"[{time.monotonic() - T0:5.1f}s] {what}", flush=True)


XS = json.dumps(BIG, separators=(",", ":"))


def drop_big(env, frm, to):
    """A signed handoff with "x": BIG, its bytes made around the big array
    serialized once ("x" sorts last): as hdproto.build + drop, faster."""
    doc = hdproto.build(frm, to, env.key, ttl=3600)
    del doc["hmac"]
    small = hdproto.canonical(doc)
    canon = small[:-1] + b',"x":' + XS.encode() + b"}"
    doc["hmac"] = base64.b64encode(hmac.new(env.key, canon, hashlib.sha256).digest()).decode()
    data = hdproto.dumps(doc)[:-1] + b',"x":' + XS.encode() + b"}"
    name = doc["handoff_id"] + ".json"
    tmp = env.path("tmp", "." + name)
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, env.path("handoff", name))
    return doc["handoff_id"]


def settle(count, want, what):
    """Wait for count() to reach want; a daemon too busy to get there (the
    old code under attack) is measured as it is."""
    try:
        hdtest.wait_for(lambda: count() >= want, 60 * SLOW, f"{want} {what}")
    except (hdtest.Fail, OSError) as e:
        print(f"(went on without: {e})")
    note(what)


def ping(sock, pid):
    """(seconds, the daemon's CPU seconds) of one status request."""
    c0 = hdtest.cpu_s(pid)
    try:
        t = hdtest.ping_time(sock, timeout=PING_CAP)
    except OSError:
        t = PING_CAP
    return t, hdtest.cpu_s(pid) - c0


def measure(env, d, what):
    """Ping status for WINDOW seconds while a legitimate handoff is
    dropped; then SIGTERM.  Returns the daemon's CPU seconds in each (the
    latency, the worst ping, the 95th percentile of the pings, the stop)
    and its exit code."""
    stalls, stop, pid = [], threading.Event(), d.proc.pid

    def pinger():
        while not stop.is_set():
            stalls.append(ping(env.sockets["d0"], pid))
            time.sleep(0.02)
    th = threading.Thread(target=pinger)
    th.start()
    t_end = time.monotonic() + WINDOW
    try:
        c0 = hdtest.cpu_s(pid)
        try:
            lat = hdtest.handoff_latency(env, timeout=30 * SLOW)
            lat_cpu = hdtest.cpu_s(pid) - c0
        except hdtest.Fail:
            lat = lat_cpu = float("inf")
        while time.monotonic() < t_end:
            time.sleep(0.05)
    finally:
        stop.set()
        th.join()
    worst = max(s[0] for s in stalls)
    p95 = sorted(s[0] for s in stalls)[int(0.95 * (len(stalls) - 1))]
    worst_cpu = max(s[1] for s in stalls)
    p95_cpu = sorted(s[1] for s in stalls)[int(0.95 * (len(stalls) - 1))]
    # the CPU of its whole life comes with its exit status (RUSAGE_CHILDREN)
    t0, c0 = time.monotonic(), hdtest.cpu_s(pid)
    d.send(signal.SIGTERM)
    try:
        term_cpu, _ = hdtest.children_cpu(d.proc.wait, 30 * SLOW)
        term_cpu -= c0
        t_term = time.monotonic() - t0
    except subprocess.TimeoutExpired:
        t_term = term_cpu = float("inf")
        d.proc.kill()
    rc = d.stop()
    print(f"{what}: legitimate handoff delivered in {lat:.2f}s ({lat_cpu:.2f}s CPU); status: "
          f"longest wait {worst * 1000:.0f} ms, 95th percentile {p95 * 1000:.0f} ms over "
          f"{len(stalls)} (CPU {worst_cpu * 1000:.0f} and {p95_cpu * 1000:.0f} ms); "
          f"SIGTERM honoured in {t_term:.2f}s ({term_cpu:.2f}s CPU, exit {rc})")
    return lat_cpu, worst_cpu, p95_cpu, term_cpu, rc


def judge(what, lat, worst, p95, t_term, rc):
    """The daemon's CPU seconds in each wait (measure()) within bounds."""
    check(lat < 1.0 * SLOW, f"{what}: a legitimate handoff took {lat:.2f}s of CPU (limit 1 s)")
    # One slice of the sweep is 10 ms plus at most one item (~20 ms here);
    # what the daemon does after the answer, before this process reads its
    # CPU time again, counts too.
    check(p95 < 0.15 * SLOW and worst < 0.3 * SLOW,
          f"{what}: status waited for {worst * 1000:.0f} ms of CPU at worst, "
          f"{p95 * 1000:.0f} ms at the 95th percentile (limits 300 and 150 ms)")
    check(t_term < 1.0 * SLOW, f"{what}: SIGTERM took {t_term:.2f}s of CPU (limit 1 s)")
    check(rc == 0, f"{what}: exit {rc}")


def test_consume_in_progress(env):
    d = env.start()
    note("started")
    for _ in range(N):
        drop_big(env, "eve", "mallory")
    note("dropped")
    settle(lambda: len(env.bootstraps("mallory")), N, "bootstraps for mallory")
    note(f"{len(env.bootstraps('mallory'))} bootstraps for mallory")
    hs = os.path.join(env.state["mallory"], "handoffs")
    for i, b in enumerate(env.bootstraps("mallory")):
        os.rename(os.path.join(hs, b), os.path.join(hs, f".consume.{4000 + i}.r{i}.{b}"))
    # A sweep that looks at them all comes within a second (a consume in
    # progress is looked at again every second).
    time.sleep(1.5)
    fig = measure(env, d, f"{N} x 1 MiB claimed, consumes 'in progress'")
    # A restart on the same spool: READY within a bounded time, then
    # serving while the old items are looked at.
    # Its CPU to READY is the bound (wall time on a loaded machine is the
    # machine's); the wall time only guards against a hang.
    t0 = time.monotonic()
    try:
        d2 = env.start(name="d0")
        t_ready = time.monotonic() - t0
        cpu_ready = hdtest.cpu_s(d2.proc.pid)
    except hdtest.Fail:
        t_ready = cpu_ready = float("inf")
        d2 = env.daemons[-1]
    print(f"restart on that spool: READY=1 after {t_ready:.2f}s ({cpu_ready:.2f}s CPU)")
    fig2 = measure(env, d2, "after the restart") if t_ready != float("inf") else None
    return fig, (t_ready, cpu_ready), fig2


def test_plain_producer(env):
    d = env.start()
    for _ in range(M):
        drop_big(env, "bob", "alice")
    settle(lambda: len(env.bootstraps("alice")), M, "bootstraps for alice")
    base = hdproto.now()
    for i in range(M):
        doc = hdproto.build("bob", "nobody", env.key, at=base, ttl=2 + 0.5 * i)
        doc["hmac"] = "A" * 43 + "="
        hdproto.drop(env.spool, doc)
    settle(lambda: d.status()["counters"]["left"], M, "bad-MAC files left")
    # Until the first of them expire (2 s after base) and a second more.
    while hdproto.now() < base + timedelta(seconds=3):
        time.sleep(0.05)
    return measure(env, d, f"{M} x 1 MiB claimed + {M} bad-MAC expiring 0.5 s apart")


def main():
    with hdtest.Env(agents=["alice", "mallory"], fsync=False) as env:
        fig, t_ready, fig2 = test_consume_in_progress(env)
    with hdtest.Env(agents=["alice"], fsync=False) as env:
        fig3 = test_plain_producer(env)
    judge("consumes in progress", *fig)
    t_ready, cpu_ready = t_ready
    check(cpu_ready < 5 * SLOW, f"the restart took {cpu_ready:.2f}s of CPU to READY=1")
    check(t_ready < 60 * SLOW, f"the restart took {t_ready:.2f}s to READY=1")
    check(fig2 is not None, "no figures after the restart")
    judge("after the restart", *fig2)
    judge("plain producer", *fig3)


hdtest.run(main)
