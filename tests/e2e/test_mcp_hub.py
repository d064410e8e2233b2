"""handoff-hubd's /mcp: the MCP tool table of handoffctl mcp over MCP's
Streamable HTTP transport (specification 2025-11-25, "Transports"), with
the hub's tokens.  A real handoffd, spool and hub (TLS) serve alice and bob.

- The official MCP TypeScript SDK (tests/mcp/hub.mjs: Client +
  StreamableHTTPClientTransport of @modelcontextprotocol/sdk, the version
  pinned in tests/mcp/package.json): bob lists the tools and sends to
  alice; alice (her own token) gets notifications/resources/list_changed
  on her session's stream, finds the handoff in her inbox and takes it
  with its context; bob's handoff_status says consumed; alice reports her
  result.  A wrong token (401), another agent's handoff (take, complete)
  and another agent's session (404) are refused.  The same scenario runs
  through handoffctl mcp (StdioClientTransport) and gives the same
  answers, step by step.
- Each rule of the transport as the specification words it, raw over
  http.client, naming its section.
- The bounds: sessions per token, the idle timeout, the message size; a
  flood of one token's streams and calls does not stall another token;
  the hub stops cleanly with a stream open.

Skipped (and says so) only when node or the SDK cannot be had."""

import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check, HANDOFFCTL, SRC  # noqa: E402

MCP_DIR = os.path.join(SRC, "tests", "mcp")
SDK = os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
SESSIONS = 3


def ok(what):
    print(f"ok: {what}")


class Mcp:
    """One client of /mcp, raw: (status, headers, body) of each request."""

    def __init__(self, hub, agent, token=None):
        self.hub = hub
        self.token = token or hub.tokens[agent]
        self.sid = None
        self.n = 0

    def headers(self, extra=None, session=True, version=True, token=None):
        h = {"Content-Type": "application/json", "Accept": ACCEPT,
             "Authorization": f"Bearer {token or self.token}"}
        if session and self.sid:
            h["Mcp-Session-Id"] = self.sid
        if version and self.sid:
            h["MCP-Protocol-Version"] = VERSION
        h.update(extra or {})
        return {k: v for k, v in h.items() if v is not None}

    def send(self, method="POST", body=None, **kw):
        c = self.hub.connect()
        try:
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            c.request(method, "/mcp", data, self.headers(**kw))
            r = c.getresponse()
            raw = r.read()
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = raw
            return r.status, {k.lower(): v for k, v in r.getheaders()}, parsed
        finally:
            c.close()

    def request(self, method, params=None, **kw):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            msg["params"] = params
        return self.send(body=msg, **kw)

    def initialize(self, **kw):
        st, hd, ans = self.request("initialize", {
            "protocolVersion": VERSION, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}, session=False, **kw)
        check(st == 200 and "result" in ans, f"initialize: {st} {ans}")
        self.sid = hd.get("mcp-session-id")
        self.send(body={"jsonrpc": "2.0", "method": "notifications/initialized"})
        return ans["result"]

    def call(self, tool, args=None, **kw):
        st, _, ans = self.request("tools/call", {"name": tool, "arguments": args or {}}, **kw)
        check(st == 200 and "result" in ans, f"{tool}: {st} {ans}")
        return ans["result"]

    def stream(self, last_event_id=None):
        """The session's GET stream: (connection, response)."""
        c = self.hub.connect(timeout=30 * hdtest.SLOW)
        h = self.headers({"Accept": "text/event-stream", "Content-Type": None,
                          "Last-Event-ID": last_event_id})
        c.request("GET", "/mcp", None, h)
        return c, c.getresponse()


def sse_event(r):
    """The next SSE event of r (comments skipped): {"id":..., "data":...}."""
    ev = {}
    while True:
        line = r.readline()
        if not line:
            return None
        line = line.decode().rstrip("\r\n")
        if line.startswith(":"):
            continue
        if not line:
            if ev:
                return ev
            continue
        k, _, v = line.partition(":")
        ev[k] = v[1:] if v.startswith(" ") else v


def sdk(env, hub, conf):
    node = shutil.which("node")
    if not node:
        hdtest.skip_part("nodejs", "the SDK half (node is not installed)")
        return
    if not os.path.exists(SDK):
        hdtest.skip_part("npm", "the SDK half (no " + SDK + ")")
        return
    pinned = json.load(open(os.path.join(MCP_DIR, "package.json")))["dependencies"]["@modelcontextprotocol/sdk"]
    have = json.load(open(SDK))["version"]
    check(have == pinned, f"installed SDK {have} is the pinned {pinned} (run npm ci in tests/mcp)")
    url = f"https://127.0.0.1:{hub.port}/mcp"
    p = subprocess.run([node, os.path.join(MCP_DIR, "hub.mjs"), url,
                        json.dumps({"alice": hub.tokens["alice"], "bob": hub.tokens["bob"]}),
                        HANDOFFCTL, conf],
                       capture_output=True, text=True, timeout=300 * hdtest.SLOW, cwd=MCP_DIR,
                       env=dict(os.environ, HD_SLOW=str(hdtest.SLOW), NODE_EXTRA_CA_CERTS=hub.cert))
    sys.stdout.write(p.stdout)
    check(p.returncode == 0, f"hub.mjs exited {p.returncode}:\n{p.stderr[-4000:]}")
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    for hid in (summary["handoff_id"], summary["stdio_handoff_id"]):
        archived = [n for n in env.items("archive") if n.endswith(f"-{hid}.json")]
        check(len(archived) == 1, f"one archived item for {hid}: {env.names('archive')}")
        result = json.load(open(env.path("archive", archived[0] + ".result")))
        check(result["agent"] == "alice" and result["status"] == "completed",
              f"alice's result beside it: {result}")
    ok(f"SDK {have}: {summary['checks']} checks; over /mcp alice was told "
       f"{summary['http_send_to_list_changed_ms']} ms after bob's handoff_send")


def rules(env, hub):
    bob = Mcp(hub, "bob")
    init = bob.initialize()
    check(init["protocolVersion"] == VERSION and init["serverInfo"]["name"] == "handoff-hubd",
          f"initialize: {init}")
    sid = bob.sid
    check(sid and all(0x21 <= ord(ch) <= 0x7e for ch in sid) and len(sid) >= 32,
          f"Session Management: the InitializeResult's answer carries Mcp-Session-Id, visible "
          f"ASCII: {sid!r}")
    ok("Session Management: initialize's answer names the session in Mcp-Session-Id")

    # Transports, Security Warning: Origin validated
    st, _, ans = bob.request("tools/list", extra={"Origin": "https://evil.example"})
    check(st == 403 and ans["error"] and ans.get("id") is None,
          f"Security Warning: an Origin not allowed is 403: {st} {ans}")
    ok("Security Warning: a present Origin not in [hub] mcp_origins is 403 Forbidden")
    st, _, ans = bob.request("tools/list", extra={"Origin": "https://agents.example"})
    check(st == 200 and len(ans["result"]["tools"]) == 5, f"an allowed Origin: {st} {ans}")
    ok("Security Warning: an Origin in [hub] mcp_origins is served")

    # Protocol Version Header
    st, _, ans = bob.request("tools/list", extra={"MCP-Protocol-Version": "2099-01-01"})
    check(st == 400, f"Protocol Version Header: an unsupported version: {st} {ans}")
    ok("Protocol Version Header: an unsupported MCP-Protocol-Version is 400 Bad Request")
    st, _, ans = bob.request("tools/list", extra={"MCP-Protocol-Version": "2024-11-05"})
    check(st == 400, f"Protocol Version Header: another version than agreed: {st} {ans}")
    ok("Protocol Version Header: a version other than the one negotiated is 400 (invalid)")
    st, _, ans = bob.request("tools/list", version=False)
    check(st == 200 and "result" in ans, f"Protocol Version Header: none: {st} {ans}")
    ok("Protocol Version Header: without it the server assumes 2025-03-26 and answers")

    # Session Management
    st, _, ans = bob.request("tools/list", session=False)
    check(st == 400, f"Session Management: no Mcp-Session-Id: {st} {ans}")
    ok("Session Management: a request without Mcp-Session-Id (not initialize) is 400")
    st, _, ans = bob.request("tools/list", extra={"Mcp-Session-Id": "0" * 32})
    check(st == 404, f"Session Management: an unknown session: {st} {ans}")
    ok("Session Management: a session id not (or no longer) known is 404 Not Found")
    alice = Mcp(hub, "alice")
    alice.initialize()
    st, _, _ = bob.request("tools/list", extra={"Mcp-Session-Id": alice.sid})
    check(st == 404, f"alice's session with bob's token: {st}")
    ok("a session belongs to its token's agent: alice's with bob's token is 404")
    st, _, _ = bob.request("initialize", {"protocolVersion": VERSION, "capabilities": {},
                                          "clientInfo": {"name": "raw", "version": "1"}})
    check(st == 400, f"initialize inside a session: {st}")
    ok("Session Management: initialize with Mcp-Session-Id is 400 (it starts a session)")

    # Sending Messages to the Server
    st, _, body = bob.send(body={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                 "params": {"requestId": 99}})
    check(st == 202 and body is None, f"Sending Messages: a notification: {st} {body}")
    ok("Sending Messages: a notification is 202 Accepted with no body")
    st, _, body = bob.send(body={"jsonrpc": "2.0", "id": 7, "result": {}})
    check(st == 202 and body is None, f"Sending Messages: a response: {st} {body}")
    ok("Sending Messages: a response is 202 Accepted with no body")
    st, hd, ans = bob.request("ping")
    check(st == 200 and hd["content-type"].startswith("application/json") and ans["result"] == {},
          f"Sending Messages: a request: {st} {hd} {ans}")
    ok("Sending Messages: a request is answered with Content-Type application/json")
    st, _, ans = bob.send(body=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    check(st == 400 and ans["error"]["code"] == -32600, f"a batch: {st} {ans}")
    ok("Sending Messages: the body is a single message; a batch is 400 with -32600")
    st, _, ans = bob.send(body=b"{not json")
    check(st == 400 and ans["error"]["code"] == -32700 and ans["id"] is None, f"no JSON: {st} {ans}")
    ok("Sending Messages: a body that is no JSON is 400 with -32700 and id null")
    st, _, _ = bob.request("ping", extra={"Accept": "text/html"})
    check(st == 406, f"Accept without application/json: {st}")
    ok("Sending Messages: an Accept that lists neither application/json nor */* is 406")
    st, _, _ = bob.request("ping", extra={"Content-Type": "text/plain"})
    check(st == 415, f"Content-Type text/plain: {st}")
    ok("Sending Messages: a body that is not application/json is 415")
    st, _, ans = bob.request("tools/list", token="not-a-token")
    check(st == 401, f"a wrong token: {st} {ans}")
    ok("Authorization: a token not in token_dir is 401")
    st, _, ans = Mcp(hub, "dave").request("initialize", {
        "protocolVersion": VERSION, "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}, session=False)
    check(st == 403 and "no inbox here" in ans["error"]["message"]
          and hub.state_dir not in ans["error"]["message"], f"dave, no [agent dave]: {st} {ans}")
    ok("a token whose agent is no [agent] here gets no session (403), and no path of ours")

    # Listening for Messages from the Server; Resumability and Redelivery
    c, r = alice.stream()
    check(r.status == 200 and r.getheader("Content-Type") == "text/event-stream",
          f"Listening: GET: {r.status} {r.getheaders()}")
    prime = sse_event(r)
    check(prime and prime.get("id") and not prime.get("data"), f"the priming event: {prime}")
    ok("Listening for Messages: GET opens text/event-stream; an event id with empty data first")
    c2, r2 = alice.stream()
    check(r2.status == 200, f"a second stream of one session: {r2.status}")
    check(sse_event(r) is None, "the first stream ends when a second opens")
    c.close()
    c, r = c2, r2
    prime = sse_event(r)
    ok("Multiple Connections: a session's messages go on one stream: a second GET takes over "
       "and the first ends")
    sent = bob.call("handoff_send", {"to_agent": "alice", "reason": "first"})
    check(not sent["isError"], f"bob sends: {sent}")
    ev = sse_event(r)
    check(ev and json.loads(ev["data"])["method"] == "notifications/resources/list_changed"
          and int(ev["id"]) > int(prime["id"]), f"the notification: {ev}")
    ok("the stream: list_changed when a handoff comes for the token's agent")
    last = ev["id"]
    c.close()
    # gone: the session stays; what came meanwhile is sent at the resume
    sent = bob.call("handoff_send", {"to_agent": "alice", "reason": "second"})
    hid = sent["structuredContent"]["handoff_id"]
    hdtest.wait_for(lambda: hid + ".json" in env.bootstraps("alice"), what="the second delivered")
    c, r = alice.stream(last_event_id=last)
    check(r.status == 200, f"resume: {r.status}")
    ev = sse_event(r)
    while ev and not ev.get("data"):
        ev = sse_event(r)
    check(ev and json.loads(ev["data"])["method"] == "notifications/resources/list_changed"
          and int(ev["id"]) > int(last), f"resumed: {ev}")
    c.close()
    ok("Resumability: GET with Last-Event-ID gets what came after that event")
    inbox = alice.call("handoff_inbox")
    check(len(inbox["structuredContent"]["handoffs"]) == 2, f"alice's inbox: {inbox}")
    st, _, _ = alice.send(method="GET", extra={"Accept": "text/event-stream",
                                               "Last-Event-ID": "x1"})
    check(st == 400, f"a Last-Event-ID that is not ours: {st}")
    ok("Resumability: a Last-Event-ID that is not one of ours is 400")

    # the end of a session
    st, _, _ = alice.send(method="DELETE")
    check(st == 200, f"DELETE: {st}")
    st, _, _ = alice.request("tools/list")
    check(st == 404, f"after DELETE: {st}")
    ok("Session Management: DELETE ends the session; its id is 404 after")


def bounds(env, hub):
    # sessions per token: the least recently used one without a stream goes
    ms = [Mcp(hub, "carol") for _ in range(SESSIONS + 1)]
    for m in ms:
        m.initialize()
    st, _, _ = ms[0].request("ping")
    check(st == 404, f"the oldest of {SESSIONS + 1} sessions: {st}")
    for m in ms[1:]:
        st, _, _ = m.request("ping")
        check(st == 200, f"a newer session: {st}")
    ok(f"bounds: {SESSIONS} sessions per token ([hub] mcp_sessions_per_token); the least "
       "recently used gives way")
    # ... unless each has a stream open: then a new one is refused
    streams = [m.stream() for m in ms[1:]]
    for c, r in streams:
        check(r.status == 200, f"carol's stream: {r.status}")
        sse_event(r)
    extra = Mcp(hub, "carol")
    st, hd, _ = extra.request("initialize", {"protocolVersion": VERSION, "capabilities": {},
                                             "clientInfo": {"name": "raw", "version": "1"}},
                              session=False)
    check(st == 429 and hd.get("retry-after"), f"a session over the bound: {st} {hd}")
    ok("bounds: with each session's stream open, one more session is 429 with Retry-After")

    # a flood of carol's calls does not stall alice's tools
    alice = Mcp(hub, "alice")
    alice.initialize()
    stop = time.monotonic() + 3 * hdtest.SLOW
    statuses = []

    def flood(m):
        while time.monotonic() < stop:
            st, _, _ = m.request("tools/call", {"name": "handoff_inbox", "arguments": {}})
            statuses.append(st)
    threads = [threading.Thread(target=flood, args=(ms[1 + i % SESSIONS],)) for i in range(12)]
    for t in threads:
        t.start()
    worst = 0.0
    while time.monotonic() < stop:
        t0 = time.monotonic()
        res = alice.call("handoff_inbox")
        worst = max(worst, time.monotonic() - t0)
        check(not res["isError"], f"alice's inbox: {res}")
    for t in threads:
        t.join()
    check(worst < 2.0 * hdtest.SLOW, f"alice's slowest call during carol's flood: {worst:.3f} s")
    ok(f"a flood from one token ({len(statuses)} calls from 12 threads, 3 streams held) does not "
       f"stall another's tools: alice's slowest {worst * 1000:.0f} ms")
    # DELETE ends a session and its stream with it
    for m, (c, r) in zip(ms[1:], streams):
        st, _, _ = m.send(method="DELETE")
        check(st == 200, f"DELETE carol's: {st}")
        check(sse_event(r) is None, "the stream of a session ended with DELETE ends")
        c.close()
    ok("Session Management: DELETE ends the session's stream too")

    # the message size: at most max_file_size
    # (its length said and the body held back behind "Expect: 100-continue":
    # the hub refuses it before the body, so a client still sending it
    # would race the hub's close)
    c = alice.hub.connect()
    try:
        c.putrequest("POST", "/mcp")
        for k, v in dict(alice.headers(), Expect="100-continue",
                         **{"Content-Length": str(300 * 1024)}).items():
            c.putheader(k, v)
        c.endheaders()
        r = c.getresponse()
        st, ans = r.status, r.read()
    finally:
        c.close()
    check(st == 413, f"a message over max_file_size: {st} {ans}")
    ok("bounds: a message over max_file_size is 413")

    # the idle timeout: an unused session ends
    # the idle timeout: an unused session ends (a look at /metrics ends
    # those past it, and does not use any)
    idle = Mcp(hub, "alice")
    idle.initialize()
    before = sessions(hub)
    hdtest.wait_for(lambda: sessions(hub) == 0, timeout=30 * hdtest.SLOW,
                    what="every idle session to end")
    st, _, _ = idle.request("ping")
    check(st == 404, f"an idle session: {st}")
    ok(f"bounds: a session unused past [hub] mcp_session_idle ends: 404, and "
       f"handoff_hub_mcp_sessions went from {before} to {sessions(hub)}")


def sessions(hub):
    st, text = hub.get("/metrics")
    for line in text.splitlines():
        if line.startswith("handoff_hub_mcp_sessions "):
            return int(line.split()[1])
    check(False, "no handoff_hub_mcp_sessions in /metrics")


def stop_with_stream(env, hub, proc):
    """The hub stops cleanly (exit 0: under the sanitizers, no report)
    with a session's stream open."""
    alice = Mcp(hub, "alice")
    alice.initialize()
    c, r = alice.stream()
    check(r.status == 200 and sse_event(r), "a stream open at the stop")
    logs = proc.logs
    rc = proc.stop()
    check(rc == 0, f"the hub exited {rc} at SIGTERM with a stream open:\n{logs()}")
    check(sse_event(r) is None, "the stream ended with the hub")
    c.close()
    ok("the hub stops with a stream open: the stream ends, exit 0")


def main():
    with hdtest.Env(agents=["alice", "bob", "carol"]) as env:
        hub = hubkit.Hub(env, tokens={"alice": None, "bob": None, "carol": None, "dave": None},
                         extra=("mcp_origins = https://agents.example, https://other.example\n"
                                f"mcp_sessions_per_token = {SESSIONS}\n"
                                f"mcp_session_idle = {4 * hdtest.SLOW}s\n"))
        text = open(hub.conf).read().replace("[spool]\n", "[spool]\nmax_file_size = 256K\n", 1)
        with open(hub.conf, "w") as f:
            f.write(text)
        env.start(conf=hub.conf)
        proc = hub.start()
        rules(env, hub)
        bounds(env, hub)
        sdk(env, hub, hub.conf)
        stop_with_stream(env, hub, proc)
    hdtest.finish("test_mcp_hub")


if __name__ == "__main__":
    hdtest.run(main)
