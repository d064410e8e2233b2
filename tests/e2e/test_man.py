"""Man pages: lint-clean, and every name the code knows is documented.

- mandoc -T lint on each page: any WARNING or worse fails (STYLE is ignored).
- every reason name of src/lib/reason.c appears in handoff(7);
- every config key of etc/handoffd.conf (and of src/lib/config/config*.c, the
  reader handoffd and handoffctl share) appears in handoffd.conf(5);
- every long option printed by `handoffd --help` appears in handoffd(8);
- every subcommand printed by `handoffctl --help` appears in handoffctl(1),
  and for each subcommand whose --help works, its long options too;
- the exit codes each subcommand's --help lists are the ones its section
  of handoffctl(1) lists, and handoffd's --help agrees with handoffd(8);
- the default configuration path is the same in --help of every command,
  in what the binaries read without -c, and (for a build with sysconfdir
  /etc) in the man pages;
- every page renders at 80 columns as a user reads it (MANWIDTH=80 man -l,
  groff's warnings on): no warning, no line wider than 80;
- every quoted text of a rendered page (a log line, a message, a value)
  is made of words that the code's strings or the page's source have: a
  font macro whose unquoted arguments run together renders words glued
  ("cannottakeinthe...") that no source has.
Prints what it checked.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

SRC = os.environ.get("HD_SRC") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("HD_BUILD") or os.path.join(SRC, "build")
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
import hdtest  # noqa: E402
MAN = os.path.join(SRC, "man")
PAGES = ["handoffd.8", "handoffd.conf.5", "handoffctl.1", "handoff.7",
         "libhandoff.3", "handoff-hubd.8"]

fail = hdtest.fail


def render(page):
    """The page as plain text (overstrike removed)."""
    out = subprocess.run(["mandoc", "-T", "ascii", os.path.join(MAN, page)],
                         capture_output=True, text=True, check=True).stdout
    return re.sub(r".\x08", "", out)


def has_word(text, word):
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


def lint():
    for page in PAGES:
        path = os.path.join(MAN, page)
        if not os.path.exists(path):
            fail(f"{page}: missing")
            continue
        r = subprocess.run(["mandoc", "-T", "lint", "-W", "all", path],
                           capture_output=True, text=True)
        bad = []
        for line in (r.stdout + r.stderr).splitlines():
            m = re.search(r": (STYLE|WARNING|ERROR|UNSUPP|BADARG)(?::|\s)", line)
            if m and m.group(1) != "STYLE":
                bad.append(line)
        if bad:
            fail(f"{page}: mandoc -T lint:\n  " + "\n  ".join(bad))
        else:
            print(f"lint ok: {page}")


def reasons():
    text = open(os.path.join(SRC, "src/lib/reason.c")).read()
    names = re.findall(r'\[HD_[A-Z0-9_]+\]\s*=\s*"([a-z0-9_]+)"', text)
    if len(names) < 2:
        fail("no reason names found in src/lib/reason.c")
        return
    page = render("handoff.7")
    missing = [n for n in names if not has_word(page, n)]
    print(f"reasons checked in handoff.7: {len(names)}: {' '.join(names)}")
    if missing:
        fail("reason codes missing from handoff.7: " + " ".join(missing))


def sample_keys():
    """(section, key) pairs of etc/handoffd.conf, commented-out ones too."""
    pairs = []
    section = None
    for line in open(os.path.join(SRC, "etc/handoffd.conf")):
        m = re.match(r"^[;#]?\s*\[([a-z]+)(?: [^\]]*)?\]\s*$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^[;#]?\s*([a-z_][a-z0-9_]*)\s*=", line)
        if m and section:
            key = m.group(1)
            # In [keys], names other than these are example kid names.
            if section == "keys" and key not in ("default", "pubkey_dir"):
                continue
            pairs.append((section, key))
    return pairs


def config_keys():
    pairs = sample_keys()
    if not pairs:
        fail("no keys found in etc/handoffd.conf")
        return
    keys = sorted({k for _, k in pairs})
    sections = sorted({s for s, _ in pairs})
    codes = sorted(glob.glob(os.path.join(SRC, "src/lib/config/config*.c")))
    code_keys = []
    if not codes:
        fail("no src/lib/config/config*.c")
    else:
        text = "".join(open(f).read() for f in codes)
        code_keys = set(re.findall(r'strcmp\(k, "([a-z_]+)"\)', text))
        code_keys |= set(re.findall(r'\{ "([a-z_]+)", &c->', text))
        code_keys = sorted(code_keys)
        extra = sorted(set(code_keys) - set(keys))
        if extra:
            fail("keys in src/lib/config/config*.c missing from etc/handoffd.conf: " + " ".join(extra))
        # The parser's own list of each section's keys (keys_SECTION[],
        # what "did you mean" offers), section by section: a key that
        # another section of the sample holds is no excuse.
        tables = re.findall(r"keys_([a-z]+)\[\]\s*=\s*\{([^}]*)\}", text)
        if not tables:
            fail("no keys_SECTION[] tables in src/lib/config/config*.c")
        have = set(pairs)
        missing = sorted(f"[{sec}] {k}" for sec, body in tables
                         for k in re.findall(r'"([a-z_]+)"', body) if (sec, k) not in have)
        print(f"  (sections' key tables: {' '.join(sec for sec, _ in tables)})")
        if missing:
            fail("keys of the parser's tables missing from etc/handoffd.conf: " + ", ".join(missing))
    page = render("handoffd.conf.5")
    print(f"config keys checked in handoffd.conf.5: {len(keys)}: {' '.join(keys)}")
    if code_keys:
        print(f"  (config.c knows: {' '.join(code_keys)})")
    missing = [k for k in sorted(set(keys) | set(code_keys)) if not has_word(page, k)]
    if missing:
        fail("config keys missing from handoffd.conf.5: " + " ".join(missing))
    for s in sections:
        if f"[{s}" not in page:
            fail(f"section [{s}] missing from handoffd.conf.5")


def long_options(text):
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text)))


def run_help(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    return r.returncode, r.stdout + r.stderr


def daemon_options(prog="handoffd", page_name="handoffd.8"):
    exe = os.path.join(BUILD, prog)
    rc, out = run_help([exe, "--help"])
    opts = long_options(out or "") if rc == 0 else []
    if not opts:
        fail(f"{prog} --help: exit {rc}, no long options printed")
        return
    page = render(page_name)
    print(f"{prog} options checked in {page_name}: {' '.join(opts)}")
    missing = [o for o in opts if o not in page]
    if missing:
        fail(f"{prog} options missing from {page_name}: " + " ".join(missing))


def ctl_commands():
    exe = os.path.join(BUILD, "handoffctl")
    rc, out = run_help([exe, "--help"])
    if rc != 0:
        fail(f"handoffctl --help: exit {rc}")
        return
    cmds = re.findall(r"^  ([a-z]+)\s", out, re.M)
    page = render("handoffctl.1")
    print(f"handoffctl subcommands checked in handoffctl.1: {' '.join(cmds)}")
    for c in cmds:
        if not re.search(r"^   " + c + r"\s*$", page, re.M) and not has_word(page, "handoffctl " + c):
            fail(f"subcommand {c} has no section in handoffctl.1")
    for c in cmds:
        rc, out = run_help([exe, c, "--help"])
        if rc != 0:
            print(f"  {c}: --help exit {rc}: options not checked")
            continue
        opts = long_options(out)
        missing = [o for o in opts if o not in page]
        print(f"  {c}: options checked: {' '.join(opts)}")
        if missing:
            fail(f"handoffctl {c} options missing from handoffctl.1: " + " ".join(missing))


def exit_codes_of(text):
    """The codes of an "Exit: 0 ..., 1 ..." paragraph (up to a blank line
    or the end), as a sorted list."""
    m = re.search(r"\bExit(?: codes)?:?\s+(.*?)(?:\n\s*\n|\Z)", text, re.S)
    if not m:
        return None
    para = " ".join(m.group(1).split())
    return sorted({int(c) for c in re.findall(r"(?:^|[ ,(])([0-9])(?= [A-Za-z(\"])", para)})


def ctl_sections(page):
    """handoffctl(1) as {subcommand: its section's text}."""
    out = {}
    parts = re.split(r"^   (\w+)\s*$", page.split("\nOUTPUT")[0], flags=re.M)
    for i in range(1, len(parts) - 1, 2):
        out[parts[i]] = parts[i + 1]
    return out


def exit_codes():
    exe = os.path.join(BUILD, "handoffctl")
    rc, out = run_help([exe, "--help"])
    if rc != 0:
        fail(f"handoffctl --help: exit {rc}")
        return
    cmds = re.findall(r"^  ([a-z]+)\s", out, re.M)
    sections = ctl_sections(render("handoffctl.1"))
    for c in cmds:
        rc, help_text = run_help([exe, c, "--help"])
        want = exit_codes_of(help_text or "")
        if rc != 0 or not want:
            fail(f"handoffctl {c} --help lists no exit codes (exit {rc})")
            continue
        got = exit_codes_of(sections.get(c, "")) if c in sections else None
        if got != want:
            fail(f"handoffctl {c}: --help says exit {want}, handoffctl.1 says {got}")
        else:
            print(f"  {c}: exit codes {want} in --help and handoffctl.1")
    rc, help_text = run_help([os.path.join(BUILD, "handoffd"), "--help"])
    want = exit_codes_of(help_text or "")
    page = render("handoffd.8")
    m = re.search(r"^EXIT STATUS\n(.*?)^\S", page, re.S | re.M)
    got = sorted({int(c) for c in re.findall(r"^       ([0-9])\s", m.group(1), re.M)}) if m else None
    if not want or got != want:
        fail(f"handoffd: --help says exit {want}, handoffd.8 says {got}")
    else:
        print(f"  handoffd: exit codes {want} in --help and handoffd.8")


def default_config_path():
    # (the build's own sysconfdir is what --help prints; a plain make's is
    # /etc, which test_build.py checks)
    seen = {}
    exe = os.path.join(BUILD, "handoffctl")
    rc, out = run_help([exe, "--help"])
    cmds = re.findall(r"^  ([a-z]+)\s", out or "", re.M)
    for argv in [[os.path.join(BUILD, "handoffd"), "--help"]] + [[exe, c, "--help"] for c in cmds]:
        rc, text = run_help(argv)
        for p in re.findall(r"\(default (/\S+\.conf)\)", " ".join((text or "").split())):
            seen.setdefault(p, []).append(" ".join(os.path.basename(a) for a in argv[:-1]))
    if len(seen) != 1:
        fail(f"--help names {len(seen)} default config paths: {seen}")
        return
    path = next(iter(seen))
    # what the binaries read without -c
    r = subprocess.run([os.path.join(BUILD, "handoffd"), "-n"], capture_output=True, text=True)
    r2 = subprocess.run([exe, "list"], capture_output=True, text=True)
    for name, res in (("handoffd -n", r), ("handoffctl list", r2)):
        if path not in res.stdout + res.stderr and res.returncode != 0:
            fail(f"{name} without -c does not read {path}: {res.stderr.strip()}")
    print(f"default config path: {path} in {sum(len(v) for v in seen.values())} --help texts "
          "and in what the binaries read")
    if path == "/etc/handoffd/handoffd.conf":
        for page in ("handoffd.8", "handoffctl.1", "handoffd.conf.5"):
            if path not in render(page):
                fail(f"{page} does not name the default {path}")
        print("  and in handoffd.8, handoffctl.1, handoffd.conf.5")
    else:
        print("  (built with another sysconfdir: the pages name /etc's path; not compared)")


def render_80():
    if not shutil.which("man") or not shutil.which("groff"):
        fail("man (man-db) or groff is not installed (mk/build-deps lists them)")
        return
    env = dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0", LC_ALL="C.UTF-8")
    for page in PAGES:
        r = subprocess.run(["man", "--warnings", "-l", os.path.join(MAN, page)],
                           capture_output=True, text=True, env=env)
        text = re.sub(r".\x08", "", r.stdout)
        wide = [line for line in text.splitlines() if len(line) > 80]
        if r.returncode != 0 or r.stderr.strip() or wide:
            fail(f"{page} at 80 columns: {r.stderr.strip()[:500]} {len(wide)} wide line(s) {wide[:2]}")
        else:
            print(f"renders at 80 columns: {page}")


def quoted_rendered():
    words = set()
    for f in glob.glob(os.path.join(SRC, "src", "**", "*.[ch]"), recursive=True):
        with open(f, errors="replace") as fh:
            for lit in re.findall(r'"((?:[^"\\\n]|\\.)*)"', fh.read()):
                words.update(w.lower() for w in re.findall(r"[A-Za-z]+", lit))
    for page in PAGES:
        with open(os.path.join(MAN, page)) as fh:
            words.update(w.lower() for w in re.findall(r"[A-Za-z]+", fh.read()))
    env = dict(os.environ, MANWIDTH="1000", MAN_KEEP_FORMATTING="0", LC_ALL="C.UTF-8")
    n = 0
    for page in PAGES:
        out = subprocess.run(["man", "-l", os.path.join(MAN, page)], capture_output=True,
                             text=True, env=env, check=True).stdout
        out = re.sub(r".\x08", "", out)
        for q in re.findall(r'[\u201c"]([^\u201d"\n]{3,300})[\u201d"]', out):
            n += 1
            glued = [w for w in re.findall(r"[A-Za-z]+", q) if len(w) >= 4 and w.lower() not in words]
            if glued:
                fail(f"{page}: quoted text renders as words no source has ({', '.join(glued)}): "
                     f"\u201c{q}\u201d")
    print(f"quoted texts as rendered: {n}, every word one the sources have")


def api_functions():
    """Every function of include/handoff.h appears in libhandoff(3)."""
    hdr = open(os.path.join(SRC, "include", "handoff.h")).read()
    names = sorted(set(re.findall(r"\b(hd_[a-z_]+)\(", hdr)))
    page = render("libhandoff.3")
    missing = [n for n in names if not has_word(page, n)]
    if missing:
        fail("libhandoff.3 does not document: " + " ".join(missing))
    print(f"API functions checked in libhandoff.3: {len(names)}")


def libhandoff_example():
    """The EXAMPLES program of libhandoff(3) compiles against this build."""
    lib = os.path.join(BUILD, "libhandoff.a")
    if not shutil.which("cc"):
        hdtest.skip_part("gcc", "libhandoff(3) example: no cc")
        return
    if not os.path.exists(lib):
        fail(f"libhandoff(3) example: no {lib}")
        return
    src = open(os.path.join(MAN, "libhandoff.3")).read()
    m = re.search(r"^\.SH EXAMPLES\n.*?^\.EX\n(.*?)^\.EE", src, re.S | re.M)
    if not m:
        fail("libhandoff.3: no example")
        return
    code = m.group(1).replace("\\e", "\\").replace("\\-", "-")
    code = ("int check(const char *keyfile, const char *dir, const char *name);\n"
            + code + "\nint main(int c, char **v) { return c == 4 ? "
            "check(v[1], v[2], v[3]) != 0 : 2; }\n")
    import tempfile
    with tempfile.TemporaryDirectory(prefix="hdtest.") as t:
        c = os.path.join(t, "ex.c")
        open(c, "w").write(code)
        libs = subprocess.run(["pkg-config", "--libs", "jansson", "libsodium",
                               "yaml-0.1", "expat", "double-conversion", "libuv"],
                              capture_output=True, text=True).stdout.split()
        # A sanitized build's library needs the sanitizer runtimes too.
        san = ["-fsanitize=address,undefined"] if os.environ.get("SANITIZE") == "1" else []
        r = subprocess.run(["cc", *san, "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                            "-Wno-unused-parameter", "-I" + os.path.join(SRC, "include"),
                            "-o", os.path.join(t, "ex"), c, lib, *libs, "-lm"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("libhandoff.3 example does not compile:\n" + r.stderr[-2000:])
        else:
            print("libhandoff(3) example compiles")


def main():
    if not shutil.which("mandoc"):
        hdtest.skip("mandoc", "man page lint")
    lint()
    reasons()
    config_keys()
    daemon_options()
    daemon_options("handoff-hubd", "handoff-hubd.8")
    ctl_commands()
    exit_codes()
    default_config_path()
    render_80()
    quoted_rendered()
    api_functions()
    libhandoff_example()
    hdtest.finish("man pages ok")


if __name__ == "__main__":
    main()
