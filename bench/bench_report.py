"""The report of `make bench`: medians of the rounds, the table of
figures for the floor, handoffd and their ratio, the syscalls phase's
per-call table, and the relay's and the hub's tables.
"""

import statistics

from benchkit import PROGS


# (label, phase, fsync, key, better).  better: which way is good for handoffd.
def figures(a):
    k = f"{a.n / 1000:g}k"
    sk = f"{a.strace_n / 1000:g}k burst:"
    b = f"{a.backlog / 1000:g}k"
    rate = f"{a.rate:g}/s"
    return [
        ("burst items/s, fsync off", "burst", "off", "throughput", "higher"),
        ("burst items/s, fsync on (floor: per item)", "burst", "on", "throughput", "higher"),
        ("burst items/s, fsync off, tmpfs", "burst_tmpfs", "off", "throughput", "higher"),
        (f"latency p50 ms at {rate}, fsync off", "latency", "off", "lat_p50_ms", "lower"),
        (f"latency p99 ms at {rate}, fsync off", "latency", "off", "lat_p99_ms", "lower"),
        (f"latency p50 ms at {rate}, fsync on", "latency", "on", "lat_p50_ms", "lower"),
        (f"latency p99 ms at {rate}, fsync on", "latency", "on", "lat_p99_ms", "lower"),
        ("CPU us/item, burst, fsync off", "burst", "off", "cpu_us_per_item", "lower"),
        ("CPU us/item, burst, fsync on", "burst", "on", "cpu_us_per_item", "lower"),
        ("CPU us/item, burst, fsync off, tmpfs", "burst_tmpfs", "off", "cpu_us_per_item", "lower"),
        (f"{sk} syscalls/item, fsync off (strace)", "syscalls", "off", "syscalls_per_item", "lower"),
        (f"{sk} file creations/item (inodes)", "syscalls", "off", "creates_per_item", "lower"),
        (f"{sk} renames/item", "syscalls", "off", "renames_per_item", "lower"),
        (f"{sk} links/item", "syscalls", "off", "links_per_item", "lower"),
        (f"{sk} unlinks/item", "syscalls", "off", "unlinks_per_item", "lower"),
        (f"VmRSS kB after a {k} burst", "burst", "off", "vmrss_kb", "lower"),
        (f"VmHWM kB after a {k} burst", "burst", "off", "vmhwm_kb", "lower"),
        (f"startup s, {b} backlog (floor --batch)", "backlog", "off", "startup_s", "lower"),
        (f"VmRSS kB after a {b} backlog", "backlog", "off", "vmrss_kb", "lower"),
        (f"VmHWM kB after a {b} backlog", "backlog", "off", "vmhwm_kb", "lower"),
        (f"idle wake-ups/s ({a.idle:g} s)", "latency", "off", "wakeups_per_s", "lower"),
    ]


def median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v):
    if v is None:
        return "-"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def summarize(a, results):
    """One row per figure: medians of the floor and of handoffd over the
    rounds, and the median of the per-round ratios handoffd/floor (each
    ratio from two runs a few seconds apart, so machine noise cancels)."""
    rows = []
    for label, phase, fsync, key, better in figures(a):
        by = {p: [x for x in results if x["phase"] == phase and x["fsync"] == fsync and x["prog"] == p]
              for p in PROGS}
        if not by["floor"] and not by["handoffd"]:
            continue
        # A run that failed its checks gives no figure.
        fl = [x.get(key) if x.get("ok") else None for x in by["floor"]]
        hd = [x.get(key) if x.get("ok") else None for x in by["handoffd"]]
        ratios, saturated = [], []
        for f, h, fv, hv in zip(by["floor"], by["handoffd"], fl, hd):
            ratios.append(hv / fv if fv and hv is not None else None)
            saturated.append([p for p, x in (("floor", f), ("handoffd", h))
                              if x.get("saturated") and key.startswith("lat_")])
        rr = [x for x in ratios if x is not None]
        rows.append({"figure": label, "phase": phase, "fsync": fsync, "key": key, "better": better,
                     "floor": median(fl), "handoffd": median(hd), "ratio": median(ratios),
                     "ratio_min": round(min(rr), 3) if rr else None,
                     "ratio_max": round(max(rr), 3) if rr else None,
                     "ratios": [None if x is None else round(x, 3) for x in ratios],
                     "saturated": saturated, "floor_rounds": fl, "handoffd_rounds": hd})
    return rows


def spread(r):
    """min-max of the floor's, handoffd's and the ratio's rounds."""
    def mm(vals):
        vals = [v for v in vals if v is not None]
        return f"{fmt(min(vals))}-{fmt(max(vals))}" if vals else "-"
    return (f"floor {mm(r['floor_rounds'])}, handoffd {mm(r['handoffd_rounds'])}, "
            f"ratio {mm(r['ratios'])} ({len(r['ratios'])} rounds)")


def table(rows):
    w = max(len(r["figure"]) for r in rows)
    head = f"{'figure':<{w}}  {'floor':>9}  {'handoffd':>9}  {'ratio':>6}  {'better':>6}  per round"
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        per = " ".join(("-" if x is None else f"{x:.2f}") + ("*" if sat else "")
                       for x, sat in zip(r["ratios"], r["saturated"]))
        lines.append(f"{r['figure']:<{w}}  {fmt(r['floor']):>9}  {fmt(r['handoffd']):>9}  "
                     f"{ratio:>6}  {r['better']:>6}  {per}")
    return "\n".join(lines)


TOP_CALLS = 12


def syscall_rows(results):
    """The syscalls phase per call: per item, median over the rounds of
    each program's ok runs, the TOP_CALLS calls largest in either program,
    then the rest, the total, the failed calls and the file operations."""
    runs = {p: [x for x in results if x["phase"] == "syscalls" and x["prog"] == p and x.get("ok")]
            for p in PROGS}
    if not runs["floor"] and not runs["handoffd"]:
        return []

    def med(p, get):
        return median([get(x) for x in runs[p]]) if runs[p] else None

    names = {k for p in PROGS for x in runs[p] for k in x.get("calls_per_item", {})}
    per = {k: {p: med(p, lambda x: x["calls_per_item"].get(k, 0.0)) for p in PROGS} for k in names}
    top = sorted(names, key=lambda k: (-max(v or 0 for v in per[k].values()), k))
    rows = []

    def add(what, kind, f, h):
        f, h = (None if v is None else round(v, 3) for v in (f, h))
        rows.append({"what": what, "kind": kind, "floor": f, "handoffd": h,
                     "diff": None if f is None or h is None else round(h - f, 3)})
    for k in top[:TOP_CALLS]:
        add(k, "call", per[k]["floor"], per[k]["handoffd"])
    rest = top[TOP_CALLS:]
    if rest:
        add(f"{len(rest)} other calls", "other",
            *(None if not runs[p] else sum(per[k][p] or 0 for k in rest) for p in PROGS))
    add("all system calls", "total", med("floor", lambda x: x["syscalls_per_item"]),
        med("handoffd", lambda x: x["syscalls_per_item"]))
    add("of which failed (ENOENT, EAGAIN, ...)", "failed", med("floor", lambda x: x["failed_per_item"]),
        med("handoffd", lambda x: x["failed_per_item"]))
    for what, key in (("file creations (inodes)", "creates_per_item"),
                      ("  of which O_CREAT without O_EXCL", "creates_maybe_per_item"),
                      ("  of which O_TMPFILE", "tmpfiles_per_item"),
                      ("renames", "renames_per_item"), ("links", "links_per_item"),
                      ("unlinks", "unlinks_per_item")):
        add(what, "file", med("floor", lambda x: x.get(key)), med("handoffd", lambda x: x.get(key)))
    return rows


def syscall_table(a, rows):
    w = max(40, max(len(r["what"]) for r in rows))
    head = (f"{f'per item, {a.strace_n}-item burst under strace':<{w}}  {'floor':>8}  {'handoffd':>8}  "
            f"{'hd-floor':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r["kind"] in ("total", "file") and r["what"] in ("all system calls", "file creations (inodes)"):
            lines.append("-" * len(head))
        diff = "-" if r["diff"] is None else f"{r['diff']:+.2f}"
        lines.append(f"{r['what']:<{w}}  {fmt2(r['floor']):>8}  {fmt2(r['handoffd']):>8}  {diff:>8}")
    return "\n".join(lines)


def fmt2(v):
    return "-" if v is None else f"{v:.2f}"


def relay_ratios(rows):
    """The relay's targets as ratios in the same run, per fsync: relay burst
    / local burst (with and without receipts), CPU per relayed item (a and
    b) / per local one, receipts on / off.  A list of (what, value,
    target) rows."""
    def get(fsync, receipts, phase, key):
        for r in rows:
            if (r.get("fsync"), bool(r.get("receipts")), r.get("phase")) == (fsync, receipts, phase):
                return r.get(key)
        return None

    def ratio(x, y):
        return x / y if x and y else None

    out = []
    for fsync in ("off", "on"):
        for receipts in (False, True):
            rc = "receipts on" if receipts else "receipts off"
            out.append((f"relay/local burst items/s, fsync {fsync}, {rc}",
                        ratio(get(fsync, receipts, "rburst", "throughput"),
                              get(fsync, receipts, "lburst", "throughput")), ">= 0.5"))
            out.append((f"relay/local CPU per item, fsync {fsync}, {rc}",
                        ratio(get(fsync, receipts, "rburst", "cpu_ms_per_1000"),
                              get(fsync, receipts, "lburst", "cpu_ms_per_1000")), "<= 2.0"))
        out.append((f"receipts on/off relay burst items/s, fsync {fsync}",
                    ratio(get(fsync, True, "rburst", "throughput"),
                          get(fsync, False, "rburst", "throughput")), ">= 0.9"))
        out.append((f"receipts on/off CPU per relayed item, fsync {fsync}",
                    ratio(get(fsync, True, "rburst", "cpu_ms_per_1000"),
                          get(fsync, False, "rburst", "cpu_ms_per_1000")), ""))
        # issue 46: handoffs to an A2A remote against the relay's
        out.append((f"A2A remote/relay burst items/s, fsync {fsync}",
                    ratio(get(fsync, False, "a2aburst", "throughput"),
                          get(fsync, False, "rburst", "throughput")), ""))
        out.append((f"A2A remote/relay CPU per item, fsync {fsync}",
                    ratio(get(fsync, False, "a2aburst", "cpu_ms_per_1000"),
                          get(fsync, False, "rburst", "cpu_ms_per_1000")), ""))
    return out


def relay_table(a, rows):
    head = (f"{'relay a -> nats-server -> b (no floor)':<40}  {'items/s':>8}  {'p50 ms':>7}  {'p99 ms':>7}  "
            f"{'max ms':>7}  {'cpu us/item':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.get("phase") == "rstrace":
            continue
        what = {"rburst": f"burst of {r.get('n')}", "rrate": f"{r.get('n')} at {a.relay_rate:g}/s",
                "lburst": f"local burst of {r.get('n')} on b",
                "a2aburst": f"{r.get('n')} to the SDK's A2A server"}.get(r.get("phase"), r.get("phase"))
        what += f", fsync {r.get('fsync')}" + (", receipts" if r.get("receipts") else "")
        cpu = r.get("cpu_ms_per_1000")
        lines.append(f"{what:<40}  {fmt(r.get('throughput')):>8}  "
                     f"{fmt(r.get('lat_p50_ms')):>7}  {fmt(r.get('lat_p99_ms')):>7}  {fmt(r.get('lat_max_ms')):>7}  "
                     f"{fmt(None if cpu is None else cpu):>11}{'' if r.get('ok') else '  FAIL'}")
    for r in rows:
        if r.get("phase") != "rstrace":
            continue
        lines += ["", f"system calls per relayed item, a burst of {r.get('n')} under strace -f -c, "
                  f"fsync {r.get('fsync')}, receipts (counts: within about 10% between runs)"]
        for h in ("a", "b"):
            by = r.get(f"fs_by_call_{h}") or {}
            lines.append(f"  host {h}: {fmt2(r.get(f'calls_{h}'))} in all, {fmt2(r.get(f'fs_calls_{h}'))} "
                         f"without waits and wake-ups: "
                         + ", ".join(f"{k} {v:g}" for k, v in list(by.items())[:10])
                         + ("" if r.get("ok") else "  FAIL"))
    rat = relay_ratios(rows)
    if any(v is not None for _, v, _ in rat):
        lines += ["", f"{'relay ratios, same run':<52}  {'ratio':>6}  target", "-" * 70]
        lines += [f"{w:<52}  {fmt2(v):>6}  {t}" for w, v, t in rat]
    return "\n".join(lines)


def hub_table(a, rows):
    head = (f"{'hub against the file drop (same run)':<40}  {'items/s':>8}  {'p50 ms':>7}  {'p99 ms':>7}  "
            f"{'max ms':>7}  {'cpu us/item':>11}  {'in p50/p99':>11}  {'hd p50/p99':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        what = {"burst": f"burst of {r.get('n')}", "rate": f"{r.get('n')} at {a.rate:g}/s"}.get(
            r.get("phase"), r.get("phase"))
        what = f"{r.get('how')}: {what}, fsync {r.get('fsync')}"
        lines.append(f"{what:<40}  {fmt(r.get('throughput')):>8}  {fmt(r.get('lat_p50_ms')):>7}  "
                     f"{fmt(r.get('lat_p99_ms')):>7}  {fmt(r.get('lat_max_ms')):>7}  "
                     f"{fmt(r.get('cpu_ms_per_1000')):>11}  "
                     f"{fmt(r.get('lat_in_p50_ms')) + '/' + fmt(r.get('lat_in_p99_ms')):>11}  "
                     f"{fmt(r.get('lat_daemon_p50_ms')) + '/' + fmt(r.get('lat_daemon_p99_ms')):>11}"
                     f"{hub_mcp_note(r)}{'' if r.get('ok') else '  FAIL'}")
    rat = hub_ratios(rows)
    if any(v is not None for _, v, _ in rat):
        lines += ["", f"{'hub ratios, same run':<52}  {'ratio':>6}  target", "-" * 70]
        lines += [f"{w:<52}  {fmt2(v):>6}  {t}" for w, v, t in rat]
    return "\n".join(lines)


def hub_ratios(rows):
    """(figure, ratio, target) of the hub's targets, per fsync mode."""
    def ratio(x, y):
        return x / y if x and y else None

    def get(fsync, phase, how, key):
        for r in rows:
            if r.get("fsync") == fsync and r.get("phase") == phase and r.get("how") == how and r.get("ok"):
                return r.get(key)
        return None

    # (what, phase, the way in, against, key, target); hubfloor/file is
    # the floor's own distance from the file drop: what no HTTPS way in
    # closes (TLS, HTTP, a client thread)
    table = (
        ("hub/hubfloor burst items/s", "burst", "hub", "hubfloor", "throughput", ">= 0.8"),
        ("hub/file CPU per item, burst", "burst", "hub", "file", "cpu_ms_per_1000", "<= 2.0"),
        ("hub/file p99 at the fixed rate", "rate", "hub", "file", "lat_p99_ms", "<= 2.0"),
        ("hubfloor/file burst items/s", "burst", "hubfloor", "file", "throughput", ""),
        ("hubfloor/file p99 at the fixed rate", "rate", "hubfloor", "file", "lat_p99_ms", ""),
        ("hub/hubfloor p99 at the fixed rate", "rate", "hub", "hubfloor", "lat_p99_ms", ""),
        # the floor's CPU per item beside the file drop's: above 2, the
        # hub/file CPU target is one the floor itself does not reach
        ("hubfloor/file CPU per item, burst", "burst", "hubfloor", "file", "cpu_ms_per_1000", ""),
        ("hub/hubfloor CPU per item, burst", "burst", "hub", "hubfloor", "cpu_ms_per_1000", ""),
    )
    out = []
    for fsync in ("off", "on"):
        for what, phase, how, base, key, target in table:
            out.append((f"{what}, fsync {fsync}",
                        ratio(get(fsync, phase, how, key), get(fsync, phase, base, key)), target))
    return out


def hub_mcp_note(r):
    """/mcp's handoff_send against the hub's POST, p99 at the rate."""
    if "p99_vs_hub" not in r:
        return ""
    v, t = r["p99_vs_hub"], r["p99_target"]
    return f"  p99 {v:.2f}x POST (target <= {t:g}x{'' if v <= t else ': OVER'})"
