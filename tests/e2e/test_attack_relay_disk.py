"""Attack (issue 34.4): a NATS publisher without a key filled the receiving
host's disk.  Messages for an agent the host does not serve, well formed
with a wrong MAC, were written into handoff/ and left for up to
max_window (300 messages in 2.7 s put 258 MB there); malformed ones went
to rejected/, bounded in count only.

A real nats-server and host b's handoffd (agent alice, relay on,
rescan_interval 60 s so that retention's own schedule cannot help),
[retention] rejected_max_bytes = REJ_MAX, unclaimed_max_bytes = UNC_MAX;
the attacker publishes straight onto the stream:

1. N messages of about 900 kB for agent nobody (a wrong key) on
   handoff.b.nobody, and N/4 on handoff.b.alice whose to_agent is nobody:
   each refused unwritten (counted rejected not_served); handoff/, tmp/
   and rejected/ stay empty;
2. N messages of about 900 kB that do not parse, on handoff.b.alice:
   rejected (parse_error); rejected/ is back within REJ_MAX (plus one
   item) within a few seconds of the last, not at the next rescan;
3. a legitimate handoff for alice, published after the flood: delivered;
4. a producer (a member of the spool's group, root here) drops files of
   about 500 kB for agent nobody: what waits unclaimed in handoff/ stays
   within UNC_MAX, the rest rejected not_served.

Prints the bytes of handoff/ and rejected/ after each phase.
HD_ATTACK_RELAY_N sets N (default 60; the issue's scale is 300)."""

import json
import os
import secrets
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_ATTACK_RELAY_N", "60"))
REJ_MAX = 8 * 1024 * 1024
UNC_MAX = 4 * 1024 * 1024
BIG = 900_000


def dir_bytes(path):
    """What the files of path hold (size, at most the blocks), as the
    daemon counts them; one removed while listed counts nothing."""
    n = 0
    for e in os.scandir(path):
        try:
            st = e.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if e.is_file(follow_symlinks=False):
            n += min(st.st_size, st.st_blocks * 512)
    return n


def padded(frm, to, key, size):
    """A signed handoff of about size bytes (a long transcript line)."""
    doc = hdproto.build(frm, to, key, ttl=3600,
                        transcript=[{"role": "user", "text": "x" * size}])
    return hdproto.dumps(doc), doc["handoff_id"]


def rejected(d, reason):
    return (d.status().get("counters", {}).get("rejected") or {}).get(reason, 0)


def main():
    check(natsrv.available(), f"{natsrv.NATS_SERVER} is needed")
    with hdtest.Env(agents=["alice"]) as env, natsrv.Cluster(env.dir, nodes=1) as ns:
        wrong_key = os.urandom(32)
        text = env.config_text("b").replace("rescan_interval = 5", "rescan_interval = 60")
        text += (f"\n[relay]\nservers = {ns.url}\nhost = b\n\n"
                 f"[retention]\nrejected_max_bytes = {REJ_MAX}\nunclaimed_max_bytes = {UNC_MAX}\n")
        conf = env.write_config("b", text=text)
        d = env.start(name="b", conf=conf)
        hdtest.wait_for(lambda: (d.status().get("relay") or {}).get("ready"), 20, "the relay ready")
        cl = natsrv.Client(ns.url, timeout=30)

        # 1. for an agent b does not serve: by subject, and by to_agent
        t0 = time.monotonic()
        m = N + N // 4
        for i in range(m):
            data, hid = padded("mallory", "nobody", wrong_key, BIG)
            subj = "handoff.b.nobody" if i < N else "handoff.b.alice"
            ack = cl.js_publish(subj, data, msg_id=f"{hid}.x")
            check(ack.get("stream") == "HANDOFF", f"PubAck {ack}")
        published = time.monotonic() - t0

        def phase1():
            return rejected(d, "not_served") >= m
        try:
            hdtest.wait_for(phase1, 60, f"{m} refused as not_served")
        except hdtest.Fail:
            raise hdtest.Fail(f"not refused: not_served {rejected(d, 'not_served')} of {m}; "
                              f"handoff/ holds {env.count('handoff')} files, "
                              f"{dir_bytes(env.path('handoff')) / 1e6:.1f} MB")
        took = time.monotonic() - t0
        hb, rb = dir_bytes(env.path("handoff")), dir_bytes(env.path("rejected"))
        check(env.names("handoff") == [] and env.names("rejected") == [] and
              [n for n in os.listdir(env.path("tmp")) if n.startswith(".relay.")] == [],
              f"nothing written: handoff/ {env.names('handoff')[:3]}, rejected/ {env.names('rejected')[:3]}")
        # the refusal's notice line leaves when b's loop sleeps, after the counter
        hdtest.wait_for(lambda: "Relay: refused message" in d.logs() and "not_served" in d.logs(),
                        10, "the refusal logged")
        check(f"Relay: refused message" in d.logs() and "not_served" in d.logs(), "the refusal logged")
        print(f"1. {m} messages of {BIG / 1e3:.0f} kB for an agent not served here "
              f"({published:.1f}s to publish): all refused unwritten in {took:.1f}s; "
              f"handoff/ {hb} bytes, rejected/ {rb} bytes")

        # 2. malformed, for alice: rejected/, bounded by bytes
        before = rejected(d, "parse_error")
        peak = 0
        for i in range(N):
            ack = cl.js_publish("handoff.b.alice", b"{" + b"x" * BIG, msg_id=f"junk-{secrets.token_hex(6)}")
            check(ack.get("stream") == "HANDOFF", f"PubAck {ack}")
        t1 = time.monotonic()

        def all_rejected():
            nonlocal peak
            peak = max(peak, dir_bytes(env.path("rejected")))
            return rejected(d, "parse_error") >= before + N
        hdtest.wait_for(all_rejected, 120, f"{N} malformed messages rejected")
        t_last = time.monotonic()

        def bounded():
            nonlocal peak
            b = dir_bytes(env.path("rejected"))
            peak = max(peak, b)
            return b <= REJ_MAX + BIG + 4096
        try:
            hdtest.wait_for(bounded, 10, "rejected/ back within rejected_max_bytes")
        except hdtest.Fail:
            raise hdtest.Fail(f"rejected/ holds {dir_bytes(env.path('rejected')) / 1e6:.1f} MB, "
                              f"over rejected_max_bytes {REJ_MAX / 1e6:.1f} MB, 10 s after the last "
                              f"rejection")
        print(f"2. {N} malformed messages of {BIG / 1e3:.0f} kB: rejected in {t_last - t1:.1f}s; "
              f"rejected/ at most {peak / 1e6:.1f} MB while they came, "
              f"{dir_bytes(env.path('rejected')) / 1e6:.1f} MB {time.monotonic() - t_last:.1f}s "
              f"after the last (bound {REJ_MAX / 1e6:.1f} MB, rescan_interval 60 s)")

        # 3. a legitimate handoff after the flood
        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        ack = cl.js_publish("handoff.b.alice", hdproto.dumps(doc), msg_id=f"{doc['handoff_id']}.ok")
        check(ack.get("stream") == "HANDOFF", f"PubAck {ack}")
        hdtest.wait_for(lambda: f"{doc['handoff_id']}.json" in env.bootstraps("alice"), 30,
                        "the legitimate handoff delivered")
        print("3. a legitimate relayed handoff after the flood: delivered")
        cl.close()

        # 4. a producer leaves files for nobody: what waits is bounded
        before = rejected(d, "not_served")
        k = 2 * UNC_MAX // 500_000 + 2
        for i in range(k):
            doc = hdproto.build("bob", "nobody", env.key, ttl=3600,
                                transcript=[{"role": "user", "text": "y" * 500_000}])
            hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: d.status()["counters"]["left"] + rejected(d, "not_served") - before >= k,
                        30, f"{k} files for nobody decided")
        hb = dir_bytes(env.path("handoff"))
        left = env.count("handoff")
        check(hb <= UNC_MAX and left > 0 and rejected(d, "not_served") - before == k - left,
              f"what waits unclaimed: {left} files, {hb} bytes (bound {UNC_MAX}); "
              f"not_served {rejected(d, 'not_served') - before} of {k}")
        print(f"4. {k} files of 500 kB for an agent not served here: {left} left "
              f"({hb / 1e6:.1f} MB, bound {UNC_MAX / 1e6:.1f} MB), {k - left} rejected not_served")
        js = json.dumps(d.status()["counters"]["rejected"], sort_keys=True)
        print(f"counters rejected: {js}")
        check(d.stop() == 0, "stops with exit 0")


hdtest.run(main)
