/* [remote NAME] a2a: the checks of its URL and token file, shared by the
 * config reader (handoffd -n) and the A2A sender (src/a2a/), which reads
 * the token at each request (a token rotated on disk is used at once). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

/* The host part of http://HOST[:PORT]/...: a loopback name or address. */
static bool loopback(const char *host, size_t n)
{
        static const char *const names[] = { "localhost", "[::1]" };

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (n == strlen(names[i]) && !strncasecmp(host, names[i], n))
                        return true;
        /* 127.0.0.0/8, digits and dots only */
        if (n < 9 || strncmp(host, "127.", 4))
                return false;
        for (size_t i = 4; i < n; i++)
                if (!(host[i] == '.' || (host[i] >= '0' && host[i] <= '9')))
                        return false;
        return true;
}

int config_a2a_url_check(const char *url, const char **why)
{
        const char *h, *end;
        bool plain;

        if (!strncmp(url, "https://", 8)) {
                plain = false;
                h = url + 8;
        } else if (!strncmp(url, "http://", 7)) {
                plain = true;
                h = url + 7;
        } else {
                *why = "is not an https:// URL";
                return -EINVAL;
        }
        for (const char *p = url; *p; p++)
                if ((unsigned char)*p <= ' ' || *p == 0x7f) {
                        *why = "holds a space or a control character";
                        return -EINVAL;
                }
        if (strlen(url) > 2048) {
                *why = "is longer than 2048 bytes";
                return -EINVAL;
        }
        if (*h == '[') {
                end = strchr(h, ']');
                end = end ? end + 1 : h;
        } else {
                end = h + strcspn(h, ":/?#");
        }
        if (end == h || strchr(url, '@')) {
                *why = "has no host, or credentials in it (use token_file)";
                return -EINVAL;
        }
        if (plain && !loopback(h, (size_t)(end - h))) {
                *why = "is plain http:// to a host that is not loopback: the bearer token "
                       "would cross the network in clear (use https://)";
                return -EINVAL;
        }
        return 0;
}

static bool b64token_char(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               strchr("-._~+/", c);
}

int config_a2a_token_read(const char *path, char *buf, size_t n, const char **why)
{
        char tok[CONFIG_A2A_TOKEN_MAX + 2];
        struct stat st;
        ssize_t got;
        size_t len, i;
        int fd, r = 0;

        *why = NULL;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                *why = "not a regular file";
                r = -EINVAL;
                goto out;
        }
        if (st.st_mode & 0044) {
                *why = "readable by its group or others (chmod 600)";
                r = -EPERM;
                goto out;
        }
        got = read(fd, tok, sizeof(tok) - 1);
        if (got < 0) {
                r = -errno;
                goto out;
        }
        len = (size_t)got;
        if (len > 0 && tok[len - 1] == '\n')
                len--;
        if (len > CONFIG_A2A_TOKEN_MAX) {
                *why = "longer than 4096 bytes";
                r = -E2BIG;
                goto out;
        }
        /* b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
        for (i = 0; i < len && b64token_char(tok[i]); i++)
                ;
        while (i > 0 && i < len && tok[i] == '=')
                i++;
        if (len == 0 || i != len) {
                *why = "not one line of bearer token characters (RFC 6750 b64token)";
                r = -EINVAL;
                goto out;
        }
        if (buf) {
                if (len >= n) {
                        r = -ENOBUFS;
                        goto out;
                }
                memcpy(buf, tok, len);
                buf[len] = '\0';
        }
out:
        explicit_bzero(tok, sizeof(tok));
        close(fd);
        return r;
}
