"""A2A outward, remotes in parallel (issue 46): one slow or silent remote
never delays another, and one slow answer does not hold the calls of its
own remote behind it.  Five SDK servers (tests/a2a/server.mjs), four fast
and one that holds every answer while a file exists:

- a run without the slow remote: 400 handoffs, 100 to each fast remote,
  every one completed; the p99 of drop to archive is measured;
- the same with the slow remote holding its answers: 500 handoffs, 100
  to each of the five.  The slow server is sent 8 SendMessage calls at
  once (handoff-a2a's calls per remote) and answers none, and while it
  still holds them all 400 handoffs to the fast remotes complete.  The
  condition is the order of events, not a time: nothing of the slow
  remote was answered when the last fast item reached archive/.  Before
  the change the slow server got one call at a time, the helper blocked
  on it;
- the hold released, the slow remote's 100 complete, each messageId run
  once.

The two p99 figures and their ratio are printed, not checked: the
condition above is what cannot depend on the machine's load.  Needs
node and tests/a2a's packages (make a2a-deps)."""

import json
import os
import sys
import time
from datetime import datetime

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

FAST = ["fast0", "fast1", "fast2", "fast3"]
PER_REMOTE = 100
CALLS = 8       # handoff-a2a's calls at once, per remote (src/a2a/main.c)


class Archive:
    """archive/'s outcomes by handoff_id, read once each (an archived
    item's name is not its id alone)."""

    def __init__(self, env):
        self.dir = env.path("archive")
        self.seen = {}

    def get(self, hid):
        if hid not in self.seen:
            for n in os.listdir(self.dir):
                if n.endswith(".outcome") and n not in self.seen:
                    with open(os.path.join(self.dir, n)) as f:
                        o = json.load(f)
                    self.seen[o["handoff_id"]] = o
                    self.seen[n] = o
        return self.seen.get(hid)

    def at(self, hid):
        at = self.get(hid)["archived_at"]
        return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def drop_all(env, remotes, tag):
    """PER_REMOTE handoffs to each remote, one remote after the other in
    turn: {hid: (remote, drop time)}."""
    out = {}
    for i in range(PER_REMOTE):
        for r in remotes:
            doc = hdproto.build("bob", r, env.key, ttl=900, reason=f"{tag} {i} complete")
            out[doc["handoff_id"]] = (r, time.time())
            hdproto.drop(env.spool, doc)
    return out


def latencies(arch, items, remotes):
    return [arch.at(h) - t for h, (r, t) in items.items() if r in remotes]


def main():
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)
        hold = os.path.join(env.dir, "slow.hold")
        servers, extra = {}, ""
        for name in FAST + ["slow"]:
            port = natsrv.free_port()
            knobs = {"hold_file": hold, "calls": os.path.join(env.dir, f"{name}.calls")} \
                if name == "slow" else {}
            srv = a2akit.Server(env, port, token, os.path.join(env.dir, f"{name}.log"), **knobs)
            srv.start()
            servers[name] = srv
            extra += f"[remote {name}]\na2a = http://127.0.0.1:{port}/a2a\ntoken_file = {tf}\n"
        conf = env.write_config("d0", extra=extra)
        d = env.start("d0", conf=conf)
        arch = Archive(env)

        # the run without the slow remote
        base = drop_all(env, FAST, "alone")
        hdtest.wait_for(lambda: all(arch.get(h) for h in base), 180, "the 400 archived")
        bad = [h for h in base if arch.get(h).get("remote_outcome") != "completed"]
        check(not bad, f"not completed: {[arch.get(h) for h in bad[:3]]}")
        p_alone = p99(latencies(arch, base, FAST))

        # the same beside a remote that answers nothing while `hold` exists
        open(hold, "w").close()
        items = drop_all(env, FAST + ["slow"], "beside")
        slow = servers["slow"]
        sends = lambda: [c for c in slow.calls() if c["method"] == "SendMessage"]  # noqa: E731
        # A2A 1.0 section 3.1.1 SendMessage: each call its own HTTP request
        hdtest.wait_for(lambda: len(sends()) >= CALLS, 60,
                        f"{CALLS} SendMessage calls at the slow remote at once")
        fast = [h for h, (r, t) in items.items() if r != "slow"]
        hdtest.wait_for(lambda: all(arch.get(h) for h in fast), 180,
                        "the 400 of the fast remotes archived")
        # nothing of the slow remote answered: its answers are all held
        slow_done = [h for h, (r, t) in items.items() if r == "slow" and arch.get(h)]
        check(not slow_done, f"a slow item ended while its server held every answer: {slow_done}")
        bad = [h for h in fast if arch.get(h).get("remote_outcome") != "completed"]
        check(not bad, f"not completed: {[arch.get(h) for h in bad[:3]]}")
        held = len(sends())
        p_beside = p99(latencies(arch, items, FAST))
        print(f"while the slow remote held {held} SendMessage calls unanswered (none ended), "
              f"all {len(fast)} handoffs to the 4 fast remotes completed")
        print(f"fast remotes' p99, drop to archive: alone {p_alone * 1000:.0f} ms, beside the "
              f"slow one {p_beside * 1000:.0f} ms (ratio {p_beside / p_alone:.2f})")

        os.unlink(hold)
        mine = [h for h, (r, t) in items.items() if r == "slow"]
        hdtest.wait_for(lambda: all(arch.get(h) for h in mine), 240,
                        "the slow remote's 100 archived once released")
        bad = [h for h in mine if arch.get(h).get("remote_outcome") != "completed"]
        check(not bad, f"slow, not completed: {[arch.get(h) for h in bad[:3]]}")
        ran = slow.ids()
        twice = sorted({i for i in ran if ran.count(i) > 1})
        check(set(ran) == set(mine) and not twice, f"the slow server ran {len(ran)}: twice {twice}")
        print(f"released: the slow remote's {len(mine)} completed, each run once")
        check(d.stop() == 0, "exit 0")
    hdtest.finish("a slow A2A remote delays no other remote, nor the calls behind its own")


if __name__ == "__main__":
    a2akit.run(main)
