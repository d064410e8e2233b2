"""handoff-hubd's listening socket, three ways:

- socket activation: a listening TCP socket passed as fd 3 with
  LISTEN_FDS=1 and LISTEN_PID = the hub's pid (sd_listen_fds(3)): served,
  [hub] listen is not used (its port stays free);
- LISTEN_PID naming another process: the passed fd is not taken;
- listen = unix:PATH, plain HTTP (a reverse proxy's side), tokens from
  token_dir = credential: ($CREDENTIALS_DIRECTORY): served, and a handoff
  posted there is delivered.
"""

import http.client
import json
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def activated(env, hub, listen_pid_self=True):
    """Start the hub with a passed socket; returns (Daemon, port)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    port = s.getsockname()[1]
    fd = s.fileno()

    def to_fd3():
        os.dup2(fd, 3)
        os.set_inheritable(3, True)

    pid_expr = "$$" if listen_pid_self else "1"
    argv = ["sh", "-c", f'LISTEN_FDS=1 LISTEN_PID={pid_expr} exec "$0" -f -v -c "$1"',
            hubkit.HUBD, hub.conf]
    log = open(os.path.join(env.dir, "act.log"), "ab")
    e = dict(os.environ)
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=to_fd3,
                         pass_fds=(3,), env=e)
    s.close()
    return p, port, log


def main():
    with hdtest.Env(agents=["alice"]) as env:
        hub = hubkit.Hub(env, tokens={"bob": None})
        env.start(conf=hub.conf)

        p, port, log = activated(env, hub)
        try:
            hub.port = port
            hdtest.wait_for(lambda: _healthy(hub), 20, "the activated hub answers")
            doc = hdproto.build("bob", "alice", env.key)
            st, a = hub.post(doc, "bob")
            check(st == 200 and a.get("handoff_id") == doc["handoff_id"], f"activated: {st} {a}")
            hdtest.wait_for(lambda: doc["handoff_id"] + ".json" in env.bootstraps("alice"),
                            what="delivered through the passed socket")
            # The request threads serve as soon as they start, a moment
            # before the main thread logs where it listens.
            act = os.path.join(env.dir, "act.log")
            hdtest.wait_for(lambda: "the passed socket" in open(act).read(), 10,
                            lambda: f"the log to name the passed socket: {open(act).read()}")
            print("ok: socket activation: served on the passed socket")
        finally:
            p.terminate()
            p.wait(timeout=20)
            log.close()
        check(p.returncode == 0, f"SIGTERM: exit {p.returncode}")

        # LISTEN_PID of another process: fd 3 is not ours; [hub] listen is used.
        p, port, log = activated(env, hub, listen_pid_self=False)
        try:
            hub.port = int(open(hub.conf).read().split("listen = 127.0.0.1:")[1].split()[0])
            hdtest.wait_for(lambda: _healthy(hub), 20, "the hub answers on [hub] listen")
            print("ok: LISTEN_PID of another process: [hub] listen is used")
        finally:
            p.terminate()
            p.wait(timeout=20)
            log.close()

    with hdtest.Env(agents=["alice"]) as env:
        path = os.path.join(env.dir, "hub.sock")
        hub = hubkit.Hub(env, tokens={"bob": None}, tls=False)
        # and the tokens from systemd's credentials (LoadCredential=bob.token:...)
        creds = os.path.join(env.dir, "creds")
        os.rename(hub.token_dir, creds)
        conf = open(hub.conf).read().replace(f"listen = 127.0.0.1:{hub.port}", f"listen = unix:{path}")
        conf = conf.replace(f"token_dir = {hub.token_dir}", "token_dir = credential:")
        with open(hub.conf, "w") as f:
            f.write(conf)
        env.start(conf=hub.conf)
        hub.start(env_vars={"CREDENTIALS_DIRECTORY": creds})
        doc = hdproto.build("bob", "alice", env.key)
        c = UnixHTTP(path)
        c.request("POST", "/api/v1/handoffs/start", body=hdproto.dumps(doc),
                  headers={"Authorization": f"Bearer {hub.tokens['bob']}",
                           "Content-Type": "application/json"})
        r = c.getresponse()
        a = json.loads(r.read())
        c.close()
        check(r.status == 200 and a == {"status": "accepted", "handoff_id": doc["handoff_id"]},
              f"unix socket: {r.status} {a}")
        hdtest.wait_for(lambda: doc["handoff_id"] + ".json" in env.bootstraps("alice"),
                        what="delivered through the unix socket")
        print("ok: listen = unix:PATH, plain HTTP: served and delivered")


def _healthy(hub):
    try:
        st, _ = hub.get("/healthz")
        return st == 200
    except OSError:
        return False


if __name__ == "__main__":
    hdtest.run(main)
