"""make install / uninstall into a temp DESTDIR.

Installs what HD_BUILD holds (make -o all: never rebuilds it with other
flags) with prefix=/usr sysconfdir=/etc, lists what landed and compares
with the expected set, checks modes, links, the unit, the .pc file; then a
second install keeps an edited config; uninstall removes everything else.
A prefix=/usr/local install puts the unit under /usr/local/lib/systemd.
"""

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

SRC = os.environ.get("HD_SRC") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("HD_BUILD") or os.path.join(SRC, "build")


def version():
    h = open(os.path.join(SRC, "include/handoff.h")).read()
    return re.search(r'#define HD_VERSION_STRING "([^"]+)"', h).group(1)


def make(target, destdir, *extra):
    # The directories this test expects, derived from prefix on the command
    # line: a config.mk from ./configure (debian/rules runs one with a
    # multiarch libdir) must not move them.
    prefix = next((x.split("=", 1)[1] for x in extra if x.startswith("prefix=")), "/usr/local")
    dirs = [f"exec_prefix={prefix}", f"bindir={prefix}/bin", f"sbindir={prefix}/sbin",
            f"libdir={prefix}/lib", f"includedir={prefix}/include",
            f"datarootdir={prefix}/share", f"mandir={prefix}/share/man"]
    if not any(x.startswith("sysconfdir=") for x in extra):
        dirs.append(f"sysconfdir={prefix}/etc")
    argv = ["make", "-C", SRC, "--no-print-directory", "-o", "all",
            f"B={BUILD}", target, f"DESTDIR={destdir}", *dirs, *extra]
    # Not the outer make's flags and variables (make check runs us).
    # Nor variables it exported (debian/rules passes libdir=... and the like).
    keep = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM", "PKG_CONFIG")
    env = {k: v for k, v in os.environ.items() if k in keep}
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    print(f"$ {' '.join(argv)}  -> exit {r.returncode}")
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        raise SystemExit(f"make {target} failed")
    return r.stdout + r.stderr


def listing(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for n in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = os.lstat(p)
    return out


def expected(v):
    return {
        "usr/sbin/handoffd": 0o755,
        "usr/bin/handoffctl": 0o755,
        "usr/sbin/handoff-hubd": 0o755,
        "usr/sbin/handoff-a2a": 0o755,
        "usr/sbin/handoff-push": 0o755,
        "usr/share/man/man8/handoff-hubd.8": 0o644,
        "usr/lib/systemd/system/handoff-hubd.service": 0o644,
        "usr/lib/systemd/system/handoff-hubd.socket": 0o644,
        "usr/lib/sysusers.d/handoff-hubd.conf": 0o644,
        f"usr/lib/libhandoff.so.{v}": 0o644,
        "usr/lib/libhandoff.so.0": "libhandoff.so." + v,
        "usr/lib/libhandoff.so": "libhandoff.so.0",
        "usr/lib/libhandoff.a": 0o644,
        "usr/include/handoff.h": 0o644,
        "usr/lib/pkgconfig/handoff.pc": 0o644,
        "usr/share/man/man1/handoffctl.1": 0o644,
        "usr/share/man/man3/libhandoff.3": 0o644,
        "usr/share/man/man5/handoffd.conf.5": 0o644,
        "usr/share/man/man7/handoff.7": 0o644,
        "usr/share/man/man8/handoffd.8": 0o644,
        "usr/lib/systemd/system/handoffd.service": 0o644,
        "usr/lib/systemd/system/handoff-agent@.path": 0o644,
        "usr/lib/systemd/system-preset/90-handoffd.preset": 0o644,
        "usr/lib/sysusers.d/handoffd.conf": 0o644,
        "usr/lib/tmpfiles.d/handoffd.conf": 0o644,
        "usr/share/bash-completion/completions/handoffctl": 0o644,
        "etc/handoffd/handoffd.conf": 0o644,
    }


def check_tree(root, v):
    got = listing(root)
    print("installed:")
    for p in sorted(got):
        st = got[p]
        extra = " -> " + os.readlink(os.path.join(root, p)) if stat.S_ISLNK(st.st_mode) else ""
        print(f"  {stat.filemode(st.st_mode)} {p}{extra}")
    exp = expected(v)
    missing = sorted(set(exp) - set(got))
    unexpected = sorted(set(got) - set(exp))
    assert not missing, f"not installed: {missing}"
    assert not unexpected, f"installed but not expected: {unexpected}"
    for p, want in exp.items():
        st = got[p]
        if isinstance(want, str):
            assert stat.S_ISLNK(st.st_mode), f"{p} is not a symlink"
            assert os.readlink(os.path.join(root, p)) == want, f"{p} -> {os.readlink(os.path.join(root, p))}"
        else:
            assert stat.S_ISREG(st.st_mode), f"{p} is not a regular file"
            assert stat.S_IMODE(st.st_mode) == want, f"{p} mode {oct(stat.S_IMODE(st.st_mode))}"

    unit = open(os.path.join(root, "usr/lib/systemd/system/handoffd.service")).read()
    assert "ExecStart=/usr/sbin/handoffd -f -c /etc/handoffd/handoffd.conf" in unit, unit
    unit = open(os.path.join(root, "usr/lib/systemd/system/handoff-hubd.service")).read()
    assert "ExecStart=/usr/sbin/handoff-hubd -f -c /etc/handoffd/handoffd.conf" in unit, unit
    pc = open(os.path.join(root, "usr/lib/pkgconfig/handoff.pc")).read()
    assert "prefix=/usr\n" in pc and f"Version: {v}\n" in pc and "libdir=/usr/lib\n" in pc, pc
    assert open(os.path.join(root, "etc/handoffd/handoffd.conf")).read() == \
        open(os.path.join(SRC, "etc/handoffd.conf")).read()

    if shutil.which("pkg-config"):
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(root, "usr/lib/pkgconfig"),
                   PKG_CONFIG_SYSROOT_DIR=root)
        r = subprocess.run(["pkg-config", "--cflags", "--libs", "handoff"],
                           capture_output=True, text=True, env=env)
        print(f"pkg-config --cflags --libs handoff: {r.stdout.strip()} {r.stderr.strip()}")
        assert r.returncode == 0 and "-lhandoff" in r.stdout
    if shutil.which("readelf"):
        r = subprocess.run(["readelf", "-d", os.path.join(root, f"usr/lib/libhandoff.so.{v}")],
                           capture_output=True, text=True)
        assert "[libhandoff.so.0]" in r.stdout, "SONAME is not libhandoff.so.0"
        print("SONAME libhandoff.so.0")


def main():
    v = version()
    for f in ("handoffd", "handoffctl", f"libhandoff.so.{v}", "libhandoff.a"):
        if not os.path.exists(os.path.join(BUILD, f)):
            raise SystemExit(f"{BUILD}/{f} is not built")
    before = {f: os.stat(os.path.join(BUILD, f)).st_mtime_ns
              for f in ("handoffd", "handoffctl")}
    # prefix=/usr/local below rewrites HD_BUILD/.dirs (the compiled-in
    # directories' stamp): put back as it was, bytes and mtime, or the next
    # make in HD_BUILD (test_operator's make run) rebuilds and relinks the
    # binaries while other scripts run them.
    stamp = os.path.join(BUILD, ".dirs")
    st = os.stat(stamp) if os.path.exists(stamp) else None
    saved = open(stamp, "rb").read() if st else None
    try:
        return install_all(v, before)
    finally:
        if st:
            with open(stamp, "wb") as f:
                f.write(saved)
            os.utime(stamp, ns=(st.st_atime_ns, st.st_mtime_ns))


def install_all(v, before):
    with tempfile.TemporaryDirectory(prefix="hdtest.") as t:
        root = os.path.join(t, "root")
        make("install", root, "prefix=/usr", "sysconfdir=/etc")
        check_tree(root, v)

        # A second install keeps an edited config.
        conf = os.path.join(root, "etc/handoffd/handoffd.conf")
        with open(conf, "a") as f:
            f.write("; edited\n")
        out = make("install", root, "prefix=/usr", "sysconfdir=/etc")
        assert open(conf).read().endswith("; edited\n"), "install replaced an edited config"
        assert "keeping" in out

        make("uninstall", root, "prefix=/usr", "sysconfdir=/etc")
        left = sorted(listing(root))
        print(f"after uninstall: {left}")
        assert left == ["etc/handoffd/handoffd.conf"], f"uninstall left {left}"
        os.unlink(conf)
        make("install", root, "prefix=/usr", "sysconfdir=/etc")
        make("uninstall", root, "prefix=/usr", "sysconfdir=/etc")
        left = sorted(listing(root))
        assert left == [], f"uninstall left {left}"
        print("uninstall left no files")

        # prefix=/usr/local: systemd's paths follow the prefix.
        root2 = os.path.join(t, "local")
        make("install", root2, "prefix=/usr/local")
        got = listing(root2)
        for p in ("usr/local/lib/systemd/system/handoffd.service",
                  "usr/local/etc/handoffd/handoffd.conf",
                  "usr/local/sbin/handoffd",
                  "usr/local/lib/sysusers.d/handoffd.conf"):
            assert p in got, f"prefix=/usr/local: {p} not installed"
        unit = open(os.path.join(root2, "usr/local/lib/systemd/system/handoffd.service")).read()
        assert "ExecStart=/usr/local/sbin/handoffd -f -c /usr/local/etc/handoffd/handoffd.conf" in unit
        make("uninstall", root2, "prefix=/usr/local")
        assert sorted(listing(root2)) == [], sorted(listing(root2))
        print("prefix=/usr/local: ok")

    after = {f: os.stat(os.path.join(BUILD, f)).st_mtime_ns
             for f in ("handoffd", "handoffctl")}
    assert before == after, "make install rebuilt the binaries in HD_BUILD"
    print("install ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
