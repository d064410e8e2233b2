"""An LD_PRELOAD shim for the tests of the daemon's syncs, built with cc
into the test's directory (stdlib only here).

It logs every fsync() and sync_file_range() of a file under HD_SHIM_ROOT
(the path its descriptor has then, as /proc/self/fd tells it) with its
result and the monotonic times of its start and end; with HD_SHIM_NAMES
set, also every
name made under the root by renameat(), renameat2() or linkat() (the
destination).  It fails the first HD_SHIM_FAIL_N fsync()s (default 1) of
a path ending in HD_SHIM_FAIL_SUFFIX with EIO once the file HD_SHIM_ARM
exists.  One line each: "END PATH RC OP START INO", OP fsync, start (a
sync_file_range()) or name (RC 0), INO the file's inode (an O_TMPFILE's path is "#N (deleted)" even
once it is linked in).
"""

from hdtest import build_preload, preload_env

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int failed;

static double now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fd_path(int fd, char *path, size_t n)
{
        char p[64];
        ssize_t l;

        if (fd == AT_FDCWD) {
                if (!getcwd(path, n))
                        path[0] = '\0';
                return;
        }
        snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
        l = readlink(p, path, n - 1);
        path[l < 0 ? 0 : l] = '\0';
}

static void log_line(const char *path, int rc, const char *op, double t0, unsigned long ino)
{
        const char *logp = getenv("HD_SHIM_LOG"), *root = getenv("HD_SHIM_ROOT");
        char line[4300];

        if (!logp || !root || strncmp(path, root, strlen(root)))
                return;
        int lfd = open(logp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        int k = snprintf(line, sizeof(line), "%.6f %s %d %s %.6f %lu\n", now(), path, rc, op, t0,
                         ino);
        if (lfd >= 0) {
                (void)!write(lfd, line, (size_t)k);
                close(lfd);
        }
}

int fsync(int fd)
{
        static int (*real)(int);
        const char *suffix = getenv("HD_SHIM_FAIL_SUFFIX"), *arm = getenv("HD_SHIM_ARM");
        int n = getenv("HD_SHIM_FAIL_N") ? atoi(getenv("HD_SHIM_FAIL_N")) : 1;
        char path[4096];
        int r, e, fail = 0;
        double t0 = now();
        size_t l;

        if (!real)
                real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
        fd_path(fd, path, sizeof(path));
        l = strlen(path);
        pthread_mutex_lock(&lock);
        if (suffix && arm && l >= strlen(suffix) &&
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
        struct stat st;
        log_line(path, r < 0 ? -e : 0, "fsync", t0,
                 fstat(fd, &st) == 0 ? (unsigned long)st.st_ino : 0);
        errno = e;
        return r;
}

int sync_file_range(int fd, off_t off, off_t n, unsigned int flags)
{
        static int (*real)(int, off_t, off_t, unsigned int);
        char path[4096];
        struct stat st;
        double t0 = now();
        int r, e;

        if (!real)
                real = (int (*)(int, off_t, off_t, unsigned int))dlsym(RTLD_NEXT, "sync_file_range");
        r = real(fd, off, n, flags);
        e = errno;
        fd_path(fd, path, sizeof(path));
        log_line(path, r < 0 ? -e : 0, "start", t0,
                 fstat(fd, &st) == 0 ? (unsigned long)st.st_ino : 0);
        errno = e;
        return r;
}

static void named(int dirfd, const char *name, int r)
{
        char path[4096];
        size_t l;

        if (r < 0 || !getenv("HD_SHIM_NAMES"))
                return;
        if (name[0] == '/') {
                snprintf(path, sizeof(path), "%s", name);
        } else {
                fd_path(dirfd, path, sizeof(path) - 256);
                l = strlen(path);
                snprintf(path + l, sizeof(path) - l, "/%s", name);
        }
        struct stat st;
        log_line(path, 0, "name", now(),
                 fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0 ? (unsigned long)st.st_ino : 0);
}

int renameat(int ofd, const char *old, int nfd, const char *new)
{
        static int (*real)(int, const char *, int, const char *);
        int r, e;

        if (!real)
                real = (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
        r = real(ofd, old, nfd, new);
        e = errno;
        named(nfd, new, r);
        errno = e;
        return r;
}

int renameat2(int ofd, const char *old, int nfd, const char *new, unsigned flags)
{
        static int (*real)(int, const char *, int, const char *, unsigned);
        int r, e;

        if (!real)
                real = (int (*)(int, const char *, int, const char *, unsigned))
                        dlsym(RTLD_NEXT, "renameat2");
        r = real(ofd, old, nfd, new, flags);
        e = errno;
        named(nfd, new, r);
        errno = e;
        return r;
}

int linkat(int ofd, const char *old, int nfd, const char *new, int flags)
{
        static int (*real)(int, const char *, int, const char *, int);
        int r, e;

        if (!real)
                real = (int (*)(int, const char *, int, const char *, int))dlsym(RTLD_NEXT, "linkat");
        r = real(ofd, old, nfd, new, flags);
        e = errno;
        named(nfd, new, r);
        errno = e;
        return r;
}
"""


def build(env):
    """The shim built in env.dir: its path."""
    return build_preload(env, SHIM, "fsync shim")


def env_vars(so, root, log, **kw):
    """The environment of a daemon under the shim: kw as HD_SHIM_<KEY>."""
    return preload_env(so, HD_SHIM_LOG=log, HD_SHIM_ROOT=root,
                       **{"HD_SHIM_" + k.upper(): str(v) for k, v in kw.items()})


def read_log(path):
    """[(end, path, rc, op, start, ino)] in the order written."""
    out = []
    try:
        with open(path) as f:
            for ln in f:
                w = ln.split()      # a path may hold spaces: "... (deleted)"
                out.append((float(w[0]), " ".join(w[1:-4]), int(w[-4]), w[-3], float(w[-2]),
                            int(w[-1])))
    except FileNotFoundError:
        pass
    return out
