"""End-to-end kit for handoff-hubd: a TLS certificate made with openssl,
token files, a [hub] section for an hdtest.Env config, the hub started as
the real binary (it speaks the same NOTIFY_SOCKET protocol as handoffd),
and a stdlib HTTPS client speaking what gptme-voice's HandoffHubWriter
sends: POST /api/v1/handoffs/start, Bearer token, the signed document as
json.dumps(sort_keys=True, separators=(",", ":")).

    with hdtest.Env(agents=["alice"]) as env:
        hub = hubkit.Hub(env, tokens={"bob": "..."})
        d = env.start(conf=hub.conf)
        h = hub.start()
        status, answer = hub.post(hdproto.build("bob", "alice", env.key), "bob")
"""

import http.client
import json
import os
import secrets
import ssl
import subprocess

import hdtest
from natsrv import free_port  # noqa: F401  (one copy: a free loopback port)

HUBD = os.path.join(hdtest.BUILD, "handoff-hubd")


def make_cert(directory, name="hub"):
    """A self-signed certificate for 127.0.0.1 and localhost: (cert, key)."""
    cert = os.path.join(directory, name + ".crt")
    key = os.path.join(directory, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    os.chmod(key, 0o600)
    return cert, key


class Hub:
    def __init__(self, env, tokens=None, tls=True, extra="", port=None):
        self.env = env
        self.port = port or free_port()
        self.tls = tls
        self.token_dir = os.path.join(env.dir, "tokens")
        os.makedirs(self.token_dir, mode=0o750, exist_ok=True)
        self.tokens = {}
        for agent, tok in (tokens or {}).items():
            self.add_token(agent, tok)
        self.state_dir = os.path.join(env.dir, "hubstate")
        lines = ["[hub]", f"listen = 127.0.0.1:{self.port}",
                 f"token_dir = {self.token_dir}", f"state_dir = {self.state_dir}"]
        if tls:
            self.cert, self.key = make_cert(env.dir)
            lines += [f"tls_cert = {self.cert}", f"tls_key = {self.key}"]
        self.section = "\n".join(lines) + "\n" + extra
        self.conf = env.write_config("d0", extra=env.extra + "\n" + self.section)
        self.proc = None

    def add_token(self, agent, tok=None):
        tok = tok or secrets.token_urlsafe(32)
        path = os.path.join(self.token_dir, agent + ".token")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(tok + "\n")
        self.tokens[agent] = tok
        return tok

    def run_as(self, uid, gid):
        """The hub to run as user uid, primary group gid (the spool's, as
        handoff-hubd.sysusers makes it) and no other, in an
        Env(shared=True) with hdtest.Deployed: its tokens and state_dir
        become its own, as packaged."""
        for p in (self.token_dir, self.state_dir):
            os.makedirs(p, mode=0o750, exist_ok=True)
            os.chown(p, uid, gid)
        for n in os.listdir(self.token_dir):
            os.chown(os.path.join(self.token_dir, n), uid, gid)
        self.user = (uid, gid)

    def start(self, name="hub", wait=True, args=("-v",), env_vars=None):
        argv = [HUBD, "-f", *args, "-c", self.conf]
        user = getattr(self, "user", None)
        if user:
            argv = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups",
                    self.env.for_others(HUBD), *argv[1:]]
        old = os.umask(0) if user else None     # a NOTIFY_SOCKET it may send to
        try:
            d = hdtest.Daemon(self.env, self.conf, name, env_vars=env_vars, argv=argv)
        finally:
            if user:
                os.umask(old)
        self.env.daemons.append(d)
        if wait:
            d.wait_message("READY=1")
        self.proc = d
        return d

    def context(self):
        ctx = ssl.create_default_context(cafile=self.cert)
        return ctx

    def connect(self, timeout=30):
        if self.tls:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                               context=self.context())
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, conn=None):
        """(status, parsed JSON or text); conn kept open when given."""
        c = conn or self.connect()
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            try:
                return r.status, json.loads(data)
            except ValueError:
                return r.status, data.decode(errors="replace")
        finally:
            if conn is None:
                c.close()

    def post(self, doc, agent=None, token=None, ctype="application/json", raw=None,
             conn=None, query=""):
        """What HandoffHubWriter sends."""
        body = raw if raw is not None else json.dumps(
            doc, sort_keys=True, separators=(",", ":")).encode()
        headers = {}
        if ctype:
            headers["Content-Type"] = ctype
        tok = token if token is not None else (self.tokens.get(agent) if agent else None)
        if tok:
            headers["Authorization"] = f"Bearer {tok}"
        return self.request("POST", "/api/v1/handoffs/start" + query, body, headers, conn)

    def get(self, path, agent=None, conn=None):
        headers = {}
        if agent:
            headers["Authorization"] = f"Bearer {self.tokens[agent]}"
        return self.request("GET", path, None, headers, conn)
