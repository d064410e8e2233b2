"""Attack: anyone who can drop a file in handoff/ puts a document of their
choosing into rejected/ (a bad MAC is enough).  `handoffctl show` and
`list` must not take what such a file says inside for a fact:

- a forged file (bad MAC, any name) whose handoff_id is that of a real,
  consumed handoff: `show ID` still shows the archived item, consumed, and
  nothing of the forgery (its from_agent "mallory");
- a forged file naming an id that exists nowhere else: `show` of that id
  finds nothing (exit 1);
- a forged file named OTHER.json whose handoff_id names the real one:
  `show OTHER` shows that file as what it is (its own name, rejected,
  bad_mac), neither the id nor the agents it claims;
- `list --json`: no rejected item carries an id or an agent that only the
  forged documents claim."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def forged(victim, **kw):
    doc = dict(victim, from_agent="mallory", reason="believe me", **kw)
    return hdproto.sign(doc, b"m" * 32)         # not a key the daemon has


def main():
    with hdtest.Env(agents=["alice", "bob"]) as env:
        d = env.start()
        conf = os.path.join(env.dir, "d0.conf")

        # the real one: bob -> alice, claimed, consumed, archived
        real = hdproto.build("bob", "alice", env.key, ttl=600)
        rid = real["handoff_id"]
        hdproto.drop(env.spool, real)
        hdtest.wait_for(lambda: env.bootstraps("alice") == [rid + ".json"], what="delivered")
        check(hdtest.real_consumer(env.state["alice"], rid) is not None, "the real consumer took it")
        hdtest.wait_for(lambda: any(n.endswith(rid + ".json") for n in env.items("archive")),
                        what="archived as consumed")

        # the forgeries
        hdproto.drop(env.spool, forged(real), name="zz-forged.json")
        hdproto.drop(env.spool, forged(real, handoff_id="ghost-1"), name="innocent.json")
        hdproto.drop(env.spool, forged(real), name="other-1.json")
        hdtest.wait_for(lambda: env.count("rejected") == 3, what="three forgeries rejected")
        for n in env.items("rejected"):
            check(env.reason_of(n)["reason"] == "bad_mac", f"{n}: {env.reason_of(n)}")

        p = env.ctl("show", "-c", conf, rid, "--json", check_rc=0)
        j = json.loads(p.stdout)
        check(j["state"] == "archive" and j.get("outcome") == "consumed"
              and j["handoff_id"] == rid and j.get("from_agent") == "bob",
              f"show {rid} is the consumed item, not a forgery: {j}")
        p = env.ctl("show", "-c", conf, rid, check_rc=0)
        check("mallory" not in p.stdout and "rejected" not in p.stdout,
              f"show (text) says nothing of the forgery:\n{p.stdout}")
        print(f"- show {rid}: archive, consumed (a forged copy in rejected/ selects nothing)")

        p = env.ctl("show", "-c", conf, "ghost-1")
        check(p.returncode == 1, f"show ghost-1: exit {p.returncode}, wanted 1:\n{p.stdout}{p.stderr}")
        print("- show ghost-1 (named only inside a forged file): not found, exit 1")

        j = json.loads(env.ctl("show", "-c", conf, "other-1", "--json", check_rc=0).stdout)
        check(j["state"] == "rejected" and j["name"] == "other-1.json"
              and j["handoff_id"] == "other-1" and j.get("reason") == "bad_mac"
              and "from_agent" not in j and "to_agent" not in j,
              f"show other-1 is that file by its own name, nothing it claims: {j}")
        print("- show other-1: the file other-1.json, rejected bad_mac, no claimed id or agents")

        items = json.loads(env.ctl("list", "-c", conf, "--json", check_rc=0).stdout)
        rej = [it for it in items if it["state"] == "rejected"]
        check(len(rej) == 3, f"three rejected items listed: {rej}")
        for it in rej:
            check(it.get("handoff_id") in (None, "other-1") and "from_agent" not in it
                  and "to_agent" not in it,
                  f"a rejected item described by what it claims: {it}")
        p = env.ctl("list", "-c", conf, "--agent", "mallory", check_rc=0)
        check(p.stdout == "no items\n", f"list --agent mallory:\n{p.stdout}")
        print("- list: rejected forgeries by their names, no claimed id or agent")
        check(d.stop() == 0, "stop")


if __name__ == "__main__":
    hdtest.run(main)
