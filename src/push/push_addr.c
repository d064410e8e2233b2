/* Where a webhook may be (A2A 1.0 section 13.2): a public address, or
 * one [hub] push_allow names.  The hub judges a config's URL when it is
 * made; handoff-push judges again each address it connects to, since a
 * name may resolve elsewhere by then. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "push_wire.h"

static int cidr_parse(const char *w, struct push_cidr *c)
{
        char a[64];
        const char *slash = strchr(w, '/');
        size_t n = slash ? (size_t)(slash - w) : strlen(w);
        unsigned max;
        char *end;

        if (n == 0 || n >= sizeof(a))
                return -EINVAL;
        memcpy(a, w, n);
        a[n] = '\0';
        memset(c, 0, sizeof(*c));
        if (inet_pton(AF_INET, a, c->addr) == 1)
                c->family = AF_INET, max = 32;
        else if (inet_pton(AF_INET6, a, c->addr) == 1)
                c->family = AF_INET6, max = 128;
        else
                return -EINVAL;
        c->bits = max;
        if (slash) {
                unsigned long b;
                if (!slash[1] || slash[1] < '0' || slash[1] > '9')
                        return -EINVAL;
                b = strtoul(slash + 1, &end, 10);
                if (*end || b > max)
                        return -EINVAL;
                c->bits = (unsigned)b;
        }
        return 0;
}

int push_allow_parse(const char *spec, struct push_allow *ret, char *bad, size_t bn)
{
        const char *p = spec ? spec : "";

        ret->n = 0;
        while (*p) {
                char w[80];
                size_t n = strcspn(p, ", \t");
                if (n == 0) {
                        p++;
                        continue;
                }
                snprintf(w, sizeof(w), "%.*s", (int)(n < sizeof(w) - 1 ? n : sizeof(w) - 1), p);
                if (n >= sizeof(w) || ret->n == PUSH_ALLOW_MAX ||
                    cidr_parse(w, &ret->cidr[ret->n]) < 0) {
                        snprintf(bad, bn, "'%s'%s", w, ret->n == PUSH_ALLOW_MAX
                                 ? ": more than 32 CIDRs" : " is not a CIDR");
                        return -EINVAL;
                }
                ret->n++;
                p += n;
        }
        return 0;
}

static bool in_cidr(const unsigned char *a, const unsigned char *net, unsigned bits)
{
        unsigned whole = bits / 8, rest = bits % 8;

        if (memcmp(a, net, whole))
                return false;
        return !rest || ((a[whole] ^ net[whole]) & (0xff << (8 - rest)) & 0xff) == 0;
}

/* What no webhook of the internet is at: RFC 6890's special ranges that
 * reach this host, its networks or no one. */
static bool v4_special(const unsigned char *a)
{
        static const struct { unsigned char net[4]; unsigned bits; } r[] = {
                { { 0, 0, 0, 0 }, 8 }, { { 10, 0, 0, 0 }, 8 }, { { 100, 64, 0, 0 }, 10 },
                { { 127, 0, 0, 0 }, 8 }, { { 169, 254, 0, 0 }, 16 }, { { 172, 16, 0, 0 }, 12 },
                { { 192, 0, 0, 0 }, 24 }, { { 192, 168, 0, 0 }, 16 }, { { 198, 18, 0, 0 }, 15 },
                { { 224, 0, 0, 0 }, 4 }, { { 240, 0, 0, 0 }, 4 },
        };
        for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
                if (in_cidr(a, r[i].net, r[i].bits))
                        return true;
        return false;
}

static bool v6_special(const unsigned char *a)
{
        static const unsigned char zero[16], one[16] = { [15] = 1 };

        return !memcmp(a, zero, 16) || !memcmp(a, one, 16) ||
               (a[0] & 0xfe) == 0xfc ||                         /* fc00::/7 ULA */
               (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) ||       /* fe80::/10 */
               (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) ||       /* fec0::/10 */
               a[0] == 0xff ||                                  /* multicast */
               (a[0] == 0x01 && !memcmp(a + 1, zero, 7)) ||     /* 100::/64 discard */
               (a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b); /* NAT64 */
}

bool push_addr_allowed(const struct push_allow *allow, const struct sockaddr *sa)
{
        static const unsigned char mapped[12] = { [10] = 0xff, [11] = 0xff };
        const unsigned char *a;
        int family = sa->sa_family;
        bool special;

        if (family == AF_INET) {
                a = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
        } else if (family == AF_INET6) {
                a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
                if (!memcmp(a, mapped, 12)) {
                        a += 12;
                        family = AF_INET;
                }
        } else {
                return false;
        }
        special = family == AF_INET ? v4_special(a) : v6_special(a);
        if (!special)
                return true;
        for (size_t i = 0; allow && i < allow->n; i++)
                if (allow->cidr[i].family == family &&
                    in_cidr(a, allow->cidr[i].addr, allow->cidr[i].bits))
                        return true;
        return false;
}

int push_url_split(const char *url, bool *ret_tls, char host[PUSH_HOST_MAX + 1],
                   unsigned *ret_port)
{
        const char *p, *end;
        unsigned long port;
        size_t n;
        char *e;

        if (!url || strlen(url) > PUSH_URL_MAX)
                return -EINVAL;
        for (p = url; *p; p++)
                if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
                        return -EINVAL;
        if (!strncmp(url, "https://", 8))
                *ret_tls = true, p = url + 8, port = 443;
        else if (!strncmp(url, "http://", 7))
                *ret_tls = false, p = url + 7, port = 80;
        else
                return -EINVAL;
        end = p + strcspn(p, "/?#");
        if (memchr(p, '@', (size_t)(end - p)))
                return -EINVAL;         /* credentials belong in authentication */
        if (*p == '[') {
                const char *close = memchr(p, ']', (size_t)(end - p));
                if (!close)
                        return -EINVAL;
                n = (size_t)(close - p - 1);
                if (n == 0 || n > PUSH_HOST_MAX)
                        return -EINVAL;
                memcpy(host, p + 1, n);
                p = close + 1;
        } else {
                const char *colon = memchr(p, ':', (size_t)(end - p));
                const char *he = colon ? colon : end;
                n = (size_t)(he - p);
                if (n == 0 || n > PUSH_HOST_MAX)
                        return -EINVAL;
                memcpy(host, p, n);
                p = he;
        }
        host[n] = '\0';
        if (p < end && *p == ':') {
                if (p + 1 == end || p[1] < '0' || p[1] > '9')
                        return -EINVAL;
                port = strtoul(p + 1, &e, 10);
                if (e != end || port == 0 || port > 65535)
                        return -EINVAL;
        } else if (p != end) {
                return -EINVAL;
        }
        *ret_port = (unsigned)port;
        return 0;
}
