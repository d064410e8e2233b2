"""An item that a killed daemon counted in the inbox quota, but did not
claim, is judged again by another daemon without its own count.

Several daemons serve one spool (test_quota_multi.py).  A claim counts its
item in quota/ (a hard link named by its id) before it writes the claim's
record; a daemon killed between the two leaves the count behind, and the
file still in handoff/.  quota_repair() removes such counts, but only at
a start and at the housekeeping (rescan_interval).  Until then another
daemon judges the file again, and if it counted the item against its own
stale link it rejected it as inbox_full while its place stood empty
(test_quota_multi failed so: "after the kill: bob 97 wait, wanted 100",
with a killed daemon's batch of counts left for the others).

Here one daemon, [spool] max_waiting_per_sender = 3, no housekeeping for
an hour: bob's first two are claimed.  Then the count a killed peer leaves
for a third, X, is made as quota.c's count_in() makes it (links of
alice/count, alice/senders/bob and alice/shared named by X's id), and X
is dropped: it is claimed (3 of bob's wait), and the count names exactly
the claimed items.  A fourth of bob's is rejected as inbox_full: the
adopted count holds X once."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

PER = 3


def main():
    with hdtest.Env(agents=["alice"]) as env:
        text = env.config_text("d0") + \
            f"\n[spool]\nmax_waiting_per_sender = {PER}\nmax_waiting = 10\nrescan_interval = 3600\n"
        d = env.start(name="d0", conf=env.write_config("d0", text=text))
        q = env.path("quota", "alice")

        def published(n):
            hdtest.wait_for(lambda: len(env.bootstraps("alice")) == n and env.count("claimed") == n
                            and not env.names("handoff"), what=f"{n} claimed and published")

        def counted():
            return sorted(os.listdir(os.path.join(q, "ids")))

        for _ in range(PER - 1):
            hdproto.drop(env.spool, hdproto.build("bob", "alice", env.key, ttl=600))
        published(PER - 1)

        x = hdproto.build("bob", "alice", env.key, ttl=600)
        xid = x["handoff_id"]
        for anchor, link in (("count", f"ids/{xid}"), ("senders/bob", f"by-sender/{xid}"),
                             ("shared", f"by-shared/{xid}")):
            os.link(os.path.join(q, anchor), os.path.join(q, link))
        n = os.stat(os.path.join(q, "senders", "bob")).st_nlink - 1
        check(n == PER, f"bob's count with the killed peer's: {n}, want {PER}")
        hdproto.drop(env.spool, x)
        hdtest.wait_for(lambda: xid + ".json" in env.bootstraps("alice") or
                        xid + ".json" in env.items("rejected"), what="X decided")
        check(xid + ".json" in env.bootstraps("alice"),
              f"X, counted by a killed peer, was rejected: "
              f"{env.reason_of(xid + '.json') if xid + '.json' in env.items('rejected') else ''}")
        published(PER)
        claimed = sorted(n[:-5] for n in env.items("claimed"))
        check(counted() == claimed, f"the count {counted()} is not claimed/ {claimed}")
        print(f"- X, counted by a killed peer and still in handoff/, claimed: {PER} of bob's wait")

        y = hdproto.build("bob", "alice", env.key, ttl=600)
        hdproto.drop(env.spool, y)
        hdtest.wait_for(lambda: y["handoff_id"] + ".json" in env.items("rejected") or
                        y["handoff_id"] + ".json" in env.bootstraps("alice"), what="Y decided")
        got = env.reason_of(y["handoff_id"] + ".json").get("reason") \
            if y["handoff_id"] + ".json" in env.items("rejected") else "claimed"
        check(got == "inbox_full", f"bob's fourth: {got}, want inbox_full")
        n = os.stat(os.path.join(q, "senders", "bob")).st_nlink - 1
        check(n == PER and counted() == claimed, f"after the fourth: bob's count {n}, ids {counted()}")
        print("- bob's fourth rejected as inbox_full: the count holds X once")
        check(d.stop() == 0, "exit 0")


if __name__ == "__main__":
    hdtest.run(main)
