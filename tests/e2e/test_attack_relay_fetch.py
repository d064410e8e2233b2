"""Attack (issue 24.6): the relay's fetch was capped in messages only.  With
big messages waiting on the stream, the receiving daemon held a whole
batch of them at once, twice (the library's and its own copy): 64 of
1 MB took its peak RSS to about 108 MB, and with the server's max_payload
at 8 MB near the unit's MemoryMax.

A real nats-server (max_payload 8 MB) and host b's handoffd, stopped
while the messages are published, then started on the backlog:

- 64 messages of 1,000,000 bytes (JSON that parses and fails
  verification: rejected on b): b's VmHWM stays under MAX_1MB_KB;
- 12 messages of 8,000,000 bytes, over b's max_file_size (1 MiB): each
  refused by its length, acked, counted as rejected (too_large) with a
  log line, never written; VmHWM under MAX_8MB_KB.  A legitimate
  handoff published after them is still delivered."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

# Before the cap: 64 x 1 MB gave ~108 MB, 12 x 8 MB ~190 MB.  After: a
# fetch holds at most 4 MiB (and one larger message alone, uncopied).
MAX_1MB_KB = 48 * 1024
MAX_8MB_KB = 56 * 1024


def blob(i, size):
    head = b'{"handoff_id":"big-%d","to_agent":"alice","pad":"' % i
    return head + b"x" * (size - len(head) - 2) + b'"}'


def rejected(d):
    return d.status().get("counters", {}).get("rejected") or {}


def rejected_total(d):
    return sum(rejected(d).values())


def run_backlog(env, ns, conf, what, msgs, size, expect):
    """b stopped, msgs published, b started on them: its VmHWM in kB."""
    cl = natsrv.Client(ns.url, timeout=30)
    for i in range(msgs):
        ack = cl.js_publish("handoff.b.alice", blob(i, size), msg_id=f"{what}-{i}")
        check(ack.get("stream") == "HANDOFF", f"PubAck {ack}")
    cl.close()
    d = env.start(name="b", conf=conf)
    try:
        hdtest.wait_for(lambda: expect(d), 120, f"{what}: b decides all {msgs}")
    except hdtest.Fail:
        print(f"status: {d.status()}")
        raise
    hwm = hdtest.proc_status(d.proc.pid, "VmHWM")
    return d, hwm


def main():
    relaykit.skip_without_nats()
    with hdtest.Env(agents=["alice"]) as env, \
            natsrv.Cluster(env.dir, nodes=1, conf_extra="max_payload: 8MB") as ns:
        text = env.config_text("b") + (
            "[relay]\n"
            f"servers = {ns.url}\n"
            "host = b\n"
            "replicas = 1\n")
        conf = env.write_config("b", text=text)
        # First start: the stream and b's consumer exist from now on.
        d = env.start(name="b", conf=conf)
        hdtest.wait_for(lambda: (d.status().get("relay") or {}).get("ready"), 20, "b's relay ready")
        check(d.stop() == 0, "b exits 0")

        n1 = 64
        d, hwm1 = run_backlog(env, ns, conf, "m1", n1, 1000 * 1000,
                              lambda d: rejected_total(d) >= n1)
        print(f"{n1} messages of 1 MB waiting on the stream: b's VmHWM {hwm1 / 1024:.1f} MB "
              f"(bound {MAX_1MB_KB // 1024} MB; about 108 MB before the byte cap)")
        # AddressSanitizer keeps freed memory in quarantine: no bound there.
        check(hwm1 < MAX_1MB_KB or hdtest.SANITIZE, f"1 MB backlog: VmHWM {hwm1} kB")
        check(d.stop() == 0, "b exits 0")

        n8 = 12
        d, hwm8 = run_backlog(env, ns, conf, "m8", n8, 8000 * 1000,
                              lambda d: rejected(d).get("too_large", 0) >= n8)
        print(f"{n8} messages of 8 MB (over max_file_size 1 MiB) waiting on the stream: "
              f"b's VmHWM {hwm8 / 1024:.1f} MB (bound {MAX_8MB_KB // 1024} MB)")
        check(hwm8 < MAX_8MB_KB or hdtest.SANITIZE, f"8 MB backlog: VmHWM {hwm8} kB")
        # The refusal's line is written out when b's loop next sleeps,
        # after the counter the wait above read went up.
        hdtest.wait_for(lambda: d.logs().count("Relay: refused message") >= n8, 10,
                        lambda: f"a log line per refused message:\n{d.logs()[-2000:]}")
        logs = d.logs()
        check(logs.count("Relay: refused message") == n8,
              f"a log line per refused message:\n{logs[-2000:]}")
        check(env.count("handoff") == 0 and env.count("rejected") == n1,
              f"nothing of them written: handoff/ {env.names('handoff')[:3]}, "
              f"rejected/ {env.count('rejected')} (the {n1} of 1 MB)")
        # Acked: after them, a legitimate handoff comes through.
        real = hdproto.build("bob", "alice", env.key, ttl=600)
        cl = natsrv.Client(ns.url)
        cl.js_publish("handoff.b.alice", hdproto.dumps(real), msg_id=real["handoff_id"])
        cl.close()
        hdtest.wait_for(lambda: any(n.startswith(real["handoff_id"]) for n in
                                    env.names("claimed") + env.names("archive")),
                        20, "the legitimate handoff claimed on b after the big ones")
        print(f"the {n8} of 8 MB refused by their length, none written; a legitimate "
              f"handoff then delivered")
        check(d.stop() == 0, "b exits 0")


hdtest.run(main)
