"""Attack (issues 18.5, 19.8): a flood of junk (over 10k files a minute)
with the shortest windows, and files named like sidecars ("fillN.reason")
that end in rejected/ under that name.  rejected/ stays bounded: pruning
keeps up with what arrives, rejections that name no handoff_id (they guard
no replay) go at once when the limit is hit, a sidecar name without its
item is an item and is pruned, and handoffctl status counts the items and
bytes of rejected/ as they are on disk."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

MAX_ITEMS = 100
RATE = 250              # files a second: 15,000 a minute
FLOOD_S = 4.0
FILLS = 20


def on_disk(env):
    n = b = 0
    names = set(os.listdir(env.path("rejected")))
    for x in names:
        if x.startswith("."):
            continue
        try:
            b += os.lstat(env.path("rejected", x)).st_size
        except FileNotFoundError:   # pruned meanwhile
            continue
        if not (x.endswith(".reason") and x[:-7] in names):
            n += 1
    return n, b


def test_attack_retention_flood_bounded(env, conf, d):
    blob = os.urandom(64 * 1024)
    for i in range(FILLS):
        p = env.path("tmp", f"fill{i}.reason")
        with open(p, "wb") as f:
            f.write(blob)
        os.utime(p, (0, 0))
        os.rename(p, env.path("handoff", f"fill{i}.reason"))
    t0 = time.monotonic()
    i = peak = 0
    lat = None
    while time.monotonic() - t0 < FLOOD_S:
        for _ in range(RATE // 10):
            p = env.path("tmp", f"junk{i}.json")
            with open(p, "w") as f:
                f.write('{"junk": %d}' % i)
            os.rename(p, env.path("handoff", f"junk{i}.json"))
            i += 1
        if lat is None and time.monotonic() - t0 > FLOOD_S / 2:
            lat = hdtest.handoff_latency(env)
        peak = max(peak, on_disk(env)[0])
        time.sleep(max(0, (i / RATE) - (time.monotonic() - t0)))
    hdtest.wait_for(lambda: not os.listdir(env.path("handoff")), what="flood decided")
    # Retention (each rescan, 1 s) brings rejected/ back to its limit and
    # prunes the sidecar-named files: waited for, with a generous bound,
    # not a fixed pause that a loaded machine may not give it.
    def settled():
        n, _ = on_disk(env)
        return n <= MAX_ITEMS and not [x for x in os.listdir(env.path("rejected")) if x.startswith("fill")]
    try:
        hdtest.wait_for(settled, timeout=30, what="rejected/ pruned to its limit")
    except hdtest.Fail as e:
        print(f"{e}: {on_disk(env)[0]} items on disk")
    n, b = on_disk(env)
    st = json.loads(env.ctl("status", "-c", conf, "--json").stdout)
    st.setdefault("bytes", {}).setdefault("rejected", None)
    fills = [x for x in os.listdir(env.path("rejected")) if x.startswith("fill")]
    rss = hdtest.proc_status(d.proc.pid, "VmHWM")
    print(f"{i} junk files in {FLOOD_S:.0f}s ({i / FLOOD_S * 60:.0f} a minute) + {FILLS} "
          f"'fillN.reason' of 64 KiB: rejected/ peaked at {peak} items, {n} items "
          f"({b} bytes) after; 'fill' files left {len(fills)}; status says "
          f"{st['counts']['rejected']} items, {st['bytes']['rejected']} bytes; handoff during "
          f"the flood delivered in {lat:.2f}s; peak RSS {rss} kB")
    check(n <= MAX_ITEMS + RATE, f"rejected/ holds {n} items, limit {MAX_ITEMS}")
    check(not fills, f"sidecar-named files never pruned: {len(fills)}")
    check(st["counts"]["rejected"] == n and st["bytes"]["rejected"] == b,
          f"status {st['counts']['rejected']} items {st['bytes']['rejected']} bytes, "
          f"on disk {n} items {b} bytes")


def main():
    with hdtest.Env(agents=["alice"], fsync=False) as env:
        text = env.config_text().replace(
            "rescan_interval = 5", "rescan_interval = 1\nmax_clock_skew = 5\nmax_window = 30")
        text += f"\n[retention]\nrejected_max_items = {MAX_ITEMS}\n"
        conf = env.write_config(text=text)
        d = env.start(conf=conf)
        test_attack_retention_flood_bounded(env, conf, d)
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
