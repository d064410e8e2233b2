"""A hostile A2A server costs handoffd bounded time and memory and a
clear error (issue 46, "Redirects"): one [remote NAME] a2a for each way
of misbehaving, all served by a small stdlib server in this test, each
remote its own handoff-a2a:

- slow: its answer one byte every 0.5 s; silent: never answers: each
  call ends at handoff-a2a's 30 s bound, a timeout in last_error;
- big: a Content-Length of 2 GB (not read at all), and bigchunked: a
  chunked body without end (stopped at 1 MiB); headers: header lines
  without end (stopped at 64 KiB): each "over ... bytes";
- malformed: 200 with a body that is not JSON;
- redirect: 307 to another origin, which never sees a request (nor the
  bearer token); the error names where it pointed.  Before, the 307 was
  final: the handoff rejected as remote_rejected "HTTP 307";
- notours: a task taken, then GetTask answered with another task,
  completed: not taken for ours, retried and said.  Before, the item was
  archived completed with the other task's artifact;
- streamline, streamflood: a card that says streaming (a2a = its URL),
  a task taken, and SubscribeToTask answered with an event stream
  without end: one data: line without end (an event over 1 MiB), or
  valid "working" events without end (a stream over 1 MiB).  Each stream
  is dropped at its size bound and the same ask goes on as a GetTask
  (the server sees one within 10 s of the SubscribeToTask; the stream's
  time bound is 20 s).

Nothing is rejected or archived while they misbehave, every helper's
peak memory stays under 64 MiB (and ASan's quarantine under SANITIZE=1), and each error is in status within its
bound (35 s for the two that time out, 10 s for the others)."""

import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

STOP = threading.Event()
SEEN_ELSEWHERE = []
STREAMS = ("streamline", "streamflood")
CALLS = {m: [] for m in STREAMS}   # the methods each stream server was asked
WANT = {
    "slow": ("timed out", 35), "silent": ("timed out", 35),
    "big": ("an answer over 1048576 bytes", 10), "bigchunked": ("an answer over 1048576 bytes", 10),
    "headers": ("headers over 65536 bytes", 10),
    "malformed": ("a body that is not JSON", 10),
    "redirect": ("HTTP 307 redirect to http://127.0.0.1:", 10),
    "notours": ("answered with task t-other: not ours", 10),
}


class Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        mode = self.path.strip("/")
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        try:
            if mode in STREAMS:
                CALLS[mode].append((body.get("method"), time.monotonic()))
                self.m_stream(mode, body)
            else:
                getattr(self, "m_" + mode)(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        mode = self.path.split("/")[1]
        port = self.server.server_address[1]
        card = {"name": mode, "description": "a stream without end", "version": "1",
                "supportedInterfaces": [{"url": f"http://127.0.0.1:{port}/{mode}",
                                         "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
                "capabilities": {"streaming": True}, "skills": []}
        self.reply(200, json.dumps(card).encode(), [("Content-Type", "application/json")])

    def m_stream(self, mode, body):
        m = body.get("method")
        task = {"id": "t-s", "contextId": (body.get("params", {}).get("message") or {})
                .get("contextId", "c"), "status": {"state": "TASK_STATE_WORKING"}}
        if m != "SubscribeToTask":
            res = {"tasks": []} if m == "ListTasks" else {"task": task} if m == "SendMessage" \
                else task
            self.reply(200, json.dumps({"jsonrpc": "2.0", "id": body.get("id"),
                                        "result": res}).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        ev = json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "result": {"task": task}})
        first = b"data: " if mode == "streamline" else f"data: {ev}\n\n".encode()
        more = b"x" * 65536 if mode == "streamline" else f"data: {ev}\n\n".encode() * 200
        self.wfile.write(b"%x\r\n%s\r\n" % (len(first), first))
        while not STOP.is_set():
            self.wfile.write(b"%x\r\n%s\r\n" % (len(more), more))

    def reply(self, code, data, headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def m_slow(self, body):
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        while not STOP.is_set():
            self.wfile.write(b" ")
            self.wfile.flush()
            time.sleep(0.5)

    def m_silent(self, body):
        STOP.wait(60)

    def m_big(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(2 * 1024 ** 3))
        self.end_headers()
        chunk = b"0" * 65536
        while not STOP.is_set():
            self.wfile.write(chunk)

    def m_bigchunked(self, body):
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b"10000\r\n" + b"[" * 65536 + b"\r\n"
        while not STOP.is_set():
            self.wfile.write(chunk)

    def m_headers(self, body):
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        line = b"X-Junk: " + b"a" * 1000 + b"\r\n"
        while not STOP.is_set():
            self.wfile.write(line)

    def m_malformed(self, body):
        self.reply(200, b'{"jsonrpc": "2.0", "result": {"task": {"id": "x"')

    def m_redirect(self, body):
        self.reply(307, b"", [("Location", f"http://127.0.0.1:{self.server.other}/a2a")])

    def m_notours(self, body):
        m = body.get("method")
        if m == "SendMessage":
            res = {"task": {"id": "t-ours", "contextId": body["params"]["message"].get("contextId"),
                            "status": {"state": "TASK_STATE_WORKING"}}}
        elif m == "ListTasks":
            res = {"tasks": []}
        else:
            res = {"id": "t-other", "contextId": "someone-else",
                   "status": {"state": "TASK_STATE_COMPLETED"},
                   "artifacts": [{"artifactId": "a", "parts": [{"text": "not yours"}]}]}
        self.reply(200, json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "result": res}).encode())


class Elsewhere(BaseHTTPRequestHandler):
    """The origin the redirect points at: it must see nothing."""

    def log_message(self, *a):
        pass

    def do_POST(self):
        SEEN_ELSEWHERE.append(dict(self.headers))
        self.send_response(500)
        self.end_headers()


def serve(handler):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def helpers_peak_kib(pid):
    peak = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        for c in open(f"/proc/{pid}/task/{t}/children").read().split():
            for line in open(f"/proc/{c}/status"):
                if line.startswith("VmHWM:"):
                    peak[int(c)] = int(line.split()[1])
    return peak


def main():
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)
        other = serve(Elsewhere)
        hostile = serve(Hostile)
        hostile.other = other.server_address[1]
        port = hostile.server_address[1]
        extra = "".join(f"[remote h{m}]\na2a = http://127.0.0.1:{port}/{m}\ntoken_file = {tf}\n"
                        for m in WANT)
        extra += "".join(f"[remote h{m}]\na2a = http://127.0.0.1:{port}/{m}/.well-known/"
                         f"agent-card.json\ntoken_file = {tf}\n" for m in STREAMS)
        conf = env.write_config("d0", extra=extra)
        d = env.start("d0", conf=conf)
        t0 = time.monotonic()
        for m in list(WANT) + list(STREAMS):
            hdproto.drop(env.spool, hdproto.build("bob", f"h{m}", env.key, ttl=600,
                                                  reason=f"for the {m} server"))
        seen = {}

        def errors():
            st = json.loads(env.ctl("status", "-c", conf, "--json").stdout)["a2a"]["remotes"]
            for m, (want, _) in WANT.items():
                e = st.get(f"h{m}", {}).get("last_error") or ""
                if m not in seen and want in e:
                    seen[m] = (time.monotonic() - t0, e)
            return len(seen) == len(WANT)
        try:
            hdtest.wait_for(errors, 45, "every hostile server's error in status")
        except hdtest.Fail:
            st = json.loads(env.ctl("status", "-c", conf, "--json").stdout)["a2a"]["remotes"]
            raise hdtest.Fail(f"errors seen {sorted(seen)}; status: "
                              f"{ {k: v.get('last_error') for k, v in st.items()} }\n"
                              f"rejected/ {[env.reason_of(n) for n in env.items('rejected')]}")
        for m, (want, bound) in WANT.items():
            at, e = seen[m]
            check(at <= bound * hdtest.SLOW, f"{m}: its error after {at:.1f}s, bound {bound}s: {e}")
            print(f"{m:10s} {at:5.1f}s  {e}")
        for m in STREAMS:
            # A2A 1.0 section 3.1.6: SubscribeToTask; the ask goes on as GetTask
            # when the stream passes its size bound, long before its 20-s one
            calls = CALLS[m]
            sub = next((t for c, t in calls if c == "SubscribeToTask"), None)
            get = next((t for c, t in calls if c == "GetTask" and sub and t > sub), None)
            check(sub and get and get - sub <= 10 * hdtest.SLOW,
                  f"{m}: no GetTask within 10 s of the stream: {calls}")
            print(f"{m:10s} {get - sub:5.1f}s  the stream dropped at its bound, then GetTask")
        peak = helpers_peak_kib(d.proc.pid)
        # ASan keeps what is freed in a quarantine of up to 256 MiB
        bound = (64 + (256 if hdtest.SANITIZE else 0)) * 1024
        check(len(peak) == len(WANT) + len(STREAMS) and max(peak.values()) < bound,
              f"the helpers' peak memory (KiB): {peak}")
        print(f"{len(peak)} helpers, peak memory at most {max(peak.values())} KiB")
        check(not SEEN_ELSEWHERE, f"the redirect's target was asked: {SEEN_ELSEWHERE}")
        check(not env.names("rejected") and not env.items("archive"),
              f"ended while the servers misbehave: rejected/ {env.names('rejected')}, "
              f"archive/ {env.items('archive')}")
        STOP.set()
        check(d.stop() == 0, "exit 0")
    hdtest.finish("hostile A2A servers: bounded time, bounded memory, a clear error each")


if __name__ == "__main__":
    hdtest.run(main)
