#!/usr/bin/env python3
"""The journal fields of every decision, read back (issue 26).

handoffd runs with JOURNAL_STREAM naming its stderr, so it logs through
libsystemd's sd_journal_send(), in a private mount namespace (unshare -m)
where /run/systemd/journal/socket is a datagram socket of this test's own
(a tmpfs on /run there, the test's directory bound on
/run/systemd/journal).  The test reads the native protocol as journald
does: KEY=VALUE lines, binary-safe KEY\\n<le64 size><data>\\n fields, and an
entry too large for a datagram passed as a memfd with SCM_RIGHTS.

Decisions made: a claim, a consume (archived consumed), an expiry
(archived expired), a rejection for bad_mac, one for parse_error, a handoff
left for an agent not served here.  For each: one entry with MESSAGE,
PRIORITY, SYSLOG_IDENTIFIER=handoffd, HANDOFF_ID=, AGENT=, OUTCOME=,
REASON= as src/handoffd/log.c sends them; and the query a user would run,
`journalctl OUTCOME=rejected REASON=bad_mac`, done on what was received,
gives exactly the bad_mac rejections.  Skipped (passes, says why) without
unshare/mount privileges or libsystemd."""

import array
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import invariant  # noqa: E402

FIELDS = ("HANDOFF_ID", "AGENT", "OUTCOME", "REASON")


def parse_native(data):
    """One datagram (or memfd) of the journal native protocol -> dict."""
    e = {}
    i = 0
    while i < len(data):
        nl = data.find(b"\n", i)
        if nl < 0:
            raise ValueError(f"unterminated field at {i}")
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            (n,) = struct.unpack_from("<Q", data, nl + 1)
            start = nl + 1 + 8
            v = data[start:start + n]
            if data[start + n:start + n + 1] != b"\n":
                raise ValueError(f"binary field {k!r} not followed by a newline")
            i = start + n + 1
        e[k.decode()] = v.decode(errors="replace")
    return e


class Journal(threading.Thread):
    def __init__(self, path):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.1)
        self.entries, self.memfds, self.errors = [], 0, []
        self.running = True

    def run(self):
        fds = array.array("i")
        while self.running:
            try:
                data, anc, _, _ = self.sock.recvmsg(1 << 20, socket.CMSG_SPACE(4 * fds.itemsize))
            except socket.timeout:
                continue
            except OSError:
                return
            for level, typ, cdata in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    got = array.array("i")
                    got.frombytes(cdata[:len(cdata) - len(cdata) % got.itemsize])
                    for fd in got:
                        with os.fdopen(fd, "rb") as f:
                            f.seek(0)
                            data = f.read()
                        self.memfds += 1
            try:
                self.entries.append(parse_native(data))
            except (ValueError, struct.error) as ex:
                self.errors.append(f"{ex}: {data[:200]!r}")

    def stop(self):
        self.running = False
        self.join(5)
        self.sock.close()


def unusable():
    if os.geteuid() != 0:
        return "root", "a private mount namespace"
    if not shutil.which("unshare"):
        return "util-linux", "no unshare(1) for a private mount namespace"
    p = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs none /run"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return "mount-namespace", f"cannot mount in a private namespace: {p.stderr.strip()}"
    for d in ("/lib", "/usr/lib"):
        for root, _, files in os.walk(d):
            if "libsystemd.so.0" in files:
                return None
    return "libsystemd-dev", "no libsystemd.so.0"


def main():
    why = unusable()
    if why:
        hdtest.skip(*why)
    extra = "[spool]\nresume_window = 1\n"
    with hdtest.Env(agents=["alice", "gordon"], extra=extra) as env:
        jdir = os.path.join(env.dir, "journal")
        os.mkdir(jdir)
        j = Journal(os.path.join(jdir, "socket"))
        j.start()
        conf = env.write_config("j0")
        log_path = os.path.join(env.dir, "j0.log")
        open(log_path, "ab").close()
        st = os.stat(log_path)
        script = ("mount -t tmpfs none /run && mkdir -p /run/systemd/journal && "
                  f"mount --bind '{jdir}' /run/systemd/journal && "
                  f"exec '{hdtest.HANDOFFD}' -f -v -c '{conf}'")
        d = hdtest.Daemon(env, conf, "j0", argv=["unshare", "-m", "sh", "-c", script],
                          env_vars={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        env.daemons.append(d)
        d.wait_message("READY=1")
        try:
            ids = {}
            # claimed, then consumed
            doc = hdproto.build("bob", "alice", env.key, ttl=600)
            hdproto.drop(env.spool, doc)
            ids["consumed"] = doc["handoff_id"]
            hdtest.wait_for(lambda: env.bootstraps("alice"), 10, "alice's bootstrap")
            hdtest.check(invariant.real_consume(env.state["alice"], doc["handoff_id"]) is not None,
                         "consumed")
            # claimed, never taken: expires (resume_window 1)
            doc = hdproto.build("bob", "gordon", env.key, ttl=600)
            hdproto.drop(env.spool, doc)
            ids["expired"] = doc["handoff_id"]
            # rejected: bad_mac, parse_error
            doc = hdproto.build("bob", "alice", b"not the key", ttl=600)
            hdproto.drop(env.spool, doc)
            ids["bad_mac"] = doc["handoff_id"]
            with open(env.path("tmp", ".junk"), "wb") as f:
                f.write(b"{not json")
            os.rename(env.path("tmp", ".junk"), env.path("handoff", "junk.json"))
            # left for an agent not served here
            doc = hdproto.build("bob", "carol", env.key, ttl=600)
            hdproto.drop(env.spool, doc)
            ids["left"] = doc["handoff_id"]

            def by(outcome, hid=None):
                return [e for e in j.entries if e.get("OUTCOME") == outcome and
                        (hid is None or e.get("HANDOFF_ID") == hid)]

            hdtest.wait_for(lambda: by("consumed") and by("expired") and
                            len(by("rejected")) >= 2 and by("left"), 20,
                            "every decision in the journal")
        finally:
            d.stop()
            j.stop()
        logs = d.logs()
        print(f"{len(j.entries)} journal entries ({j.memfds} by memfd); stderr had "
              f"{len(logs.splitlines())} line(s)")
        hdtest.expect(not j.errors, f"every datagram parses ({j.errors[:3]})", True)

        def one(outcome, hid, agent, reason, what):
            es = by(outcome, hid)
            ok = len(es) == 1
            e = es[0] if es else {}
            missing = [f for f in FIELDS + ("MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER") if f not in e]
            hdtest.expect(ok and not missing and e.get("AGENT") == agent and
                          e.get("REASON") == reason and e.get("SYSLOG_IDENTIFIER") == "handoffd",
                          f"{what}: one entry with HANDOFF_ID={hid} AGENT={agent} OUTCOME={outcome} "
                          f"REASON={reason} (got {len(es)}: "
                          f"{ {k: e.get(k) for k in FIELDS + ('SYSLOG_IDENTIFIER',)} }, missing {missing})",
                          True)
            return e

        one("claimed", ids["consumed"], "alice", "", "claim")
        one("consumed", ids["consumed"], "alice", "", "archived as consumed")
        one("claimed", ids["expired"], "gordon", "", "claim for gordon")
        one("expired", ids["expired"], "gordon", "", "archived as expired")
        one("left", "", "carol", "", "left for an agent not served here")
        mac = [e for e in j.entries if e.get("OUTCOME") == "rejected" and e.get("REASON") == "bad_mac"]
        hdtest.expect(len(mac) == 1 and ids["bad_mac"] in mac[0].get("MESSAGE", "") and
                      mac[0].get("PRIORITY") == "5",
                      f"journalctl OUTCOME=rejected REASON=bad_mac: exactly the bad_mac rejection "
                      f"({[m.get('MESSAGE') for m in mac]})", True)
        pe = [e for e in j.entries if e.get("OUTCOME") == "rejected" and e.get("REASON") == "parse_error"]
        hdtest.expect(len(pe) == 1 and "junk.json" in pe[0].get("MESSAGE", ""),
                      f"OUTCOME=rejected REASON=parse_error: the junk file ({[m.get('MESSAGE') for m in pe]})",
                      True)
        hdtest.expect(all(e.get("REASON") in ("", None) or e.get("OUTCOME") == "rejected"
                          for e in j.entries), "REASON= only on rejections", True)
        hdtest.expect("Claimed" not in logs,
                      "the decisions went to the journal, not to stderr", True)
    hdtest.finish("journal fields: HANDOFF_ID, AGENT, OUTCOME, REASON on every decision")


if __name__ == "__main__":
    main()
