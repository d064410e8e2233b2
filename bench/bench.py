#!/usr/bin/env python3
"""handoffd benchmark (`make bench`), stdlib only.

handoffd against bench/floor (a plain C loop doing the same work per item
with the same library calls, see floor.c), on the same generated items
(about 2 KB each), each run on a fresh temp spool, alternating floor,
handoffd, floor, handoffd ... within each round; medians of the rounds.
Both programs run through the test kit's runner (tests/py/hdtest.py
Daemon: a NOTIFY_SOCKET read for the whole run, the clock starting at
READY=1).  Phases, each for the floor and for handoffd:

  burst    N items dropped back to back (fsync off, then on: the floor
           --watch syncs per item): items/s, CPU per item, memory after
  burst_tmpfs  the fsync-off burst with the temp spools on tmpfs (--tmpfs,
           /dev/shm): no disk, the programs' own cost
  syscalls a burst of --strace-n (1,000), fsync off, the program alone
           under strace -f: system calls per item by call, and the inodes
           it creates, renames, links and unlinks per item
  latency  items dropped one at a time at a fixed rate (fsync off and on):
           drop-to-bootstrap p50/p99; before the first drop of the fsync
           off run, the idle wake-ups per second
  backlog  items already in handoff/ when the program starts (floor
           --batch): time from start to the last bootstrap, memory after

One table at the end: each figure for the floor, for handoffd and as the
ratio handoffd/floor; the syscalls phase's per-call table (floor,
handoffd, handoffd - floor); and one machine-readable line
"BENCH_JSON {...}".
See bench/README.md.  This file: the command line and the order of the
phases; the measuring tools are benchkit.py, the runs bench_runs.py, the
tables bench_report.py.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.environ.get("HD_SRC", os.path.join(HERE, "..")))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
import hdtest  # noqa: E402
from bench_report import (  # noqa: E402
    fmt, hub_ratios, hub_table, relay_ratios, relay_table, spread, summarize, syscall_rows, syscall_table,
    table)
from bench_runs import run_a2a, run_hub, run_one, run_relay  # noqa: E402
from benchkit import (  # noqa: E402
    PROGS, BenchError, create_cost_in, fs_info, machine, presign)

PHASES = ("burst", "burst_tmpfs", "syscalls", "latency", "backlog", "relay", "hub", "a2a")
ITEM_BYTES = 2048    # about this many bytes per handoff file


def parse_rate(s):
    s = str(s).strip().lower()
    for suf in ("/s", "/sec", "per s", "hz"):
        if s.endswith(suf):
            s = s[: -len(suf)].strip()
    v = float(s)
    if v <= 0:
        raise argparse.ArgumentTypeError("rate must be > 0")
    return v


def main():
    env = os.environ.get
    ap = argparse.ArgumentParser(description="handoffd against bench/floor (see bench/README.md)")
    ap.add_argument("--build", default=env("HD_BUILD", os.path.join(SRC, "build")),
                    help="build dir holding handoffd and bench/floor (default: build/)")
    ap.add_argument("-n", "--n", type=int, default=int(env("BENCH_N", "10000")),
                    help="items per burst (default 10000)")
    ap.add_argument("--rounds", type=int, default=int(env("BENCH_ROUNDS", "3")),
                    help="rounds; each runs every phase for the floor then handoffd (default 3)")
    ap.add_argument("--rate", type=parse_rate, default=parse_rate(env("BENCH_RATE", "200")),
                    help="latency phase: drops per second (default 200)")
    ap.add_argument("--rate-n", type=int, default=int(env("BENCH_RATE_N", "1000")),
                    help="latency phase: items (default 1000)")
    ap.add_argument("--backlog", type=int, default=int(env("BENCH_BACKLOG", "20000")),
                    help="backlog phase: items in handoff/ at start (default 20000)")
    ap.add_argument("--idle", type=float, default=float(env("BENCH_IDLE", "5")),
                    help="seconds of idle before the fsync-off latency run, wake-ups counted (default 5)")
    ap.add_argument("--only", default=",".join(PHASES),
                    help=f"phases to run, of {','.join(PHASES)} (default all)")
    ap.add_argument("--tmpfs", default=env("BENCH_TMPFS", "/dev/shm"),
                    help="burst_tmpfs phase: a tmpfs directory for its temp spools (default /dev/shm)")
    ap.add_argument("--strace-n", type=int, default=int(env("BENCH_STRACE_N", "1000")),
                    help="syscalls phase: items in its burst under strace (default 1000)")
    ap.add_argument("--quota", type=int, default=int(env("BENCH_QUOTA", "0")),
                    help="handoffd's [spool] max_waiting and max_waiting_per_sender (default 0: "
                         "no inbox quota; set it above the items of a phase to count its cost)")
    ap.add_argument("--hub-n", type=int, default=int(env("BENCH_HUB_N", "2000")),
                    help="hub phase: handoffs per burst (default 2000; the rate run uses --rate-n)")
    ap.add_argument("--relay-n", type=int, default=int(env("BENCH_RELAY_N", "1000")),
                    help="relay phase: handoffs per run (default 1000)")
    ap.add_argument("--relay-rate", type=parse_rate, default=parse_rate(env("BENCH_RELAY_RATE", "200")),
                    help="relay phase: fixed rate (default 200/s)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds to wait for the last bootstrap (default 300)")
    ap.add_argument("--attach", default=env("BENCH_ATTACH"),
                    help="command run against each program during its watch runs, {pid} {tag} {prog} "
                         "substituted, stopped with SIGINT, e.g. 'strace -c -f -p {pid} -o /tmp/st.{tag}'")
    ap.add_argument("--dump", default=None,
                    help="latency runs: per-item CSV to this path ({tag} substituted)")
    ap.add_argument("--settle", type=float, default=float(env("BENCH_SETTLE", "0")),
                    help="seconds, shared by all runs, to spend creating throwaway files before a run "
                         "while a create costs more than --settle-us (default 0)")
    ap.add_argument("--settle-us", type=float, default=float(env("BENCH_SETTLE_US", "50")),
                    help="create cost in us below which a run starts at once (default 50)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs")
    a = ap.parse_args()
    if min(a.n, a.rounds, a.rate_n, a.backlog, a.strace_n) < 1:
        ap.error("--n, --rounds, --rate-n, --backlog and --strace-n must be >= 1")
    paths = {"handoffd": os.path.join(a.build, "handoffd"),
             "floor": os.path.join(a.build, "bench", "floor"),
             "hubd": os.path.join(a.build, "handoff-hubd"),
             "hubfloor": os.path.join(a.build, "bench", "hubfloor")}
    for p in paths.values():
        if not os.access(p, os.X_OK):
            ap.error(f"{p}: not built (run make bench-floor, or make bench)")
    only = [x.strip() for x in a.only.split(",") if x.strip()]
    if any(x not in PHASES for x in only):
        ap.error(f"--only takes {','.join(PHASES)}")
    plan = [(ph, fs) for ph, fs in (("burst", False), ("burst", True), ("burst_tmpfs", False),
                                    ("syscalls", False), ("latency", False), ("latency", True),
                                    ("backlog", False)) if ph in only]
    sizes = {"burst": a.n, "burst_tmpfs": a.n, "syscalls": a.strace_n, "latency": a.rate_n,
             "backlog": a.backlog}
    if "burst_tmpfs" in only:
        if not os.path.isdir(a.tmpfs):
            ap.error(f"--tmpfs {a.tmpfs}: not a directory (burst_tmpfs phase)")
        a.tmpfs = os.path.realpath(a.tmpfs)
    if "syscalls" in only and not shutil.which("strace"):
        ap.error("the syscalls phase needs strace (apt-get install strace; make deps)")

    # The watcher thread takes its timestamps as soon as it holds the GIL:
    # keep the writer's hold short.
    sys.setswitchinterval(0.0005)

    tmpbase = os.path.realpath(env("TMPDIR") or "/tmp")
    m = machine(tmpbase)
    fs = m["fs"]
    cal_dir = tempfile.mkdtemp(prefix="hdbench.cal.", dir=tmpbase)
    m["create_us"] = create_cost_in(cal_dir, 300)
    jr = {True: ", journal", False: ", NO journal"}.get(fs.get("journal"), "")
    print(f"handoffd bench: {paths['handoffd']} against {paths['floor']}")
    print(f"machine: nproc {m['nproc']}, {m['cpu']}, Linux {m['kernel']}, python {m['python']}")
    print(f"temp dir: {tmpbase} on {fs['mount']} ({fs['type']}{jr}; stat -f: {fs['stat_f']}; {fs['options']})")
    print(f"file create cost there: {m['create_us']:.0f} us per empty file")
    tmpfs_cal = None
    if "burst_tmpfs" in only:
        tfs = fs_info(a.tmpfs)
        tmpfs_cal = tempfile.mkdtemp(prefix="hdbench.cal.", dir=a.tmpfs)
        m["tmpfs"] = {"dir": a.tmpfs, "fs": tfs, "create_us": create_cost_in(tmpfs_cal, 300)}
        warn = "" if tfs["type"] in ("tmpfs", "ramfs") else "  (NOT a tmpfs: --tmpfs DIR or BENCH_TMPFS)"
        print(f"burst_tmpfs temp dir: {a.tmpfs} on {tfs['mount']} ({tfs['type']}; "
              f"{m['tmpfs']['create_us']:.0f} us per empty file){warn}")
    what = {"burst": f"burst {a.n} (fsync off, on)",
            "burst_tmpfs": f"burst {a.n} on tmpfs (fsync off)",
            "syscalls": f"burst {a.strace_n} under strace (fsync off)",
            "latency": f"latency {a.rate_n} at {a.rate:g}/s (fsync off, on; {a.idle:g}s idle before the off run)",
            "backlog": f"backlog {a.backlog} (fsync off)",
            "relay": f"once: relay {a.relay_n} (burst and at {a.relay_rate:g}/s, fsync off, on)",
            "hub": f"once: hub against file drop, burst {a.hub_n} and {a.rate_n} at {a.rate:g}/s (fsync off, on)",
            "a2a": f"once: A2A SendMessage against the hub's POST, burst {a.hub_n} and {a.rate_n} at "
                   f"{a.rate:g}/s (fsync off), 1000 streams open"}
    print((f"{a.rounds} round(s) of: " + ", ".join(what[x] for x in what if x in only and x not in ("relay", "hub", "a2a"))
           + f"; items of about {ITEM_BYTES} bytes" if plan else "")
          + (("; " if plan else "") + what["relay"] if "relay" in only else "")
          + ("; " + what["hub"] if "hub" in only else "")
          + ("; " + what["a2a"] if "a2a" in only else "")
          + (f"; warm-up up to {a.settle:g}s while creates cost > {a.settle_us:g} us" if a.settle > 0 else ""))
    sys.stdout.flush()

    settle = {"us": a.settle_us, "left": a.settle, "dir": cal_dir}
    # tmpfs: creates cost the same whatever was deleted before, no warm-up
    settle_tmpfs = {"us": a.settle_us, "left": 0, "dir": tmpfs_cal}
    results, runs, relay_rows, hub_rows, relay_dirs, a2a_rows = [], [], [], [], [], []
    failed = False

    def on_term(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    def cleanup():
        # Only now, once: on ext4 without a journal, creates right after a
        # mass delete are slower, and one run must not slow the next.
        for r in runs:
            if a.keep:
                print(f"  (temp dir kept: {r.env.dir})", file=sys.stderr)
            else:
                r.cleanup()
        runs.clear()
        shutil.rmtree(cal_dir, ignore_errors=True)
        for d in relay_dirs:
            shutil.rmtree(d, ignore_errors=True)
        relay_dirs.clear()
        if tmpfs_cal:
            shutil.rmtree(tmpfs_cal, ignore_errors=True)

    t_all = time.monotonic()
    try:
        try:
            for rnd in range(a.rounds if plan else 0):
                # Signed per round, so items stay fresh however long the bench.
                key_hex = os.urandom(32).hex()
                items = presign(key_hex.encode(), max(sizes[ph] for ph, _ in plan)) if plan else []
                # floor first in odd rounds, handoffd first in even ones: a
                # file system that gets faster or slower during the bench
                # favours neither.
                order = PROGS if rnd % 2 == 0 else PROGS[::-1]
                for phase, fsync in plan:
                    for prog in order:
                        tag = f"r{rnd + 1}-{phase}-{'on' if fsync else 'off'}-{prog}"
                        t = time.monotonic()
                        try:
                            res = run_one(a, paths, phase, fsync, prog, items[:sizes[phase]], key_hex,
                                          tag, runs, settle_tmpfs if phase == "burst_tmpfs" else settle)
                        except (BenchError, hdtest.Fail, OSError) as e:
                            res = {"prog": prog, "phase": phase, "fsync": "on" if fsync else "off",
                                   "ok": False, "problems": [f"{type(e).__name__}: {e}"]}
                        res["round"] = rnd + 1
                        results.append(res)
                        if phase == "burst_tmpfs" and not a.keep and runs and runs[-1].tag == tag:
                            # in memory: removed now (the ext4 runs wait
                            # for the end, see cleanup())
                            runs.pop().cleanup()
                        fig = {"burst": ("throughput", "items/s"), "burst_tmpfs": ("throughput", "items/s"),
                               "syscalls": ("syscalls_per_item", "calls/it"),
                               "latency": ("lat_p99_ms", "ms p99"), "backlog": ("startup_s", "s")}[phase]
                        warm = f", warmed {res['settle_s']:g}s" if res.get("settle_s") else ""
                        print(f"  {tag:28} {fmt(res.get(fig[0])):>8} {fig[1]:8} "
                              f"(create {fmt(res.get('create_us'))} us{warm}; {time.monotonic() - t:.1f}s)"
                              f"{'' if res.get('ok') else '  FAIL'}")
                        for p in res.get("problems", []):
                            print(f"    problem: {p}")
                        sys.stdout.flush()
                        failed |= not res.get("ok")
            if "relay" in only:
                failed |= run_relay(a, paths, relay_rows, relay_dirs)
            if "hub" in only:
                failed |= run_hub(a, paths, hub_rows)
            if "a2a" in only:
                failed |= run_a2a(a, paths, a2a_rows)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            failed = True

        rows = summarize(a, results)
        sc_rows = syscall_rows(results)
        print()
        if rows:
            print(table(rows))
        if sc_rows:
            print()
            print(syscall_table(a, sc_rows))
        if relay_rows:
            print()
            print(relay_table(a, relay_rows))
        if hub_rows:
            print()
            print(hub_table(a, hub_rows))
        if a2a_rows:
            import bench_a2a
            print()
            print(bench_a2a.table(a2a_rows, a.rate))
        print()
        print("floor, handoffd: medians over the rounds.  ratio: median of the per-round ratios handoffd/floor;")
        print("better: the direction that is good for handoffd (items/s: higher; times, CPU, memory: lower).")
        print("burst: N dropped back to back, items/s = N / (last bootstrap - first drop).  latency: drop")
        print("(rename into handoff/) to the bootstrap's IN_MOVED_TO, one item at a time.  CPU: utime+stime.")
        print("backlog: items in handoff/ before the start; time from start to the last bootstrap.")
        if "burst_tmpfs" in only:
            print(f"tmpfs: the fsync-off burst again with the temp spools in {a.tmpfs} (no disk, so the "
                  "programs' own cost).")
        if sc_rows:
            print(f"syscalls: a burst of {a.strace_n} (fsync off) with the program alone under strace -f "
                  "(not the writer), calls from")
            print("the first drop until it is quiet after the last bootstrap, per item; creates: inodes it "
                  "allocated (O_CREAT")
            print("or O_TMPFILE opens, mkdir, mknod, symlink), renames, links, unlinks: the ones that "
                  "succeeded.")
        if relay_rows:
            print("relay: host a -> one local nats-server -> host b, from the drop on a to the bootstrap on b;")
            print("cpu us/item is a's and b's together; the local burst drops into b's handoff/ in the same setup.")
            print("to the SDK's A2A server: the same burst on a for [remote far] a2a (tests/a2a/server.mjs, its")
            print("executor completes each task at once), from the drop to the item archived on a as completed;")
            print("cpu us/item is a's handoffd and its handoff-a2a (the server's apart, in bench.json).")
        if hub_rows:
            print("hub: handoff-hubd (TLS, 8 keep-alive clients) against the file drop on the same spool; hubfloor:")
            print("bench/hubfloor, the same TLS server writing each body to tmp/ and renaming it into handoff/, nothing")
            print("else; latency from the start of the POST (or the drop) to the bootstrap; cpu us/item is handoffd's")
            print("and that of the way in (the hub's, the hubfloor's; none for the drop);")
            print("in: to the item's arrival in handoff/ (the hub's way in; about 0 for the drop), hd: from there")
            print("to the bootstrap (the daemon's part), both seen by inotify watchers in the bench's process.")
        if a2a_rows:
            print("a2a: SendMessage (returnImmediately, JSON-RPC) and the hub's POST, 8 keep-alive TLS clients each,")
            print("fsync off, the same run; latency from the start of the request to the bootstrap; streams:")
            print("SubscribeToTask streams open at once, the hub's VmRSS and Threads with them, from /proc.")
        sat = [f"{x['prog']} fsync {x['fsync']} round {x['round']}" for x in results if x.get("saturated")]
        if sat:
            print(f"NOTE (*): at {a.rate:g}/s these did not keep up (p50 above the {1000.0 / a.rate:g} ms between "
                  f"drops), so their latency is queueing: {', '.join(sat)}.")
        wb = sorted({f"{x['prog']} fsync {x['fsync']}" + (" on tmpfs" if x["phase"] == "burst_tmpfs" else "")
                     for x in results if x.get("writer_bound")})
        if wb:
            print(f"NOTE: the writer set the pace in the burst of {', '.join(wb)}: items/s there is a lower bound.")
        for r in rows:
            if r["key"] == "throughput" and len([x for x in r["ratios"] if x is not None]) > 1:
                print(f"spread, {r['figure']}: " + spread(r))
        cr = [x["create_us"] for x in results if x.get("create_us") is not None and x["phase"] != "burst_tmpfs"]
        if cr:
            print(f"file create cost before the runs: {min(cr):.0f} to {max(cr):.0f} us "
                  f"(median {statistics.median(cr):.0f})")
        sys.stdout.flush()
        t = time.monotonic()
        cleanup()
        print(f"total {time.monotonic() - t_all:.1f}s (of which {time.monotonic() - t:.1f}s removing "
              f"the temp dirs); {sum(1 for x in results + relay_rows + hub_rows + a2a_rows if x.get('ok'))}/"
              f"{len(results) + len(relay_rows) + len(hub_rows) + len(a2a_rows)} runs ok")
    finally:
        cleanup()
    out = {"version": 3, "machine": m,
           "params": {"n": a.n, "rounds": a.rounds, "rate": a.rate, "rate_n": a.rate_n,
                      "backlog": a.backlog, "idle_s": a.idle, "phases": only,
                      "relay_n": a.relay_n, "relay_rate": a.relay_rate, "hub_n": a.hub_n,
                      "tmpfs": a.tmpfs if "burst_tmpfs" in only else None, "strace_n": a.strace_n},
           "figures": rows, "syscalls": sc_rows, "runs": results, "relay": relay_rows, "hub": hub_rows,
           "a2a": a2a_rows,
           "relay_ratios": [{"figure": w, "ratio": v, "target": t} for w, v, t in relay_ratios(relay_rows)],
           "hub_ratios": [{"figure": w, "ratio": v, "target": t} for w, v, t in hub_ratios(hub_rows)],
           "ok": not failed}
    print("BENCH_JSON " + json.dumps(out, sort_keys=True, separators=(",", ":")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
