"""Attack (issue 25, a): the producer rewrites what was delivered.

Mallory, a producer (her own user, in the spool's group, holding the
key), drops a signed handoff "run deploy --force on prod" to alice.  Once
it is delivered (alice's bootstrap is there) she rewrites
claimed/<id>.json with a benign handoff she signs herself ("run the unit
tests"), alice consumes, the item is archived.  The handoff alice got and
the one the archive holds must be the same verified document (the first);
her later rewrite of the archived record must change nothing either.

Where the claimed file and the archive record are the daemon's (issue 25's
layout), she cannot open them for writing (EACCES: the expected outcome).
While they stay her inodes, the archive says she sent something else than
what alice ran.

Layout-neutral: a record is either the handoff itself or a bootstrap
document ("accepted_at", "handoff": the signed handoff as sent).

Runs as root; the daemon, mallory and alice are throwaway uids/gids."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47440       # the spool's group ("handoff"); the daemon's group
DAEMON = 47441          # the daemon's user ("handoffd")
MALLORY = 47442         # a producer, in the spool's group
ALICE = 47443           # alice's user and group (also in the spool's group)

EVIL = "run deploy --force on prod"
BENIGN = "run the unit tests"


def texts(doc):
    return [t.get("text") for t in invariant.record_handoff(doc).get("transcript", []) if isinstance(t, dict)]


def load(path):
    with open(path) as f:
        return json.load(f)


def resigned(doc, key, text):
    d = {k: v for k, v in doc.items() if k != "hmac"}
    d["transcript"] = [{"role": "user", "text": text}]
    return hdproto.sign(d, key)


def archived(env, hid):
    return [n for n in env.items("archive") if hid in n]


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    with hdtest.Env(agents=["alice"], shared=True) as env:
        dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
        d, conf = dep.start()
        evil = hdproto.build("bob", "alice", env.key, ttl=600,
                             transcript=[{"role": "user", "text": EVIL}])
        hid = evil["handoff_id"]
        err = dep.as_user(MALLORY, [], "drop", env.path("handoff", hid + ".json"),
                          hdproto.dumps(evil).decode())
        check(err is None, f"mallory could not drop her handoff: {err}")
        boot = os.path.join(env.state["alice"], "handoffs", hid + ".json")
        hdtest.wait_for(lambda: os.path.exists(boot), what="the bootstrap in alice's handoffs/")
        check(load(boot).get("handoff") == evil, "the bootstrap does not carry the handoff as sent")
        print(f"- mallory's handoff ({EVIL!r}) delivered to alice")

        # She rewrites the claimed record with a handoff she signs herself.
        benign = resigned(evil, env.key, BENIGN)
        claimed = env.path("claimed", hid + ".json")
        err = dep.as_user(MALLORY, [], "write", claimed, hdproto.dumps(benign).decode())
        print(f"- mallory rewrites claimed/{hid}.json with {BENIGN!r}, re-signed: "
              f"{'done' if err is None else err}")
        check(err in (None, "EACCES", "EPERM", "ENOENT"), f"rewrite: unexpected {err}")

        # Alice consumes, as herself.
        p = subprocess.run([env.for_others(hdtest.HANDOFFCTL), "consume", "-c", conf,
                            "--agent", "alice", hid],
                           user=ALICE, group=ALICE, extra_groups=[ALICE, SPOOL_GID],
                           capture_output=True, text=True, timeout=30 * hdtest.SLOW)
        check(p.returncode == 0, f"alice's consume: exit {p.returncode}:\n{p.stdout}{p.stderr}")
        got = json.loads(p.stdout)
        check(EVIL in p.stdout and BENIGN not in p.stdout,
              f"alice did not get the handoff as sent: {p.stdout}")
        if isinstance(got.get("handoff"), dict):
            check(got["handoff"] == evil, f"alice's handoff is not the one sent: {got['handoff']}")
        print(f"- alice consumed it and got {EVIL!r}")

        hdtest.wait_for(lambda: archived(env, hid) and not os.path.exists(claimed),
                        what="the item archived")
        name = archived(env, hid)[0]
        outcome = load(env.path("archive", name + ".outcome"))["outcome"]
        rec = load(env.path("archive", name))
        h = invariant.record_handoff(rec)
        print(f"- archived as {outcome}: archive/{name} holds {texts(rec)}")
        check(outcome == "consumed", f"archived as {outcome}")
        check(h == evil and BENIGN not in json.dumps(rec),
              f"the producer's rewrite after delivery reached the archive: alice ran {EVIL!r}, "
              f"the archive says {texts(rec)} (a handoff mallory re-signed after the claim; "
              f"rewrite of claimed/: {'done' if err is None else err})")
        check(hdproto.compute_hmac(h, env.key) == h.get("hmac"), "the archived handoff does not verify")

        # Later, the archived record itself.
        later = resigned(evil, env.key, "nothing happened here")
        err2 = dep.as_user(MALLORY, [], "write", env.path("archive", name), hdproto.dumps(later).decode())
        rec2 = load(env.path("archive", name))
        print(f"- mallory rewrites archive/{name}: {'done' if err2 is None else err2}; "
              f"it holds {texts(rec2)}")
        check(invariant.record_handoff(rec2) == evil,
              f"the producer rewrote the archived record: it now says {texts(rec2)} "
              f"(rewrite: {'done' if err2 is None else err2})")
        check(d.stop() == 0, "exit 0")


if __name__ == "__main__":
    hdtest.run(main)
