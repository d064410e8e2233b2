"""What an operator sees of the relay (issue 27, found tried as a new user
would), each finding against the real binaries:

1. `handoffctl submit` to an agent of a [remote] section says where it
   goes (relayed to its host), not that it will be rejected as
   expired_unclaimed;
2. relay servers that cannot be reached: the first failed connect is
   logged at once with its reason, and status shows it (last_error,
   server);
3. an empty [remote carol] (no host) is refused by `handoffd -n`, an empty
   [agent bob] is a warning (an error with --strict), a [remote] with no
   [relay] servers is a warning;
5. `handoffctl list` shows the items waiting in outbox/, and
   `list --state outbox` lists them;
6. a relayed item's archive name does not repeat the id's agents
   ("TIME-FROM-TO-TIME-FROM-TO-...").
(4, b's rejection of a relayed file naming the relay and the origin host,
is in test_receipts.py.)"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402


def run_n(env, text, *opts):
    conf = env.write_config("x", extra=text)
    return subprocess.run([hdtest.HANDOFFD, "-n", *opts, "-c", conf], capture_output=True, text=True)


def config_findings():
    with hdtest.Env(agents=["alice"]) as env:
        p = run_n(env, "[remote carol]\n\n[agent dave]\nstate_dir = /tmp/x\n")
        check(p.returncode == 2 and "[remote carol]: host is not set" in p.stderr,
              f"3. empty [remote carol] refused: rc {p.returncode}: {p.stdout}{p.stderr}")
        p = run_n(env, "[agent bob]\n# nothing\n")
        check(p.returncode == 0 and "[agent bob] has no key at all" in p.stderr,
              f"3. empty [agent bob] warned: rc {p.returncode}: {p.stdout}{p.stderr}")
        p = run_n(env, "[agent bob]\n", "--strict")
        check(p.returncode == 2, f"3. ... an error with --strict: rc {p.returncode}: {p.stderr}")
        p = run_n(env, "[remote carol]\nhost = b\n")
        check(p.returncode == 0 and "[remote carol] but no [relay] servers" in p.stderr,
              f"3. [remote] without [relay] warned: rc {p.returncode}: {p.stdout}{p.stderr}")
        p = run_n(env, "[relay]\nservers = nats://127.0.0.1:4222\nhost = a\n\n[remote carol]\nhost = b\n",
                  "--strict")
        check(p.returncode == 0 and p.stderr == "" and "receipts: not sent" in p.stdout,
              f"3. a good relay: no warning, -n says receipts are off: rc {p.returncode}: "
              f"{p.stdout}{p.stderr}")
    print("3. empty [remote] refused, empty [agent] and [remote] without [relay] warned; "
          "-n says receipts are off")


def unreachable():
    with hdtest.Env(agents=["alice"]) as env:
        port = natsrv.free_port()
        d = env.start(extra=f"[relay]\nservers = nats://127.0.0.1:{port}\nhost = a\n\n"
                            f"[remote carol]\nhost = b\n")
        t0 = time.monotonic()
        hdtest.wait_for(lambda: "cannot connect" in d.logs(), 5, "the failed connect logged")
        took = time.monotonic() - t0
        line = [x for x in d.logs().splitlines() if "cannot connect" in x][0]
        check(f"127.0.0.1:{port}: Connection refused" in line, f"2. the reason logged: {line}")
        st = d.status()["relay"]
        check(st["last_error"] and "Connection refused" in st["last_error"] and
              st["server"] == f"nats://127.0.0.1:{port}", f"2. status shows it: {st}")
        print(f"2. unreachable server: logged after {took * 1000:.0f} ms: {line.split(': ', 1)[1]}")

        # 1. submit says where it goes.
        p = env.ctl("submit", "-c", d.conf, "--from", "alice", "--to", "carol", "--key", env.key_path)
        check(p.returncode == 0 and "relayed to b" in p.stderr and "expired_unclaimed" not in p.stderr,
              f"1. submit to a remote agent: rc {p.returncode}: {p.stderr}")
        hid = p.stdout.strip()
        print(f"1. submit: {p.stderr.strip()}")

        # 5. list shows outbox/.
        hdtest.wait_for(lambda: os.path.exists(env.path("outbox", hid + ".json")), 10, "in outbox/")
        p = env.ctl("list", "-c", d.conf, "--json")
        rows = json.loads(p.stdout)
        check(p.returncode == 0 and any(r.get("handoff_id") == hid and r["state"] == "outbox"
                                        for r in rows), f"5. list shows outbox/: {p.stdout}{p.stderr}")
        p = env.ctl("list", "-c", d.conf, "--state", "outbox")
        check(p.returncode == 0 and hid in p.stdout, f"5. list --state outbox: rc {p.returncode}: "
              f"{p.stdout}{p.stderr}")
        print("5. list shows the item waiting in outbox/; list --state outbox lists it")
        check(d.stop() == 0, "exits 0")


def archive_name():
    with relaykit.Hosts() as h:
        a, b = h.start_a(), h.start_b()
        ids = h.drop(2)
        h.wait_delivered(ids, timeout=30)
        names = [n for n in h.a.names("archive") if n.endswith(".json")]
        for hid in ids:
            n = [x for x in names if x.endswith(hid + ".json")]
            check(len(n) == 1, f"6. archived once: {names}")
            ts = n[0].split("-", 1)[0]
            check(n[0] == f"{ts}-{hid}.json", f"6. the archive name does not repeat the agents: {n[0]}")
        print(f"6. relayed item archived as {n[0]}")


def main():
    config_findings()
    unreachable()
    if natsrv.available():
        archive_name()
    else:
        hdtest.skip_part("nats-server", "6 cases")


hdtest.run(main)
