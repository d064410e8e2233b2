"""Two hosts for the relay tests: host a (agent bob, with [remote] alice and
gordon on host b) and host b (agents alice and gordon), each a real
handoffd with its own spool, one shared HMAC key, and real nats-server(s)
on loopback ports (tests/py/natsrv.py).  A consumer thread on b takes every
bootstrap the way an agent does (rename to a private name, read, delete) and
counts deliveries per handoff_id: "exactly once" is that count being 1 for
every id, nothing left, nothing rejected.

    with relaykit.Hosts() as h:
        a, b = h.start_a(), h.start_b()
        ids = h.drop(100)
        h.wait_delivered(ids)
"""

import json
import os
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
import natsrv  # noqa: E402
from hdtest import Fail, check  # noqa: E402

B_AGENTS = ["alice", "gordon"]


class Consumer(threading.Thread):
    """Takes bootstraps from b's agents' handoffs/ dirs; counts per id."""

    def __init__(self, env, agents):
        super().__init__(daemon=True)
        self.env = env
        self.agents = agents
        self.counts = {}
        self.running = True
        self.lock = threading.Lock()

    def run(self):
        while self.running:
            got = 0
            for a in self.agents:
                d = os.path.join(self.env.state[a], "handoffs")
                for n in invariant.published(d):
                    priv = os.path.join(d, f".consume.{os.getpid()}.t.{n}")
                    try:
                        os.rename(os.path.join(d, n), priv)
                    except FileNotFoundError:
                        continue
                    try:
                        with open(priv) as f:
                            hid = json.load(f).get("handoff_id")
                    except (OSError, ValueError):
                        hid = n[:-5]
                    os.unlink(priv)
                    with self.lock:
                        self.counts[hid] = self.counts.get(hid, 0) + 1
                    got += 1
            if not got:
                time.sleep(0.02)

    def total(self):
        with self.lock:
            return sum(self.counts.values())

    def stop(self):
        # no file of b's taken after this: its dir is removed next
        self.running = False
        self.join()


class Sampler(threading.Thread):
    """A daemon's relay status, every 50 ms: samples is [(time, *what(the
    status()["relay"] dict))], what returning a tuple of figures."""

    def __init__(self, d, what):
        super().__init__(daemon=True)
        self.d, self.what = d, what
        self.samples = []
        self.running = True

    def run(self):
        while self.running:
            try:
                self.samples.append((time.monotonic(), *self.what(self.d.status()["relay"])))
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)

    def stop(self):
        self.running = False
        self.join()


FINAL = ("consumed", "expired", "rejected", "canceled")
RESULTS = ("completed", "failed")
ARITY = {"owe": 2, "out": 4, "pub": 2, "sent": 2, "done": 1, "res": 2}

# Relayed messages that do not verify on b get a receipt only within b's
# flood guard (RELAY_UNVERIFIED_BURST, 100 at once, then 1 a second:
# test_relay_receipt_junk.py holds it); a batch that counts on a receipt for
# each keeps its unverified ones below it.
UNVERIFIED_MAX = 80


def fnv1a(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def journal_records(spool):
    """SPOOL/receipts/journal read as handoffd(8) FILES describes it: the
    whole records in order, each (kind, [fields]), and the count of bytes
    after the last whole one (a torn append)."""
    try:
        with open(os.path.join(spool, "receipts", "journal"), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return [], 0
    recs, off = [], 0
    while off < len(data):
        nl = data.find(b"\n", off)
        if nl < 0:
            break
        line = data[off:nl]
        body, _, total = line.rpartition(b" ")
        if len(total) != 16 or f"{fnv1a(body):016x}".encode() != total:
            break
        kind, _, rest = body.partition(b" ")
        n = ARITY.get(kind.decode(errors="replace"))
        fields = rest.split(b" ", n - 1) if n else []
        if not n or len(fields) != n or not all(fields):
            break
        recs.append((kind.decode(), [x.decode() for x in fields]))
        off = nl + 1
    return recs, len(data) - off


def journal_line(kind, *fields):
    """One record of the journal, as handoffd writes it."""
    body = " ".join([kind, *fields]).encode()
    return body + f" {fnv1a(body):016x}\n".encode()


def journal_append(spool, kind, *fields):
    with open(os.path.join(spool, "receipts", "journal"), "ab") as f:
        f.write(journal_line(kind, *fields))


def journal(spool):
    """The receipts' live state in SPOOL/receipts/journal: {"owed": {id:
    origin}, "queued": {"ID:OUTCOME": receipt}, "sent": {id: archive
    name}, "results": {id: origin}} (sent entries as recorded: the daemon
    drops those whose archived item is gone when it rewrites the file;
    results: consumed here, the result still owed to origin)."""
    st = {"owed": {}, "queued": {}, "sent": {}, "results": {}}
    for kind, f in journal_records(spool)[0]:
        if kind == "owe":
            st["owed"][f[0]] = f[1]
        elif kind == "out":
            st["queued"][f"{f[0]}:{f[1]}"] = f[3]
            if f[1] in FINAL:
                st["owed"].pop(f[0], None)
            if f[1] == "consumed":
                st["results"][f[0]] = f[2]
            elif f[1] in RESULTS:
                st["results"].pop(f[0], None)
        elif kind == "res":
            st["results"][f[0]] = f[1]
        elif kind == "pub":
            st["queued"].pop(f"{f[0]}:{f[1]}", None)
        elif kind == "sent":
            st["sent"][f[0]] = f[1]
        elif kind == "done":
            st["sent"].pop(f[0], None)
    return st


class Hosts:
    def __init__(self, nodes=1, fsync=True, start_nats=True, stream_replicas=None,
                 b_agents=B_AGENTS):
        self.b_agents = list(b_agents)
        self.a = hdtest.Env(agents=["bob"], fsync=fsync)
        self.b = hdtest.Env(agents=self.b_agents, fsync=fsync)
        # One key on both hosts: b verifies what a verified.
        shutil.copy(self.a.key_path, self.b.key_path)
        self.b.key = self.a.key
        self.ns = natsrv.Cluster(self.a.dir, nodes=nodes, start=False)
        try:
            if start_nats:
                self.ns.start()
        except Exception:
            self.ns.__exit__(None, None, None)
            self.a.__exit__(None, None, None)
            self.b.__exit__(None, None, None)
            raise
        self.replicas = stream_replicas or (3 if nodes == 3 else 1)
        self.consumer = Consumer(self.b, self.b_agents)
        self.consumer.start()
        self.da = self.db = None
        self.receipt_conf = {}

    def enable_receipts(self):
        """Receipts on both hosts: each its own Ed25519 host key made by
        `handoffctl keygen --ed25519` ([relay] host_key), the other's
        public key as HOST.pub in its host_pubkey_dir.  Returns the paths
        of the secret keys by host."""
        keys = {}
        for host, env in (("a", self.a), ("b", self.b)):
            keys[host] = os.path.join(env.dir, f"host-{host}.key")
            env.ctl("keygen", "--ed25519", "-o", keys[host], check_rc=0)
        for host, env, other in (("a", self.a, "b"), ("b", self.b, "a")):
            d = os.path.join(env.dir, "hostkeys")
            os.makedirs(d, exist_ok=True)
            os.chmod(d, 0o755)
            shutil.copy(os.path.join(os.path.dirname(keys[other]), f"host-{other}.pub"),
                        os.path.join(d, f"{other}.pub"))
            os.chmod(os.path.join(d, f"{other}.pub"), 0o644)
            self.receipt_conf[host] = [f"host_key = {keys[host]}", f"host_pubkey_dir = {d}"]
        return keys

    def receipts_of_a(self):
        """id -> the .outcome of each item archived as relayed on a."""
        return self.relayed_on_a()

    def relay_conf(self, host, remotes=()):
        lines = ["[relay]", f"servers = {self.ns.url}", f"host = {host}",
                 f"replicas = {self.replicas}"] + self.receipt_conf.get(host, []) + [""]
        for agent, h in remotes:
            lines += [f"[remote {agent}]", f"host = {h}", ""]
        return "\n".join(lines) + "\n"

    def start_a(self, wait=True, name="a", env_vars=None):
        self.da = self.a.start(name=name, wait=wait, env_vars=env_vars,
                               extra=self.a.extra + self.relay_conf("a", [(x, "b") for x in self.b_agents]))
        return self.da

    def start_b(self, wait=True, name="b", env_vars=None):
        self.db = self.b.start(name=name, wait=wait, env_vars=env_vars,
                               extra=self.b.extra + self.relay_conf("b"))
        return self.db

    def start_with_hub(self, completes=None, extra=""):
        """Receipts on; a hub on a for bob (no TLS; extra: its [hub]
        lines); both daemons and the hub started, the relays ready:
        (a, b, hub).  completes: b's agent whose results go back (its
        handoffs left for the test to take), or None (nobody takes them
        on b)."""
        import hubkit
        self.enable_receipts()
        self.consumer.agents = []
        if completes:
            self.b.extra += f"[agent {completes}]\ncompletes = yes\n"
        hub = hubkit.Hub(self.a, tokens={"bob": None}, tls=False, extra=extra)
        self.a.extra = self.a.extra + "\n" + hub.section
        a, b = self.start_a(), self.start_b()
        hub.conf = a.conf
        hub.start()
        wait_ready(a, b)
        return a, b, hub

    def drop(self, n, agents=B_AGENTS, ttl=600, rate=None):
        ids = []
        t0 = time.monotonic()
        for i in range(n):
            doc = hdproto.build("bob", agents[i % len(agents)], self.a.key, ttl=ttl)
            hdproto.drop(self.a.spool, doc)
            ids.append(doc["handoff_id"])
            if rate:
                delay = t0 + (i + 1) / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        return ids

    def relayed_on_a(self):
        """ids archived as relayed on a (from the .outcome sidecars)."""
        out = {}
        for n in self.a.names("archive"):
            if n.endswith(".outcome"):
                with open(self.a.path("archive", n)) as f:
                    o = json.load(f)
                if o.get("outcome") == "relayed":
                    out[o["handoff_id"]] = o
        return out

    def wait_delivered(self, ids, timeout=120):
        n = len(ids)
        hdtest.wait_for(lambda: self.consumer.total() >= n and
                        self.a.count("outbox") == 0 and self.a.count("handoff") == 0,
                        timeout=timeout, what=f"{n} delivered on b and relayed from a "
                        f"(delivered {self.consumer.total()}, a outbox {self.a.count('outbox')})")

    def check_exactly_once(self, ids, settle=1.0, rejected_on_a=()):
        """Every id delivered once on b, archived relayed on a; nothing
        lost, nothing twice, nothing rejected on either host."""
        time.sleep(settle)  # a second delivery would show up by now
        c = dict(self.consumer.counts)
        missing = [i for i in ids if c.get(i, 0) == 0]
        twice = {i: k for i, k in c.items() if k > 1}
        extra = set(c) - set(ids)
        check(not missing, f"{len(missing)} lost on b, e.g. {missing[:3]}")
        check(not twice, f"{len(twice)} delivered more than once on b: {list(twice.items())[:3]}")
        check(not extra, f"unknown ids delivered on b: {list(extra)[:3]}")
        rel = self.relayed_on_a()
        not_rel = [i for i in ids if i not in rel]
        check(not not_rel, f"{len(not_rel)} not archived as relayed on a, e.g. {not_rel[:3]}")
        rej_a = [n for n in self.a.items("rejected") if n not in rejected_on_a]
        check(rej_a == [], f"rejected on a: {rej_a[:4]}")
        check(self.b.names("rejected") == [], f"rejected on b: {self.b.names('rejected')[:4]}")
        check(self.a.count("outbox") == 0, "a's outbox/ is empty")
        return len(ids)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        # the servers stopped and both temp dirs removed whatever fails here
        try:
            self.consumer.stop()
            for d in self.a.daemons + self.b.daemons:
                if d.proc.poll() is None:
                    d.proc.kill()
                    d.proc.wait()
            if et is not None:
                for n in self.ns.nodes:
                    p = os.path.join(n.dir, "server.log")
                    if os.path.exists(p):
                        sys.stdout.write(f"---- {n.name} server.log (tail) ----\n"
                                         f"{open(p).read()[-3000:]}\n")
        finally:
            try:
                self.ns.__exit__(et, ev, tb)
            finally:
                try:
                    self.b.__exit__(et, ev, tb)
                finally:
                    self.a.__exit__(et, ev, tb)
        return False


def relay_ready(d):
    """Whether d's relay is connected and set up (status relay.ready)."""
    return bool((d.status().get("relay") or {}).get("ready"))


def wait_ready(a, b, timeout=20):
    """Both daemons' relays ready."""
    hdtest.wait_for(lambda: relay_ready(a) and relay_ready(b), timeout, "both relays ready")


def receipt_status(d):
    """d's status relay.receipts ({} without a relay)."""
    return (d.status().get("relay") or {}).get("receipts") or {}


def skip_without_nats():
    if not natsrv.available():
        hdtest.skip("nats-server", "the relay tests start real servers")


__all__ = ["Hosts", "Consumer", "Sampler", "Fail", "check", "skip_without_nats"]


def receipt_messages(tap, ids, outcome):
    """The receipts of ids with outcome that a natsrv.Tap on
    handoff.ORIGIN.receipt.> saw, as (the signed message, the receipt in
    it): a single receipt is its own message, a batch's (type
    handoff-receipts) is one of its receipts (handoffd(8), RELAY)."""
    out = []
    for _, _, data in tap.taken():
        m = json.loads(data)
        for r in m["receipts"] if m.get("type") == "handoff-receipts" else [m]:
            if r.get("handoff_id") in ids and r.get("outcome") == outcome:
                out.append((m, r))
    return out
