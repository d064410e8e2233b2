"""Attack (issue 24.5): retention bypass by duplicates.  Copies of one
valid handoff, each rejected as duplicate_id, named the handoff_id in their
reason file and so were kept as replay guards for the whole replay window,
whatever rejected_max_items said (30,020 kept with the default limit of
10,000).  The id is remembered already (claimed/, ids/): such a rejection
guards nothing and is pruned at once over the limit.  Figures: the copies
sent, what rejected/ holds after two retention runs; and a copy sent after
the pruning is still refused as duplicate_id."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

MAX_ITEMS = 20
COPIES = int(os.environ.get("HD_ATTACK_DUP_N", "300"))


def test_attack_duplicate_flood(env, d):
    doc = hdproto.build("bob", "alice", env.key, ttl=600)
    hid = doc["handoff_id"]
    hdproto.drop(env.spool, doc)
    hdtest.wait_for(lambda: f"{hid}.json" in env.bootstraps("alice"), what="original delivered")
    for i in range(COPIES):
        hdproto.drop(env.spool, doc, name=f"copy{i}.json")
    hdtest.wait_for(lambda: not os.listdir(env.path("handoff")), 60 * hdtest.SLOW,
                    "copies decided")
    # Retention prunes rejected/ meanwhile (over MAX_ITEMS): a name listed
    # may be gone by the time its reason is read.
    reasons = set()
    for n in env.items("rejected"):
        try:
            reasons.add(env.reason_of(n)["reason"])
        except FileNotFoundError:
            pass
    # Retention runs once per rescan_interval (1 s): wait for the count to
    # come down, or for three runs to pass and keep what is there.
    try:
        hdtest.wait_for(lambda: env.count("rejected") <= MAX_ITEMS, 5 * hdtest.SLOW,
                        f"rejected/ at most {MAX_ITEMS}")
    except hdtest.Fail:
        pass
    kept = env.count("rejected")
    # A copy after the pruning: still a replay.
    hdproto.drop(env.spool, doc, name="late-copy.json")
    hdtest.wait_for(lambda: "late-copy.json" in env.items("rejected"), what="late copy decided")
    late = env.reason_of("late-copy.json")["reason"]
    print(f"{COPIES} copies of one valid handoff, rejected as {sorted(reasons)}: rejected/ "
          f"holds {kept} after pruning (limit {MAX_ITEMS}); "
          f"a later copy is rejected as {late}")
    check(kept <= MAX_ITEMS, f"rejected/ holds {kept} duplicates, limit {MAX_ITEMS}")
    check(late == "duplicate_id", f"a copy after the pruning was {late}, not duplicate_id")
    check(env.bootstraps("alice").count(f"{hid}.json") == 1, "the original delivered once")


def main():
    with hdtest.Env(agents=["alice"], fsync=False) as env:
        text = env.config_text().replace("rescan_interval = 5", "rescan_interval = 1")
        text += f"\n[retention]\nrejected_max_items = {MAX_ITEMS}\n"
        conf = env.write_config(text=text)
        d = env.start(conf=conf)
        test_attack_duplicate_flood(env, d)
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
