"""The hub serves the agent behind a [remote NAME] a2a (issue 46, 1), run
as packaged: handoffd its own user, handoff-hubd its own user in the
spool's group, the remote's token file 0600 the daemon's user's (the
hub cannot read it and needs not: it starts).

- the card of /a2a/far: 200, its description and skills from [remote
  far], the endpoint the hub's;
- an SDK client (tests/a2a/send.mjs: ClientFactory from that card) sends
  a message for far through the hub: the daemon sends it on to the SDK
  server (tests/a2a/server.mjs) as that task's messageId, and the task
  the hub answers GetTask with ends COMPLETED;
- the message the SDK server runs holds the client's parts as it sent
  them, a text part and a data part (A2A 1.0 section 4.1.6, Part: text,
  data with its mediaType), not the handoff's reason "a2a";
- a POST /api/v1/handoffs/start for far: accepted, not unknown_agent,
  and at the SDK server.

Runs as root; the users and groups are throwaway ids.  Needs node and
tests/a2a's packages (make a2a-deps)."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47470       # the spool's group
DAEMON = 47471          # handoffd's user
HUB = 47472             # handoff-hubd's user, primary group the spool's
ALICE = 47473
DATA = {"call": 17, "speakers": ["ann", "bo"], "minutes": 42.5, "done": False}


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"], shared=True) as env:
        token, tf = a2akit.token_file(env)
        os.chown(tf, DAEMON, DAEMON)
        port = natsrv.free_port()
        srv = a2akit.Server(env, port, token, os.path.join(env.dir, "server.log"),
                            parts=os.path.join(env.dir, "server.parts"))
        srv.start()
        env.extra = (f"[remote far]\na2a = http://127.0.0.1:{port}/a2a\ntoken_file = {tf}\n"
                     "description = Summarizes calls on another framework\n"
                     "skill = summarize: Summarizes a call\n")
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        hub = hubkit.Hub(env, tokens={"bob": None}, tls=False)
        hub.run_as(HUB, SPOOL_GID)
        # handoff-a2a beside the daemon's copy, where handoffd looks for it
        env.for_others(os.path.join(hdtest.BUILD, "handoff-a2a"))
        d, conf = dep.start(text=open(hub.conf).read())
        st = os.stat(tf)
        print(f"token file: mode {st.st_mode & 0o777:o}, owner {st.st_uid} (the hub is {HUB})")
        h = hub.start()
        check(h.proc.poll() is None, f"the hub exited {h.proc.returncode}:\n{h.logs()}")
        print("hub started beside a 0600 token file it cannot read")

        s, card = hub.request("GET", "/a2a/far/.well-known/agent-card.json")
        check(s == 200 and card.get("name") == "far" and
              card.get("description") == "Summarizes calls on another framework" and
              [k["id"] for k in card.get("skills", [])] == ["summarize"] and
              card["supportedInterfaces"][0]["url"].endswith(f":{hub.port}/a2a/far"),
              f"the card of far: {s} {card}")
        print(f"card: {card['name']}: {card['description']}; skills "
              f"{[k['id'] for k in card['skills']]}; {card['supportedInterfaces'][0]['url']}")

        args = {"base": f"http://127.0.0.1:{hub.port}", "agent": "far",
                "token": hub.tokens["bob"], "text": "please complete the summary",
                "data": DATA}
        p = subprocess.run(["node", os.path.join(a2akit.A2A_DIR, "send.mjs"), json.dumps(args)],
                           capture_output=True, text=True, timeout=90 * hdtest.SLOW)
        check(p.returncode == 0, f"send.mjs exit {p.returncode}: {p.stderr}{p.stdout}")
        out = json.loads(p.stdout)
        tid = out["task"]["id"]
        print(f"SDK SendMessage to far: task {tid} {out['task']['status']['state']}, "
              f"then {out['last']['status']['state']}")
        hdtest.wait_for(lambda: tid in srv.ids(), 30, "the message at the SDK server")
        check(srv.ids().count(tid) == 1, f"the SDK server ran {srv.ids()}")
        print(f"the SDK server ran messageId {tid} once")
        parts = dict(srv.messages())[tid]
        got = [(p["content"]["$case"], p["content"]["value"], p.get("mediaType") or None)
               for p in parts]
        check(got == [("text", "please complete the summary", None),
                      ("data", DATA, "application/json")],
              f"the parts the SDK server got: {parts}")
        print(f"the SDK server got the client's parts: {got}")
        # 3: TASK_STATE_COMPLETED, the server's end, through the spool
        check(out["last"]["status"]["state"] == 3, f"the hub's task at the end: {out['last']}")

        doc = hdproto.build("bob", "far", env.key, reason="please complete this too", ttl=600)
        s, ans = hub.post(doc, "bob")
        check(s == 200 and ans.get("status") == "accepted", f"POST for far: {s} {ans}")
        hdtest.wait_for(lambda: doc["handoff_id"] in srv.ids(), 30, "the POST at the SDK server")
        print(f"POST for far: {s}; at the SDK server")
        d.stop()
    hdtest.finish("the hub serves the agent of a [remote] a2a and never reads its token")


if __name__ == "__main__":
    a2akit.run(main)
