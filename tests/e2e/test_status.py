"""handoffctl status: figures match the spool after a scripted mix of
outcomes; with no error since start the control socket's last_error and
last_error_age_s are null (never -1) and the text has no "last error" line; exit codes 0 (healthy), 1 (degraded: a served handoff stuck
behind another daemon's lock for longer than its window), 3 (not running); the control
socket refuses a peer that is not root, not the daemon's user and not in
[control] group, and accepts a member of that group."""

import grp
import json
import os
import socket
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def status(env, conf, rc):
    p = env.ctl("status", "-c", conf, "--json", check_rc=rc)
    return json.loads(p.stdout)


def ask_as(path, uid, gid):
    """Connect to the control socket as another user; the answer or None."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([gid])
            os.setgid(gid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(path)
            s.sendall(b'{"command":"status"}\n')
            data = s.recv(65536)
            os.write(w, b"A" + data)
        except Exception as e:  # noqa: BLE001
            os.write(w, b"E" + str(e).encode())
        os._exit(0)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return out


def main():
    with hdtest.Env(agents=["alice", "gordon"], shared=True) as env:
        group = grp.getgrgid(65534).gr_name  # nogroup
        text = env.config_text("d0").replace("rescan_interval = 5", "rescan_interval = 1") + \
            f"\n[control]\ngroup = {group}\n"
        # [control] appears twice: merge by rewriting the one section.
        text = text.replace(f"socket = {env.sockets.get('d0', os.path.join(env.dir, 'd0.sock'))}\n",
                            f"socket = {os.path.join(env.dir, 'd0.sock')}\ngroup = {group}\n", 1)
        text = text.rsplit("\n[control]\n", 1)[0] + "\n"
        conf = env.write_config("d0", text=text)

        # Not running: exit 3, spool read directly.
        hdproto.drop(env.spool, hdproto.build("bob", "sven", env.key, ttl=600))
        st = status(env, conf, 3)
        check(st["daemon"]["running"] is False and st["health"] == "not running", f"{st['daemon']}")
        # Read from names alone (issue 24.4): who it is for is not known.
        check(st["counts"]["handoff"] == 1 and st["pending_by_agent"] is None, f"{st}")

        d = env.start(conf=conf)
        # A scripted mix: 3 claimed for alice, 2 for gordon, 1 consumed,
        # 2 rejected (bad_mac, expired), 1 left for sven (from before).
        ids = {}
        for i, to in enumerate(["alice", "alice", "alice", "gordon", "gordon"]):
            doc = hdproto.build("bob", to, env.key, ttl=600)
            hdproto.drop(env.spool, doc)
            ids[doc["handoff_id"]] = to
        hdproto.drop(env.spool, hdproto.build("bob", "alice", b"k" * 32))
        hdproto.drop(env.spool, hdproto.build("bob", "alice", env.key, at=hdproto.now() - timedelta(seconds=600)))
        hdtest.wait_for(lambda: env.count("claimed") == 5 and env.count("rejected") == 2 and
                        len(env.bootstraps("alice")) + len(env.bootstraps("gordon")) == 5, what="mix")
        first = next(i for i, to in ids.items() if to == "gordon")
        check(hdtest.real_consumer(env.state["gordon"], first), "consume one")
        hdtest.wait_for(lambda: env.count("archive") == 1, what="archived")

        st = status(env, conf, 0)
        check(st["health"] == "healthy", f"health {st['health']} {st['problems']}")
        check(st["daemon"]["running"] is True and st["daemon"]["pid"] == d.proc.pid, "pid")
        check(st["daemon"]["version"] and st["daemon"]["uptime_s"] >= 0, "version/uptime")
        check(st["counts"] == {"handoff": 1, "claimed": 4, "archive": 1, "rejected": 2}, f"counts {st['counts']}")
        check(st["pending_by_agent"] == {"sven": 1}, f"pending {st['pending_by_agent']}")
        c = st["counters"]
        check(c["claimed"] == 5 and c["consumed"] == 1 and c["rejected"] == {"bad_mac": 1, "expired": 1},
              f"counters {c}")
        check(st["oldest_claimed_s"] >= 0, "oldest claimed")
        p = env.ctl("status", "-c", conf, check_rc=0)
        check("running" in p.stdout and "claimed 4" in p.stdout, f"text status:\n{p.stdout}")
        # No error since start: the control socket says null, not -1, and
        # the text has no "last error" line (handoffd(8), handoffctl(1)).
        raw = d.status()
        check("last_error_age_s" in raw and raw["last_error_age_s"] is None and raw["last_error"] is None,
              f"control socket without an error: { {k: raw.get(k) for k in ('last_error', 'last_error_age_s')} }")
        check(st["last_error_age_s"] is None, f"status --json: {st['last_error_age_s']!r}")
        check("last error" not in p.stdout, f"text status without an error:\n{p.stdout}")

        # Degraded: a handoff for alice whose id another daemon holds
        # (as if stuck mid-claim) waits longer than its window (2 rescans
        # + 5 s).
        stuck = hdproto.build("bob", "alice", env.key, ttl=600)
        fd = hdtest.lock_id(env.spool, stuck["handoff_id"])
        hdproto.drop(env.spool, stuck, name="stuck.json")
        try:
            hdtest.wait_for(lambda: env.ctl("status", "-c", conf).returncode == 1, timeout=15,
                            what="degraded")
            st = status(env, conf, 1)
            check(st["health"] == "degraded" and any("waited" in p for p in st["problems"]), f"{st['problems']}")
        finally:
            os.close(fd)
        hdtest.wait_for(lambda: env.ctl("status", "-c", conf).returncode == 0, timeout=10, what="healthy again")

        # Control socket peers: nobody (not in the group) is refused;
        # a member of [control] group is answered.
        sock = os.path.join(env.dir, "d0.sock")
        check(oct(os.stat(sock).st_mode & 0o777) == "0o660", "socket mode 0660")
        os.chmod(sock, 0o666)  # let the filesystem allow it: the daemon must refuse
        out = ask_as(sock, 65534, 65533 if 65533 != 65534 else 1)
        check(not out.startswith(b"A{"), f"peer outside the group answered: {out[:80]!r}")
        out = ask_as(sock, 65534, 65534)
        check(out.startswith(b"A{") and json.loads(out[1:])["ok"] is True, f"group member refused: {out[:120]!r}")
        check("refused uid 65534" in d.logs(), "refusal logged")

        # A peer that connects and says nothing is dropped after its
        # timeout; the daemon answers others meanwhile.
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.connect(sock)
        t0 = time.monotonic()
        check(d.status()["ok"] is True, "answers while a peer is silent")
        silent.settimeout(15)
        check(silent.recv(10) == b"", "silent peer closed")
        waited = time.monotonic() - t0
        check(3 < waited < 10 * hdtest.SLOW, f"closed after {waited:.1f}s")
        silent.close()

        check(d.stop() == 0, "stop")
        st = status(env, conf, 3)
        check(st["counts"]["claimed"] == 5, f"spool figures without the daemon: {st['counts']}")
        print("status: exit 3/0/1/0/3 reached, figures match the spool, peer check enforced")


hdtest.run(main)
