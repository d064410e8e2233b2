/* powercutfs: a FUSE file system for power-cut tests (issue 26).
 *
 *   powercutfs BACKING MOUNTPOINT [-d]
 *
 * Every operation on MOUNTPOINT passes through to the real directory
 * BACKING.  Beside it the program keeps, in memory, the image of what a disk
 * would hold after a power cut, and writing "cut" to MOUNTPOINT/.powercut
 * makes BACKING that image: everything not synced is gone.  From then on
 * every operation fails with EIO (the machine is off); the caller kills the
 * processes that used the mount and unmounts it (umount -l), and the program
 * exits.  Mount BACKING again for the "reboot".
 *
 * The model: a strict file system, no ordering guarantee beyond what fsync
 * gives.
 *   - At mount everything in BACKING is on disk.
 *   - A file's bytes, mode, owner and mtime reach the disk only with an
 *     fsync or fdatasync of that file: the image keeps what the file held
 *     at its last sync (nothing for a file never synced: it comes back
 *     empty if its name survives).
 *   - A directory's entries (create, mknod, mkdir, symlink, link, unlink,
 *     rmdir, rename in or out) reach the disk only with an fsync of that
 *     directory: the image keeps the entries the directory had at its last
 *     sync.  A rename between two directories is two changes, one in each:
 *     syncing only the destination keeps the name in both (two links),
 *     syncing only the source loses it from both.  Nothing else (a sync of
 *     another file or directory, the order of the calls) makes anything
 *     durable.
 * Inodes are followed by number while live and by a record of their own in
 * the image, so a number the backing file system reuses after an unlink
 * does not mix two files.  Reading MOUNTPOINT/.powercut gives counters.
 *
 * "arm OP TEXT" written there cuts the power right after the next OP
 * (fsync, fsyncdir, rename, link, unlink, create: a new file) whose path
 * (the destination of a rename or link) holds TEXT: the operation is done
 * and answered, everything after it fails.  A test aims a cut between two
 * steps of a program with it ("arm fsyncdir /spool/outbox": the outbox/
 * synced, what comes next not).  A number after it ("arm fsyncdir
 * /archive 3") cuts after the third such operation instead of the first.
 * "arm OP TEXT OP2 TEXT2 [N]": after the first (Nth) OP2 on TEXT2 that
 * follows an OP on TEXT ("arm rename /archive/ fsyncdir /outbox": the
 * sync of outbox/ that follows a move into archive/).  "disarm" forgets
 * it.  "trace on" logs every such operation to stderr ("powercutfs: op
 * OP PATH", a rename's or link's "PATH <- SOURCE"), "trace off" stops:
 * a test lists the steps a program takes with it.
 *
 * With --concurrent (the third argument) requests are served by several
 * threads, one operation at a time still (a lock around each), so syncs
 * that a program issues together may be applied in any order, as a disk
 * may make them durable; "delay fsyncdir TEXT MS" holds each sync of a
 * directory whose path holds TEXT MS milliseconds before it is applied,
 * so that another sync issued at the same time goes first (a cut then
 * finds the one without the other).  A sync issued only after the held
 * one returned is still applied after it.
 *
 * This file: arming the cut, the control file, the pass-through
 * operations.  The image and the cut itself: pcimage.c. */
#define FUSE_USE_VERSION 31
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "pcimage.h"

#define CTL_NAME "/.powercut"

/* arm_op[0][0]: not armed; [1]: a second stage, armed by the first */
static char arm_op[2][16], arm_text[2][256];
static char delay_text[256];    /* "delay fsyncdir TEXT MS"; [0]: none */
static long delay_ms;
static long arm_skip;           /* matches of the last stage to let pass */
static bool trace;              /* "trace on" */

/* "trace on": the operation a cut can be armed at, logged. */
static void trace_op(const char *op, const char *rel, const char *from)
{
        if (trace)
                fprintf(stderr, "powercutfs: op %s %s%s%s\n", op, rel ? rel : "?",
                        from ? " <- " : "", from ? from : "");
}

/* An armed cut after OP on rel (relative to BACKING), or on the file or
 * directory open as fd. */
static void maybe_cut(const char *op, const char *rel)
{
        if (!arm_op[0][0] || cut_done || strcmp(op, arm_op[0]) || !rel ||
            !strstr(rel, arm_text[0]))
                return;
        if (arm_op[1][0]) {
                fprintf(stderr, "powercutfs: after %s %s, armed for %s %s\n", op, rel,
                        arm_op[1], arm_text[1]);
                memcpy(arm_op[0], arm_op[1], sizeof(arm_op[0]));
                memcpy(arm_text[0], arm_text[1], sizeof(arm_text[0]));
                arm_op[1][0] = '\0';
                return;
        }
        if (arm_skip > 0) {
                arm_skip--;
                return;
        }
        fprintf(stderr, "powercutfs: armed cut after %s %s\n", op, rel);
        arm_op[0][0] = '\0';
        do_cut();
}

/* The path fd was opened by (its /proc/self/fd link) into path: 0, or -1. */
static int fd_path(int fd, char *path, size_t size)
{
        char p[64];
        ssize_t n;

        snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
        n = readlink(p, path, size - 1);
        if (n < 0)
                return -1;
        path[n] = '\0';
        return 0;
}

static void maybe_cut_fd(const char *op, int fd)
{
        char path[4096];
        size_t lb = strlen(backing);

        if (!trace && (!arm_op[0][0] || strcmp(op, arm_op[0])))
                return;
        if (fd_path(fd, path, sizeof(path)) < 0)
                return;
        if (strncmp(path, backing, lb))
                return;
        trace_op(op, path + lb, NULL);
        maybe_cut(op, path + lb);
}

static int arm(const char *buf, size_t size)
{
        char cmd[600];
        int k;

        if (size >= sizeof(cmd))
                return -EINVAL;
        memcpy(cmd, buf, size);
        cmd[size] = '\0';
        cmd[strcspn(cmd, "\n")] = '\0';
        if (!strncmp(cmd, "delay ", 6)) {
                if (sscanf(cmd, "delay fsyncdir %255s %ld", delay_text, &delay_ms) != 2) {
                        delay_text[0] = '\0';
                        return -EINVAL;
                }
                return 0;
        }
        if (!strcmp(cmd, "trace on") || !strcmp(cmd, "trace off")) {
                trace = !strcmp(cmd, "trace on");
                return 0;
        }
        arm_op[0][0] = arm_op[1][0] = '\0';
        arm_skip = 0;
        if (!strcmp(cmd, "disarm"))
                return 0;
        char *tok[6], *save = NULL;
        int nt = 0;
        for (char *t = strtok_r(cmd, " ", &save); t && nt < 6; t = strtok_r(NULL, " ", &save))
                tok[nt++] = t;
        long nth = 1;
        if (nt == 4 || nt == 6) {
                char *end;
                nth = strtol(tok[nt - 1], &end, 10);
                if (*end || nth < 1)
                        return -EINVAL;
                nt--;
        }
        if ((nt != 3 && nt != 5) || strcmp(tok[0], "arm"))
                return -EINVAL;
        for (k = 0; 1 + 2 * k < nt; k++) {
                if (strlen(tok[1 + 2 * k]) >= sizeof(arm_op[k]) ||
                    strlen(tok[2 + 2 * k]) >= sizeof(arm_text[k])) {
                        arm_op[0][0] = arm_op[1][0] = '\0';
                        return -EINVAL;
                }
                strcpy(arm_op[k], tok[1 + 2 * k]);
                strcpy(arm_text[k], tok[2 + 2 * k]);
        }
        arm_skip = nth - 1;
        return 0;
}

/* ---- pass-through operations ---- */

#define REL(p) ((p)[0] == '/' && (p)[1] ? (p) + 1 : ".")
/* One operation at a time, also with --concurrent: held until the
 * handler returns. */
static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;

static void big_unlock(int *unused)
{
        (void)unused;
        pthread_mutex_unlock(&big_lock);
}

#define OFF()                                                           \
        pthread_mutex_lock(&big_lock);                                  \
        int off_guard_ __attribute__((cleanup(big_unlock), unused)) = 0; \
        n_ops++;                                                        \
        if (cut_done)                                                   \
                return -EIO
#define RET(x) return (x) < 0 ? -errno : 0

static bool is_ctl(const char *path)
{
        return path && !strcmp(path, CTL_NAME);
}

static int pc_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
        OFF();
        if (is_ctl(path)) {
                memset(st, 0, sizeof(*st));
                st->st_mode = S_IFREG | 0600;
                st->st_nlink = 1;
                st->st_size = 4096;
                return 0;
        }
        if (fi && fi->fh != (uint64_t)-1)
                RET(fstat((int)fi->fh, st));
        RET(fstatat(root_fd, REL(path), st, AT_SYMLINK_NOFOLLOW));
}

static int pc_readlink(const char *path, char *buf, size_t size)
{
        OFF();
        ssize_t n = readlinkat(root_fd, REL(path), buf, size - 1);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return 0;
}

static int pc_mknod(const char *path, mode_t mode, dev_t rdev)
{
        OFF();
        if (mknodat(root_fd, REL(path), mode, rdev) < 0)
                return -errno;
        forget_at(REL(path));
        return 0;
}

static int pc_mkdir(const char *path, mode_t mode)
{
        OFF();
        if (mkdirat(root_fd, REL(path), mode) < 0)
                return -errno;
        forget_at(REL(path));
        return 0;
}

static int pc_unlink(const char *path)
{
        OFF();
        if (unlinkat(root_fd, REL(path), 0) < 0)
                return -errno;
        trace_op("unlink", path, NULL);
        maybe_cut("unlink", path);
        return 0;
}

static int pc_rmdir(const char *path)
{
        OFF();
        RET(unlinkat(root_fd, REL(path), AT_REMOVEDIR));
}

static int pc_symlink(const char *target, const char *path)
{
        OFF();
        if (symlinkat(target, root_fd, REL(path)) < 0)
                return -errno;
        forget_at(REL(path));
        return 0;
}

static int pc_rename(const char *from, const char *to, unsigned int flags)
{
        OFF();
        if (renameat2(root_fd, REL(from), root_fd, REL(to), flags) < 0)
                return -errno;
        trace_op(flags & RENAME_EXCHANGE ? "exchange" : "rename", to, from);
        maybe_cut("rename", to);
        return 0;
}

static int pc_link(const char *from, const char *to)
{
        OFF();
        if (linkat(root_fd, REL(from), root_fd, REL(to), 0) < 0)
                return -errno;
        trace_op("link", to, from);
        maybe_cut("link", to);
        return 0;
}

static int pc_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
        OFF();
        if (fi && fi->fh != (uint64_t)-1)
                RET(fchmod((int)fi->fh, mode));
        RET(fchmodat(root_fd, REL(path), mode, 0));
}

static int pc_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
        OFF();
        if (fi && fi->fh != (uint64_t)-1)
                RET(fchown((int)fi->fh, uid, gid));
        RET(fchownat(root_fd, REL(path), uid, gid, AT_SYMLINK_NOFOLLOW));
}

static int pc_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
        OFF();
        if (fi && fi->fh != (uint64_t)-1)
                RET(ftruncate((int)fi->fh, size));
        int fd = openat(root_fd, REL(path), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        int r = ftruncate(fd, size) < 0 ? -errno : 0;
        close(fd);
        return r;
}

static int pc_utimens(const char *path, const struct timespec ts[2], struct fuse_file_info *fi)
{
        OFF();
        if (fi && fi->fh != (uint64_t)-1)
                RET(futimens((int)fi->fh, ts));
        RET(utimensat(root_fd, REL(path), ts, AT_SYMLINK_NOFOLLOW));
}

static int pc_open(const char *path, struct fuse_file_info *fi)
{
        OFF();
        if (is_ctl(path)) {
                fi->fh = (uint64_t)-1;
                fi->direct_io = 1;
                return 0;
        }
        int fd = openat(root_fd, REL(path), (fi->flags & ~O_NOFOLLOW) | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        fi->fh = (uint64_t)fd;
        return 0;
}

static int pc_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
        OFF();
        struct stat st;
        bool existed = fstatat(root_fd, REL(path), &st, AT_SYMLINK_NOFOLLOW) == 0;
        int fd = openat(root_fd, REL(path), fi->flags | O_CREAT | O_CLOEXEC, mode);
        if (fd < 0)
                return -errno;
        if (!existed && fstat(fd, &st) == 0)
                live_forget(st.st_ino);
        fi->fh = (uint64_t)fd;
        if (!existed) {
                trace_op("create", path, NULL);
                maybe_cut("create", path);
        }
        return 0;
}

static int pc_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
        OFF();
        if (fi->fh == (uint64_t)-1) {
                char txt[256];
                int n = snprintf(txt, sizeof(txt),
                                 "records %zu\nfile_syncs %lu\ndir_syncs %lu\nops %lu\n",
                                 n_recs, n_fsync, n_fsyncdir, n_ops);
                if (off >= n)
                        return 0;
                size_t k = (size_t)(n - off) < size ? (size_t)(n - off) : size;
                memcpy(buf, txt + off, k);
                return (int)k;
        }
        ssize_t n = pread((int)fi->fh, buf, size, off);
        return n < 0 ? -errno : (int)n;
}

static int pc_write(const char *path, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
        OFF();
        if (fi->fh == (uint64_t)-1) {
                if (size >= 3 && !memcmp(buf, "cut", 3)) {
                        int r = do_cut();
                        return r < 0 ? r : (int)size;
                }
                int r = arm(buf, size);
                return r < 0 ? r : (int)size;
        }
        ssize_t n = pwrite((int)fi->fh, buf, size, off);
        return n < 0 ? -errno : (int)n;
}

static int pc_statfs(const char *path, struct statvfs *sv)
{
        OFF();
        RET(fstatvfs(root_fd, sv));
}

static int pc_release(const char *path, struct fuse_file_info *fi)
{
        if (fi->fh != (uint64_t)-1)
                close((int)fi->fh);
        return 0;
}

static int pc_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
        OFF();
        if (fi->fh == (uint64_t)-1)
                return 0;
        if (fsync((int)fi->fh) < 0)
                return -errno;
        int r = sync_file((int)fi->fh);
        if (r == 0)
                maybe_cut_fd("fsync", (int)fi->fh);
        return r;
}

static int pc_opendir(const char *path, struct fuse_file_info *fi)
{
        OFF();
        int fd = openat(root_fd, REL(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        fi->fh = (uint64_t)fd;
        return 0;
}

static int pc_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
        OFF();
        int fd = openat((int)fi->fh, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                struct stat st;
                memset(&st, 0, sizeof(st));
                st.st_ino = de->d_ino;
                st.st_mode = (mode_t)DTTOIF(de->d_type);
                if (fill(buf, de->d_name, &st, 0, 0))
                        break;
        }
        closedir(d);
        return 0;
}

static int pc_releasedir(const char *path, struct fuse_file_info *fi)
{
        close((int)fi->fh);
        return 0;
}

/* "delay fsyncdir TEXT MS": a sync of a directory whose path holds TEXT
 * waits, outside the lock, before it is applied. */
static void delay_sync(int fd)
{
        char path[4096], text[256];
        long ms;

        pthread_mutex_lock(&big_lock);
        memcpy(text, delay_text, sizeof(text));
        ms = delay_ms;
        pthread_mutex_unlock(&big_lock);
        if (!text[0] || ms <= 0)
                return;
        if (fd_path(fd, path, sizeof(path)) < 0)
                return;
        if (strstr(path + strlen(backing), text)) {
                struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
                nanosleep(&ts, NULL);
        }
}

static int pc_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
        delay_sync((int)fi->fh);
        OFF();
        if (fsync((int)fi->fh) < 0)
                return -errno;
        int r = sync_dir((int)fi->fh, false);
        if (r == 0)
                maybe_cut_fd("fsyncdir", (int)fi->fh);
        return r;
}

static int pc_access(const char *path, int mask)
{
        OFF();
        if (is_ctl(path))
                return 0;
        RET(faccessat(root_fd, REL(path), mask, AT_SYMLINK_NOFOLLOW));
}

static void *pc_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
        /* every operation reaches us: no caches, no hidden renames */
        cfg->use_ino = 1;
        cfg->hard_remove = 1;
        cfg->nullpath_ok = 1;
        cfg->entry_timeout = 0;
        cfg->attr_timeout = 0;
        cfg->negative_timeout = 0;
        cfg->direct_io = 0;
        cfg->kernel_cache = 0;
        conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
        return NULL;
}

static const struct fuse_operations ops = {
        .init = pc_init,
        .getattr = pc_getattr,
        .readlink = pc_readlink,
        .mknod = pc_mknod,
        .mkdir = pc_mkdir,
        .unlink = pc_unlink,
        .rmdir = pc_rmdir,
        .symlink = pc_symlink,
        .rename = pc_rename,
        .link = pc_link,
        .chmod = pc_chmod,
        .chown = pc_chown,
        .truncate = pc_truncate,
        .utimens = pc_utimens,
        .open = pc_open,
        .create = pc_create,
        .read = pc_read,
        .write = pc_write,
        .statfs = pc_statfs,
        .release = pc_release,
        .fsync = pc_fsync,
        .opendir = pc_opendir,
        .readdir = pc_readdir,
        .releasedir = pc_releasedir,
        .fsyncdir = pc_fsyncdir,
        .access = pc_access,
};

int main(int argc, char **argv)
{
        struct stat st;

        bool concurrent = argc > 3 && !strcmp(argv[3], "--concurrent");

        if (argc < 3) {
                fprintf(stderr, "usage: powercutfs BACKING MOUNTPOINT [--concurrent] [fuse options]\n");
                return 2;
        }
        backing = realpath(argv[1], NULL);
        if (!backing || (root_fd = open(backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                perror(argv[1]);
                return 1;
        }
        if (fstat(root_fd, &st) < 0)
                return 1;
        root_rec = rec_of(&st);
        if (sync_dir(root_fd, true) < 0) {
                perror("powercutfs: reading the backing directory");
                return 1;
        }
        fprintf(stderr, "powercutfs: %s on %s, %zu records on disk; model: strict, a file's "
                "bytes are durable at its fsync, a directory's entries at the directory's fsync, "
                "nothing else\n", backing, argv[2], n_recs);
        /* foreground, one thread (--concurrent: several, one operation at
         * a time under big_lock): each operation is whole before the next,
         * so a cut falls between two operations */
        char *fargv[16];
        int fargc = 0;
        fargv[fargc++] = argv[0];
        fargv[fargc++] = argv[2];
        fargv[fargc++] = "-f";
        if (!concurrent)
                fargv[fargc++] = "-s";
        fargv[fargc++] = "-o";
        fargv[fargc++] = "allow_other,default_permissions,fsname=powercutfs";
        for (int k = concurrent ? 4 : 3; k < argc && fargc < 15; k++)
                fargv[fargc++] = argv[k];
        fargv[fargc] = NULL;
        return fuse_main(fargc, fargv, &ops, NULL);
}
