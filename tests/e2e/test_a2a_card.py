"""[remote NAME] a2a = the agent card's URL (issue 46): handoff-a2a reads
the card the official SDK serves (tests/a2a/server.mjs,
agentCardHandler at /.well-known/agent-card.json), takes its JSON-RPC
interface and sends there:

- the card of the same origin: the handoff completes with the
  artifact; the server is sent the message at its interface;
- a card whose JSON-RPC interface is on another origin (localhost
  against 127.0.0.1) is refused: the item waits, the remote's last
  error says why, nothing reaches the server; with
  a2a_card_cross_origin = yes the same card is followed and it
  completes.

Needs node and tests/a2a's packages (make a2a-deps)."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)

        # ---- the card of the same origin
        port = natsrv.free_port()
        srv = a2akit.Server(env, port, token, os.path.join(env.dir, "server.log"))
        srv.start()
        card = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
        conf = env.write_config("d0", extra=f"[remote remote]\na2a = {card}\ntoken_file = {tf}\n")
        d = env.start("d0", conf=conf)
        doc = hdproto.build("bob", "remote", env.key, ttl=600, reason="please complete this")
        hdproto.drop(env.spool, doc)
        rc, it, p = a2akit.wait_code(env, conf, doc["handoff_id"])
        check(rc == 0 and it.get("remote_detail") == "done: please complete this",
              f"through the card: {rc} {it}\n{d.logs()[-2000:]}")
        check(srv.ids() == [doc["handoff_id"]], f"the server ran {srv.ids()}")
        print(f"a2a = {card}: its JSON-RPC interface used, completed")
        check(d.stop() == 0, "exit 0")
        srv.stop()

        # ---- an interface on another origin
        port = natsrv.free_port()
        srv = a2akit.Server(env, port, token, os.path.join(env.dir, "other.log"),
                            card_interface=f"http://localhost:{port}/a2a")
        srv.start()
        card = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
        conf = env.write_config("d1", extra=f"[remote remote]\na2a = {card}\ntoken_file = {tf}\n")
        d = env.start("d1", conf=conf)
        doc = hdproto.build("bob", "remote", env.key, ttl=600, reason="please complete this")
        hdproto.drop(env.spool, doc)

        def refused():
            st = json.loads(env.ctl("status", "-c", conf, "--json").stdout)["a2a"]["remotes"]["remote"]
            return "another origin" in (st.get("last_error") or "")
        hdtest.wait_for(refused, 20, "the cross-origin card refused")
        st = json.loads(env.ctl("status", "-c", conf, "--json").stdout)["a2a"]["remotes"]["remote"]
        check(not srv.ids() and st["waiting"] == 1, f"sent through it anyway: {srv.ids()} {st}")
        print(f"cross-origin interface refused: {st['last_error']}")
        check(d.stop() == 0, "exit 0")
        conf = env.write_config("d1", extra=f"[remote remote]\na2a = {card}\ntoken_file = {tf}\n"
                                            "a2a_card_cross_origin = yes\n")
        d = env.start("d1", conf=conf)
        rc, it, p = a2akit.wait_code(env, conf, doc["handoff_id"])
        check(rc == 0 and srv.ids() == [doc["handoff_id"]], f"cross origin allowed: {rc} {it}")
        print("a2a_card_cross_origin = yes: the same card followed, completed")
        check(d.stop() == 0, "exit 0")
    hdtest.finish("test_a2a_card")


if __name__ == "__main__":
    a2akit.run(main)
