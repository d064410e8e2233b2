"""[remote NAME] a2a_card_key: a remote's agent card is used only when its
signature verifies (A2A 1.0 section 8.4.3, Verification: a JWS, alg
EdDSA, over BASE64URL(protected) "." BASE64URL(JCS(card without
signatures)), 8.4.1 and RFC 8785).  The SDK server (tests/a2a/server.mjs)
serves its card signed with a key of `handoffctl keygen --ed25519`, and
a2a = the card's URL:

- a2a_card_key = that key's FILE.pub: the card verifies, the handoff is
  sent through its interface and completes;
- the same card changed by a word after signing, a card signed with
  another key, an unsigned card: each refused, nothing sent to the
  server (its calls log), the item waiting, status's last_error saying
  why;
- a2a_card_key with a2a = a JSON-RPC URL (no card to check): handoffd -n
  refuses the config at its line.

Before the change the key was an unknown configuration key.  Needs node
and tests/a2a's packages (make a2a-deps)."""

import base64
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import a2akit  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402


def keygen(env, name):
    """A key of handoffctl keygen --ed25519: (node's {d, x, kid}, FILE.pub)."""
    key = os.path.join(env.dir, f"{name}.key")
    env.ctl("keygen", "--ed25519", "--kid", name, "-o", key, check_rc=0)
    pub = os.path.join(env.dir, f"{name}.pub")
    sec = open(key).read().split()
    pk = open(pub).read().split()
    b64u = lambda s: base64.urlsafe_b64encode(base64.b64decode(s)).rstrip(b"=").decode()  # noqa: E731
    return {"d": b64u(sec[1]), "x": b64u(pk[1]), "kid": name}, pub


def status(env, conf, name):
    return json.loads(env.ctl("status", "-c", conf, "--json").stdout)["a2a"]["remotes"][name]


def main():
    a2akit.need_sdk()
    with hdtest.Env(agents=["alice"]) as env:
        token, tf = a2akit.token_file(env)
        good, good_pub = keygen(env, "cardkey")
        other, other_pub = keygen(env, "otherkey")
        remotes = {     # name: (server knobs, the key configured, refused with)
            "signed": ({"card_key": good}, good_pub, None),
            "tampered": ({"card_key": good, "card_tamper": True}, good_pub,
                         "1 do not verify, 0 are for another key"),
            "foreign": ({"card_key": other}, good_pub, "0 do not verify, 1 are for another key"),
            "unsigned": ({}, good_pub, "the agent card is not signed"),
        }
        servers, extra = {}, ""
        for name, (knobs, pub, _) in remotes.items():
            port = natsrv.free_port()
            srv = a2akit.Server(env, port, token, os.path.join(env.dir, f"{name}.log"),
                                calls=os.path.join(env.dir, f"{name}.calls"), **knobs)
            srv.start()
            servers[name] = srv
            extra += (f"[remote {name}]\na2a = http://127.0.0.1:{port}/.well-known/agent-card.json\n"
                      f"token_file = {tf}\na2a_card_key = {pub}\n")
        conf = env.write_config("d0", extra=extra)
        d = env.start("d0", conf=conf)
        docs = {}
        for name in remotes:
            docs[name] = hdproto.build("bob", name, env.key, ttl=600, reason="please complete this")
            hdproto.drop(env.spool, docs[name])

        rc, it, p = a2akit.wait_code(env, conf, docs["signed"]["handoff_id"])
        check(rc == 0 and it.get("remote_outcome") == "completed", f"signed card: {rc} {it}")
        print(f"signed card, a2a_card_key its key: sent, {it['remote_outcome']}")

        for name, (_, _, why) in remotes.items():
            if not why:
                continue
            hdtest.wait_for(lambda: why in (status(env, conf, name).get("last_error") or ""), 30,
                            f"{name}: the card refused")
            st = status(env, conf, name)
            sent = [c for c in servers[name].calls() if c["method"] == "SendMessage"]
            check(not sent and st["waiting"] == 1 and not servers[name].ids(),
                  f"{name}: sent anyway: {sent} {st}")
            print(f"{name}: refused, nothing sent: {st['last_error']}")
        check(d.stop() == 0, "exit 0")

        bad = env.write_config("bad", extra=f"[remote far]\na2a = http://127.0.0.1:9/a2a\n"
                                             f"token_file = {tf}\na2a_card_key = {good_pub}\n")
        p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", bad], capture_output=True, text=True)
        check(p.returncode == 2 and "a2a_card_key needs a2a = the agent card's URL" in p.stderr,
              f"-n with a2a_card_key and no card: {p.returncode} {p.stderr}")
        print(f"-n: {p.stderr.strip()}")
    hdtest.finish("a remote's agent card is used only when its signature verifies under "
                  "a2a_card_key")


if __name__ == "__main__":
    a2akit.run(main)
