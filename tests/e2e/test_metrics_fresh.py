"""The daemon's figures in its [metrics] textfile, and on the hub's
/metrics, follow what it does (issue 36.9): they were written at the
start and then once a rescan_interval, so /metrics said claimed 0 while
four were claimed.

- rescan_interval = 1h: four handoffs claimed, the textfile says
  claimed 4 within a few seconds, and the hub's /metrics says so too;
  the file says when it was written (handoffd_metrics_written_seconds);
- bounded: while handoffs arrive all the time, the file is written at
  most once a second (its renames counted with strace, against the
  seconds the burst took);
- handoffd.conf(5) [metrics] and handoff-hubd(8) /metrics say when the
  figures are written.

Real daemon and hub, plain HTTP on loopback."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check, SRC  # noqa: E402


def figure(text, name):
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def read(path):
    try:
        return open(path).read()
    except FileNotFoundError:
        return ""


def man_flat(rel):
    s = open(os.path.join(SRC, rel)).read()
    return re.sub(r"\s+", " ", re.sub(r"^\.\w+ ?", "", s, flags=re.M).replace("\\-", "-").replace('"', ""))


def main():
    with hdtest.Env(agents=["alice"]) as env:
        prom_dir = os.path.join(env.dir, "prom")
        os.makedirs(prom_dir)
        prom = os.path.join(prom_dir, "handoffd.prom")
        env.extra = f"[metrics]\ntextfile = {prom}\n"
        hub = hubkit.Hub(env, tokens={"bob": None}, tls=False)
        with open(hub.conf) as f:
            text = f.read().replace("rescan_interval = 5\n", "rescan_interval = 1h\n")
        with open(hub.conf, "w") as f:
            f.write(text)
        d = env.start(conf=hub.conf)
        hp = hub.start()
        hdtest.wait_for(lambda: os.path.exists(prom), what="the textfile at the start")

        ids = []
        for _ in range(4):
            doc = hdproto.build("bob", "alice", env.key)
            ids.append(doc["handoff_id"])
            hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: all(os.path.exists(os.path.join(env.state["alice"], "handoffs", i + ".json"))
                                    for i in ids), what="four bootstraps")
        # the last claim's time, as the daemon took it (its accepted_at):
        # not when this process saw the bootstraps, which a loaded machine
        # delays past the write
        t_claimed = max(datetime.fromisoformat(json.load(open(os.path.join(
            env.state["alice"], "handoffs", i + ".json")))["accepted_at"].replace("Z", "+00:00")).timestamp()
            for i in ids)
        key = 'handoffd_events_total{event="claimed"}'
        try:
            hdtest.wait_for(lambda: figure(read(prom), key) == 4, timeout=5,
                            what="the textfile to say claimed 4")
        except hdtest.Fail:
            check(False, f"four claimed, 5 s later the textfile says {key} {figure(read(prom), key)}")
        body = read(prom)
        written = figure(body, "handoffd_metrics_written_seconds")
        print(f"four claimed: the textfile says {key} 4, written at {written} "
              f"({(written or 0) - t_claimed:+.1f} s from the last claim)")
        check(written is not None and written >= int(t_claimed) - 1,
              f"handoffd_metrics_written_seconds {written}, the claims at {t_claimed:.0f}")
        st, page = hub.get("/metrics")
        check(st == 200 and figure(page, key) == 4, f"the hub's /metrics: {st} {figure(page, key)}")
        print(f"the hub's /metrics: {key} 4, handoffd_up_seconds {figure(page, 'handoffd_up_seconds')}")

        # Bounded: a steady arrival, the writes counted.
        if not shutil.which("strace"):
            check(False, "strace is needed to count the writes")
        log = os.path.join(env.dir, "strace.out")
        tr = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=rename,renameat,renameat2",
                               "-o", log, "-p", str(d.proc.pid)], stderr=subprocess.PIPE)
        hdtest.wait_for(lambda: any(ln.startswith("TracerPid:") and ln.split()[1] != "0"
                                    for ln in open(f"/proc/{d.proc.pid}/status")),
                        what="strace attached")
        n = 150 if not hdtest.SANITIZE else 60
        t0 = time.monotonic()
        burst = []
        for k in range(n):
            doc = hdproto.build("bob", "alice", env.key)
            burst.append(doc["handoff_id"])
            hdproto.drop(env.spool, doc)
            time.sleep(0.02)   # a steady arrival, not one burst
        hdtest.wait_for(lambda: os.path.exists(os.path.join(env.state["alice"], "handoffs",
                                                            burst[-1] + ".json")),
                        timeout=60, what="the last of the steady arrivals")
        hdtest.wait_for(lambda: figure(read(prom), key) == 4 + n, timeout=10,
                        what=f"the textfile to say claimed {4 + n}")
        elapsed = time.monotonic() - t0
        tr.terminate()
        tr.wait(30)
        writes = sum(1 for ln in open(log) if "handoffd.prom\"" in ln and "= 0" in ln)
        print(f"{n} handoffs over {elapsed:.1f} s: the textfile written {writes} time(s)")
        check(writes >= 1, "not written at all while handoffs arrived")
        check(writes <= int(elapsed) + 2, f"written {writes} times in {elapsed:.1f} s: more than once a second")
        hp.stop()
        check(d.stop() == 0, "the daemon stops")
    conf5 = man_flat("man/handoffd.conf.5")
    tf = re.search(r"textfile = PATH (.*?) Default", conf5)
    check(tf and "within a second" in tf.group(1),
          f"handoffd.conf(5) [metrics] textfile does not say when it is written: {tf and tf.group(1)!r}")
    hub8 = man_flat("man/handoff-hubd.8")
    mt = re.search(r"GET /metrics (.*?)Status codes", hub8)
    check(mt and "within a second" in mt.group(1),
          f"handoff-hubd(8) /metrics does not say when the daemon's figures are written: "
          f"{mt and mt.group(1)!r}")
    print("ok: the daemon's figures follow within a second, written at most once a second")


hdtest.run(main)
