"""An agent out of service is said to be, in the docs and in the log
(issue 36.2).

- The docs tell one truth, the daemon's: an agent whose directory is
  unsafe is out of service, the start is not refused.  README (Agents'
  directories), handoffd.conf(5) state_dir, handoffd(8) SIGHUP, the
  tmpfiles snippet and README.Debian say "out of service" and none says
  the daemon refuses to start (or keeps the old configuration) for it.
- A handoff for zed, configured here with a state_dir of mode 0777, is
  logged as left for an agent out of service here, with why, not as "not
  served here"; one that expires waiting is rejected as expired_unclaimed
  with the same words in its reason file.

Runs the real daemon on a temp dir, as any user."""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check, expect, SRC  # noqa: E402


def text_of(rel):
    return open(os.path.join(SRC, rel)).read()


def man_flat(s):
    """troff source as plain words: requests dropped, escapes undone."""
    s = re.sub(r"^\.\w+ ?", "", s, flags=re.M)
    s = s.replace("\\-", "-").replace("\\(lq", '"').replace("\\(rq", '"')
    return re.sub(r"\s+", " ", s)


def check_docs():
    readme = text_of("README.md")
    par = next((p for p in readme.split("\n\n") if p.startswith("Never give these directories")), "")
    expect(par != "", "README has its paragraph on the agents' directories' group")
    says = {
        "README (Agents' directories)": re.sub(r"\s+", " ", par),
        "handoffd.conf(5) state_dir": man_flat(re.search(
            r"^\.BI state_dir .*?(?=^\.TP)", text_of("man/handoffd.conf.5"), re.S | re.M).group(0)),
        "handoffd(8) SIGHUP": man_flat(re.search(
            r"^\.B SIGHUP\n.*?(?=^\.TP)", text_of("man/handoffd.8"), re.S | re.M).group(0)),
        "systemd/handoffd.tmpfiles": re.sub(r"\s*#\s*", " ", text_of("systemd/handoffd.tmpfiles")),
        "debian/handoffd.README.Debian": re.sub(r"\s+", " ", text_of("debian/handoffd.README.Debian")),
    }
    for where, s in says.items():
        wrong = re.findall(r"[^.]*(?:refuses? to start|old configuration is kept)[^.]*\.", s)
        expect(not wrong, f"{where} says the daemon refuses the agent's set-up: {wrong}")
        if expect("out of service" in s, f"{where} does not say the agent is out of service"):
            print(f"ok: {where} says the agent is out of service")


def main():
    check_docs()
    with hdtest.Env(agents=["alice", "zed"]) as env:
        for a in ("alice", "zed"):
            os.makedirs(os.path.join(env.state[a], "handoffs"))
            os.chmod(env.state[a], 0o750)
            os.chmod(os.path.join(env.state[a], "handoffs"), 0o700)
        os.chmod(env.state["zed"], 0o777)
        d = env.start()

        doc = hdproto.build("bob", "zed", env.key, handoff_id="for-zed-1")
        hdproto.drop(env.spool, doc)
        left = hdtest.wait_for(lambda: [ln for ln in d.logs().splitlines()
                                        if "'for-zed-1.json'" in ln and "Left" in ln],
                               what="the line for the handoff to zed")
        print(f"the handoff to zed: {left[0]}")
        check("out of service here" in left[0] and "writable by others" in left[0],
              f"not said to be out of service, with why: {left[0]!r}")
        check("not served here" not in left[0], f"said not served here: {left[0]!r}")

        # One that expires while it waits: its reason says the same.
        short = hdproto.build("bob", "zed", env.key, handoff_id="for-zed-2", ttl=3)
        hdproto.drop(env.spool, short)
        hdtest.wait_for(lambda: any(n.startswith("for-zed-2") and n.endswith(".reason")
                                    for n in env.names("rejected")),
                        timeout=20, what="the expired handoff to zed rejected")
        rname = next(n for n in env.names("rejected") if n.startswith("for-zed-2") and n.endswith(".reason"))
        reason = json.load(open(env.path("rejected", rname)))
        print(f"its reason: {reason.get('reason')}: {reason.get('detail')}")
        check(reason.get("reason") == "expired_unclaimed" and
              "out of service here: refusing state_dir" in reason.get("detail", ""),
              f"reason file: {reason}")
        check(d.stop() == 0, "the daemon stops")
    hdtest.finish("ok: the docs and the log say an agent with an unsafe directory is out of service, and why")


hdtest.run(main)
