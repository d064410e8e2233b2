"""Real nats-server processes for the relay tests, stdlib only: one server
or a 3-node JetStream cluster on free loopback ports, each with its own
store dir (-js -sd), and a minimal NATS client (publish with headers, one
request) to talk to them independently of handoffd.

    with natsrv.Cluster(tmpdir, nodes=1) as ns:
        ns.url                      # "nats://127.0.0.1:PORT"
        natsrv.Client(ns.urls[0]).publish("handoff.b.alice", data, msg_id="x")
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


def available():
    return os.access(NATS_SERVER, os.X_OK)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Node:
    def __init__(self, base, name, cluster_ports=None, index=0, conf_extra="", jetstream=True):
        self.name = name
        self.dir = os.path.join(base, name)
        os.makedirs(self.dir, exist_ok=True)
        self.cluster_ports = cluster_ports
        self.index = index
        self.conf_extra = conf_extra
        self.jetstream = jetstream
        self.conf = os.path.join(self.dir, "nats.conf")
        self.proc = None
        self.log = None
        self.came_up = False    # once up, or its url handed out, its ports
        self.url_read = False   # are the clients': kept
        self._new_ports()

    def _new_ports(self):
        """Free loopback ports and the config that names them.  A port
        found free may be taken by another test before the server binds
        it: wait_healthy() then picks again, while no client has its url
        (came_up, url_read)."""
        self.port = free_port()
        self.http = free_port()
        lines = [f'server_name: "{self.name}"', "listen: 127.0.0.1:%d" % self.port,
                 "http: 127.0.0.1:%d" % self.http]
        if self.jetstream:
            lines.append('jetstream { store_dir: "%s" }' % os.path.join(self.dir, "js"))
        if self.cluster_ports:
            routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in self.cluster_ports)
            lines.append('cluster { name: "hd", listen: "127.0.0.1:%d", routes: [%s] }'
                         % (self.cluster_ports[self.index], routes))
        if self.conf_extra:
            lines.append(self.conf_extra)     # e.g. "max_payload: 8MB"
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    @property
    def url(self):
        self.url_read = True
        return f"nats://127.0.0.1:{self.port}"

    def start(self, wait=True):
        self.log = open(os.path.join(self.dir, "server.log"), "ab")
        self.proc = subprocess.Popen([NATS_SERVER, "-c", self.conf], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        return self.wait_healthy() if wait else self

    def wait_healthy(self, timeout=30):
        """/healthz answers 200 (in a cluster: once JetStream is up)."""
        deadline = time.monotonic() + timeout
        retries = 5
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = open(os.path.join(self.dir, "server.log")).read()
                if not (self.came_up or self.url_read) and retries > 0 and "address already in use" in log[-500:]:
                    retries -= 1        # a port taken since it was found free
                    self.log.close()
                    self._new_ports()
                    self.start(wait=False)
                    continue
                raise RuntimeError(f"nats-server {self.name} exited {self.proc.returncode}:\n"
                                   + log[-3000:])
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/healthz", timeout=1):
                    self.came_up = True
                    return self
            except Exception:
                time.sleep(0.05)
        raise RuntimeError(f"nats-server {self.name} did not come up")

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.running():
            self.proc.send_signal(sig)
            self.proc.wait(20)
        if self.log:
            self.log.close()
            self.log = None

    def jsz(self):
        url = f"http://127.0.0.1:{self.http}/jsz?streams=true&consumers=true&config=true"
        with urllib.request.urlopen(url, timeout=5) as f:
            return json.load(f)


def streams(jsz):
    """The stream_detail entries of a /jsz answer (None: none)."""
    for acc in (jsz or {}).get("account_details", []):
        yield from acc.get("stream_detail", [])


class Cluster:
    """nodes=1: one server; nodes=3: a JetStream cluster; jetstream=False:
    a plain NATS server, as one started without -js."""

    def __init__(self, base, nodes=1, start=True, conf_extra="", jetstream=True):
        self.base = os.path.join(base, "nats")
        cports = [free_port() for _ in range(nodes)] if nodes > 1 else None
        self.nodes = [Node(self.base, f"n{i + 1}", cports, i, conf_extra, jetstream)
                      for i in range(nodes)]
        if start:
            self.start()

    def start(self):
        for n in self.nodes:
            n.start(wait=False)
        for n in self.nodes:
            n.wait_healthy()
        return self

    @property
    def urls(self):
        return [n.url for n in self.nodes]

    @property
    def url(self):
        return ", ".join(self.urls)

    def jsz_live(self):
        """(node, its /jsz) for each running node; (node, None) when it does
        not answer."""
        for n in self.nodes:
            if not n.running():
                continue
            try:
                j = n.jsz()
            except Exception:
                j = None
            yield n, j

    def stream_leader(self, stream="HANDOFF"):
        """The server name leading stream (a cluster), from a live node's /jsz."""
        for _, j in self.jsz_live():
            for s in streams(j):
                if s.get("name") == stream:
                    leader = (s.get("cluster") or {}).get("leader")
                    if leader:
                        return leader
        return None

    def consumer_leader(self, name):
        """The server leading consumer name's group, from a live node's /jsz."""
        for _, j in self.jsz_live():
            for st in streams(j):
                for c in st.get("consumer_detail") or []:
                    leader = (c.get("cluster") or {}).get("leader")
                    if c.get("name") == name and leader:
                        return leader
        return None

    def groups_current(self, stream="HANDOFF"):
        """The streams' and their consumers' Raft groups, each seen from its
        leader: every replica current (a restarted node caught up), stream's
        with its two followers (R3).  False while a live node does not answer."""
        n_stream, lagging = 0, []
        for node, j in self.jsz_live():
            if j is None:
                return False
            for st in streams(j):
                groups = [(st.get("name"), st.get("cluster") or {})]
                groups += [(c.get("name"), c.get("cluster") or {}) for c in st.get("consumer_detail") or []]
                for k, (name, cl) in enumerate(groups):
                    if cl.get("leader") != node.name:
                        continue
                    reps = cl.get("replicas") or []
                    if k == 0 and st.get("name") == stream:
                        n_stream += len(reps) == 2
                    lagging += [f"{name}@{r.get('name')}" for r in reps if not r.get("current")]
        return n_stream == 1 and not lagging

    def consumers_drained(self):
        """Every consumer, seen from its leader: nothing left to deliver,
        nothing delivered and not acked.  Returns {name: (0, 0)}, or None
        (not yet, or a live node does not answer)."""
        seen = {}
        for node, j in self.jsz_live():
            if j is None:
                return None
            for st in streams(j):
                for c in st.get("consumer_detail") or []:
                    if (c.get("cluster") or {}).get("leader") == node.name:
                        seen[c.get("name")] = (c.get("num_pending"), c.get("num_ack_pending"))
        return seen if seen and all(v == (0, 0) for v in seen.values()) else None

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def stop(self):
        for n in self.nodes:
            n.kill(signal.SIGTERM)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        for n in self.nodes:
            try:
                n.kill()
            except Exception:
                pass
        return False


class Client:
    """The NATS text protocol, enough to publish (with headers) and make a
    request: an independent way onto the stream, not handoffd's code."""

    def __init__(self, url, timeout=5.0):
        host, port = url.replace("nats://", "").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.buf = b""
        self.info = json.loads(self._line()[5:])
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,'
                          b'"no_responders":true,"protocol":1}\r\nPING\r\n')
        while self._line() != b"PONG":
            pass
        self.sid = 0

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _read(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def request(self, subject, data=b"", headers=None, timeout=5.0):
        """One request; returns (headers bytes, payload bytes) of the reply."""
        self.sid += 1
        inbox = f"_INBOX.t{os.getpid()}.{self.sid}"
        self.sock.sendall(f"SUB {inbox} {self.sid}\r\n".encode())
        if headers:
            hdr = b"NATS/1.0\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items()) + b"\r\n"
            self.sock.sendall(f"HPUB {subject} {inbox} {len(hdr)} {len(hdr) + len(data)}\r\n".encode()
                              + hdr + data + b"\r\n")
        else:
            self.sock.sendall(f"PUB {subject} {inbox} {len(data)}\r\n".encode() + data + b"\r\n")
        self.sock.settimeout(timeout)
        while True:
            line = self._line()
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
                continue
            parts = line.split()
            if parts and parts[0] == b"MSG":
                return b"", self._read(int(parts[-1]))
            if parts and parts[0] == b"HMSG":
                hlen, tlen = int(parts[-2]), int(parts[-1])
                raw = self._read(tlen)
                return raw[:hlen], raw[hlen:]
            if parts and parts[0] == b"-ERR":
                raise RuntimeError(line.decode())

    def js_publish(self, subject, data, msg_id=None):
        """A JetStream publish; returns the PubAck as a dict."""
        h, body = self.request(subject, data, {"Nats-Msg-Id": msg_id} if msg_id else None)
        if not body:
            raise RuntimeError(f"no PubAck (headers {h!r})")
        return json.loads(body)

    def js_api(self, what, body=None):
        _, resp = self.request(f"$JS.API.{what}", json.dumps(body or {}).encode())
        return json.loads(resp)

    def close(self):
        self.sock.close()


class Tap(threading.Thread):
    """A core subscription on subject (wildcards as NATS has them): every
    message published there, JetStream's or not, as (subject, headers
    bytes, data bytes) in .msgs, in the order they came."""

    def __init__(self, url, subject):
        super().__init__(daemon=True)
        self.cl = Client(url)
        self.msgs = []
        self.lock = threading.Lock()
        self.cl.sock.sendall(f"SUB {subject} 1\r\nPING\r\n".encode())
        while self.cl._line() != b"PONG":
            pass
        self.cl.sock.settimeout(None)
        self.start()

    def run(self):
        try:
            while True:
                line = self.cl._line()
                parts = line.split()
                if line == b"PING":
                    self.cl.sock.sendall(b"PONG\r\n")
                elif parts and parts[0] == b"MSG":
                    m = (parts[1].decode(), b"", self.cl._read(int(parts[-1])))
                    with self.lock:
                        self.msgs.append(m)
                elif parts and parts[0] == b"HMSG":
                    hlen, tlen = int(parts[-2]), int(parts[-1])
                    raw = self.cl._read(tlen)
                    with self.lock:
                        self.msgs.append((parts[1].decode(), raw[:hlen], raw[hlen:]))
        except (OSError, ConnectionError):
            pass

    def taken(self):
        with self.lock:
            return list(self.msgs)

    def close(self):
        try:
            self.cl.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.cl.close()
