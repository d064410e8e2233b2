/* The spool's names; see layout.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "layout.h"
#include "util.h"

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

        return layout_strip(name, suffix, item, sizeof(item)) == 0 &&
               fstatat(dirfd, item, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

enum layout_kind layout_classify(const char *name)
{
        if (STARTS(name, LAYOUT_PENDING))
                return LK_PENDING;
        if (STARTS(name, LAYOUT_EXPIRE))
                return LK_EXPIRE;
        if (STARTS(name, LAYOUT_CONSUME))
                return LK_CONSUME;
        if (name[0] == '.')
                return LK_DOT;
        if (layout_has_suffix(name, LAYOUT_DELIVERED) || layout_has_suffix(name, LAYOUT_OUTCOME) ||
            layout_has_suffix(name, LAYOUT_REASON))
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
        return NULL;
}
