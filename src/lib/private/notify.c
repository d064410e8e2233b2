/* sd_notify(3) by hand; see notify.h.  The protocol is the stable
 * interface between a service and its manager: a datagram on an AF_UNIX
 * socket, sent without credentials (the kernel attaches them when the
 * manager asks with SO_PASSCRED). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"

#define NOTIFY_MSG_MAX 4096     /* ours are a few hundred bytes at most */

bool notify_enabled(void)
{
        return getenv("NOTIFY_SOCKET") != NULL;
}

int notify_send(const char *msg)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = getenv("NOTIFY_SOCKET");
        _cleanup_close_ int fd = -1;
        size_t plen, mlen;
        ssize_t n;

        if (!path)
                return 0;
        if (!msg || (mlen = strlen(msg)) == 0)
                return -EINVAL;
        /* Only a path or an abstract name (other address families, such
         * as vsock, are for managers outside this host). */
        if (path[0] != '/' && path[0] != '@')
                return -EAFNOSUPPORT;
        plen = strlen(path);
        if (plen < 2)
                return -EINVAL;
        /* A path needs its NUL inside sun_path; an abstract name does not
         * have one, but is held to the same bound. */
        if (plen >= sizeof(sa.sun_path))
                return -E2BIG;
        memcpy(sa.sun_path, path, plen);
        if (sa.sun_path[0] == '@')
                sa.sun_path[0] = '\0';

        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        n = sendto(fd, msg, mlen, MSG_NOSIGNAL, (struct sockaddr *)&sa,
                   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen));
        if (n < 0)
                return -errno;
        return (size_t)n == mlen ? 1 : -EPROTO;
}

int notify_sendf(const char *fmt, ...)
{
        char msg[NOTIFY_MSG_MAX];
        va_list ap;
        int n;

        if (!notify_enabled())
                return 0;
        va_start(ap, fmt);
        n = vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        if ((size_t)n >= sizeof(msg))
                return -EMSGSIZE;
        return notify_send(msg);
}

int notify_watchdog_usec(uint64_t *ret_usec)
{
        const char *us = getenv("WATCHDOG_USEC"), *ps = getenv("WATCHDOG_PID");
        int64_t usec, pid;

        if (!us)
                return 0;
        /* A positive count of microseconds; "infinity" (UINT64_MAX) does
         * not fit and is refused like any other bad value. */
        if (parse_int64(us, 1, INT64_MAX, &usec) < 0)
                return -EINVAL;
        if (ps) {
                if (parse_int64(ps, 1, INT32_MAX, &pid) < 0)
                        return -EINVAL;
                /* Set for another process up the tree, not for us. */
                if (pid != (int64_t)getpid())
                        return 0;
        }
        *ret_usec = (uint64_t)usec;
        return 1;
}
