"""Attack (issue 24.4): status parses every spool file.  A producer leaves
300 signed handoffs of 1 MiB of floats for an agent nobody serves:
`handoffctl status` took 6.4 s, `show ID` 4.5 s, `wait ID --timeout 0`
4.7 s, `list` 7.7 s, as each parsed every file.

Now status takes its counts from names and stat and the per-agent figures
from the daemon; show and wait open only the files of that id; list reads
at most a bounded size of each file and says how many it did not read.
Each answers with at most 1 s of CPU, its own and the daemon's (x4
sanitized), and still right: the counts, the pending agent, the show of a
claimed id and of the pending id under a name that is not its own.  CPU
time, not wall time, is bounded: a loaded machine does not change the
work done (the wall times are printed beside)."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_ATTACK_N", "300"))
LIMIT_S = 1.0 * hdtest.SLOW


WALL = {}


def main():
    # Just under 1 MiB of floats per file (the default read limit).
    with hdtest.Env(agents=["alice"], extra="") as env:
        text = env.config_text("d0").replace("[spool]\n", "[spool]\nmax_file_size = 2097152\n", 1)
        conf = env.write_config("d0", text=text)
        d = env.start(conf=conf)
        floats = [i * 1.000001 for i in range(64000)]
        last = None
        for i in range(N):
            doc = hdproto.build("bob", "zed", b"z" * 32, ttl=3600, extra={"floats": floats})
            last = hdproto.drop(env.spool, doc, name=f"feed-{i}.json")
        size = os.path.getsize(env.path("handoff", last))
        hdtest.wait_for(lambda: d.logs().count("Left ") >= N, timeout=120 * hdtest.SLOW,
                        what=f"{N} handoffs left for zed")
        # one claimed handoff to alice, and the id of one of zed's
        mine = hdproto.build("bob", "alice", env.key, ttl=600)
        mine_name = hdproto.drop(env.spool, mine)
        # With fsync on its producer's name leaves handoff/ after the
        # batch's sync, a moment after its record shows in claimed/: the
        # counts below are of a spool at rest.
        hdtest.wait_for(lambda: env.count("claimed") == 1 and mine_name not in env.names("handoff"),
                        what="the handoff to alice claimed, its file gone from handoff/")
        with open(env.path("handoff", last)) as f:
            zed_id = json.load(f)["handoff_id"]
        print(f"- {N} files of {size} bytes left for zed")

        wrong = []

        def soft(cond, msg):
            if not cond:
                wrong.append(msg)

        figures = {}

        def timed(what, *args):
            figures[what], WALL[what], p = hdtest.timed_ctl(env, *args, daemon=d)
            return p

        p = timed("status", "status", "-c", conf, "--json")
        st = json.loads(p.stdout) if p.stdout.startswith("{") else {}
        soft(st.get("counts", {}).get("handoff") == N and st["counts"].get("claimed") == 1,
              f"counts {st.get('counts')}")
        soft(st.get("pending_by_agent") == {"zed": N}, f"pending {st.get('pending_by_agent')}")
        soft(st.get("bytes", {}).get("handoff", 0) >= N * size, f"bytes {st.get('bytes')}")
        p = timed("status (text)", "status", "-c", conf)
        soft(f"pending for zed: {N}" in p.stdout, f"text status:\n{p.stdout}")

        p = timed("show (claimed)", "show", "-c", conf, mine["handoff_id"])
        soft(p.returncode == 0 and "claimed" in p.stdout, f"show: {p.returncode}\n{p.stdout}{p.stderr}")
        p = timed("show (pending, another name)", "show", "-c", conf, zed_id)
        soft(p.returncode == 0 and "pending" in p.stdout, f"show pending: {p.returncode}\n{p.stdout}{p.stderr}")

        p = timed("wait --timeout 0", "wait", "-c", conf, mine["handoff_id"], "--timeout", "0")
        soft("claimed" in p.stdout, f"wait: {p.returncode}\n{p.stdout}{p.stderr}")

        p = timed("list", "list", "-c", conf)
        lines = p.stdout.splitlines()
        soft(p.returncode == 0 and any(mine["handoff_id"] in ln for ln in lines),
              f"list: {p.returncode}\n{p.stdout[-2000:]}{p.stderr}")
        soft(any(f"{N + 1} items" in ln for ln in lines[-2:]), f"list count: {lines[-2:]}")
        print("- CPU: " + ", ".join(f"{k} {v:.2f}s" for k, v in figures.items()))
        print("- wall: " + ", ".join(f"{k} {v:.2f}s" for k, v in WALL.items()))
        slow = {k: v for k, v in figures.items() if v > LIMIT_S}
        check(not slow, f"CPU over {LIMIT_S:.1f}s: {slow}")
        check(not wrong, "wrong answers:\n  " + "\n  ".join(wrong))
        check(d.stop() == 0, "exit 0")


if __name__ == "__main__":
    hdtest.run(main)
