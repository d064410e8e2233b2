"""/mcp as packaged (issue 49): the daemon its own user, the hub its own
user in the spool's group (handoff-hubd.sysusers), alice and bob each
their own user and group, each state_dir and handoffs/ 2770 owned by the
daemon, group the agent's (systemd/handoffd.tmpfiles); [control] hub_user
names the hub's user (etc/handoffd.conf).

- the premise: the hub's user can list neither alice's handoffs/ nor
  read her bootstrap;
- over /mcp with alice's token: the notification on her stream, her
  inbox, the resource, the take (with its context), the complete (the
  daemon records her result), all done by handoffd for her;
- bob's token neither sees, reads, takes nor completes alice's handoff,
  nor alice's token bob's;
- the modes are as shipped after all that: nothing was widened;
- without [control] hub_user the daemon refuses the hub's requests: the
  tools say so, and the bootstrap stays; with no daemon at all a take says
  that, not that nothing waits.

Runs as root; the users and groups are throwaway ids."""

import json
import os
import stat
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402
from test_mcp_hub import Mcp, sse_event  # noqa: E402

SPOOL_GID = 47490       # the spool's group ("handoff")
DAEMON = 47491          # handoffd's user
HUB = 47492             # handoff-hubd's user, primary group the spool's
ALICE = 47493           # alice's user and private group
BOB = 47494             # bob's


def as_hub(code, *args):
    """Python code run as the hub's user: its stdout."""
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    p = subprocess.run([py, "-c", code, *args], user=HUB, group=SPOOL_GID,
                       extra_groups=[SPOOL_GID], capture_output=True, text=True,
                       timeout=30 * hdtest.SLOW)
    check(p.returncode == 0, f"as the hub's user: {p.stderr}")
    return p.stdout.strip()


def denied(path, op):
    code = ("import errno, os, sys\n"
            "try:\n"
            "    os.listdir(sys.argv[1]) if sys.argv[2] == 'list' else open(sys.argv[1]).read()\n"
            "    print('ok')\n"
            "except OSError as e:\n"
            "    print(errno.errorcode.get(e.errno, e.errno))\n")
    return as_hub(code, path, op)


def modes(env):
    out = {}
    for a in ("alice", "bob"):
        for p in (env.state[a], os.path.join(env.state[a], "handoffs")):
            st = os.stat(p)
            out[p] = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    return out


def deploy(env, hub_user):
    dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE, "bob": BOB})
    hub = hubkit.Hub(env, tokens={"bob": None, "alice": None}, tls=False)
    hub.run_as(HUB, SPOOL_GID)
    text = open(hub.conf).read()
    if hub_user:
        text = text.replace("[control]\n", f"[control]\nhub_user = {HUB}\n", 1)
    d, conf = dep.start(text=text)
    hub.start()
    return dep, hub, d


def packaged():
    with hdtest.Env(agents=["alice", "bob"], shared=True) as env:
        dep, hub, d = deploy(env, hub_user=True)
        shipped = modes(env)
        want = {p: (0o2770, DAEMON, g) for a, g in (("alice", ALICE), ("bob", BOB))
                for p in (env.state[a], os.path.join(env.state[a], "handoffs"))}
        check(shipped == want, f"state dirs as shipped: {shipped}")
        alice, bob = Mcp(hub, "alice"), Mcp(hub, "bob")
        alice.initialize()
        bob.initialize()

        # alice's stream, read on a thread until her list changes
        c, r = alice.stream()
        check(r.status == 200, f"alice's GET stream: {r.status}")
        told = threading.Event()

        def read():
            while True:
                ev = sse_event(r)
                if ev is None:
                    return
                if "list_changed" in ev.get("data", ""):
                    told.set()
                    return
        t = threading.Thread(target=read, daemon=True)
        t.start()
        hdtest.wait_for(lambda: "handoff_hub_mcp_streams 1" in hub.request("GET", "/metrics")[1],
                        what="the hub counts alice's stream")

        sent = bob.call("handoff_send", {"to_agent": "alice", "reason": "review the patch",
                                         "context": "The patch is in the branch; review it."})
        check(not sent.get("isError"), f"bob sends: {sent}")
        hid = sent["structuredContent"]["handoff_id"]
        boot = os.path.join(env.state["alice"], "handoffs", hid + ".json")
        hdtest.wait_for(lambda: os.path.exists(boot), what=f"{hid} delivered")
        check(denied(os.path.join(env.state["alice"], "handoffs"), "list") == "EACCES" and
              denied(boot, "read") == "EACCES",
              "the hub's user can neither list alice's handoffs/ nor read her bootstrap")
        print("ok: the premise: the hub's user reads nothing of alice's handoffs/")

        check(told.wait(10 * hdtest.SLOW), "alice is told on her stream")
        print("ok: alice's stream: notifications/resources/list_changed")
        inbox = hdtest.wait_for(
            lambda: (lambda x: x if any(h["handoff_id"] == hid
                                        for h in x["structuredContent"]["handoffs"]) else None)(
                alice.call("handoff_inbox")), what="alice's inbox lists it")
        check(not inbox.get("isError"), f"alice's inbox: {inbox}")
        st, _, res = alice.request("resources/read", {"uri": f"handoff://inbox/{hid}"})
        check(st == 200 and "result" in res and hid in res["result"]["contents"][0]["text"],
              f"alice reads the resource: {st} {res}")
        st, _, res = alice.request("resources/list")
        check(any(x["uri"] == f"handoff://inbox/{hid}" for x in res["result"]["resources"]),
              f"alice lists it as a resource: {res}")
        print("ok: alice's inbox and resource over /mcp, read by handoffd for her")

        # bob's token: nothing of alice's
        ib = bob.call("handoff_inbox")
        check(not ib.get("isError") and ib["structuredContent"]["handoffs"] == [],
              f"bob's inbox shows none of alice's: {ib}")
        st, _, res = bob.request("resources/read", {"uri": f"handoff://inbox/{hid}"})
        check(st == 200 and "error" in res, f"bob cannot read alice's resource: {res}")
        steal = bob.call("handoff_take", {"handoff_id": hid})
        check(steal.get("isError") and "waiting for bob" in steal["content"][0]["text"],
              f"bob cannot take it: {steal}")
        check(os.path.exists(boot), "the bootstrap is still alice's to take")
        print("ok: bob's token neither lists, reads nor takes alice's handoff")
        # and the other way: alice's token, a handoff waiting for bob
        back = alice.call("handoff_send", {"to_agent": "bob", "reason": "a question",
                                           "context": "Which staging host?"})
        bid = back["structuredContent"]["handoff_id"]
        bboot = os.path.join(env.state["bob"], "handoffs", bid + ".json")
        hdtest.wait_for(lambda: os.path.exists(bboot), what=f"{bid} delivered to bob")
        ib = alice.call("handoff_inbox")
        check(all(h["handoff_id"] != bid for h in ib["structuredContent"]["handoffs"]),
              f"alice's inbox shows none of bob's: {ib}")
        st, _, res = alice.request("resources/read", {"uri": f"handoff://inbox/{bid}"})
        check(st == 200 and "error" in res, f"alice cannot read bob's resource: {res}")
        steal = alice.call("handoff_take", {"handoff_id": bid})
        check(steal.get("isError") and "waiting for alice" in steal["content"][0]["text"],
              f"alice cannot take bob's: {steal}")
        check(os.path.exists(bboot), "bob's bootstrap is still his")
        ib = bob.call("handoff_inbox")
        check([h["handoff_id"] for h in ib["structuredContent"]["handoffs"]] == [bid],
              f"bob's inbox over /mcp: {ib}")
        print("ok: alice's token neither lists, reads nor takes bob's handoff; bob's lists it")

        took = alice.call("handoff_take", {"handoff_id": hid})
        check(not took.get("isError") and
              "The patch is in the branch" in took["structuredContent"]["resume_context"] and
              took["structuredContent"]["from_agent"] == "bob", f"alice takes it: {took}")
        check(not os.path.exists(boot), "the bootstrap is gone")
        hdtest.wait_for(lambda: env.item(hid)["state"] == "archive", what="archived")
        print("ok: alice takes it over /mcp with its context")

        nope = bob.call("handoff_complete", {"handoff_id": hid, "text": "not mine"})
        check(nope.get("isError"), f"bob cannot complete alice's handoff: {nope}")
        done = alice.call("handoff_complete", {"handoff_id": hid, "text": "looks good"})
        check(not done.get("isError") and done["structuredContent"]["recorded"] is True,
              f"alice completes: {done}")
        status = bob.call("handoff_status", {"handoff_id": hid})
        res = status["structuredContent"].get("result", {})
        check(res.get("agent") == "alice" and res.get("text") == "looks good",
              f"bob sees alice's result: {status}")
        print("ok: alice's handoff_complete: recorded by the daemon; bob's refused")
        check(modes(env) == shipped, f"modes changed: {modes(env)} vs {shipped}")
        print("ok: the state dirs' modes and owners are as shipped after all of it")
        c.close()
        check(hub.proc.stop() == 0, "the hub stops with 0")
        check(d.stop() == 0, "the daemon stops with 0")


def without_hub_user():
    with hdtest.Env(agents=["alice", "bob"], shared=True) as env:
        dep, hub, d = deploy(env, hub_user=False)
        alice, bob = Mcp(hub, "alice"), Mcp(hub, "bob")
        alice.initialize()
        bob.initialize()
        sent = bob.call("handoff_send", {"to_agent": "alice", "reason": "r", "context": "c"})
        hid = sent["structuredContent"]["handoff_id"]
        boot = os.path.join(env.state["alice"], "handoffs", hid + ".json")
        hdtest.wait_for(lambda: os.path.exists(boot), what=f"{hid} delivered")
        ib = alice.call("handoff_inbox")
        took = alice.call("handoff_take", {"handoff_id": hid})
        check(ib.get("isError") and took.get("isError") and os.path.exists(boot),
              f"no hub_user: refused: {ib} {took}")
        print(f"ok: without [control] hub_user the daemon does nothing for the hub: "
              f"{took['content'][0]['text']}")
        check(d.stop() == 0, "the daemon stops with 0")
        took = alice.call("handoff_take")
        said = took["content"][0]["text"]
        check(took.get("isError") and "control socket" in said and "waiting" not in said,
              f"with no daemon the take says so, not that nothing waits: {took}")
        print(f"ok: no daemon: {said}")
        check(hub.proc.stop() == 0, "the hub stops with 0")


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    packaged()
    without_hub_user()
    hdtest.finish("test_mcp_hub_users")


if __name__ == "__main__":
    hdtest.run(main)
