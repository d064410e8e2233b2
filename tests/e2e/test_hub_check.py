"""handoff-hubd -n (issue 47.3): the configuration checked as the start
would check it, every refusal one line naming FILE:LINE (the key's line),
exit 2; a good one: one "ok" line, exit 0; nothing bound, nothing
written.  Each refusal of the start is met:

- token_dir missing, a token file of a bad mode, a token file of no
  agent's name, token_dir unset;
- tls_key unreadable by the hub's user (run as nobody), a key that is not
  the certificate's, tls_cert without tls_key;
- listen not HOST:PORT, a host that does not resolve, plain HTTP on an
  address that is not loopback;
- state_dir not the hub's user's, one that cannot be made;
- the spool's tmp/ missing;
- several at once: each its own line;
- the port already taken by another socket: -n still 0 (it binds
  nothing); a good check writes no state_dir;
- handoffd -n says a missing [hub] token_dir and tls_key too (a warning
  naming handoff-hubd -n).
"""

import os
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402

NOBODY = 65534


def line_of(conf, key):
    """The line of [hub]'s key."""
    section = None
    for i, line in enumerate(open(conf).read().split("\n"), 1):
        if line.startswith("["):
            section = line.strip()
        elif section == "[hub]" and line.split("=")[0].strip() == key:
            return i
    raise AssertionError(f"{key} not in {conf}")


def hubd_n(conf, user=None):
    argv = [hubkit.HUBD, "-n", "-c", conf]
    if user:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30 * hdtest.SLOW)
    return p.returncode, p.stdout, p.stderr


def with_conf(env, hub, name, edit):
    """The hub's config with edit(text) applied, as name.conf."""
    path = os.path.join(env.dir, name + ".conf")
    with open(path, "w") as f:
        f.write(edit(open(hub.conf).read()))
    os.chmod(path, 0o644)
    return path


def refused(what, conf, key, words, user=None, lines=1):
    rc, out, err = hubd_n(conf, user)
    want = f"{conf}:{line_of(conf, key)}: " if key else f"{conf}: "
    got = [ln for ln in err.splitlines() if ln]
    check(rc == 2 and out == "" and len(got) == lines and got[0].startswith(want)
          and all(w in got[0] for w in words),
          f"{what}: want exit 2 and '{want}...{words}', got {rc} {out!r} {err!r}")
    print(f"ok: {what}: exit 2: {got[0]}")
    return got


def main():
    with hdtest.Env(agents=["alice", "bob"], shared=True) as env:
        hub = hubkit.Hub(env, tokens={"bob": None})
        text = open(hub.conf).read()
        for d in (env.dir, os.path.dirname(env.dir)):
            os.chmod(d, 0o755)

        # a good one: ok, and neither the port nor state_dir touched
        taken = socket.socket()
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", hub.port))
        taken.listen(1)
        os.makedirs(os.path.join(env.spool, "tmp"), exist_ok=True)
        os.makedirs(os.path.join(env.spool, "handoff"), exist_ok=True)
        rc, out, err = hubd_n(hub.conf)
        check(rc == 0 and out.startswith(f"{hub.conf}: ok ([hub] listen 127.0.0.1:{hub.port}, TLS, "
                                         "1 token(s)") and err == "", f"good: {rc} {out!r} {err!r}")
        check(not os.path.exists(hub.state_dir), "state_dir not made by -n")
        taken.close()
        print(f"ok: a good [hub]: exit 0, {out.strip()!r}, with its port taken; no state_dir made")

        # tokens
        gone = with_conf(env, hub, "gone", lambda t: t.replace(hub.token_dir, hub.token_dir + "-gone"))
        refused("token_dir missing", gone, "token_dir", ["token_dir", "No such file"])
        bad_mode = os.path.join(env.dir, "tokens-mode")
        shutil.copytree(hub.token_dir, bad_mode)
        os.chmod(os.path.join(bad_mode, "bob.token"), 0o644)
        conf = with_conf(env, hub, "mode", lambda t: t.replace(hub.token_dir, bad_mode))
        refused("a token file of mode 0644", conf, "token_dir", ["bob.token", "mode 0644"])
        bad_name = os.path.join(env.dir, "tokens-name")
        shutil.copytree(hub.token_dir, bad_name)
        shutil.copy(os.path.join(bad_name, "bob.token"), os.path.join(bad_name, "b@d.token"))
        conf = with_conf(env, hub, "name", lambda t: t.replace(hub.token_dir, bad_name))
        refused("a token file of no agent's name", conf, "token_dir",
                ["b@d.token", "not a valid agent name"])
        conf = with_conf(env, hub, "unset", lambda t: t.replace(f"token_dir = {hub.token_dir}\n", ""))
        refused("token_dir unset", conf, None, ["[hub] token_dir is not set"])

        # TLS
        other_cert, other_key = hubkit.make_cert(env.dir, "other")
        conf = with_conf(env, hub, "pair", lambda t: t.replace(hub.key, other_key))
        refused("a key that is not the certificate's", conf, "tls_key",
                [other_key, "is not the key of", hub.cert])
        conf = with_conf(env, hub, "half", lambda t: t.replace(f"tls_key = {hub.key}\n", ""))
        refused("tls_cert without tls_key", conf, "tls_cert", ["tls_cert and tls_key go together"])

        # listen
        conf = with_conf(env, hub, "listen", lambda t: t.replace(f"listen = 127.0.0.1:{hub.port}",
                                                                  "listen = nonsense"))
        refused("listen not HOST:PORT", conf, "listen", ["'nonsense' is not HOST:PORT"])
        conf = with_conf(env, hub, "host", lambda t: t.replace(f"listen = 127.0.0.1:{hub.port}",
                                                                "listen = no-such-host.invalid:8443"))
        refused("a host that does not resolve", conf, "listen", ["no-such-host.invalid"])
        conf = with_conf(env, hub, "plain", lambda t: t.replace(f"listen = 127.0.0.1:{hub.port}",
                                                                 "listen = 0.0.0.0:8443")
                         .replace(f"tls_cert = {hub.cert}\n", "").replace(f"tls_key = {hub.key}\n", ""))
        refused("plain HTTP on 0.0.0.0", conf, "listen", ["plain HTTP", "tls_cert"])

        # state_dir
        foreign = os.path.join(env.dir, "foreign-state")
        os.makedirs(foreign)
        os.chown(foreign, NOBODY, NOBODY)
        conf = with_conf(env, hub, "state", lambda t: t.replace(hub.state_dir, foreign))
        refused("state_dir of another user", conf, "state_dir", [foreign, "owned by uid 65534"])

        # as the hub's own user (nobody here), with what it may read
        # (group-readable, as packaged) except what each case takes away
        mine = os.path.join(env.dir, "nobody-state")
        os.makedirs(mine)
        os.chown(mine, NOBODY, NOBODY)
        for path, mode in ((env.key_path, 0o640), (hub.token_dir, 0o750),
                           (os.path.join(hub.token_dir, "bob.token"), 0o640), (hub.cert, 0o640)):
            os.chown(path, 0, NOBODY)
            os.chmod(path, mode)
        for sub in ("tmp", "handoff"):
            os.chown(os.path.join(env.spool, sub), NOBODY, NOBODY)
        as_hub = with_conf(env, hub, "nobody", lambda t: t.replace(hub.state_dir, mine))
        refused("tls_key unreadable by the hub's user (mode 0600, root's)", as_hub, "tls_key",
                [hub.key, "Permission denied"], user=NOBODY)
        os.chown(hub.key, 0, NOBODY)
        os.chmod(hub.key, 0o640)
        rc, out, err = hubd_n(as_hub, NOBODY)
        check(rc == 0 and ": ok (" in out, f"as nobody, the key readable: {rc} {out!r} {err!r}")
        closed = os.path.join(env.dir, "closed")
        os.makedirs(closed, mode=0o755)
        conf = with_conf(env, hub, "closed", lambda t: t.replace(hub.state_dir, closed + "/a/b"))
        refused("state_dir that cannot be made", conf, "state_dir", [closed, "cannot be made"],
                user=NOBODY)

        # the spool
        shutil.rmtree(os.path.join(env.spool, "tmp"))
        refused("the spool's tmp/ missing", hub.conf, None, [env.spool + "/tmp", "No such file"])
        # several: one line each
        got = refused("three at once", with_conf(env, hub, "three", lambda t: t.replace(
            hub.token_dir, hub.token_dir + "-gone").replace(f"listen = 127.0.0.1:{hub.port}",
                                                            "listen = nonsense")),
            None, ["tmp"], lines=3)
        check(any("token_dir" in g for g in got) and any("nonsense" in g for g in got), f"{got}")

        # handoffd -n sees a missing token_dir and tls_key
        conf = with_conf(env, hub, "daemon", lambda t: t.replace(hub.token_dir, hub.token_dir + "-gone")
                         .replace(hub.key, hub.key + "-gone"))
        p = env.ctl  # noqa: F841  (handoffd, not handoffctl, below)
        r = subprocess.run([hdtest.HANDOFFD, "-n", "-c", conf], capture_output=True, text=True,
                           timeout=30 * hdtest.SLOW)
        for key in ("token_dir", "tls_key"):
            check(f"{conf}:{line_of(conf, key)}: [hub] {key} " in r.stderr
                  and "handoff-hubd -n" in r.stderr, f"handoffd -n on {key}: {r.returncode} {r.stderr!r}")
        check("2 warning(s)" in r.stdout, f"handoffd -n counts them: {r.stdout!r}")
        print(f"ok: handoffd -n says the missing [hub] token_dir and tls_key: {r.stdout.strip()!r}")
    hdtest.finish("test_hub_check")


if __name__ == "__main__":
    hdtest.run(main)
