"""handoffctl status and the configuration (issue 47.5, 47.6): status says
when the file differs from what the daemon runs on, when the last reload
failed (the daemon keeps its old configuration), and still reaches the
daemon when the file no longer loads; a spool directory that does not
exist is a problem, not a spool of zeros."""

import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def status(env, conf):
    p = env.ctl("status", "-c", conf, "--json")
    return p.returncode, json.loads(p.stdout) if p.stdout.strip() else None, p.stderr


def problems(st):
    return " | ".join(st["problems"]) if st else ""


def reloads(d, word):
    return sum(word in ln for ln in d.logs().splitlines())


def test_drift_and_failed_reload(env):
    conf = env.write_config()
    d = env.start(conf=conf)
    rc, st, _ = status(env, conf)
    check(rc == 0, f"healthy at the start: rc {rc}, {problems(st)}")
    check(st["config"]["path"] == conf and len(st["config"]["sha256"]) == 64,
          f"what the daemon runs on: {st.get('config')}")

    # a change on disk the daemon has not loaded
    text = open(conf).read().replace("[spool]\n", "[spool]\nrescan_interval = 31\n", 1)
    with open(conf, "w") as f:
        f.write(text)
    rc, st, _ = status(env, conf)
    check(rc == 1 and "has changed since handoffd loaded it" in problems(st),
          f"a changed file is told: rc {rc}, {problems(st)}")

    n = reloads(d, "Reloaded")
    os.kill(d.proc.pid, signal.SIGHUP)
    hdtest.wait_for(lambda: reloads(d, "Reloaded") > n, 10 * hdtest.SLOW, "the reload")
    rc, st, _ = status(env, conf)
    check(rc == 0, f"healthy once reloaded: rc {rc}, {problems(st)}")

    # the file broken, and a reload asked: the daemon keeps running on the old
    with open(conf, "a") as f:
        f.write("\n[spool]\nno_such_key = 1\n")
    n = reloads(d, "Reload failed")
    os.kill(d.proc.pid, signal.SIGHUP)
    hdtest.wait_for(lambda: reloads(d, "Reload failed") > n, 10 * hdtest.SLOW, "the failed reload")
    rc, st, err = status(env, conf)
    print(f"broken file, failed reload: rc {rc}: {problems(st)}")
    check(rc == 1, f"status answers with the daemon's state (rc {rc}): {err}")
    check(st and st["daemon"]["running"] is True, "the daemon is seen running")
    check("the last reload failed" in problems(st) and "no_such_key" in problems(st),
          f"the failed reload and why: {problems(st)}")
    check("does not load" in problems(st), "the file's state")
    check(f"{os.path.basename(conf)}:" in err and "no_such_key" in err,
          f"the file's mistake on stderr as FILE:LINE: {err}")
    text = open(conf).read().replace("\n[spool]\nno_such_key = 1\n", "")
    with open(conf, "w") as f:
        f.write(text)
    rc, st, _ = status(env, conf)
    check(rc == 1 and "the last reload failed" in problems(st),
          f"the failure stays told until a reload works: rc {rc}, {problems(st)}")
    n = reloads(d, "Reloaded")
    os.kill(d.proc.pid, signal.SIGHUP)
    hdtest.wait_for(lambda: reloads(d, "Reloaded") > n, 10 * hdtest.SLOW, "the reload")
    rc, st, _ = status(env, conf)
    check(rc == 0, f"healthy after a reload that worked: rc {rc}, {problems(st)}")
    check(d.stop() == 0, "exit 0")

    # nobody runs: a broken file is a configuration error (2) again
    with open(conf, "a") as f:
        f.write("\n[spool]\nno_such_key = 1\n")
    rc, _, err = status(env, conf)
    check(rc == 2 and "no_such_key" in err, f"not running, broken file: rc {rc}: {err}")


def test_no_spool_dir(env):
    conf = env.write_config(name="gone", text=env.config_text().replace(
        env.spool, os.path.join(env.dir, "no-such-spool"), 1))
    p = env.ctl("status", "-c", conf)
    print(p.stdout.strip().splitlines()[:4])
    check(p.returncode == 3, f"not running: {p.returncode}")
    check("does not exist" in p.stdout and "handoff 0" not in p.stdout,
          f"a missing spool is told, not counted as empty: {p.stdout}")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        test_drift_and_failed_reload(env)
        test_no_spool_dir(env)


hdtest.run(main)
