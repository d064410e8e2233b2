"""One token cannot stall the hub or send without limit (issue 43, 3).

- Waits hold no thread: bob holds 16 POSTs with ?wait=claimed on handoffs
  nobody claims (the daemon is stopped) and 16 CancelTask waits nobody
  answers, 5 s each, and runs 16 ListTasks loops; carol's plain POST and
  /healthz are answered while every one of bob's waits is still pending,
  each within max(2x her baseline of the same run, 0.5 s x SLOW).  Before,
  the waits slept on the 8 pool threads and carol waited for them.
- A token's rate: with rate_per_token = 1 and burst_per_token = 5, bob's
  POSTs after the burst are 429 rate_limited with Retry-After, his
  SendMessage a JSON-RPC error -32603 whose data says rate_limited and
  retryAfterSeconds, and nothing of them is dropped or kept; carol's POST
  and SendMessage are accepted meanwhile.
"""

import http.client
import json
import os
import statistics
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

WAITS = 16              # of each kind, bob's
LOOPS = 16              # bob's ListTasks loops
SAMPLES = 5             # carol's requests of each kind, per measure


def rpc(hub, method, params, agent, conn=None):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    return hub.request("POST", "/a2a/alice", body, {
        "Content-Type": "application/json", "A2A-Version": "1.0",
        "Authorization": f"Bearer {hub.tokens[agent]}"}, conn)


def send(hub, agent, text):
    return rpc(hub, "SendMessage", {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                                                "parts": [{"text": text}]},
                                    "configuration": {"returnImmediately": True}}, agent)


def timed(fn):
    t0 = time.monotonic()
    st, ans = fn()
    return time.monotonic() - t0, st, ans


def carol_round(hub, env):
    """SAMPLES of carol's plain POST and of /healthz: (post s, healthz s) lists."""
    posts, health = [], []
    for _ in range(SAMPLES):
        dt, st, ans = timed(lambda: hub.post(hdproto.build("carol", "alice", env.key), "carol"))
        check(st == 200 and ans.get("status") == "accepted", f"carol's POST: {st} {ans}")
        posts.append(dt)
        dt, st, ans = timed(lambda: hub.get("/healthz"))
        check(st == 200, f"/healthz: {st} {ans}")
        health.append(dt)
    return posts, health


def waits_hold_no_thread(env):
    hub = hubkit.Hub(env, tokens={"bob": None, "carol": None}, tls=False,
                     extra="max_per_address = 256\n")
    d = env.start(conf=hub.conf)        # makes cancel/
    check(d.stop() == 0, "the daemon stops: nobody claims or answers now")
    hub.start()

    # bob's tasks to cancel, pending in handoff/
    tasks = []
    for i in range(WAITS):
        st, ans = send(hub, "bob", f"task {i}")
        check(st == 200 and "result" in ans, f"SendMessage: {st} {ans}")
        tasks.append(ans["result"]["task"]["id"])
    base_posts, base_health = carol_round(hub, env)
    baseline = max(max(base_posts), max(base_health))
    print(f"carol's baseline: POST median {statistics.median(base_posts) * 1000:.1f} ms, "
          f"/healthz median {statistics.median(base_health) * 1000:.1f} ms, max {baseline * 1000:.1f} ms")

    done, lock = [], threading.Lock()
    stop = threading.Event()

    def until_taken(fn):
        # a request beyond bob's share of threads is refused at once (429):
        # asked again, as his client would
        while True:
            st, ans = fn()
            if st != 429 and not (isinstance(ans, dict) and
                                  ans.get("error", {}).get("data", {}).get("reason") == "rate_limited"):
                return st, ans

    def wait_claimed():
        doc = hdproto.build("bob", "alice", env.key)
        try:
            st, ans = until_taken(lambda: hub.post(doc, "bob", query="?wait=claimed"))
        except (OSError, http.client.HTTPException) as e:
            st, ans = repr(e), None
        with lock:
            done.append(("claimed", st, ans.get("outcome") if isinstance(ans, dict) else ans))

    def wait_cancel(tid):
        try:
            st, ans = until_taken(lambda: rpc(hub, "CancelTask", {"id": tid}, "bob"))
        except (OSError, http.client.HTTPException) as e:
            st, ans = repr(e), None
        with lock:
            done.append(("cancel", st, ans.get("result", {}).get("metadata", {}).get("cancel")
                         if isinstance(ans, dict) else ans))

    lists = {"sent": 0, "answered": 0, "limited": 0}

    def list_loop():
        conn = hub.connect()
        while not stop.is_set():
            with lock:
                lists["sent"] += 1
            try:
                st, ans = rpc(hub, "ListTasks", {}, "bob", conn=conn)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = hub.connect()
                continue
            with lock:
                lists["answered" if st == 200 and "result" in ans else "limited"] += 1
        conn.close()

    threads = [threading.Thread(target=wait_claimed) for _ in range(WAITS)]
    threads += [threading.Thread(target=wait_cancel, args=(t,)) for t in tasks]
    t_waits = time.monotonic()
    for t in threads:
        t.start()
    # each wait is in once its file is in the spool (the POST's handoff,
    # the cancel request), before it waits
    def waits_in():
        return (len(env.names("handoff")) - WAITS - SAMPLES,
                len([n for n in os.listdir(env.path("cancel")) if not n.startswith(".")]))
    # as soon as half of bob's POSTs wait: a first /healthz of carol's
    hdtest.wait_for(lambda: waits_in()[0] >= WAITS // 2, what="half of bob's POSTs in")
    first, st, _ = timed(lambda: hub.get("/healthz"))
    first_pending = 2 * WAITS - len(done)
    print(f"carol's first /healthz with half of bob's POSTs waiting: {first * 1000:.1f} ms "
          f"({first_pending} of bob's waits pending then)")
    try:
        hdtest.wait_for(lambda: waits_in() == (WAITS, WAITS), what="bob's waits in")
    except hdtest.Fail:
        # the stall itself: carol is measured all the same, for the figure
        print(f"bob's waits not all in after {time.monotonic() - t_waits:.1f} s: "
              f"(POST, CancelTask) {waits_in()} of {WAITS} each")
    ramp = time.monotonic() - t_waits
    loops = [threading.Thread(target=list_loop) for _ in range(LOOPS)]
    for t in loops:
        t.start()
    hdtest.wait_for(lambda: lists["sent"] >= LOOPS, what="bob's ListTasks loops running")
    bob_in = waits_in()

    posts, health, pending_at = [], [], []
    for _ in range(SAMPLES):
        for kind, fn in (("post", lambda: hub.post(hdproto.build("carol", "alice", env.key), "carol")),
                         ("healthz", lambda: hub.get("/healthz"))):
            dt, st, ans = timed(fn)
            check(st == 200, f"carol's {kind} under bob's load: {st} {ans}")
            (posts if kind == "post" else health).append(dt)
            with lock:
                pending_at.append(2 * WAITS - len(done))
    loaded = max(max(posts), max(health), first)
    print(f"under bob's {2 * WAITS} waits (in after {ramp:.2f} s) and {LOOPS} ListTasks loops: "
          f"carol's POST median {statistics.median(posts) * 1000:.1f} ms, /healthz median "
          f"{statistics.median(health) * 1000:.1f} ms, max {loaded * 1000:.1f} ms; "
          f"bob's waits pending at each answer: {min(pending_at)}..{max(pending_at)}")
    check(bob_in == (WAITS, WAITS), f"bob's waits in: {bob_in}")
    check(min(pending_at) == 2 * WAITS,
          f"carol's requests were answered only after bob's waits ended ({pending_at})")
    bound = max(2 * baseline, 0.5 * hdtest.SLOW)
    check(loaded < bound, f"carol's requests took {loaded:.3f} s under load, bound {bound:.3f} s")
    print(f"ok: carol answered while all {2 * WAITS} of bob's waits pend, "
          f"{loaded * 1000:.1f} ms < {bound * 1000:.0f} ms")

    for t in threads:
        t.join(timeout=30 * hdtest.SLOW)
    stop.set()
    for t in loops:
        t.join(timeout=30 * hdtest.SLOW)
    check(len(done) == 2 * WAITS, f"bob's waits answered: {len(done)}")
    outcomes = sorted(set((k, s, o) for k, s, o in done))
    check(outcomes == [("cancel", 200, "requested"), ("claimed", 200, "pending")],
          f"bob's waits ended as they stood: {outcomes}")
    print(f"ok: bob's waits answered at their end: {outcomes}; ListTasks answered "
          f"{lists['answered']}, refused for his share {lists['limited']}")
    check(lists["answered"] > 0, "bob's ListTasks loops were answered")
    check(hub.proc.stop() == 0, "the hub stops with 0")


def raw_post(hub, doc, agent):
    c = hub.connect()
    try:
        c.request("POST", "/api/v1/handoffs/start", json.dumps(doc).encode(),
                  {"Content-Type": "application/json",
                   "Authorization": f"Bearer {hub.tokens[agent]}"})
        r = c.getresponse()
        return r.status, r.getheader("Retry-After"), json.loads(r.read())
    finally:
        c.close()


def rate_limited(env):
    hub = hubkit.Hub(env, tokens={"bob": None, "carol": None}, tls=False,
                     extra="rate_per_token = 1\nburst_per_token = 5\n")
    env.start(conf=hub.conf)
    hub.start()
    t0 = time.monotonic()
    answers = []
    for _ in range(20):
        doc = hdproto.build("bob", "alice", env.key)
        st, retry, ans = raw_post(hub, doc, "bob")
        answers.append((st, retry, ans, doc["handoff_id"]))
        if st == 429:
            break
    took = time.monotonic() - t0
    ok = [a for a in answers if a[0] == 200]
    st, retry, ans, hid = answers[-1]
    check(st == 429 and ans.get("reason") == "rate_limited" and retry and int(retry) >= 1,
          f"bob's POST after his burst: {st} Retry-After {retry} {ans}")
    check(5 <= len(ok) <= 5 + int(took) + 1, f"{len(ok)} accepted in {took:.2f} s at 1/s, burst 5")
    check(not os.path.exists(os.path.join(hub.state_dir, hid)) and
          not any(os.path.exists(env.path(s, hid + ".json")) for s in ("handoff", "claimed")) and
          not os.path.exists(env.path("ids", hid)),
          "a refused POST dropped nothing")
    print(f"ok: bob's POST {len(ok) + 1}: 429 rate_limited, Retry-After {retry} ({ans['detail']})")

    st, ans = send(hub, "bob", "one more")
    err = ans.get("error", {}) if isinstance(ans, dict) else {}
    check(st == 200 and err.get("code") == -32603 and
          err.get("data", {}).get("reason") == "rate_limited" and
          err.get("data", {}).get("retryAfterSeconds", 0) >= 1,
          f"bob's SendMessage after his burst: {st} {ans}")
    kept = os.path.join(hub.state_dir, "a2a", "bob")
    check(not os.path.isdir(kept) or os.listdir(kept) == [], "a refused SendMessage kept nothing")
    print(f"ok: bob's SendMessage: {err['code']} {err['message']} {err['data']}")

    st, _, ans = raw_post(hub, hdproto.build("carol", "alice", env.key), "carol")
    check(st == 200, f"carol's POST meanwhile: {st} {ans}")
    st, ans = send(hub, "carol", "carol's own")
    check(st == 200 and "result" in ans, f"carol's SendMessage meanwhile: {st} {ans}")
    print("ok: carol's POST and SendMessage accepted meanwhile")
    check(hub.proc.stop() == 0, "the hub stops with 0")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        waits_hold_no_thread(env)
    with hdtest.Env(agents=["alice"]) as env:
        rate_limited(env)
    print("ok")


if __name__ == "__main__":
    hdtest.run(main)
