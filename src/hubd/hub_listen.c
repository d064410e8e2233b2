/* Where handoff-hubd listens: the socket systemd passed (LISTEN_FDS and
 * LISTEN_PID read by hand, as sd_listen_fds(3) describes), or one opened
 * from [hub] listen: HOST:PORT, [V6ADDR]:PORT or unix:PATH.  Whether only
 * this host can reach it decides whether plain HTTP is allowed. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "hub.h"
#include "util.h"

#define LISTEN_FDS_START 3
#define LISTEN_BACKLOG 512

static bool addr_loopback(const struct sockaddr *sa)
{
        if (sa->sa_family == AF_UNIX)
                return true;
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
                return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        }
        if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
                if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
                        return true;
                if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
                        return in6->sin6_addr.s6_addr[12] == 127;
        }
        return false;
}

/* The socket systemd passed: 0 when there is none, 1 with *ret_fd. */
static int listen_activated(int *ret_fd, char *err, size_t errlen)
{
        const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
        int64_t p, n;
        int fd = LISTEN_FDS_START, type = 0;
        socklen_t tl = sizeof(type);

        if (!pid || !fds)
                return 0;
        if (parse_int64(pid, 1, INT32_MAX, &p) < 0 || p != getpid())
                return 0;
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
        if (parse_int64(fds, 0, 1024, &n) < 0 || n != 1) {
                snprintf(err, errlen, "LISTEN_FDS=%s: expected exactly one socket", fds);
                return -EINVAL;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
            type != SOCK_STREAM) {
                snprintf(err, errlen, "the passed fd %d is not a stream socket", fd);
                return -ENOTSOCK;
        }
        if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return -errno;
        *ret_fd = fd;
        return 1;
}

static int listen_unix(const char *path, int *ret_fd, char *err, size_t errlen)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -1;
        struct stat st;

        if (strlen(path) >= sizeof(sa.sun_path)) {
                snprintf(err, errlen, "[hub] listen: unix:%s: path too long", path);
                return -ENAMETOOLONG;
        }
        memcpy(sa.sun_path, path, strlen(path));
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* a socket left by an earlier run is replaced; anything else is not */
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
                unlink(path);
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            listen(fd, LISTEN_BACKLOG) < 0) {
                int r = -errno;
                snprintf(err, errlen, "[hub] listen: unix:%s: %s", path, strerror(-r));
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int listen_inet(const char *spec, int *ret_fd, bool *ret_loopback,
                       char *err, size_t errlen)
{
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        struct addrinfo *ai = NULL;
        char host[256];
        const char *port, *colon;
        _cleanup_close_ int fd = -1;
        int one = 1, r;

        if (spec[0] == '[') {
                const char *end = strchr(spec, ']');
                if (!end || end[1] != ':' || (size_t)(end - spec - 1) >= sizeof(host))
                        goto bad;
                memcpy(host, spec + 1, (size_t)(end - spec - 1));
                host[end - spec - 1] = '\0';
                port = end + 2;
        } else {
                colon = strrchr(spec, ':');
                if (!colon || colon == spec || strchr(spec, ':') != colon ||
                    (size_t)(colon - spec) >= sizeof(host))
                        goto bad;
                memcpy(host, spec, (size_t)(colon - spec));
                host[colon - spec] = '\0';
                port = colon + 1;
        }
        if (!*port || strspn(port, "0123456789") != strlen(port))
                goto bad;
        r = getaddrinfo(host, port, &hints, &ai);
        if (r != 0) {
                snprintf(err, errlen, "[hub] listen: %s: %s", spec, gai_strerror(r));
                return -EADDRNOTAVAIL;
        }
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                r = -errno;
                goto out;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
            listen(fd, LISTEN_BACKLOG) < 0) {
                r = -errno;
                goto out;
        }
        *ret_loopback = addr_loopback(ai->ai_addr);
        *ret_fd = TAKE_FD(fd);
        r = 0;
out:
        if (r < 0)
                snprintf(err, errlen, "[hub] listen: %s: %s", spec, strerror(-r));
        freeaddrinfo(ai);
        return r;
bad:
        snprintf(err, errlen, "[hub] listen: '%s' is not HOST:PORT, [ADDR]:PORT or unix:PATH",
                 spec);
        return -EINVAL;
}

int hub_listen_open(const char *spec, int *ret_fd, bool *ret_loopback,
                    bool *ret_unix, bool *ret_activated, char *err,
                    size_t errlen)
{
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int r, fd = -1;

        *ret_activated = false;
        r = listen_activated(&fd, err, errlen);
        if (r < 0)
                return r;
        if (r > 0) {
                if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
                        return -errno;
                *ret_fd = fd;
                *ret_unix = ss.ss_family == AF_UNIX;
                *ret_loopback = addr_loopback((struct sockaddr *)&ss);
                *ret_activated = true;
                return 0;
        }
        if (!spec) {
                snprintf(err, errlen, "[hub] listen is not set and no socket was passed");
                return -EINVAL;
        }
        if (!strncmp(spec, "unix:", 5)) {
                *ret_unix = *ret_loopback = true;
                return listen_unix(spec + 5, ret_fd, err, errlen);
        }
        *ret_unix = false;
        return listen_inet(spec, ret_fd, ret_loopback, err, errlen);
}

int hub_listen_check(const char *spec, bool *ret_loopback, char *err, size_t errlen)
{
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        struct sockaddr_un sa;
        struct addrinfo *ai = NULL;
        const char *port, *end, *h0 = spec;
        char host[256];
        size_t n;
        int r;

        if (!strncmp(spec, "unix:", 5)) {
                if (strlen(spec + 5) >= sizeof(sa.sun_path)) {
                        snprintf(err, errlen, "[hub] listen: %s: path too long", spec);
                        return -ENAMETOOLONG;
                }
                *ret_loopback = true;
                return 0;
        }
        /* the forms listen_inet() takes */
        if (spec[0] == '[') {
                end = strchr(spec, ']');
                n = end ? (size_t)(end - spec - 1) : 0;
                port = end && end[1] == ':' ? end + 2 : NULL;
                h0 = spec + 1;
        } else {
                end = strrchr(spec, ':');
                n = end ? (size_t)(end - spec) : 0;
                port = end && end != spec && strchr(spec, ':') == end ? end + 1 : NULL;
        }
        if (!port || n >= sizeof(host) || !*port || strspn(port, "0123456789") != strlen(port)) {
                snprintf(err, errlen, "[hub] listen: '%s' is not HOST:PORT, [ADDR]:PORT or "
                         "unix:PATH", spec);
                return -EINVAL;
        }
        memcpy(host, h0, n);
        host[n] = '\0';
        r = getaddrinfo(host, port, &hints, &ai);
        if (r != 0) {
                snprintf(err, errlen, "[hub] listen: %s: %s", host, gai_strerror(r));
                return -EADDRNOTAVAIL;
        }
        *ret_loopback = addr_loopback(ai->ai_addr);
        freeaddrinfo(ai);
        return 0;
}
