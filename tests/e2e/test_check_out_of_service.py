"""`handoffd -n` with an agent the start would take out of service (issue
36.1): zed's state_dir is mode 0777.

- -n prints every warning and error line the start logs, each once, in
  the start's own words (with and without --strict);
- -n exits 3, the status handoffd(8) EXIT STATUS gives for "an agent would
  be out of service", and does not say "ok";
- the start's ready line says how many agents are served and how many
  are out of service (1 and 1, not "2 agent(s)");
- repaired, -n says ok and exits 0, and the ready line says 2 served.

Runs the real daemon on a temp dir, as any user."""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check, SRC  # noqa: E402


def check_config(conf, *opts):
    p = subprocess.run([hdtest.HANDOFFD, "-n", *opts, "-c", conf], capture_output=True, text=True,
                       timeout=30 * hdtest.SLOW)
    print(f"handoffd -n {' '.join(opts)}: exit {p.returncode}")
    for ln in (p.stderr + p.stdout).splitlines():
        print(f"  | {ln}")
    return p


def loud(text):
    """The warning and error lines of a log, without the program's prefix."""
    return [ln.split("]: ", 1)[1] for ln in text.splitlines()
            if ln.startswith(("handoffd[warning]: ", "handoffd[error]: "))]


def ready_line(text):
    return next((ln for ln in text.splitlines() if " ready: spool " in ln), "")


def man_exit_status():
    page = open(os.path.join(SRC, "man", "handoffd.8")).read()
    sec = re.search(r"^\.SH EXIT STATUS\n(.*?)^\.SH ", page, re.S | re.M).group(1)
    m = re.search(r"^\.TP\n\.B 3\n(.*?)(?=^\.TP\n|^\.PP\n|\Z)", sec, re.S | re.M)
    return re.sub(r"\s+", " ", re.sub(r"^\.\w+ ?", "", m.group(1), flags=re.M)) if m else ""


def main():
    with hdtest.Env(agents=["alice", "zed"]) as env:
        for a in ("alice", "zed"):
            os.makedirs(os.path.join(env.state[a], "handoffs"))
            os.chmod(env.state[a], 0o750)
            os.chmod(os.path.join(env.state[a], "handoffs"), 0o700)
        os.chmod(env.state["zed"], 0o777)
        conf = env.write_config("d0")

        d = env.start(conf=conf)
        start_log = d.logs()
        check(d.stop() == 0, "the daemon stops")
        start_lines = loud(start_log)
        check(any("Not serving agent zed" in ln for ln in start_lines),
              f"the start does not take zed out of service:\n{start_log}")

        for opts in ((), ("--strict",)):
            p = check_config(conf, *opts)
            said = loud(p.stderr)
            for ln in start_lines:
                n = said.count(ln)
                check(n == 1, f"-n {' '.join(opts)} prints the start's line {n} time(s), not once: {ln!r}")
            extra = [ln for ln in said if ln not in start_lines]
            check(not extra, f"-n {' '.join(opts)} prints lines the start does not: {extra}")
            check(p.returncode == 3, f"-n {' '.join(opts)}: exit {p.returncode}, not 3")
            check("ok (" not in p.stdout, f"-n {' '.join(opts)} says ok: {p.stdout!r}")
            check("1 of 2 agent(s) would be out of service" in p.stderr,
                  f"-n {' '.join(opts)} does not count the agents: {p.stderr!r}")

        ready = ready_line(start_log)
        print(f"the start's ready line: {ready}")
        check("1 agent(s) served, 1 out of service" in ready,
              f"the ready line does not say 1 served, 1 out of service: {ready!r}")

        item = man_exit_status()
        print(f"handoffd(8) EXIT STATUS 3: {item!r}")
        check("out of service" in item and "-n" in item, "handoffd(8) EXIT STATUS does not give 3 for -n "
              "with an agent out of service")

        os.chmod(env.state["zed"], 0o750)
        p = check_config(conf)
        check(p.returncode == 0 and "ok (2 agent(s)" in p.stdout and not loud(p.stderr),
              f"repaired: -n exit {p.returncode}")
        d = env.start(conf=conf, name="d1")
        ready = ready_line(d.logs())
        check(d.stop() == 0, "the daemon stops")
        print(f"repaired, the ready line: {ready}")
        check("2 agent(s) served, 0 out of service" in ready, f"ready line: {ready!r}")
    print("ok: -n prints each of the start's lines once and exits 3; the ready line counts served "
          "and out-of-service agents")


hdtest.run(main)
