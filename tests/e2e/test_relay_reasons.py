"""Why the relay is not working, said at once in words an operator can act
on (issue 36, against a real nats-server):

4. a server run without JetStream (no -js, no jetstream {}): the log and
   `handoffctl status` say "JetStream is not enabled on SERVER", not
   libnats' "No responders available for request";
5. the server killed while the daemon runs: the disconnect is logged at
   once with its reason (what the reconnect meets: connection refused),
   and status shows that reason, not only "fetch: Error" for 30 s."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
import natsrv  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402


def relay_conf(url):
    return f"[relay]\nservers = {url}\nhost = a\n\n[remote carol]\nhost = b\n"


def no_jetstream():
    with hdtest.Env(agents=["alice"]) as env, natsrv.Cluster(env.dir, jetstream=False) as ns:
        d = env.start(extra=relay_conf(ns.url))
        want = f"JetStream is not enabled on {ns.url}"
        hdtest.wait_for(lambda: want in d.logs(), 10, f"'{want}' logged")
        line = [x for x in d.logs().splitlines() if want in x][0]
        check("No responders" not in line, f"4. libnats' words are gone: {line}")
        st = d.status()["relay"]
        check(want in (st["last_error"] or ""), f"4. status last_error: {st}")
        p = env.ctl("status", "-c", d.conf)
        check(want in p.stdout, f"4. handoffctl status (exit {p.returncode}):\n{p.stdout}{p.stderr}")
        print(f"4. no JetStream: {line.split(': ', 1)[1]}")
        check(d.stop() == 0, "exits 0")


def server_killed():
    with relaykit.Hosts() as h:
        a = h.start_a()
        hdtest.wait_for(lambda: a.status()["relay"]["ready"], 20, "a ready")
        n0 = len(a.logs().splitlines())
        node = h.ns.nodes[0]
        t0 = time.monotonic()
        node.kill()

        def new_lines():
            return a.logs().splitlines()[n0:]

        def said():
            return [x for x in new_lines() if f"disconnected from {node.url}: " in x]
        hdtest.wait_for(said, 10, "the disconnect logged")
        took = time.monotonic() - t0
        line = said()[0]
        reason = line.split(f"disconnected from {node.url}: ", 1)[1]
        check(reason.split(";")[0].strip(), f"5. the disconnect's line gives a reason: {line}")
        # What a reconnect meets, well before the 30 s repeat of "cannot
        # connect" (a killed server may close our connection before its
        # port: then it follows a second later).
        refused = f"127.0.0.1:{node.port}: Connection refused"
        hdtest.wait_for(lambda: any(refused in x for x in new_lines()), 10, f"'{refused}' logged")
        took_refused = time.monotonic() - t0
        check(not any("fetch: Error" in x for x in new_lines()), f"5. no bare 'fetch: Error': {new_lines()}")
        st = a.status()["relay"]
        check(not st["connected"] and refused in (st["last_error"] or ""), f"5. status shows the reason: {st}")
        p = h.a.ctl("status", "-c", a.conf)
        check(refused in p.stdout, f"5. handoffctl status:\n{p.stdout}{p.stderr}")
        print(f"5. server killed: logged after {took * 1000:.0f} ms: {line.split(': ', 1)[1]}")
        print(f"   '{refused}' logged after {took_refused * 1000:.0f} ms")

        node.start()
        hdtest.wait_for(lambda: a.status()["relay"]["ready"], 30, "a ready again")
        check(a.stop() == 0, "exits 0")


def main():
    relaykit.skip_without_nats()
    no_jetstream()
    server_killed()


hdtest.run(main)
