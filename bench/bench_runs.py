"""The runs of `make bench`: one program (bench/floor or handoffd) on a
fresh temp spool for one phase (burst, burst_tmpfs, syscalls, latency,
backlog; see bench.py), measured from outside, under strace -f for the
syscalls phase and its per-call counts; and the relay and hub phases,
which run bench_relay.py and bench_hub.py.
"""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import hdtest
from bench_report import fmt, hub_mcp_note
from benchkit import (
    AGENT, BenchError, Watcher, drop_one, pct, proc_cpu, proc_status, proc_switches,
    publish_one, stage_one, warm_up)


# ---------------------------------------------------------------- runs

class Run:
    """One fresh temp spool (hdtest.Env: a dir, a key, a config) and one
    program on it, the floor or handoffd, run by hdtest.Daemon."""

    def __init__(self, paths, prog, fsync, tag, key_hex, base=None, quota=0):
        self.paths = paths
        self.prog = prog
        self.fsync = fsync
        self.tag = tag
        self.pid = None     # the program's own pid (not a tracer's)
        # base: where the temp dir goes (the tmpfs phase), else $TMPDIR or
        # /tmp; hdtest.Env takes tempfile's default, so set that meanwhile.
        saved = tempfile.tempdir
        try:
            if base:
                tempfile.tempdir = base
            self.env = hdtest.Env(agents=[AGENT], fsync=fsync, keep=True, prefix=f"hdbench.{tag}.")
        finally:
            tempfile.tempdir = saved
        e = self.env
        with open(e.key_path, "w") as f:   # the round's key: the same items for both
            f.write(key_hex + "\n")
        self.spool = e.spool
        self.state = e.state[AGENT]
        self.handoffs = os.path.join(self.state, "handoffs")
        for d in ("tmp", "handoff"):
            os.makedirs(os.path.join(self.spool, d))
        os.makedirs(self.handoffs)
        self.conf = e.write_config(prog, text="\n".join([
            "[spool]",
            f"dir = {self.spool}",
            f"fsync = {'yes' if fsync else 'no'}",
            "rescan_interval = 30",
            "resume_window = 600",
            # the inbox quota off (0), or both limits at --quota: every
            # item still claimed, each one counted (its cost)
            f"max_waiting = {quota}",
            f"max_waiting_per_sender = {quota}",
            "",
            "[keys]",
            f"default = {e.key_path}",
            "",
            "[control]",
            f"socket = {os.path.join(e.dir, prog + '.sock')}",
            "",
            f"[agent {AGENT}]",
            f"state_dir = {self.state}",
            "",
        ]))
        self.d = None

    def start(self, mode="watch", wait=True, wrap=None):
        """Starts the program (under wrap, a tracer's argv, if given) and
        returns its pid: with wrap, the tracer's child."""
        if self.prog == "floor":
            argv = [self.paths["floor"], "--" + mode, self.spool, "--key", self.env.key_path,
                    "--agent", AGENT, "--state", self.state] + (["--fsync"] if self.fsync else [])
        else:
            argv = [self.paths["handoffd"], "-f", "-c", self.conf]
        self.d = hdtest.Daemon(self.env, self.conf, self.prog, argv=list(wrap or []) + argv)
        self.env.daemons.append(self.d)
        if wait:
            self.d.wait_message("READY=1", timeout=60)
        self.pid = self.d.proc.pid
        if wrap:
            self.pid = traced_child(self.d.proc)
        return self.pid

    def alive(self):
        return self.d.proc.poll() is None

    def counters(self):
        """handoffd's counters from its control socket."""
        try:
            return self.d.status().get("counters", {})
        except (OSError, ValueError) as e:
            return {"error": str(e)}

    def floor_report(self):
        for line in self.d.logs().splitlines():
            if line.startswith("FLOOR "):
                return json.loads(line[6:])
        return {}

    def stop(self):
        try:
            if self.pid != self.d.proc.pid and self.d.proc.poll() is None:
                # strace -o FILE PROG blocks SIGTERM: the program gets it,
                # strace exits with the program's status.
                try:
                    os.kill(self.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            return self.d.stop(timeout=30)
        except hdtest.Fail as e:
            raise BenchError(str(e)) from None

    def cleanup(self):
        for d in self.env.daemons:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
        shutil.rmtree(self.env.dir, ignore_errors=True)


def start_attach(cmd, pid, tag, prog):
    """--attach: a profiler on the running program, e.g.
    'strace -c -f -p {pid} -o /tmp/strace.{tag}'."""
    if not cmd:
        return None
    argv = [x.format(pid=pid, tag=tag, prog=prog) for x in shlex.split(cmd)]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    time.sleep(1.0)   # let it attach before the clock starts
    return p


def stop_attach(p):
    if p is None:
        return
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


# ---------------------------------------------------------------- strace

def strace_argv(prefix):
    """The tracer for the syscalls phase: every thread (-f), one file per
    thread (-ff: no <unfinished ...> lines to join), wall-clock time of
    each call's entry (-ttt) to cut out the burst, short strings."""
    return ["strace", "-f", "-ff", "-ttt", "-s", "24", "-o", prefix, "--"]


def traced_child(proc, timeout=10.0):
    """The pid of the program strace (proc) runs: its only child."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for tid in os.listdir(f"/proc/{proc.pid}/task"):
                with open(f"/proc/{proc.pid}/task/{tid}/children") as f:
                    kids = f.read().split()
                if kids:
                    return int(kids[0])
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    raise BenchError(f"no traced child under strace (pid {proc.pid}, exit {proc.poll()})")


def quiesce(pid, quiet=0.5, timeout=20.0):
    """Waits until the program makes no system call for `quiet` seconds:
    under ptrace every call stops the tracee, so its context switch count
    stands still only when it does nothing.  After the last bootstrap a
    program may still finish that item (a log line, a counter): part of
    its per-item cost."""
    deadline = time.monotonic() + timeout
    last, since = proc_switches(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = proc_switches(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return True
    return False


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"(?:\.\.\.)?')
_CALL = re.compile(r"^(\d+\.\d+) ([a-z_][a-z0-9_]*)\(")
OPENS = ("open", "openat", "openat2", "creat")
RENAMES = ("rename", "renameat", "renameat2")
LINKS = ("link", "linkat")
UNLINKS = ("unlink", "unlinkat", "rmdir")
MAKES = ("mkdir", "mkdirat", "mknod", "mknodat", "symlink", "symlinkat")


def strace_count(prefix, t0, t1):
    """Counts the calls in strace's per-thread files prefix.TID whose entry
    time is within [t0, t1] (time.time()).  Returns calls by name, failed
    calls by name, and the file-system operations that succeeded: inodes
    created (an open with O_CREAT|O_EXCL, one with O_CREAT alone (strace
    cannot tell whether that one created the file: counted, and counted
    apart as creates_maybe), O_TMPFILE, mkdir, mknod, symlink), renames,
    links and unlinks.  strace prints flags symbolically (O_RDWR|O_CREAT|
    O_EXCL|O_CLOEXEC; O_TMPFILE or __O_TMPFILE|O_DIRECTORY): quoted
    strings are cut out before the flags are looked at."""
    d = os.path.dirname(prefix) or "."
    base = os.path.basename(prefix) + "."
    calls, failed = {}, {}
    ops = {"creates": 0, "creates_excl": 0, "creates_maybe": 0, "tmpfiles": 0, "mkdirs": 0,
           "renames": 0, "links": 0, "unlinks": 0}
    for fn in os.listdir(d):
        if not fn.startswith(base):
            continue
        with open(os.path.join(d, fn), errors="replace") as f:
            for line in f:
                m = _CALL.match(line)
                if not m or not t0 <= float(m.group(1)) <= t1:
                    continue   # signals, exits, <... resumed>, out of the window
                name = m.group(2)
                calls[name] = calls.get(name, 0) + 1
                # the return value: after the last " = " (strace pads
                # short calls with spaces before it; a string argument may
                # hold " = " too, but comes before)
                i = line.rfind(" = ")
                ret = line[i + 3:].split() if i >= 0 else []
                ret = ret[0] if ret else "?"
                if ret.startswith("-"):
                    failed[name] = failed.get(name, 0) + 1
                    continue
                if ret == "?":
                    continue   # exit, or a call the trace did not see return
                if name in OPENS:
                    args = _QUOTED.sub('""', line[m.end():])
                    if "O_TMPFILE" in args:          # also __O_TMPFILE|O_DIRECTORY
                        ops["tmpfiles"] += 1
                        ops["creates"] += 1
                    elif name == "creat" or "O_CREAT" in args:
                        ops["creates"] += 1
                        if name != "creat" and "O_EXCL" in args:
                            ops["creates_excl"] += 1
                        else:
                            ops["creates_maybe"] += 1
                elif name in MAKES:
                    ops["creates"] += 1
                    if name.startswith("mkdir"):
                        ops["mkdirs"] += 1
                elif name in RENAMES:
                    ops["renames"] += 1
                elif name in LINKS:
                    ops["links"] += 1
                elif name in UNLINKS:
                    ops["unlinks"] += 1
    return calls, failed, ops


def run_one(a, paths, phase, fsync, prog, items, key_hex, tag, runs, settle):
    """One program, one phase, one fresh spool.  Returns its figures.
    burst_tmpfs is the burst with the temp dir under a.tmpfs; syscalls is
    a burst (of a.strace_n) with the program run under strace."""
    tmpfs = phase == "burst_tmpfs"
    traced = phase == "syscalls"
    burst = phase in ("burst", "burst_tmpfs", "syscalls")
    r = Run(paths, prog, fsync, tag, key_hex, base=a.tmpfs if tmpfs else None, quota=a.quota)
    runs.append(r)
    n = len(items)
    res = {"prog": prog, "phase": phase, "fsync": "on" if fsync else "off", "n": n}
    res["create_us"], res["settle_s"] = warm_up(settle)
    problems = []
    prof = None
    st_prefix = os.path.join(r.env.dir, "strace")
    if traced and not shutil.which("strace"):
        raise BenchError("strace not found (apt-get install strace; it is in mk/build-deps)")
    w = Watcher(r.handoffs)
    w.start()
    try:
        if phase == "backlog":
            hand = os.path.join(r.spool, "handoff")
            tmp_fd = os.open(os.path.join(r.spool, "tmp"), os.O_RDONLY | os.O_DIRECTORY)
            hand_fd = os.open(hand, os.O_RDONLY | os.O_DIRECTORY)
            try:
                for name, data in items:
                    drop_one(tmp_fd, hand_fd, name, data)
            finally:
                os.close(tmp_fd)
                os.close(hand_fd)
            os.sync()   # the writer's dirty pages are not the program's work
            t0 = time.monotonic()
            pid = r.start("batch", wait=False)
            done = w.wait_count(n, a.timeout, r.alive)
            t_last = w.last()
            res["startup_s"] = round(t_last - t0, 4) if done and t_last else None
            if prog == "handoffd" and r.alive():
                mem = proc_status(pid)
                res["cpu_s"] = proc_cpu(pid)
            else:
                r.d.proc.wait(60)
                mem = {}
        else:
            pid = r.start("watch", wrap=strace_argv(st_prefix) if traced else None)
            if not traced:
                prof = start_attach(a.attach, pid, tag, prog)
            if phase == "latency" and not fsync and a.idle > 0:
                time.sleep(0.5)   # READY=1 was just sent: let it settle
                s0, t = proc_switches(pid), time.monotonic()
                time.sleep(a.idle)
                res["wakeups_per_s"] = round((proc_switches(pid) - s0) / (time.monotonic() - t), 2)
            tmp_fd = os.open(os.path.join(r.spool, "tmp"), os.O_RDONLY | os.O_DIRECTORY)
            hand_fd = os.open(os.path.join(r.spool, "handoff"), os.O_RDONLY | os.O_DIRECTORY)
            drops = [0.0] * n
            try:
                if burst:
                    # Written into tmp/ before the clock starts, so that
                    # the burst is only the renames: a Python writer that
                    # also creates each file would set the pace itself.
                    staged = [stage_one(tmp_fd, name, data) for name, data in items]
                    os.sync()
                mem0, cpu0 = proc_status(pid), proc_cpu(pid)
                if traced:
                    quiesce(pid)    # whatever start-up left, done before the window
                wall0 = time.time()
                t0 = time.monotonic()
                if burst:
                    for i, (name, _) in enumerate(items):
                        drops[i] = publish_one(tmp_fd, hand_fd, staged[i], name)
                else:
                    step = 1.0 / a.rate
                    for i, (name, data) in enumerate(items):
                        due = t0 + i * step
                        while True:
                            left = due - time.monotonic()
                            if left <= 0:
                                break
                            time.sleep(left if left > 0.0003 else 0)
                        drops[i] = drop_one(tmp_fd, hand_fd, name, data)
                t_dropped = time.monotonic()
            finally:
                os.close(tmp_fd)
                os.close(hand_fd)
            done = w.wait_count(n, a.timeout, r.alive)
            # 1 s of quiet: work a program defers a little after the last
            # bootstrap (a batched unlink, a flush) is still its per-item cost
            if traced and done and not quiesce(pid, quiet=1.0):
                problems.append("still making system calls 20s after the last bootstrap")
            wall1 = time.time()
            if not r.alive():
                raise BenchError(f"{prog} exited {r.d.proc.returncode} during the run:\n{r.d.logs()[-4000:]}")
            cpu1, mem = proc_cpu(pid), proc_status(pid)
            res["cpu_s"] = round(cpu1 - cpu0, 3)
            res["cpu_us_per_item"] = round((cpu1 - cpu0) / n * 1e6, 1)
            res["rss_ready_kb"] = mem0.get("VmRSS")
            res["drop_rate"] = round(n / (t_dropped - t0), 1) if t_dropped > t0 else None
            lat = sorted((w.seen[name] - drops[i]) * 1000.0
                         for i, (name, _) in enumerate(items) if name in w.seen)
            last = w.last()
            span = (last - drops[0]) if last else None
            if burst:
                res["throughput"] = round(n / span, 1) if done and span else None
                # the last bootstrap came right after the last drop: the
                # program kept up and the writer set the pace
                res["writer_bound"] = bool(span and span <= (t_dropped - t0) * 1.05 + 0.05)
            res["lat_p50_ms"] = round(pct(lat, 50), 3) if lat else None
            res["lat_p99_ms"] = round(pct(lat, 99), 3) if lat else None
            res["lat_max_ms"] = round(lat[-1], 3) if lat else None
            if phase == "latency" and lat:
                # Half the items waited longer than the gap between two
                # drops: it did not keep up, and latency is queueing.
                res["saturated"] = pct(lat, 50) > 1000.0 / a.rate
            if a.dump and phase == "latency":
                with open(a.dump.format(tag=tag), "w") as f:
                    f.write("i,drop_s,latency_ms\n")
                    for i, (name, _) in enumerate(items):
                        if name in w.seen:
                            f.write(f"{i},{drops[i] - drops[0]:.6f},{(w.seen[name] - drops[i]) * 1000.0:.3f}\n")
        res["vmrss_kb"] = mem.get("VmRSS")
        res["vmhwm_kb"] = mem.get("VmHWM")
        counters = r.counters() if prog == "handoffd" and r.alive() else {}
    finally:
        w.close()
        stop_attach(prof)
        rc = r.stop() if r.d is not None else None
    res["exit"] = rc
    if traced:
        # Counted once strace has exited (its files are complete), only
        # the calls made from the first drop to the quiet after the last
        # bootstrap: not start-up, not the status query, not the exit.
        calls, failed, ops = strace_count(st_prefix, wall0, wall1)
        total = sum(calls.values())
        if not total:
            problems.append(f"strace recorded no system call in the burst ({st_prefix}.*)")
        res["syscalls"] = total
        res["syscalls_per_item"] = round(total / n, 2)
        res["failed_per_item"] = round(sum(failed.values()) / n, 2)
        res["calls_per_item"] = {k: round(v / n, 3) for k, v in sorted(calls.items())}
        res["failed_calls_per_item"] = {k: round(v / n, 3) for k, v in sorted(failed.items())}
        res["file_ops"] = ops
        for k in ("creates", "creates_maybe", "tmpfiles", "mkdirs", "renames", "links", "unlinks"):
            res[k + "_per_item"] = round(ops[k] / n, 3)
        for k in ("throughput", "writer_bound", "cpu_s", "cpu_us_per_item"):
            res.pop(k, None)    # under strace: not the program's speed

    # Both must have delivered every item exactly once and exited 0.
    names = {name for name, _ in items}
    on_disk = {x for x in os.listdir(r.handoffs) if not x.startswith(".")}
    if not done:
        problems.append(f"timed out after {a.timeout:g}s: {w.count()}/{n} bootstraps")
    if w.overflow:
        problems.append("inotify queue overflow in the bench's watcher: times are approximate")
    if on_disk != names:
        problems.append(f"handoffs/ holds {len(on_disk & names)} of the {n} bootstraps"
                        f" and {len(on_disk - names)} other names")
    if w.dups:
        problems.append(f"{sum(w.dups.values())} bootstraps renamed into place more than once")
    if rc != 0:
        problems.append(f"{prog} exit status {rc}")
    if prog == "handoffd":
        res["counters"] = {k: counters.get(k) for k in ("claimed", "delivered", "rejected", "error")
                           if k in counters}
        for k in ("claimed", "delivered"):
            if counters.get(k) != n:
                problems.append(f"handoffd counter {k} = {counters.get(k)}, expected {n}")
        if os.path.isdir(os.path.join(r.spool, "rejected")) and \
                any(not x.startswith(".") for x in os.listdir(os.path.join(r.spool, "rejected"))):
            problems.append("handoffd rejected items")
    else:
        rep = r.floor_report()
        res["floor"] = rep
        if rep.get("claimed") != n or rep.get("errors"):
            problems.append(f"floor claimed {rep.get('claimed')} of {n}, errors {rep.get('errors')}")
        if phase == "backlog":
            res["vmrss_kb"] = rep.get("vmrss_kb")
            res["vmhwm_kb"] = rep.get("vmhwm_kb")
            res["cpu_s"] = round(rep.get("utime_s", 0) + rep.get("stime_s", 0), 3)
    res["problems"] = problems
    res["ok"] = not problems
    return res


# ---------------------------------------------------------------- relay, hub

def run_relay(a, paths, rows, leave=None):
    """The relay phase (bench/bench_relay.py), fsync off then on: a burst
    and a fixed rate through host a -> one nats-server -> host b, and a
    burst from a to the SDK's A2A server ([remote far] a2a).  There is
    no floor for it: its figures are absolute.  True when a run failed."""
    import bench_relay
    failed = False
    for fsync in (False, True):
        # receipts off then on (issue 27's cost of receipts), each with its
        # own local reference burst on b (lburst)
        for receipts in (False, True):
            t = time.monotonic()
            # handoffs to the SDK's A2A server beside the relay's, with
            # receipts off (an A2A remote sends none)
            # and, fsync off with receipts, a burst under strace: system
            # calls per relayed item on each host (counts hold; times swing)
            for res in bench_relay.run(paths["handoffd"], fsync, a.relay_n, a.relay_rate, a.timeout,
                                       a.keep, receipts=receipts, leave=leave, a2a=not receipts,
                                       strace=receipts and not fsync):
                rows.append(res)
                rc = "receipts" if receipts else "no-receipts"
                if res["phase"] == "rstrace":
                    print(f"  relay-{res['fsync']}-{rc}-rstrace    system calls per item: a "
                          f"{fmt(res.get('calls_a'))} ({fmt(res.get('fs_calls_a'))} without waits), b "
                          f"{fmt(res.get('calls_b'))} ({fmt(res.get('fs_calls_b'))})"
                          f"{'' if res.get('ok') else '  FAIL'}")
                    failed |= not res.get("ok")
                    continue
                print(f"  relay-{res['fsync']}-{rc}-{res['phase']:10} {fmt(res.get('throughput')):>8} items/s "
                      f"p99 {fmt(res.get('lat_p99_ms'))} ms, cpu {fmt(res.get('cpu_ms_per_1000'))} us/item"
                      f"{'' if res.get('ok') else '  FAIL'}")
                for p in res.get("problems", []):
                    print(f"    problem: {p}")
                failed |= not res.get("ok")
            print(f"    (relay a -> nats-server -> b, fsync {'on' if fsync else 'off'}, receipts "
                  f"{'on' if receipts else 'off'}: {time.monotonic() - t:.1f}s)")
            sys.stdout.flush()
    return failed


def run_hub(a, paths, rows):
    """The hub phase (bench/bench_hub.py), fsync off then on: the file drop,
    bench/hubfloor and handoff-hubd (TLS, 8 keep-alive clients) in the same
    run, a burst and a fixed rate, and the rate through /mcp's handoff_send,
    its p99 against the POST's.  True when a run failed."""
    import bench_hub
    failed = False
    for fsync in (False, True):
        t = time.monotonic()
        for res in bench_hub.run(paths["handoffd"], paths["hubd"], fsync, a.hub_n, a.rate_n,
                                 a.rate, a.timeout, a.keep, hubfloor=paths["hubfloor"]):
            rows.append(res)
            print(f"  hub-{res['fsync']}-{res['phase']}-{res['how']:16} {fmt(res.get('throughput')):>8} items/s "
                  f"p99 {fmt(res.get('lat_p99_ms'))} ms{hub_mcp_note(res)}"
                  f"{'' if res.get('ok') else '  FAIL'}")
            for p in res.get("problems", []):
                print(f"    problem: {p}")
            failed |= not res.get("ok")
        print(f"    (file drop and hub, fsync {'on' if fsync else 'off'}: {time.monotonic() - t:.1f}s)")
        sys.stdout.flush()
    return failed


def run_a2a(a, paths, rows):
    """The a2a phase (bench/bench_a2a.py), fsync off: A2A SendMessage
    (returnImmediately) and the hub's POST in the same run, a burst and a
    fixed rate; then 1,000 open streams.  True when a run failed."""
    import bench_a2a
    t = time.monotonic()
    failed = False
    for res in bench_a2a.run(paths["handoffd"], paths["hubd"], a.hub_n, a.rate_n, a.rate,
                             a.timeout, a.keep):
        rows.append(res)
        if res["phase"] == "streams":
            print(f"  a2a-streams {res['n']}: RSS {fmt(res.get('rss_mb'))} MB, threads "
                  f"{res.get('threads')} (before {res.get('threads_before')})"
                  f"{'' if res.get('ok') else '  FAIL'}")
        else:
            print(f"  a2a-{res['phase']}-{res['how']:16} {fmt(res.get('throughput')):>8} items/s "
                  f"p99 {fmt(res.get('lat_p99_ms'))} ms{'' if res.get('ok') else '  FAIL'}")
        for p in res.get("problems", []):
            print(f"    problem: {p}")
        failed |= not res.get("ok")
    print(f"    (A2A and the hub's POST, fsync off, and the streams: {time.monotonic() - t:.1f}s)")
    sys.stdout.flush()
    return failed
