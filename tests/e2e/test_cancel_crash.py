"""A cancel (handoffd(8) "CANCELING") killed with SIGKILL at each of its
steps ends in one outcome: strace --inject=SYSCALL:signal=SIGKILL, limited
with -P to one directory, kills the daemon exactly there, then it is
started again.  The request is handoffctl cancel's (--timeout 0: dropped,
not waited for), read again at the restart.

Windows, in the order the cancel goes:
- the request read, killed at taking the bootstrap (the rename to
  .cancel.): canceled after the restart; and the same with a consumer that
  takes the bootstrap while the daemon is down: consumed, the request
  answered not_cancelable;
- the bootstrap taken, killed at answering the request: canceled after the
  restart, the request answered canceled then;
- answered, killed at writing the archive's .outcome: canceled;
- archived, killed at removing its .cancel. name: canceled, no name left;
- asked for before the claim, killed at taking the hidden bootstrap: the
  agent never saw it, canceled.

Each: the invariant holds (tests/py/invariant.py, settled), exactly one
outcome, the bootstrap never taken twice, the request answered once."""

import collections
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import harness  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402


def answers(env):
    return sorted(n for n in os.listdir(env.path("cancel")))


def cancel(env, hid):
    p = env.ctl("cancel", "-c", env.conf, "--from", "bob", hid, "--timeout", "0")
    check(p.returncode == 3, f"cancel --timeout 0: {p.returncode} {p.stdout} {p.stderr}")


def window(label, syscall, path_of, *, consume_while_down=False, before_claim=False,
           want="canceled"):
    with hdtest.Env(agents=["alice"]) as env:
        env.conf = env.write_config("w0")
        d = env.start(name="w0", conf=env.conf)
        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = doc["handoff_id"]
        boot = os.path.join(env.state["alice"], "handoffs", hid + ".json")
        got = collections.Counter()
        if not before_claim:
            hdproto.drop(env.spool, doc)
            hdtest.wait_for(lambda: os.path.exists(boot), what="delivered")
        s = harness.Strace(d.proc.pid, syscall, "signal=SIGKILL", [path_of(env)])
        s.__enter__()
        cancel(env, hid)
        if before_claim:
            hdtest.wait_for(lambda: "Cancel request for" in d.logs(), what="request read")
            hdproto.drop(env.spool, doc)
        try:
            d.proc.wait(10 * hdtest.SLOW)
        except Exception:  # noqa: BLE001
            s.detach()
            d.stop()
            return label, "the armed syscall never came", [f"{label}: not reached"]
        s.detach()
        d.stop()
        before = invariant.summary(env.spool, env.state)
        seen_before = os.path.exists(boot)
        if consume_while_down and invariant.real_consume(env.state["alice"], hid):
            got[hid] += 1
        d2 = env.start(name="w0", conf=env.conf)
        hdtest.wait_for(lambda: env.item(hid)["state"] == "archive", timeout=10,
                        what=f"{label}: archived")
        it = env.item(hid)
        hdtest.wait_for(lambda: [n for n in answers(env) if not n.startswith(".")] == [],
                        timeout=10, what=f"{label}: the request answered")
        ans = answers(env)
        c = d2.status()["counters"]
        v = invariant.check(env.spool, env.state, [hid], consumed=got, settled=True,
                            allow_states=("archive",))
        d2.stop()
        fig = (f"state at the kill {before}, outcome {it['outcome']}, answer "
               f"{[a.split('.')[1] for a in ans]}, consumer got it {got[hid]}x, "
               f"counters canceled {c['canceled']} delivered {c['delivered']}")
        fails = [f"{label}: {x}" for x in v]
        if it["outcome"] != want:
            fails.append(f"{label}: archived as {it['outcome']!r}, want {want!r}")
        word = "canceled" if want == "canceled" else "not_cancelable"
        if len(ans) != 1 or not ans[0].startswith(f".{word}.{hid}."):
            fails.append(f"{label}: answers {ans}, want one {word}")
        if it["bootstrap"] or it["hidden"]:
            fails.append(f"{label}: a name of the bootstrap left: {it}")
        if got[hid] > 1:
            fails.append(f"{label}: taken {got[hid]}x")
        if before_claim and (seen_before or c["delivered"] or d.logs().count("Published")):
            fails.append(f"{label}: published before its cancel")
        return label, fig, fails


def main():
    boots = lambda e: os.path.join(e.state["alice"], "handoffs")  # noqa: E731
    cancels = lambda e: e.path("cancel")  # noqa: E731
    archive = lambda e: e.path("archive")  # noqa: E731
    runs = [
        ("request read, killed at taking the bootstrap",
         dict(syscall="renameat", path_of=boots)),
        ("request read, killed at taking the bootstrap; a consumer takes it while down",
         dict(syscall="renameat", path_of=boots, consume_while_down=True, want="consumed")),
        ("bootstrap taken, killed at answering the request",
         dict(syscall="renameat", path_of=cancels)),
        ("answered, killed at writing the archive's .outcome",
         dict(syscall="openat", path_of=archive)),
        ("archived, killed at removing its .cancel. name",
         dict(syscall="unlinkat", path_of=boots)),
        ("asked for before the claim, killed at taking the hidden bootstrap",
         dict(syscall="renameat", path_of=boots, before_claim=True)),
    ]
    fails = []
    for label, kw in runs:
        try:
            label, fig, f = window(label, **kw)
        except harness.Strace.Unavailable as e:
            fails.append(f"{label}: strace unavailable ({e})")
            continue
        print(f"- {label}: {fig}")
        for x in f:
            print(f"    FAIL: {x}")
        fails += f
    check(not fails, f"{len(fails)} cancel crash window(s) failed:\n  " + "\n  ".join(fails))
    hdtest.finish(f"test_cancel_crash: {len(runs)} windows, one outcome each")


if __name__ == "__main__":
    hdtest.run(main)
