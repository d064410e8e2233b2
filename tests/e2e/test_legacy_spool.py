"""A spool written by the previous version is taken over (issue 25).

Before issue 25 a claimed item was the producer's own file in claimed/,
beside a marker claimed/<id>.delivered once its bootstrap was written; the
bootstrap was a file of its own in the agent's handoffs/.  The new daemon
keeps no marker: its record is the bootstrap itself, linked as
claimed/<id>.json.  This test makes, for each state the previous version
could leave, the files exactly as it left them (from real bootstraps the
daemon wrote: the bootstrap stays, claimed/<id>.json becomes the handoff
as its producer wrote it, the marker is written as delivery.c wrote it),
starts the new daemon on that spool and checks what it does with each:

    never delivered (no marker)          delivered once
    marker, hidden .pending.             published once
    marker, published                    kept for its consumer, consumed once
    marker, taken while down             archived as consumed
    marker, .expire. (expiry cut short)  archived as expired
    published without a marker (older)  kept, consumed once

and that every one still waiting ends as a record (one file with its
bootstrap), no marker left, the spool invariant holding."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402

CASES = ("new", "pending", "published", "taken", "expiring", "unmarked")


def make_legacy(env, hid, case):
    """Turn the new daemon's delivered item hid into what the previous
    version left in state `case`."""
    hd = os.path.join(env.state["alice"], "handoffs")
    boot = os.path.join(hd, hid + ".json")
    claimed = env.path("claimed", hid + ".json")
    with open(claimed) as f:
        rec = json.load(f)
    handoff = invariant.record_handoff(rec)
    # The record's link goes; the producer's file takes its place.
    os.unlink(claimed)
    with open(claimed, "wb") as f:
        f.write(hdproto.dumps(handoff))
    marker = {"handoff_id": hid, "agent": "alice", "bootstrap": hid + ".json",
              "accepted_at": rec["accepted_at"]}
    if case not in ("new", "unmarked"):
        with open(env.path("claimed", hid + ".delivered"), "w") as f:
            json.dump(marker, f, sort_keys=True, separators=(",", ":"))
    if case == "new":
        os.unlink(boot)
    elif case == "pending":
        os.rename(boot, os.path.join(hd, ".pending." + hid + ".json"))
    elif case == "taken":
        os.unlink(boot)
    elif case == "expiring":
        os.rename(boot, os.path.join(hd, ".expire." + hid + ".json"))
    return handoff


def main():
    with hdtest.Env(agents=["alice"], fsync=True) as env:
        d = env.start()
        docs = {c: hdproto.build("bob", "alice", env.key, ttl=600) for c in CASES}
        for doc in docs.values():
            hdproto.drop(env.spool, doc)
        ids = {c: doc["handoff_id"] for c, doc in docs.items()}
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) == len(CASES), what="all delivered")
        check(d.stop() == 0, "exit 0")
        for c, hid in ids.items():
            check(make_legacy(env, hid, c) == docs[c], f"{c}: the record held the handoff")
        before = {c: env.item(hid) for c, hid in ids.items()}
        check(not any(it["record"] for it in before.values()),
              f"the previous version's layout: no record yet: {before}")

        d = env.start(name="d1")
        hdtest.wait_for(lambda: env.count("archive") >= 2 and
                        len(env.bootstraps("alice")) == len(CASES) - 2 and
                        not [n for n in env.names("claimed") if n.endswith(".delivered")],
                        what="the previous version's items taken over")
        after = {c: env.item(hid) for c, hid in ids.items()}
        for c in ("new", "pending", "published", "unmarked"):
            it = after[c]
            check(it["state"] == "claimed" and it["record"] and it["linked"] and
                  it["handoff"] == docs[c] and it["bootstrap"] and not it["hidden"],
                  f"{c}: not a published record: {it}")
        check(after["taken"]["state"] == "archive" and after["taken"]["outcome"] == "consumed",
              f"taken while down: {after['taken']}")
        check(after["expiring"]["state"] == "archive" and after["expiring"]["outcome"] == "expired",
              f"expiry cut short: {after['expiring']}")
        got = {}
        for c in ("new", "pending", "published", "unmarked"):
            got[ids[c]] = 1 if invariant.real_consume(env.state["alice"], ids[c]) else 0
        check(all(got.values()), f"each consumed once: {got}")
        hdtest.wait_for(lambda: env.count("archive") == len(CASES), what="all archived")
        for c in ("new", "pending", "published", "unmarked"):
            check(env.item(ids[c])["outcome"] == "consumed", f"{c}: {env.item(ids[c])}")
        got[ids["taken"]] = 1       # taken by a consumer while the daemon was down
        v = invariant.check(env.spool, env.state, list(ids.values()), consumed=got, settled=True,
                            allow_states=("archive",))
        check(not v, f"invariant: {v}")
        print("previous version's spool: " + ", ".join(
            f"{c} -> {before[c]['state']}: {'record, ' if after[c]['record'] else ''}"
            f"{after[c]['state']}{' (' + after[c]['outcome'] + ')' if after[c]['outcome'] else ''}"
            for c in CASES))
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
