"""Every reason code reachable from a dropped file ends in rejected/ with
that code in its .reason sidecar, and the daemon keeps going (a FIFO does
not block it).  A directory is no file: left in handoff/, one line."""

import json
import os
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def raw_drop(env, name, data, old=True):
    tmp = os.path.join(env.spool, "tmp", ".x" + str(abs(hash(name))))
    with open(tmp, "wb") as f:
        f.write(data)
    if old:  # not "still being written"
        os.utime(tmp, (0, 0))
    os.rename(tmp, os.path.join(env.spool, "handoff", name))


def main():
    with hdtest.Env(agents=["alice"]) as env:
        d = env.start()
        k = env.key
        now = hdproto.now()
        expect = {}  # file name -> reason

        def signed(name, reason, doc, resign=True):
            if resign:
                doc = hdproto.sign({x: y for x, y in doc.items() if x != "hmac"}, k)
            hdproto.drop(env.spool, doc, name=name)
            expect[name] = reason

        def base(**kw):
            return hdproto.build("bob", "alice", k, **kw)

        # Files that never parse or are not files.
        big = base(extra={"pad": "x" * (1024 * 1024)})
        raw_drop(env, "big.json", hdproto.dumps(big)); expect["big.json"] = "too_large"
        raw_drop(env, "garbage.json", b"{not json"); expect["garbage.json"] = "parse_error"
        raw_drop(env, "dup.json", b'{"a":1,"a":2}'); expect["dup.json"] = "duplicate_key"
        raw_drop(env, "deep.json", b'{"x":' + b"[" * 200 + b"]" * 200 + b"}"); expect["deep.json"] = "too_deep"
        raw_drop(env, "utf8.json", b'{"a":"\xff"}'); expect["utf8.json"] = "parse_error"
        raw_drop(env, "nul.json", b'{"a":"\x00"}'); expect["nul.json"] = "parse_error"
        raw_drop(env, "bad\nname.json", b"{}"); expect["bad_name.json"] = "bad_name"
        os.mkfifo(os.path.join(env.spool, "handoff", "fifo.json")); expect["fifo.json"] = "not_regular"
        os.symlink("/etc/passwd", os.path.join(env.spool, "handoff", "link.json")); expect["link.json"] = "not_regular"
        # A directory is never moved out of handoff/ (issue 34.2: in
        # rejected/ retention would never remove it): it stays its owner's.
        os.mkdir(os.path.join(env.spool, "handoff", "dir.json"))
        hl = os.path.join(env.spool, "tmp", "hl")
        with open(hl, "wb") as f:
            f.write(hdproto.dumps(base()))
        os.link(hl, os.path.join(env.spool, "handoff", "hardlink.json")); expect["hardlink.json"] = "hardlink"

        # Signed, but wrong.
        signed("version.json", "bad_version", dict(base(), protocol_version=2))
        nid = base(); del nid["handoff_id"]
        signed("missing.json", "missing_field", nid)
        signed("type.json", "bad_type", dict(base(), transcript="hello"))
        signed("id.json", "bad_id", dict(base(), handoff_id="../../etc/passwd"))
        signed("agent.json", "bad_agent", dict(base(), from_agent="Bob Smith"))
        signed("self.json", "self_handoff", dict(base(), from_agent="alice"))
        signed("macfmt.json", "bad_mac_format", dict(base(), hmac="abc"), resign=False)
        signed("mac.json", "bad_mac", hdproto.build("bob", "alice", b"y" * 40), resign=False)
        signed("kid.json", "unknown_key", dict(base(), kid="nosuchkey"))
        signed("naive.json", "bad_timestamp", dict(base(), initiated_at="2026-01-01T00:00:00"))
        b = base()
        signed("order.json", "bad_timestamp", dict(b, expires_at=b["initiated_at"]))
        signed("expired.json", "expired", base(at=now - timedelta(seconds=120), ttl=60))
        signed("future.json", "future_timestamp", base(at=now + timedelta(seconds=3600)))
        signed("bigint.json", "number_out_of_range", base(extra={"n": 2 ** 70}))
        signed("vox.json", "payload_invalid", base(extra={
            "payload_type": "vox/1.0",
            "payload": {"version": "1.0", "session_id": "s1", "source_agent": "bob",
                        "target_agent": "alice", "completed_steps": [], "pending_blockers": []}}))
        signed("ptype.json", "payload_invalid", base(extra={"payload_type": "nope/9", "payload": {}}))

        # Replay: the same id again, under another name, after the claim.
        first = base()
        hdproto.drop(env.spool, first, name="first.json")
        hdtest.wait_for(lambda: env.count("claimed") >= 1, what="first claimed")
        signed("replay.json", "duplicate_id", first, resign=False)

        # Baton: a full baton, then a patch that drops a decision.
        b1 = base(extra={"payload_type": "baton/1", "payload": {
            "session_id": "sess-1", "stage_id": "plan",
            "baton": {"goal": "Add OAuth2 login flow.", "decision_log": ["Chose JWT"]}}})
        hdproto.drop(env.spool, b1, name="baton1.json")
        hdtest.wait_for(lambda: env.count("claimed") >= 2, what="baton claimed")
        signed("rewrite.json", "decision_log_rewrite", base(extra={"payload_type": "baton/1", "payload": {
            "session_id": "sess-1", "stage_id": "impl",
            "baton_patch": {"decision_log": ["Chose sessions"]}}}))

        # Left for an unserved agent, expiring in a second: expired_unclaimed.
        signed("unclaimed.json", "expired_unclaimed",
               hdproto.build("bob", "sven", k, at=now - timedelta(seconds=59), ttl=60))
        # The same under a key this daemon does not have: left (sven's own
        # daemon may have it), then rejected once past its expiry, not
        # looked at again and again.
        signed("forged.json", "expired_unclaimed",
               hdproto.build("bob", "sven", b"f" * 32, at=now - timedelta(seconds=59), ttl=60),
               resign=False)

        def done():
            # the reason first, then the move out of handoff/: both done
            return all(os.path.exists(env.path("rejected", n + ".reason")) for n in expect) and \
                not set(expect) & set(env.names("handoff"))
        try:
            hdtest.wait_for(done, timeout=15, what="all rejected")
        except hdtest.Fail:
            missing = [n for n in expect if not os.path.exists(env.path("rejected", n + ".reason"))]
            raise hdtest.Fail(f"not rejected: {missing}; rejected/: {env.names('rejected')}; handoff/: {env.names('handoff')}")
        seen = set()
        for n, want in sorted(expect.items()):
            r = env.reason_of(n)
            check(r["reason"] == want, f"{n!r}: reason {r['reason']} ({r['detail']}), wanted {want}")
            check(r["detail"] and r["at"].endswith("Z"), f"{n}: detail/at {r}")
            seen.add(want)
        check(env.count("claimed") == 2, f"only the 2 good ones claimed: {env.items('claimed')}")
        check(env.names("handoff") == ["dir.json"],
              f"handoff/ empty but for the directory: {env.names('handoff')}")
        check(not os.path.exists(env.path("rejected", "dir.json")), "a directory moved to rejected/")
        hdtest.wait_for(lambda: "Left 'dir.json' in handoff/: a directory" in d.logs(), 15,
                        "the directory reported")
        # Nothing was touched outside the spool through the symlink.
        check(os.path.islink(env.path("rejected", "link.json")), "symlink moved as a link")
        st = d.status()["counters"]["rejected"]
        for want in seen:
            check(st.get(want, 0) >= 1, f"status counter for {want}: {st}")
        c0 = hdtest.cpu_s(d.proc.pid)
        time.sleep(1.0)
        busy = hdtest.cpu_s(d.proc.pid) - c0
        check(busy < 0.2, f"idle afterwards, no busy loop: {busy:.2f}s CPU in 1s")
        check(d.stop() == 0, "exit 0")
        check(d.logs().count("Left 'dir.json' in handoff/: a directory") == 1,
              "the directory reported once")
        print(f"{len(expect)} bad files, {len(seen)} reason codes, each in rejected/ with its sidecar")


hdtest.run(main)
