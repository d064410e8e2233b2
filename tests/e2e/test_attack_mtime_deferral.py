"""Attack (issue 18.0): a file that never parses, its mtime set years
ahead, must not be deferred ("may still be being written") forever: the
settle time counts from when the daemon first saw the file, not from the
mtime its owner sets.  A file really written in place still gets its
grace and is claimed once complete."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SETTLE_S = 2.0          # src/handoffd/decide.c SETTLE_USEC


def test_attack_mtime_deferral_is_bounded(env):
    h = env.path("handoff", "future.json")
    with open(h, "wb") as f:
        f.write(b'{"never": "ends"')
    ten_years = time.time() + 10 * 365 * 86400
    os.utime(h, (ten_years, ten_years))
    t0 = time.monotonic()
    try:
        hdtest.wait_for(lambda: "future.json" in env.items("rejected"), timeout=SETTLE_S + 4,
                        what="future-mtime junk rejected")
    except hdtest.Fail:
        pass
    t = time.monotonic() - t0
    where = "rejected/" if "future.json" in env.items("rejected") else "STILL in handoff/"
    print(f"unparsable file with mtime 10 years ahead: {where} after {t:.1f}s")
    check(where == "rejected/", "deferred past its settle time on a forged mtime")
    check(env.reason_of("future.json")["reason"] == "parse_error", "reason parse_error")


def test_in_place_writer_still_deferred(env):
    doc = hdproto.build("bob", "alice", env.key, ttl=600)
    data = hdproto.dumps(doc)
    h = env.path("handoff", "inplace.json")
    with open(h, "wb") as f:
        f.write(data[:len(data) // 2])
        f.flush()
        time.sleep(0.5)
        f.write(data[len(data) // 2:])
    hdtest.wait_for(lambda: doc["handoff_id"] + ".json" in env.bootstraps("alice"),
                    timeout=SETTLE_S + 3, what="in-place written handoff claimed")
    check("inplace.json" not in env.items("rejected"), "rejected while being written")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        d = env.start()
        test_attack_mtime_deferral_is_bounded(env)
        test_in_place_writer_still_deferred(env)
        check(d.stop() == 0, "exit 0")


hdtest.run(main)
