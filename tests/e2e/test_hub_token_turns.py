"""The daemon's turns see the hub's tokens (issue 43, 3), run as packaged:
the daemon its own user, the hub its own user in the spool's group.

Every file the hub drops is the hub's user's, and the daemon's turns are
per owner: one token's flood delayed every other token's handoffs.  The
hub names the token's agent on each file (user.handoff.sender); the
daemon trusts it on the files of the owner of [hub] state_dir only.

- With the daemon stopped (SIGSTOP: its inotify events wait in the
  kernel), bob's token drops FLOOD handoffs through the hub, then carol's
  one; once the daemon goes on, carol's is claimed among the first few
  (before: after all of bob's, one turn for the hub's user).
The attribute on another owner's file is not read (tests/unit/test_pending.c).

Runs as root; the users and groups are throwaway ids."""

import os
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47480
DAEMON = 47481
HUB = 47482
ALICE = 47483
FLOOD = 600
AHEAD = 8               # of bob's claimed before carol's, at most


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        hub = hubkit.Hub(env, tokens={"bob": None, "carol": None}, tls=False,
                         extra="rate_per_token = 0\nmax_requests_per_token = 16\n")
        hub.run_as(HUB, SPOOL_GID)
        d, conf = dep.start(text=open(hub.conf).read())
        hub.start()
        check(os.stat(hub.state_dir).st_uid == HUB, "state_dir is the hub's")

        os.kill(d.proc.pid, signal.SIGSTOP)
        try:
            docs = [hdproto.build("bob", "alice", env.key, ttl=900) for _ in range(FLOOD)]
            failed = []

            def post(part):
                conn = hub.connect()
                for doc in part:
                    st, ans = hub.post(doc, "bob", conn=conn)
                    if st != 200:
                        failed.append((st, ans))
                conn.close()
            threads = [threading.Thread(target=post, args=(docs[i::8],)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            check(not failed, f"bob's flood refused: {failed[:3]}")
            carol = hdproto.build("carol", "alice", env.key, ttl=900)
            st, ans = hub.post(carol, "carol")
            check(st == 200, f"carol's POST: {st} {ans}")
            names = os.listdir(env.path("handoff"))
            check(len(names) == FLOOD + 1, f"handoff/ holds {len(names)}")
            path = env.path("handoff", carol["handoff_id"] + ".json")
            check(os.stat(path).st_uid == HUB, "carol's file is the hub's user's")
            try:
                sender = os.getxattr(path, "user.handoff.sender")
            except OSError as e:
                sender = repr(e)
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)
        ids = {doc["handoff_id"] for doc in docs}

        def claimed_order():
            return [ln.split("Claimed ", 1)[1].split(" ", 1)[0] for ln in d.logs().splitlines()
                    if "Claimed " in ln]
        order = hdtest.wait_for(lambda: (lambda o: o if carol["handoff_id"] in o else None)(claimed_order()),
                                timeout=60, what="carol's handoff claimed")
        ahead = [i for i in order[:order.index(carol["handoff_id"])] if i in ids]
        print(f"carol's handoff claimed after {len(ahead)} of bob's {FLOOD} (all queued before hers)")
        check(len(ahead) <= AHEAD, f"carol waited behind {len(ahead)} of bob's: one turn for the hub")
        check(sender == b"carol", f"the hub names the token on its file: {sender}")
        hdtest.wait_for(lambda: len(set(claimed_order()) & ids) == FLOOD, timeout=120,
                        what="bob's flood claimed")
        print(f"ok: the hub's tokens take turns: carol's after {len(ahead)} of bob's {FLOOD}")
        check(hub.proc.stop() == 0, "the hub stops with 0")
        check(d.stop() == 0, "the daemon stops with 0")
    hdtest.finish("test_hub_token_turns")


if __name__ == "__main__":
    hdtest.run(main)
