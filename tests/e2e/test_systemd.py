"""The systemd unit and snippets, checked with systemd's own tools.

- systemd-analyze security --offline=true: overall exposure <= 1.0;
- systemd-analyze verify: clean, on a copy of the unit whose ExecStart
  points at the built daemon, with MANPATH at our man pages (so the
  Documentation= pages are checked too);
- as root: systemd-sysusers and systemd-tmpfiles on a temp root create the
  user, the group and the spool with the right owners and modes.
Without systemd-analyze: a skip (hdtest.skip()), counted apart.
"""

import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile

SRC = os.environ.get("HD_SRC") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
import hdtest  # noqa: E402
BUILD = os.environ.get("HD_BUILD") or os.path.join(SRC, "build")
UNIT = os.path.join(SRC, "systemd", "handoffd.service")
MAX_EXPOSURE = 1.0


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    print(f"$ {' '.join(argv)}  -> exit {r.returncode}")
    return r


def security():
    r = run(["systemd-analyze", "security", "--no-pager", "--offline=true", UNIT])
    out = r.stdout + r.stderr
    for line in out.splitlines():
        if "\u2717" in line:            # the failed checks, for the record
            print("  " + re.sub(r"\s{2,}", "  ", line.strip()))
    m = re.search(r"Overall exposure level for handoffd\.service: ([0-9.]+)", out)
    assert m, "no 'Overall exposure level' line:\n" + out[-2000:]
    level = float(m.group(1))
    print(f"exposure {level} (at most {MAX_EXPOSURE})")
    assert level <= MAX_EXPOSURE, f"exposure {level} > {MAX_EXPOSURE}"


def verify(t):
    daemon = os.path.join(BUILD, "handoffd")
    assert os.access(daemon, os.X_OK), f"{daemon} is not built"
    unit = open(UNIT).read()
    assert "ExecStart=/usr/sbin/handoffd " in unit
    d = os.path.join(t, "unit")
    os.makedirs(d)
    with open(os.path.join(d, "handoffd.service"), "w") as f:
        f.write(unit.replace("/usr/sbin/handoffd", daemon))
    man = os.path.join(t, "man")
    for page in os.listdir(os.path.join(SRC, "man")):
        sec = page.rsplit(".", 1)[-1]
        os.makedirs(os.path.join(man, "man" + sec), exist_ok=True)
        shutil.copy(os.path.join(SRC, "man", page), os.path.join(man, "man" + sec, page))
    env = dict(os.environ, MANPATH=man)
    r = run(["systemd-analyze", "verify", os.path.join(d, "handoffd.service")], env=env)
    ours = [l for l in (r.stdout + r.stderr).splitlines() if "handoffd" in l]
    for l in ours:
        print("  " + l)
    assert r.returncode == 0 and not ours, "systemd-analyze verify is not clean"
    print("verify clean")


def sysusers_tmpfiles(t):
    if os.geteuid() != 0:
        hdtest.skip_part("root", "sysusers and tmpfiles")
        return
    if not shutil.which("systemd-sysusers") or not shutil.which("systemd-tmpfiles"):
        hdtest.skip_part("systemd", "no systemd-sysusers or systemd-tmpfiles")
        return
    root = os.path.join(t, "root")
    for d in ("etc", "usr/lib/sysusers.d", "usr/lib/tmpfiles.d"):
        os.makedirs(os.path.join(root, d))
    shutil.copy(os.path.join(SRC, "systemd/handoffd.sysusers"),
                os.path.join(root, "usr/lib/sysusers.d/handoffd.conf"))
    shutil.copy(os.path.join(SRC, "systemd/handoffd.tmpfiles"),
                os.path.join(root, "usr/lib/tmpfiles.d/handoffd.conf"))
    assert run(["systemd-sysusers", f"--root={root}"]).returncode == 0
    users = {l.split(":")[0]: l.split(":") for l in open(os.path.join(root, "etc/passwd"))}
    groups = {l.split(":")[0]: l.split(":") for l in open(os.path.join(root, "etc/group"))}
    assert "handoffd" in users and "handoff" in groups, (users, groups)
    uid, gid = int(users["handoffd"][2]), int(users["handoffd"][3])
    assert gid == int(groups["handoff"][2]), "handoffd's primary group is not handoff"
    print(f"sysusers: handoffd uid {uid}, group handoff gid {gid}")
    r = run(["systemd-tmpfiles", f"--root={root}", "--create"])
    assert r.returncode == 0, r.stderr
    want = {"": 0o750, "tmp": 0o3770, "handoff": 0o3770, "claimed": 0o750,
            "archive": 0o750, "rejected": 0o750, "ids": 0o750,
            "baton": 0o750, "outbox": 0o750, "cancel": 0o3770}
    for sub, mode in want.items():
        p = os.path.join(root, "var/spool/handoffd", sub)
        st = os.stat(p)
        got = stat.S_IMODE(st.st_mode)
        print(f"  {oct(got)} {st.st_uid}:{st.st_gid} /var/spool/handoffd/{sub}")
        assert got == mode, f"{p}: mode {oct(got)}, want {oct(mode)}"
        assert (st.st_uid, st.st_gid) == (uid, gid), f"{p}: owner {st.st_uid}:{st.st_gid}"
    print("sysusers and tmpfiles ok")


def main():
    if not shutil.which("systemd-analyze"):
        hdtest.skip("systemd", "no systemd-analyze")
    security()
    with tempfile.TemporaryDirectory(prefix="hdtest.") as t:
        verify(t)
        sysusers_tmpfiles(t)
    print("systemd ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
