"""Attack (issue 25, b): the producer's chmod or rewrite after the claim.

Mallory, a producer (her own user, in the spool's group), and the daemon
under its own user, as packaged:

(a) after delivery she runs chmod 000 on claimed/<id>.json: the bootstrap
    must still be withdrawn at its resume window and the item archived as
    expired, and `handoffctl status` must not stay degraded;
(c) after delivery she rewrites claimed/<id>.json to {"garbage":true}:
    the bootstrap still expires (or is consumed) as usual, and what alice
    got and what the archive holds is the verified handoff as sent;
(b) she leaves a 0600 file of hers (unreadable by the daemon's user) in
    handoff/: it is rejected into rejected/ with reason "unreadable"
    within a bounded time, and the daemon's error counter does not keep
    growing across rescans.

Where the claimed file is the daemon's (issue 25's layout), her chmod and
rewrite fail (EPERM, EACCES: the expected outcome).  Records are read
layout-neutrally: the handoff itself or a bootstrap document holding it.

Runs as root; the daemon, mallory and alice are throwaway uids/gids."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402

SPOOL_GID = 47450       # the spool's group ("handoff"); the daemon's group
DAEMON = 47451          # the daemon's user ("handoffd")
MALLORY = 47452         # a producer, in the spool's group
ALICE = 47453           # alice's user and group (also in the spool's group)

WINDOW = 2              # resume_window, s
BOUND = 15              # generous: the window, a few rescans, a loaded machine


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"unreadable": str(e)}


def waited(pred, timeout):
    """pred() within timeout s (scaled for sanitizers): True, else False."""
    try:
        hdtest.wait_for(pred, timeout)
        return True
    except hdtest.Fail:
        return False


def archived(env, hid):
    return [n for n in env.items("archive") if hid in n]


def outcome(env, hid):
    a = archived(env, hid)
    return load(env.path("archive", a[0] + ".outcome")).get("outcome") if a else None


def counters(d):
    return d.status()["counters"]


class Attack:
    def __init__(self, env, dep, d, conf):
        self.env, self.dep, self.d, self.conf = env, dep, d, conf

    def deliver(self, text):
        env = self.env
        doc = hdproto.build("bob", "alice", env.key, ttl=600,
                            transcript=[{"role": "user", "text": text}])
        hid = doc["handoff_id"]
        err = self.dep.as_user(MALLORY, [], "drop", env.path("handoff", hid + ".json"),
                               hdproto.dumps(doc).decode())
        check(err is None, f"mallory could not drop: {err}")
        boot = os.path.join(env.state["alice"], "handoffs", hid + ".json")
        hdtest.wait_for(lambda: os.path.exists(boot), what=f"{hid} delivered")
        got = load(boot)
        check(got.get("handoff") == doc, f"the bootstrap does not carry the handoff as sent: {got}")
        return doc, hid, boot

    def state(self, hid, boot):
        env = self.env
        c = counters(self.d)
        return (f"bootstrap {'still there' if os.path.exists(boot) else 'gone'}, "
                f"claimed/ {[n for n in env.names('claimed') if hid in n]}, "
                f"archive/ {archived(env, hid)} ({outcome(env, hid)}), "
                f"daemon errors {c['errors']}, expired {c['expired']}")

    def check_archive(self, doc, hid, want):
        env = self.env
        o = outcome(env, hid)
        rec = load(env.path("archive", archived(env, hid)[0]))
        check(o == want, f"{hid} archived as {o}, not {want}")
        check(invariant.record_handoff(rec) == doc,
              f"the archive does not hold the handoff as sent and verified: {json.dumps(rec)[:300]}")


def part_a(t):
    """chmod 000 after delivery: expired at its window all the same."""
    env = t.env
    doc, hid, boot = t.deliver("(a) chmod 000")
    t0 = time.monotonic()
    err = t.dep.as_user(MALLORY, [], "chmod", env.path("claimed", hid + ".json"), "000")
    print(f"(a) mallory: chmod 000 claimed/{hid}.json: {'done' if err is None else err}")
    check(err in (None, "EPERM", "EACCES", "ENOENT"), f"chmod: unexpected {err}")
    ok = waited(lambda: not os.path.exists(boot) and outcome(env, hid) == "expired", BOUND)
    print(f"(a) {WINDOW}s resume window, after {time.monotonic() - t0:.1f}s: {t.state(hid, boot)}")
    check(ok, f"after the producer's chmod 000 of claimed/{hid}.json the bootstrap was not expired "
          f"at its {WINDOW}s resume window: {BOUND}s later {t.state(hid, boot)}")
    t.check_archive(doc, hid, "expired")
    p = env.ctl("status", "-c", t.conf, "--json")
    st = json.loads(p.stdout)
    print(f"(a) status: exit {p.returncode}, {st.get('health')}, problems {st.get('problems')}")
    check(p.returncode == 0 and st.get("health") == "healthy",
          f"status degraded after the producer's chmod: exit {p.returncode}, {st.get('problems')}")


def part_c_expire(t):
    part_c(t, "expire")


def part_c_consume(t):
    part_c(t, "consume")


def part_c(t, how):
    """{"garbage":true} written over a claimed file after delivery: it
    expires, or alice consumes it, as if nothing happened."""
    env = t.env
    doc, hid, boot = t.deliver(f"(c) garbage then {how}")
    t0 = time.monotonic()
    err = t.dep.as_user(MALLORY, [], "write", env.path("claimed", hid + ".json"),
                        '{"garbage":true}')
    print(f"(c) mallory: claimed/{hid}.json := {{\"garbage\":true}}: "
          f"{'done' if err is None else err}")
    check(err in (None, "EPERM", "EACCES", "ENOENT"), f"rewrite: unexpected {err}")
    if how == "consume":
        p = subprocess.run([env.for_others(hdtest.HANDOFFCTL), "consume", "-c", t.conf,
                            "--agent", "alice", hid],
                           user=ALICE, group=ALICE, extra_groups=[ALICE, SPOOL_GID],
                           capture_output=True, text=True, timeout=30 * hdtest.SLOW)
        check(p.returncode == 0 and "garbage then consume" in p.stdout,
              f"alice's consume: exit {p.returncode}:\n{p.stdout}{p.stderr}")
    want = "expired" if how == "expire" else "consumed"
    ok = waited(lambda: not os.path.exists(boot) and outcome(env, hid) == want, BOUND)
    print(f"(c) {how}, after {time.monotonic() - t0:.1f}s: {t.state(hid, boot)}")
    check(ok, f"after the producer wrote {{\"garbage\":true}} over claimed/{hid}.json the item "
          f"was not archived as {want} ({how}): {BOUND}s later {t.state(hid, boot)}")
    t.check_archive(doc, hid, want)


def part_b(t):
    """A 0600 file of hers in handoff/: rejected as unreadable, once."""
    env = t.env
    doc = hdproto.build("bob", "alice", env.key, ttl=600)
    name = doc["handoff_id"] + ".json"
    c0 = counters(t.d)
    t0 = time.monotonic()
    err = t.dep.as_user(MALLORY, [], "drop600", env.path("handoff", name), hdproto.dumps(doc).decode())
    check(err is None, f"mallory could not drop: {err}")
    # (the daemon may have rejected it already: wherever it is now)
    where = [p for p in (env.path("handoff", name), env.path("rejected", name)) if os.path.exists(p)]
    check(where and os.stat(where[0]).st_mode & 0o777 == 0o600, f"not 0600: {where}")

    def reason():
        try:
            return env.reason_of(name).get("reason")
        except (OSError, ValueError):
            return None
    ok = waited(lambda: name in env.items("rejected") and reason(), BOUND)
    c1 = counters(t.d)
    where = ("rejected/ as " + str(reason())) if name in env.items("rejected") else \
        "handoff/" if name in env.names("handoff") else "nowhere"
    print(f"(b) mallory's 0600 file in handoff/, after {time.monotonic() - t0:.1f}s: in {where}; "
          f"daemon errors {c0['errors']} -> {c1['errors']} over {c1['rescans'] - c0['rescans']} rescan(s)")
    check(ok and reason() == "unreadable",
          f"the producer's 0600 file was not rejected as unreadable within {BOUND}s: it is in "
          f"{where}, the daemon's errors went {c0['errors']} -> {c1['errors']} over "
          f"{c1['rescans'] - c0['rescans']} rescans")
    check(doc["handoff_id"] not in "".join(env.bootstraps("alice")), "an unreadable file was delivered")
    # Then it is done with: several rescans add no error.
    hdtest.wait_for(lambda: counters(t.d)["rescans"] >= c1["rescans"] + 3, BOUND, "3 rescans")
    c2 = counters(t.d)
    print(f"(b) {c2['rescans'] - c1['rescans']} rescans later: errors {c1['errors']} -> {c2['errors']}")
    check(c2["errors"] == c1["errors"],
          f"the daemon's errors keep growing after the rejection: {c1['errors']} -> {c2['errors']}")


def main():
    if os.geteuid() != 0:
        hdtest.skip("root", "separate users")
    failed = []
    # One daemon each: what one attack leaves behind (an error a second on
    # today's layout) must not decide another's figures.
    for part in (part_a, part_c_expire, part_c_consume, part_b):
        with hdtest.Env(agents=["alice"], shared=True) as env:
            dep = hdtest.Deployed(env, DAEMON, SPOOL_GID, {"alice": ALICE})
            text = env.config_text("d0").replace(
                "rescan_interval = 5", f"rescan_interval = 1\nresume_window = {WINDOW}")
            d, conf = dep.start(text=text)
            try:
                part(Attack(env, dep, d, conf))
            except hdtest.Fail as e:
                print(f"FAIL {part.__name__}: {e}")
                print("  log: " + "\n  log: ".join(d.logs().splitlines()[-8:]))
                failed.append(f"{part.__name__}: {e}")
            check(d.stop() == 0, "exit 0")
    check(not failed, f"{len(failed)} of 4 attacks worked:\n  " + "\n  ".join(failed))


if __name__ == "__main__":
    hdtest.run(main)
