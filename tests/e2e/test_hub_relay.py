"""A POST to the hub on host a for an agent served on host b: accepted on a
(alice is a [remote] there), relayed through a real nats-server by a's
handoffd, unchanged, and delivered once on b; a retry of the same bytes
gets the same answer and nothing more is delivered.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    relaykit.skip_without_nats()
    with relaykit.Hosts() as h:
        hub = hubkit.Hub(h.a, tokens={"bob": None})
        h.a.extra = h.a.extra + "\n" + hub.section
        h.start_a()
        h.start_b()
        hub.conf = os.path.join(h.a.dir, "a.conf")
        hub.start()
        docs = [hdproto.build("bob", agent, h.a.key, ttl=600) for agent in ("alice", "gordon") * 5]
        ids = [d["handoff_id"] for d in docs]
        for d in docs:
            st, a = hub.post(d, "bob")
            check(st == 200 and a == {"status": "accepted", "handoff_id": d["handoff_id"]},
                  f"posted on a for {d['to_agent']}@b: {st} {a}")
        h.wait_delivered(ids)
        h.check_exactly_once(ids)
        print(f"ok: {len(ids)} posted to the hub on a, relayed, delivered once on b")
        st, a = hub.post(docs[0], "bob")
        check(st == 200 and a.get("handoff_id") == ids[0], f"retry: {st} {a}")
        st, item = hub.get(f"/api/v1/handoffs/{ids[0]}", "bob")
        check(st == 200 and item.get("status") == "relayed", f"GET after the relay: {st} {item}")
        h.check_exactly_once(ids)
        print("ok: a retry after the relay: the same answer, no second delivery; GET says relayed")


if __name__ == "__main__":
    hdtest.run(main)
