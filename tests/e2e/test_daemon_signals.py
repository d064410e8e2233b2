"""systemd protocol and signals: READY=1 after the watch and the first scan;
SIGHUP with a broken config keeps running on the old one (RELOADING=1, then
READY=1 again); SIGHUP with a good config takes it (a new agent is served);
SIGTERM: STOPPING=1 and exit 0.  Also -n and the exit code for a bad
config."""

import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    with hdtest.Env(agents=["alice"]) as env:
        conf = env.write_config("d0")
        # -n on the good config; a broken one gives FILE:LINE: message, exit 2.
        p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", conf], capture_output=True, text=True)
        check(p.returncode == 0 and "ok" in p.stdout, f"-n good: {p.returncode} {p.stdout} {p.stderr}")
        bad = os.path.join(env.dir, "bad.conf")
        with open(bad, "w") as f:
            f.write(env.config_text("d0") + "\n[spool]\nfsnyc = yes\n")
        p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", bad], capture_output=True, text=True)
        check(p.returncode == 2, f"-n bad exit {p.returncode}")
        lineno = len(env.config_text("d0").split("\n")) + 2
        check(p.stderr.startswith(f"{bad}:{lineno}: ") and "fsnyc" in p.stderr, f"-n bad message: {p.stderr!r}")
        p = subprocess.run([hdtest.HANDOFFD, "--bogus"], capture_output=True, text=True)
        check(p.returncode == 2, "usage error exit 2")
        p = subprocess.run([hdtest.HANDOFFD, "--version"], capture_output=True, text=True)
        check(p.returncode == 0 and p.stdout.startswith("handoffd "), "--version")

        # A file present before start is processed before READY=1.
        early = hdproto.build("bob", "alice", env.key)
        hdproto.drop(env.spool, early)
        d = env.start(conf=conf)
        check(env.count("claimed") == 1, "first scan done before READY=1")

        # Broken config + SIGHUP: keeps running on the old one.
        good_text = open(conf).read()
        with open(conf, "w") as f:
            f.write(good_text + "\n[nonsense]\nx = 1\n")
        d.messages.clear()
        d.send(signal.SIGHUP)
        d.wait_message("READY=1")
        check(any(m.startswith("RELOADING=1") for m in d.messages), f"RELOADING=1 sent: {d.messages}")
        check(d.proc.poll() is None, "still running")
        check("Reload failed" in d.logs(), "reload failure logged")
        hdproto.drop(env.spool, hdproto.build("bob", "alice", env.key))
        hdtest.wait_for(lambda: env.count("claimed") == 2, what="claims on the old config")

        # Good config with a new agent + SIGHUP: the new agent is served.
        with open(conf, "w") as f:
            f.write(env.config_text("d0", agents=["alice", "gordon"]))
        d.messages.clear()
        d.send(signal.SIGHUP)
        d.wait_message("READY=1")
        # "Reloaded" is an info line: written out when the loop next
        # sleeps, after the READY=1 of the reload went out.
        hdtest.wait_for(lambda: "Reloaded" in d.logs(), what="reload logged")
        g = hdproto.build("bob", "gordon", env.key)
        hdproto.drop(env.spool, g)
        hdtest.wait_for(lambda: env.bootstraps("gordon") == [g["handoff_id"] + ".json"], what="gordon served")

        d.messages.clear()
        rc = d.stop(signal.SIGTERM)
        check(rc == 0, f"SIGTERM exit {rc}")
        check("STOPPING=1" in d.messages, f"STOPPING=1 sent: {d.messages}")
        print("READY/RELOADING/STOPPING seen, broken reload kept the old config, good reload applied")


hdtest.run(main)
