"""The A2A server of the outward tests: tests/a2a/server.mjs, built with
the official SDK's server classes (@a2a-js/sdk/server, express), run as a
child of the test on loopback."""

import json
import os
import shutil
import signal
import subprocess

import hdtest
from hdtest import check

SRC = os.environ.get("HD_SRC", ".")
A2A_DIR = os.path.join(SRC, "tests", "a2a")
SERVERS = []


def need_sdk():
    """node and tests/a2a's packages (make a2a-deps) are there, or fail."""
    check(shutil.which("node") is not None, "node is not installed")
    check(os.path.isdir(os.path.join(A2A_DIR, "node_modules", "@a2a-js", "sdk")) and
          os.path.isdir(os.path.join(A2A_DIR, "node_modules", "express")),
          "tests/a2a/node_modules lacks @a2a-js/sdk or express: make a2a-deps")


def token_file(env):
    """A fresh token and the file handoffd reads it from (mode 0600):
    (token, path)."""
    token = "t0k-" + os.urandom(8).hex()
    path = os.path.join(env.dir, "remote.token")
    with open(path, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token, path


class Server:
    """The SDK server; stop_all() at the test's end stops it whatever
    happened (a server left running keeps the test's output open)."""

    def __init__(self, env, port, token, log, parts=None, **knobs):
        args = {"port": port, "token": token, "log": log}
        if parts:
            args["parts"] = parts   # each message's parts, a JSON line each
        args.update(knobs)          # server.mjs's knobs: sends, answer_delay_ms, ...
        self.sends_log = knobs.get("sends")
        self.calls_log = knobs.get("calls")
        self.args = json.dumps(args)
        self.log = log
        self.parts = parts
        self.proc = None
        self.env = env

    def start(self):
        self.proc = subprocess.Popen(["node", os.path.join(A2A_DIR, "server.mjs"), self.args],
                                     stdout=subprocess.PIPE, cwd=A2A_DIR, text=True,
                                     stderr=open(self.log + ".stderr", "a"))
        SERVERS.append(self.proc)
        line = self.proc.stdout.readline()
        check(line.strip() == "listening", f"the SDK server did not start: {line!r}")

    def stop(self):
        # SIGTERM: the listener closes, requests in flight end first
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)

    def ids(self):
        """The messageIds its executor ran, in order (kept over restarts)."""
        try:
            with open(self.log) as f:
                return [line.strip() for line in f if line.strip()]
        except FileNotFoundError:
            return []


    def sends(self):
        """[{messageId, contextId, idempotencyKey}] of each SendMessage it
        was sent, with sends= given."""
        try:
            with open(self.sends_log) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def calls(self):
        """[{method, id, t}] of each JSON-RPC call, with calls= given."""
        try:
            with open(self.calls_log) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def messages(self):
        """[(messageId, parts)] of each message its executor ran, with
        parts= given."""
        try:
            with open(self.parts) as f:
                return [(m["messageId"], m["parts"]) for m in map(json.loads, f) if m]
        except FileNotFoundError:
            return []


def stop_all():
    for proc in SERVERS:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def wait_code(env, conf, hid, timeout="40"):
    """handoffctl wait --json: (exit code, its item, the process)."""
    p = env.ctl("wait", "-c", conf, hid, "--timeout", timeout, "--json")
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else {}), p


def run(main):
    """hdtest.run(main), the servers stopped after it."""
    def main_then_stop():
        try:
            main()
        finally:
            stop_all()
    hdtest.run(main_then_stop)
