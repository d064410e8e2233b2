"""systemd/handoff-agent@.path, checked with systemd's own tool.

- systemd-analyze verify is clean for an instance (handoff-agent@alice.path
  beside the agent's own alice.service, the example of handoffd(8)), with
  MANPATH at our man pages so the Documentation= pages are checked too;
- the check can fail: a copy with a relative DirectoryNotEmpty= is refused;
- it watches the handoffs/ directory under the state_dir convention that
  handoffd.service may write to (ReadWritePaths=-/var/lib/agents).
Without systemd-analyze: prints "SKIPPED" and passes.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("HD_SRC") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
import hdtest  # noqa: E402
UNIT = os.path.join(SRC, "systemd", "handoff-agent@.path")


def verify(d, name, text, man, expect_fail=False):
    """systemd-analyze verify; its complaints printed, except the ones of a
    negative check (expect_fail), which are counted: an expected complaint
    in the `make check` log reads as a failure."""
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True,
                       env=dict(os.environ, MANPATH=man))
    out = [l for l in (r.stdout + r.stderr).splitlines() if "handoff-agent" in l or "alice" in l]
    print(f"$ systemd-analyze verify {name}  -> exit {r.returncode}"
          + (f", {len(out)} complaint line(s), as expected" if expect_fail and r.returncode and out else ""))
    if not (expect_fail and r.returncode and out):
        for l in out:
            print("  " + l)
    return r.returncode, out


def main():
    if not shutil.which("systemd-analyze"):
        hdtest.skip("systemd", "no systemd-analyze")
    unit = open(UNIT).read()
    m = re.search(r"^DirectoryNotEmpty=(\S+)$", unit, re.M)
    assert m and m.group(1) == "/var/lib/agents/%i/handoffs", f"DirectoryNotEmpty= {m and m.group(1)}"
    assert re.search(r"^Unit=%i\.service$", unit, re.M), "Unit=%i.service"
    service = open(os.path.join(SRC, "systemd", "handoffd.service")).read()
    assert "-/var/lib/agents" in service, "handoffd.service may not write /var/lib/agents"
    with tempfile.TemporaryDirectory(prefix="hd-agent-path-") as t:
        man = os.path.join(t, "man")
        for page in os.listdir(os.path.join(SRC, "man")):
            sec = page.rsplit(".", 1)[-1]
            os.makedirs(os.path.join(man, "man" + sec), exist_ok=True)
            shutil.copy(os.path.join(SRC, "man", page), os.path.join(man, "man" + sec, page))
        d = os.path.join(t, "units")
        os.makedirs(d)
        # the agent's service as handoffd(8) shows it
        page = open(os.path.join(SRC, "man", "handoffd.8")).read()
        m = re.search(r"^\.SS Starting an agent on delivery\n.*?^\.EX\n(.*?)^\.EE", page, re.S | re.M)
        assert m, "handoffd.8: no example service in 'Starting an agent on delivery'"
        example = m.group(1).replace("\\e", "\\").replace("\\-", "-")
        with open(os.path.join(d, "alice.service"), "w") as f:
            f.write(example)
        rc, out = verify(d, "alice.service", example, man)
        assert rc == 0 and not out, "the example alice.service of handoffd(8) does not verify"
        rc, out = verify(d, "handoff-agent@alice.path", unit, man)
        assert rc == 0 and not out, "systemd-analyze verify is not clean"
        print("verify clean: handoff-agent@alice.path")
        bad = unit.replace("DirectoryNotEmpty=/var", "DirectoryNotEmpty=var")
        rc, out = verify(d, "handoff-agent@bob.path", bad, man, expect_fail=True)
        assert rc != 0 and out, "a relative DirectoryNotEmpty= must not verify"
        print("a broken copy is refused: the check can fail")
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
