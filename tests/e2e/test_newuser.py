"""handoffctl and handoffd as a new user meets them: one meaning per flag,
no silent foot-gun, messages that name the right thing, output a person
reads.  Real binaries, a real daemon, the reference consumer.

- submit: -c is the configuration (spool and key from it); a spool that
  does not exist is refused (one line) unless --create-spool; --from/--to
  checked first; a payload or transcript error names its file; a bad
  --type lists the types; --payload without --type suggests it; an agent
  the configuration does not serve is a warning (exit 0, file written);
- render: errors carry "render:", a bare payload without --type says so;
- consume: an id consumed already says where it went; a --state-dir that
  does not exist is a usage error (2);
- baton: show without -c uses the default configuration; list lists;
- handoffd -n prints the warnings the daemon gives at start; --strict
  makes them an error (2);
- a handoff left for an agent not served here: one info line; expired,
  rejected as expired_unclaimed saying no daemon claimed it;
- every whitespace code point Python knows, as a whole context_summary:
  the bootstrap is taken by the reference consumer (str.strip());
- archive names do not repeat the agents the handoff_id names;
- list: header, aligned columns, a count, "no items", no trailing blanks;
- status: uptime as "5min 38s", counters in an item's order, the oldest
  wait per recipient, null (never -1) for what is absent in --json;
- a second daemon on the same control socket names the pid of the first.
"""

import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402
from hdtest import check  # noqa: E402

TYPES = "vox/1.0, baton/1, U.AgentHandoff/0.1.0, act/1.0"


def doc_of(env, hid):
    """The handoff of hid, in handoff/ or in the daemon's record in claimed/
    (since issue 25 the record is the bootstrap, the handoff inside it)."""
    for state in ("handoff", "claimed"):
        try:
            return invariant.record_handoff(json.load(open(env.path(state, hid + ".json"))))
        except FileNotFoundError:
            pass
    raise hdtest.Fail(f"{hid} is neither in handoff/ nor in claimed/")


def err1(p):
    return p.stderr.rstrip("\n")


def test_submit(env, conf):
    ctl = env.ctl
    # -c is the configuration: spool and key come from it.
    p = ctl("submit", "-c", conf, "--from", "bob", "--to", "alice", "--context", "ctx")
    check(p.returncode == 0, f"submit -c CONF: {p.returncode} {p.stderr}")
    hid = p.stdout.strip()
    doc = doc_of(env, hid)
    check(doc["context_summary"] == "ctx" and doc["hmac"] == hdproto.compute_hmac(doc, env.key),
          "submit -c: signed with the config's key, --context is the summary")
    print("submit -c CONF: spool and key from the configuration")

    # a typo in --spool makes nothing
    typo = os.path.join(env.dir, "spoool")
    p = ctl("submit", "--spool", typo, "--key", env.key_path, "--from", "bob", "--to", "alice")
    check(p.returncode == 2 and err1(p) == f"handoffctl: submit: {typo}: no such spool "
          "(--create-spool makes one)" and not os.path.exists(typo), f"spool typo: {p.stderr!r}")
    os.mkdir(typo)
    p = ctl("submit", "--spool", typo, "--key", env.key_path, "--from", "bob", "--to", "alice")
    check(p.returncode == 2 and "has no handoff/" in p.stderr and os.listdir(typo) == [],
          f"a directory without handoff/: {p.stderr!r}")
    p = ctl("submit", "--spool", typo, "--create-spool", "--key", env.key_path,
            "--from", "bob", "--to", "alice")
    check(p.returncode == 0 and os.path.isdir(os.path.join(typo, "handoff")), "--create-spool")
    print("submit: a missing spool refused, --create-spool makes one")

    p = ctl("submit", "-c", conf, "--from", "bob", "--to", "Al ice")
    check(p.returncode == 2 and err1(p) == "handoffctl: submit: --to 'Al ice': not a valid "
          "agent name (lowercase letters, digits, '-', '_')", f"--to 'Al ice': {p.stderr!r}")

    bad = os.path.join(env.dir, "vox-bad.json")
    with open(bad, "w") as f:
        json.dump({"version": "2.0"}, f)
    p = ctl("submit", "-c", conf, "--from", "bob", "--type", "vox/1.0", "--payload", bad)
    check(p.returncode == 1 and f"submit: {bad}: payload_invalid:" in p.stderr,
          f"a bad payload names its file: {p.stderr!r}")
    p = ctl("submit", "-c", conf, "--from", "bob", "--to", "alice", "--type", "vox/2", "--payload", bad)
    check(p.returncode == 2 and TYPES in p.stderr and "'vox/2'" in p.stderr,
          f"a bad --type lists the types: {p.stderr!r}")
    p = ctl("submit", "-c", conf, "--from", "bob", "--to", "alice", "--payload", bad)
    check(p.returncode == 2 and "--payload needs --type TYPE" in p.stderr and TYPES in p.stderr,
          f"--payload without --type: {p.stderr!r}")
    tr = os.path.join(env.dir, "tr.json")
    with open(tr, "w") as f:
        f.write("[{\"role\": \"user\"")
    p = ctl("submit", "-c", conf, "--from", "bob", "--to", "alice", "--transcript", tr)
    check(p.returncode == 1 and tr in p.stderr, f"a broken transcript names its file: {p.stderr!r}")

    # an agent nobody here serves: written, with a warning
    p = ctl("submit", "-c", conf, "--from", "bob", "--to", "zed")
    check(p.returncode == 0 and os.path.exists(env.path("handoff", p.stdout.strip() + ".json")),
          "submit --to zed: written")
    hdtest.wait_for(lambda: env.bootstraps("alice"), what="the first submit delivered")
    check(hdtest.real_consumer(env.state["alice"], hid), "the first submit consumed")
    check(f"{conf} has no [agent zed]" in p.stderr and "expired_unclaimed" in p.stderr,
          f"submit --to zed warns: {p.stderr!r}")
    print("submit: names checked first, files named, types listed, unserved agent warned about")


def test_render_consume_baton(env, conf):
    ctl = env.ctl
    vox = os.path.join(hdtest.SRC, "tests", "payloads", "vox.json")
    p = ctl("render", vox)
    check(p.returncode == 1 and p.stderr.startswith(f"handoffctl: render: {vox}: not a handoff")
          and "--type TYPE" in p.stderr, f"a bare payload without --type: {p.stderr!r}")
    p = ctl("render", "--type", "vox/1.0", vox)
    check(p.returncode == 0 and p.stdout, "render --type vox/1.0")
    p = ctl("render", os.path.join(env.dir, "missing.json"))
    check(p.returncode == 2 and p.stderr.startswith("handoffctl: render: "), f"render missing: {p.stderr!r}")
    p = ctl("render", "--type", "nope", vox)
    check(p.returncode == 2 and p.stderr.startswith("handoffctl: render: ") and TYPES in p.stderr,
          f"render --type nope: {p.stderr!r}")

    p = ctl("consume", "--state-dir", os.path.join(env.dir, "nonexistent"))
    check(p.returncode == 2 and "--state-dir" in p.stderr, f"consume --state-dir missing: {p.returncode} {p.stderr!r}")

    p = ctl("baton", "show", "sess-1")
    check(p.returncode == 2 and "/handoffd/handoffd.conf" in p.stderr,
          f"baton show without -c reads the default configuration: {p.stderr!r}")
    p = ctl("baton", "list", "-c", conf)
    check(p.returncode == 0 and p.stdout == "no sessions\n", f"baton list: {p.stdout!r}")
    print("render/consume/baton: prefixes, usage errors, default configuration")


def test_check_config(env):
    import grp
    missing = "hd-no-such-group"
    while True:
        try:
            grp.getgrnam(missing)
            missing += "x"
        except KeyError:
            break
    text = env.config_text("w", agents=[]).replace("[control]\n", f"[control]\ngroup = {missing}\n")
    conf = env.write_config("w", text=text)
    p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", conf], capture_output=True, text=True)
    warns = [line for line in p.stderr.splitlines() if line.startswith("handoffd[warning]: ")]
    check(p.returncode == 0 and len(warns) == 2 and "nothing will be claimed" in warns[0]
          and f"group '{missing}'" in warns[1] and "2 warning(s)" in p.stdout,
          f"-n prints the warnings: {p.returncode} {p.stdout!r} {p.stderr!r}")
    p2 = subprocess.run([hdtest.HANDOFFD, "-n", "--strict", "-c", conf], capture_output=True, text=True)
    check(p2.returncode == 2, f"-n --strict with warnings exits 2, not {p2.returncode}")
    good = env.write_config("g")
    p3 = subprocess.run([hdtest.HANDOFFD, "-n", "--strict", "-c", good], capture_output=True, text=True)
    check(p3.returncode == 0 and p3.stderr == "", f"-n --strict, no warning: {p3.returncode} {p3.stderr!r}")
    # the daemon says the same at start
    d = env.start("w", conf=conf)
    for w in warns:
        msg = w[len("handoffd[warning]: "):]
        hdtest.wait_for(lambda: msg in d.logs(), timeout=5, what=f"daemon warns: {msg}")
    check(d.stop() == 0, "stop w")
    print(f"handoffd -n: {len(warns)} warning(s) as at start, --strict exit 2")


def test_second_instance(env, first):
    conf = env.write_config("twin", text=env.config_text("twin").replace(
        os.path.join(env.dir, "twin.sock"), env.sockets["d0"]))
    p = subprocess.run([hdtest.HANDOFFD, "-f", "-c", conf], capture_output=True, text=True,
                       timeout=30 * hdtest.SLOW, env={k: v for k, v in os.environ.items()
                                                       if k != "NOTIFY_SOCKET"})
    check(p.returncode != 0 and f"pid {first.proc.pid} (handoffd)" in p.stderr and
          "needs its own [control] socket" in p.stderr,
          f"a second instance on one socket: {p.returncode} {p.stderr!r}")
    print("second instance: names the pid that answers, says what to do")


def complete(*words):
    """What completion/handoffctl.bash offers after words (the last one is
    the word being completed)."""
    script = (f"source {os.path.join(hdtest.SRC, 'completion', 'handoffctl.bash')}\n"
              "COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); _handoffctl\n"
              "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    p = subprocess.run(["bash", "-c", script, "bash", "handoffctl", *words],
                       capture_output=True, text=True, cwd=hdtest.SRC)
    return p.stdout.split()


def test_completion():
    opts = complete("submit", "--")
    check("--config" in opts and "--create-spool" in opts and "--context" in opts,
          f"submit options completed: {opts}")
    files = complete("submit", "-c", "READ")
    check(files == ["README.md"], f"submit -c completes a file: {files}")
    check(complete("baton", "li") == ["list"], "baton list completed")
    print("completion: submit -c is --config, --create-spool, baton list")


def main():
    test_completion()
    py_spaces = [c for c in range(0x110000) if chr(c).isspace()]
    with hdtest.Env(agents=["alice"]) as env:
        conf = env.write_config("d0")
        d = env.start(conf=conf)
        test_submit(env, conf)
        rescans = d.status()["counters"]["rescans"]
        test_render_consume_baton(env, conf)
        test_check_config(env)
        test_second_instance(env, d)

        # whitespace-only summaries: taken, with a context made of the rest
        docs = []
        for c in py_spaces:
            docs.append(hdproto.build("bob", "alice", env.key, ttl=600, extra={"context_summary": chr(c)}))
        docs.append(hdproto.build("bob", "alice", env.key, ttl=600,
                                  extra={"context_summary": "".join(map(chr, py_spaces))}))
        docs.append(hdproto.build("bob", "alice", env.key, ttl=600, extra={"resume_context": " \u2028\t"}))
        for doc in docs:
            hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: len(env.bootstraps("alice")) >= len(docs),
                        what="every whitespace handoff delivered")
        taken = 0
        for doc in docs:
            got = hdtest.real_consumer(env.state["alice"], doc["handoff_id"])
            ctx = got and got["resume_context"].strip()
            check(ctx and ctx.startswith("bob handed this over to you"),
                  f"summary {doc.get('context_summary', doc.get('resume_context'))!r}: consumer got {ctx!r}")
            taken += 1
        print(f"whitespace summaries: {taken} of {len(docs)} taken by the reference consumer "
              f"({len(py_spaces)} code points)")

        # consumed: where did it go; archive names
        hdtest.wait_for(lambda: env.count("archive") >= len(docs), what="archived")
        hid = docs[0]["handoff_id"]
        p = env.ctl("consume", "-c", conf, "--agent", "alice", hid)
        check(p.returncode == 1 and f"consume: {hid}: already consumed, archived at " in p.stderr,
              f"consume of a consumed id: {p.stderr!r}")
        names = env.items("archive")
        check(all(re.fullmatch(r"\d+-\d+-bob-alice-[0-9a-f]{16}\.json", n) for n in names),
              f"archive names repeat the agents: {names[:3]}")
        custom = hdproto.build("bob", "alice", env.key, handoff_id="custom-1")
        hdproto.drop(env.spool, custom)
        hdtest.wait_for(lambda: env.bootstraps("alice"), what="custom delivered")
        check(hdtest.real_consumer(env.state["alice"], "custom-1"), "custom consumed")
        hdtest.wait_for(lambda: any(n.endswith("-bob-alice-custom-1.json") for n in env.items("archive")),
                        what="custom-1 archived as TS-bob-alice-custom-1.json")
        print(f"archive names: {names[0]}, and an id without the agents keeps them")

        # left for zed (submitted above): one info line, even after rescans
        hdtest.wait_for(lambda: d.status()["counters"]["rescans"] > rescans, timeout=20,
                        what="a periodic rescan after zed's item was left")
        # The rescan's turn may answer that status before its lines leave
        # (at the loop's next prepare): one more answer, from a later turn,
        # and a second line for zed would be in the log.
        d.status()
        left = [line for line in d.logs().splitlines() if "Left " in line and "for agent zed" in line]
        check(len(left) == 1 and left[0].startswith("handoffd[info]: "), f"left lines: {left}")
        # expired for an agent nobody serves: rejected, saying so
        gone = hdproto.build("bob", "sven", env.key, ttl=3)
        hdproto.drop(env.spool, gone)
        late = hdproto.build("bob", "sven", env.key, at=hdproto.now() - hdproto.timedelta(seconds=600))
        hdproto.drop(env.spool, late)
        hdtest.wait_for(lambda: len([n for n in env.items("rejected") if "sven" in n]) == 2,
                        timeout=20, what="both sven items rejected")
        for n in env.items("rejected"):
            if "sven" in n:
                r = env.reason_of(n)
                check(r["reason"] == "expired_unclaimed" and "no daemon claimed it" in r["detail"],
                      f"expired_unclaimed detail: {r}")
        print(f"left: one info line ({left[0][:60]}...); expired_unclaimed says no daemon claimed it")

        # list
        # The spool counted before and after the listing, the same both
        # times: the daemon is not moving an item meanwhile.
        def listed():
            n0 = sum(env.count(s) for s in ("handoff", "claimed", "archive", "rejected"))
            out = env.ctl("list", "-c", conf, check_rc=0).stdout.splitlines()
            n1 = sum(env.count(s) for s in ("handoff", "claimed", "archive", "rejected"))
            return (out, n1) if n0 == n1 else None
        lines, n_items = hdtest.wait_for(listed, timeout=30, what="a listing of a spool at rest")
        check(lines[0].split() == ["STATE", "HANDOFF_ID", "FROM", "TO", "AT", "OUTCOME"], f"header {lines[0]!r}")
        check(lines[-1] == f"{n_items} items", f"count line {lines[-1]!r}, {n_items} items")
        check(all(line == line.rstrip() for line in lines), "no trailing blanks")
        col = [line.index(" ", 0) for line in lines[:-1]]
        starts = {len(re.match(r"(\S+\s+){2}", line).group(0)) for line in lines[:-1]}
        check(len(starts) == 1 and len(set(col)) >= 1, f"the FROM column starts at one place: {starts}")
        p = env.ctl("list", "-c", conf, "--state", "claimed", check_rc=0)
        check(p.stdout == "no items\n", f"empty list: {p.stdout!r}")
        print(f"list: header, aligned, '{lines[-1]}', 'no items'")

        # status
        p = env.ctl("status", "-c", conf)
        check(re.search(r"running, pid \d+, up (\d+h )?(\d+min )?\d+s,", p.stdout) is not None,
              f"uptime: {p.stdout}")
        m = re.search(r"^since start: claimed \d+ delivered \d+ consumed \d+ expired \d+ canceled \d+ rejected \d+ left ",
                      p.stdout, re.M)
        check(m is not None, f"counters in an item's order:\n{p.stdout}")
        check(re.search(r"^  pending for zed: 1, the oldest waiting (\d+min )?\d+s$", p.stdout, re.M),
              f"oldest wait per recipient:\n{p.stdout}")
        st = json.loads(env.ctl("status", "-c", conf, "--json").stdout)
        check(st["last_error_age_s"] is None and st["last_error"] is None and
              st["oldest_claimed_s"] is None and st["oldest_pending_by_agent"]["zed"] >= 0,
              f"status --json: nulls, not -1: { {k: st.get(k) for k in ('last_error_age_s', 'oldest_claimed_s')} }")
        check(d.stop() == 0, "stop")
        print("status: uptime, order, oldest wait, nulls")


hdtest.run(main)
