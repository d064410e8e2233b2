/* Consume a bootstrap, agent side: of two consumers exactly one gets it.
 * The file is taken by renaming it to a private dot-name first (the daemon
 * and other consumers ignore dot-names), read, then deleted.  Freshness is
 * checked before taking, so a stale bootstrap is left for the sweeper. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handoff.h"
#include "files.h"
#include "util.h"

#define CONSUME_SKEW_USEC (30 * 1000000LL)

int bootstrap_check(const json_t *b, int64_t window_s, int64_t now,
                           int64_t *ret_at)
{
        const char *at = json_string_value(json_object_get(b, "accepted_at"));
        const char *src = json_string_value(json_object_get(b, "source"));
        const char *ctx = json_string_value(json_object_get(b, "resume_context"));
        int64_t t;

        if (!src || strcmp(src, "voice_handoff") || !ctx || !*ctx)
                return -EBADMSG;
        /* Missing or invalid accepted_at is a refusal, never "fresh". */
        if (!at || hd_time_parse(at, &t) < 0)
                return -EBADMSG;
        if (ret_at)
                *ret_at = t;
        if (now - t > window_s * 1000000LL || t - now > CONSUME_SKEW_USEC)
                return -ESTALE;
        return 0;
}

static int take(int dirfd, const char *name, int64_t window_s, int64_t now,
                json_t **ret)
{
        _cleanup_json_ json_t *b = NULL, *mine = NULL;
        char priv[NAME_MAX + 1], rnd[9];
        hd_verdict v;
        int r;

        r = hd_load_at(dirfd, name, NULL, &b, &v);
        if (r < 0)
                return r;
        r = bootstrap_check(b, window_s, now, NULL);
        if (r < 0)
                return r;
        snprintf(rnd, sizeof(rnd), "%08x", (unsigned)random() ^ (unsigned)getpid());
        if (xsnprintf(priv, sizeof(priv), ".consume.%d.%s.%s", (int)getpid(),
                      rnd, name) < 0)
                return -ENAMETOOLONG;
        if (renameat(dirfd, name, dirfd, priv) < 0)
                return -errno;  /* ENOENT: another consumer won */
        r = hd_load_at(dirfd, priv, NULL, &mine, &v);
        if (r == 0 && unlinkat(dirfd, priv, 0) < 0)
                r = -errno;
        if (r < 0)
                return r;
        *ret = TAKE_PTR(mine);
        return 0;
}

struct cand {
        char *name;
        int64_t at;
};

static int cand_cmp(const void *a, const void *b)
{
        const struct cand *x = a, *y = b;
        if (x->at != y->at)
                return x->at < y->at ? -1 : 1;
        return strcmp(x->name, y->name);
}

int hd_consume(int dirfd, const char *handoff_id, int64_t window_s,
               int64_t now, json_t **ret)
{
        struct cand *c = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *d;
        int r;

        if (handoff_id) {
                char name[NAME_MAX + 1];
                if (!hd_id_valid(handoff_id))
                        return -EINVAL;
                r = hd_bootstrap_name(handoff_id, name, sizeof(name));
                if (r < 0)
                        return r;
                return take(dirfd, name, window_s, now, ret);
        }

        d = opendir_at(dirfd);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                _cleanup_json_ json_t *b = NULL;
                size_t l = strlen(de->d_name);
                hd_verdict v;
                int64_t at;

                if (de->d_name[0] == '.' || l < 6 ||
                    strcmp(de->d_name + l - 5, ".json"))
                        continue;
                if (hd_load_at(dirfd, de->d_name, NULL, &b, &v) < 0 ||
                    bootstrap_check(b, window_s, now, &at) < 0)
                        continue;
                if (n == cap) {
                        struct cand *t = realloc(c, (cap = cap ? cap * 2 : 16) * sizeof(*c));
                        if (!t) {
                                r = -ENOMEM;
                                goto out;
                        }
                        c = t;
                }
                c[n].name = strdup(de->d_name);
                c[n].at = at;
                if (!c[n].name) {
                        r = -ENOMEM;
                        goto out;
                }
                n++;
        }
        if (n > 1)
                qsort(c, n, sizeof(*c), cand_cmp);
        r = -ENOENT;
        for (size_t i = 0; i < n && r < 0; i++) {
                r = take(dirfd, c[i].name, window_s, now, ret);
                if (r < 0 && r != -ENOENT && r != -ESTALE && r != -EBADMSG)
                        break;
        }
        if (r == -ESTALE || r == -EBADMSG)
                r = -ENOENT;
out:
        for (size_t i = 0; i < n; i++)
                free(c[i].name);
        free(c);
        closedir(d);
        return r;
}
