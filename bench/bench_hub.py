#!/usr/bin/env python3
"""The hub phase of `make bench` (bench.py --only hub), stdlib only: one
real handoffd and one real handoff-hubd (TLS, a certificate made with
openssl) on a temp spool; the same kind of signed handoffs go in through
the file drop and through the hub in the same run.

  burst  N handoffs: dropped back to back by one writer (file), or posted
         by 8 keep-alive HTTPS clients (hub, hubfloor); throughput = N /
         (last bootstrap - first drop or post).
  rate   N handoffs at a fixed rate (default 200/s; the hub's spread over
         the 8 clients); per item the latency from the drop (just after the
         rename into handoff/) or the start of the POST, to the bootstrap's
         IN_MOVED_TO in the agent's handoffs/.  Also through /mcp (how
         "mcp"): the MCP tool handoff_send, a tools/call POST of 8 clients
         each in its own session (made before the clock starts), which the
         hub signs and drops as a POST; its p99 against the hub's POST
         (target <= 1.5x).

hubfloor is bench/hubfloor.c: the least an HTTPS way in needs (the same
libmicrohttpd, TLS and certificate, each body written to tmp/ and renamed
into handoff/, nothing else), posted to by the same clients.

Every id must get exactly one bootstrap and every POST a 200.  Runs alone
too:  python3 bench/bench_hub.py
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.environ.get("HD_SRC", os.path.join(HERE, "..")))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
sys.path.insert(0, HERE)
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from bench_report import hub_mcp_note  # noqa: E402
from benchkit import Watcher, drop_one, pct, proc_cpu  # noqa: E402

CLIENTS = 8
HOWS = ("file", "hubfloor", "hub")


class Floor:
    """bench/hubfloor on its own port, with the hub's certificate; posted
    to as the hub is, the name in the query."""

    def __init__(self, hub, port):
        self.hub = hub
        self.port = port

    def connect(self, timeout=30):
        import http.client
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                           context=self.hub.context())

    def post(self, doc, agent, conn, raw):
        c = conn
        c.request("POST", "/api/v1/handoffs/start?id=" + doc["handoff_id"], body=raw,
                  headers={"Content-Type": "application/json",
                           "Authorization": f"Bearer {self.hub.tokens.get(agent)}"})
        r = c.getresponse()
        data = r.read()
        return r.status, data


MCP_TARGET = 1.5        # /mcp's p99 at the rate, against the hub's POST's
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def mcp_session(hub, conn):
    """A session of bob's at /mcp on conn: the headers of its calls."""
    h = dict(MCP_HEADERS, Authorization=f"Bearer {hub.tokens['bob']}")
    conn.request("POST", "/mcp", json.dumps({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}}).encode(), h)
    r = conn.getresponse()
    r.read()
    h["Mcp-Session-Id"] = r.getheader("Mcp-Session-Id")
    h["MCP-Protocol-Version"] = "2025-11-25"
    conn.request("POST", "/mcp", b'{"jsonrpc":"2.0","method":"notifications/initialized"}', h)
    r = conn.getresponse()
    r.read()
    return h


def mcp_send(conn, h, i):
    """handoff_send to alice: (HTTP status, the handoff_id or the answer)."""
    conn.request("POST", "/mcp", json.dumps({
        "jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
        "params": {"name": "handoff_send", "arguments": {
            "to_agent": "alice", "reason": "bench", "ttl_seconds": 1800}}}).encode(), h)
    r = conn.getresponse()
    a = json.loads(r.read())
    res = a.get("result") or {}
    if r.status != 200 or res.get("isError"):
        return r.status, a
    return 200, res["structuredContent"]["handoff_id"]


class Site:
    """What hdtest.Daemon and hubkit.Hub need of an environment."""

    def __init__(self, base, fsync):
        self.dir = base
        self.spool = os.path.join(base, "spool")
        for d in ("tmp", "handoff"):
            os.makedirs(os.path.join(self.spool, d), exist_ok=True)
        self.state = {a: os.path.join(base, "agents", a) for a in ("alice", "bob")}
        for a in self.state:
            os.makedirs(os.path.join(self.state[a], "handoffs"), exist_ok=True)
        self.key_path = os.path.join(base, "default.key")
        self.key = hdproto.make_key(self.key_path)
        self.sock = os.path.join(base, "control.sock")
        self.sockets = {"handoffd": self.sock}
        self.daemons = []
        self.extra = ""
        self.fsync = fsync

    def config_text(self, name="d0", extra=""):
        return "\n".join(["[spool]", f"dir = {self.spool}",
                          f"fsync = {'yes' if self.fsync else 'no'}", "rescan_interval = 30",
                          "resume_window = 1800", "max_waiting = 0", "max_waiting_per_sender = 0",
                          "", "[keys]", f"default = {self.key_path}", "",
                          "[control]", f"socket = {self.sock}", "",
                          "[agent alice]", f"state_dir = {self.state['alice']}", "",
                          # /mcp serves an agent of this host (its inbox)
                          "[agent bob]", f"state_dir = {self.state['bob']}", ""]) + "\n" + extra

    def write_config(self, name="d0", extra="", text=None):
        path = os.path.join(self.dir, name + ".conf")
        with open(path, "w") as f:
            f.write(text if text is not None else self.config_text(name, extra))
        return path


def one(site, hub, how, phase, n, rate, timeout, procs):
    """One row: n handoffs by how (file, hub or hubfloor, whose server is
    passed as hub)."""
    docs = [hdproto.build("bob", "alice", site.key, ttl=1800) for _ in range(n)]
    # the bytes made before any clock starts, for both ways in alike
    bodies = [hdproto.dumps(d) for d in docs]
    w = Watcher(os.path.join(site.state["alice"], "handoffs"))
    w.start()
    # each item's arrival in handoff/ splits its latency: the way in (the
    # hub's request, zero for the file drop, whose clock starts there) and
    # the daemon's part (handoff/ to the bootstrap)
    arrive = Watcher(os.path.join(site.spool, "handoff"))
    arrive.start()
    cpu0 = sum(proc_cpu(p.pid) for p in procs)
    starts, problems = {}, []
    t0 = time.monotonic()
    try:
        if how == "file":
            tmp_fd = os.open(os.path.join(site.spool, "tmp"), os.O_RDONLY | os.O_DIRECTORY)
            hand_fd = os.open(os.path.join(site.spool, "handoff"), os.O_RDONLY | os.O_DIRECTORY)
            try:
                for i, d in enumerate(docs):
                    if rate:
                        delay = t0 + i / rate - time.monotonic()
                        if delay > 0:
                            time.sleep(delay)
                    name = d["handoff_id"] + ".json"
                    starts[name] = drop_one(tmp_fd, hand_fd, name, bodies[i])
            finally:
                os.close(tmp_fd)
                os.close(hand_fd)
        else:
            bad, lock = [], threading.Lock()
            conns = [hub.connect() for _ in range(CLIENTS)]
            sessions = [mcp_session(hub, c) for c in conns] if how == "mcp" else None
            t0 = time.monotonic()

            def client(k):
                conn = conns[k]
                try:
                    for i in range(k, n, CLIENTS):
                        if rate:
                            delay = t0 + i / rate - time.monotonic()
                            if delay > 0:
                                time.sleep(delay)
                        t = time.monotonic()
                        if how == "mcp":
                            st, a = mcp_send(conn, sessions[k], i)
                            hid = a if st == 200 else None
                        else:
                            hid = docs[i]["handoff_id"]
                            st, a = hub.post(docs[i], "bob", conn=conn, raw=bodies[i])
                        with lock:
                            if hid:
                                starts[hid + ".json"] = t
                            if st != 200:
                                bad.append((st, a))
                finally:
                    conn.close()
            threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if bad:
                problems.append(f"{len(bad)} posts not accepted, e.g. {bad[:2]}")
        t_in = time.monotonic() - t0
        if not w.wait_count(n, timeout):
            problems.append(f"only {w.count()} of {n} bootstraps after {timeout:g}s")
    finally:
        w.close()
        arrive.close()
    if w.dups:
        problems.append(f"{len(w.dups)} bootstrap(s) moved in more than once")
    lat = sorted((w.seen[k] - starts[k]) * 1000 for k in starts if k in w.seen)
    both = [k for k in starts if k in w.seen and k in arrive.seen]
    lat_in = sorted(max(0.0, arrive.seen[k] - starts[k]) * 1000 for k in both)
    lat_daemon = sorted((w.seen[k] - arrive.seen[k]) * 1000 for k in both)
    span = (w.last() - min(starts.values())) if w.seen and starts else None
    cpu = sum(proc_cpu(p.pid) for p in procs) - cpu0
    return {"fsync": "on" if site.fsync else "off", "how": how, "phase": phase, "n": n,
            "in_rate": n / t_in if t_in > 0 else None,
            "throughput": len(w.seen) / span if span else None,
            "lat_p50_ms": pct(lat, 50), "lat_p99_ms": pct(lat, 99),
            "lat_max_ms": lat[-1] if lat else None,
            "lat_in_p50_ms": pct(lat_in, 50), "lat_in_p99_ms": pct(lat_in, 99),
            "lat_daemon_p50_ms": pct(lat_daemon, 50), "lat_daemon_p99_ms": pct(lat_daemon, 99),
            "cpu_ms_per_1000": cpu * 1000 * 1000 / n, "ok": not problems, "problems": problems}


def start(site, hub, handoffd, hubd):
    """handoffd and handoff-hubd on hub.conf, each ready: (daemon, hub)."""
    d = hdtest.Daemon(site, hub.conf, "handoffd", argv=[handoffd, "-f", "-c", hub.conf])
    site.daemons.append(d)
    d.wait_message("READY=1")
    h = hdtest.Daemon(site, hub.conf, "hub", argv=[hubd, "-f", "-c", hub.conf])
    site.daemons.append(h)
    h.wait_message("READY=1")
    return d, h


def stop(site, base, keep):
    """Every program of site stopped; base removed unless kept."""
    for x in site.daemons:
        if x.proc.poll() is None:
            x.proc.terminate()
            x.proc.wait()
        x.log.close()
    if keep:
        print(f"  (temp dir kept: {base})", file=sys.stderr)
    else:
        shutil.rmtree(base, ignore_errors=True)


def mcp_ratio(rows):
    """The mcp row's p99 against the hub row's of its run, and whether it
    is within MCP_TARGET."""
    hub = next((r for r in rows if r["how"] == "hub" and r["phase"] == "rate"), None)
    for r in rows:
        if r["how"] == "mcp" and hub and hub.get("lat_p99_ms") and r.get("lat_p99_ms"):
            r["p99_vs_hub"] = r["lat_p99_ms"] / hub["lat_p99_ms"]
            r["p99_target"] = MCP_TARGET


def run(handoffd, hubd, fsync, n, rate_n, rate, timeout=120.0, keep=False, hubfloor=None):
    """Burst and rate through the file drop, the hub floor and the hub, and
    the rate through /mcp: 7 rows."""
    hubfloor = hubfloor or os.path.join(os.path.dirname(handoffd), "bench", "hubfloor")
    base = tempfile.mkdtemp(prefix=f"hdbench.hub-{'on' if fsync else 'off'}.",
                            dir=os.environ.get("TMPDIR") or "/tmp")
    os.chmod(base, 0o755)
    site = Site(base, fsync)
    rows = []
    try:
        hub = hubkit.Hub(site, tokens={"bob": None}, extra="max_per_address = 64\nrate_per_token = 0\nmax_requests_per_token = 64\n")
        d, h = start(site, hub, handoffd, hubd)
        fport = hubkit.free_port()
        f = hdtest.Daemon(site, hub.conf, "hubfloor",
                          argv=[hubfloor, "--listen", str(fport), "--cert", hub.cert, "--key", hub.key,
                                "--spool", site.spool] + (["--fsync"] if fsync else []))
        site.daemons.append(f)
        f.wait_message("READY=1")
        floor = Floor(hub, fport)
        for phase, count, r in (("burst", n, None), ("rate", rate_n, rate)):
            for how in HOWS + (("mcp",) if phase == "rate" else ()):
                # CPU: the daemon's and that of the way in
                procs = [d.proc] + ([f.proc] if how == "hubfloor" else [] if how == "file" else [h.proc])
                rows.append(one(site, floor if how == "hubfloor" else hub, how, phase, count, r,
                                timeout, procs))
        mcp_ratio(rows)
    finally:
        stop(site, base, keep)
    return rows


def main():
    ap = argparse.ArgumentParser(description="handoff-hubd against the file drop")
    ap.add_argument("--build", default=os.environ.get("HD_BUILD", os.path.join(SRC, "build")))
    ap.add_argument("-n", "--n", type=int, default=2000)
    ap.add_argument("--rate-n", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--fsync", default="off,on")
    ap.add_argument("--keep", action="store_true")
    x = ap.parse_args()
    rows = []
    for m in x.fsync.split(","):
        rows += run(os.path.join(x.build, "handoffd"), os.path.join(x.build, "handoff-hubd"),
                    m == "on", x.n, x.rate_n, x.rate, keep=x.keep)
    for r in rows:
        print(f"fsync {r['fsync']:3} {r['phase']:5} {r['how']:4}: {r.get('throughput') or 0:.0f} items/s, "
              f"p50 {r.get('lat_p50_ms') or 0:.2f} ms, p99 {r.get('lat_p99_ms') or 0:.2f} ms "
              f"(in p50 {r.get('lat_in_p50_ms') or 0:.2f} p99 {r.get('lat_in_p99_ms') or 0:.2f}, "
              f"daemon p50 {r.get('lat_daemon_p50_ms') or 0:.2f} p99 {r.get('lat_daemon_p99_ms') or 0:.2f})"
              f"{hub_mcp_note(r)}"
              f"{'' if r['ok'] else '  FAIL ' + '; '.join(r['problems'])}")
    print("BENCH_HUB_JSON " + json.dumps(rows, sort_keys=True, separators=(",", ":")))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
