"""The build itself: what a header change rebuilds, who may include what,
the quiet output, and ./configure without Check.

- `make -n -W HEADER` (what would a change of HEADER rebuild) names exactly
  the objects whose -MMD dependency file lists HEADER, for a library, a
  daemon, a CLI and the public header;
- a library source cannot include a daemon header, a daemon source cannot
  include a CLI header (each directory has its own include path), while
  their own headers still compile;
- `make` prints "  CC     src/lib/private/util.c" for an object, `make V=1` the
  full command line;
- ./configure (when autoconf is there) succeeds without the `check`
  package and fails without a library the build needs;
- `make deb`, with the tools it calls replaced by recorders (apt-get,
  dpkg-query, dpkg-checkbuilddeps, dpkg-buildpackage, lintian): lintian
  is installed and run only with LINTIAN=1; DEB_BUILD_OPTIONS=nocheck
  builds with the nocheck profile and installs none of the tests'
  packages; it says first what it builds and whether the tests run, and
  lists every package of debian/control it built; the README says the
  same (every package, nocheck), and its from-source steps create every
  user the installed sysusers.d files name (HD_REAL_DEB=1: also a real
  `DEB_BUILD_OPTIONS=nocheck make deb`, about a minute on 2 cores).
Prints what it checked.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("HD_SRC") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("HD_BUILD") or os.path.join(SRC, "build")
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
import hdtest  # noqa: E402

fail = hdtest.fail


def make_env():
    # Not the outer make's jobserver, flags and variables (make check runs us).
    keep = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM", "PKG_CONFIG")
    return {k: v for k, v in os.environ.items() if k in keep}


def build_vars():
    """B, SANITIZE and the compiled-in directories of the build under test,
    so that asking make about it changes nothing there (and its stamp of
    those directories, which another test may have touched, counts as
    old)."""
    b = os.path.relpath(BUILD, SRC)
    out = [f"B={b}", "NO_DEPS=1", "-o", os.path.join(b, ".dirs")]
    if os.environ.get("SANITIZE") == "1":
        out.append("SANITIZE=1")
    try:
        dirs = open(os.path.join(BUILD, ".dirs")).read().split()
    except OSError:
        dirs = []
    if len(dirs) == 3:
        out += [f"sysconfdir={dirs[0]}", f"runstatedir={dirs[1]}",
                f"localstatedir={dirs[2]}"]
    return out


def make(*args, cwd=SRC):
    r = subprocess.run(["make", "--no-print-directory", *args], cwd=cwd,
                       capture_output=True, text=True, env=make_env(), timeout=300)
    return r.returncode, r.stdout, r.stderr


def includers(header):
    """Objects of the build whose .d file names header."""
    found = set()
    # the objects of `all` (not build/fuzz, build/san, the tests)
    for d, _, files in os.walk(os.path.join(BUILD, "src")):
        for n in files:
            if not n.endswith(".d"):
                continue
            # a source that moved leaves its old object behind: not built
            rel = os.path.relpath(os.path.join(d, n[:-2] + ".c"), BUILD)
            if not os.path.isfile(os.path.join(SRC, rel)):
                continue
            text = open(os.path.join(d, n)).read().replace("\\\n", " ")
            target, _, deps = text.partition(":")
            if header in deps.split():
                found.add(os.path.normpath(os.path.join(SRC, target.split()[0])))
    return found


def would_rebuild(header):
    rc, out, err = make("-n", "-W", header, "V=1", *build_vars(), "all")
    if rc != 0:
        fail(f"make -n -W {header}: exit {rc}: {err[-1000:]}")
        return set()
    objs = re.findall(r" -c -o (\S+\.o) ", out)
    return {os.path.normpath(os.path.join(SRC, o)) for o in objs}


def header_rebuilds():
    for h in ("src/lib/spool/items.h", "src/handoffd/log.h", "src/lib/files.h",
              "include/handoff.h"):
        want = includers(h)
        got = would_rebuild(h)
        short = sorted(os.path.relpath(o, BUILD) for o in got)
        if not want:
            fail(f"{h}: no object of {BUILD} includes it (is the build there?)")
        elif got != want:
            fail(f"{h}: a change rebuilds {short}, "
                 f"but only {sorted(os.path.relpath(o, BUILD) for o in want)} include it")
        else:
            print(f"{h}: rebuilds {len(got)} object(s), exactly its includers")


def compile_line(obj_src):
    """The compile command make uses for obj_src, as an argv."""
    obj = os.path.join(os.path.relpath(BUILD, SRC), obj_src[:-2] + ".o")
    rc, out, err = make("-n", "-W", obj_src, "V=1", *build_vars(), obj)
    for line in out.splitlines():
        if " -c -o " in line and line.rstrip().endswith(obj_src):
            return line.split()
    fail(f"no compile line for {obj_src} in make -n: {out[-500:]} {err[-500:]}")
    return None


def include_paths():
    # config.h, the config reader, is the library's (src/lib/config), for
    # every program; no program sees another's headers.
    cases = [("src/lib/private/util.c", "util.h", "spool.h"),
             ("src/handoffd/log.c", "config.h", "handoffctl.h"),
             ("src/handoffctl/cmd_show.c", "config.h", "spool.h"),
             ("src/hubd/hub_accept.c", "items.h", "handoffctl.h")]
    with tempfile.TemporaryDirectory(prefix="hdtest.") as t:
        for src, own, foreign in cases:
            argv = compile_line(src)
            if not argv:
                continue
            argv = [a for a in argv if a not in ("-MMD", "-MP")]
            i = argv.index("-o")
            for inc, should in ((own, True), (foreign, False)):
                c = os.path.join(t, "probe.c")
                open(c, "w").write(f'#include "{inc}"\nint probe(void);\nint probe(void) {{ return 0; }}\n')
                cmd = argv[:i] + ["-fsyntax-only"] + [a for a in argv[i + 2:] if a != src] + [c]
                r = subprocess.run(cmd, cwd=SRC, capture_output=True, text=True)
                if (r.returncode == 0) != should:
                    fail(f"with the flags of {src}, #include \"{inc}\" "
                         f"{'fails' if should else 'compiles'}: {r.stderr[-500:]}")
                else:
                    print(f"{src}: #include \"{inc}\" {'compiles' if should else 'is refused'}")


def quiet_output():
    with tempfile.TemporaryDirectory(prefix="hdtest.") as t:
        b = os.path.join(t, "b")
        obj = os.path.join(b, "src/lib/private/util.o")
        rc, out, err = make("NO_DEPS=1", f"B={b}", obj)
        if rc != 0 or not os.path.exists(obj):
            fail(f"make {obj}: exit {rc}: {err[-1000:]}")
            return
        if out.splitlines() != ["  CC     src/lib/private/util.c"] or err:
            fail(f"quiet make printed {out!r} {err!r}, wanted '  CC     src/lib/private/util.c'")
        else:
            print(f"make prints: {out.strip()!r}")
        rc, out, err = make("NO_DEPS=1", f"B={b}", "V=1", "-B", obj)
        lines = out.splitlines()
        if rc != 0 or len(lines) != 1 or not re.search(r" -c -o \S+util\.o src/lib/private/util\.c$", lines[0]):
            fail(f"make V=1 printed {out!r}, wanted the compile command")
        else:
            print(f"make V=1 prints the command ({len(lines[0])} chars)")


def default_sysconfdir():
    """A plain `make` reads /etc/handoffd/handoffd.conf, as the package and
    the man pages say (a config.mk from ./configure may say otherwise)."""
    rc, out, err = make("-s", "NO_DEPS=1", "--eval", "print-sysconfdir: ; @echo $(sysconfdir)",
                        "print-sysconfdir")
    got = out.strip()
    cm = os.path.join(SRC, "config.mk")
    if os.path.exists(cm) and re.search(r"^sysconfdir = (?!/etc$)", open(cm).read(), re.M):
        print(f"sysconfdir: {got} (from config.mk)")
    elif got != "/etc":
        fail(f"a plain make has sysconfdir {got!r}, not /etc")
    else:
        print("a plain make reads /etc/handoffd/handoffd.conf")


def configure_without_check():
    if not shutil.which("autoconf"):
        fail("autoconf is not installed (mk/build-deps lists it)")
        return
    real = shutil.which(os.environ.get("PKG_CONFIG", "pkg-config"))
    with tempfile.TemporaryDirectory(prefix="hdtest.") as t:
        for f in ("configure.ac", "config.mk.in", "include/handoff.h"):
            os.makedirs(os.path.dirname(os.path.join(t, f)), exist_ok=True)
            shutil.copy(os.path.join(SRC, f), os.path.join(t, f))
        r = subprocess.run(["autoconf"], cwd=t, capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"autoconf: {r.stderr[-1000:]}")
            return
        for hidden, should in (("check", True), ("jansson", False)):
            # pkg-config that does not know one module
            pc = os.path.join(t, "pc-without-" + hidden)
            open(pc, "w").write(
                "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = %s ] && exit 1; done\n"
                "exec %s \"$@\"\n" % (hidden, real))
            os.chmod(pc, 0o755)
            r = subprocess.run(["./configure", f"PKG_CONFIG={pc}"], cwd=t,
                               capture_output=True, text=True, env=make_env())
            if (r.returncode == 0) != should:
                fail(f"./configure without {hidden}: exit {r.returncode}, "
                     f"wanted {'success' if should else 'failure'}:\n{(r.stdout + r.stderr)[-1500:]}")
                continue
            print(f"./configure without {hidden}: {'ok' if should else 'stops'}")
            if should:
                mk = open(os.path.join(t, "config.mk")).read()
                if not re.search(r"^sysconfdir = /etc$", mk, re.M):
                    fail("./configure: sysconfdir is not /etc by default")


FAKE_TOOL = """#!/bin/sh
# records its call: argv, and DEB_BUILD_OPTIONS / DEB_BUILD_PROFILES
printf '%s|%s|%s\\n' "$(basename "$0")" "$*" "${DEB_BUILD_OPTIONS:-}/${DEB_BUILD_PROFILES:-}" >> "$FAKE_LOG"
case "$(basename "$0")" in
dpkg-query) exit 1 ;;                 # nothing is installed
dpkg-checkbuilddeps) exit 1 ;;        # Build-Depends unmet
dpkg-buildpackage)
    v=$(sed -n '1s/.*(\\(.*\\)).*/\\1/p' debian/changelog)
    for p in $(sed -n 's/^Package: *//p' debian/control); do : > "../${p}_${v}_amd64.deb"; done
    : > "../handoffd_${v}_amd64.buildinfo"; : > "../handoffd_${v}_amd64.changes" ;;
sudo) exec "$@" ;;
esac
exit 0
"""


def fake_make_deb(t, *args):
    """make deb with apt-get, dpkg-query, dpkg-checkbuilddeps,
    dpkg-buildpackage, lintian and sudo recorders first on PATH: (exit,
    output, [(tool, args, env)])."""
    bindir = os.path.join(t, "bin")
    os.makedirs(bindir, exist_ok=True)
    for tool in ("apt-get", "dpkg-query", "dpkg-checkbuilddeps", "dpkg-buildpackage",
                 "lintian", "sudo"):
        path = os.path.join(bindir, tool)
        with open(path, "w") as f:
            f.write(FAKE_TOOL)
        os.chmod(path, 0o755)
    log = os.path.join(t, "calls")
    open(log, "w").close()
    env = dict(make_env(), PATH=bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
               FAKE_LOG=log, TMPDIR=t)
    # B: not the build under test (make reads and stamps B's directories)
    r = subprocess.run(["make", "--no-print-directory", "deb", f"B={t}/b", f"DEBDIR={t}/debs", *args],
                       cwd=SRC, capture_output=True, text=True, env=env, timeout=300)
    calls = [tuple(ln.split("|", 2)) for ln in open(log).read().splitlines()]
    return r.returncode, r.stdout + r.stderr, calls


def control_packages():
    return re.findall(r"^Package: *(\S+)", open(os.path.join(SRC, "debian", "control")).read(), re.M)


def make_deb():
    packages = control_packages()
    deb_deps = [p for p in re.sub(r"#.*", "", open(os.path.join(SRC, "mk", "deb-deps")).read()).split()]
    for args in (["DEB_BUILD_OPTIONS=nocheck"], ["LINTIAN=1"]):
        nocheck = "DEB_BUILD_OPTIONS=nocheck" in args
        with tempfile.TemporaryDirectory(prefix="hdtest.") as t:
            rc, out, calls = fake_make_deb(t, *args)
            what = "make deb " + " ".join(args)
            if rc != 0:
                fail(f"{what} (tools recorded): exit {rc}: {out[-1500:]}")
                continue
            installs = [a.split() for tool, a, _ in calls if tool == "apt-get" and a.split()[:1] == ["install"]]
            installed = {w for a in installs for w in a[1:] if not w.startswith("-")}
            builds = [(a, e) for tool, a, e in calls if tool == "dpkg-buildpackage"]
            lint = [a for tool, a, _ in calls if tool == "lintian"]
            build_dep = [a for tool, a, _ in calls if tool == "apt-get" and a.split()[:1] == ["build-dep"]]
            print(f"{what}: apt-get install {sorted(installed)}; build-dep {build_dep}; "
                  f"dpkg-buildpackage {builds}; lintian {lint}")
            if ("lintian" in installed or bool(lint)) != ("LINTIAN=1" in args):
                fail(f"{what}: lintian installed {'lintian' in installed}, run {bool(lint)}")
            if len(builds) != 1:
                fail(f"{what}: dpkg-buildpackage called {len(builds)} times")
            elif nocheck and not ("-Pnocheck" in builds[0][0].split() and
                                  "nocheck" in builds[0][1].split("/")[0].split()):
                fail(f"{what}: dpkg-buildpackage {builds[0]}: not with DEB_BUILD_OPTIONS=nocheck "
                     "and the nocheck profile")
            elif not nocheck and "nocheck" in " ".join(builds[0]):
                fail(f"{what}: dpkg-buildpackage {builds[0]} skips the tests")
            if nocheck and not installed <= set(deb_deps):
                fail(f"{what}: installs {sorted(installed - set(deb_deps))}, not packaging tools")
            if not build_dep or (nocheck and "-Pnocheck" not in build_dep[0].split()):
                fail(f"{what}: the Build-Depends: apt-get build-dep {build_dep}")
            first = out.strip().splitlines()[0] if out.strip() else ""
            if not all(p in out.split("deb: packages in")[0] for p in packages) or \
                    ("no tests" if nocheck else "runs make check") not in out:
                fail(f"{what}: does not say first what it builds and whether the tests run: {first!r}")
            listed = re.findall(r"^(?:\S*/)?([^/\s]+?)_\S+\.deb$", out.split("deb: packages in")[-1], re.M)
            if sorted(listed) != sorted(packages):
                fail(f"{what}: lists {listed}, debian/control builds {packages}")
            else:
                print(f"{what}: lists every package: {' '.join(listed)}")


def readme_packaging():
    readme = open(os.path.join(SRC, "README.md")).read()
    m = re.search(r"^\*\*Package \(Debian(.*?)^\*\*From source", readme, re.S | re.M)
    para = " ".join(m.group(1).split()) if m else ""
    missing = [p for p in control_packages() if f"`{p}`" not in para]
    if not para or missing or "DEB_BUILD_OPTIONS=nocheck" not in para or "minutes" not in para:
        fail(f"README's package paragraph: packages missing {missing}, nocheck "
             f"{'DEB_BUILD_OPTIONS=nocheck' in para}, how long {'minutes' in para}")
    else:
        print("README: make deb's packages, how long, DEB_BUILD_OPTIONS=nocheck")
    m = re.search(r"^\*\*From source.*?^```sh\n(.*?)^```", readme, re.S | re.M)
    steps = m.group(1) if m else ""
    sysusers = sorted(os.path.basename(f).replace(".sysusers", ".conf")
                      for f in glob.glob(os.path.join(SRC, "systemd", "*.sysusers")))
    line = next((ln for ln in steps.splitlines() if "systemd-sysusers" in ln), "")
    named = [f for f in sysusers if f in line.split()]
    if named != sysusers:
        fail(f"README's from-source steps: systemd-sysusers names {named}, installed are {sysusers}")
    else:
        print(f"README: from source, systemd-sysusers {' '.join(named)}")


def real_deb():
    """HD_REAL_DEB=1: DEB_BUILD_OPTIONS=nocheck make deb for real."""
    if os.environ.get("HD_REAL_DEB") != "1":
        print("real make deb: not run (HD_REAL_DEB=1 runs DEB_BUILD_OPTIONS=nocheck make deb)")
        return
    import time
    with tempfile.TemporaryDirectory(prefix="hdtest.") as t:
        t0 = time.monotonic()
        r = subprocess.run(["make", "--no-print-directory", "deb", f"DEBDIR={t}",
                            "DEB_BUILD_OPTIONS=nocheck"], cwd=SRC, capture_output=True,
                           text=True, env=make_env(), timeout=3600)
        debs = sorted({re.sub(r"(-dbgsym)?_.*", "", n) for n in os.listdir(t) if n.endswith(".deb")})
        print(f"real DEB_BUILD_OPTIONS=nocheck make deb: exit {r.returncode} in "
              f"{time.monotonic() - t0:.0f} s: {debs}")
        if r.returncode != 0 or debs != sorted(control_packages()) or "== running tests" in r.stdout:
            fail(f"real make deb: {r.returncode} {debs}: {(r.stdout + r.stderr)[-2000:]}")


def main():
    header_rebuilds()
    include_paths()
    quiet_output()
    default_sysconfdir()
    configure_without_check()
    make_deb()
    readme_packaging()
    real_deb()
    hdtest.finish("build ok")


if __name__ == "__main__":
    main()
