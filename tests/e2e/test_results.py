"""Results (issue 35): the agent that consumed a handoff reports what came of
it, against the real daemon, handoffctl and hub.

- text: `handoffctl complete --text` before the consume is refused
  (not_consumed); after it, recorded beside the archived item as
  archive/NAME.result; a `wait --until completed` started before returns 0
  then (not at the consume); `show` prints it, `show --json` has it; a
  second complete is refused (already_completed: the first stands);
- data: `complete --data FILE` (any JSON), read back whole by show and by
  the hub's GET /api/v1/handoffs/{id};
- failed: `complete --failed REASON --text`; `wait --until completed`
  exits 6 and prints the reason;
- input_required: `complete --input-required TEXT`; `wait --until
  completed` exits 7 (not 6: the agent asks, it did not fail) and prints
  the question;
- wait --until completed: 1 for a rejected handoff, 3 (timeout) for one
  consumed with no result yet;
- refused with a clear error, the agent told why (.refused.<id>) and
  nothing recorded: a result signed with a key that is not the agent's
  (unknown_key), an hmac from an agent that signs (signature_required), a
  forged file with a bad MAC (bad_mac), one for an item another agent
  consumed (not_consumed), one too large (too_large, refused by
  handoffctl before it writes, and by the daemon for a file written by
  hand);
- a result written in Python (the stdlib reference, hdproto) is taken:
  the format is the documented one, not the C library's alone;
- a result written while the daemon is down (--no-wait; with a timeout:
  exit 3) is recorded by the next start's scan; one left beside its record
  (a crash before the agent's file was removed) is taken as done;
- retention prunes an item's .result with it, and never counts it as an
  item;
- status counters: completed, failed, results_refused; the metrics
  textfile the same, and archive/'s item count without the .result files.
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check, HANDOFFCTL  # noqa: E402

WINDOW = 3


def submit(env, conf, frm="bob", to="alice", key=None):
    args = ["submit", "-c", conf, "--from", frm, "--to", to, "--reason", "results test",
            "--ttl", "600"]
    if key:
        args += ["--key", key]
    return env.ctl(*args, check_rc=0).stdout.strip()


def delivered_and_consumed(env, conf, hid, agent="alice"):
    hdtest.wait_for(lambda: hid + ".json" in env.bootstraps(agent), what=f"{hid} delivered")
    env.ctl("consume", "-c", conf, "--agent", agent, hid, check_rc=0)
    hdtest.wait_for(lambda: show(env, conf, hid).get("status") == "consumed", what=f"{hid} archived")


def show(env, conf, hid):
    p = env.ctl("show", "-c", conf, hid, "--json")
    return json.loads(p.stdout) if p.returncode == 0 else {}


def complete(env, conf, hid, *args, agent="alice", rc=None):
    p = env.ctl("complete", "-c", conf, "--agent", agent, hid, *args)
    if rc is not None:
        check(p.returncode == rc, f"complete {hid} {' '.join(args)}: exit {p.returncode}, "
                                  f"wanted {rc}:\n{p.stdout}{p.stderr}")
    return p


def start_wait(conf, hid, *args):
    return subprocess.Popen([HANDOFFCTL, "wait", "-c", conf, hid, "--until", "completed", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def handoffs(env, agent, name):
    return os.path.join(env.state[agent], "handoffs", name)


def result_doc(hid, agent, key, **extra):
    """A result as the documented format says, signed by the stdlib
    reference: an agent that does not link libhandoff writes this."""
    doc = {"type": "handoff-result", "protocol_version": 1, "handoff_id": hid,
           "from_agent": agent, "status": "completed",
           "completed_at": hdproto.iso(hdproto.now())}
    doc.update(extra)
    return hdproto.sign(doc, key)


def write_result(env, agent, hid, data):
    """As an agent writes it: a temp name, then the rename."""
    tmp = handoffs(env, agent, f".tmp-{hid}")
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, handoffs(env, agent, f".result.{hid}"))


def refused(env, agent, hid, reason):
    """The daemon took the hand-written result and said why."""
    ref = handoffs(env, agent, f".refused.{hid}")
    hdtest.wait_for(lambda: not os.path.exists(handoffs(env, agent, f".result.{hid}"))
                    and os.path.exists(ref), what=f"the result of {hid} refused")
    with open(ref) as f:
        why = json.load(f)
    check(why["reason"] == reason and why["handoff_id"] == hid, f"refusal of {hid}: {why}")
    os.unlink(ref)
    return why


def main():
    with hdtest.Env(agents=["alice", "bob", "dave"]) as env:
        dave_key = os.path.join(env.dir, "dave.key")
        env.ctl("keygen", "--ed25519", "-o", dave_key, check_rc=0)
        mallory_key = os.path.join(env.dir, "mallory.key")
        env.ctl("keygen", "--ed25519", "-o", mallory_key, check_rc=0)
        metrics = os.path.join(env.dir, "metrics.prom")
        env.extra = (f"[agent dave]\npubkeys = {env.dir}/dave.pub\nrequire = sig\n"
                     f"[metrics]\ntextfile = {metrics}\n")
        hub = hubkit.Hub(env, tokens={"bob": None})
        conf = hub.conf
        d = env.start(conf=conf)
        hub.start()

        # ---- text, and wait --until completed
        hid = submit(env, conf)
        hdtest.wait_for(lambda: hid + ".json" in env.bootstraps("alice"), what="delivered")
        p = complete(env, conf, hid, "--text", "too early", rc=1)
        check("refused by handoffd: not_consumed" in p.stderr and "consume it first" in p.stderr,
              f"before the consume: {p.stderr}")
        check(not os.path.exists(handoffs(env, "alice", f".refused.{hid}")),
              "handoffctl read the refusal and removed it")
        print(f"ok: complete before the consume: refused ({p.stderr.strip()})")
        w = start_wait(conf, hid, "--json")
        env.ctl("consume", "-c", conf, "--agent", "alice", hid, check_rc=0)
        hdtest.wait_for(lambda: show(env, conf, hid).get("status") == "consumed", what="archived")
        hdtest.wait_watching(w, what="handoffctl wait")
        check(w.poll() is None, "wait --until completed returned at the consume")
        p = complete(env, conf, hid, "--text", "summary: all green\nsecond line", rc=0)
        check("completed: handoffd recorded the result" in p.stdout, f"complete says: {p.stdout}")
        out, err = w.communicate(timeout=20 * hdtest.SLOW)
        check(w.returncode == 0, f"wait --until completed: exit {w.returncode}: {out}{err}")
        got = json.loads(out)
        check(got["status"] == "completed" and got["result"]["text"] == "summary: all green\nsecond line"
              and got["result"]["agent"] == "alice", f"wait --json: {got}")
        print("ok: complete --text; wait --until completed (started before) exits 0 with the result")
        names = env.names("archive")
        item = [n for n in names if n.endswith(hid + ".json")]
        check(len(item) == 1 and item[0] + ".result" in names and env.count("archive") == 1,
              f"archive/NAME.result beside the item, not an item: {names}")
        with open(env.path("archive", item[0] + ".result")) as f:
            env_doc = json.load(f)
        check(env_doc["result"]["from_agent"] == "alice" and "hmac" in env_doc["result"]
              and env_doc["result"]["hmac"] == hdproto.compute_hmac(env_doc["result"], env.key),
              f"the agent's signed document kept as it signed it: {env_doc}")
        txt = env.ctl("show", "-c", conf, hid, check_rc=0).stdout
        check("result       completed by alice" in txt and "text         summary: all green" in txt
              and "text         second line" in txt, f"show:\n{txt}")
        print("ok: show prints the result; archive/NAME.result holds the agent's signed words")
        p = complete(env, conf, hid, "--text", "again", rc=1)
        check("already_completed" in p.stderr, f"second complete: {p.stderr}")
        check(show(env, conf, hid)["result"]["text"].startswith("summary"), "the first stands")
        check(env.ctl("wait", "-c", conf, hid).returncode == 0, "plain wait: consumed, 0")
        print(f"ok: a second result is refused ({p.stderr.strip()})")

        # ---- data, read back by show and by the hub
        data = {"tests": {"passed": 41, "failed": 0}, "files": ["a.c", "b.c"], "ratio": 0.5,
                "note": "\u00fcn\u00efcode \U0001f600", "none": None}
        path = os.path.join(env.dir, "data.json")
        with open(path, "w") as f:
            json.dump(data, f)
        hid2 = submit(env, conf)
        delivered_and_consumed(env, conf, hid2)
        complete(env, conf, hid2, "--data", path, rc=0)
        check(show(env, conf, hid2)["result"]["data"] == data, f"show --json data: {show(env, conf, hid2)}")
        st, ans = hub.get(f"/api/v1/handoffs/{hid2}", "bob")
        check(st == 200 and ans["status"] == "consumed" and ans["result"]["data"] == data
              and ans["result"]["status"] == "completed" and "path" not in ans,
              f"hub GET: {st} {ans}")
        print("ok: complete --data: show --json and the hub's GET give the data back whole")

        # ---- failed
        hid3 = submit(env, conf)
        delivered_and_consumed(env, conf, hid3)
        w = start_wait(conf, hid3)
        hdtest.wait_watching(w, what="handoffctl wait")
        complete(env, conf, hid3, "--failed", "the staging database is down", "--text",
                 "ran 3 of 5 steps", rc=0)
        out, err = w.communicate(timeout=20 * hdtest.SLOW)
        check(w.returncode == 6 and out.strip() == f"{hid3} failed: the staging database is down",
              f"wait --until completed of a failure: exit {w.returncode}: {out}{err}")
        txt = env.ctl("show", "-c", conf, hid3, check_rc=0).stdout
        check("result       failed by alice" in txt and "why          the staging database is down" in txt,
              f"show of a failure:\n{txt}")
        st, ans = hub.get(f"/api/v1/handoffs/{hid3}", "bob")
        check(ans["result"]["status"] == "failed" and ans["result"]["reason"] == "the staging database is down",
              f"hub GET of a failure: {ans}")
        print("ok: complete --failed: wait --until completed exits 6 with the reason; show, hub GET")

        # ---- input_required: neither completed nor failed; its own exit (7, as an
        # A2A remote's question), the question printed (handoffctl(1) EXIT STATUS)
        hid6 = submit(env, conf)
        delivered_and_consumed(env, conf, hid6)
        w = start_wait(conf, hid6)
        wj = start_wait(conf, hid6, "--json")
        hdtest.wait_watching(w, what="handoffctl wait")
        hdtest.wait_watching(wj, what="handoffctl wait --json")
        complete(env, conf, hid6, "--input-required", "which region: eu or us?", rc=0)
        out, err = w.communicate(timeout=20 * hdtest.SLOW)
        check(w.returncode == 7 and out.strip() == f"{hid6} input_required: which region: eu or us?",
              f"wait --until completed of a question: exit {w.returncode}: {out}{err}")
        out, err = wj.communicate(timeout=20 * hdtest.SLOW)
        got = json.loads(out) if wj.returncode == 7 else {}
        check(got.get("status") == "input_required"
              and got.get("result", {}).get("text") == "which region: eu or us?",
              f"wait --until completed --json of a question: exit {wj.returncode}: {out}{err}")
        p = env.ctl("wait", "-c", conf, hid6, "--until", "completed", "--timeout", "0")
        check(p.returncode == 7, f"a question already there: exit {p.returncode}: {p.stdout}")
        print("ok: complete --input-required: wait --until completed exits 7 with the question")

        # ---- wait --until completed: rejected 1, no result yet 3
        other = os.path.join(env.dir, "other.key")
        hdproto.make_key(other)
        bad = submit(env, conf, key=other)
        p = env.ctl("wait", "-c", conf, bad, "--until", "completed", "--timeout", "20")
        check(p.returncode == 1 and "rejected" in p.stdout, f"rejected: {p.returncode} {p.stdout}")
        hid4 = submit(env, conf)
        delivered_and_consumed(env, conf, hid4)
        t0 = time.monotonic()
        p = env.ctl("wait", "-c", conf, hid4, "--until", "completed", "--timeout", "1")
        check(p.returncode == 3 and "timeout (consumed)" in p.stdout and time.monotonic() - t0 >= 0.9,
              f"no result yet: {p.returncode} {p.stdout}")
        print("ok: wait --until completed: rejected 1, consumed without a result 3 (timeout)")

        # ---- refused: not the agent's key, hmac from a signer, forged, another's, too large
        hid5 = submit(env, conf, to="dave")
        delivered_and_consumed(env, conf, hid5, agent="dave")
        p = complete(env, conf, hid5, "--key", mallory_key, "--text", "x", agent="dave", rc=1)
        check("refused by handoffd: unknown_key" in p.stderr, f"another key: {p.stderr}")
        print(f"ok: signed with a key not the agent's: {p.stderr.strip()}")
        p = complete(env, conf, hid5, "--text", "x", agent="dave", rc=1)
        check("refused by handoffd: signature_required" in p.stderr, f"hmac from dave: {p.stderr}")
        print(f"ok: an hmac from an agent that signs: {p.stderr.strip()}")
        complete(env, conf, hid5, "--key", dave_key, "--text", "signed by dave", agent="dave", rc=0)
        got = show(env, conf, hid5)["result"]
        check(got["text"] == "signed by dave" and got["kid"], f"dave's signed result: {got}")
        print("ok: dave's result, signed with his own key, is recorded")

        forged = os.path.join(env.dir, "forged.key")
        forged_key = hdproto.make_key(forged)
        write_result(env, "alice", hid4, hdproto.dumps(result_doc(hid4, "alice", forged_key, text="forged")))
        why = refused(env, "alice", hid4, "bad_mac")
        check("result" not in show(env, conf, hid4), "nothing recorded for the forged one")
        hdtest.wait_for(lambda: f"Refused the result of {hid4} from alice: bad_mac" in d.logs(),
                        what="the refusal logged")
        print(f"ok: a forged result (bad MAC): refused, the agent told why ({why['detail']})")

        hid6 = submit(env, conf, frm="alice", to="bob")
        delivered_and_consumed(env, conf, hid6, agent="bob")
        write_result(env, "alice", hid6, hdproto.dumps(result_doc(hid6, "alice", env.key, text="mine?")))
        why = refused(env, "alice", hid6, "not_consumed")
        check("was for bob" in why["detail"], f"another agent's item: {why}")
        check("result" not in show(env, conf, hid6), "nothing recorded for another's item")
        print(f"ok: a result for an item another agent consumed: not_consumed ({why['detail']})")

        big = os.path.join(env.dir, "big.json")
        with open(big, "w") as f:
            json.dump({"blob": "x" * 70000}, f)
        p = complete(env, conf, hid4, "--data", big, rc=1)
        check("too_large" in p.stderr and not os.path.exists(handoffs(env, "alice", f".result.{hid4}")),
              f"oversized --data: {p.stderr}")
        write_result(env, "alice", hid4, hdproto.dumps(result_doc(hid4, "alice", env.key, text="y" * 70000)))
        why = refused(env, "alice", hid4, "too_large")
        check("result" not in show(env, conf, hid4), "nothing recorded for the oversized one")
        print(f"ok: too large: refused by handoffctl ({p.stderr.strip()}) and by the daemon ({why['detail']})")

        # the stdlib reference's result is taken as libhandoff's is
        write_result(env, "alice", hid4, hdproto.dumps(result_doc(hid4, "alice", env.key,
                                                                  data=[1, "two", {"3": 4}])))
        hdtest.wait_for(lambda: show(env, conf, hid4).get("result", {}).get("data") == [1, "two", {"3": 4}],
                        what="the Python-written result recorded")
        check(not os.path.exists(handoffs(env, "alice", f".result.{hid4}")), "its file taken")
        print("ok: a result written by the stdlib reference (hdproto) is recorded")

        # ---- the daemon down: --no-wait, a timeout, the next start records it
        hid7 = submit(env, conf)
        delivered_and_consumed(env, conf, hid7)
        check(d.stop() == 0, "stop")
        p = complete(env, conf, hid7, "--text", "while you were out", "--timeout", "1", rc=3)
        check("has not taken it yet" in p.stderr, f"daemon down: {p.stderr}")
        complete(env, conf, hid7, "--text", "while you were out", "--no-wait", rc=0)
        # what a crash between the record and the agent's file's removal
        # leaves: the agent's file beside its record; taken as done
        write_result(env, "alice", hid, hdproto.dumps(env_doc["result"]))
        d = env.start(conf=conf)
        hdtest.wait_for(lambda: show(env, conf, hid7).get("result", {}).get("text") == "while you were out",
                        what="recorded at the next start")
        print("ok: written while handoffd was down (exit 3 with a timeout): recorded at its start")
        hdtest.wait_for(lambda: not os.path.exists(handoffs(env, "alice", f".result.{hid}")),
                        what="the crash's leftover taken")
        check(not os.path.exists(handoffs(env, "alice", f".refused.{hid}")),
              "a result recorded already is no refusal")
        print("ok: a result left beside its record (a crash before its removal) is taken as done")
        c = d.status()["counters"]
        check(c["completed"] >= 1 and c["results_refused"] == 0, f"counters since the restart: {c}")

        # counters of one run: a refusal and a failure
        hid8 = submit(env, conf)
        delivered_and_consumed(env, conf, hid8)
        complete(env, conf, hid8, "--failed", "no", rc=0)
        complete(env, conf, hid8, "--text", "yes after all", rc=1)
        c = d.status()["counters"]
        check(c["completed"] == 1 and c["failed"] == 1 and c["results_refused"] == 1,
              f"status counters: {c}")
        print(f"ok: status counters completed {c['completed']}, failed {c['failed']}, "
              f"results_refused {c['results_refused']}")

        def metrics_say():
            try:
                text = open(metrics).read()
            except OSError:
                return False
            want = [f'handoffd_items{{state="archive"}} {env.count("archive")}',
                    'handoffd_events_total{event="completed"} 1',
                    'handoffd_events_total{event="failed"} 1',
                    'handoffd_events_total{event="result_refused"} 1']
            return all(w + "\n" in text for w in want)
        hdtest.wait_for(metrics_say, timeout=15, what="the metrics textfile")
        print("ok: metrics: the results counted, the .result files not counted as items")
        check(d.stop() == 0, "stop")

    # ---- retention: an item's .result goes with it and counts as no item
    with hdtest.Env(agents=["alice"]) as env:
        text = env.config_text("d0").replace(
            "rescan_interval = 5", f"rescan_interval = 1\nmax_window = {WINDOW}\nmax_clock_skew = 0")
        conf = env.write_config("d0", text=text + "\n[retention]\narchive_max_items = 1\n")
        d = env.start(conf=conf)
        ids = []
        for i in range(2):
            doc = hdproto.build("bob", "alice", env.key, ttl=WINDOW)
            hdproto.drop(env.spool, doc)
            hid = doc["handoff_id"]
            delivered_and_consumed(env, conf, hid)
            complete(env, conf, hid, "--text", f"result {i}", rc=0)
            ids.append(hid)
        newest = [n for n in env.names("archive") if n.endswith(ids[1] + ".json")]
        check(len(newest) == 1, f"archived: {env.names('archive')}")
        want = sorted([newest[0], newest[0] + ".outcome", newest[0] + ".result"])
        try:
            hdtest.wait_for(lambda: sorted(env.names("archive")) == want, timeout=WINDOW + 10,
                            what="the older item pruned with its .result")
        except hdtest.Fail:
            check(False, f"retention: {env.names('archive')}, wanted {want}")
        check(show(env, conf, ids[1])["result"]["text"] == "result 1", "the newest keeps its result")
        check(d.stop() == 0, "stop")
        print("ok: retention prunes an item with its .result, which counts as no item")
    hdtest.finish("test_results")


if __name__ == "__main__":
    hdtest.run(main)
