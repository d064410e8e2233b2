"""Payload formats end to end: `handoffctl submit --type --payload` (JSON,
YAML, XML) signs and drops; the daemon validates, claims, and delivers in
the form each agent expects (delivery = bootstrap | vox | act); the
bootstrap carries payload_type, payload and the rendered Markdown in
resume_context; nothing is written outside the agent's state_dir; the
metrics textfile is written."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check, SRC  # noqa: E402

UAH_YAML = """\
schema_version: "0.1.0"
type: U.AgentHandoff
version: "0.1.0"
context: AgentWorkflow
session_id: SESSION-001
handoff_id: SESSION-001.executor.1
from_agent_type: strategist
to_agent_type: executor
issued_at: "2026-01-18T00:00:00Z"
instructions: [Describe the tasks to complete]
acceptance_criteria: [Tests pass]
constraints: [No scope expansion]
artifacts: []
"""


def tree(root):
    out = set()
    for dp, dn, fn in os.walk(root):
        for n in dn + fn:
            out.add(os.path.relpath(os.path.join(dp, n), root))
    return out


def main():
    with hdtest.Env(agents=["alice", "gordon", "sven"]) as env:
        metrics = os.path.join(env.dir, "metrics", "handoffd.prom")
        os.makedirs(os.path.dirname(metrics))
        text = env.config_text("d0").replace("rescan_interval = 5", "rescan_interval = 1")
        text = text.replace(f"state_dir = {env.state['alice']}\n", f"state_dir = {env.state['alice']}\ndelivery = vox\n")
        text = text.replace(f"state_dir = {env.state['gordon']}\n", f"state_dir = {env.state['gordon']}\ndelivery = act\n")
        text += f"\n[metrics]\ntextfile = {metrics}\n"
        conf = env.write_config("d0", text=text)
        d = env.start(conf=conf)

        def submit(*args):
            p = env.ctl("submit", "--spool", env.spool, "--key", env.key_path, "--from", "bob", *args)
            check(p.returncode == 0, f"submit {args}: {p.returncode} {p.stderr}")
            return p.stdout.strip()

        vox_id = submit("--type", "vox/1.0", "--payload", os.path.join(SRC, "tests/payloads/vox.json"))
        act_path = os.path.join(env.dir, "act.xml")
        with open(os.path.join(SRC, "tests/payloads/act-complete.xml")) as f:
            xml = f.read().replace("release-agent", "gordon")
        with open(act_path, "w") as f:
            f.write(xml)
        act_id = submit("--type", "act/1.0", "--payload", act_path)
        yml = os.path.join(env.dir, "uah.yaml")
        with open(yml, "w") as f:
            f.write(UAH_YAML)
        bad = os.path.join(env.dir, "bad.json")
        with open(bad, "w") as f:
            json.dump({"version": "1.0", "session_id": "s"}, f)
        before = tree(env.dir)
        uah_id = submit("--to", "sven", "--type", "U.AgentHandoff/0.1.0", "--payload", yml)
        # A payload that breaks its format is refused before signing.
        p = env.ctl("submit", "--spool", env.spool, "--key", env.key_path, "--from", "bob", "--to", "alice",
                    "--type", "vox/1.0", "--payload", bad)
        check(p.returncode != 0 and "payload_invalid" in p.stderr, f"bad payload refused: {p.returncode} {p.stderr}")

        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == 1 and len(env.bootstraps("gordon")) == 1
                        and len(env.bootstraps("sven")) == 1, what="3 delivered")
        b = json.load(open(os.path.join(env.state["alice"], "handoffs", vox_id + ".json")))
        check(b["payload_type"] == "vox/1.0" and b["payload"]["goal"].startswith("Finish"), "vox payload carried")
        check("Finish the OAuth2 login flow" in b["resume_context"], "vox rendering in resume_context")
        check("obo-secret" not in b["resume_context"], "OBO token not rendered")
        vox = os.path.join(env.state["alice"], ".vox", "handoffs", b["payload"]["session_id"] + ".json")
        check(json.load(open(vox)) == b["payload"], "bare Vox contract written")
        check(".vox/handoffs/" in open(os.path.join(env.state["alice"], ".voxignore")).read(), ".voxignore")

        g = json.load(open(os.path.join(env.state["gordon"], "handoffs", act_id + ".json")))
        check(g["payload_type"] == "act/1.0" and "DataPipeline" in g["resume_context"], "act rendering")
        actdir = os.path.join(env.state["gordon"], ".act", "handoffs")
        xmls = [n for n in os.listdir(actdir) if n.endswith(".xml") and n != "latest.xml"]
        check(len(xmls) == 1 and open(os.path.join(actdir, xmls[0])).read() == xml, f"act file {xmls}")
        check(os.path.exists(os.path.join(actdir, "latest.xml")), "latest.xml")

        s = json.load(open(os.path.join(env.state["sven"], "handoffs", uah_id + ".json")))
        check(s["payload"]["type"] == "U.AgentHandoff" and s["payload"]["to_agent_type"] == "executor",
              "YAML payload carried as JSON")

        # Nothing outside the agents' state dirs and the spool appeared.
        after = tree(env.dir)
        new = {p for p in after - before
               if not p.startswith(("spool/", "agents/", "metrics/")) and not p.endswith((".log", ".sock"))}
        check(not new, f"files outside spool/state dirs: {sorted(new)}")
        hdtest.wait_for(lambda: os.path.exists(metrics) and
                        'handoffd_events_total{event="claimed"} 3' in open(metrics).read(),
                        timeout=5, what="metrics textfile")
        m = open(metrics).read()
        check('handoffd_items{state="claimed"} 3' in m, "metrics items")
        check(d.stop() == 0, "stop")
        print("vox, act and U.AgentHandoff (YAML) submitted, validated and delivered per profile; metrics written")


hdtest.run(main)
