"""[agent NAME] and [remote NAME] of 43, 44 and 64 characters are read
whole, not cut where inih's own section buffer ends (49 bytes: "agent "
and 43 characters, "remote " and 42), and a 65-character name is refused
as the invalid agent name it is:

- `handoffd -n`: two agents whose names differ only after the 43rd
  character are two agents; [agent N] beside [remote N] of the same name
  is refused at each length (a cut remote name no longer equalled the
  agent's); 65 characters, agent or remote, is refused;
- the real daemon started with agents and remotes of each length: a
  handoff to each agent is delivered into that agent's state_dir (the
  64-character one is also consumed and archived), a handoff to each
  remote goes to outbox/ for the relay, and nothing is left in handoff/
  as "not served here"."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check, expect  # noqa: E402

LENGTHS = (43, 44, 64)


def name(kind, n, last="x"):
    """A valid agent name of n characters, distinct per kind and length
    in its first characters; `last` is its final one (a twin differs
    there only)."""
    stem = f"{kind}{n}-"
    return stem + "n" * (n - len(stem) - 1) + last


def run_n(env, text):
    conf = env.write_config("n", text=text)
    return subprocess.run([hdtest.HANDOFFD, "-n", "-c", conf], capture_output=True, text=True)


def base(env, daemon="n"):
    """The Env's config (control socket DAEMON.sock) without agents."""
    return env.config_text(daemon, agents=[])


def relay(port):
    return f"[relay]\nservers = nats://127.0.0.1:{port}\nhost = h1\n\n"


def agent(env, a):
    env.state.setdefault(a, os.path.join(env.dir, "agents", a))
    return f"[agent {a}]\nstate_dir = {env.state[a]}\n\n"


def main():
    port = natsrv.free_port()
    with hdtest.Env(agents=[]) as env:
        # --- -n: two agents that share their first 43 characters
        names = [name("a", n) for n in LENGTHS] + [name("a", n, "y") for n in LENGTHS if n > 43]
        p = run_n(env, base(env) + "".join(agent(env, a) for a in names))
        if expect(p.returncode == 0 and f"ok ({len(names)} agent(s)" in p.stdout,
                  f"-n with agents of {LENGTHS} characters and twins differing after the 43rd: "
                  f"exit {p.returncode}, wanted {len(names)} agents:\n{p.stdout}{p.stderr}"):
            print(f"ok: -n reads {len(names)} agents of {LENGTHS} characters "
                  f"(two pairs alike in their first 43): {p.stdout.strip()}")

        # --- -n: [agent N] and [remote N] of one name, each length
        for n in LENGTHS:
            a = name("b", n)
            p = run_n(env, base(env) + agent(env, a) + relay(port) + f"[remote {a}]\nhost = h2\n")
            if expect(p.returncode == 2 and f"[remote {a}]: the agent is also an [agent {a}]" in p.stderr,
                      f"-n with [agent N] and [remote N] of {n} characters: exit {p.returncode}:\n"
                      f"{p.stdout}{p.stderr}"):
                print(f"ok: -n refuses [agent N] beside [remote N] of {n} characters")

        # --- -n: 65 characters is no agent name, cut or not
        long = name("c", 65)
        for text, what in ((agent(env, long), "agent"),
                           (relay(port) + f"[remote {long}]\nhost = h2\n", "remote")):
            p = run_n(env, base(env) + agent(env, name("a", 43)) + text)
            if expect(p.returncode == 2 and f"'{long}' is not a valid agent name" in p.stderr,
                      f"-n with [{what} NAME] of 65 characters: exit {p.returncode}:\n{p.stdout}{p.stderr}"):
                print(f"ok: -n refuses [{what} NAME] of 65 characters")

        # --- the daemon: a handoff to each agent and to each remote
        agents = [name("a", n) for n in LENGTHS]
        remotes = [name("r", n) for n in LENGTHS]
        conf = env.write_config("d0", text=base(env, "d0") + "".join(agent(env, a) for a in agents)
                                + relay(port) + "".join(f"[remote {r}]\nhost = h2\n\n" for r in remotes))
        d = env.start(conf=conf)
        sent = {}
        for to in agents + remotes:
            doc = hdproto.build("bob", to, env.key, ttl=600)
            hdproto.drop(env.spool, doc)
            sent[to] = doc["handoff_id"]
        for a in agents:
            boot = os.path.join(env.state[a], "handoffs", sent[a] + ".json")
            hdtest.wait_for(lambda: os.path.exists(boot), 10,
                            f"the handoff to the agent of {len(a)} characters delivered "
                            f"(handoff/ holds {env.names('handoff')})")
            print(f"ok: delivered to [agent {a}] ({len(a)} characters)")
        for r in remotes:
            hdtest.wait_for(lambda: sent[r] + ".json" in env.names("outbox"), 10,
                            f"the handoff to the remote of {len(r)} characters in outbox/ "
                            f"(handoff/ holds {env.names('handoff')})")
            print(f"ok: the handoff to [remote {r}] ({len(r)} characters) is in outbox/")
        # With fsync on a producer's name leaves handoff/ after the batch's
        # sync, a moment after its link in outbox/ or claimed/ is seen.
        hdtest.wait_for(lambda: env.names("handoff") == [], 10,
                        lambda: f"handoff/ to drain: left {env.names('handoff')}")
        st = d.status()
        check(st["counters"]["left"] == 0, f"left as not served here: {st['counters']}")

        a64 = agents[-1]
        p = env.ctl("consume", "-c", conf, "--agent", a64, sent[a64], check_rc=0)
        check(sent[a64] in p.stdout, f"consume printed {p.stdout!r}")
        hdtest.wait_for(lambda: env.item(sent[a64]).get("outcome") == "consumed", 10,
                        f"the 64-character agent's handoff archived as consumed: {env.item(sent[a64])}")
        print(f"ok: consumed by [agent {a64}] and archived")
        check(d.stop() == 0, "the daemon stops cleanly")
    hdtest.finish("[agent NAME] and [remote NAME] of 43, 44 and 64 characters read whole")


hdtest.run(main)
