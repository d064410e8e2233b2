"""Following an A2A task to its end (issue 46, "Follow"), the remote the
official SDK's server (tests/a2a/server.mjs) on loopback:

- every artifact back whole: a task that ends with two artifacts, the
  second a text and a data part, has both as the item's result
  (archive/NAME.result: `handoffctl wait --json` shows result.text with
  both texts and result.data.artifacts with the data part as sent).
  Before, only the first artifact's text came back;
- a task the server forgot (TaskNotFound on GetTask) ends unknown, logged
  at warning;
- 401 is "token refused": the item is kept and retried, handoffctl
  status is degraded with a problem naming the remote, and once the
  server takes the token again the handoff completes.  Before, a 401 was
  final (rejected/ as remote_rejected);
- GetTask backs off to 10 s at most (before, 60 s): a task working for
  ever is asked at intervals none over 11 s across 30 s, then, past
  [remote NAME] a2a_follow_max (30 s here), archived expired_unfinished.

Needs node and tests/a2a's packages (make a2a-deps)."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

FOLLOW_MAX_S = 30


def main():
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)
        port = natsrv.free_port()
        refuse = os.path.join(env.dir, "refuse")
        srv = a2akit.Server(env, port, token, os.path.join(env.dir, "server.log"),
                            calls=os.path.join(env.dir, "calls.log"), refuse_file=refuse)
        srv.start()
        conf = env.write_config("d0", extra=f"[remote remote]\na2a = http://127.0.0.1:{port}/a2a\n"
                                            f"token_file = {tf}\na2a_follow_max = {FOLLOW_MAX_S}s\n")
        d = env.start("d0", conf=conf)
        forever = hdproto.build("bob", "remote", env.key, ttl=600, reason="work on this forever")
        hdproto.drop(env.spool, forever)

        # ---- two artifacts, a data part
        doc = hdproto.build("bob", "remote", env.key, ttl=600, reason="two artifacts please")
        hdproto.drop(env.spool, doc)
        rc, it, p = a2akit.wait_code(env, conf, doc["handoff_id"])
        res = it.get("result", {})
        arts = res.get("data", {}).get("artifacts", [])
        check(rc == 0 and it.get("remote_outcome") == "completed", f"two artifacts: {rc} {it}")
        check(res.get("text") == "done: two artifacts please\nthe figures follow",
              f"the result's text: {res}")
        check(len(arts) == 2 and arts[1].get("name") == "table" and
              {"data": {"rows": [[1, "one"], [2, "two"]], "total": 3},
               "mediaType": "application/json"} in arts[1].get("parts", []),
              f"the artifacts: {arts}")
        print(f"two artifacts: result.text {res['text']!r}, data part {arts[1]['parts'][1]}")

        # ---- a task the server forgets
        doc = hdproto.build("bob", "remote", env.key, ttl=600, reason="forget this one")
        hdproto.drop(env.spool, doc)
        rc, it, p = a2akit.wait_code(env, conf, doc["handoff_id"])
        check(rc == 1 and it.get("remote_outcome") == "unknown", f"forgotten: {rc} {it}")
        said = [ln for ln in d.logs().splitlines() if "no longer knows task" in ln]
        check(len(said) == 1 and "warning" in said[0] and doc["handoff_id"] in said[0],
              f"the forgotten task's line: {said}")
        print(f"forgotten task: unknown, {said[0]}")

        # ---- 401: the token refused, kept, loud, then it completes
        open(refuse, "w").close()
        doc = hdproto.build("bob", "remote", env.key, ttl=600, reason="please complete this")
        hdproto.drop(env.spool, doc)

        def refused():
            p = env.ctl("status", "-c", conf, "--json")
            st = json.loads(p.stdout)
            return p.returncode == 1 and any("refuses the token" in x for x in st.get("problems", []))
        hdtest.wait_for(refused, 20, "status degraded by the refused token")
        st = json.loads(env.ctl("status", "-c", conf, "--json").stdout)
        prob = [x for x in st["problems"] if "refuses the token" in x]
        check(not env.names("rejected"), f"rejected while the token is refused: {env.names('rejected')}")
        os.unlink(refuse)
        rc, it, p = a2akit.wait_code(env, conf, doc["handoff_id"], "30")
        check(rc == 0 and it.get("remote_outcome") == "completed", f"after the 401s: {rc} {it}")
        st = json.loads(env.ctl("status", "-c", conf, "--json").stdout)
        check(not any("refuses the token" in x for x in st.get("problems", [])),
              f"the problem stays: {st.get('problems')}")
        print(f"401: kept and retried ({prob[0]}), completed once the token passes")

        # ---- GetTask back-off capped at 10 s, then expired_unfinished
        rc, it, p = a2akit.wait_code(env, conf, forever["handoff_id"], str(FOLLOW_MAX_S + 30))
        check(rc == 1 and it.get("remote_outcome") == "expired_unfinished",
              f"the task that never ends: {rc} {it}")
        task = it.get("a2a_task")
        ts = [c["t"] for c in srv.calls() if c["method"] == "GetTask" and c["id"] == task]
        gaps = [(b - a) / 1000 for a, b in zip(ts, ts[1:])]
        check(len(gaps) >= 4 and max(gaps) <= 11 and max(gaps) >= 7,
              f"GetTask gaps {gaps}")
        print(f"forever: GetTask gaps {[round(g, 1) for g in gaps]} s (at most 10), then "
              f"expired_unfinished after {FOLLOW_MAX_S}s")
        check(d.stop() == 0, "exit 0")
    hdtest.finish("test_a2a_follow")


if __name__ == "__main__":
    a2akit.run(main)
