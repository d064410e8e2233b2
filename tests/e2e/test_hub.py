"""handoff-hubd: the protocol HandoffHubWriter speaks, over TLS with a
certificate made by openssl, against the real hub and the real daemon.

- accepted: 200 {"status":"accepted","handoff_id":ID}, with ?wait=claimed
  also "outcome":"claimed" once the daemon claimed it; the daemon delivers
  it; the same bytes again: the same answer, nothing delivered twice; another
  document under that id: 409 duplicate_id; GET of the id: its state, to
  the sender's and the target's token only;
- each refusal with its status and reason: no token, wrong token, another
  sender's token, bad MAC, bad signature, expired, unknown target, unknown
  sender key, oversized body, headers over 8 KiB, malformed JSON, duplicate
  keys, wrong content type; nothing of them reaches the spool;
- a chunked body (no Content-Length) in pieces of 100 bytes: accepted whole;
- slow headers: the connection is cut within [hub] timeout while another
  client is served meanwhile;
- TLS: plain HTTP on a non-loopback address is refused at start with one
  line (exit 2); SIGHUP serves a new certificate and reads the tokens again;
- /healthz and /metrics (the daemon's figures from its textfile too); a record older than max_window + max_clock_skew
  is removed at start;
- failed authentications: the first logged at once with the peer's address
  and why, the 21 after it in the same minute not one line each;
- handoffctl status shows the hub's figures (pid, listening address,
  tokens, requests, accepted, failed authentications) while it runs, and
  "not running" once it stopped.
"""

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hded25519  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

TIMEOUT = 2


def refuse(hub, what, status, reason, *args, **kw):
    got = hub.post(*args, **kw)
    ok = (got[0] == status and isinstance(got[1], dict) and got[1].get("status") == "rejected"
          and got[1].get("reason") == reason)
    check(ok, f"{what}: want {status} {reason}, got {got}")
    print(f"ok: {what}: {status} {reason}")


def carol_signer(env):
    """carol signs with Ed25519 (require = sig): (Key, config text)."""
    path = os.path.join(env.dir, "carol.key")
    env.ctl("keygen", "--ed25519", "-o", path, check_rc=0)
    pub = path[:-4] + ".pub"
    seed = base64.b64decode(open(path).read().split()[1])
    pk, kid = hded25519.parse_pub_line(open(pub).read())
    return hded25519.Key(seed, kid=kid), (f"[agent carol]\nstate_dir = {env.dir}/agents/carol\n"
                                          f"pubkeys = {pub}\nrequire = sig\n")


def slow_headers(hub):
    """A client that sends half its headers and stops: cut within TIMEOUT
    (+ slack), while another client is served."""
    ctx = hub.context()
    raw = socket.create_connection(("127.0.0.1", hub.port))
    s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    s.sendall(b"POST /api/v1/handoffs/start HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    t0 = time.monotonic()
    s.settimeout(TIMEOUT * 4 * hdtest.SLOW + 5)
    st, _ = hub.get("/healthz")
    check(st == 200, "another client is served while one is slow")
    try:
        data = s.recv(4096)
    except (ConnectionResetError, ssl.SSLError):
        data = b""
    took = time.monotonic() - t0
    s.close()
    check(data == b"" or b"408" in data, f"slow client: closed, got {data[:80]!r}")
    check(took <= TIMEOUT + 2.5 * hdtest.SLOW, f"slow client cut after {took:.1f}s (timeout {TIMEOUT}s)")
    check(took >= TIMEOUT - 0.5, f"slow client not cut before the timeout ({took:.1f}s)")
    print(f"ok: slow headers cut after {took:.1f}s (timeout {TIMEOUT}s)")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        carol, carol_conf = carol_signer(env)
        prom = os.path.join(env.dir, "handoffd.prom")
        env.extra = carol_conf + f"\n[metrics]\ntextfile = {prom}\n"
        # a 4 KiB body cap, a 2 s idle timeout
        hub = hubkit.Hub(env, tokens={"bob": None, "alice": None, "carol": None},
                         extra=f"timeout = {TIMEOUT}\n")
        conf = open(hub.conf).read().replace("rescan_interval = 5\n",
                                              "rescan_interval = 5\nmax_file_size = 4K\n", 1)
        with open(hub.conf, "w") as f:
            f.write(conf)
        env.start(conf=hub.conf)
        # records older than any document under their id can be fresh are
        # removed at start; a recent one stays
        os.makedirs(hub.state_dir, 0o750)
        for rid, age in (("old-1", 2 * 86400), ("recent-1", 60)):
            p = os.path.join(hub.state_dir, rid)
            with open(p, "w") as f:
                f.write("0" * 64 + " bob alice\n")
            t = time.time() - age
            os.utime(p, (t, t))
        # a torn last line (a crash mid-append) is skipped
        with open(os.path.join(hub.state_dir, "accepted.log"), "w") as f:
            f.write("+ torn-1 " + "1" * 64 + " bob alice 17")
        hd = hub.start()
        recs = sorted(n for n in os.listdir(hub.state_dir) if n != "status.json")
        check(recs == ["a2a.d", "accepted.log"] or recs == ["accepted.log"],
              f"files after start: {recs}")
        with open(os.path.join(hub.state_dir, "accepted.log")) as f:
            journal = f.read().splitlines()
        check([x.split()[1] for x in journal] == ["recent-1"], f"journal after start: {journal}")
        print("ok: an older hub's record files taken into the journal, the expired one dropped, "
              "a torn line skipped")

        # Accepted and delivered.
        doc = hdproto.build("bob", "alice", env.key)
        hid = doc["handoff_id"]
        st, ans = hub.post(doc, "bob")
        check(st == 200 and ans == {"status": "accepted", "handoff_id": hid}, f"accepted: {st} {ans}")
        hdtest.wait_for(lambda: env.bootstraps("alice") == [hid + ".json"], what="delivered")
        print("ok: accepted and delivered")
        # Again: same answer, no second delivery (and no second file at all).
        st2, ans2 = hub.post(doc, "bob")
        check((st2, ans2) == (st, ans), f"the same post again: {st2} {ans2}")
        hdtest.wait_for(lambda: env.names("handoff") == [], 10,
                        lambda: f"handoff/ to drain: {env.names('handoff')}")
        check(env.count("rejected") == 0,
              f"no second file: handoff/ {env.names('handoff')} rejected/ {env.names('rejected')}")
        print("ok: the same post again: the same answer, nothing new in the spool")
        # Another document under the same id.
        other = hdproto.build("bob", "alice", env.key, handoff_id=hid, reason="other")
        refuse(hub, "another document, a known id", 409, "duplicate_id", other, "bob")
        # GET: the sender and the target see it; nobody else.
        st, item = hub.get(f"/api/v1/handoffs/{hid}", "bob")
        check(st == 200 and item.get("handoff_id") == hid and item.get("status") in ("claimed", "consumed"),
              f"GET by the sender: {st} {item}")
        check("path" not in item, "GET shows no path of this host")
        st, _ = hub.get(f"/api/v1/handoffs/{hid}", "alice")
        check(st == 200, f"GET by the target: {st}")
        st, a = hub.get(f"/api/v1/handoffs/{hid}", "carol")
        check(st == 403 and a.get("reason") == "forbidden", f"GET by a third agent: {st} {a}")
        st, a = hub.get("/api/v1/handoffs/nosuchid", "bob")
        check(st == 404, f"GET of an unknown id: {st} {a}")
        print("ok: GET of an id: sender and target only")

        # ?wait=claimed: the answer once the daemon claimed it.
        w = hdproto.build("bob", "alice", env.key)
        st, a = hub.post(w, "bob", query="?wait=claimed")
        check(st == 200 and a == {"status": "accepted", "handoff_id": w["handoff_id"], "outcome": "claimed"},
              f"?wait=claimed: {st} {a}")
        # the answer comes once the daemon's delivered marker is there: the
        # bootstrap's rename into sight follows at once
        hdtest.wait_for(lambda: w["handoff_id"] + ".json" in env.bootstraps("alice"), 2,
                        "the bootstrap visible right after the answer")
        print("ok: ?wait=claimed: outcome claimed, the bootstrap visible right after")
        refuse(hub, "?wait=other", 400, "bad_request", w, "bob", query="?wait=consumed")

        # Refusals.
        d = hdproto.build("bob", "alice", env.key)
        refuse(hub, "no token", 401, "unauthorized", d)
        refuse(hub, "wrong token", 401, "unauthorized", d, token="x" * 40)
        # The failed authentications: the first logged at once with the
        # peer's address and why (before its answer), the others counted
        # for one line a minute, not one each.
        for _ in range(20):
            st, _ = hub.post(d, token="y" * 40)
            check(st == 401, f"a wrong token: {st}")
        lines = [ln for ln in hd.logs().splitlines() if "authentication failed" in ln]
        check(len(lines) == 1 and "authentication failed from 127.0.0.1: no Authorization header" in lines[0],
              f"one line for 22 failed authentications, with the address and why: {lines}")
        print(f"ok: 22 failed authentications, one line: {lines[0]}")
        refuse(hub, "another sender's token", 403, "forbidden", d, "alice")
        bad = dict(d)
        bad["reason"] = "changed after signing"
        refuse(hub, "bad MAC", 422, "bad_mac", bad, "bob")
        try:
            sd = carol.sign(hdproto.build("carol", "alice", env.key))
        finally:
            carol.close()
        st, a = hub.post(sd, "carol")
        check(st == 200, f"carol's signed handoff: {st} {a}")
        sd2 = dict(sd)
        sd2["handoff_id"] = sd["handoff_id"] + "x"
        refuse(hub, "bad signature", 422, "bad_signature", sd2, "carol")
        from datetime import timedelta
        old = hdproto.build("bob", "alice", env.key, at=hdproto.now() - timedelta(seconds=600), ttl=60)
        refuse(hub, "expired", 422, "expired", old, "bob")
        refuse(hub, "unknown target agent", 422, "unknown_agent",
               hdproto.build("bob", "zed", env.key), "bob")
        other_key = os.urandom(32).hex().encode()
        refuse(hub, "a key this host does not know", 422, "bad_mac",
               hdproto.build("bob", "alice", other_key), "bob")
        big = hdproto.build("bob", "alice", env.key, extra={"pad": "x" * 5000})
        refuse(hub, "oversized body", 413, "too_large", big, "bob")
        # without Content-Length (chunked): cut while the body streams in
        c = hub.connect()
        c.putrequest("POST", "/api/v1/handoffs/start")
        c.putheader("Authorization", f"Bearer {hub.tokens['bob']}")
        c.putheader("Content-Type", "application/json")
        c.putheader("Transfer-Encoding", "chunked")
        c.endheaders()
        for _ in range(3):
            c.send(b"800\r\n" + b" " * 0x800 + b"\r\n")
        c.send(b"0\r\n\r\n")
        r = c.getresponse()
        body = r.read()
        c.close()
        check(r.status == 413 and b'"too_large"' in body, f"chunked oversized body: {r.status} {body!r}")
        print("ok: oversized chunked body: 413 too_large")
        # without Content-Length, in many pieces: the body's buffer grows as
        # it comes (its size, not max_file_size's), all of it kept
        ok = hdproto.build("bob", "alice", env.key,
                           transcript=[{"role": "user", "text": "y" * 3000}])
        raw = hdproto.dumps(ok)
        c = hub.connect()
        c.putrequest("POST", "/api/v1/handoffs/start")
        c.putheader("Authorization", f"Bearer {hub.tokens['bob']}")
        c.putheader("Content-Type", "application/json")
        c.putheader("Transfer-Encoding", "chunked")
        c.endheaders()
        for i in range(0, len(raw), 100):
            piece = raw[i:i + 100]
            c.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
        c.send(b"0\r\n\r\n")
        r = c.getresponse()
        body = r.read()
        c.close()
        check(r.status == 200 and json.loads(body).get("handoff_id") == ok["handoff_id"],
              f"a chunked body of {len(raw)} bytes in pieces of 100: {r.status} {body!r}")
        hdtest.wait_for(lambda: ok["handoff_id"] + ".json" in env.bootstraps("alice"),
                        what="the chunked handoff delivered")
        print(f"ok: a chunked body of {len(raw)} bytes in pieces of 100: accepted whole")
        # request line and headers: at most 8 KiB together (handoff-hubd(8))
        for kb, want in ((7, 200), (9, 431)):
            c = hub.connect()
            c.request("GET", "/healthz", headers={"X-Pad": "a" * (kb * 1024)})
            r = c.getresponse()
            r.read()
            c.close()
            check(r.status == want, f"{kb} KiB of headers: {r.status}, wanted {want}")
        print("ok: 7 KiB of headers served, 9 KiB refused with 431")
        refuse(hub, "malformed JSON", 400, "parse_error", None, "bob", raw=b'{"protocol_version":1,')
        dup = hdproto.dumps(d).replace(b'{"caller_hash"', b'{"reason":"x","caller_hash"', 1)
        check(dup != hdproto.dumps(d), "duplicate key made")
        refuse(hub, "duplicate keys", 400, "duplicate_key", None, "bob", raw=dup)
        refuse(hub, "wrong content type", 415, "unsupported_media_type", d, "bob", ctype="text/plain")
        refuse(hub, "no content type", 415, "unsupported_media_type", d, "bob", ctype=None)
        st, a = hub.request("GET", "/api/v1/handoffs/start")
        check(st in (401, 404, 405), f"GET of the POST path: {st}")
        # None of them reached the spool: only the two accepted ones did.
        check(env.names("handoff") == [] or all(n in (hid + ".json", sd["handoff_id"] + ".json",
                                                        w["handoff_id"] + ".json")
                                                  for n in env.names("handoff")),
              f"handoff/: {env.names('handoff')}")
        check(env.count("rejected") == 0, f"rejected/: {env.names('rejected')}")
        check(sorted(os.listdir(env.path("tmp"))) == [], f"tmp/: {os.listdir(env.path('tmp'))}")

        slow_headers(hub)

        # Figures.
        st, text = hub.get("/metrics")
        check(st == 200 and 'handoff_hub_requests_total{code="401"} 22' in text
              and "handoff_hub_auth_failed_total 22" in text
              and "handoff_hub_request_seconds_bucket" in text
              and "handoff_hub_accepted_total 4" in text, f"metrics:\n{text}")
        hdtest.wait_for(lambda: os.path.exists(prom), 30, "the daemon's metrics textfile")
        st, text = hub.get("/metrics")
        check(st == 200 and "handoffd_items" in text, f"metrics: the daemon's figures too:\n{text[-600:]}")
        print("ok: /metrics: the hub's figures and the daemon's")

        # handoffctl status: the hub's figures (from its state_dir).
        def hub_status():
            return __import__("json").loads(env.ctl("status", "-c", hub.conf, "--json").stdout).get("hub")
        hdtest.wait_for(lambda: (hub_status() or {}).get("accepted") == 4, 10,
                        "the hub's figures in status")
        hs = hub_status()
        check(hs.get("running") is True and hs.get("pid") == hd.proc.pid and hs.get("tls") is True and
              hs.get("auth_failed") == 22 and hs.get("requests", {}).get("401") == 22 and
              hs.get("listen") == f"127.0.0.1:{hub.port}" and hs.get("tokens") == 3,
              f"status --json: hub {hs}")
        p = env.ctl("status", "-c", hub.conf)
        check(f"hub: running, pid {hd.proc.pid}, up " in p.stdout and
              f"listening on 127.0.0.1:{hub.port} (TLS), 3 token(s)" in p.stdout and
              ", accepted 4, repeated 1, failed authentication 22" in p.stdout,
              f"status text, the hub's lines:\n{p.stdout}")
        print("ok: handoffctl status shows the hub's figures")

        # SIGHUP: a new certificate is served, and the tokens are read again.
        old_der = ssl.PEM_cert_to_DER_cert(open(hub.cert).read())
        cert2, key2 = hubkit.make_cert(env.dir, "hub2")
        os.replace(cert2, hub.cert)
        os.replace(key2, hub.key)
        old_tok = hub.tokens["bob"]
        hub.add_token("bob")
        hd.messages.clear()
        hd.send(__import__("signal").SIGHUP)
        hd.wait_message("READY=1")
        refuse(hub, "bob's old token after SIGHUP", 401, "unauthorized",
               hdproto.build("bob", "alice", env.key), token=old_tok)
        st, a = hub.post(hdproto.build("bob", "alice", env.key), "bob")
        check(st == 200, f"bob's new token after SIGHUP: {st} {a}")
        c = hub.connect()
        c.connect()
        der = c.sock.getpeercert(binary_form=True)
        c.close()
        check(der != old_der and der == ssl.PEM_cert_to_DER_cert(open(hub.cert).read()),
              "SIGHUP: the new certificate is served")
        print("ok: SIGHUP serves the new certificate")
        hd.stop()
        check(hd.proc.returncode == 0, f"SIGTERM: exit {hd.proc.returncode}")
        p = env.ctl("status", "-c", hub.conf)
        check("hub: not running (no figures in " in p.stdout and hub_status().get("running") is False,
              f"status after the hub stopped:\n{p.stdout}")
        print("ok: status after the hub stopped: not running")

        # Plain HTTP on a non-loopback address: refused, one line, exit 2.
        port = hubkit.free_port()
        text = env.config_text("nl") + (f"\n[hub]\nlisten = 0.0.0.0:{port}\n"
                                         f"token_dir = {hub.token_dir}\nstate_dir = {hub.state_dir}\n")
        nl = env.write_config("nl", text=text)
        p = subprocess.run([hubkit.HUBD, "-f", "-c", nl], capture_output=True, text=True, timeout=30)
        check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
              and "not a loopback address" in p.stderr, f"plain HTTP on 0.0.0.0: {p.returncode} {p.stderr!r}")
        print(f"ok: refused: {p.stderr.strip()}")
        # A token file others may read: refused at start.
        os.chmod(os.path.join(hub.token_dir, "bob.token"), 0o644)
        p = subprocess.run([hubkit.HUBD, "-f", "-c", hub.conf], capture_output=True, text=True, timeout=30)
        check(p.returncode == 2 and "mode 0644" in p.stderr, f"token 0644: {p.returncode} {p.stderr!r}")
        print(f"ok: refused: {p.stderr.strip()}")


if __name__ == "__main__":
    hdtest.run(main)
