"""A claimed item whose producer's temp name a power cut kept (issue 26).

The gptme-voice writer writes tmp/.<id>.json.tmp and renames it into
handoff/ without a sync; another producer's sync of tmp/ can make the temp
name durable while the rename is not, and the daemon's claim then links the
same inode into claimed/.  After the cut, claimed/<id>.json has two links,
the other in tmp/.  Found by tests/e2e/test_powercut.py (1 in 200 cuts:
'claimed without bootstrap'): the item was taken for tampered (a hard link)
and left in claimed/ without a bootstrap or a log line.  Now the tmp/ name
is removed at the next look and the item is delivered.  Since issue 25 a
claim is the daemon's own record, never the producer's inode, so only an
earlier version's spool can hold this: the item is delivered and its
record replaces the producer's file (one file with the bootstrap)."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    with hdtest.Env(agents=["alice"], fsync=True) as env:
        check(env.start().stop() == 0, "the first start makes the spool")
        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = doc["handoff_id"]
        tmp = env.path("tmp", f".{hid}.json.tmp")
        with open(tmp, "wb") as f:
            f.write(hdproto.dumps(doc))
        claimed = env.path("claimed", f"{hid}.json")
        os.link(tmp, claimed)
        d = env.start()
        try:
            hdtest.wait_for(lambda: f"{hid}.json" in env.bootstraps("alice"), 10,
                            "the claimed item with a tmp/ twin delivered")
        except hdtest.Fail:
            pass
        delivered = f"{hid}.json" in env.bootstraps("alice")
        twin = os.path.exists(tmp)
        links = os.stat(claimed).st_nlink if os.path.exists(claimed) else 0
        it = env.item(hid)
        print(f"claimed item with its producer's tmp/ name beside it: delivered {delivered}, "
              f"tmp/ name left {twin}, claimed links {links}")
        check(delivered, f"not delivered:\n{d.logs()}")
        check(not twin, "the tmp/ name is still there")
        check(it["record"] and it["linked"] and links == 2 and it["handoff"] == doc,
              f"claimed/{hid}.json is not the daemon's record of it, one file with the "
              f"bootstrap: {links} links, {it}")
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
