"""handoffd claims valid handoffs for served agents and writes a bootstrap
the real consumer accepts; files present before start are processed; files
for agents not served here stay where they are."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    with hdtest.Env(agents=["alice", "gordon"]) as env:
        # Before start: one for alice, one for an agent not served here.
        early = hdproto.build("bob", "alice", env.key, reason="caller asked for alice")
        hdproto.drop(env.spool, early)
        foreign = hdproto.build("bob", "sven", env.key, ttl=600)
        foreign_name = hdproto.drop(env.spool, foreign)

        d = env.start()
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == 1, what="early file claimed and delivered")
        check(foreign_name in env.names("handoff"), "file for sven must stay in handoff/")

        # After start: unicode, extra fields, a producer-named file, and
        # the real writer's file name "{caller_hash}-{seq}.json".
        docs = [
            hdproto.build("bob", "alice", env.key,
                          transcript=[{"role": "user", "text": "caf\u00e9 \U0001F600 \x7f"},
                                      {"role": "system", "text": "tone: calm", "lang": "fr"}],
                          extra={"context_summary": "Caller wants a refund.", "priority": 0.1}),
            hdproto.build("alice", "gordon", env.key, transcript=[]),
        ]
        hdproto.drop(env.spool, docs[0])
        hdproto.drop(env.spool, docs[1], name=f"{docs[1]['caller_hash']}-0.json")
        hdtest.wait_for(lambda: env.count("claimed") == 3 and len(env.bootstraps("alice")) == 2
                        and len(env.bootstraps("gordon")) == 1, what="3 claimed and delivered")

        # Bootstrap, field by field.
        for doc, agent in [(early, "alice"), (docs[0], "alice"), (docs[1], "gordon")]:
            path = os.path.join(env.state[agent], "handoffs", doc["handoff_id"] + ".json")
            check(os.path.exists(path), f"bootstrap missing: {path}")
            st = os.stat(path)
            check(st.st_mode & 0o777 == 0o640, f"bootstrap mode {oct(st.st_mode)}")
            b = json.load(open(path))
            check(b["protocol_version"] == 1, "protocol_version")
            check(b["source"] == "voice_handoff", "source")
            check(b["handoff_id"] == doc["handoff_id"], "handoff_id")
            for k in ("from_agent", "to_agent", "reason", "transcript", "expires_at"):
                check(b[k] == doc[k], f"bootstrap {k}: {b[k]!r} != {doc[k]!r}")
            check(b["accepted_at"].endswith("Z"), "accepted_at in Z")
            check(isinstance(b["resume_context"], str) and b["resume_context"].strip(), "resume_context")
            # The claimed item is the daemon's record: the bootstrap itself
            # (one file, two links), holding the handoff exactly as signed.
            it = env.item(doc["handoff_id"])
            check(it["state"] == "claimed" and it["record"], f"claimed as a record: {it}")
            check(it["handoff"] == doc, "the record holds the handoff as sent")
            check(it["linked"], "the record and the bootstrap are one file")

        b0 = json.load(open(os.path.join(env.state["alice"], "handoffs", docs[0]["handoff_id"] + ".json")))
        # handoffd's line first, the sender's own summary after it, quoted
        # as the sender's (issue 24.8).
        ctx0 = b0["resume_context"].splitlines()
        check(ctx0[0].startswith("bob handed this over to you") and "> Caller wants a refund." in ctx0,
              "own context_summary used, after the verified sender: " + b0["resume_context"])
        be = json.load(open(os.path.join(env.state["alice"], "handoffs", early["handoff_id"] + ".json")))
        check("bob" in be["resume_context"] and "caller asked for alice" in be["resume_context"],
              "rendered resume_context names sender and reason: " + be["resume_context"])

        # The real consumer (read, check, unlink; no handoffd involved).
        for doc, agent in [(early, "alice"), (docs[0], "alice"), (docs[1], "gordon")]:
            ctx = hdtest.real_consumer(env.state[agent], doc["handoff_id"])
            check(ctx, f"real consumer refused {doc['handoff_id']}")
        # ... and the daemon archives them as consumed.
        hdtest.wait_for(lambda: env.count("archive") == 3, what="3 archived as consumed")
        for n in env.items("archive"):
            o = json.load(open(env.path("archive", n + ".outcome")))
            check(o["outcome"] == "consumed", f"outcome {o}")
            parts = n.split("-")
            check(parts[0].isdigit() and n.endswith(o["handoff_id"] + ".json"), f"archive name {n}")
        check(env.count("claimed") == 0, "claimed/ empty after consume")
        check(foreign_name in env.names("handoff"), "sven's file still there")
        check(env.count("rejected") == 0, f"nothing rejected: {env.names('rejected')}")
        st = d.status()
        check(st["counters"]["claimed"] == 3 and st["counters"]["consumed"] == 3, f"counters {st['counters']}")
        rc = d.stop()
        check(rc == 0, f"SIGTERM exit code {rc}")
        print("claimed 3, consumed 3, left 1 for an unserved agent")


hdtest.run(main)
