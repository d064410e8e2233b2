"""One daemon per spool runs the relay (issue 43, item 13): receipts/
journal is one daemon's file, appended through an O_APPEND descriptor and
rewritten whole (a new file renamed over it) at each start.  A second
handoffd with [relay] on the same spool rewrote it at its start, and the
first one's records from then on went to the replaced file: after the
second one stopped again, the first relayed N handoffs and none of their
"sent" records was in receipts/journal.

Now the relay takes byte 2 of SPOOL/.lock: the second daemon's start ends
with exit 1 and "Cannot start the relay: another handoffd on this spool
runs it"; the first one's records of the N handoffs it then relays are
all in the journal."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402

N = 5


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        h.enable_receipts()
        a = h.start_a()
        b = h.start_b()
        relaykit.wait_ready(a, b)
        # a second daemon with [relay] on a's spool
        a2 = h.a.start(name="a2", wait=False,
                       extra=h.a.extra + h.relay_conf("a", [(x, "b") for x in h.b_agents]))
        hdtest.wait_for(lambda: a2.proc.poll() is not None or "READY=1" in a2.messages,
                        30 * hdtest.SLOW, "the second daemon's start to end or be ready")
        if a2.proc.poll() is None:
            print("- the second daemon with [relay] on the spool started; stopped again")
            a2.stop()
        rc = a2.proc.wait()
        said = "Cannot start the relay: another handoffd on this spool runs it" in a2.logs()
        print(f"- the second daemon's start: exit {rc}, said why: {said}")
        ids = h.drop(N)
        h.wait_delivered(ids)
        hdtest.wait_for(lambda: all(i in h.relayed_on_a() for i in ids), 30 * hdtest.SLOW,
                        "all archived as relayed on a")
        # a's sent record is appended just after its archive's move: it may
        # still be on its way when the archive is seen, so wait for it
        def missing_now():
            recs, torn = relaykit.journal_records(h.a.spool)
            sent = {f[0] for k, f in recs if k == "sent"}
            return [i for i in ids if i not in sent], torn
        try:
            hdtest.wait_for(lambda: not missing_now()[0], 10, "the sent records")
        except hdtest.Fail:
            pass        # the check below says how many are missing
        missing, torn = missing_now()
        print(f"- a relayed {N}: {N - len(missing)} of their sent records in receipts/journal")
        check(not missing, f"{len(missing)} of {N} sent records lost from receipts/journal")
        check(rc == 1 and said, f"the second daemon: exit {rc}, want 1 and the line:\n"
                                f"{a2.logs()[-2000:]}")
        check(torn == 0, f"{torn} torn bytes at the journal's end")


hdtest.run(main)
