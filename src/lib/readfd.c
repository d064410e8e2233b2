/* Safe open and bounded read of an untrusted spool file by fd, for callers
 * that must hold the fd (a lock) across the decision. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "files.h"
#include "util.h"

int hd_open_at(int dirfd, const char *name, int *ret_fd, hd_verdict *v)
{
        int fd;

        verdict_clear(v);
        /* O_NONBLOCK: a FIFO must not wait for a writer; O_NOFOLLOW: a
         * symlink could point anywhere; O_NOCTTY: never a controlling tty. */
        fd = openat(dirfd, name,
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                if (errno == ELOOP)
                        return verdict(v, HD_R_NOT_REGULAR, "'%s' is a symbolic link", name);
                /* A socket cannot be opened at all. */
                if (errno == ENXIO)
                        return verdict(v, HD_R_NOT_REGULAR, "'%s' is not a regular file", name);
                return -errno;
        }
        *ret_fd = fd;
        return 0;
}

int hd_read_fd(int fd, const char *name, size_t max_size, char **ret_buf,
               size_t *ret_len, hd_verdict *v)
{
        struct stat st;

        verdict_clear(v);
        if (fstat(fd, &st) < 0)
                return -errno;
        return read_fd_stat(fd, &st, name, max_size, ret_buf, ret_len, v);
}

int read_fd_stat(int fd, const struct stat *sp, const char *name, size_t max_size,
                 char **ret_buf, size_t *ret_len, hd_verdict *v)
{
        _cleanup_free_ char *buf = NULL;
        const struct stat st = *sp;
        size_t len = 0;
        int r;

        if (max_size == 0)
                max_size = HD_DEFAULT_MAX_SIZE;
        verdict_clear(v);
        /* Never read anything but a regular file: a FIFO or device could
         * block or never end. */
        if (!S_ISREG(st.st_mode))
                return verdict(v, HD_R_NOT_REGULAR, "'%s' is not a regular file (mode %06o)",
                               name, (unsigned)st.st_mode);
        /* No name left: removed since it was opened (another consumer or
         * claimer won), which is gone, not bad. */
        if (st.st_nlink == 0)
                return -ENOENT;
        /* A second name elsewhere means someone else can still change what
         * we are about to trust. */
        if (st.st_nlink != 1)
                return verdict(v, HD_R_HARDLINK, "'%s' has %ju links", name,
                               (uintmax_t)st.st_nlink);
        if ((uintmax_t)st.st_size > max_size)
                return verdict(v, HD_R_TOO_LARGE, "'%s' is %jd bytes, limit %zu", name,
                               (intmax_t)st.st_size, max_size);
        /* st_size is only a hint: the file may still grow, some report 0. */
        r = read_all_sized(fd, max_size, (size_t)st.st_size, &buf, &len);
        if (r == -EFBIG)
                return verdict(v, HD_R_TOO_LARGE, "'%s' grew past the limit of %zu bytes",
                               name, max_size);
        if (r < 0)
                return r;
        *ret_buf = TAKE_PTR(buf);
        if (ret_len)
                *ret_len = len;
        return 0;
}
