#!/usr/bin/env python3
"""The libFuzzer targets of tests/fuzz/, briefly: none may crash.

When clang can link a -fsanitize=fuzzer program, build the targets with
`make fuzz-build` (into build/fuzz/, whatever HD_BUILD is), run each for
HD_FUZZ_SECONDS (default 5) on a scratch copy of its seed corpus, print its
executions, and replay every input of tests/fuzz/regress/<target>/ (the
crashes found so far, kept as regression tests).  Without clang or libFuzzer
this prints "skipped: ..." and passes.  The long run is `make fuzz`.
"""

import fcntl
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.environ["HD_SRC"], "tests", "py"))
import hdtest  # noqa: E402

SRC = os.environ["HD_SRC"]
FB = os.path.join(SRC, "build", "fuzz")
SECONDS = int(os.environ.get("HD_FUZZ_SECONDS", "5"))
CC = os.environ.get("FUZZ_CC", "clang")


def check(cond, what):
    hdtest.expect(cond, what, say_ok=True)


def clean_env():
    """The environment of a fresh shell: no outer make's jobserver or
    command-line variables, and libFuzzer's own sanitizer defaults."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    env["ASAN_OPTIONS"] = "detect_leaks=1"
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    return env


def have_libfuzzer():
    """(the package it needs, why) when libFuzzer cannot be used here, or
    None when it can."""
    if not shutil.which(CC):
        return CC, f"no {CC} in PATH"
    with tempfile.TemporaryDirectory(prefix="hdtest.") as d:
        c = os.path.join(d, "t.c")
        with open(c, "w") as f:
            f.write("#include <stddef.h>\n#include <stdint.h>\n"
                    "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\n"
                    "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)"
                    " { (void)d; (void)n; return 0; }\n")
        p = subprocess.run([CC, "-fsanitize=fuzzer,address,undefined", "-o",
                            os.path.join(d, "t"), c], capture_output=True,
                           text=True, timeout=120)
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["?"])[-1]
            return "libclang-rt-dev", f"{CC} cannot link -fsanitize=fuzzer ({last})"
    return None


def targets():
    return sorted(os.path.basename(f)[:-2]
                  for f in glob.glob(os.path.join(SRC, "tests/fuzz/fuzz_*.c")))


def build():
    os.makedirs(FB, exist_ok=True)
    # Two make check runs (plain and SANITIZE=1) may share this build dir.
    with open(os.path.join(FB, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        p = subprocess.run(["make", "-C", SRC, "--no-print-directory",
                            f"-j{os.cpu_count() or 2}", "fuzz-build"],
                           capture_output=True, text=True, env=clean_env(),
                           timeout=600)
    if p.returncode != 0:
        print(p.stdout[-3000:] + p.stderr[-3000:])
    check(p.returncode == 0, "make fuzz-build")
    return p.returncode == 0


def summary(log):
    """The lines of a libFuzzer log that say what crashed and where."""
    keep = [l for l in log.splitlines()
            if re.match(r"^(==\d+==ERROR|SUMMARY|fuzz: property|.*runtime error)", l)
            or re.search(r"^ *#\d+ 0x\w+ in \S+ /.*/(src|tests)/", l)]
    return "\n".join("    " + l for l in keep[:15])


def start(t, work):
    corpus = os.path.join(work, t)
    seeds = os.path.join(SRC, "tests/fuzz/corpus", t)
    if os.path.isdir(seeds):
        shutil.copytree(seeds, corpus)
    else:
        os.makedirs(corpus)
    art = os.path.join(work, "artifacts", t) + "/"
    os.makedirs(art)
    log = open(os.path.join(work, t + ".log"), "w+")
    p = subprocess.Popen([os.path.join(FB, t), f"-max_total_time={SECONDS}",
                          "-timeout=25", "-print_final_stats=1",
                          f"-artifact_prefix={art}", corpus],
                         stdout=log, stderr=subprocess.STDOUT, env=clean_env())
    return p, log, art


def finish(t, p, log, art):
    rc = p.wait(timeout=SECONDS + 120)
    log.seek(0)
    text = log.read()
    log.close()
    m = re.findall(r"^stat::number_of_executed_units: *(\d+)", text, re.M)
    execs = int(m[-1]) if m else 0
    crashes = len(os.listdir(art))
    print(f"fuzz: {t}: {execs} executions in {SECONDS}s, "
          f"{'crashed (exit %d)' % rc if rc else 'no crash'}")
    if rc:
        print(summary(text))
        for a in sorted(os.listdir(art)):
            with open(os.path.join(art, a), "rb") as f:
                print(f"    input {a}: {f.read(300)!r}")
    check(rc == 0 and crashes == 0, f"{t} runs {SECONDS}s without a crash")
    check(execs > 0, f"{t} executed inputs")


def fuzz_all(ts):
    jobs = max(1, min(2, os.cpu_count() or 1))
    with tempfile.TemporaryDirectory(prefix="hdtest.") as work:
        pending = list(ts)
        running = []
        while pending or running:
            while pending and len(running) < jobs:
                t = pending.pop(0)
                running.append((t, *start(t, work)))
            t, p, log, art = running.pop(0)
            finish(t, p, log, art)


def regressions(ts):
    """Every saved crash input, replayed through its target."""
    n = 0
    for d in sorted(glob.glob(os.path.join(SRC, "tests/fuzz/regress/*"))):
        t = os.path.basename(d)
        files = sorted(f for f in glob.glob(os.path.join(d, "*"))
                       if os.path.isfile(f))
        if not files:
            continue
        check(t in ts, f"regress/{t} names a fuzz target")
        if t not in ts:
            continue
        for f in files:
            n += 1
            p = subprocess.run([os.path.join(FB, t), f], capture_output=True,
                               text=True, env=clean_env(), timeout=120)
            rel = os.path.relpath(f, SRC)
            if p.returncode != 0:
                print(summary(p.stdout + p.stderr))
            check(p.returncode == 0, f"{rel} does not crash {t}")
    print(f"regress: {n} saved inputs replayed")


def main():
    why = have_libfuzzer()
    if why:
        hdtest.skip(*why)
    ts = targets()
    check(len(ts) >= 7, f"{len(ts)} fuzz targets: {' '.join(ts)}")
    if not build():
        return 1
    fuzz_all(ts)
    regressions(ts)
    hdtest.finish("all fuzz checks passed")


if __name__ == "__main__":
    sys.exit(main())
