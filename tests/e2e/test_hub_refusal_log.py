"""handoff-hubd logs each refusal (issue 36.7): a sender whose client shows
only "HTTP Error 422: Unprocessable Content" (gptme-voice's
HandoffHubWriter) finds the reason in the answer's body, and the
operator finds it in the hub's log: one line per refused post, with the
peer's address, the token's agent, the status, the reason code, the
detail and the handoff_id when the post has one.

- bad MAC (422 bad_mac), unknown target (422 unknown_agent), expired (422
  expired), another document under an accepted id (409 duplicate_id),
  another sender's token (403 forbidden), a wrong content type (415): one
  line each, in order, each naming 127.0.0.1, agent bob and its reason;
- rate-limited like the failed authentications: of 20 more bad posts in
  the same minute, the lines stop at HUB_REFUSAL_LOG_BURST (10 in all),
  the last of them saying the others are counted;
- a failed authentication stays one line of its own kind, not a refusal
  line as well;
- handoff-hubd(8) names the line, and the README's section for
  HandoffHubWriter users says the reason is in the response body.

Real hub and daemon, plain HTTP on loopback."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check, SRC  # noqa: E402

BURST = 10


def refusal_lines(hub_proc):
    return [ln for ln in hub_proc.logs().splitlines() if "refused a post from" in ln]


def main():
    with hdtest.Env(agents=["alice"]) as env:
        hub = hubkit.Hub(env, tokens={"bob": None, "carol": None}, tls=False)
        d = env.start(conf=hub.conf)
        hp = hub.start()

        good = hdproto.build("bob", "alice", env.key)
        st, ans = hub.post(good, "bob")
        check(st == 200, f"a good post: {st} {ans}")

        bad = dict(good, handoff_id="bad-mac-1", reason="changed after signing")
        other = dict(good, reason="another document")
        other = hdproto.sign({k: v for k, v in other.items() if k != "hmac"}, env.key)
        cases = [
            ("bad MAC", lambda: hub.post(bad, "bob"), 422, "bad_mac", "bad-mac-1"),
            ("unknown target", lambda: hub.post(hdproto.build("bob", "nobody", env.key,
                                                             handoff_id="to-nobody-1"), "bob"),
             422, "unknown_agent", "to-nobody-1"),
            ("expired", lambda: hub.post(hdproto.build(
                "bob", "alice", env.key, handoff_id="old-1",
                at=hdproto.now() - hdproto.timedelta(seconds=120), ttl=60), "bob"),
             422, "expired", "old-1"),
            ("another document under an accepted id", lambda: hub.post(other, "bob"), 409,
             "duplicate_id", good["handoff_id"]),
            ("another sender's token", lambda: hub.post(hdproto.build("bob", "alice", env.key,
                                                                      handoff_id="as-carol-1"),
                                                        "carol"),
             403, "forbidden", "as-carol-1"),
            ("a wrong content type", lambda: hub.post(good, "bob", ctype="text/plain"), 415,
             "unsupported_media_type", None),
        ]
        for i, (what, post, status, reason, hid) in enumerate(cases):
            st, ans = post()
            check(st == status and isinstance(ans, dict) and ans.get("reason") == reason,
                  f"{what}: want {status} {reason}, got {st} {ans}")
            lines = hdtest.wait_for(lambda: len(refusal_lines(hp)) > i and refusal_lines(hp),
                                    what=f"the hub's line for {what}")
            ln = lines[i]
            print(f"- {what}: {ln}")
            agent = "carol" if reason == "forbidden" else "bob"
            check(f"from agent {agent} at 127.0.0.1: {status} {reason}: " in ln,
                  f"{what}: the line does not name the peer, the sender and the reason: {ln!r}")
            check(ans.get("detail", "")[:40] in ln, f"{what}: the line lacks the detail {ans.get('detail')!r}")
            if hid:
                check(f'handoff_id "{hid}"' in ln, f"{what}: the line does not name handoff_id {hid}")

        # A failed authentication: its own line, not a refusal line too.
        n = len(refusal_lines(hp))
        st, _ = hub.post(good, token="z" * 40)
        check(st == 401, f"a wrong token: {st}")
        hdtest.wait_for(lambda: "authentication failed from 127.0.0.1" in hp.logs(),
                        what="the failed authentication's line")

        # A flood: lines stop at the burst, the last says the rest are counted.
        for k in range(20):
            st, _ = hub.post(dict(bad, handoff_id=f"bad-mac-flood-{k}"), "bob")
            check(st == 422, f"flood post {k}: {st}")
        lines = refusal_lines(hp)
        print(f"refusal lines after {n} + 20 refused posts: {len(lines)}")
        check(len(lines) == BURST, f"{len(lines)} refusal lines, want {BURST} (the burst)")
        check("counted and said every 60 s" in lines[-1], f"the last line does not say so: {lines[-1]!r}")
        check(not any("authentication failed" in ln for ln in lines), "a failed authentication "
              "logged as a refusal")

        page = open(os.path.join(SRC, "man", "handoff-hubd.8")).read()
        page = re.sub(r"\s+", " ", re.sub(r"^\.\w+ ?", "", page, flags=re.M).replace('"', " "))
        check("refused a post from agent AGENT at ADDRESS" in page,
              "handoff-hubd(8) does not name the refusal line")
        readme = open(os.path.join(SRC, "README.md")).read()
        sec = re.search(r"^## Agents on other machines\n(.*?)^## ", readme, re.S | re.M).group(1)
        check("HandoffHubWriter" in sec and "response body" in sec and "e.read()" in sec,
              "the README's hub section does not say the reason is in the response body")
        hp.stop()
        check(d.stop() == 0, "the daemon stops")
    print("ok: one line per refusal with peer, sender, reason and id, rate-limited")


hdtest.run(main)
