"""handoffd's exit status is the one handoffd(8) EXIT STATUS gives for each
case, and each case is named under its number there:

- 2, a usage or configuration error, the daemon's set-up that only the
  operator can fix (the packaged unit does not restart after 2): an
  unknown option, a config with a mistake, a key others may read, an
  agent's directory others may write (refused at start, before anything
  is claimed);
- 1, a fatal runtime error: the spool cannot be opened (its path is a
  file);
- 0, a clean stop (SIGTERM);
- 3, handoffd -n only: an agent would be out of service (its directory
  others may write).

Each run is the real daemon in the foreground on a temp dir."""

import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check, SRC  # noqa: E402


def man_exit_status():
    """{code: the text of its item} from handoffd.8's EXIT STATUS."""
    page = open(os.path.join(SRC, "man", "handoffd.8")).read()
    sec = re.search(r"^\.SH EXIT STATUS\n(.*?)^\.SH ", page, re.S | re.M).group(1)
    items = {}
    for m in re.finditer(r"^\.TP\n\.B (\d+)\n(.*?)(?=^\.TP\n|^\.PP\n|\Z)", sec, re.S | re.M):
        items[int(m.group(1))] = re.sub(r"\s+", " ", re.sub(r"^\.\w+ ?", "", m.group(2), flags=re.M))
    return items


def run(argv, timeout=15):
    p = subprocess.run([hdtest.HANDOFFD, *argv], capture_output=True, text=True,
                       timeout=timeout * hdtest.SLOW)
    return p.returncode, p.stderr


def main():
    man = man_exit_status()
    check(set(man) == {0, 1, 2, 3}, f"handoffd.8 EXIT STATUS lists 0, 1, 2, 3: {sorted(man)}")

    with hdtest.Env(agents=["alice"]) as env:
        good = env.write_config("d0")
        cases = []

        cases.append(("an unknown option", ["--bogus"], 2, "usage"))
        bad = env.write_config("bad", text=env.config_text("bad") + "\n[spool]\nfsnyc = yes\n")
        cases.append(("a config with a mistake", ["-f", "-c", bad], 2, "configuration error"))

        # A key others may read.
        leaky = os.path.join(env.dir, "leaky.key")
        with open(env.key_path) as f, open(leaky, "w") as g:
            g.write(f.read())
        os.chmod(leaky, 0o644)
        lk = env.write_config("leaky", text=env.config_text("leaky").replace(env.key_path, leaky))
        cases.append(("a key others may read", ["-f", "-c", lk], 2, "unsafe keys"))

        # An agent's directory others may write is no exit status of the
        # start: only that agent is out of service (issue 24.3,
        # test_attack_unsafe_agent_dir.py); -n says so with 3 (issue 36.1,
        # test_check_out_of_service.py).
        zed = env.state["alice"] + "-zed"
        os.makedirs(zed, mode=0o777)
        os.chmod(zed, 0o777)
        oos = env.write_config("oos", text=env.config_text("oos") + f"\n[agent zed]\nstate_dir = {zed}\n")
        cases.append(("-n: an agent would be out of service", ["-n", "-c", oos], 3, "out of service"))

        # The spool cannot be opened: its path is a file.
        sf = os.path.join(env.dir, "spool-is-a-file")
        open(sf, "w").close()
        nf = env.write_config("nofile", text=env.config_text("nofile").replace(
            f"dir = {env.spool}\n", f"dir = {sf}\n"))
        cases.append(("a spool that cannot be opened", ["-f", "-c", nf], 1, "spool cannot be opened"))

        for what, argv, want, phrase in cases:
            rc, err = run(argv)
            check(rc == want, f"{what}: exit {rc}, handoffd(8) says {want}:\n{err[-600:]}")
            check(phrase in man[want], f"handoffd(8) EXIT STATUS {want} names {phrase!r}: {man[want]!r}")
            print(f"- {what}: exit {rc} ({phrase!r} under {want} in handoffd(8))")
        check(not os.path.exists(os.path.join(env.spool, "claimed")) or
              env.count("claimed") == 0, "nothing claimed by a refused start")

        d = env.start(conf=good)
        rc = d.stop(signal.SIGTERM)
        check(rc == 0 and "clean stop" in man[0], f"SIGTERM: exit {rc}")
        print("- a clean stop (SIGTERM): exit 0")


if __name__ == "__main__":
    hdtest.run(main)
