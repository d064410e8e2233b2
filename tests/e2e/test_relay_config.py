"""[relay] and [remote NAME] in handoffd.conf, checked with `handoffd -n`:
good ones pass (with or without servers), each mistake is refused with its
line or its rule; without a reachable server the daemon still starts, and
with the relay off a file for a [remote] agent is left alone as before."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

GOOD = [
    "[relay]\nservers = nats://127.0.0.1:4222\nhost = h1\n\n[remote carol]\nhost = h2\n",
    "[relay]\nservers = nats://10.0.0.1:4222, nats://10.0.0.2:4222\nhost = h1\nstream = HO_2\n"
    "replicas = 3\nuser = h1\npassword = x\n",
    "[relay]\nservers =\n\n[remote carol]\nhost = h2\n",         # relay off
]
BAD = [
    ("[relay]\nhost = H.1\n", "not a valid host name"),
    ("[relay]\nstream = a.b\n", "not a valid stream name"),
    ("[relay]\nreplicas = 7\n", "from 1 to 5"),
    ("[relay]\ncredentials = relative.creds\n", "absolute path"),
    ("[relay]\nbogus = 1\n", "unknown key 'bogus' in [relay]"),
    ("[remote carol]\nport = 1\n", "unknown key 'port' in [remote carol]"),
    ("[remote Carol]\nhost = h2\n", "not a valid agent name"),
    ("[remote alice]\nhost = h2\n", "also an [agent alice]"),
    ("[relay]\nservers = nats://127.0.0.1:4222\nhost = h1\nuser = u\n", "user and password go together"),
    ("[relay]\nservers = nats://127.0.0.1:4222\nhost = h1\ntls_cert = /x.pem\n", "tls_cert and tls_key"),
    ("[relay]\nservers = nats://127.0.0.1:4222\nhost = h2\n\n[remote carol]\nhost = h2\n", "is this host"),
]


def run_n(env, text):
    conf = env.write_config("x", extra=text)
    return subprocess.run([hdtest.HANDOFFD, "-n", "-c", conf], capture_output=True, text=True)


def main():
    with hdtest.Env(agents=["alice"]) as env:
        for text in GOOD:
            p = run_n(env, text)
            check(p.returncode == 0, f"good config refused:\n{text}\n{p.stderr}")
        for text, want in BAD:
            p = run_n(env, text)
            check(p.returncode == 2 and want in p.stderr,
                  f"bad config ({want}) gave exit {p.returncode}:\n{text}\n{p.stderr}")
        print(f"[relay]/[remote]: {len(GOOD)} good configs accepted, {len(BAD)} mistakes refused")

        # No server on that port: the daemon is ready anyway, local
        # delivery works, the relay says what is wrong.
        port = natsrv.free_port()
        d = env.start(name="d1", extra=f"[relay]\nservers = nats://127.0.0.1:{port}\nhost = h1\n"
                                       "\n[remote carol]\nhost = h2\n")
        hdproto.drop(env.spool, hdproto.build("bob", "alice", env.key))
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == 1, 10, "local delivery")
        st = d.status()["relay"]
        check(not st["connected"] and st["host"] == "h1", f"relay state: {st}")
        check(d.stop() == 0, "stops cleanly without ever connecting")
        # Stopped while the NATS library still retries and calls back (its
        # closed callback came after the loop's handles were gone: abort).
        n_cycles = int(os.environ.get("HD_RELAY_STOP_CYCLES", "12"))
        for i in range(n_cycles):
            d = env.start(name=f"c{i}", extra=f"[relay]\nservers = nats://127.0.0.1:{port}\nhost = h1\n"
                                              "\n[remote carol]\nhost = h2\n")
            hdproto.drop(env.spool, hdproto.build("bob", "carol", env.key))
            time.sleep(0.1 * (i % 4))
            rc = d.stop()
            check(rc == 0, f"cycle {i}: exit {rc}")
        print(f"{n_cycles} start/stop cycles with the server down: all exit 0")

        # Relay off: a file for a [remote] agent is left alone (as for any
        # agent not served here), no outbox.
        d = env.start(name="d2", extra="[remote carol]\nhost = h2\n")
        name = hdproto.drop(env.spool, hdproto.build("bob", "carol", env.key))
        hdtest.wait_for(lambda: d.status()["counters"]["left"] >= 1, 10, "left alone")
        check(name in env.names("handoff") and name not in env.names("outbox"), "left in handoff/")
        check("relay" not in d.status(), "no relay in status when off")
        check(d.stop() == 0, "d2 exit 0")
        print("relay without a server: ready, local delivery, clean stop; relay off: remote file left alone")


hdtest.run(main)
