/* outbox/ as a directory, read at start by both its senders: outbox.c
 * (the relay's items) and a2a_out.c (the A2A remotes' items).  The
 * directory is the truth for both: each rebuilds its index from it, and
 * each takes only the items whose to_agent is its kind of remote. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "outbox_dir.h"

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
