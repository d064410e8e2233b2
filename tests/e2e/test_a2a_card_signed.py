"""handoff-hubd's signed agent cards (A2A 1.0 section 8.4, issue 45), the
real hub over TLS with [hub] signing_key = a key of `handoffctl keygen
--ed25519`:

- each card (an agent's, the root card) carries one AgentCardSignature
  (8.4.2): its protected header base64url JSON {alg EdDSA, typ JOSE,
  kid, jku}, the kid the key's; the signature verifies (openssl's
  Ed25519, tests/py/hded25519.py) over BASE64URL(protected) "."
  BASE64URL(JCS(card without signatures)), the JCS bytes made here by
  Python's json.dumps(sort_keys, compact, ensure_ascii=False): for the
  card's values (strings with quotes, backslashes, non-ASCII and astral
  characters, booleans, no numbers) that is RFC 8785;
- the card holds no member at its default value (8.4.1: a verifier
  removes them before canonicalizing; here there are none to remove);
- a card changed by one byte does not verify, nor under another key;
- GET /.well-known/jwks.json: the key as an OKP Ed25519 JWK of that kid,
  and the signature verifies with the key taken from it;
- the SDK (@a2a-js/sdk, pinned) reads the signed card;
- without signing_key the card has no signatures and jwks.json is 404;
- a signing_key that is not an Ed25519 secret key (the public half, an
  HMAC key): handoff-hubd -n and the start refuse it at its line.
"""

import base64
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import a2akit  # noqa: E402
import hded25519  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

A2A_DIR = os.path.join(hdtest.SRC, "tests", "a2a")
DESC = 'say "hi" \\ to caf\u00e9 \u2603 and \U0001f600 <&>'


def b64url_dec(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jcs(card):
    rest = {k: v for k, v in card.items() if k != "signatures"}
    return json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def verifies(card, pub_pem, workdir):
    sig = card["signatures"][0]
    data = (sig["protected"] + "." + b64url(jcs(card))).encode()
    return hded25519.verify_bytes(pub_pem, data, b64url_dec(sig["signature"]), workdir)


def defaults(v, path="card"):
    """The members at their default value: an empty list or string, an
    empty object below the top (a StringList), a null."""
    out = []
    if isinstance(v, dict):
        for k, m in v.items():
            p = f"{path}.{k}"
            if m in ([], "", None) and p != "card.skills":
                out.append(p)
            out += defaults(m, p)
    elif isinstance(v, list):
        for i, m in enumerate(v):
            out += defaults(m, f"{path}[{i}]")
    return out


def signed(env, hub, pk, kid):
    pub_pem = os.path.join(env.dir, "card.pub.pem")
    with open(pub_pem, "w") as f:
        f.write(hded25519.pem_public(pk))
    for path in ("/a2a/alice/.well-known/agent-card.json", "/.well-known/agent-card.json"):
        st, card = hub.get(path)
        check(st == 200 and isinstance(card, dict) and len(card.get("signatures", [])) == 1,
              f"{path}: {st} {card}")
        sig = card["signatures"][0]
        check(set(sig) == {"protected", "signature"}, f"AgentCardSignature: {sig}")
        head = json.loads(b64url_dec(sig["protected"]))
        want = {"alg": "EdDSA", "typ": "JOSE", "kid": kid,
                "jku": f"https://127.0.0.1:{hub.port}/.well-known/jwks.json"}
        check(head == want, f"protected header: {head}, want {want}")
        check(len(b64url_dec(sig["signature"])) == 64 and "=" not in sig["signature"],
              f"signature: {sig['signature']!r}")
        check(defaults(card) == [], f"{path}: members at their default: {defaults(card)}")
        check(verifies(card, pub_pem, env.dir), f"{path}: the signature does not verify")
        print(f"ok: {path}: signed, {head}, verifies over {len(jcs(card))} JCS bytes")
        if path.startswith("/a2a/"):
            check(card["description"] == DESC, f"description: {card['description']!r}")
            changed = dict(card, description=DESC[:-1] + ">x"[DESC[-1] == ">"])
            check(not verifies(changed, pub_pem, env.dir), "a changed card verified")
            raw = json.dumps(card).encode()
            i = raw.index(b'"version"') + 12
            flipped = json.loads(raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1:])
            check(flipped != card and not verifies(flipped, pub_pem, env.dir),
                  "a card changed by one byte verified")
            other = hded25519.Key(hded25519.seed_from("another"))
            check(not verifies(card, other.pub_pem, env.dir), "verified under another key")
            other.close()
            print("ok: a card changed by one byte (its description, its version) does not "
                  "verify, nor under another key")
            agent_card = card
    st, jwks = hub.get("/.well-known/jwks.json")
    check(st == 200 and isinstance(jwks, dict) and len(jwks.get("keys", [])) == 1,
          f"jwks.json: {st} {jwks}")
    jwk = jwks["keys"][0]
    check(jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519" and jwk.get("kid") == kid
          and b64url_dec(jwk["x"]) == pk and "d" not in jwk, f"JWK: {jwk}")
    from_jwks = os.path.join(env.dir, "jwks.pem")
    with open(from_jwks, "w") as f:
        f.write(hded25519.pem_public(b64url_dec(jwk["x"])))
    check(verifies(agent_card, from_jwks, env.dir), "does not verify with the JWKS key")
    print(f"ok: /.well-known/jwks.json: {jwk}; the card verifies with its key")


def sdk_card(hub):
    a2akit.need_sdk()
    args = {"base": f"https://127.0.0.1:{hub.port}", "agent": "alice",
            "token": hub.tokens["bob"], "steps": ["card"]}
    p = subprocess.run(["node", os.path.join(A2A_DIR, "spec.mjs"), json.dumps(args)],
                       capture_output=True, text=True, timeout=120 * hdtest.SLOW,
                       env=dict(os.environ, NODE_EXTRA_CA_CERTS=hub.cert))
    evs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    check(p.returncode == 0 and evs and evs[-1].get("done"),
          f"spec.mjs exit {p.returncode}: {p.stdout[-1000:]} {p.stderr[-2000:]}")
    print(f"ok: the SDK reads the signed card: {json.dumps(evs[0])[:200]}")


def refused_keys(env, hub, text, hmac_key, pub_path):
    for what, path in (("an HMAC key", hmac_key), ("the public half", pub_path)):
        conf = os.path.join(env.dir, "badkey.conf")
        with open(conf, "w") as f:
            f.write(text.replace("[hub]\n", f"[hub]\nsigning_key = {path}\n", 1))
        line = open(conf).read().split("\n").index(f"signing_key = {path}") + 1
        p = subprocess.run([hubkit.HUBD, "-n", "-c", conf], capture_output=True, text=True)
        check(p.returncode == 2 and p.stderr.startswith(f"{conf}:{line}: [hub] signing_key: "),
              f"-n with {what}: {p.returncode} {p.stderr!r}")
        s = subprocess.run([hubkit.HUBD, "-f", "-c", conf], capture_output=True, text=True,
                           timeout=30)
        check(s.returncode == 2 and f"{conf}:{line}: [hub] signing_key" in s.stderr,
              f"start with {what}: {s.returncode} {s.stderr!r}")
        print(f"ok: signing_key = {what}: -n and the start exit 2: {p.stderr.strip()}")


def main():
    with hdtest.Env(agents=["alice", "bob"]) as env:
        env.extra = f"[agent alice]\ndescription = {DESC}\n"
        key = os.path.join(env.dir, "card.key")
        out = env.ctl("keygen", "--ed25519", "--kid", "hubcard", "-o", key, check_rc=0).stdout
        pk, kid = hded25519.parse_pub_line(out)
        hub = hubkit.Hub(env, tokens={"bob": None})
        plain = open(hub.conf).read()
        with open(hub.conf, "w") as f:
            f.write(plain.replace("[hub]\n", f"[hub]\nsigning_key = {key}\n", 1))
        env.start(conf=hub.conf)
        p = subprocess.run([hubkit.HUBD, "-n", "-c", hub.conf], capture_output=True, text=True)
        check(p.returncode == 0, f"-n with the key: {p.returncode} {p.stderr}")
        hub.start()
        signed(env, hub, pk, kid)
        sdk_card(hub)

        with open(hub.conf, "w") as f:
            f.write(plain)
        check(hub.proc.stop() == 0, "the hub stopped")
        hub.start()
        st, card = hub.get("/a2a/alice/.well-known/agent-card.json")
        check(st == 200 and "signatures" not in card, f"unsigned card: {st} {card}")
        st, ans = hub.get("/.well-known/jwks.json")
        check(st == 404, f"jwks.json without a key: {st} {ans}")
        print(f"ok: without signing_key: no signatures, jwks.json {st} {ans}")
        refused_keys(env, hub, plain, env.key_path, key[:-len(".key")] + ".pub")
    hdtest.finish("test_a2a_card_signed")


if __name__ == "__main__":
    a2akit.run(main)
