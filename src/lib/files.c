/* Atomic and durable file operations: hd_write_atomic(), mkdir -p relative
 * to a directory fd, directory fsync, no-replace moves between spool states,
 * random hex for unique names.  Return 0 or -errno, never log. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "util.h"

/* Temp names: "." + name + "." + TMP_SUFFIX_BYTES*2 hex chars. */
#define TMP_SUFFIX_BYTES 3
_Static_assert(WRITE_ATOMIC_NAME_MAX + 2 + 2 * TMP_SUFFIX_BYTES == NAME_MAX,
               "files.h's WRITE_ATOMIC_NAME_MAX is what a temp name leaves");
#define TMP_MAX_TRIES 128

int random_hex(char *buf, size_t nbytes)
{
        unsigned char chunk[32];

        if (!buf || nbytes == 0)
                return -EINVAL;
        if (sodium_init() < 0)
                return -EIO;
        for (size_t done = 0; done < nbytes;) {
                size_t n = nbytes - done < sizeof(chunk) ? nbytes - done
                                                          : sizeof(chunk);
                randombytes_buf(chunk, n);
                /* sodium_bin2hex writes lowercase and a NUL after 2n chars */
                sodium_bin2hex(buf + 2 * done, 2 * n + 1, chunk, n);
                done += n;
        }
        sodium_memzero(chunk, sizeof(chunk));
        return 0;
}

int name_hex(char *buf, size_t nbytes)
{
        static __thread unsigned char pool[128];
        static __thread size_t left;

        if (!buf || nbytes == 0 || nbytes > 32)
                return -EINVAL;
        if (left < nbytes) {
                if (sodium_init() < 0)
                        return -EIO;
                randombytes_buf(pool, sizeof(pool));
                left = sizeof(pool);
        }
        left -= nbytes;
        sodium_bin2hex(buf, 2 * nbytes + 1, pool + left, nbytes);
        sodium_memzero(pool + left, nbytes);
        return 0;
}

int fsync_dir(int dirfd)
{
        if (fsync(dirfd) < 0) {
                /* file systems that cannot sync a directory have nothing
                 * pending to lose; everything else is a real error */
                if (errno == EINVAL || errno == EROFS)
                        return 0;
                return -errno;
        }
        return 0;
}

int move_noreplace(int fromfd, const char *from, int tofd, const char *to)
{
        if (!from || !to || !*from || !*to)
                return -EINVAL;
        /* No link()+unlink() fallback: that would show a second link in
         * the destination, which a scanner rightly rejects as a hardlink. */
        if (renameat2(fromfd, from, tofd, to, RENAME_NOREPLACE) < 0)
                return -errno;
        return 0;
}

int mkdir_p_at(int dirfd, const char *path, mode_t mode)
{
        _cleanup_free_ char *p = NULL;
        char *s;
        struct stat st;

        if (!path || !*path)
                return -EINVAL;
        p = strdup(path);
        if (!p)
                return -ENOMEM;
        s = p;
        /* a leading '/' is the root, which exists */
        while (*s == '/')
                s++;
        while (*s) {
                char *end = strchr(s, '/');
                bool last = !end;
                size_t clen = last ? strlen(s) : (size_t)(end - s);

                if (!last)
                        *end = '\0';
                if (clen > 0 && !(clen == 1 && s[0] == '.')) {
                        if (mkdirat(dirfd, p, mode) < 0) {
                                int e = errno;
                                /* follow symlinks: /var/run -> /run is fine */
                                if (e != EEXIST)
                                        return -e;
                                if (fstatat(dirfd, p, &st, 0) < 0)
                                        return -errno;
                                if (!S_ISDIR(st.st_mode))
                                        return -ENOTDIR;
                        }
                }
                if (last)
                        break;
                *end = '/';
                s = end + 1;
                while (*s == '/')
                        s++;
        }
        return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
        const char *q = buf;

        while (len > 0) {
                ssize_t n = write(fd, q, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
                q += n;
                len -= (size_t)n;
        }
        return 0;
}

/* A temp name's random suffix (name_hex(): not a syscall each). */
static int tmp_suffix(char rnd[2 * TMP_SUFFIX_BYTES + 1])
{
        return name_hex(rnd, TMP_SUFFIX_BYTES);
}

/* What the write_*() calls create: one name in dirfd (no '/', not . or
 * ..), and bytes to write when len says there are. */
static bool write_args_valid(const char *name, const void *buf, size_t len)
{
        return name && *name && !strchr(name, '/') && strcmp(name, ".") &&
               strcmp(name, "..") && (buf || len == 0);
}

/* Write buf to the new file fd, set its mode (fchmod before fsync, so the
 * synced inode already has it; fchmod is not subject to the umask, the
 * caller's mode is exact), sync it if flags say so; fd stays open. */
static int fill_open_fd(int fd, const void *buf, size_t len, mode_t mode, unsigned flags)
{
        int r;

        r = write_all(fd, buf, len);
        if (r < 0)
                return r;
        if (!(flags & WRITE_MODE_KEPT) && fchmod(fd, mode & 07777) < 0)
                return -errno;
        if ((flags & WRITE_SYNC_FILE) && fsync(fd) < 0)
                return -errno;
        return 0;
}

void write_start(int fd)
{
        /* A hint: a file system that cannot (EINVAL, ESPIPE) loses
         * nothing by it. */
        (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

/* fill_open_fd(), then close fd (always). */
static int fill_fd(int fd, const void *buf, size_t len, mode_t mode, unsigned flags)
{
        _cleanup_close_ int f = fd;
        int r;

        r = fill_open_fd(f, buf, len, mode, flags);
        if (r < 0)
                return r;
        r = close(TAKE_FD(f));
        if (r < 0 && errno != EINTR)
                return -errno;
        return 0;
}

int hd_write_atomic(int dirfd, const char *name, const void *buf, size_t len,
                    mode_t mode, bool do_fsync)
{
        return write_atomic(dirfd, name, buf, len, mode,
                            do_fsync ? WRITE_SYNC_FILE | WRITE_SYNC_DIR : 0);
}

int write_atomic_fd(int dirfd, const char *name, const void *buf, size_t len,
                    mode_t mode, unsigned flags, int *ret_fd)
{
        char tmp[NAME_MAX + 1], rnd[2 * TMP_SUFFIX_BYTES + 1];
        _cleanup_close_ int fd = -1;
        int r;

        if (!write_args_valid(name, buf, len))
                return -EINVAL;

        for (int tries = 0;; tries++) {
                r = tmp_suffix(rnd);
                if (r < 0)
                        return r;
                r = xsnprintf(tmp, sizeof(tmp), ".%s.%s", name, rnd);
                if (r < 0)
                        return r;
                /* 0600 until complete (fchmod then): nobody reads a
                 * half-written file.  WRITE_MODE_KEPT: the caller's own
                 * files, whose readers may read them whole anyway, made
                 * with mode at once (the temp name is hidden). */
                fd = openat(dirfd, tmp,
                            O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
                            O_NOFOLLOW, flags & WRITE_MODE_KEPT ? mode & 0777 : 0600);
                if (fd >= 0)
                        break;
                if (errno != EEXIST || tries >= TMP_MAX_TRIES)
                        return -errno;
        }

        r = ret_fd ? fill_open_fd(fd, buf, len, mode, flags)
                   : fill_fd(TAKE_FD(fd), buf, len, mode, flags);
        if (r < 0)
                goto fail;
        if (ret_fd)
                write_start(fd);
        if (renameat(dirfd, tmp, dirfd, name) < 0) {
                r = -errno;
                goto fail;
        }
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        if (flags & WRITE_SYNC_DIR)
                return fsync_dir(dirfd);
        return 0;

fail:
        unlinkat(dirfd, tmp, 0);
        return r;
}

int write_atomic(int dirfd, const char *name, const void *buf, size_t len,
                 mode_t mode, unsigned flags)
{
        return write_atomic_fd(dirfd, name, buf, len, mode, flags, NULL);
}

int write_direct_fd(int dirfd, const char *name, const void *buf, size_t len,
                    mode_t mode, unsigned flags, int *ret_fd)
{
        _cleanup_close_ int fd = -1;
        int r;

        if (!write_args_valid(name, buf, len))
                return -EINVAL;
        for (int tries = 0;; tries++) {
                fd = openat(dirfd, name,
                            O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                            flags & WRITE_MODE_KEPT ? mode & 0777 : 0600);
                if (fd >= 0)
                        break;
                if (errno != EEXIST || tries >= 2 || (flags & WRITE_EXCL))
                        return -errno;
                if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                        return -errno;
        }
        r = ret_fd ? fill_open_fd(fd, buf, len, mode, flags)
                   : fill_fd(TAKE_FD(fd), buf, len, mode, flags);
        if (r < 0)
                goto fail;
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        if (flags & WRITE_SYNC_DIR)
                return fsync_dir(dirfd);
        return 0;

fail:
        unlinkat(dirfd, name, 0);
        return r;
}

int write_direct(int dirfd, const char *name, const void *buf, size_t len,
                 mode_t mode, unsigned flags)
{
        return write_direct_fd(dirfd, name, buf, len, mode, flags, NULL);
}

/* Link the unnamed file fd (O_TMPFILE) as name in dirfd. */
static int link_unnamed(int fd, int dirfd, const char *name)
{
        char path[64];

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        if (linkat(AT_FDCWD, path, dirfd, name, AT_SYMLINK_FOLLOW) == 0)
                return 0;
        if (errno != ENOENT || faccessat(AT_FDCWD, "/proc/self/fd", F_OK, 0) == 0)
                return -errno;
        /* No /proc: AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH. */
        return linkat(fd, "", dirfd, name, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

int write_linked_fd(int dirfd, const char *name, const void *buf, size_t len,
                    mode_t mode, unsigned flags, int *ret_fd)
{
        _cleanup_close_ int fd = -1;
        int r;

        if (ret_fd)
                *ret_fd = -1;
        if (!write_args_valid(name, buf, len))
                return -EINVAL;
        fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode & 0777);
        if (fd < 0) {
                /* A file system without O_TMPFILE: a temp name, then a
                 * link (which, unlike a rename, never replaces).  A sync
                 * asked for later is done now (*ret_fd -1). */
                char tmp[NAME_MAX + 1], rnd[2 * TMP_SUFFIX_BYTES + 1];
                if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
                        return -errno;
                if (tmp_suffix(rnd) < 0 ||
                    xsnprintf(tmp, sizeof(tmp), ".%.200s.%s", name, rnd) < 0)
                        return -ENAMETOOLONG;
                r = write_direct(dirfd, tmp, buf, len, mode,
                                 ret_fd ? WRITE_SYNC_FILE : flags & WRITE_SYNC_FILE);
                if (r < 0)
                        return r;
                r = linkat(dirfd, tmp, dirfd, name, 0) < 0 ? -errno : 0;
                unlinkat(dirfd, tmp, 0);
                if (r == 0 && (flags & WRITE_SYNC_DIR))
                        r = fsync_dir(dirfd);
                return r;
        }
        r = fill_open_fd(fd, buf, len, mode, flags);
        if (r < 0)
                return r;
        if (ret_fd)
                write_start(fd);
        r = link_unnamed(fd, dirfd, name);
        if (r < 0)
                return r;
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        if (flags & WRITE_SYNC_DIR)
                return fsync_dir(dirfd);
        return 0;
}

int write_linked(int dirfd, const char *name, const void *buf, size_t len,
                 mode_t mode, unsigned flags)
{
        return write_linked_fd(dirfd, name, buf, len, mode, flags, NULL);
}

struct fsync_many {
        const int *dirfds;
        const char *const *names;
        size_t n;
        int *rets;
        atomic_size_t next;
};

static int fsync_one_at(int dirfd, const char *name)
{
        int fd, r = 0;

        if (!name)
                return fsync_dir(dirfd);
        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fsync(fd) < 0)
                r = -errno;
        close(fd);
        return r;
}

static void *fsync_many_worker(void *arg)
{
        struct fsync_many *m = arg;
        size_t i;

        while ((i = atomic_fetch_add(&m->next, 1)) < m->n)
                m->rets[i] = fsync_one_at(m->dirfds[i], m->names ? m->names[i] : NULL);
        return NULL;
}

int fsync_many_at(const int *dirfds, const char *const *names, size_t n, int *rets)
{
        struct fsync_many m = { .dirfds = dirfds, .names = names, .n = n, .rets = rets };
        pthread_t th[FSYNC_MANY_THREADS];
        size_t k = 0;

        /* Threads only when there is something to share: one sync is done
         * here.  The calling thread works too; a thread that cannot be
         * started leaves its share to the others. */
        for (; n > 1 && k < n - 1 && k < FSYNC_MANY_THREADS - 1; k++)
                if (pthread_create(&th[k], NULL, fsync_many_worker, &m) != 0)
                        break;
        fsync_many_worker(&m);
        for (size_t i = 0; i < k; i++)
                pthread_join(th[i], NULL);
        for (size_t i = 0; i < n; i++)
                if (rets[i] < 0)
                        return rets[i];
        return 0;
}

ssize_t read_full(int fd, void *buf, size_t cap)
{
        size_t len = 0;

        while (len < cap) {
                ssize_t n = read(fd, (char *)buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        return (ssize_t)len;
}

/* read_all()'s loop from len bytes already in buf (cap bytes of room,
 * plus 1 + extra); buf is taken over. */
static int read_rest(int fd, size_t max, size_t extra, char *buf0, size_t len, size_t cap,
                     char **ret_buf, size_t *ret_len)
{
        _cleanup_free_ char *buf = buf0;

        /* Grow as the data comes, to one byte past max: a file of exactly
         * max bytes is fine, one more is too big. */
        while (len == cap) {
                ssize_t n;
                char *nb;

                if (cap > max)
                        return -EFBIG;
                cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
                nb = realloc(buf, cap + 1 + extra);
                if (!nb)
                        return -ENOMEM;
                buf = nb;
                n = read_full(fd, buf + len, cap - len);
                if (n < 0)
                        return (int)n;
                len += (size_t)n;
        }
        if (len > max)
                return -EFBIG;
        buf[len] = '\0';
        *ret_buf = TAKE_PTR(buf);
        if (ret_len)
                *ret_len = len;
        return 0;
}

int read_all(int fd, size_t max, size_t extra, char **ret_buf, size_t *ret_len)
{
        size_t cap = max < 4096 ? max + 1 : 4096;
        char *buf = malloc(cap + 1 + extra);
        ssize_t n;

        if (!buf)
                return -ENOMEM;
        n = read_full(fd, buf, cap);
        if (n < 0) {
                free(buf);
                return (int)n;
        }
        return read_rest(fd, max, extra, buf, (size_t)n, cap, ret_buf, ret_len);
}

int read_all_sized(int fd, size_t max, size_t size, char **ret_buf, size_t *ret_len)
{
        size_t cap = size + 1;
        char *buf;
        ssize_t n;

        if (size == 0 || size > max)
                return read_all(fd, max, 0, ret_buf, ret_len);
        buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;
        do
                n = read(fd, buf, cap);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                n = -errno;
                free(buf);
                return (int)n;
        }
        if ((size_t)n == size) {
                buf[size] = '\0';
                *ret_buf = buf;
                if (ret_len)
                        *ret_len = size;
                return 0;
        }
        /* Shorter (a read cut short, or the file shrank) or longer (it
         * grew): read on to the end as read_all() does. */
        if ((size_t)n < cap) {
                ssize_t m = read_full(fd, buf + n, cap - (size_t)n);
                if (m < 0) {
                        free(buf);
                        return (int)m;
                }
                n += m;
        }
        return read_rest(fd, max, 0, buf, (size_t)n, cap, ret_buf, ret_len);
}

DIR *opendir_at(int dirfd)
{
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;

        if (fd < 0)
                return NULL;
        d = fdopendir(fd);
        if (!d) {
                int e = errno;
                close(fd);
                errno = e;
        }
        return d;
}

/* A directory just created, and every directory above it up to as many
 * levels as path has components (mkdir -p may have made them all): synced,
 * else a power cut takes it, and all that is later put in it, away. */
static int sync_created(int fd, const char *path)
{
        int cur = fd, r = 0;

        for (const char *p = path; *p && r == 0; p++) {
                if (p != path && !(p[0] != '/' && p[-1] == '/'))
                        continue;
                r = fsync_dir(cur);
                int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (cur != fd)
                        close(cur);
                if (up < 0)
                        return -errno;
                cur = up;
        }
        if (r == 0)
                r = fsync_dir(cur);
        if (cur != fd)
                close(cur);
        return r;
}

/* Open dirfd/path as a directory, creating it (and its parents) when
 * missing.  A directory we create gets exactly mode, whatever the umask:
 * the group write bit of handoff/ is what lets agents submit.  The last
 * component is never followed: a symlink there is -ELOOP (or -ENOTDIR). */
int open_dir_at(int dirfd, const char *path, mode_t mode, int *ret, bool *ret_created)
{
        bool created = false;
        int fd, r;

        if (mkdirat(dirfd, path, mode & 0777) == 0) {
                created = true;
        } else if (errno == ENOENT) {
                r = mkdir_p_at(dirfd, path, 0750);
                if (r < 0)
                        return r;
                created = true;
        } else if (errno != EEXIST) {
                return -errno;
        }
        fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (created && fchmod(fd, mode) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        if (created) {
                r = sync_created(fd, path);
                if (r < 0) {
                        close(fd);
                        return r;
                }
        }
        *ret = fd;
        if (ret_created)
                *ret_created = created;
        return 0;
}

/* Open an existing directory for a look only (handoffd -n): nothing is
 * created; without read permission, an O_PATH fd still gives its owner
 * and mode.  -ENOENT when it is missing (the start would create it). */
int open_dir_look(int dirfd, const char *path, int *ret)
{
        int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0 && errno == EACCES)
                fd = openat(dirfd, path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret = fd;
        return 0;
}

void fd_batch_add(struct fd_batch *b, int fd)
{
        if (b->n < FD_BATCH_MAX)
                b->fd[b->n++] = fd;
        else
                close(fd);
}

static int cmp_int(const void *a, const void *b)
{
        int x = *(const int *)a, y = *(const int *)b;

        return (x > y) - (x < y);
}

void fd_batch_close(struct fd_batch *b)
{
        qsort(b->fd, b->n, sizeof(b->fd[0]), cmp_int);
        for (size_t i = 0, j; i < b->n; i = j) {
                for (j = i + 1; j < b->n && b->fd[j] == b->fd[j - 1] + 1; j++)
                        ;
                if (j - i == 1 || close_range((unsigned)b->fd[i], (unsigned)b->fd[j - 1], 0) < 0)
                        for (size_t k = i; k < j; k++)
                                close(b->fd[k]);
        }
        b->n = 0;
}
