#!/usr/bin/env python3
"""The relay phase of `make bench` (bench.py --only relay), stdlib only:
host a (agent bob, [remote] alice on host b) and host b (agent alice), each
a real handoffd on its own temp spool, through one real nats-server on a
loopback port (JetStream, temp store dir).

  rburst  N handoffs dropped on a as fast as one writer can; throughput =
          N / (last bootstrap on b - first drop on a).
  rrate   N handoffs dropped on a at a fixed rate (default 200/s); per item
          the latency from just after the rename into a's handoff/ to the
          bootstrap's IN_MOVED_TO in alice's handoffs/ on b.
  lburst  the reference in the same run: N handoffs dropped straight into
          b's handoff/ (the local path, relay set up but unused), as fast
          as one writer can; throughput and CPU as rburst's.
  rstrace  with strace: a burst of N as rburst's with both daemons under
          strace -f -c: system calls per relayed item on a and on b, all
          and without the waits and wake-ups (futex, recvfrom, epoll_wait
          ...), by call.  Counts: within about 10% between runs (how
          many items a batch holds moves them), where times swing 2x.
  a2aburst  with a2a: N handoffs dropped on a for [remote far] a2a, the
          official SDK's server (tests/a2a/server.mjs) on loopback, as fast
          as one writer can; throughput = N / (last archived on a,
          remote_outcome completed - first drop), latency per item from
          the drop to its archived_at; CPU that of a's handoffd and its
          handoff-a2a (the server's apart, srv_cpu_ms_per_1000).  The
          same hosts as the relay's rows, so the same run.

Every id must get exactly one bootstrap on b, nothing may be rejected, a's
outbox/ must end empty.  Runs alone too:  python3 bench/bench_relay.py
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.environ.get("HD_SRC", os.path.join(HERE, "..")))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
sys.path.insert(0, HERE)
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from benchkit import Watcher, drop_one, pct, proc_cpu  # noqa: E402


class Host:
    def __init__(self, base, name, handoffd, fsync, key_path, agents, relay):
        self.dir = os.path.join(base, name)
        self.spool = os.path.join(self.dir, "spool")
        for d in ("tmp", "handoff"):
            os.makedirs(os.path.join(self.spool, d), exist_ok=True)
        self.state = {a: os.path.join(self.dir, "agents", a) for a in agents}
        for s in self.state.values():
            os.makedirs(os.path.join(s, "handoffs"), exist_ok=True)
        self.sock = os.path.join(self.dir, "control.sock")
        self.conf = os.path.join(self.dir, "handoffd.conf")
        lines = ["[spool]", f"dir = {self.spool}", f"fsync = {'yes' if fsync else 'no'}",
                 "rescan_interval = 30", "resume_window = 1800",
                 "max_waiting = 0", "max_waiting_per_sender = 0", "",
                 "[keys]", f"default = {key_path}", "", "[control]", f"socket = {self.sock}", ""]
        for a, s in self.state.items():
            lines += [f"[agent {a}]", f"state_dir = {s}", ""]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n" + relay)
        self.sockets = {"handoffd": self.sock}
        self.handoffd = handoffd
        self.proc = self.d = None

    def start(self, timeout=20.0):
        # The test kit's runner: it reads NOTIFY_SOCKET for the whole run,
        # as systemd does (hdtest.Daemon needs only .dir and .sockets).
        self.d = hdtest.Daemon(self, self.conf, "handoffd",
                               argv=[self.handoffd, "-f", "-c", self.conf])
        self.proc = self.d.proc
        try:
            self.d.wait_message("READY=1", timeout)
        except hdtest.Fail as e:
            raise RuntimeError(str(e)) from None
        # ... and its relay set up on the server.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (self.status().get("relay") or {}).get("ready"):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"relay not ready: {self.status().get('relay')}")

    def status(self):
        return self.d.status()

    def stop(self):
        if self.d is None:
            return None
        try:
            return self.d.stop()
        except hdtest.Fail:
            return "killed"


def one(a, b, key, phase, n, rate, timeout):
    """One phase on running hosts; a result row for bench.py's table.
    lburst drops into b's own handoff/ (the local path); the others into
    a's."""
    docs = []
    for _ in range(n):
        d = hdproto.build("bob", "alice", key, ttl=1800)
        docs.append((d["handoff_id"] + ".json", hdproto.dumps(d)))
    w = Watcher(os.path.join(b.state["alice"], "handoffs"))
    w.start()
    rs0 = [(x.status()["relay"].get("receipts") or {}) for x in (a, b)]
    cpu0 = proc_cpu(a.proc.pid) + proc_cpu(b.proc.pid)
    src = b if phase == "lburst" else a
    tmp_fd = os.open(os.path.join(src.spool, "tmp"), os.O_RDONLY | os.O_DIRECTORY)
    hand_fd = os.open(os.path.join(src.spool, "handoff"), os.O_RDONLY | os.O_DIRECTORY)
    drops = {}
    t0 = time.monotonic()
    try:
        for i, (name, data) in enumerate(docs):
            if rate:
                delay = t0 + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            drops[name] = drop_one(tmp_fd, hand_fd, name, data)
        t_drop = time.monotonic() - t0
        got = w.wait_count(n, timeout)
    finally:
        os.close(tmp_fd)
        os.close(hand_fd)
        w.close()
    problems = []
    if not got:
        problems.append(f"only {len(w.seen)} of {n} bootstraps on b after {timeout:g}s")
    if w.dups:
        problems.append(f"{len(w.dups)} bootstrap(s) moved in more than once on b")
    lat = sorted((w.seen[k] - drops[k]) * 1000 for k in drops if k in w.seen)
    span = (max(w.seen.values()) - min(drops.values())) if w.seen else None
    time.sleep(0.2)
    sa, sb = a.status(), b.status()
    if sa["relay"]["outbox"]:
        problems.append(f"a's outbox holds {sa['relay']['outbox']}")
    rej = sum(sb["counters"]["rejected"].values()) + sum(sa["counters"]["rejected"].values())
    if rej:
        problems.append(f"{rej} rejected")
    cpu = proc_cpu(a.proc.pid) + proc_cpu(b.proc.pid) - cpu0
    return {"fsync": "on" if "yes" in open(a.conf).read().split("fsync = ")[1][:3] else "off",
            "phase": phase, "n": n, "drop_rate": n / t_drop if t_drop > 0 else None,
            "throughput": len(w.seen) / span if span else None,
            "lat_p50_ms": pct(lat, 50), "lat_p99_ms": pct(lat, 99), "lat_max_ms": lat[-1] if lat else None,
            "cpu_ms_per_1000": cpu * 1000 * 1000 / n, "ok": not problems, "problems": problems,
            "relay_publish_errors": sa["relay"]["publish_errors"],
            "relay_duplicates": sb["relay"]["duplicates"],
            "receipts_applied": (sa["relay"].get("receipts") or {}).get("applied"),
            # receipt messages and signatures (b signs, a verifies): a
            # batch is one of each for many receipts (None before issue 48)
            "receipt_msgs": rdelta(sb, rs0[1], "messages_sent"),
            "receipt_sigs": rdelta(sb, rs0[1], "signed"),
            "receipt_verifies": rdelta(sa, rs0[0], "verified")}


# Calls that say how often a thread waited or woke, not what an item
# cost: left out of rstrace's "fs" figure (they swing with the timing).
WAITS = {"futex", "recvfrom", "sendto", "epoll_wait", "restart_syscall", "getrandom", "mmap",
         "munmap", "mprotect", "madvise", "clone3", "rseq", "set_robust_list", "rt_sigprocmask",
         "sched_yield", "brk", "mlock", "munlock", "poll", "nanosleep", "clock_nanosleep"}


def strace_counts(path):
    """{call: count} of an `strace -c` summary file."""
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            # % time, seconds, usecs/call, calls, [errors,] syscall
            if len(w) in (5, 6) and w[3].isdigit() and w[-1] != "total":
                out[w[-1]] = out.get(w[-1], 0) + int(w[3])
    return out


def one_strace(a, b, key, n, timeout, base):
    """rstrace: a burst of n as rburst's, both daemons under strace -f -c
    for it: system calls per relayed item on a and on b, all of them and
    those without the waits (WAITS), by call.  Counts, not times: they do
    not swing with the machine's load as the timed rows do."""
    procs, files = [], {}
    # spent/ emptied first: the reaper frees the earlier rows' producers'
    # files once the intake is quiet (slice.c), and its unlinks are not
    # this burst's (seen: 2.66 unlinkat per item on a instead of 1).
    for h in (a, b):
        spent = os.path.join(h.spool, "spent")
        hdtest.wait_for(lambda: not os.path.isdir(spent) or not os.listdir(spent), timeout,
                        f"{spent} emptied by the reaper")
    try:
        for h, tag in ((a, "a"), (b, "b")):
            files[tag] = os.path.join(base, f"rstrace.{tag}")
            p = subprocess.Popen(["strace", "-f", "-c", "-o", files[tag], "-p", str(h.proc.pid)],
                                 stderr=subprocess.PIPE, text=True)
            procs.append(p)
            # attached once it says so of the process (and its threads)
            line = p.stderr.readline()
            if "attached" not in line:
                raise RuntimeError(f"strace on {tag}: {line.strip() or 'no output'}")
        r = one(a, b, key, "rburst", n, None, timeout)
    finally:
        for p in procs:
            p.send_signal(2)
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
    row = {"fsync": r["fsync"], "phase": "rstrace", "n": n, "ok": r["ok"], "problems": r["problems"]}
    for tag in ("a", "b"):
        c = strace_counts(files[tag])
        fs = {k: v for k, v in c.items() if k not in WAITS}
        row[f"calls_{tag}"] = sum(c.values()) / n
        row[f"fs_calls_{tag}"] = sum(fs.values()) / n
        row[f"fs_by_call_{tag}"] = {k: round(v / n, 2) for k, v in sorted(fs.items(), key=lambda x: -x[1])}
    return row


def rdelta(st, before, key):
    """st's relay.receipts[key] since before (None: no such counter)."""
    now = (st["relay"].get("receipts") or {}).get(key)
    return None if now is None else now - before.get(key, 0)


def children(pid):
    """The pids whose parent is pid."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            if int(st[st.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(d))
    return out


def tree_cpu(pid):
    """CPU seconds of pid and of its children now running (handoffd and
    its handoff-a2a); a child gone in between is not counted."""
    total = 0.0
    for p in [pid] + children(pid):
        try:
            total += proc_cpu(p)
        except OSError:
            pass
    return total


A2A_DIR = os.path.join(SRC, "tests", "a2a")


def sdk_available():
    return bool(shutil.which("node")) and os.path.isdir(
        os.path.join(A2A_DIR, "node_modules", "@a2a-js", "sdk"))


class SdkServer:
    """tests/a2a/server.mjs on a loopback port: its executor completes
    each task at once with an artifact."""

    def __init__(self, base, token):
        self.port = natsrv.free_port()
        self.log = os.path.join(base, "sdk-server.log")
        args = {"port": self.port, "token": token, "log": self.log}
        self.proc = subprocess.Popen(["node", os.path.join(A2A_DIR, "server.mjs"), json.dumps(args)],
                                     stdout=subprocess.PIPE, cwd=A2A_DIR, text=True,
                                     stderr=open(self.log + ".stderr", "a"))
        line = self.proc.stdout.readline()
        if line.strip() != "listening":
            self.stop()
            raise RuntimeError(f"the SDK server did not start: {line!r}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def one_a2a(a, key, n, timeout, srv):
    """a2aburst on running hosts: a result row."""
    docs = []
    for i in range(n):
        d = hdproto.build("bob", "far", key, ttl=1800, reason=f"bench {i}")
        docs.append((d["handoff_id"], d["handoff_id"] + ".json", hdproto.dumps(d)))
    arch = os.path.join(a.spool, "archive")
    ends, seen = {}, set()

    def look():
        for name in os.listdir(arch):
            if name.endswith(".outcome") and name not in seen:
                try:
                    with open(os.path.join(arch, name)) as f:
                        o = json.load(f)
                except (OSError, ValueError):
                    continue    # being written: read at the next look
                seen.add(name)
                ends[o["handoff_id"]] = o
    look()
    base_ends = set(ends)
    cpu0, srv0 = tree_cpu(a.proc.pid), proc_cpu(srv.proc.pid)
    tmp_fd = os.open(os.path.join(a.spool, "tmp"), os.O_RDONLY | os.O_DIRECTORY)
    hand_fd = os.open(os.path.join(a.spool, "handoff"), os.O_RDONLY | os.O_DIRECTORY)
    drops = {}
    t0 = time.monotonic()
    wall0 = time.time() - t0    # monotonic -> wall clock, archived_at's
    try:
        for hid, name, data in docs:
            drops[hid] = drop_one(tmp_fd, hand_fd, name, data) + wall0
        t_drop = time.monotonic() - t0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(h in ends for h in drops):
            time.sleep(0.02)
            look()
    finally:
        os.close(tmp_fd)
        os.close(hand_fd)
    cpu = tree_cpu(a.proc.pid) - cpu0
    srv_cpu = proc_cpu(srv.proc.pid) - srv0
    problems = []
    done = {h: ends[h] for h in drops if h in ends and h not in base_ends}
    if len(done) < n:
        problems.append(f"only {len(done)} of {n} archived on a after {timeout:g}s")
    bad = [h for h, o in done.items() if o.get("remote_outcome") != "completed"]
    if bad:
        problems.append(f"{len(bad)} not completed, e.g. {done[bad[0]]}")
    at = {h: datetime.fromisoformat(o["archived_at"].replace("Z", "+00:00")).timestamp()
          for h, o in done.items()}
    lat = sorted((at[h] - drops[h]) * 1000 for h in at)
    span = (max(at.values()) - min(drops.values())) if at else None
    with open(srv.log) as f:
        ran = [x.strip() for x in f if x.strip()]
    if len(ran) != len(set(ran)) or len(ran) < len(done):
        problems.append(f"the server ran {len(ran)} messages ({len(set(ran))} distinct) for "
                        f"{len(done)} handoffs")
    return {"fsync": "on" if "yes" in open(a.conf).read().split("fsync = ")[1][:3] else "off",
            "phase": "a2aburst", "n": n, "drop_rate": n / t_drop if t_drop > 0 else None,
            "throughput": len(at) / span if span else None,
            "lat_p50_ms": pct(lat, 50), "lat_p99_ms": pct(lat, 99), "lat_max_ms": lat[-1] if lat else None,
            "cpu_ms_per_1000": cpu * 1000 * 1000 / n, "srv_cpu_ms_per_1000": srv_cpu * 1000 * 1000 / n,
            "ok": not problems, "problems": problems}


def run(handoffd, fsync, n, rate, timeout=120.0, keep=False,
        receipts=os.environ.get("BENCH_RELAY_RECEIPTS") == "1", leave=None, a2a=False,
        strace=False):
    """The relay phases with fsync on or off, receipts on or off:
    [lburst row, rburst row, rrate row].  With a list as leave, the temp
    dir is appended to it, not removed: on ext4 without a journal, creates
    right after a mass delete are several times slower (inode allocation,
    recently_deleted()), and one run's removal must not slow the next
    (seen: a local burst at 984/s after a removal, 7,744/s before)."""
    if not natsrv.available():
        return [{"fsync": "on" if fsync else "off", "phase": "relay", "n": n, "ok": True,
                 "problems": ["nats-server not installed: relay phase skipped"]}]
    base = tempfile.mkdtemp(prefix=f"hdbench.relay-{'on' if fsync else 'off'}.",
                            dir=os.environ.get("TMPDIR") or "/tmp")
    os.chmod(base, 0o755)
    key_path = os.path.join(base, "default.key")
    key = hdproto.make_key(key_path)
    ns = natsrv.Cluster(base, nodes=1)
    relay = "[relay]\nservers = {}\nhost = {}\n"
    rc = {"a": "", "b": ""}
    if receipts:
        # Receipts on (issue 27): each host its own Ed25519 host key, the
        # other's public key in its host_pubkey_dir; b signs and sends a
        # receipt of each delivery, a verifies and records it.
        ctl = os.path.join(os.path.dirname(handoffd), "handoffctl")
        for h, o in (("a", "b"), ("b", "a")):
            hk = os.path.join(base, f"host-{h}.key")
            subprocess.run([ctl, "keygen", "--ed25519", "-o", hk], check=True, capture_output=True)
        for h, o in (("a", "b"), ("b", "a")):
            d = os.path.join(base, f"hosts-{h}")
            os.makedirs(d)
            shutil.copy(os.path.join(base, f"host-{o}.pub"), os.path.join(d, f"{o}.pub"))
            rc[h] = f"host_key = {os.path.join(base, f'host-{h}.key')}\nhost_pubkey_dir = {d}\n"
    srv, far = None, ""
    if a2a and sdk_available():
        # the A2A remote beside the relay's: one more row on the same hosts
        token = "bench-" + os.urandom(8).hex()
        tf = os.path.join(base, "remote.token")
        with open(tf, "w") as f:
            f.write(token + "\n")
        os.chmod(tf, 0o600)
        srv = SdkServer(base, token)
        far = f"\n[remote far]\na2a = http://127.0.0.1:{srv.port}/a2a\ntoken_file = {tf}\n"
    a = Host(base, "a", handoffd, fsync, key_path, ["bob"],
             relay.format(ns.url, "a") + rc["a"] + "\n[remote alice]\nhost = b\n" + far)
    b = Host(base, "b", handoffd, fsync, key_path, ["alice"], relay.format(ns.url, "b") + rc["b"])
    rows = []
    try:
        b.start()
        a.start()
        rows.append(one(a, b, key, "lburst", n, None, timeout))
        rows.append(one(a, b, key, "rburst", n, None, timeout))
        rows.append(one(a, b, key, "rrate", n, rate, timeout))
        if strace and shutil.which("strace"):
            rows.append(one_strace(a, b, key, n, timeout, base))
        if srv:
            rows.append(one_a2a(a, key, n, timeout, srv))
        elif a2a:
            rows.append({"fsync": "on" if fsync else "off", "phase": "a2aburst", "n": n, "ok": True,
                         "problems": ["node or tests/a2a/node_modules missing: a2aburst skipped"]})
        for r in rows:
            r["receipts"] = receipts
        for h, name in ((a, "a"), (b, "b")):
            rc = h.stop()
            if rc != 0:
                rows[-1]["ok"] = False
                rows[-1]["problems"].append(f"handoffd {name} exited {rc}")
    finally:
        for h in (a, b):
            if h.proc and h.proc.poll() is None:
                h.proc.kill()
                h.proc.wait()
        ns.__exit__(None, None, None)
        if srv:
            srv.stop()
        if keep:
            print(f"  (temp dir kept: {base})", file=sys.stderr)
        elif leave is not None:
            leave.append(base)
        else:
            shutil.rmtree(base, ignore_errors=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description="handoffd relay benchmark (a -> nats-server -> b)")
    ap.add_argument("--build", default=os.environ.get("HD_BUILD", os.path.join(SRC, "build")))
    ap.add_argument("-n", "--n", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--fsync", default="on,off")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--receipts", action="store_true",
                    help="receipts on both hosts (also BENCH_RELAY_RECEIPTS=1)")
    ap.add_argument("--a2a", action="store_true",
                    help="the a2aburst row too: N handoffs to the SDK's A2A server")
    ap.add_argument("--strace", action="store_true",
                    help="the rstrace row too: a burst with both daemons under strace -c")
    x = ap.parse_args()
    rows = []
    for m in x.fsync.split(","):
        rows += run(os.path.join(x.build, "handoffd"), m == "on", x.n, x.rate, keep=x.keep,
                    receipts=x.receipts or os.environ.get("BENCH_RELAY_RECEIPTS") == "1",
                    a2a=x.a2a, strace=x.strace)
    for r in rows:
        if r["phase"] == "rstrace":
            print(f"fsync {r['fsync']:3} rstrace receipts {'on ' if r.get('receipts') else 'off'}: "
                  f"system calls per item a {r['calls_a']:.1f} ({r['fs_calls_a']:.1f} without waits), "
                  f"b {r['calls_b']:.1f} ({r['fs_calls_b']:.1f})"
                  f"{'' if r['ok'] else '  FAIL ' + '; '.join(r['problems'])}")
            continue
        print(f"fsync {r['fsync']:3} {r['phase']:6} receipts {'on ' if r.get('receipts') else 'off'}: "
              f"{r.get('throughput') or 0:.0f} items/s, cpu {r.get('cpu_ms_per_1000') or 0:.0f} us/item, "
              f"p50 {r.get('lat_p50_ms') or 0:.2f} ms, p99 {r.get('lat_p99_ms') or 0:.2f} ms"
              + (f", server cpu {r['srv_cpu_ms_per_1000']:.0f} us/item" if r.get("srv_cpu_ms_per_1000") else "")
              + (f", receipts {r['receipts_applied']} in {r['receipt_msgs']} messages, "
                 f"{r['receipt_sigs']} signed, {r['receipt_verifies']} verified"
                 if r.get("receipt_msgs") is not None else "")
              + f"{'' if r['ok'] else '  FAIL ' + '; '.join(r['problems'])}")
    print("BENCH_RELAY_JSON " + json.dumps(rows, sort_keys=True, separators=(",", ":")))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
