"""The shared libraries a running handoffd maps (/proc/PID/maps): the
optional ones are loaded only when used (src/handoffd/nats_dl.c, log.c).

- without [relay], logging to a file: none of libnats, libssl, libcrypto,
  libprotobuf-c, libsystemd, liblzma, libzstd, liblz4, libgcrypt;
- with [relay] (a real nats-server): libnats mapped, and the relay connects;
- with [relay] and a libnats.so.3.4 that cannot be loaded (an empty file
  found first through LD_LIBRARY_PATH): one error line naming it, exit 1,
  no READY=1; and one without the functions (another library under that
  name): the same, naming the missing function;
- stderr is the JOURNAL_STREAM: libsystemd mapped; with a libsystemd.so.0
  that cannot be loaded, one warning naming it and plain lines after it.
"""

import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

NATS_SONAME = "libnats.so.3.4"
NOT_WITHOUT_RELAY = ("libnats", "libssl", "libcrypto", "libprotobuf-c", "libsystemd",
                     "liblzma", "libzstd", "liblz4", "libgcrypt")


def libs(pid):
    """Base names of the files mapped by pid that look like libraries."""
    out = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and ".so" in parts[5]:
                out.add(os.path.basename(parts[5].strip()))
    return out


def mapped(names, prefix):
    return sorted(n for n in names if n.startswith(prefix + ".so") or n.startswith(prefix + "-"))


def start(env, name, wait=True, extra=None, **kw):
    conf = env.write_config(name, extra=extra)
    d = hdtest.Daemon(env, conf, name, **kw)
    env.daemons.append(d)
    if wait:
        d.wait_message("READY=1")
    return d


def fake_lib_dir(env, soname, copy_of=None):
    """A directory for LD_LIBRARY_PATH holding soname: empty (the dynamic
    loader stops at it: "file too short"), or a copy of another library."""
    d = os.path.join(env.dir, "fakelib-" + soname)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, soname)
    if copy_of:
        shutil.copy(copy_of, path)
    else:
        open(path, "w").close()
    return d


def refused(d):
    try:
        rc = d.proc.wait(20 * hdtest.SLOW)
    except Exception:
        rc = None
    return rc


def test_no_relay(env):
    d = start(env, "plain")
    names = libs(d.proc.pid)
    bad = {p: mapped(names, p) for p in NOT_WITHOUT_RELAY if mapped(names, p)}
    check(not bad, f"optional libraries mapped without [relay] and the journal: {bad}")
    check(mapped(names, "libuv"), f"the maps are read (libuv there): {sorted(names)}")
    inih = next(line.split(None, 5)[5].strip() for line in open(f"/proc/{d.proc.pid}/maps")
                if "libinih" in line)
    check(d.stop() == 0, "stop")
    print(f"without [relay]: {len(names)} libraries, none of {', '.join(NOT_WITHOUT_RELAY)}")
    return inih


def test_relay(env, ns):
    extra = f"[relay]\nservers = {ns.url}\nhost = h1\n"
    d = start(env, "relay", extra=extra)
    names = libs(d.proc.pid)
    check(mapped(names, "libnats"), f"libnats mapped with [relay]: {sorted(names)}")
    hdtest.wait_for(lambda: d.status().get("relay", {}).get("ready") is True,
                    what="the relay connected through the loaded library")
    check(d.stop() == 0, "stop")
    print(f"with [relay]: {', '.join(mapped(names, 'libnats'))} mapped, relay ready")
    return extra


def test_relay_no_library(env, extra, other_lib):
    for what, copy_of, expect in (("empty file", None, f"cannot load {NATS_SONAME}"),
                                  ("another library", other_lib, f"{NATS_SONAME} has no ")):
        fake = fake_lib_dir(env, NATS_SONAME, copy_of)
        name = "nonats" if copy_of is None else "badnats"
        d = start(env, name, wait=False, extra=extra, env_vars={"LD_LIBRARY_PATH": fake})
        rc = refused(d)
        logs = d.logs()
        check(rc == 1, f"{what}: exit 1 (a relay start failure), got {rc}:\n{logs}")
        lines = [ln for ln in logs.splitlines() if expect in ln]
        check(len(lines) == 1 and "[error]" in lines[0],
              f"{what}: one error line with '{expect}':\n{logs}")
        check("READY=1" not in d.messages, f"{what}: never ready")
        d.stop()
        shutil.rmtree(fake)
        print(f"[relay] with {what} as {NATS_SONAME}: exit 1, {lines[0].strip()}")


def test_journal(env):
    # JOURNAL_STREAM names stderr (the log file the daemon writes to).
    for broken in (False, True):
        name = "journal-broken" if broken else "journal"
        log = os.path.join(env.dir, f"{name}.log")
        open(log, "ab").close()
        st = os.stat(log)
        ev = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        if broken:
            ev["LD_LIBRARY_PATH"] = fake_lib_dir(env, "libsystemd.so.0")
        d = start(env, name, env_vars=ev)
        names = libs(d.proc.pid)
        # the "ready" line may come just after READY=1
        try:
            hdtest.wait_for(lambda: "ready: spool" in d.logs(), what="the ready line")
        except hdtest.Fail:
            pass        # said below, with the logs
        logs = d.logs()
        if broken:
            check(not mapped(names, "libsystemd"), "a broken libsystemd is not mapped")
            warn = [ln for ln in logs.splitlines() if "Cannot load libsystemd.so.0" in ln]
            check(len(warn) == 1, f"one warning naming libsystemd.so.0:\n{logs}")
            check("ready: spool" in logs, f"plain lines after the warning:\n{logs}")
        else:
            check(mapped(names, "libsystemd"), f"libsystemd mapped for the journal: {sorted(names)}")
            check("Cannot load" not in logs, f"no warning:\n{logs}")
        check(d.stop() == 0, "stop")
    print("JOURNAL_STREAM on stderr: libsystemd mapped; unloadable: one warning, plain lines")


def main():
    with hdtest.Env(agents=["alice"]) as env:
        inih = test_no_relay(env)
        test_journal(env)
        if not natsrv.available():
            hdtest.skip_part("nats-server", "the [relay] cases")
            return
        with natsrv.Cluster(env.dir, nodes=1) as ns:
            extra = test_relay(env, ns)
            test_relay_no_library(env, extra, inih)


hdtest.run(main)
