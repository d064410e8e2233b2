"""handoff-hubd never closes a shared directory: a [hub] state_dir that is
sticky and open to all (as /tmp is) is refused at the start with a line
that names it, and its mode stays as it was.  The hub makes its own
state_dir 0700 (the kept A2A messages are every sender's words); before
this, it chmod'ed whatever state_dir named, /tmp included, and every
other user of it lost it."""

import os
import stat
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
import hubkit  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    with hdtest.Env(agents=["alice"]) as env:
        shared = os.path.join(env.dir, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o1777)
        hub = hubkit.Hub(env, tokens={"bob": None})
        hub.conf = env.write_config("d0", text=open(hub.conf).read().replace(
            f"state_dir = {hub.state_dir}", f"state_dir = {shared}"))
        env.start(conf=hub.conf)        # the daemon makes the spool
        d = hub.start(wait=False)
        rc = d.wait_exit(30 * hdtest.SLOW) if hasattr(d, "wait_exit") else d.proc.wait(30 * hdtest.SLOW)
        mode = stat.S_IMODE(os.stat(shared).st_mode)
        print(f"state_dir mode 1777: hub exit {rc}, mode after {mode:04o}")
        check(mode == 0o1777, f"the shared directory was made {mode:04o}")
        check(rc not in (0, None), f"the hub started on a shared state_dir (exit {rc})")
        check("a shared directory" in d.logs(), f"the refusal names it:\n{d.logs()[-1500:]}")


hdtest.run(main)
