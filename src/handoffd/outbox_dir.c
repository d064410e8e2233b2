/* outbox/ as a directory, shared by both its senders: outbox.c (the
 * relay's items) and a2a_out.c (the A2A remotes' items).  The directory
 * is the truth for both: at start each rebuilds its index from it, taking
 * only the items whose to_agent is its kind of remote; an item sent
 * leaves it for archive/ the same way from either. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "files.h"
#include "outbox_dir.h"
#include "util.h"

int outbox_dir_each(struct spool *sp, int64_t now, outbox_dir_fn *fn, void *ctx)
{
        json_t *set = json_object(), *v;
        const char *k;
        int q;

        if (!set)
                return -ENOMEM;
        q = spool_list(sp, SD_OUTBOX, set);
        json_object_foreach(set, k, v) {
                size_t l = strlen(k);
                char id[NAME_MAX + 1];
                if (l < 6 || strcmp(k + l - 5, ".json") || l - 5 > NAME_MAX)
                        continue;
                memcpy(id, k, l - 5);
                id[l - 5] = '\0';
                int r = fn(ctx, k, id, now);
                if (r < 0) {
                        q = r;
                        break;
                }
        }
        json_decref(set);
        return q;
}

int outbox_dir_load(struct spool *sp, const char *name, int64_t now, json_t **ret,
                    hd_verdict *vd, int64_t *ret_at)
{
        hd_limits lim = { .max_size = sp->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        struct stat st;
        int r;

        r = hd_load_at(sp->fd[SD_OUTBOX], name, &lim, ret, vd);
        if (r < 0)
                return r;
        *ret_at = fstatat(sp->fd[SD_OUTBOX], name, &st, AT_SYMLINK_NOFOLLOW) == 0
                ? (int64_t)st.st_ctim.tv_sec * 1000000LL + st.st_ctim.tv_nsec / 1000 : now;
        return 0;
}

int outbox_dir_archive(struct spool *sp, const char *id, json_t *o, int64_t at_s,
                       const char *from, const char *to, char *name, size_t n)
{
        char src[NAME_MAX + 1];
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int q;

        if (!o)
                return -ENOMEM;
        q = xsnprintf(src, sizeof(src), "%s.json", id);
        if (q >= 0)
                q = hd_canon_dump(o, NULL, &buf, &len);
        json_decref(o);
        if (q < 0)
                return q;
        q = spool_id_mark(sp, id);
        if (q < 0)
                return q;
        return spool_archive_from(sp, SD_OUTBOX, src, at_s, from, to, id, buf, len, name, n);
}
