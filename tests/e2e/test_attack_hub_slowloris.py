"""Attack (issue 34, 3): clients without a token lock the hub.

The attacker, a process of its own, holds the hub's whole connection table:
256 connections (max_connections) from 8 loopback addresses, 32 each
(max_per_address), each through TLS and then one header byte every 3 s,
so never silent for [hub] timeout (10 s) and never a whole request; a
connection the hub closes is opened again at the next beat.

- bob's POST, from a ninth address and from one of the attacker's, is
  answered (200 accepted) within 2 s each: when the table is full the
  oldest connection that has not sent its headers makes room;
- [hub] request_timeout (2 s here): a client sending a header byte every
  0.25 s, and bob sending his body a byte every 0.25 s after whole
  headers, are cut at the deadline, though never silent; a normal POST
  on that hub is answered.

HD_SLOWLORIS_SECONDS=N keeps the attack on for N s with bob posting every
second (default: the three posts only)."""

import http.client
import os
import re
import selectors
import socket
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

CONNS = 256
ADDRS = [f"127.0.0.{i}" for i in range(2, 10)]  # 8 addresses, 32 each
BEAT = 3.0              # s between an attacker's header bytes
TARGET = 2.0            # s: bob's POST answered within this
NO_ANSWER = 8.0         # s: bob's client gives up
DEADLINE = 2            # request_timeout of the second hub, s
HEAD = b"POST /api/v1/handoffs/start HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


# ---- the attacker (this file run with --slowloris) ----------------------

def slowloris(port, cafile, n, addrs, beat):
    """n connections over addrs, each sending the next byte of an endless
    header every beat s; one the hub closed is opened again at the next
    beat.  Says "up N" once all are open, then "beat OPEN CUT" each beat."""
    ctx = ssl.create_default_context(cafile=cafile)
    conns, sent, cut = [None] * n, [0] * n, 0
    sel = selectors.DefaultSelector()

    def open_one(i):
        s = socket.socket()
        try:
            s.bind((addrs[i % len(addrs)], 0))
            s.settimeout(5)
            s.connect(("127.0.0.1", port))
            t = ctx.wrap_socket(s, server_hostname="127.0.0.1")
            t.sendall(HEAD[:1])
        except OSError:
            s.close()
            return
        conns[i], sent[i] = t, 1
        sel.register(t.fileno(), selectors.EVENT_READ, i)

    def drop(i):
        nonlocal cut
        sel.unregister(conns[i].fileno())
        conns[i].close()
        conns[i] = None
        cut += 1

    for i in range(n):
        open_one(i)
    print(f"up {sum(c is not None for c in conns)}", flush=True)
    while True:
        t0 = time.monotonic()
        # what the hub closed (or answered: a request never ends here)
        for key, _ in sel.select(0):
            drop(key.data)
        for i in range(n):
            if conns[i] is None:
                open_one(i)
                continue
            b = HEAD[sent[i]:sent[i] + 1] or b"a"
            try:
                conns[i].sendall(b)
                sent[i] += 1
            except OSError:
                drop(i)
        print(f"beat {sum(c is not None for c in conns)} {cut}", flush=True)
        time.sleep(max(0.0, beat - (time.monotonic() - t0)))


# ---- the test ------------------------------------------------------------

class Attacker:
    def __init__(self, hub):
        self.p = subprocess.Popen([sys.executable, "-B", os.path.abspath(__file__), "--slowloris",
                                   str(hub.port), hub.cert, str(CONNS), ",".join(ADDRS),
                                   str(BEAT)], stdout=subprocess.PIPE, text=True)
        self.last = ""

    def wait_up(self):
        line = self.p.stdout.readline().strip()
        check(line.startswith("up "), f"the attacker: {line!r}")
        return int(line.split()[1])

    def wait_full(self, cut):
        """Until a beat says all CONNS are open again after at least cut
        closed by the hub: the table is full for the next POST (however
        late a loaded machine runs the attacker's beat)."""
        while True:
            line = self.p.stdout.readline().split()
            check(line, "the attacker stopped")
            self.last = line
            if line[0] == "beat" and int(line[1]) == CONNS and int(line[2]) >= cut:
                return

    def stop(self):
        self.p.kill()
        self.p.wait()
        beats = [ln.split() for ln in self.p.stdout.read().splitlines() if ln.startswith("beat ")]
        return beats[-1] if beats else (self.last or None)


def post_from(hub, env, source, timeout=NO_ANSWER):
    """bob's POST from address source: (seconds, status, answer)."""
    doc = hdproto.build("bob", "alice", env.key)
    c = http.client.HTTPSConnection("127.0.0.1", hub.port, timeout=timeout * hdtest.SLOW,
                                    context=hub.context(), source_address=(source, 0))
    t0 = time.monotonic()
    try:
        st, ans = hub.post(doc, "bob", conn=c)
    except OSError as e:
        st, ans = None, f"{type(e).__name__}: {e}"
    finally:
        c.close()
    return time.monotonic() - t0, st, ans, doc["handoff_id"]


def metric(hub, name):
    st, text = hub.get("/metrics")
    m = re.search(r"^" + re.escape(name) + r" (\d+)$", text if st == 200 else "", re.M)
    return int(m.group(1)) if m else None


def part_full_table(env, hub):
    hub.start()
    att = Attacker(hub)
    try:
        up = att.wait_up()
        print(f"attacker: {up} connections open from {len(ADDRS)} addresses, "
              f"a header byte each every {BEAT:.0f} s")
        check(up == CONNS, f"the attacker opened {up} of {CONNS}")
        # bob from an address of his own (the table is full), then from
        # one of the attacker's (that address has its share)
        posts = [("127.0.0.1", "a ninth address"), (ADDRS[3], "an attacker's address"),
                 ("127.0.0.1", "a ninth address, again")]
        extra = float(os.environ.get("HD_SLOWLORIS_SECONDS", "0"))
        t_end = time.monotonic() + extra
        worst = 0.0
        while True:
            for k, (src, what) in enumerate(posts):
                if k == 1:
                    att.wait_full(1)    # the first POST's drop, filled again
                took, st, ans, hid = post_from(hub, env, src)
                worst = max(worst, took)
                print(f"bob's POST from {src} ({what}) under the attack: "
                      f"{st} {ans if st != 200 else 'accepted'} after {took:.2f} s")
                check(st == 200 and ans.get("handoff_id") == hid,
                      f"bob's POST from {src} ({what}) under the attack: {st} {ans} "
                      f"after {took:.1f} s")
                check(took <= TARGET * hdtest.SLOW,
                      f"bob's POST from {src} ({what}) took {took:.2f} s (at most {TARGET} s)")
            if time.monotonic() >= t_end:
                break
            time.sleep(1)
        # the first post found the table full, the second its address at
        # its share: each dropped one (later ones may find the room a
        # closed connection of bob's left)
        ev = metric(hub, 'handoff_hub_connections_dropped_total{reason="full"}')
        print(f"worst {worst:.2f} s; connections dropped to make room: {ev}")
        check(ev is not None and ev >= 2,
              f"handoff_hub_connections_dropped_total{{reason=\"full\"}} = {ev}, want at least 2")
    finally:
        last = att.stop()
    print(f"attacker's last beat: {last[1] if last else '?'} open, {last[2] if last else '?'} "
          f"closed by the hub in all")
    logs = hub.proc.logs()
    said = [ln for ln in logs.splitlines() if "oldest connection" in ln]
    print("hub: " + "\n     ".join(said[:3]))
    check(1 <= len(said) <= 3, f"the drops are not said in one line (or a few): {len(said)} lines")
    check(hub.proc.stop() == 0, "the hub stops with 0")


def cut_after(s, what):
    """Seconds until the hub closes s (nothing answered), s sending one
    byte every 0.25 s meanwhile (never silent)."""
    t0 = time.monotonic()
    s.settimeout(0.25)
    while time.monotonic() - t0 < DEADLINE + 5 * hdtest.SLOW:
        try:
            data = s.recv(4096)
            took = time.monotonic() - t0
            check(data == b"", f"{what}: answered {data[:80]!r}")
            return took
        except (socket.timeout, ssl.SSLWantReadError):
            pass
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return time.monotonic() - t0
        try:
            s.sendall(b"a")
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return time.monotonic() - t0
    return None


def part_deadline(env):
    hub = hubkit.Hub(env, tokens={"bob": None}, extra=f"request_timeout = {DEADLINE}s\n")
    hub.start()
    ctx = hub.context()
    # headers that never end
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", hub.port)),
                        server_hostname="127.0.0.1")
    s.sendall(HEAD)
    took = cut_after(s, "endless headers")
    s.close()
    print(f"endless headers, a byte every 0.25 s: cut after {took and round(took, 2)} s "
          f"(request_timeout {DEADLINE} s)")
    check(took is not None and DEADLINE - 0.5 <= took <= DEADLINE + 1.5 * hdtest.SLOW,
          f"endless headers cut after {took} s, want {DEADLINE} s")
    # bob's whole headers, then his body a byte at a time
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", hub.port)),
                        server_hostname="127.0.0.1")
    s.sendall(b"POST /api/v1/handoffs/start HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              b"Authorization: Bearer " + hub.tokens["bob"].encode() + b"\r\n"
              b"Content-Type: application/json\r\nContent-Length: 2000\r\n\r\n{")
    took = cut_after(s, "a slow body")
    s.close()
    print(f"bob's body, a byte every 0.25 s after whole headers: cut after "
          f"{took and round(took, 2)} s")
    check(took is not None and DEADLINE - 0.5 <= took <= DEADLINE + 1.5 * hdtest.SLOW,
          f"a slow body cut after {took} s, want {DEADLINE} s")
    took, st, ans, _ = post_from(hub, env, "127.0.0.1")
    check(st == 200, f"a normal POST on a hub with request_timeout {DEADLINE}s: {st} {ans}")
    cut = metric(hub, 'handoff_hub_connections_dropped_total{reason="deadline"}')
    print(f"a normal POST: {st} after {took:.2f} s; connections cut at the deadline: {cut}")
    check(cut == 2, f"handoff_hub_connections_dropped_total{{reason=\"deadline\"}} = {cut}, want 2")
    check(hub.proc.stop() == 0, "the hub stops with 0")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        hub = hubkit.Hub(env, tokens={"bob": None})
        env.start(conf=hub.conf)
        part_full_table(env, hub)
        part_deadline(env)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--slowloris":
        port, cafile, n, addrs, beat = sys.argv[2:7]
        try:
            slowloris(int(port), cafile, int(n), addrs.split(","), float(beat))
        except (KeyboardInterrupt, BrokenPipeError):
            pass
        sys.exit(0)
    hdtest.run(main)
