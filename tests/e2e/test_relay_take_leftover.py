"""A take into outbox/ cut short by a crash after its item was relayed
(store_id_note_source()): handoffd was killed after it wrote
outbox/<id>.json and before the producer's name left handoff/, and the
next start relayed and archived the outbox item before intake reached
that name.  The name is the take's leftover: ids/<id> names its file, so
it goes without a verdict.  A file written since the note is a replay:
rejected duplicate_id.  One written before it whose inode the note does
not name goes too, as "archived already": the note is an archive's mark
(issue 48; test_powercut_relay found it once: powercutfs rebuilds the
file system after a cut, so her file came back with another inode, and
the restart relayed and archived the outbox item before its scan reached
her name, which was then rejected as duplicate_id beside its archive).

The note is written into ids/<id> only when the item is archived (from
the take's sidecar outbox/.<id>.src): a take whose outbox/ copy a power
cut lost has no note there, and its file, the only copy, is taken again.

The state is the one test_relay_kill left once in three runs
(rejected on a: duplicate_id for a relayed handoff), made here on disk
before a start: the relayed item's archive is not needed for the
verdict, only ids/<id>."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    with hdtest.Env(agents=["alice"]) as env:
        conf = env.write_config(extra="[relay]\nservers = nats://127.0.0.1:9\nhost = a\n\n"
                                      "[remote gordon]\nhost = b\n")
        d = env.start(conf=conf)
        d.stop()
        ids = os.path.join(env.spool, "ids")
        # the leftover: the producer's file, noted by its take
        left = hdproto.build("bob", "gordon", env.key, ttl=600)
        name = hdproto.drop(env.spool, left)
        st = os.stat(os.path.join(env.spool, "handoff", name))
        with open(os.path.join(ids, left["handoff_id"]), "w") as f:
            f.write(f"src {st.st_dev} {st.st_ino}\narchived\n")
        # a take whose copy a power cut lost: noted, never archived; the
        # file is the only copy and must be taken again, not dropped
        lost = hdproto.build("bob", "gordon", env.key, ttl=600)
        lname = hdproto.drop(env.spool, lost)
        lst = os.stat(os.path.join(env.spool, "handoff", lname))
        with open(os.path.join(env.spool, "outbox", "." + lost["handoff_id"] + ".src"), "w") as f:
            f.write(f"src {lst.st_dev} {lst.st_ino}\n")
        # the leftover after a power cut that rebuilt the file system
        # (powercutfs does): the note in ids/ names the inode her file had
        # before; written after her file, it is still an archive's mark
        moved = hdproto.build("bob", "gordon", env.key, ttl=600)
        mname = hdproto.drop(env.spool, moved)
        mst = os.stat(os.path.join(env.spool, "handoff", mname))
        with open(os.path.join(ids, moved["handoff_id"]), "w") as f:
            f.write(f"src {mst.st_dev} {mst.st_ino + 2000000}\narchived\n")
        # the mark's time strictly after the file's last change (a second on)
        t = mst.st_ctime_ns + 1_000_000_000
        os.utime(os.path.join(ids, moved["handoff_id"]), ns=(t, t))
        # and a replay written after such a note: rejected
        late = hdproto.build("bob", "gordon", env.key, ttl=600)
        with open(os.path.join(ids, late["handoff_id"]), "w") as f:
            f.write(f"src {mst.st_dev} {mst.st_ino + 3000000}\narchived\n")
        # the mark a minute old: the replay's file is changed strictly after it
        t = time.time_ns() - 60_000_000_000
        os.utime(os.path.join(ids, late["handoff_id"]), ns=(t, t))
        lname_late = hdproto.drop(env.spool, late)
        # a replay: the same id, another file
        rep = hdproto.build("bob", "gordon", env.key, ttl=600)
        with open(os.path.join(ids, rep["handoff_id"]), "w") as f:
            f.write(f"src {st.st_dev} {st.st_ino + 1000000}\n")
        rname = hdproto.drop(env.spool, rep)
        d = env.start(conf=conf)
        hdtest.wait_for(lambda: all(not os.path.exists(os.path.join(env.spool, "handoff", n))
                                    for n in (name, rname, mname, lname_late)),
                        20 * hdtest.SLOW, "the four names decided")
        rejected = env.names("rejected")
        print(f"leftover: gone; replay: rejected {sorted(rejected)}")
        check(name not in rejected, f"the take's leftover was rejected: {rejected}")
        check("taken into outbox/ already" in d.logs(), f"no line for the leftover:\n{d.logs()[-2000:]}")
        check(rname in rejected and env.reason_of(rname)["reason"] == "duplicate_id",
              f"the replay: {rejected}")
        check(mname not in rejected, f"the leftover beside a note of another inode was rejected: "
              f"{rejected}")
        hdtest.wait_for(lambda: f"archived already as {moved['handoff_id']}" in d.logs(),
                        10 * hdtest.SLOW, "the leftover beside a note of another inode said")
        check(lname_late in rejected and env.reason_of(lname_late)["reason"] == "duplicate_id",
              f"a copy written after the note: {rejected}")
        check(not os.path.exists(os.path.join(env.spool, "outbox", left["handoff_id"] + ".json")),
              "the leftover was taken again")
        # the only copy: taken again into outbox/, neither dropped nor
        # rejected
        hdtest.wait_for(lambda: os.path.exists(os.path.join(env.spool, "outbox",
                                                            lost["handoff_id"] + ".json")),
                        20 * hdtest.SLOW, "the file whose take a power cut lost, taken again")
        check(lname not in env.names("rejected"), f"it was rejected: {env.names('rejected')}")
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
