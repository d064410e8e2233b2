/* outbox/ as a directory, shared by both its senders: outbox.c (the
 * relay's items) and a2a_out.c (the A2A remotes' items).  The directory
 * is the truth for both: at start each rebuilds its index from it, taking
 * only the items whose to_agent is its kind of remote; an item enters it
 * and leaves it for archive/ the same way from either.
 *
 * An item of outbox/ is a file of the daemon's, written from the handoff
 * it verified (its canonical bytes), never the producer's inode: she may
 * keep a descriptor of her file and write it after the check, and what is
 * sent, retried and archived must be what was verified.  The take:
 *
 *   1. outbox/<id>.json written (synced with fsync = yes), never over a
 *      name there: of two takes of one id only one wins
 *   2. the producer's file leaves handoff/ once outbox/ is synced
 *      (store_drop_source(), as a claim's does)
 *
 * After a crash between the two, the producer's file is a leftover of
 * the take: outbox/<id>.json holds its handoff and is newer; it goes
 * without a verdict, so the item is in outbox/ alone and sent once.  The
 * files are the storage's (store/store_outbox.c); this file speaks its
 * operations only. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "store.h"
#include "store_doc.h"
#include "log.h"
#include "outbox_dir.h"

int outbox_dir_take(struct spool *sp, const char *name, const struct stat *was,
                    const struct handoff *h, const char *dst)
{
        _cleanup_free_ char *own = NULL;
        const char *buf = h->canon;
        size_t len = h->canon_len;
        bool leftover;
        char q[300];
        int r;

        if (!buf) {
                r = hd_canon_dump(h->doc, NULL, &own, &len);
                if (r < 0)
                        return r;
                buf = own;
        }
        r = store_outbox_take(sp, name, was, h->id, h->doc, buf, len, dst, &leftover);
        if (leftover)
                log_info("Removed %s: in outbox/ already as %s (left by a crash)",
                         log_quote(name, q, sizeof(q)), dst);
        return r;
}

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
        store_outbox_sweep(sp);
        return q;
}

int outbox_dir_load(struct spool *sp, const char *name, int64_t now, json_t **ret,
                    hd_verdict *vd, int64_t *ret_at)
{
        return store_outbox_load(sp, name, now, ret, vd, ret_at);
}

int outbox_dir_archive(struct spool *sp, const struct store_outcome *o, int64_t at_s,
                       const struct spool_ino *src, char *name, size_t n)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int q;

        q = store_outcome_dump(o, &buf, &len);
        if (q < 0)
                return q;
        return store_outbox_archive(sp, o->id, at_s, o->from, o->to, buf, len, src, name, n);
}
