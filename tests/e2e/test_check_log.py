"""The `make check` log (issue 28.9): a test that passes prints no line that
reads as a failure (systemd-analyze's complaints about the broken copy of
test_agent_path's negative check), and the end-to-end run ends with one
summary line "e2e: N passed, N failed, N skipped" as the unit run ends with Check's.

Runs the test runner itself on one cheap script (HD_E2E selects it)."""

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
    check(lines.index(summary[0]) >= len(lines) - 2, f"summary not at the end: {lines[-3:]}")


hdtest.run(main)
