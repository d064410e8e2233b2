/* The spool's names; see layout.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "files.h"
#include "handoff.h"
#include "layout.h"
#include "util.h"

/* archive/NAME.outcome is written with write_atomic(): NAME, its suffix
 * and the temp name's additions all fit NAME_MAX. */
_Static_assert(LAYOUT_ARCHIVE_NAME_MAX + sizeof(LAYOUT_OUTCOME) - 1 <= WRITE_ATOMIC_NAME_MAX,
               "an archive name's .outcome must fit write_atomic()'s temp name");

_Static_assert(LAYOUT_ARCHIVE_NAME_MAX + sizeof(LAYOUT_RESULT) - 1 <= WRITE_ATOMIC_NAME_MAX,
               "an archive name's .result must fit write_atomic()'s temp name");

#define STARTS(s, p) (!strncmp((s), (p), sizeof(p) - 1))

bool layout_has_suffix(const char *s, const char *suffix)
{
        size_t l = strlen(s), m = strlen(suffix);

        return l > m && !strcmp(s + l - m, suffix);
}

bool layout_is_sidecar_at(int dirfd, const char *name, const char *suffix)
{
        char item[NAME_MAX + 1];
        struct stat st;

        if (!strcmp(suffix, LAYOUT_OUTCOME) && layout_has_suffix(name, LAYOUT_RESULT))
                suffix = LAYOUT_RESULT;
        return layout_strip(name, suffix, item, sizeof(item)) == 0 &&
               fstatat(dirfd, item, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

enum layout_kind layout_classify(const char *name)
{
        if (STARTS(name, LAYOUT_PENDING))
                return LK_PENDING;
        if (STARTS(name, LAYOUT_EXPIRE))
                return LK_EXPIRE;
        if (STARTS(name, LAYOUT_CANCEL))
                return LK_CANCEL;
        if (STARTS(name, LAYOUT_CONSUME))
                return LK_CONSUME;
        if (STARTS(name, LAYOUT_RESULT_IN))
                return LK_RESULT;
        if (STARTS(name, LAYOUT_REFUSED))
                return LK_REFUSED;
        if (name[0] == '.')
                return LK_DOT;
        if (layout_has_suffix(name, LAYOUT_DELIVERED) || layout_has_suffix(name, LAYOUT_OUTCOME) ||
            layout_has_suffix(name, LAYOUT_RESULT) || layout_has_suffix(name, LAYOUT_REASON))
                return LK_SIDECAR;
        return LK_ITEM;
}

int layout_prefixed(const char *prefix, const char *name, char *buf, size_t n)
{
        return xsnprintf(buf, n, "%s%s", prefix, name) < 0 ? -ENAMETOOLONG : 0;
}

int layout_suffixed(const char *name, const char *suffix, char *buf, size_t n)
{
        return xsnprintf(buf, n, "%s%s", name, suffix) < 0 ? -ENAMETOOLONG : 0;
}

int layout_strip(const char *name, const char *suffix, char *buf, size_t n)
{
        size_t l = strlen(name), m = strlen(suffix);

        if (!layout_has_suffix(name, suffix))
                return -EINVAL;
        if (l - m >= n)
                return -ENAMETOOLONG;
        memcpy(buf, name, l - m);
        buf[l - m] = '\0';
        return 0;
}

int layout_consume_name(int pid, const char *rnd, const char *name, char *buf, size_t n)
{
        return xsnprintf(buf, n, LAYOUT_CONSUME "%d.%s.%s", pid, rnd, name) < 0
                ? -ENAMETOOLONG : 0;
}

const char *layout_consume_target(const char *name)
{
        const char *p;

        if (!STARTS(name, LAYOUT_CONSUME))
                return NULL;
        p = strchr(name + sizeof(LAYOUT_CONSUME) - 1, '.');    /* after PID */
        p = p ? strchr(p + 1, '.') : NULL;                      /* after RAND */
        return p ? p + 1 : NULL;
}

const char *layout_hidden_target(const char *name)
{
        if (STARTS(name, LAYOUT_PENDING))
                return name + sizeof(LAYOUT_PENDING) - 1;
        if (STARTS(name, LAYOUT_EXPIRE))
                return name + sizeof(LAYOUT_EXPIRE) - 1;
        if (STARTS(name, LAYOUT_CANCEL))
                return name + sizeof(LAYOUT_CANCEL) - 1;
        return NULL;
}

/* Whether id already names the two agents: "FROM-TO-..." or, as the real
 * writer makes them, "UNIXTIME-FROM-TO-...". */
static bool id_names_agents(const char *id, const char *from, const char *to)
{
        size_t lf = strlen(from), lt = strlen(to);
        const char *p = id + strspn(id, "0123456789");

        if (p > id && *p == '-' && !strncmp(p + 1, from, lf) && p[1 + lf] == '-' &&
            !strncmp(p + 2 + lf, to, lt) && p[2 + lf + lt] == '-')
                return true;
        return !strncmp(id, from, lf) && id[lf] == '-' && !strncmp(id + lf + 1, to, lt) &&
               id[lf + 1 + lt] == '-';
}

int layout_archive_name(int64_t ts, const char *from, const char *to, const char *id,
                        unsigned n, char *buf, size_t size)
{
        unsigned char hash[crypto_generichash_BYTES_MIN];
        /* the whole stem: a time of 20 characters at most, two agent
         * names of 64 and an id of 128, more than a name may be */
        char stem[20 + 1 + 64 + 1 + 64 + 1 + 128 + 1], tilde[16] = "", hex[2 * sizeof(hash) + 1];
        size_t fixed, avail, lf, lt, kf, kt;
        int len;

        if (!hd_id_valid(id) || n >= LAYOUT_ARCHIVE_TRIES)
                return -EINVAL;
        from = from && hd_agent_valid(from) ? from : "unknown";
        to = to && hd_agent_valid(to) ? to : "unknown";
        if (n > 0 && xsnprintf(tilde, sizeof(tilde), "~%u", n) < 0)
                return -EINVAL;
        if (id_names_agents(id, from, to))
                len = xsnprintf(stem, sizeof(stem), "%lld-%s", (long long)ts, id);
        else
                len = xsnprintf(stem, sizeof(stem), "%lld-%s-%s-%s", (long long)ts, from, to, id);
        if (len < 0)
                return len;
        if ((size_t)len + strlen(tilde) + 5 <= LAYOUT_ARCHIVE_NAME_MAX)
                return xsnprintf(buf, size, "%s%s.json", stem, tilde) < 0 ? -ENAMETOOLONG : 0;

        /* Too long: from and to cut, as evenly as their lengths allow,
         * to what is left beside the time, the hash and the whole id. */
        crypto_generichash(hash, sizeof(hash), (const unsigned char *)stem, (size_t)len, NULL, 0);
        sodium_bin2hex(hex, sizeof(hex), hash, sizeof(hash));
        len = xsnprintf(stem, sizeof(stem), "%lld", (long long)ts);
        if (len < 0)
                return len;
        fixed = (size_t)len + 4 + 8 + strlen(id) + strlen(tilde) + 5;   /* 4 '-', hash */
        if (fixed + 2 > LAYOUT_ARCHIVE_NAME_MAX)
                return -ENAMETOOLONG;
        avail = LAYOUT_ARCHIVE_NAME_MAX - fixed;
        lf = strlen(from);
        lt = strlen(to);
        if (lf <= avail / 2)
                kf = lf;
        else if (lt <= avail - avail / 2)
                kf = avail - lt < lf ? avail - lt : lf;
        else
                kf = avail / 2;
        kt = avail - kf < lt ? avail - kf : lt;
        return xsnprintf(buf, size, "%s-%.*s-%.*s-%.8s-%s%s.json", stem, (int)kf, from,
                         (int)kt, to, hex, id, tilde) < 0 ? -ENAMETOOLONG : 0;
}

size_t layout_base_len(const char *name)
{
        size_t l = strlen(name), i = l;

        while (i > 0 && isdigit((unsigned char)name[i - 1]))
                i--;
        if (i < l && i > 0 && name[i - 1] == '~')
                return i - 1;
        return l;
}

bool layout_archive_is(const char *name, const char *id)
{
        size_t il = strlen(id), b;
        char stem[NAME_MAX + 1];

        if (layout_strip(name, ".json", stem, sizeof(stem)) < 0)
                return false;
        b = layout_base_len(stem);
        return b > il && stem[b - il - 1] == '-' && !strncmp(stem + b - il, id, il);
}
