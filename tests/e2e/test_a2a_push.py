"""handoff-hubd's A2A push notifications (A2A 1.0 sections 3.1.7-3.1.10,
4.3.3, 13.2; issue 45), the real hub and daemon, a webhook of Python's
http.server on loopback ([hub] push_allow = 127.0.0.0/8):

- SendMessage with configuration.taskPushNotificationConfig: the config
  and its first event are in state_dir/push.d/bob/ID.json (0600) when
  the answer comes;
- the webhook answers 503 while the task is taken (GetTask WORKING) and
  the hub is SIGKILLed, the task completed while it is down; after the
  restart, and the webhook's recovery, the webhook has every event of
  the task, in order, each once by its generation: the Task (SUBMITTED),
  WORKING, the artifact, COMPLETED; each POST is application/a2a+json,
  Authorization the config's, X-A2A-Notification-Token its token, and a
  JWT (X-Handoff-Push-JWT) that verifies with the key of
  /.well-known/jwks.json, its claims aud = the URL, taskId, iat, exp,
  jti; the record goes once all is delivered;
- Create/Get/List/Delete on a task; Delete again is no error (3.1.10);
  another token's task is TaskNotFoundError;
- a webhook at 10.1.2.3, 169.254.169.254 or [::1] (not in push_allow) is
  refused with -32602 naming the address;
- a webhook that answers 302 is not followed: it is tried again, its
  Location never gets a POST;
- one numbering for a task's events: a config made while the task is
  WORKING (generation 2) gets the Task numbered 2, then the artifact (3)
  and COMPLETED (4), the same events under the same numbers as a stream
  of the task (SubscribeToTask with Last-Event-ID) gives;
- the card says pushNotifications: true.
"""

import base64
import http.server
import json
import os
import signal
import socketserver
import stat
import sys
import threading
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import a2akit  # noqa: E402
import hded25519  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402


class Hook:
    """The webhook: /hook answers 503 while refusing, else 200; /redirect
    302 to /caught.  Every POST kept in order."""

    def __init__(self):
        self.lock = threading.Lock()
        self.refusing = True
        self.got = []           # (path, status, headers, body)
        hook = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with hook.lock:
                    if self.path == "/redirect":
                        st = 302
                    elif self.path == "/hook":
                        st = 503 if hook.refusing else 200
                    else:
                        st = 200
                    hook.got.append((self.path, st, dict(self.headers), body))
                self.send_response(st)
                if st == 302:
                    self.send_header("Location", "/caught")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def posts(self, path, st=None):
        with self.lock:
            return [g for g in self.got if g[0] == path and (st is None or g[1] == st)]


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class Rpc:
    def __init__(self, hub, name, agent="bob"):
        self.hub, self.name, self.agent, self.n = hub, name, agent, 0

    def call(self, method, params):
        self.n += 1
        return self.hub.request("POST", f"/a2a/{self.name}", json.dumps(
            {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode(), {
            "Content-Type": "application/json", "A2A-Version": "1.0",
            "Authorization": f"Bearer {self.hub.tokens[self.agent]}"})

    def result(self, method, params):
        st, ans = self.call(method, params)
        check(st == 200 and "result" in ans, f"{method}: {st} {ans}")
        return ans["result"]

    def error(self, what, code, method, params):
        st, ans = self.call(method, params)
        got = ans.get("error", {}).get("code") if isinstance(ans, dict) else None
        check(got == code, f"{what}: want {code}, got {st} {ans}")
        print(f"ok: {what}: {code} {ans['error']['message']!r}")
        return ans["error"]["message"]


def message(text):
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}


def send(rpc, text, cfg=None):
    params = {"message": message(text), "configuration": {"returnImmediately": True}}
    if cfg:
        params["configuration"]["taskPushNotificationConfig"] = cfg
    return rpc.result("SendMessage", params)["task"]


def consume(env, conf, hid, agent):
    hdtest.wait_for(lambda: hid + ".json" in env.bootstraps(agent), what=f"{hid} delivered")
    env.ctl("consume", "-c", conf, "--agent", agent, hid, check_rc=0)


def verify_jwt(jwt, pub_pem, workdir):
    h, p, s = jwt.split(".")
    ok = hded25519.verify_bytes(pub_pem, f"{h}.{p}".encode(), b64d(s), workdir)
    return ok, json.loads(b64d(h)), json.loads(b64d(p))


def ssrf(rpc, tid, port):
    for url in ("http://10.1.2.3/hook", "http://169.254.169.254/latest", f"http://[::1]:{port}/hook"):
        msg = rpc.error(f"13.2: a webhook at {url}", -32602, "CreateTaskPushNotificationConfig",
                        {"taskId": tid, "url": url})
        check("push_allow" in msg, f"the refusal names push_allow: {msg}")
    msg = rpc.error("13.2: inline, a webhook at 10.1.2.3", -32602, "SendMessage", {
        "message": message("x"), "configuration": {"returnImmediately": True,
                                                   "taskPushNotificationConfig": {"url": "http://10.1.2.3/"}}})


def methods(rpc, other, tid, url):
    cfg = rpc.result("CreateTaskPushNotificationConfig", {"taskId": tid, "url": url, "id": "c1",
                                                          "token": "t-c1"})
    check(cfg == {"id": "c1", "taskId": tid, "url": url, "token": "t-c1"}, f"created: {cfg}")
    lst = rpc.result("ListTaskPushNotificationConfigs", {"taskId": tid})
    check([c["id"] for c in lst["configs"]] == ["c1"], f"3.1.9 list: {lst}")
    got = rpc.result("GetTaskPushNotificationConfig", {"taskId": tid, "id": "c1"})
    check(got == cfg, f"3.1.8 get: {got}")
    rpc.error("3.1.8: no such config", -32001, "GetTaskPushNotificationConfig", {"taskId": tid, "id": "nope"})
    other.error("3.1.7: another token's task", -32001, "CreateTaskPushNotificationConfig",
                {"taskId": tid, "url": url})
    check(rpc.result("DeleteTaskPushNotificationConfig", {"taskId": tid, "id": "c1"}) == {}, "delete")
    check(rpc.result("DeleteTaskPushNotificationConfig", {"taskId": tid, "id": "c1"}) == {},
          "3.1.10: delete again")
    check(rpc.result("ListTaskPushNotificationConfigs", {"taskId": tid})["configs"] == [], "deleted")
    rpc.error("3.1.7: no such task", -32001, "CreateTaskPushNotificationConfig",
              {"taskId": "a2a-nosuchtask", "url": url})
    print("ok: 3.1.7-3.1.10: create, list, get, delete (twice), another token's task not found")


def sse(hub, name, params, last_event_id):
    """A stream's events, read to its end: [(id, result)]."""
    conn = hub.connect()
    conn.request("POST", f"/a2a/{name}", json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": params}).encode(), {
        "Content-Type": "application/json", "A2A-Version": "1.0", "Last-Event-ID": last_event_id,
        "Authorization": f"Bearer {hub.tokens['bob']}"})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line
                      and not line.startswith(":"))
        if "id" in fields:
            out.append((int(fields["id"]), json.loads(fields["data"])["result"]))
    return out


def one_numbering(env, hub, rpc, hook):
    """A webhook and a stream see one numbering of a task's events."""
    late = f"http://127.0.0.1:{hook.port}/late"
    tid = send(rpc, "numbered once")["id"]
    consume(env, hub.conf, tid, "erin")
    hdtest.wait_for(lambda: rpc.result("GetTask", {"id": tid})["status"]["state"] ==
                    "TASK_STATE_WORKING", what="GetTask WORKING")
    rpc.result("CreateTaskPushNotificationConfig", {"taskId": tid, "url": late, "id": "late"})
    env.ctl("complete", "-c", hub.conf, "--agent", "erin", tid, "--text", "numbered",
            check_rc=0)
    hdtest.wait_for(lambda: len(hook.posts("/late", 200)) >= 3, timeout=60,
                    what="three events to the late config")
    pushed = []
    for _, _, hs, b in hook.posts("/late", 200):
        ev = json.loads(b)
        kind = next(iter(ev))
        hs = {k.lower(): v for k, v in hs.items()}
        pushed.append((ev[kind]["metadata"]["generation"], kind, ev, int(hs["x-handoff-generation"])))
    gens = [g for g, _, _, _ in pushed]
    check(gens == [2, 3, 4] and [k for _, k, _, _ in pushed] ==
          ["task", "artifactUpdate", "statusUpdate"] and all(g == h for g, _, _, h in pushed),
          f"a config made at WORKING: the Task at 2, then 3 and 4: {[(g, k, h) for g, k, _, h in pushed]}")
    streamed = dict(sse(hub, "erin", {"id": tid}, "1"))
    check(sorted(streamed) == [1, 2, 3, 4], f"the stream from Last-Event-ID 1: {sorted(streamed)}")
    for g, kind, ev, _ in pushed[1:]:
        check(streamed[g] == ev, f"event {g}: pushed {ev}, streamed {streamed[g]}")
    check(pushed[0][2]["task"]["status"]["state"] ==
          streamed[2]["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING",
          f"the Task pushed at 2 is the state streamed at 2: {pushed[0][2]} {streamed[2]}")
    print(f"ok: one numbering: the late config got generations {gens} (X-Handoff-Generation "
          "alike), events 3 and 4 the same as the stream's, the Task at 2 WORKING as the "
          "stream's 2")


def main():
    with hdtest.Env(agents=["alice", "bob", "erin"]) as env:
        env.extra = "[agent erin]\ncompletes = yes\n"
        key = os.path.join(env.dir, "push-signing.key")
        pk, kid = hded25519.parse_pub_line(
            env.ctl("keygen", "--ed25519", "-o", key, check_rc=0).stdout)
        hub = hubkit.Hub(env, tokens={"bob": None, "alice": None},
                         extra=f"signing_key = {key}\npush_allow = 127.0.0.0/8\n")
        env.start(conf=hub.conf)
        hub.start()
        hook = Hook()
        url = f"http://127.0.0.1:{hook.port}/hook"
        rpc, other = Rpc(hub, "erin"), Rpc(hub, "erin", agent="alice")
        st, card = hub.get("/a2a/erin/.well-known/agent-card.json")
        check(card["capabilities"]["pushNotifications"] is True, f"card: {card['capabilities']}")
        print("ok: the card says pushNotifications: true")
        st, jwks = hub.get("/.well-known/jwks.json")
        pub_pem = os.path.join(env.dir, "jwks.pem")
        with open(pub_pem, "w") as f:
            f.write(hded25519.pem_public(b64d(jwks["keys"][0]["x"])))

        cfg = {"url": url, "token": "tok-1", "authentication": {"scheme": "Bearer",
                                                                "credentials": "s3cret"}}
        task = send(rpc, "push me", cfg)
        tid = task["id"]
        rec = os.path.join(hub.state_dir, "push.d", "bob", tid + ".json")
        check(os.path.exists(rec) and stat.S_IMODE(os.stat(rec).st_mode) == 0o600,
              f"the record {rec} with mode 0600")
        kept = json.load(open(rec))
        check([c["first"]["gen"] for c in kept["configs"]] == [1] and
              "task" in kept["configs"][0]["first"]["event"], f"first event queued: {kept}")
        print(f"ok: SendMessage's config and its first event are on disk (0600) at the answer")
        methods(rpc, other, send(rpc, "another")["id"], url)
        ssrf(rpc, tid, hook.port)

        consume(env, hub.conf, tid, "erin")
        hdtest.wait_for(lambda: rpc.result("GetTask", {"id": tid})["status"]["state"] ==
                        "TASK_STATE_WORKING", what="GetTask WORKING")
        hdtest.wait_for(lambda: len(hook.posts("/hook", 503)) >= 2, timeout=30,
                        what="the webhook refused twice")
        hub.proc.proc.send_signal(signal.SIGKILL)
        hub.proc.proc.wait()
        env.ctl("complete", "-c", hub.conf, "--agent", "erin", tid, "--text", "done it",
                check_rc=0)
        print(f"ok: hub SIGKILLed while the webhook refuses ({len(hook.posts('/hook', 503))} "
              "503s); the task completed meanwhile")
        hub.start()
        n503 = len(hook.posts("/hook", 503))
        hdtest.wait_for(lambda: len(hook.posts("/hook", 503)) > n503, timeout=30,
                        what="a try after the restart")
        with hook.lock:
            hook.refusing = False
        hdtest.wait_for(lambda: len(hook.posts("/hook", 200)) >= 4, timeout=120,
                        what="four events delivered")
        got = hook.posts("/hook", 200)
        gens = [json.loads(b)[next(iter(json.loads(b)))]["metadata"]["generation"]
                for _, _, _, b in got]
        kinds = [next(iter(json.loads(b))) for _, _, _, b in got]
        check(gens == [1, 2, 3, 4], f"generations in order, each once: {gens}")
        check(kinds == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"], f"kinds {kinds}")
        evs = [json.loads(b) for _, _, _, b in got]
        check(evs[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
              and evs[1]["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
              and evs[2]["artifactUpdate"]["artifact"]["parts"] == [{"text": "done it"}]
              and evs[3]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
              and all(tid in json.dumps(e) for e in evs), f"events: {evs}")
        for _, _, hs, _ in got:
            hs = {k.lower(): v for k, v in hs.items()}
            check(hs.get("content-type") == "application/a2a+json", f"content type: {hs}")
            check(hs.get("authorization") == "Bearer s3cret", f"authorization: {hs}")
            check(hs.get("x-a2a-notification-token") == "tok-1", f"token: {hs}")
            ok, head, claims = verify_jwt(hs["x-handoff-push-jwt"], pub_pem, env.dir)
            check(ok and head == {"alg": "EdDSA", "typ": "JWT", "kid": kid}, f"JWT {head}")
            check(claims["aud"] == url and claims["taskId"] == tid and claims["exp"] > claims["iat"]
                  and len(claims["jti"]) == 32 and claims.get("iss"), f"claims {claims}")
        print(f"ok: after the restart and the recovery: {kinds}, generations {gens}, "
              f"{len(hook.posts('/hook', 503))} 503s before; each JWT verifies with the JWKS key")
        hdtest.wait_for(lambda: not os.path.exists(rec), what="the record gone once delivered")

        one_numbering(env, hub, rpc, hook)

        red = f"http://127.0.0.1:{hook.port}/redirect"
        t2 = send(rpc, "redirected", {"url": red})
        hdtest.wait_for(lambda: len(hook.posts("/redirect")) >= 2, timeout=30,
                        what="the redirecting webhook tried twice")
        check(hook.posts("/caught") == [], "the redirect was followed")
        print(f"ok: a 302 is not followed: {len(hook.posts('/redirect'))} tries of {red}, "
              f"none of /caught (task {t2['id']})")
    hdtest.finish("test_a2a_push")


if __name__ == "__main__":
    a2akit.run(main)
