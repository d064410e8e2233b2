"""A2A remotes that hang cost the others nothing (issue 43.8): three
[remote NAME] a2a servers accept TCP and never answer (they read and stay
silent), nine handoffs go to them, then one to a good remote (the SDK
server, tests/a2a/server.mjs).  The good one must be sent and end
(completed) while the nine are still waiting on their silent servers:
each remote has its own handoff-a2a, so its latency does not depend on
the hanging remotes' 30-s call timeout.  Before, one helper made one
blocking call at a time and the good handoff waited behind the nine.

Needs node and tests/a2a's packages (make a2a-deps)."""

import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

HANGING = 3
PER_HANGING = 3


class Silent(threading.Thread):
    """Accepts, reads what comes, never answers; counts connections."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.lock = threading.Lock()

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self.drain, args=(c,), daemon=True).start()

    @staticmethod
    def drain(c):
        try:
            while c.recv(65536):
                pass
        except OSError:
            pass

    def accepted(self):
        with self.lock:
            return len(self.conns)

    def close(self):
        self.sock.close()
        with self.lock:
            for c in self.conns:
                c.close()


def main():
    a2akit.need_sdk()
    silent = [Silent() for _ in range(HANGING)]
    for s in silent:
        s.start()
    try:
        with hdtest.Env(agents=["alice"]) as env:
            token, tf = a2akit.token_file(env)
            port = natsrv.free_port()
            srv = a2akit.Server(env, port, token, os.path.join(env.dir, "server.log"))
            srv.start()
            extra = "".join(f"[remote hang{i}]\na2a = http://127.0.0.1:{s.port}/a2a\n"
                            f"token_file = {tf}\n\n" for i, s in enumerate(silent))
            extra += f"[remote good]\na2a = http://127.0.0.1:{port}/a2a\ntoken_file = {tf}\n"
            conf = env.write_config("d0", extra=extra)
            d = env.start("d0", conf=conf)

            stuck = []
            for i in range(HANGING * PER_HANGING):
                doc = hdproto.build("bob", f"hang{i % HANGING}", env.key, ttl=600,
                                    reason=f"to a silent server {i}")
                hdproto.drop(env.spool, doc)
                stuck.append(doc["handoff_id"])
            # One call held is enough to hold a helper that makes one
            # call at a time (the code before).
            hdtest.wait_for(lambda: any(s.accepted() for s in silent), 20 * hdtest.SLOW,
                            lambda: f"a silent server called\n{d.logs()[-2000:]}")
            print(f"- {len(stuck)} handoffs to {HANGING} silent servers; calls held "
                  f"{[s.accepted() for s in silent]}")

            good = hdproto.build("bob", "good", env.key, ttl=600, reason="please complete this")
            t0 = time.monotonic()
            hdproto.drop(env.spool, good)

            def ended():
                try:
                    return env.item(good["handoff_id"]).get("state") == "archive"
                except Exception:
                    return False
            # Within the bound below the silent servers' calls (30 s each)
            # are still open: before, the good one waited behind all nine.
            hdtest.wait_for(ended, 15 * hdtest.SLOW,
                            lambda: f"the good remote's handoff archived while the others hang\n"
                                    f"{d.logs()[-3000:]}")
            took = time.monotonic() - t0
            check(all(s.accepted() for s in silent), f"silent servers called: "
                                                     f"{[s.accepted() for s in silent]}")
            pending = [h for h in stuck if h + ".json" in env.names("outbox")]
            check(len(pending) == len(stuck), f"the silent remotes' items left outbox/: "
                                              f"{len(stuck) - len(pending)}")
            rc, it, _ = a2akit.wait_code(env, conf, good["handoff_id"], "5")
            check(rc == 0 and it.get("remote_outcome") == "completed", f"the good remote's end: {rc} {it}")
            print(f"- the good remote's handoff ended completed in {took:.2f} s, "
                  f"{len(pending)} still waiting on silent servers")
            check(d.stop() == 0, "exit 0")
    finally:
        for s in silent:
            s.close()
        a2akit.stop_all()
    hdtest.finish("test_a2a_hanging_remote")


if __name__ == "__main__":
    hdtest.run(main)
