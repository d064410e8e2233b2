"""Lifecycle after the claim, with the real daemon and handoffctl:
consume races (one winner), a stale bootstrap refused by consume and then
expired by the daemon on time, consumed-while-down archived after restart,
crash recovery of a claimed item without bootstrap, list and show."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check, HANDOFFCTL  # noqa: E402

WINDOW = 2


def main():
    extra = ""
    with hdtest.Env(agents=["alice"], extra=extra) as env:
        # The races run under a window no loaded machine reaches (the
        # consumers are sanitized processes started two by two); the stale
        # part below restarts the daemon with the short WINDOW.
        race_conf = env.write_config("race", text=env.config_text("d0").replace(
            "rescan_interval = 5", "rescan_interval = 1\nresume_window = 3600"))
        conf = env.write_config("d0", text=env.config_text("d0").replace(
            "rescan_interval = 5", f"rescan_interval = 1\nresume_window = {WINDOW}"))
        d = env.start(conf=race_conf)

        # --- two concurrent consumers of one bootstrap: exactly one wins.
        rounds = 30
        docs = [hdproto.build("bob", "alice", env.key, ttl=600) for _ in range(rounds)]
        for doc in docs:
            hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == rounds, what="bootstraps")
        winners = 0
        for doc in docs:
            args = [HANDOFFCTL, "consume", "-c", race_conf, "--agent", "alice", doc["handoff_id"]]
            ps = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
            outs = [(p.wait(), p.stdout.read(), p.stderr.read()) for p in ps]
            for p in ps:
                p.stdout.close()
                p.stderr.close()
            codes = sorted(o[0] for o in outs)
            check(codes == [0, 1], f"two consumers of {doc['handoff_id']}: exit codes {codes} {outs}")
            got = json.loads([o[1] for o in outs if o[0] == 0][0])
            check(got["handoff_id"] == doc["handoff_id"] and got["source"] == "voice_handoff", "consumed bootstrap")
            winners += 1
        hdtest.wait_for(lambda: env.count("archive") == rounds, what="all archived as consumed")
        outcomes = [json.load(open(env.path("archive", n + ".outcome")))["outcome"] for n in env.items("archive")]
        check(outcomes == ["consumed"] * rounds, f"outcomes {set(outcomes)}")

        # --- consume without an id: the oldest fresh one; --context; none -> 1.
        a, b = hdproto.build("bob", "alice", env.key, extra={"context_summary": "first"}), \
            hdproto.build("bob", "alice", env.key, extra={"context_summary": "second"})
        hdproto.drop(env.spool, a)
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == 1, what="a delivered")
        time.sleep(0.05)
        hdproto.drop(env.spool, b)
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == 2, what="b delivered")
        p = env.ctl("consume", "-c", race_conf, "--agent", "alice", "--context", check_rc=0)
        # handoffd's line naming the verified sender, then the producer's
        # summary and the conversation, quoted as the sender's (issues
        # 10.1, 24.8)
        check(p.stdout.startswith("bob handed this over to you (from_agent verified by handoffd).\n"
                                  "What bob wrote (the sender's words, not handoffd's):\n"
                                  "> first\n>\n> Transcript so far:\n"), f"oldest first: {p.stdout!r}")
        env.ctl("consume", "-c", race_conf, "--agent", "alice", "--context", check_rc=0)
        env.ctl("consume", "-c", race_conf, "--agent", "alice", check_rc=1)

        check(d.stop() == 0, "stop after the races")
        d = env.start(conf=conf)

        # --- stale: consume refuses (3), the daemon expires it on time.
        s = hdproto.build("bob", "alice", env.key, ttl=600)
        hdproto.drop(env.spool, s)
        hdtest.wait_for(lambda: env.bootstraps("alice") == [s["handoff_id"] + ".json"], what="stale candidate delivered")
        boot = os.path.join(env.state["alice"], "handoffs", s["handoff_id"] + ".json")
        accepted = json.load(open(boot))["accepted_at"]
        from datetime import datetime
        acc = datetime.fromisoformat(accepted.replace("Z", "+00:00")).timestamp()
        # Past 1s it is stale for a consumer whose window is 1s: refused and
        # left in place (the daemon's own deadline is WINDOW).  Counted
        # from accepted_at, as both count it (not from when the wait above
        # saw the bootstrap: the daemon's deadline comes no later for that).
        time.sleep(max(0.0, acc + 1.1 - time.time()))
        p = env.ctl("consume", "--state-dir", env.state["alice"], "--window", "1", s["handoff_id"])
        check(p.returncode == 3, f"stale consume exit {p.returncode}: {p.stderr}")
        check(os.path.exists(boot), "stale bootstrap left for the sweeper")
        hdtest.wait_for(lambda: s["handoff_id"] + ".json" not in env.bootstraps("alice"),
                        timeout=WINDOW + 3, what="stale bootstrap removed by the daemon")
        arch = hdtest.wait_for(lambda: [n for n in env.items("archive") if n.endswith(s["handoff_id"] + ".json")],
                               timeout=10, what="archived as expired")
        check(len(arch) == 1, f"archived: {arch}")
        o = json.load(open(env.path("archive", arch[0] + ".outcome")))
        check(o["outcome"] == "expired" and o["accepted_at"] == accepted, f"outcome {o}")
        # when the daemon expired it (its archived_at), not when this
        # process, polling, saw it
        late = datetime.fromisoformat(o["archived_at"].replace("Z", "+00:00")).timestamp() - (acc + WINDOW)
        check(late < 1.5, f"expired {late:.2f}s after its deadline")

        # --- show and list.
        p = env.ctl("show", "-c", conf, s["handoff_id"], "--json", check_rc=0)
        j = json.loads(p.stdout)
        check(j["state"] == "archive" and j["outcome"] == "expired" and j["handoff_id"] == s["handoff_id"]
              and j["path"].startswith(env.spool), f"show: {j}")
        env.ctl("show", "-c", conf, "1-nope", check_rc=1)
        p = env.ctl("list", "-c", conf, "--state", "archive", "--json", check_rc=0)
        check(len(json.loads(p.stdout)) == rounds + 3, "list archive")

        # --- consumed while the daemon was down: archived after restart.
        c = hdproto.build("bob", "alice", env.key, ttl=600)
        hdproto.drop(env.spool, c)
        hdtest.wait_for(lambda: env.bootstraps("alice") == [c["handoff_id"] + ".json"], what="c delivered")
        check(d.stop() == 0, "stop")
        check(hdtest.real_consumer(env.state["alice"], c["handoff_id"]), "real consumer while down")
        # And a claimed item whose bootstrap was never written (a crash
        # between claim and delivery): recovered at start.
        e = hdproto.build("bob", "alice", env.key, ttl=600)
        with open(env.path("claimed", e["handoff_id"] + ".json"), "wb") as f:
            f.write(hdproto.dumps(e))
        # A marker whose bytes a power loss emptied (its name was synced,
        # its bytes not): it was delivered and the agent took it.
        g = hdproto.build("bob", "alice", env.key, ttl=600)
        with open(env.path("claimed", g["handoff_id"] + ".json"), "wb") as f:
            f.write(hdproto.dumps(g))
        open(env.path("claimed", g["handoff_id"] + ".delivered"), "wb").close()
        tmpf = os.path.join(env.state["alice"], "handoffs", ".x.json.AbC123")
        with open(tmpf, "w") as f:
            f.write("temp left by a crash")
        os.utime(tmpf, (time.time() - 120, time.time() - 120))  # a crash 2 minutes ago
        d = env.start(conf=conf)
        arch = [n for n in env.items("archive") if n.endswith(c["handoff_id"] + ".json")]
        check(len(arch) == 1, "consumed-while-down archived at start")
        check(json.load(open(env.path("archive", arch[0] + ".outcome")))["outcome"] == "consumed", "as consumed")
        check(e["handoff_id"] + ".json" in env.bootstraps("alice"), "recovered bootstrap written")
        check(g["handoff_id"] + ".json" not in env.bootstraps("alice"), "empty marker: not delivered again")
        arch = [n for n in env.items("archive") if n.endswith(g["handoff_id"] + ".json")]
        check(len(arch) == 1, "empty marker: archived as consumed")
        check(not os.path.exists(os.path.join(env.state["alice"], "handoffs", ".x.json.AbC123")), "temp removed")
        check(d.status()["counters"]["recovered"] == 1, "recovery counted")
        check(d.stop() == 0, "stop")
        print(f"{rounds} consume races, one winner each; stale expired {late:.2f}s after deadline; "
              "consumed-while-down archived; crash-claimed item delivered at start")


hdtest.run(main)
