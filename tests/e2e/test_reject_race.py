"""A claim and a rejection of one handoff exclude each other (issue 33,
store_reject_from()).  Two handoffd on one spool that reach different
verdicts on the same files: d0 does not hold the key bob signs with (a
reload not yet made on every daemon), so it rejects them as bad_mac, d1
claims them.  HD_RACE_N handoffs (default 1,000) dropped while both run.

Each one must end in exactly one place.  On 7439fbb a rejection took no
lock and linked the file into rejected/ while d1's claim, its record made,
had not yet removed the producer's file from handoff/: 91 to 310 of
1,000 ended both claimed and rejected (and, through the relay, the origin
was told "rejected" for a handoff that was delivered)."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

N = int(os.environ.get("HD_RACE_N", "1000"))


def main():
    with hdtest.Env(agents=["alice"]) as env:
        other = os.path.join(env.dir, "other.key")
        hdproto.make_key(other)
        d0 = env.start(name="d0", conf=env.write_config(
            "d0", text=env.config_text("d0").replace(env.key_path, other)))
        d1 = env.start(name="d1")
        ids = set()
        for _ in range(N):
            doc = hdproto.build("bob", "alice", env.key, ttl=600)
            hdproto.drop(env.spool, doc)
            ids.add(doc["handoff_id"])
        # a claim's record and a rejection's link are made before the
        # name leaves handoff/: once it is empty, every one is placed
        hdtest.wait_for(lambda: not env.names("handoff"), timeout=120, what="handoff/ drained")
        claimed = set(n[:-5] for n in env.items("claimed"))
        rejected = set(n[:-5] for n in env.items("rejected"))
        both = claimed & rejected
        print(f"- {N} handoffs, d0 without bob's key, d1 with it: {len(claimed)} claimed, "
              f"{len(rejected)} rejected, {len(both)} both")
        check(not both, f"{len(both)} both claimed and rejected, e.g. {sorted(both)[:3]}")
        check(claimed | rejected == ids, f"{len(ids - claimed - rejected)} in neither")
        reasons = {env.reason_of(n + ".json").get("reason") for n in rejected}
        check(reasons <= {"bad_mac"}, f"rejected for {reasons}")
        for d in (d0, d1):
            check(d.stop() == 0, f"{d.name} exit 0")


if __name__ == "__main__":
    hdtest.run(main)
