"""A failed fsync of a move's destination holds its source's sync until a
retry succeeds (issue 43, item 9).

flush_rounds() syncs a move's destination before its source (archive/
before claimed/, claimed/ before handoff/).  It used to clear a
directory's dirty mark before its fsync and run the next round after a
failure: with EIO injected on fsync(archive/), fsync(claimed/) = 0
followed, so the archive's removal from claimed/ was made durable before
its arrival in archive/, and archive/ was never synced again.

An LD_PRELOAD shim built here fails the first HD_SHIM_FAIL_N fsync()s of
the spool's archive/ with EIO once the test arms it (a file), and logs
every fsync() of the test's tree with its result and a monotonic time.
alice consumes her handoff (the item is archived: claimed/ -> archive/),
and the shim's log must show, after the first failed fsync(archive/): no
fsync(claimed/) before a successful fsync(archive/); archive/ tried again
with a back-off (1 s, then 2 s); then claimed/ synced.  The daemon says
the failure in one line for the three failed tries, and the recovery in
one.  A handoff dropped while archive/ fails is claimed once it recovers
(its record's sync waits with claimed/'s)."""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

FAILS = 3

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int failed;

int fsync(int fd)
{
        static int (*real)(int);
        const char *suffix = getenv("HD_SHIM_FAIL_SUFFIX"), *arm = getenv("HD_SHIM_ARM");
        const char *logp = getenv("HD_SHIM_LOG"), *root = getenv("HD_SHIM_ROOT");
        int n = getenv("HD_SHIM_FAIL_N") ? atoi(getenv("HD_SHIM_FAIL_N")) : 1;
        char p[64], path[4096], line[4200];
        struct timespec ts;
        int r, e, fail = 0;
        ssize_t l;

        if (!real)
                real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
        snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
        l = readlink(p, path, sizeof(path) - 1);
        path[l < 0 ? 0 : l] = '\0';
        l = (ssize_t)strlen(path);
        pthread_mutex_lock(&lock);
        if (suffix && arm && (size_t)l >= strlen(suffix) &&
            !strcmp(path + l - strlen(suffix), suffix) && failed < n && access(arm, F_OK) == 0) {
                failed++;
                fail = 1;
        }
        pthread_mutex_unlock(&lock);
        if (fail) {
                r = -1;
                e = EIO;
        } else {
                r = real(fd);
                e = errno;
        }
        if (logp && root && !strncmp(path, root, strlen(root))) {
                int lfd = open(logp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
                clock_gettime(CLOCK_MONOTONIC, &ts);
                int k = snprintf(line, sizeof(line), "%lld.%06ld %s %d\n", (long long)ts.tv_sec,
                                 ts.tv_nsec / 1000, path, r < 0 ? -e : 0);
                if (lfd >= 0) {
                        (void)!write(lfd, line, (size_t)k);
                        close(lfd);
                }
        }
        errno = e;
        return r;
}
"""


def build_shim(env):
    check(shutil.which("cc") is not None, "cc is needed to build the fsync shim")
    src = os.path.join(env.dir, "shim.c")
    so = os.path.join(env.dir, "shim.so")
    with open(src, "w") as f:
        f.write(SHIM)
    r = subprocess.run(["cc", "-shared", "-fPIC", "-o", so, src, "-ldl"], capture_output=True, text=True)
    check(r.returncode == 0, f"the shim does not build:\n{r.stderr}")
    return so


def shim_log(path):
    """[(t, dir name, result)] of the spool's directories."""
    out = []
    try:
        with open(path) as f:
            for ln in f:
                t, p, rc = ln.split()
                out.append((float(t), p, int(rc)))
    except FileNotFoundError:
        pass
    return out


def main():
    with hdtest.Env(agents=["alice"]) as env:
        so = build_shim(env)
        log = os.path.join(env.dir, "fsync.log")
        arm = os.path.join(env.dir, "arm")
        archive = os.path.join(env.spool, "archive")
        claimed = os.path.join(env.spool, "claimed")
        e = {"LD_PRELOAD": so, "HD_SHIM_FAIL_SUFFIX": "/spool/archive", "HD_SHIM_ARM": arm,
             "HD_SHIM_LOG": log, "HD_SHIM_ROOT": env.dir, "HD_SHIM_FAIL_N": str(FAILS)}
        if hdtest.SANITIZE:
            e["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
        conf = env.write_config()
        d = hdtest.Daemon(env, conf, "d0", env_vars=e)
        env.daemons.append(d)
        d.wait_message("READY=1")

        doc = hdproto.build("bob", "alice", env.key, ttl=600)
        hid = doc["handoff_id"]
        hdproto.drop(env.spool, doc)
        hdtest.wait_for(lambda: env.item(hid)["state"] == "claimed" and env.bootstraps("alice"),
                        20 * hdtest.SLOW, "the handoff claimed and delivered")
        open(arm, "w").close()
        check(hdtest.real_consumer(env.state["alice"], hid) is not None, "alice consumes it")

        def failed_tries():
            return [x for x in shim_log(log) if x[1] == archive and x[2] < 0]

        hdtest.wait_for(lambda: len(failed_tries()) >= 1, 20 * hdtest.SLOW,
                        "the first fsync(archive/) failing")
        # Dropped while archive/ fails: its record in claimed/ waits too.
        later = hdproto.build("bob", "alice", env.key, ttl=600)
        hdproto.drop(env.spool, later)

        def recovered():
            ents = shim_log(log)
            i = next(k for k, x in enumerate(ents) if x[1] == archive and x[2] < 0)
            ok = [k for k, x in enumerate(ents) if k > i and x[1] == archive and x[2] == 0]
            return ok and any(x[1] == claimed and x[2] == 0 for x in ents[ok[0]:])

        def order():
            ents = shim_log(log)
            first = next(k for k, x in enumerate(ents) if x[1] == archive and x[2] < 0)
            t0 = ents[first][0]
            return [(f"{x[0] - t0:+.2f}s", os.path.basename(x[1]), x[2])
                    for x in ents[first:] if x[1] in (archive, claimed)][:8]

        try:
            hdtest.wait_for(recovered, 30 * hdtest.SLOW, "archive/ synced again, then claimed/")
        finally:
            print(f"fsync order from the first failure: {order()}")
        ents = shim_log(log)
        first = next(k for k, x in enumerate(ents) if x[1] == archive and x[2] < 0)
        ok = next(k for k, x in enumerate(ents) if k > first and x[1] == archive and x[2] == 0)
        between = [x for x in ents[first:ok] if x[1] == claimed]
        check(not between, f"fsync(claimed/) between the failed fsync(archive/) and its retry: "
              f"{between}")
        fails = failed_tries()
        check(len(fails) == FAILS, f"{len(fails)} failed tries of archive/, want {FAILS}")
        gaps = [round(b[0] - a[0], 1) for a, b in zip(fails, fails[1:] + [ents[ok]])]
        print(f"archive/ tried again after {gaps} s")
        check(len(gaps) == FAILS and all(g >= 0.9 * (2 ** k) for k, g in enumerate(gaps)),
              f"tries of archive/ backed off 1 s, 2 s, 4 s: {gaps}")
        hdtest.wait_for(lambda: env.item(hid)["state"] == "archive", 10 * hdtest.SLOW,
                        "the consumed item in archive/")
        # Its rename into claimed/ came before the failure; its delivery
        # (the bootstrap) waits for the recovery.
        hdtest.wait_for(lambda: env.item(later["handoff_id"])["state"] == "claimed" and
                        len(env.bootstraps("alice")) >= 1 and
                        f"Claimed {later['handoff_id']}" in d.logs(),
                        30 * hdtest.SLOW, "the handoff dropped meanwhile claimed and delivered")
        # The shim logs the fsync before the daemon, back from it, says
        # the recovery: wait for the line, then count.
        recovery = f"fsync of archive/ succeeded again after {FAILS} failed tries"
        hdtest.wait_for(lambda: recovery in d.logs(), 10 * hdtest.SLOW, "the recovery said")
        logs = d.logs()
        said = logs.count("Cannot fsync archive/")
        check(said == 1, f"the failure said {said} times, want once:\n{logs[-3000:]}")
        check(logs.count(recovery) == 1, f"the recovery said once:\n{logs[-3000:]}")
        check(d.stop() == 0, "the daemon stops with exit 0")


hdtest.run(main)
