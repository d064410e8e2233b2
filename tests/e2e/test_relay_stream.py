"""A relayed result streamed (issue 46): SendStreamingMessage on host a for
carol, an agent of host b, yields the Task, then each update as b's
receipts make it, ending COMPLETED with the artifact carol reported on b.
Two real handoffds, one real nats-server (tests/py/relaykit.py), receipts
on both hosts, the hub on a, carol on b ([agent carol] completes = yes).
The specification quoted is A2A 1.0 (a2aproject/A2A, docs/specification.md).

- The official A2A SDK with the one-host test's own script
  (tests/a2a/stream.mjs; see test_a2a_stream.py), carol's part played on
  b: a blocking send answers COMPLETED with her artifact (3.2.2);
  sendMessageStream yields the Task, WORKING, the artifact, COMPLETED,
  numbered 1 to 4 (3.1.2, 9.4.2); resubscribeTask after returnImmediately
  yields the Task first and ends COMPLETED (3.1.6); a stream cut by a
  SIGKILL of a's hub after WORKING, carol's result sent back from b while
  the hub is down, resumed with Last-Event-ID: the Task as it was at 2,
  then 3 and 4, none missed.
- The wire, read here (9.4.2: each event "data: {jsonrpc, id, result:
  StreamResponse}"): each event's SSE id: is its metadata generation,
  gapless from 1; the stream closed after COMPLETED.  A stream left at
  WORKING (id: 2) and a SubscribeToTask with Last-Event-ID: 2 after b's
  result came back give the Task at 2, then 3 (the artifact) and 4
  (COMPLETED): together 1 to 4, none missed, none twice.
It pins that a relayed task's events are numbered as a local one's: a
hub that ends the task at b's consumed receipt (COMPLETED at 2, no
artifact) fails it, and so does one that ignores Last-Event-ID."""

import http.client
import json
import os
import signal
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import a2akit  # noqa: E402
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402


def take(h, conf, text=None):
    """carol, on b, consumes her one handoff (and reports text): its id."""
    hdtest.wait_for(lambda: h.b.bootstraps("carol"), 30 * hdtest.SLOW,
                    "a handoff relayed to carol on b")
    hid = h.b.bootstraps("carol")[0][:-len(".json")]
    h.b.ctl("consume", "-c", conf, "--agent", "carol", hid, check_rc=0)
    if text:
        h.b.ctl("complete", "-c", conf, "--agent", "carol", hid, "--text", text, check_rc=0)
    return hid


def sdk(h, hub, b):
    args = {"base": f"http://127.0.0.1:{hub.port}", "agent": "carol", "worker": "carol",
            "token": hub.tokens["bob"]}
    p = subprocess.Popen(["node", os.path.join(a2akit.A2A_DIR, "stream.mjs"), json.dumps(args)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         cwd=a2akit.A2A_DIR)
    try:
        while True:
            line = p.stdout.readline()
            check(line, f"stream.mjs ended early (exit {p.poll()})")
            ev = json.loads(line)
            print(f"sdk: {json.dumps(ev)[:400]}")
            check(ev.get("ok", True), f"sdk step failed: {ev}")
            if ev.get("take"):
                take(h, b.conf, ev.get("text"))
            if ev.get("kill"):
                hub.proc.stop(signal.SIGKILL)
                # the result comes back from b while the hub is down
                hid = ev["complete"]
                h.b.ctl("complete", "-c", b.conf, "--agent", "carol", hid, "--text",
                        ev["text"], check_rc=0)
                hdtest.wait_for(lambda: "completed" in
                                h.relayed_on_a().get(hid, {}).get("remote_outcomes", []),
                                30, "b's result receipt on a, the hub down")
                hub.start()
            if ev.get("take") or ev.get("kill"):
                p.stdin.write("go on\n")
                p.stdin.flush()
            if ev.get("done"):
                break
        check(p.wait(timeout=60 * hdtest.SLOW) == 0, f"stream.mjs exit {p.returncode}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    print("ok: stream.mjs passed against carol on b (blocking, stream 1..4, resubscribe, "
          "Last-Event-ID after a SIGKILL of a's hub)")


class Sse:
    """A2A over SSE on a connection of its own, read event by event."""

    def __init__(self, hub, method, params, last_event_id=None):
        self.c = http.client.HTTPConnection("127.0.0.1", hub.port, timeout=30 * hdtest.SLOW)
        hdrs = {"Content-Type": "application/json", "A2A-Version": "1.0",
                "Accept": "text/event-stream", "Authorization": f"Bearer {hub.tokens['bob']}"}
        if last_event_id is not None:
            hdrs["Last-Event-ID"] = str(last_event_id)
        self.c.request("POST", "/a2a/carol", json.dumps(
            {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode(), hdrs)
        self.r = self.c.getresponse()
        check(self.r.status == 200 and
              self.r.getheader("Content-Type", "").startswith("text/event-stream"),
              f"{method}: {self.r.status} {self.r.getheader('Content-Type')}")

    def next(self):
        """(SSE id, the StreamResponse), or None at the stream's end."""
        sid, data = None, []
        while True:
            line = self.r.readline()
            if not line:
                return None
            line = line.decode().rstrip("\r\n")
            if line.startswith(":"):
                continue        # a keepalive
            if line.startswith("id:"):
                sid = int(line[3:].strip())
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif not line and data:
                ans = json.loads("\n".join(data))
                check(ans.get("jsonrpc") == "2.0" and ans.get("id") == 7 and "result" in ans,
                      f"9.4.2: an event is a JSON-RPC answer to the call: {ans}")
                return sid, ans["result"]

    def close(self):
        self.c.close()


def brief(sid, res):
    """(SSE id, generation, kind, state) of an event."""
    kind = next(iter(res))
    v = res[kind]
    return (sid, (v.get("metadata") or {}).get("generation"), kind,
            (v.get("status") or {}).get("state"))


def wire(h, hub, b):
    msg = {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                       "parts": [{"text": "translate, on the wire"}]}}
    s = Sse(hub, "SendStreamingMessage", msg)
    got = [brief(*s.next())]
    check(got[0][2] == "task" and got[0][:2] == (1, 1) and got[0][3] == "TASK_STATE_SUBMITTED",
          f"3.1.2: the stream begins with the Task, id: 1, generation 1: {got}")
    hid = take(h, b.conf)
    got.append(brief(*s.next()))
    check(got[1] == (2, 2, "statusUpdate", "TASK_STATE_WORKING"),
          f"b's consumed receipt: WORKING, id: 2: {got}")
    s.close()           # the client goes; the task goes on without it
    text = "sur le fil"
    h.b.ctl("complete", "-c", b.conf, "--agent", "carol", hid, "--text", text, check_rc=0)
    hdtest.wait_for(lambda: "completed" in
                    h.relayed_on_a().get(hid, {}).get("remote_outcomes", []),
                    30, "b's result receipt on a")
    task_id = hid
    s = Sse(hub, "SubscribeToTask", {"id": task_id}, last_event_id=2)
    more, arts = [], []
    while (ev := s.next()) is not None:
        more.append(brief(*ev))
        if "artifactUpdate" in ev[1]:
            arts.append(ev[1]["artifactUpdate"]["artifact"]["parts"])
    s.close()
    check([e[:3] for e in more] == [(2, 2, "task"), (3, 3, "artifactUpdate"),
                                    (4, 4, "statusUpdate")] and
          more[0][3] == "TASK_STATE_WORKING" and more[2][3] == "TASK_STATE_COMPLETED" and
          arts == [[{"text": text}]],
          f"Last-Event-ID 2: the Task as it was at 2, the artifact (3), COMPLETED (4), then "
          f"closed: {more} {arts}")
    gens = [e[1] for e in got] + [e[1] for e in more[1:]]
    check(gens == [1, 2, 3, 4] and all(e[0] == e[1] for e in got + more),
          f"each SSE id: is its generation, 1 to 4 with none missed or twice: {gens}")
    print(f"ok: on the wire, a relayed task's stream: ids = generations {gens}; cut at 2 and "
          f"resumed with Last-Event-ID: 2 after b's result came back: {more}")


def main():
    relaykit.skip_without_nats()
    a2akit.need_sdk()
    with relaykit.Hosts(b_agents=["carol"]) as h:
        a, b, hub = h.start_with_hub(completes="carol", extra="a2a_block_max = 60\n")
        sdk(h, hub, b)
        wire(h, hub, b)
        hdtest.wait_for(lambda: relaykit.receipt_status(a).get("awaited") == 0, 30,
                        "a awaits no receipt")
        rs = relaykit.receipt_status(a)
        check(rs.get("dropped") == 0, f"a's receipts: {rs}")
    hdtest.finish("test_relay_stream")


if __name__ == "__main__":
    hdtest.run(main)
