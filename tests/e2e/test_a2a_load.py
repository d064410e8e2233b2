"""handoff-hubd's A2A side under load, with kills (issue 45): 500
messages from 10 clients of the official A2A SDK at once
(tests/a2a/load.mjs), half with returnImmediately, half streamed
(sendMessageStream), the real hub and the real daemon over TLS; the hub
SIGKILLed once and handoffd SIGKILLed once while the messages flow, each
started again.  The SDK clients send again what failed (the same
messageId) and resume each cut stream with Last-Event-ID.  At the end:

- every messageId delivered once: 500 handoffs archived as consumed, one
  a messageId, none rejected (no duplicate);
- every task in its right state: COMPLETED (erin's consume ends it);
- every stream resumable: each streamed task's events, across its cuts,
  in order without a gap, ending COMPLETED; and subscribed again from
  Last-Event-ID 1, the Task at 1 then every event to COMPLETED.

The kills are made at counts of consumed handoffs (conditions), not at
times.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

A2A_DIR = os.path.join(hdtest.SRC, "tests", "a2a")
CLIENTS, PER = 10, 50
TOTAL = CLIENTS * PER
SENDERS = [f"c{i}" for i in range(CLIENTS)]


class Consumer:
    """erin: consumes every handoff delivered to it, counting them."""

    def __init__(self, env, conf):
        self.env, self.conf = env, conf
        self.done = set()
        self.stop = False
        self.error = None
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        d = os.path.join(self.env.state["erin"], "handoffs")
        try:
            while not self.stop:
                fresh = [n for n in self.env.bootstraps("erin")
                         if n.endswith(".json") and n[:-5] not in self.done]
                for n in fresh:
                    hid = n[:-5]
                    p = self.env.ctl("consume", "-c", self.conf, "--agent", "erin", hid)
                    if p.returncode == 0:
                        self.done.add(hid)
                if not fresh:
                    hdtest.wait_for(lambda: self.stop or any(
                        n.endswith(".json") and n[:-5] not in self.done
                        for n in os.listdir(d) if not n.startswith(".")),
                        timeout=150, what="a handoff for erin")
        except Exception as e:      # noqa: BLE001 -- said by the main thread
            self.error = e


def main():
    sdk_pkg = os.path.join(A2A_DIR, "node_modules", "@a2a-js", "sdk", "package.json")
    check(shutil.which("node") and os.path.exists(sdk_pkg),
          "no node or no tests/a2a/node_modules: run `make a2a-deps` (npm ci)")
    with hdtest.Env(agents=["erin", *SENDERS]) as env:
        hub = hubkit.Hub(env, tokens={a: None for a in SENDERS},
                         extra="rate_per_token = 0\nmax_requests_per_token = 64\n"
                               "max_waits_per_token = 100\nmax_per_address = 400\n")
        conf = hub.conf
        daemon = env.start(conf=conf)
        hub.start()
        consumer = Consumer(env, conf)
        args = {"base": f"https://127.0.0.1:{hub.port}", "worker": "erin",
                "tokens": [hub.tokens[a] for a in SENDERS], "per": PER}
        p = subprocess.Popen(["node", os.path.join(A2A_DIR, "load.mjs"), json.dumps(args)],
                             stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, NODE_EXTRA_CA_CERTS=hub.cert))
        result = None
        killed = []
        try:
            for line in p.stdout:
                ev = json.loads(line)
                check(consumer.error is None, f"the consumer: {consumer.error}")
                n = len(consumer.done)
                if "progress" in ev and "hub" not in killed and n >= TOTAL // 5:
                    hub.proc.stop(signal.SIGKILL)
                    killed.append("hub")
                    print(f"ok: the hub SIGKILLed at {n} consumed ({ev['progress']} answered)")
                    hub.start()
                elif "progress" in ev and "handoffd" not in killed and n >= TOTAL // 2:
                    daemon.stop(signal.SIGKILL)
                    killed.append("handoffd")
                    print(f"ok: handoffd SIGKILLed at {n} consumed ({ev['progress']} answered)")
                    daemon = env.start(conf=conf)
                if "sent" in ev and isinstance(ev["sent"], list):
                    result = ev
            check(p.wait(timeout=200 * hdtest.SLOW) == 0, f"load.mjs exit {p.returncode}")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            consumer.stop = True
        check(killed == ["hub", "handoffd"], f"both killed mid-run: {killed}")
        check(result and len(result["sent"]) == TOTAL and len(set(result["sent"])) == TOTAL,
              f"{TOTAL} distinct messageIds sent")

        # every messageId delivered once
        # archive/ names are TS-FROM-TO-ID.json
        def archived():
            return [n for n in env.items("archive") if "-erin-a2a-" in n]
        hdtest.wait_for(lambda: len(archived()) >= TOTAL, timeout=60, what=f"{TOTAL} archived")
        mids = []
        for n in archived():
            with open(env.path("archive", n)) as f:
                mids.append(json.load(f)["payload"]["messageId"])
        check(sorted(mids) == sorted(result["sent"]),
              f"archived: {len(mids)}, distinct {len(set(mids))}, of {TOTAL} sent")
        check(env.items("rejected") == [], f"rejected: {env.items('rejected')[:5]}")
        print(f"ok: every messageId delivered once: {len(mids)} archived, {len(set(mids))} "
              f"distinct, none rejected; {result['retries']} sends again, "
              f"{result['resumes']} streams resumed")

        # every task in its right state
        states = result["tasks"]
        check(len(states) == TOTAL and set(states.values()) == {3},
              f"{len(states)} tasks, states {sorted(set(states.values()))}")
        print(f"ok: all {len(states)} tasks COMPLETED")

        # every stream resumable
        for s in result["streams"]:
            gens, st = s["gens"], s["states"]
            check(gens == list(range(gens[0], gens[-1] + 1)) and st[-1] == 3,
                  f"stream {s['id']}: {gens} {st}")
            check([g for g, _ in s["again"]] == list(range(1, gens[-1] + 1)) and
                  s["again"][-1][1] == 3, f"stream {s['id']} from Last-Event-ID 1: {s['again']}")
        print(f"ok: {len(result['streams'])} streams each in order without a gap to COMPLETED, "
              "and each again from Last-Event-ID 1 to its end")
    hdtest.finish("test_a2a_load")


if __name__ == "__main__":
    main()
