"""The `make check` log (issue 28.9): a test that passes prints no line that
reads as a failure (systemd-analyze's complaints about the broken copy of
test_agent_path's negative check), and the end-to-end run ends with one
summary line "e2e: N passed, N failed, N skipped" as the unit run ends with
Check's; a skip (exit 77) is counted apart, and fails when it is for want
of a package the dependency list names.

Runs the test runner itself on one cheap script (HD_E2E selects it), then
on scripts of a scratch tree that skip."""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    runner = os.path.join(hdtest.BUILD, "tests", "check_handoff")
    if not os.access(runner, os.X_OK):
        # make check builds it before it runs this script
        hdtest.skip("check_handoff", f"no test runner {runner} (make check, or make "
                    f"{os.path.relpath(runner, hdtest.SRC)})")
    with hdtest.tmpdir() as logs:
        # its own logs: the run around this one writes test_agent_path's
        env = dict(os.environ, CK_RUN_SUITE="e2e", HD_E2E="test_agent_path",
                   HD_BUILD=hdtest.BUILD, HD_SRC=hdtest.SRC, HD_E2E_LOGS=logs)
        p = subprocess.run([runner], capture_output=True, text=True, env=env,
                           timeout=300 * hdtest.SLOW)
    out = p.stdout + p.stderr
    print("runner output:\n" + "".join(f"  | {ln}\n" for ln in out.splitlines()))
    check(p.returncode == 0, f"runner exit {p.returncode}")
    noise = [ln for ln in out.splitlines() if "bad unit file setting" in ln]
    check(not noise, f"a passing test prints what reads as a failure: {noise}")
    lines = [ln for ln in out.splitlines() if ln.strip()]
    summary = [ln for ln in lines if re.fullmatch(r"e2e: \d+ passed, \d+ failed.*", ln)]
    check(summary == ["e2e: 1 passed, 0 failed, 0 skipped"], f"e2e summary lines: {summary}")
    # the summary comes after the last script's output, before Check's line
    check(lines.index(summary[0]) >= len(lines) - 3, f"summary not at the end: {lines[-4:]}")
    # and the very last line is the one summary of both (issue 47.9)
    check(re.fullmatch(r"check: ALL PASSED: unit checks: \d+ run, 0 failed; "
                       r"e2e scripts: 1 passed, 0 failed, 0 skipped", lines[-1]),
          f"the last line: {lines[-1]!r}")
    expected_faults(runner)
    skips(runner)
    readme_lists_every_script()


def readme_lists_every_script():
    """tests/e2e/README.md groups the scripts by feature: each is there."""
    e2e = os.path.join(hdtest.SRC, "tests", "e2e")
    with open(os.path.join(e2e, "README.md")) as f:
        listed = set(re.findall(r"^- `(test_\w+)`", f.read(), re.M))
    scripts = {n[:-3] for n in os.listdir(e2e) if re.fullmatch(r"test_\w+\.py", n)}
    check(scripts <= listed, f"tests/e2e/README.md lacks {sorted(scripts - listed)}")
    check(listed <= scripts, f"tests/e2e/README.md lists what is gone: {sorted(listed - scripts)}")
    print(f"tests/e2e/README.md lists all {len(scripts)} scripts")


def expected_faults(runner):
    """Unit tests that provoke an error (an injected ENOMEM, a torn
    journal record) label the daemon's line as expected: a passing run's
    log has no bare handoffd[error] line."""
    for suite in ("intake_reject", "receipt_journal"):
        env = dict(os.environ, CK_RUN_SUITE=suite, HD_BUILD=hdtest.BUILD, HD_SRC=hdtest.SRC)
        p = subprocess.run([runner], capture_output=True, text=True, env=env,
                           timeout=300 * hdtest.SLOW)
        out = (p.stdout + p.stderr).splitlines()
        check(p.returncode == 0, f"suite {suite}: exit {p.returncode}")
        daemon = [ln for ln in out if ln.startswith("handoffd[")]
        bare = [ln for ln in daemon if "] (expected: " not in ln]
        check(daemon and not bare, f"suite {suite}: the daemon's lines not labelled: {bare or out}")
        check(out[-1].startswith("check: ALL PASSED: unit checks: "), f"last line {out[-1]!r}")
        print(f"suite {suite}: {len(daemon)} provoked line(s), each labelled: {daemon[0]}")


SCRIPTS = {
    "test_a_listed.py": 'print("skipped: needs nats-server: not here"); raise SystemExit(77)',
    "test_b_unlisted.py": 'print("skipped: needs fuse-device: no /dev/fuse"); raise SystemExit(77)',
    "test_c_part.py": 'print("skipped part: needs nats-server: the relay part"); print("ok")',
    "test_d_mute.py": 'raise SystemExit(77)',
    "test_e_pass.py": 'print("ok")',
}


def skips(runner):
    """A skip is counted apart; one for want of a package the dependency
    list names fails (so does a part skipped so, and an exit 77 that names
    nothing): scripts of a scratch tree, the list $HD_DEPS."""
    with hdtest.tmpdir() as t:
        os.makedirs(os.path.join(t, "src", "tests", "e2e"))
        for name, code in SCRIPTS.items():
            with open(os.path.join(t, "src", "tests", "e2e", name), "w") as f:
                f.write(code + "\n")
        deps = os.path.join(t, "deps")
        with open(deps, "w") as f:
            f.write("# a list\nnats-server  # the relay\ngcc\n")
        env = dict(os.environ, CK_RUN_SUITE="e2e", HD_BUILD=hdtest.BUILD, HD_E2E_LOGS=t,
                   HD_SRC=os.path.join(t, "src"), HD_DEPS=deps)
        env.pop("HD_E2E", None)
        p = subprocess.run([runner], capture_output=True, text=True, env=env,
                           timeout=120 * hdtest.SLOW)
    out = p.stdout + p.stderr
    # the scratch run's tally of failures is expected: said so, so that the
    # log of a passing make check has no line that reads as a failure
    print("runner on skipping scripts (failures expected here):\n" +
          "".join(f"  | (expected) {ln}\n" for ln in out.splitlines() if ln.startswith("e2e: ")))
    check(p.returncode != 0, "the runner passed a skip for want of a listed package")
    check("e2e: 1 passed, 3 failed, 1 skipped" in out.splitlines(), "the tally of the skips")
    for name in ("test_a_listed.py", "test_c_part.py", "test_d_mute.py"):
        check(f"e2e: failed {name}: " in out, f"{name} not failed")
    check("e2e: skipped test_b_unlisted.py: skipped: needs fuse-device: no /dev/fuse" in out,
          "the skip and its tool not said")


hdtest.run(main)
