"""Fault harness: ENOSPC and EIO on the daemon's write, fsync, rename and
open paths, and EMFILE.  Faults come from `strace --inject` attached to the
running daemon (limited with -P to the directory concerned where the
syscall allows it), from a small tmpfs that is filled up, and from a low
RLIMIT_NOFILE.

For each fault, while it lasts: the item stays in its source state (still
in handoff/ when the claim cannot happen: since issue 25 the claim is the
daemon's record, made once the bootstrap is written; claimed with its
bootstrap hidden when the publish cannot), nothing is acknowledged that is
not on disk (no record without its bootstrap, nothing archived as
consumed), the
daemon backs off (its CPU time from /proc/PID/stat stays low), status shows
errors and last_error.  After the fault is removed the daemon recovers by
itself within HD_FAULT_RECOVER_S (default 15 s: the retry timer backs off
1 s, 2 s, 4 s, ... and faults last HD_FAULT_SECONDS, default 3 s), and no
handoff is delivered twice (there was no crash).

Scenarios run in parallel, one daemon each; each prints its outcome."""

import os
import resource
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import harness  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402
from harness import Strace  # noqa: E402

FAULT_S = float(os.environ.get("HD_FAULT_SECONDS", "3"))
RECOVER_S = float(os.environ.get("HD_FAULT_RECOVER_S", "15")) * hdtest.SLOW
# How long to keep waiting after RECOVER_S, only to report when it did recover.
WAIT_S = float(os.environ.get("HD_FAULT_WAIT_S", "70")) * hdtest.SLOW
N = int(os.environ.get("HD_FAULT_ITEMS", "4"))
CPU_MAX = float(os.environ.get("HD_FAULT_CPU_MAX", "0.10"))     # share of one core
ONLY = os.environ.get("HD_FAULT_ONLY", "")


class Skip(Exception):
    pass


def strerror_in(st, err):
    le = st.get("last_error") or ""
    return os.strerror(err) in le


def where(env, ids):
    """id -> 'handoff' | 'claimed' (taken) | 'claimed+hidden' |
    'claimed+bootstrap' | 'archive' | ..."""
    s = invariant.scan(env.spool, env.state)
    out = {}
    for i in ids:
        w = [x[0] for x in s["items"].get(i, [])]
        st = "+".join(w) or "nowhere"
        if st == "claimed":
            if s["bootstraps"].get(i):
                st += "+bootstrap"
            elif s["hidden"].get(i):
                st += "+hidden"
        out[i] = st
    return out


def scenario(label, expect, fault_on, fault_off, *, agents=("alice",), bad=0,
             consume_during=False, status_during=True, env_setup=None, start=None):
    """Drop N valid (and `bad` bad-MAC) handoffs while the fault is on.
    expect: the states a valid item may be in during the fault (where()'s
    names: "handoff", "claimed" = claimed without marker, "+bootstrap")."""
    res = {"label": label}
    with hdtest.Env(agents=list(agents)) as env:
        if env_setup:
            env_setup(env)
        ctx = {}
        try:
            with START_LOCK:
                d = (start or (lambda e: e.start()))(env)
            ctx["d"] = d
            pid = d.proc.pid
            base = d.status()["counters"]
            # Written into tmp/ before the fault (a full spool file system
            # would refuse the producer too), published by rename during it.
            docs = [hdproto.build("bob", agents[0], env.key, ttl=600) for _ in range(N)]
            docs += [hdproto.build("bob", agents[0], b"not the key", ttl=600) for _ in range(bad)]
            os.makedirs(env.path("tmp"), exist_ok=True)
            staged = []
            for doc in docs:
                name = doc["handoff_id"] + ".json"
                tmp = env.path("tmp", "." + name + ".tmp")
                with open(tmp, "wb") as f:
                    f.write(hdproto.dumps(doc))
                staged.append((tmp, name))
            ids = [doc["handoff_id"] for doc in docs[:N]]
            bad_names = [name for _, name in staged[N:]]
            fault_on(env, d, ctx)
            cpu0, t0 = harness.cpu_seconds(pid), time.monotonic()
            for tmp, name in staged:
                os.rename(tmp, env.path("handoff", name))
            consumed = {}
            deadline = t0 + FAULT_S
            while time.monotonic() < deadline:
                if consume_during:
                    for i in ids:
                        b = invariant.real_consume(env.state[agents[0]], i)
                        if b:
                            consumed[i] = consumed.get(i, 0) + 1
                time.sleep(0.05)
            during = where(env, ids)
            cpu = harness.cpu_seconds(pid) - cpu0
            wall = time.monotonic() - t0
            # The bad files' rejections are retried while the fault lasts.
            v = invariant.check(env.spool, env.state, ids, consumed=consumed, rejecting=True)
            st = d.status() if status_during else None
            bad_during = [n for n in bad_names if n in env.names("handoff")]
            fault_off(env, d, ctx)
            t_off = time.monotonic()
            if not status_during:
                st = d.status()
            res.update(during=during, cpu=cpu, wall=wall, violations=v)
            res["errors"] = st["counters"]["errors"] - base["errors"]
            res["last_error"] = st.get("last_error")
            res["watch_ok"] = st["daemon"]["watch_ok"]

            def recovered():
                ok = all(consumed.get(i) or (w.startswith("claimed+bootstrap"))
                         for i, w in where(env, ids).items())
                return ok and all(n not in env.names("handoff") for n in bad_names)
            rec = None
            while time.monotonic() < t_off + WAIT_S:
                if recovered():
                    rec = time.monotonic() - t_off
                    break
                time.sleep(0.1)
            res["recovered_s"] = rec
            # Now take everything; a second copy of anything is a duplicate.
            for i in ids:
                b = invariant.real_consume(env.state[agents[0]], i)
                if b:
                    consumed[i] = consumed.get(i, 0) + 1
            time.sleep(0.3)
            for i in ids:
                b = invariant.real_consume(env.state[agents[0]], i)
                if b:
                    consumed[i] = consumed.get(i, 0) + 1
            res["dups"] = {i: c for i, c in consumed.items() if c > 1}
            res["bad_during"] = len(bad_during)
            res["bad_after"] = [env.reason_of(n)["reason"] if os.path.exists(
                env.path("rejected", n + ".reason")) else "missing" for n in bad_names]
            res["after"] = where(env, ids)
            c = d.status()["counters"]
            res["recovered"] = c["recovered"] + c["retried"]
            rc = d.stop()
            # Stopped: no rejection in flight, no sidecar may be alone.
            res["violations"] = res["violations"] + [
                f"after the stop, sidecar without item: {st}/{n}"
                for st, n in invariant.scan(env.spool, env.state)["orphans"]]
            res["rc"] = rc
            res["expect"] = expect
            res["logtail"] = d.logs()[-1500:]
        finally:
            ctx.get("cleanup", lambda: None)()
    return res


# ---- faults --------------------------------------------------------------

def strace_fault(syscall, action, paths_of=None):
    def on(env, d, ctx):
        paths = paths_of(env) if paths_of else ()
        s = Strace(d.proc.pid, syscall, action, paths)
        s.__enter__()
        ctx["strace"] = s
        ctx["cleanup"] = s.detach

    def off(env, d, ctx):
        ctx["strace"].detach()
    return on, off


def handoffs_dir(env):
    return [os.path.join(env.state["alice"], "handoffs")]


def tmpfs_mount(path, size):
    os.makedirs(path, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise Skip(f"tmpfs-mount: cannot mount a tmpfs here: {p.stderr.strip()}")


def tmpfs_umount(path):
    p = subprocess.run(["umount", "-l", path], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"umount {path}: {p.stderr.strip()}")


def fill(path):
    """Fill the file system of path; returns the filler's name."""
    f = os.path.join(path, "filler")
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    return f


def tmpfs_fault(which):
    def setup(env):
        path = env.state["alice"] if which == "state" else env.spool
        tmpfs_mount(path, "512k")
        env._tmpfs = path

    def on(env, d, ctx):
        ctx["cleanup"] = lambda: tmpfs_umount(env._tmpfs)
        ctx["filler"] = fill(env._tmpfs)

    def off(env, d, ctx):
        os.unlink(ctx["filler"])
    return setup, on, off


def emfile_start(env):
    """The daemon with a low RLIMIT_NOFILE: enough to start, then EMFILE
    at the next file it opens."""
    real = subprocess.Popen

    def popen(*a, **kw):
        kw["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (EMFILE_LIMIT, EMFILE_LIMIT))
        return real(*a, **kw)
    hdtest.subprocess.Popen = popen
    try:
        return env.start()
    finally:
        hdtest.subprocess.Popen = real


EMFILE_LIMIT = 40
START_LOCK = threading.Lock()


def emfile_on(env, d, ctx):
    n = len(os.listdir(f"/proc/{d.proc.pid}/fd"))
    ctx["fds_at_start"] = n
    # Leave no free descriptor: the daemon closes each handoff file once
    # decided (it holds no descriptor per file of a batch), so only this
    # makes the next open fail.
    resource.prlimit(d.proc.pid, resource.RLIMIT_NOFILE, (n, EMFILE_LIMIT))


def emfile_off(env, d, ctx):
    # Back to the start's limit (raising the hard limit needs privileges).
    resource.prlimit(d.proc.pid, resource.RLIMIT_NOFILE, (EMFILE_LIMIT, EMFILE_LIMIT))


def emfile_start_too_low():
    """Too few descriptors to start at all: a clean failure, not a hang."""
    with hdtest.Env(agents=["alice"]) as env:
        conf = env.write_config("d0")
        t0 = time.monotonic()
        p = subprocess.run([hdtest.HANDOFFD, "-f", "-c", conf], capture_output=True, text=True,
                           timeout=30, preexec_fn=lambda: resource.setrlimit(
                               resource.RLIMIT_NOFILE, (8, 8)))
        return p.returncode, p.stderr.strip().splitlines()[-1:] if p.stderr else [], \
            time.monotonic() - t0


def build_scenarios():
    sc = []
    # name, expect during, kwargs
    # The claim is the link of the record into claimed/ (delivery.c), a
    # rejection a link (fsync = yes) or a rename out of handoff/: all fail.
    claim_dirs = lambda e: [e.path("handoff"), e.path("claimed")]  # noqa: E731
    on, off = strace_fault("linkat,renameat2", "error=EIO", claim_dirs)
    sc.append(("rename(claim) EIO", ("handoff",), dict(fault_on=on, fault_off=off, bad=1)))
    on, off = strace_fault("linkat,renameat2", "error=ENOSPC", claim_dirs)
    sc.append(("rename(claim) ENOSPC", ("handoff",), dict(fault_on=on, fault_off=off)))
    on, off = strace_fault("openat", "error=ENOSPC", handoffs_dir)
    sc.append(("open(bootstrap) ENOSPC", ("handoff",), dict(fault_on=on, fault_off=off)))
    on, off = strace_fault("renameat", "error=EIO", handoffs_dir)
    sc.append(("rename(bootstrap) EIO", ("claimed+hidden",), dict(fault_on=on, fault_off=off)))
    on, off = strace_fault("fsync", "error=EIO", handoffs_dir)
    sc.append(("fsync(bootstrap dir) EIO", ("handoff", "claimed+hidden", "claimed+bootstrap"),
               dict(fault_on=on, fault_off=off, consume_during=True)))
    on, off = strace_fault("fsync", "error=EIO")
    sc.append(("fsync(any) EIO", ("handoff", "claimed+hidden"), dict(fault_on=on, fault_off=off)))
    on, off = strace_fault("fsync", "error=ENOSPC")
    sc.append(("fsync(any) ENOSPC", ("handoff", "claimed+hidden"), dict(fault_on=on, fault_off=off)))
    on, off = strace_fault("write", "error=EIO")
    sc.append(("write(any) EIO", ("handoff",),
               dict(fault_on=on, fault_off=off, status_during=False)))
    setup, on, off = tmpfs_fault("state")
    sc.append(("tmpfs state dir full: write ENOSPC", ("handoff",),
               dict(fault_on=on, fault_off=off, env_setup=setup)))
    setup, on, off = tmpfs_fault("spool")
    sc.append(("tmpfs spool full: write ENOSPC", ("handoff", "claimed+hidden", "claimed+bootstrap"),
               dict(fault_on=on, fault_off=off, env_setup=setup, bad=1, consume_during=True)))
    sc.append(("RLIMIT_NOFILE: EMFILE", ("handoff", "claimed+hidden"),
               dict(fault_on=emfile_on, fault_off=emfile_off, start=emfile_start,
                    status_during=False)))
    return [s for s in sc if any(o in s[0] for o in ONLY.split(","))]


def main():
    results, threads = {}, []

    def run_one(label, expect, kw):
        try:
            results[label] = scenario(label, expect, **kw)
        except Skip as e:
            results[label] = {"label": label, "skipped": str(e)}
        except Strace.Unavailable as e:
            results[label] = {"label": label, "skipped": f"strace: {e}"}
        except Exception as e:  # noqa: BLE001
            results[label] = {"label": label, "crashed": f"{type(e).__name__}: {e}"}

    scs = build_scenarios()
    for label, expect, kw in scs:
        t = threading.Thread(target=run_one, args=(label, expect, kw))
        t.start()
        threads.append(t)
        time.sleep(0.2)
    for t in threads:
        t.join()

    failures = []
    for label, expect, kw in scs:
        r = results[label]
        if "skipped" in r:
            tool, _, why = r["skipped"].partition(": ")
            hdtest.skip_part(tool, f"{label}: {why}")
            continue
        if "crashed" in r:
            print(f"- {label}: HARNESS ERROR {r['crashed']}")
            failures.append(f"{label}: {r['crashed']}")
            continue
        states = sorted(set(r["during"].values()))
        rec = r["recovered_s"]
        cpu_share = r["cpu"] / r["wall"]
        print(f"- {label}: during the fault items {states}, errors +{r['errors']}, "
              f"last_error {r['last_error']!r}, CPU {r['cpu']:.2f}s in {r['wall']:.1f}s "
              f"({100 * cpu_share:.0f}%); "
              + (f"recovered {rec:.1f}s after the fault ended" if rec is not None
                 else f"NOT recovered {WAIT_S:.0f}s after the fault ended")
              + (f"; bad file rejected as {r['bad_after']}" if r["bad_after"] else "")
              + f"; recovered+retried {r['recovered']}, duplicates {len(r['dups'])}, exit {r['rc']}")
        f = []
        if any(s not in expect for s in r["during"].values()):
            f.append(f"items not in their source state '{expect}' during the fault: {r['during']}")
        if r["violations"]:
            f.append(f"invariant during the fault: {r['violations']}")
        if r["errors"] <= 0 or not r["last_error"]:
            f.append(f"status does not show the fault: errors +{r['errors']}, last_error {r['last_error']!r}")
        if cpu_share > CPU_MAX:
            f.append(f"busy during the fault: {r['cpu']:.2f}s CPU in {r['wall']:.1f}s")
        if rec is None or rec > RECOVER_S:
            f.append(f"no recovery within {RECOVER_S:.0f}s of the fault's end "
                     f"({'never' if rec is None else f'{rec:.1f}s'}); items now {r['after']}")
        if r["dups"]:
            f.append(f"delivered twice without any crash: {r['dups']}")
        if r["bad_after"] and r["bad_after"] != ["bad_mac"] * len(r["bad_after"]):
            f.append(f"bad file reasons {r['bad_after']}")
        if r["rc"] != 0:
            f.append(f"exit code {r['rc']}")
        for x in f:
            print(f"    FAIL: {x}")
        failures += [f"{label}: {x}" for x in f]

    if any(o in "EMFILE" for o in ONLY.split(",")):
        rc, msg, dt = emfile_start_too_low()
        print(f"- RLIMIT_NOFILE=8 at start: exit {rc} after {dt:.1f}s: {msg}")
        if rc == 0:
            failures.append("started with RLIMIT_NOFILE=8 and exited 0")
    check(not failures, f"{len(failures)} fault expectation(s) failed:\n  " + "\n  ".join(failures))


hdtest.run(main)
