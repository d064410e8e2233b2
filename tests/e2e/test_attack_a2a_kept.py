"""The hub's kept A2A documents (issue 43.5, 43.6, 43.10, 43.12), run as
packaged: the daemon its own user, the hub its own user in the spool's
group, alice her own user, mallory a member of the spool's group.

- modes: a state_dir of an older hub (0750, its documents in a2a/,
  0640) is made 0700 at start, a2a/ moved to a2a.d/ (0700), the
  documents 0600; mallory can list neither and read no document;
- a POST whose handoff_id is "a2a" (a record named a2a in state_dir):
  SendMessage and ListTasks still work;
- GetTask at once after each of 40 SendMessage, alice consuming
  meanwhile: every task exists;
- contextId is its sender's: bob naming carol's context is refused
  (-32602), nothing delivered; his own context works;
- the spool rejects (inbox_full, max_waiting = 2): the rejected tasks'
  documents are removed (GetTask says REJECTED inbox_full); a token at
  [hub] a2a_kept_max_items is refused with -32603 and nothing dropped.

Runs as root; the users and groups are throwaway ids."""

import json
import os
import stat
import subprocess
import sys
import threading
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47490
DAEMON = 47491
HUB = 47492
ALICE = 47493
MALLORY = 47494
MAX_ITEMS = 60


def call(hub, method, params, agent="bob", target="alice"):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    return hub.request("POST", f"/a2a/{target}", body, {
        "Content-Type": "application/json", "A2A-Version": "1.0",
        "Authorization": f"Bearer {hub.tokens[agent]}"})[1]


def rpc(hub, method, params, **kw):
    ans = call(hub, method, params, **kw)
    check("result" in ans, f"{method}: {ans}")
    return ans["result"]


def msg(text, ctx=None):
    m = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if ctx:
        m["contextId"] = ctx
    return {"message": m, "configuration": {"returnImmediately": True}}


def as_mallory(op, path):
    code = ("import errno, os, sys\nop, p = sys.argv[1:3]\ntry:\n"
            "    os.listdir(p) if op == 'list' else open(p).read()\n"
            "except OSError as e:\n    print(errno.errorcode[e.errno]); sys.exit(0)\nprint('ok')\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code, op, path], user=MALLORY, group=SPOOL_GID,
                       extra_groups=[SPOOL_GID], capture_output=True, text=True, timeout=30)
    return p.stdout.strip()


def drain(env, conf):
    """alice takes what waits for her until nothing does (handoff/ too)."""
    hdtest.wait_for(lambda: not [env.ctl("consume", "-c", conf, "--agent", "alice", n[:-5])
                                 for n in env.bootstraps("alice")]
                    and not env.names("handoff"), what="alice's inbox and handoff/ empty")


def mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        env.extra = "[agent carol]\nstate_dir = " + env.dir + "/agents/carol\n"
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        hub = hubkit.Hub(env, tokens={"bob": None, "carol": None}, tls=False,
                         extra=f"a2a_kept_max_items = {MAX_ITEMS}\n")
        hub.run_as(HUB, SPOOL_GID)
        # an older hub's layout: a2a/bob/ID.json, 0640 in 0750 directories
        old = os.path.join(hub.state_dir, "a2a", "bob")
        os.makedirs(old, 0o750)
        for p in (os.path.dirname(old), old):
            os.chown(p, HUB, SPOOL_GID)
            os.chmod(p, 0o750)
        doc = hdproto.build("bob", "alice", env.key, handoff_id="a2a-old",
                            extra={"payload_type": "a2a/1", "payload": {
                                "messageId": "m-old", "contextId": "ctx-old",
                                "parts": [{"text": "bob's old secret words"}]}})
        oldf = os.path.join(old, "a2a-old.json")
        with open(oldf, "wb") as f:
            f.write(hdproto.dumps(doc))
        os.chown(oldf, HUB, SPOOL_GID)
        os.chmod(oldf, 0o640)
        check(mode(hub.state_dir) == 0o750, "state_dir as an older hub had it")
        text = open(hub.conf).read().replace("max_waiting = 0\n", "max_waiting = 2\n", 1)
        d, conf = dep.start(text=text)
        hub.start()

        # item 5: modes
        kept = os.path.join(hub.state_dir, "a2a.d")
        t = rpc(hub, "SendMessage", msg("bob's secret words"))["task"]
        mine = os.path.join(kept, "bob", t["id"] + ".json")
        check(mode(hub.state_dir) == 0o700 and mode(kept) == 0o700
              and mode(os.path.join(kept, "bob")) == 0o700, "state_dir, a2a.d/, a2a.d/bob/: "
              f"{mode(hub.state_dir):o} {mode(kept):o} {mode(os.path.join(kept, 'bob')):o}")
        check(mode(mine) == 0o600 and mode(os.path.join(kept, "bob", "a2a-old.json")) == 0o600,
              f"documents: {mode(mine):o}")
        check(not os.path.exists(os.path.join(hub.state_dir, "a2a")), "a2a/ left in place")
        for op, p in (("list", hub.state_dir), ("list", kept), ("read", mine),
                      ("read", os.path.join(kept, "bob", "a2a-old.json"))):
            got = as_mallory(op, p)
            check(got == "EACCES", f"mallory: {op} {p}: {got}")
        print("ok: state_dir 0700 (was 0750), a2a/ moved to a2a.d/ 0700, documents 0600: "
              "mallory reads none")
        check("made 0700" in hub.proc.logs(), "the tightening is not said")
        hdtest.wait_for(lambda: env.bootstraps("alice") == [t["id"] + ".json"], what="delivered")
        env.ctl("consume", "-c", conf, "--agent", "alice", t["id"], check_rc=0)

        # item 10: a record named a2a
        st, ans = hub.post(hdproto.build("bob", "alice", env.key, handoff_id="a2a"), "bob")
        check(st == 200, f"POST a2a: {st} {ans}")
        # (the records are lines of one journal, whose name has a '.', as
        # no handoff_id has: no id's record takes the kept tasks' place)
        with open(os.path.join(hub.state_dir, "accepted.log")) as f:
            check(any(ln.split()[:2] == ["+", "a2a"] for ln in f), "no record of a2a")
        t2 = rpc(hub, "SendMessage", msg("after the record a2a"))["task"]
        check(t2["status"]["state"] == "TASK_STATE_SUBMITTED", f"SendMessage: {t2}")
        check(t2["id"] in [x["id"] for x in rpc(hub, "ListTasks", {})["tasks"]], "ListTasks")
        print("ok: a POST with handoff_id a2a, then SendMessage and ListTasks work")
        for hid in ("a2a", t2["id"]):
            hdtest.wait_for(lambda: hid + ".json" in env.bootstraps("alice"), what=f"{hid} delivered")
            env.ctl("consume", "-c", conf, "--agent", "alice", hid, check_rc=0)

        # item 12: GetTask at once after SendMessage, alice consuming meanwhile
        stop = threading.Event()

        def consumer():
            while not stop.is_set():
                for n in env.bootstraps("alice"):
                    subprocess.run([hdtest.HANDOFFCTL, "consume", "-c", conf, "--agent", "alice",
                                    n[:-5]], capture_output=True)
        th = threading.Thread(target=consumer)
        th.start()
        missing = []
        try:
            for i in range(40):
                hid = rpc(hub, "SendMessage", msg(f"at once {i}"))["task"]["id"]
                ans = call(hub, "GetTask", {"id": hid})
                if "result" not in ans:
                    missing.append((hid, ans))
        finally:
            stop.set()
            th.join()
        check(not missing, f"GetTask right after SendMessage: {len(missing)} of 40 unknown: "
              f"{missing[:2]}")
        print("ok: GetTask right after each of 40 SendMessage: 40 of 40 exist")
        drain(env, conf)

        # item 12: contextId scoped to its sender
        ct = rpc(hub, "SendMessage", msg("carol's conversation", ctx="conv-carol"), agent="carol")
        hdtest.wait_for(lambda: ct["task"]["id"] + ".json" in env.bootstraps("alice"),
                        what="carol's delivered")
        before = env.bootstraps("alice")
        ans = call(hub, "SendMessage", msg("bob joins in", ctx="conv-carol"))
        check(ans.get("error", {}).get("code") == -32602, f"bob in carol's context: {ans}")
        check(env.bootstraps("alice") == before, "bob's message delivered")
        own = rpc(hub, "SendMessage", msg("bob's own", ctx="conv-bob"))["task"]
        check(own["contextId"] == "conv-bob", f"bob's own context: {own}")
        again = rpc(hub, "SendMessage", msg("bob's own again", ctx="conv-bob"))["task"]
        check(again["contextId"] == "conv-bob", f"bob's own context again: {again}")
        print(f"ok: bob naming carol's context: {ans['error']['message']!r}; his own works")
        drain(env, conf)

        # item 6: what the spool rejects is not kept; a token's cap

        def kept_files():
            return sorted(os.listdir(os.path.join(kept, "bob")))
        n0 = len(kept_files())
        sent = [rpc(hub, "SendMessage", msg(f"inbox {i}"))["task"]["id"] for i in range(4)]
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == 2
                        and all(env.item(h)["state"] in ("claimed", "rejected") for h in sent),
                        what=lambda: f"two delivered, two rejected: {env.bootstraps('alice')} "
                        f"{[env.item(h)['state'] for h in sent]}")
        rejected = [h for h in sent if env.item(h)["state"] == "rejected"]
        check(len(rejected) == 2, f"rejected: {rejected}")
        for h in rejected:
            t = rpc(hub, "GetTask", {"id": h})
            check(t["status"]["state"] == "TASK_STATE_REJECTED"
                  and t["metadata"].get("reason") == "inbox_full", f"GetTask {h}: {t}")
        check(len(kept_files()) == n0 + 2 and not any(h + ".json" in kept_files() for h in rejected),
              f"kept: {kept_files()}")
        print("ok: the two the daemon rejected inbox_full: REJECTED, their documents removed")
        for n in env.bootstraps("alice"):
            env.ctl("consume", "-c", conf, "--agent", "alice", n[:-5], check_rc=0)
        refused = None
        for i in range(MAX_ITEMS * 2):
            ans = call(hub, "SendMessage", msg(f"flood {i}"))
            if "error" in ans:
                refused = (i, ans)
                break
            for n in env.bootstraps("alice"):
                env.ctl("consume", "-c", conf, "--agent", "alice", n[:-5], check_rc=0)
        check(refused and refused[1]["error"]["code"] == -32603, f"no cap: {refused}")
        count = len(kept_files())
        check(count <= MAX_ITEMS, f"{count} kept for bob, cap {MAX_ITEMS}")
        print(f"ok: bob's token refused at its cap ({count} kept; -32603 "
              f"{refused[1]['error']['message']!r})")
        ok = rpc(hub, "SendMessage", msg("carol is not capped by bob"), agent="carol")
        check(ok["task"]["status"]["state"] == "TASK_STATE_SUBMITTED", f"carol: {ok}")
        print("ok: carol's token still sends")
        check(hub.proc.stop() == 0, "the hub stops with 0")
        check(d.stop() == 0, "the daemon stops with 0")
    hdtest.finish("test_attack_a2a_kept")


if __name__ == "__main__":
    hdtest.run(main)
