#!/usr/bin/env python3
"""The a2a phase of `make bench` (bench.py --only a2a), stdlib only: one
real handoffd and one real handoff-hubd (TLS) on a temp spool, fsync off;
in the same run, the same number of handoffs in through the hub's own
POST (/api/v1/handoffs/start) and through A2A SendMessage with
returnImmediately (JSON-RPC at /a2a/alice), each by 8 keep-alive HTTPS
clients:

  burst    N of each, back to back; throughput = N / (last bootstrap -
           first request).
  rate     N of each at a fixed rate (default 200/s); per item the
           latency from the start of the request to the bootstrap.
  streams  1,000 SubscribeToTask streams open at once on a task nobody
           consumes, each past its first event: the hub's RSS and thread
           count with them open, against before.

Printed beside the figures: the targets of issue 45, A2A throughput >=
0.8x the POST's, A2A p99 at 200/s <= 1.5x the POST's, 1,000 streams in
<= 64 MB of RSS and no thread each.  Runs alone too:
python3 bench/bench_a2a.py
"""

import argparse
import json
import os
import resource
import socket
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.environ.get("HD_SRC", os.path.join(HERE, "..")))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
sys.path.insert(0, HERE)
import bench_hub  # noqa: E402
import hubkit  # noqa: E402
from benchkit import Watcher, pct, proc_cpu  # noqa: E402

CLIENTS = 8
STREAMS = 1000
TARGET_THROUGHPUT = 0.8         # A2A / POST, at least
TARGET_P99 = 1.5                # A2A / POST, at most
TARGET_RSS_MB = 64


def a2a_body(i):
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": {
        "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                    "parts": [{"text": f"bench message {i}"}]},
        "configuration": {"returnImmediately": True}}}, separators=(",", ":")).encode()


def headers(hub):
    return {"Content-Type": "application/json", "A2A-Version": "1.0",
            "Authorization": f"Bearer {hub.tokens['bob']}"}


def one_a2a(site, hub, phase, n, rate, timeout, procs):
    """SendMessage (returnImmediately) n times: the row, as bench_hub.one's."""
    bodies = [a2a_body(i) for i in range(n)]
    hs = headers(hub)
    w = Watcher(os.path.join(site.state["alice"], "handoffs"))
    w.start()
    cpu0 = sum(proc_cpu(p.pid) for p in procs)
    starts, bad, lock = {}, [], threading.Lock()
    t0 = time.monotonic()
    try:
        def client(k):
            conn = hub.connect()
            try:
                for i in range(k, n, CLIENTS):
                    if rate:
                        delay = t0 + i / rate - time.monotonic()
                        if delay > 0:
                            time.sleep(delay)
                    t = time.monotonic()
                    st, a = hub.request("POST", "/a2a/alice", bodies[i], hs, conn)
                    tid = (a.get("result", {}).get("task", {}).get("id")
                           if isinstance(a, dict) else None)
                    with lock:
                        if st != 200 or not tid:
                            bad.append((st, a))
                        else:
                            starts[tid + ".json"] = t
            finally:
                conn.close()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t_in = time.monotonic() - t0
        problems = [f"{len(bad)} sends not answered with a task, e.g. {bad[:2]}"] if bad else []
        if not w.wait_count(n, timeout):
            problems.append(f"only {w.count()} of {n} bootstraps after {timeout:g}s")
    finally:
        w.close()
    if w.dups:
        problems.append(f"{len(w.dups)} bootstrap(s) moved in more than once")
    lat = sorted((w.seen[k] - starts[k]) * 1000 for k in starts if k in w.seen)
    span = (w.last() - min(starts.values())) if w.seen and starts else None
    cpu = sum(proc_cpu(p.pid) for p in procs) - cpu0
    return {"fsync": "on" if site.fsync else "off", "how": "a2a", "phase": phase, "n": n,
            "in_rate": n / t_in if t_in > 0 else None,
            "throughput": len(w.seen) / span if span else None,
            "lat_p50_ms": pct(lat, 50), "lat_p99_ms": pct(lat, 99),
            "lat_max_ms": lat[-1] if lat else None,
            "cpu_ms_per_1000": cpu * 1000 * 1000 / n, "ok": not problems, "problems": problems}


def proc_status(pid):
    """VmRSS (MB) and Threads of pid."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k == "VmRSS":
                out["rss_mb"] = int(v.split()[0]) / 1024
            elif k == "Threads":
                out["threads"] = int(v)
    return out


def streams(hub, hub_pid, n):
    """n streams open at once on one task that stays SUBMITTED."""
    st, a = hub.request("POST", "/a2a/alice", a2a_body(0), headers(hub))
    tid = a["result"]["task"]["id"]
    before = proc_status(hub_pid)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                       "params": {"id": tid}}).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers(hub).items())
    req = (f"POST /a2a/alice HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(body)}"
           "\r\n\r\n").encode() + body
    ctx = hub.context()
    socks, problems = [], []
    t0 = time.monotonic()
    try:
        for _ in range(n):
            raw = socket.create_connection(("127.0.0.1", hub.port), timeout=30)
            s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            s.sendall(req)
            socks.append(s)
        for s in socks:
            buf = b""
            while b"id: 1\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    problems.append(f"a stream closed before its first event: {buf[:200]!r}")
                    break
                buf += chunk
        took = time.monotonic() - t0
        with_them = proc_status(hub_pid)
    finally:
        for s in socks:
            s.close()
    return {"how": "a2a", "phase": "streams", "n": n, "open_s": took,
            "rss_before_mb": before.get("rss_mb"), "rss_mb": with_them.get("rss_mb"),
            "threads_before": before.get("threads"), "threads": with_them.get("threads"),
            "ok": not problems and len(socks) == n, "problems": problems[:3]}


def run(handoffd, hubd, n, rate_n, rate, timeout=120.0, keep=False):
    """Burst and rate through the hub's POST and through A2A; then the
    streams: 5 rows."""
    # 1,000 TLS connections here and in the hub (which inherits the limit)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4 * STREAMS:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * STREAMS), hard))
    base = tempfile.mkdtemp(prefix="hdbench.a2a.", dir=os.environ.get("TMPDIR") or "/tmp")
    os.chmod(base, 0o755)
    site = bench_hub.Site(base, False)
    rows = []
    try:
        hub = hubkit.Hub(site, tokens={"bob": None},
                         extra=f"max_per_address = {STREAMS + 64}\nmax_connections = "
                               f"{STREAMS + 64}\nmax_waits_per_token = {STREAMS + 8}\n"
                               "rate_per_token = 0\nmax_requests_per_token = 64\n"
                               "a2a_kept_max_items = 1000000\na2a_kept_max_bytes = 4G\n")
        d, h = bench_hub.start(site, hub, handoffd, hubd)
        procs = [d.proc, h.proc]
        # both ways warmed alike (the daemon's first burst is its slowest)
        bench_hub.one(site, hub, "hub", "burst", max(n // 10, 50), None, timeout, procs)
        one_a2a(site, hub, "burst", max(n // 10, 50), None, timeout, procs)
        for phase, count, r in (("burst", n, None), ("rate", rate_n, rate)):
            rows.append(bench_hub.one(site, hub, "hub", phase, count, r, timeout, procs))
            rows.append(one_a2a(site, hub, phase, count, r, timeout, procs))
        rows.append(streams(hub, h.proc.pid, STREAMS))
    finally:
        bench_hub.stop(site, base, keep)
    return rows


def ratios(rows):
    """The figures against their targets: [(what, value, target, met)]."""
    def get(how, phase, k):
        for r in rows:
            if r.get("how") == how and r.get("phase") == phase:
                return r.get(k)
        return None
    out = []
    a, p = get("a2a", "burst", "throughput"), get("hub", "burst", "throughput")
    if a and p:
        out.append(("A2A SendMessage / hub POST, burst throughput", a / p,
                    f">= {TARGET_THROUGHPUT}", a / p >= TARGET_THROUGHPUT))
    a, p = get("a2a", "rate", "lat_p99_ms"), get("hub", "rate", "lat_p99_ms")
    if a and p:
        out.append(("A2A SendMessage / hub POST, p99 at the rate", a / p, f"<= {TARGET_P99}",
                    a / p <= TARGET_P99))
    rss, t0, t1 = (get("a2a", "streams", k) for k in ("rss_mb", "threads_before", "threads"))
    if rss is not None:
        out.append((f"hub RSS (MB) with {STREAMS} streams open", rss, f"<= {TARGET_RSS_MB}",
                    rss <= TARGET_RSS_MB))
    if t0 is not None and t1 is not None:
        out.append((f"hub threads with {STREAMS} streams open (before: {t0})", t1,
                    f"<= {t0} + 2 (no thread each)", t1 <= t0 + 2))
    return out


def table(rows, rate):
    head = (f"{'A2A against the hub POST (same run)':<44}  {'items/s':>8}  {'p50 ms':>7}  "
            f"{'p99 ms':>7}  {'max ms':>7}  {'cpu us/item':>11}")
    lines = [head, "-" * len(head)]
    fmt = lambda v: "-" if v is None else f"{v:.2f}" if v < 100 else f"{v:.0f}"  # noqa: E731
    for r in rows:
        if r.get("phase") == "streams":
            lines.append(f"{'a2a: ' + str(r['n']) + ' streams open':<44}  RSS {fmt(r.get('rss_mb'))} MB "
                         f"(before {fmt(r.get('rss_before_mb'))}), threads {r.get('threads')} "
                         f"(before {r.get('threads_before')}), opened in {fmt(r.get('open_s'))} s"
                         f"{'' if r.get('ok') else '  FAIL'}")
            continue
        what = {"burst": f"burst of {r.get('n')}", "rate": f"{r.get('n')} at {rate:g}/s"}[r["phase"]]
        what = f"{'POST' if r['how'] == 'hub' else 'SendMessage'}: {what}, fsync {r.get('fsync')}"
        lines.append(f"{what:<44}  {fmt(r.get('throughput')):>8}  {fmt(r.get('lat_p50_ms')):>7}  "
                     f"{fmt(r.get('lat_p99_ms')):>7}  {fmt(r.get('lat_max_ms')):>7}  "
                     f"{fmt(r.get('cpu_ms_per_1000')):>11}{'' if r.get('ok') else '  FAIL'}")
    lines.append("")
    for what, v, target, met in ratios(rows):
        lines.append(f"{what:<60}  {fmt(v):>7}  target {target:<28} {'met' if met else 'NOT MET'}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description="A2A SendMessage against the hub's POST; streams")
    ap.add_argument("--build", default=os.environ.get("HD_BUILD", os.path.join(SRC, "build")))
    ap.add_argument("-n", "--n", type=int, default=2000)
    ap.add_argument("--rate-n", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--keep", action="store_true")
    x = ap.parse_args()
    rows = run(os.path.join(x.build, "handoffd"), os.path.join(x.build, "handoff-hubd"),
               x.n, x.rate_n, x.rate, keep=x.keep)
    print(table(rows, x.rate))
    for r in rows:
        for p in r.get("problems", []):
            print(f"  problem: {p}")
    print("BENCH_A2A_JSON " + json.dumps(rows, sort_keys=True, separators=(",", ":")))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
