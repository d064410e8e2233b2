"""Attack: an agent floods its handoffs/ with results, each signed with the
key it holds, for ids it never consumed.  Finding a result's item is a
listing of archive/ unless the item is claimed or was archived lately
(17 ms at 10,000 items here): one listing per result let an agent buy
seconds of the daemon's time with a rename each.  Now archive/ is listed
at most once a second for all the results that wait, and a scan looks at
a bounded number of them.

Figures: the results written, the daemon's CPU time (utime + stime of
/proc/PID/stat) from the first to the last refusal, and the slowest
delivery of the handoffs sent one after another while they are taken.  Every bogus result is refused
(not_consumed), a legitimate one written in the middle is recorded, and
the daemon's CPU stays under a bound a listing per result cannot meet
(N x the listing's cost)."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

ARCHIVED = int(os.environ.get("HD_ATTACK_RESULT_ARCHIVED", "10000"))
RESULTS = int(os.environ.get("HD_ATTACK_RESULT_N", "1000"))


cpu_s = hdtest.cpu_s


def result(hid, key, text):
    doc = {"type": "handoff-result", "protocol_version": 1, "handoff_id": hid,
           "from_agent": "alice", "status": "completed",
           "completed_at": hdproto.iso(hdproto.now()), "text": text}
    return hdproto.dumps(hdproto.sign(doc, key))


def main():
    with hdtest.Env(agents=["alice", "bob"]) as env:
        conf = env.write_config("d0")
        # archive/ as a busy host has it: items and their outcomes
        os.makedirs(env.path("archive"), exist_ok=True)
        for i in range(ARCHIVED):
            name = f"1700000000-bob-alice-old{i:08d}.json"
            with open(env.path("archive", name), "w") as f:
                f.write("{}")
            with open(env.path("archive", name + ".outcome"), "w") as f:
                json.dump({"handoff_id": f"1700000000-bob-alice-old{i:08d}", "outcome": "consumed",
                           "to_agent": "alice", "archived_at": "2023-11-14T22:13:20Z"}, f)
        d = env.start(conf=conf)
        pid = d.proc.pid
        hd = os.path.join(env.state["alice"], "handoffs")

        # a legitimate one, consumed, its result written among the flood
        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = doc["handoff_id"]
        hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: f"{hid}.json" in env.bootstraps("alice"), what="delivered")
        check(hdtest.real_consumer(env.state["alice"], hid), "consumed")
        hdtest.wait_for(lambda: any(n.endswith(hid + ".json") for n in env.items("archive")),
                        what="archived")

        cpu0 = cpu_s(pid)
        t0 = time.monotonic()
        for i in range(RESULTS):
            tmp = os.path.join(hd, f".w{i}")
            with open(tmp, "wb") as f:
                f.write(result(f"bogus-{i:06d}", env.key, "nothing"))
            os.rename(tmp, os.path.join(hd, f".result.bogus-{i:06d}"))
            if i == RESULTS // 2:
                tmp = os.path.join(hd, ".w-real")
                with open(tmp, "wb") as f:
                    f.write(result(hid, env.key, "the real one"))
                os.rename(tmp, os.path.join(hd, f".result.{hid}"))
        written = time.monotonic() - t0

        def left():
            return [n for n in os.listdir(hd) if n.startswith(".result.")]
        # handoffs sent while the results are taken, each taken by alice
        # again (a pile of claimed items would cost the sweep, not this):
        # the slowest delivery, in seconds of the daemon's CPU (its work
        # before it delivers, which a loaded machine does not stretch)
        latency = 0.0
        deadline = time.monotonic() + 60 * hdtest.SLOW
        while left() and time.monotonic() < deadline:
            doc = hdproto.build("bob", "alice", env.key, ttl=600)
            c1 = cpu_s(d.proc.pid)
            hdproto.drop(env.spool, doc)
            hdtest.wait_for(lambda: f"{doc['handoff_id']}.json" in env.bootstraps("alice"),
                            what="a handoff delivered during the flood")
            latency = max(latency, cpu_s(d.proc.pid) - c1)
            check(hdtest.real_consumer(env.state["alice"], doc["handoff_id"]), "probe consumed")
            time.sleep(0.2)
        check(not left(), f"every result taken: {len(left())} left")
        took = time.monotonic() - t0
        cpu = cpu_s(pid) - cpu0
        refused = [n for n in os.listdir(hd) if n.startswith(".refused.bogus-")]
        check(len(refused) == RESULTS, f"{len(refused)} of {RESULTS} bogus results refused")
        with open(os.path.join(hd, refused[0])) as f:
            why = json.load(f)
        check(why["reason"] == "not_consumed", f"refused as {why}")
        shown = json.loads(env.ctl("show", "-c", conf, hid, "--json", check_rc=0).stdout)
        check(shown.get("result", {}).get("text") == "the real one", f"the real one recorded: {shown}")
        # One listing of 10,000 names with their checks costs about 17 ms
        # of the daemon's time here: a listing per result would be
        # RESULTS x that; the bound leaves room for a slow machine.
        bound = 0.003 * RESULTS * hdtest.SLOW + 1.0
        print(f"{RESULTS} signed results for ids never consumed ({ARCHIVED} archived items): "
              f"written in {written:.1f} s, all taken in {took:.1f} s, daemon CPU {cpu:.2f} s "
              f"(bound {bound:.1f} s); handoffs sent meanwhile delivered within {latency * 1000:.0f} ms of its CPU")
        check(cpu < bound, f"daemon CPU {cpu:.2f} s for {RESULTS} results, bound {bound:.1f} s")
        check(latency < 2.0 * hdtest.SLOW,
              f"delivery during the flood took {latency:.2f} s of the daemon's CPU")
        check(d.stop() == 0, "stop")
    hdtest.finish("test_attack_result_flood")


if __name__ == "__main__":
    hdtest.run(main)
