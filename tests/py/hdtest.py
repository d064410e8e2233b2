"""End-to-end test kit: a temp spool, keys, a config, and the real handoffd
binary started with a real NOTIFY_SOCKET so tests wait for READY=1 the way
systemd does.  stdlib only.

    with hdtest.Env(agents=["alice"]) as env:
        d = env.start()
        hdproto.drop(env.spool, hdproto.build("bob", "alice", env.key))
        env.wait_for(lambda: env.count("claimed") == 1)
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.environ.get("HD_SRC", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.environ.get("HD_BUILD", os.path.join(SRC, "build"))
HANDOFFD = os.path.join(BUILD, "handoffd")
HANDOFFCTL = os.path.join(BUILD, "handoffctl")
SANITIZE = os.environ.get("SANITIZE") == "1"
# Sanitized binaries are slower; waits scale.
SLOW = 4 if SANITIZE else 1

sys.path.insert(0, os.path.join(SRC, "tests", "py"))
import hdproto  # noqa: E402
import invariant  # noqa: E402
# the measures, as hdtest.cpu_s(), hdtest.ping_time() ...
from hdmeasure import (children_cpu, cpu_s, fd_count, inotify_watches,  # noqa: E402,F401
                       ping_time, proc_status, timed_ctl,
                       connect_unix)



# A skipped script exits 77 (as automake's tests do) after one line naming
# what it lacks; the runner (tests/unit/test_e2e.c) counts it apart, and
# fails it when TOOL is a package of mk/build-deps, which `make check`
# installs.  TOOL is a Debian package name, or a condition no package
# gives ("root", "fuse-mount").
SKIP = 77


def skip(tool, why):
    """End the script as skipped for want of tool."""
    print(f"skipped: needs {tool}: {why}")
    sys.stdout.flush()
    sys.exit(SKIP)


def skip_part(tool, what):
    """Say that one part of the script is skipped for want of tool; the
    script goes on (and the runner fails it too when tool is listed)."""
    print(f"skipped part: needs {tool}: {what}")


def _terminated(signum, frame):
    # The runner's timeout sends SIGTERM: unwind, so that `with` blocks stop
    # the daemons and remove the temp directories.
    raise SystemExit(128 + signum)


if threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGTERM, _terminated)

# The real consumer's logic, one copy: returns the bootstrap dict or None.
real_consumer = invariant.real_consume


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


# Soft checks, for a script that goes on after a failure so that one run
# reports all of them (the man pages, the build, the CLI's many cases):
# expect() records, finish() ends the script with the count.
_failures = []


def expect(cond, what, say_ok=False):
    if cond:
        if say_ok:
            print(f"ok: {what}")
        return True
    print(f"FAIL: {what}")
    _failures.append(what)
    return False


def fail(what):
    expect(False, what)


def finish(ok_line):
    """Exit 1 after the count of failed expect()s, else print ok_line, exit 0."""
    if _failures:
        print(f"{len(_failures)} failure(s)")
        sys.exit(1)
    print(ok_line)
    sys.exit(0)


def build_preload(env, source, what):
    """An LD_PRELOAD shim (C source) built with cc in env.dir: its path."""
    check(shutil.which("cc") is not None, f"cc is needed to build the {what}")
    src = os.path.join(env.dir, "shim.c")
    so = os.path.join(env.dir, "shim.so")
    with open(src, "w") as f:
        f.write(source)
    r = subprocess.run(["cc", "-shared", "-fPIC", "-o", so, src, "-ldl"], capture_output=True, text=True)
    check(r.returncode == 0, f"the {what} does not build:\n{r.stderr}")
    return so


def preload_env(so, **extra):
    """The environment of a program under the shim so (ASan told that
    the shim comes first), with extra."""
    e = {"LD_PRELOAD": so, **extra}
    if SANITIZE:
        e["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    return e


def wait_for(pred, timeout=10.0, what="condition"):
    """pred()'s first true value within timeout seconds (x SLOW).  what
    names it in the failure; a callable what is called then, to say the
    state the wait ended in."""
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise Fail(f"timed out waiting for {what() if callable(what) else what}")


def wait_progress(count, want, stall=60.0, what="progress", poll=0.2):
    """Wait until count() >= want.  Fails when count() has not grown for
    stall seconds (x SLOW): a long run on a loaded machine goes on as long
    as it moves, a stuck one ends.  count() is called every poll seconds
    (a listing of thousands of names is no cheap predicate)."""
    last, since = None, time.monotonic()
    while True:
        n = count()
        if n >= want:
            return n
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > stall * SLOW:
            raise Fail(f"timed out waiting for {what}: {n} of {want}, "
                       f"none more in {stall * SLOW:.0f}s")
        time.sleep(poll)


def wait_watching(proc, n=1, timeout=10.0, what="the process"):
    """Wait until proc (a Popen) watches n paths with inotify: the moment
    it waits for a change, instead of a fixed pause a loaded machine may
    not give it."""
    def ready():
        if proc.poll() is not None:
            raise Fail(f"{what} exited {proc.returncode} before it watched anything")
        return inotify_watches(proc.pid) >= n
    wait_for(ready, timeout=timeout, what=f"{what} to watch {n} path(s) with inotify")


class Daemon:
    """handoffd -f -v -c conf, or argv: any program that speaks the same
    NOTIFY_SOCKET protocol (bench/floor, handoffd without -v)."""

    def __init__(self, env, conf, name, extra_args=(), env_vars=None, argv=None,
                 notify_abstract=False):
        self.env = env
        self.conf = conf
        self.name = name
        self.log_path = os.path.join(env.dir, f"{name}.log")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if notify_abstract:
            # An abstract name, as systemd may pass: "@name" in the
            # environment, a leading NUL in the address.
            abstract = f"hdtest-{os.getpid()}-{os.path.basename(env.dir)}-{name}"
            self.notify.bind("\0" + abstract)
            self.notify_path = "@" + abstract
        else:
            self.notify_path = os.path.join(env.dir, f"{name}.notify")
            if os.path.exists(self.notify_path):  # a restart under the same name
                os.unlink(self.notify_path)
            self.notify.bind(self.notify_path)
        self.notify.settimeout(0.05)
        self.messages = []
        # Read NOTIFY_SOCKET all the time, as systemd does: a full socket
        # buffer would block the daemon's notify_send().
        self._reading = True
        self._reader = threading.Thread(target=self._read_notify, daemon=True)
        self._reader.start()
        e = dict(os.environ)
        e["NOTIFY_SOCKET"] = self.notify_path
        e.pop("JOURNAL_STREAM", None)
        e.pop("WATCHDOG_USEC", None)
        if env_vars:
            e.update(env_vars)
        self.log = open(self.log_path, "ab")
        self.log_start = self.log.tell()        # a restart appends
        # handoffd logging to its log file: its info lines are flushed when
        # its loop sleeps, the ready line just after READY=1
        self.ready_line = "JOURNAL_STREAM" not in e and (
            argv is None or any(os.path.basename(a) == "handoffd" for a in argv))
        self.proc = subprocess.Popen(argv or [HANDOFFD, "-f", "-v", "-c", conf, *extra_args],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=e)

    def _read_notify(self):
        while self._reading:
            try:
                m = self.notify.recv(4096).decode()
            except (socket.timeout, BlockingIOError):
                continue
            except OSError:
                return
            self.messages.extend(m.split("\n"))

    def poll_notify(self):
        time.sleep(0.01)

    def wait_message(self, msg, timeout=20.0):
        """Wait for msg on NOTIFY_SOCKET as long as the daemon works: it
        fails when the daemon exits, or uses no CPU for timeout seconds
        (x SLOW).  READY=1 comes after the start's scan, and thousands of
        waiting items take minutes on a loaded machine."""
        def seen():
            self.poll_notify()
            if self.proc.poll() is not None and msg not in self.messages:
                raise Fail(f"{self.name} exited {self.proc.returncode} before {msg}:\n{self.logs()}")
            return msg in self.messages

        last, since = None, time.monotonic()
        while not seen():
            try:
                c = cpu_s(self.proc.pid)
            except OSError:
                continue        # exited: seen() says so
            if c != last:
                last, since = c, time.monotonic()
            elif time.monotonic() - since > timeout * SLOW:
                raise Fail(f"timed out waiting for {self.name}: {msg} (no CPU used in "
                           f"{timeout * SLOW:.0f}s)")
        if msg == "READY=1" and self.ready_line:
            # what it logged up to READY=1 is in its log for the test to read
            def logged():
                with open(self.log_path, "rb") as f:
                    f.seek(self.log_start)
                    return b" ready: spool " in f.read()
            wait_for(lambda: logged() or self.proc.poll() is not None,
                     what=f"{self.name}: its ready line")

    def logs(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def send(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=20.0):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout * SLOW)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail(f"{self.name} did not stop on {sig}:\n{self.logs()}")
        self.poll_notify()
        self._reading = False
        self._reader.join()
        self.log.close()
        self.notify.close()
        return rc

    def status(self, sock=None):
        """The daemon's answer on its control socket."""
        s = connect_unix(sock or self.env.sockets[self.name], 5 * SLOW)
        s.sendall(b'{"command":"status"}\n')
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        return json.loads(data)


def rm_rf(path):
    """Remove a test's directory, also parts a test made read-only.  Only
    directories inside path are opened up: its parent (TMPDIR, /tmp) is
    not the test's to chmod."""
    top = os.path.abspath(path)

    def writable(func, p, exc):
        parent = os.path.dirname(os.path.abspath(p))
        try:
            if parent == top or parent.startswith(top + os.sep):
                os.chmod(parent, 0o700)
                func(p)
        except OSError:
            pass
    # A child a killed daemon started (handoff-a2a, handoff-push) may
    # still write for a moment after its parent's kill: removed again
    # until it is gone, a while at most.
    deadline = time.monotonic() + 10 * SLOW
    while True:
        shutil.rmtree(path, onerror=writable)
        if not os.path.lexists(path) or time.monotonic() > deadline:
            break
        time.sleep(0.05)


def tmpdir():
    """A fresh temp directory named like every test's (hdtest.*), for
    `with` blocks: removed at the end, also on failure."""
    return tempfile.TemporaryDirectory(prefix="hdtest.")


def closed_parent(path):
    """The first directory of path (itself or a parent) that other users
    cannot enter (no o+x), or None when they can reach it."""
    p = os.path.abspath(path)
    while True:
        if not os.stat(p).st_mode & 0o001:
            return p
        if p == "/":
            return None
        p = os.path.dirname(p)


def shared_tmp():
    """A directory for temp dirs that other users can reach: TMPDIR when
    its parents let them in, else /tmp or /var/tmp.  A test that runs a
    program as another user needs it (where the checkout is, or TMPDIR,
    may be a private home or a mktemp -d)."""
    tried = []
    for base in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        if os.path.isdir(base):
            closed = closed_parent(base)
            if closed is None:
                return base
            tried.append(f"{base} (other users cannot enter {closed})")
    raise Fail("no temp directory other users can reach: " + ", ".join(tried))


class Env:
    """A temp spool with agent state dirs, one default key and configs.
    shared=True: in a directory other users can reach (shared_tmp()), for a
    test that runs programs as another user; see Env.for_others()."""

    def __init__(self, agents=("alice",), fsync=True, extra=None, keep=False, prefix="hdtest.",
                 shared=False):
        self.dir = tempfile.mkdtemp(prefix=prefix, dir=shared_tmp() if shared else None)
        os.chmod(self.dir, 0o755)
        self.spool = os.path.join(self.dir, "spool")
        self.agents = list(agents)
        self.state = {a: os.path.join(self.dir, "agents", a) for a in self.agents}
        self.key_path = os.path.join(self.dir, "default.key")
        self.key = hdproto.make_key(self.key_path)
        self.fsync = fsync
        self.extra = extra or ""
        self.daemons = []
        self.sockets = {}
        self.keep = keep or bool(os.environ.get("HD_KEEP_TMP"))

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        for d in self.daemons:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
        if et is not None:
            for d in self.daemons:
                sys.stdout.write(f"---- log of {d.name} ----\n{d.logs()[-20000:]}\n")
        for d in self.daemons:
            if not d.log.closed:
                d.log.close()
        # Removed also when the test failed (its logs are printed above);
        # HD_KEEP_TMP=1 keeps it for a look.
        if self.keep:
            sys.stdout.write(f"(test dir kept: {self.dir})\n")
        else:
            rm_rf(self.dir)
        return False

    def for_others(self, prog):
        """prog (HANDOFFCTL, HANDOFFD, ...) copied into this test's own
        bin/ (mode 0755, in an Env(shared=True)), so another user can run
        it wherever the checkout is: its path for that user's argv."""
        closed = closed_parent(self.dir)
        check(closed is None, f"other users cannot enter {closed}: use Env(shared=True)")
        bindir = os.path.join(self.dir, "bin")
        os.makedirs(bindir, mode=0o755, exist_ok=True)
        dst = os.path.join(bindir, os.path.basename(prog))
        if not os.path.exists(dst):
            shutil.copy(prog, dst)
            os.chmod(dst, 0o755)
        return dst

    def config_text(self, name="d0", agents=None, extra=None):
        agents = self.agents if agents is None else agents
        lines = [
            "[spool]",
            f"dir = {self.spool}",
            f"fsync = {'yes' if self.fsync else 'no'}",
            "rescan_interval = 5",
            # tests flood agents on purpose; the inbox quota has its own
            # test (test_attack_inbox_spam.py)
            "max_waiting = 0",
            "max_waiting_per_sender = 0",
            "",
            "[keys]",
            f"default = {self.key_path}",
            "",
            "[control]",
            f"socket = {os.path.join(self.dir, name + '.sock')}",
            "",
        ]
        for a in agents:
            lines += [f"[agent {a}]", f"state_dir = {self.state.setdefault(a, os.path.join(self.dir, 'agents', a))}", ""]
        text = "\n".join(lines) + "\n" + (self.extra if extra is None else extra) + "\n"
        return text

    def write_config(self, name="d0", text=None, **kw):
        path = os.path.join(self.dir, name + ".conf")
        with open(path, "w") as f:
            f.write(text if text is not None else self.config_text(name, **kw))
        self.sockets[name] = os.path.join(self.dir, name + ".sock")
        return path

    def start(self, name="d0", conf=None, wait=True, env_vars=None, **kw):
        conf = conf or self.write_config(name, **kw)
        self.sockets.setdefault(name, os.path.join(self.dir, name + ".sock"))
        d = Daemon(self, conf, name, env_vars=env_vars)
        self.daemons.append(d)
        if wait:
            d.wait_message("READY=1")
        return d

    def path(self, state, name=""):
        return os.path.join(self.spool, state, name)

    def names(self, state):
        try:
            return sorted(n for n in os.listdir(self.path(state)) if not n.startswith("."))
        except FileNotFoundError:
            return []

    def items(self, state):
        """Items without sidecars / markers."""
        skip = {"claimed": (".delivered",), "archive": (".outcome", ".result"), "rejected": (".reason",)}.get(state, ())
        return [n for n in self.names(state) if not n.endswith(skip)]

    def count(self, state):
        return len(self.items(state))

    def item(self, hid):
        """Where handoff hid is and what it holds: invariant.item_state(),
        the one reader of an item's state from the files."""
        return invariant.item_state(self.spool, self.state, hid)

    def claimed_handoff(self, hid):
        """The handoff that claimed/<hid>.json holds (the daemon's record
        holds it under "handoff")."""
        with open(self.path("claimed", f"{hid}.json")) as f:
            return invariant.record_handoff(json.load(f))

    def bootstraps(self, agent):
        d = os.path.join(self.state[agent], "handoffs")
        try:
            return sorted(n for n in os.listdir(d) if not n.startswith("."))
        except FileNotFoundError:
            return []

    def reason_of(self, rejected_name):
        with open(self.path("rejected", rejected_name + ".reason")) as f:
            return json.load(f)

    def ctl(self, *args, check_rc=None, input=None):
        p = subprocess.run([HANDOFFCTL, *args], capture_output=True, text=True, input=input,
                           timeout=60 * SLOW)
        if check_rc is not None and p.returncode != check_rc:
            raise Fail(f"handoffctl {' '.join(args)} exited {p.returncode}, wanted {check_rc}:\n{p.stdout}\n{p.stderr}")
        return p


def handoff_latency(env, frm="bob", to="alice", timeout=30.0):
    """Drop one legitimate handoff; seconds until its bootstrap is there."""
    doc = hdproto.build(frm, to, env.key, ttl=600)
    path = os.path.join(env.state[to], "handoffs", doc["handoff_id"] + ".json")
    t0 = time.monotonic()
    hdproto.drop(env.spool, doc)
    wait_for(lambda: os.path.exists(path), timeout, f"legitimate handoff to {to} delivered")
    return time.monotonic() - t0


def lock_id(spool, handoff_id):
    """Hold the daemons' lock of handoff_id (src/handoffd/lock.h: a byte of
    SPOOL/.lock that only the daemon's user can open) as a daemon busy with
    that item would.  Returns the fd; closing it releases the lock."""
    import fcntl
    import struct
    h = 0xcbf29ce484222325
    for b in handoff_id.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    off = (2 << 60) | (h & ((1 << 60) - 1))
    fd = os.open(os.path.join(spool, ".lock"), os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, off, 1, 0))
    except OSError:
        os.close(fd)            # held by a daemon: BlockingIOError
        raise
    return fd


def try_lock_id(spool, handoff_id):
    """lock_id(), or None while a daemon holds that byte."""
    try:
        return lock_id(spool, handoff_id)
    except BlockingIOError:
        return None


class Deployed:
    """The packaged layout with separate users (root only), in an
    Env(shared=True): the daemon runs as its own user `uid` in the spool's
    group `gid` (systemd/handoffd.service User=/Group=), which owns the
    spool (tmp/ and handoff/ 3770, as systemd/handoffd.tmpfiles; the other
    states as the daemon makes them) and each agent's state_dir and handoffs/
    (2770, group the agent's own: agent_gids[agent]); the key is 0640 in
    the spool's group.  A producer is a user in the spool's group: file
    operations as her with as_user()."""

    def __init__(self, env, uid, gid, agent_gids):
        check(os.geteuid() == 0, "Deployed needs root")
        self.env, self.uid, self.gid = env, uid, gid
        # the other states the daemon makes itself, as its own
        for d in ("", "tmp", "handoff"):
            p = os.path.join(env.spool, d)
            os.makedirs(p, exist_ok=True)
            os.chown(p, uid, gid)
            os.chmod(p, 0o3770 if d else 0o750)
        for a, agid in agent_gids.items():
            for p in (env.state[a], os.path.join(env.state[a], "handoffs")):
                os.makedirs(p, exist_ok=True)
                os.chown(p, uid, agid)
                os.chmod(p, 0o2770)
        os.chown(env.key_path, uid, gid)
        os.chmod(env.key_path, 0o640)
        # the control socket where the daemon's user may create it
        self.run_dir = os.path.join(env.dir, "run")
        os.makedirs(self.run_dir, exist_ok=True)
        os.chown(self.run_dir, uid, gid)
        os.chmod(self.run_dir, 0o750)

    def start(self, name="d0", text=None):
        """handoffd as the daemon's user (no other group), config text
        env.config_text(name) (or text, made from it); waits for READY=1.
        Returns (daemon, config path)."""
        env = self.env
        sock = os.path.join(self.run_dir, name + ".sock")
        text = (text or env.config_text(name)).replace(
            f"socket = {os.path.join(env.dir, name + '.sock')}", f"socket = {sock}")
        conf = env.write_config(name, text=text)
        env.sockets[name] = sock
        argv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                env.for_others(HANDOFFD), "-f", "-v", "-c", conf]
        old = os.umask(0)       # a NOTIFY_SOCKET the daemon's user may send to
        try:
            d = Daemon(env, conf, name, argv=argv)
        finally:
            os.umask(old)
        env.daemons.append(d)
        d.wait_message("READY=1")
        return d, conf

    def as_user(self, uid, groups, op, path, arg=""):
        """One file operation as user uid (primary group the spool's, and
        groups): "write" rewrites path in place with arg (the same inode,
        as its owner can), "chmod" (arg octal), "truncate" (arg bytes),
        "drop" publishes arg as handoff/<basename of path> through tmp/
        (mode 0644, or 0600 with op "drop600").  Returns None when it
        worked, else the errno's name (EACCES, EPERM, ENOENT...)."""
        code = (
            "import errno, os, sys\n"
            "op, p, a = sys.argv[1:4]\n"
            "try:\n"
            "    if op == 'write':\n"
            "        fd = os.open(p, os.O_WRONLY)\n"
            "        os.ftruncate(fd, 0); os.write(fd, a.encode()); os.close(fd)\n"
            "    elif op == 'chmod':\n"
            "        os.chmod(p, int(a, 8))\n"
            "    elif op == 'truncate':\n"
            "        os.truncate(p, int(a))\n"
            "    else:\n"
            "        n = os.path.basename(p)\n"
            "        spool = os.path.dirname(os.path.dirname(p))\n"
            "        t = os.path.join(spool, 'tmp', '.' + n + '.tmp')\n"
            "        fd = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL,\n"
            "                     0o600 if op == 'drop600' else 0o644)\n"
            "        os.fchmod(fd, 0o600 if op == 'drop600' else 0o644)\n"
            "        os.write(fd, a.encode()); os.close(fd)\n"
            "        os.rename(t, os.path.join(spool, 'handoff', n))\n"
            "except OSError as e:\n"
            "    print(errno.errorcode.get(e.errno, str(e.errno))); sys.exit(0)\n"
            "print('ok')\n")
        # a python others may run (sys.executable may be under a private home)
        py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        p = subprocess.run([py, "-c", code, op, path, arg], user=uid, group=self.gid,
                           extra_groups=[self.gid, *groups], capture_output=True, text=True,
                           timeout=30 * SLOW)
        check(p.returncode == 0, f"{op} {path} as uid {uid}: exit {p.returncode}: {p.stderr}")
        out = p.stdout.strip()
        return None if out == "ok" else out


def run(main):
    """Run a test main(); print its figures; exit 1 on failure."""
    t0 = time.monotonic()
    try:
        main()
    except Fail as e:
        print(f"FAIL: {e}")
        sys.exit(1)
    print(f"ok ({time.monotonic() - t0:.1f}s)")
