"""Why the relay is not working, said at once in words an operator can act
on (issue 36, against a real nats-server):

4. a server run without JetStream (no -js, no jetstream {}): the log and
   `handoffctl status` say "JetStream is not enabled on SERVER", not
   libnats' "No responders available for request"."""

import os
import sys

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


def main():
    relaykit.skip_without_nats()
    no_jetstream()


hdtest.run(main)
