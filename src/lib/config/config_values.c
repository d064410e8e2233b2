/* handoffd.conf's values: a boolean, a number with a unit (a size, a
 * duration), and the setters of a string and of the role list.  A parser
 * returns 0 or -EINVAL/-ERANGE; the caller says the error of its line. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_values.h"

int config_parse_bool(const char *s, bool *ret)
{
        if (!strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "on") ||
            !strcmp(s, "1"))
                *ret = true;
        else if (!strcmp(s, "no") || !strcmp(s, "false") ||
                 !strcmp(s, "off") || !strcmp(s, "0"))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

/* A number with an optional one-letter unit from units[] (letter, factor). */
static int parse_unit(const char *s, const char *letters,
                      const uint64_t *factors, uint64_t max, uint64_t *ret)
{
        char *end;
        unsigned long long x;
        uint64_t f = 1;

        if (!s || !isdigit((unsigned char)*s))
                return -EINVAL;
        errno = 0;
        x = strtoull(s, &end, 10);
        if (errno)
                return -ERANGE;
        if (*end) {
                const char *p = strchr(letters, *end);
                if (!p || end[1])
                        return -EINVAL;
                f = factors[p - letters];
        }
        if (x > max / f)
                return -ERANGE;
        *ret = x * f;
        return 0;
}

int config_parse_size(const char *s, uint64_t *ret)
{
        static const uint64_t f[] = { 1024, 1024, 1024 * 1024, 1024 * 1024,
                                      1024ULL * 1024 * 1024,
                                      1024ULL * 1024 * 1024 };
        return parse_unit(s, "kKMmGg", f, INT64_MAX, ret);
}

int config_parse_duration(const char *s, int64_t *ret)
{
        static const uint64_t f[] = { 1, 60, 3600, 86400, 604800 };
        uint64_t x;
        int r = parse_unit(s, "smhdw", f, INT32_MAX, &x);

        if (r < 0)
                return r;
        *ret = (int64_t)x;
        return 0;
}

int config_set_str(char **dst, const char *v)
{
        char *s = strdup(v);
        if (!s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

int config_set_roles(struct config *c, const char *v)
{
        char *copy = strdup(v), *save = NULL, *tok;
        size_t n = 0;
        char **roles;

        if (!copy)
                return -ENOMEM;
        roles = calloc(strlen(v) / 2 + 2, sizeof(char *));
        if (!roles) {
                free(copy);
                return -ENOMEM;
        }
        for (tok = strtok_r(copy, ", \t", &save); tok;
             tok = strtok_r(NULL, ", \t", &save))
                roles[n++] = strdup(tok);
        free(copy);
        if (n == 0) {
                free(roles);
                return -EINVAL;
        }
        if (c->roles)
                for (char **p = c->roles; *p; p++)
                        free(*p);
        free(c->roles);
        c->roles = roles;
        return 0;
}
