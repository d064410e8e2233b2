"""handoff-hubd's units, checked with systemd's own tools:

- systemd-analyze security --offline=true: overall exposure <= 1.0;
- systemd-analyze verify: the socket and the service clean, on copies
  whose ExecStart points at the built hub, MANPATH at our man pages;
- the sysusers line makes the user in group handoff (as root, on a temp
  root).
Without systemd-analyze: a skip (hdtest.skip()), counted apart.
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
BUILD = os.environ.get("HD_BUILD") or os.path.join(SRC, "build")
SD = os.path.join(SRC, "systemd")
MAX_EXPOSURE = 1.0


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    print(f"$ {' '.join(argv)}  -> exit {r.returncode}")
    return r


def main():
    if not shutil.which("systemd-analyze"):
        hdtest.skip("systemd", "no systemd-analyze")
    unit = os.path.join(SD, "handoff-hubd.service")
    r = run(["systemd-analyze", "security", "--no-pager", "--offline=true", unit])
    m = re.search(r"Overall exposure level for handoff-hubd\.service: ([0-9.]+)", r.stdout + r.stderr)
    assert m, "no exposure line:\n" + (r.stdout + r.stderr)[-2000:]
    level = float(m.group(1))
    print(f"exposure {level} (at most {MAX_EXPOSURE})")
    assert level <= MAX_EXPOSURE, f"exposure {level} > {MAX_EXPOSURE}"

    hubd = os.path.join(BUILD, "handoff-hubd")
    assert os.access(hubd, os.X_OK), f"{hubd} is not built"
    with tempfile.TemporaryDirectory(prefix="hdtest.") as t:
        d = os.path.join(t, "unit")
        os.makedirs(d)
        text = open(unit).read()
        assert "ExecStart=/usr/sbin/handoff-hubd " in text
        with open(os.path.join(d, "handoff-hubd.service"), "w") as f:
            f.write(text.replace("/usr/sbin/handoff-hubd", hubd))
        shutil.copy(os.path.join(SD, "handoff-hubd.socket"), d)
        man = os.path.join(t, "man")
        for page in os.listdir(os.path.join(SRC, "man")):
            sec = page.rsplit(".", 1)[-1]
            os.makedirs(os.path.join(man, "man" + sec), exist_ok=True)
            shutil.copy(os.path.join(SRC, "man", page), os.path.join(man, "man" + sec, page))
        env = dict(os.environ, MANPATH=man)
        r = run(["systemd-analyze", "verify", os.path.join(d, "handoff-hubd.socket"),
                 os.path.join(d, "handoff-hubd.service")], env=env)
        ours = [l for l in (r.stdout + r.stderr).splitlines() if "handoff-hubd" in l]
        for l in ours:
            print("  " + l)
        assert r.returncode == 0 and not ours, "systemd-analyze verify is not clean"
        print("verify clean: handoff-hubd.socket handoff-hubd.service")

        if os.geteuid() == 0 and shutil.which("systemd-sysusers"):
            root = os.path.join(t, "root")
            for sub in ("etc", "usr/lib/sysusers.d"):
                os.makedirs(os.path.join(root, sub))
            shutil.copy(os.path.join(SD, "handoff-hubd.sysusers"),
                        os.path.join(root, "usr/lib/sysusers.d/handoff-hubd.conf"))
            assert run(["systemd-sysusers", f"--root={root}"]).returncode == 0
            users = {l.split(":")[0]: l.split(":") for l in open(os.path.join(root, "etc/passwd"))}
            groups = {l.split(":")[0]: l.split(":") for l in open(os.path.join(root, "etc/group"))}
            assert "handoff-hubd" in users and "handoff" in groups, (users, groups)
            assert int(users["handoff-hubd"][3]) == int(groups["handoff"][2]), \
                "handoff-hubd's primary group is not handoff"
            print("sysusers: handoff-hubd in group handoff")
        else:
            hdtest.skip_part("root", "sysusers")
    print("hub systemd ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
