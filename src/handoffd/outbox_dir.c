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
 * without a verdict, so the item is in outbox/ alone and sent once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "store_doc.h"
#include "files.h"
#include "log.h"
#include "outbox_dir.h"

/* outbox/.<id>.src: what a take noted of the producer's file */
#define OUTBOX_SRC_SUFFIX ".src"
#include "util.h"

/* Is handoff/name (st) what a take of doc left: outbox/dst is the
 * daemon's, holds doc, and was written after the producer last wrote
 * hers?  A copy written since is a replay (duplicate_id). */
static bool take_leftover(struct spool *sp, const struct stat *src, const char *dst,
                          const json_t *doc)
{
        hd_limits lim = { .max_size = OUTBOX_DIR_MAX(sp), .max_depth = HD_DEFAULT_MAX_DEPTH };
        _cleanup_json_ json_t *have = NULL;
        hd_verdict vd;
        struct stat st;

        if (fstatat(sp->fd[SD_OUTBOX], dst, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
            src->st_mtim.tv_sec > st.st_mtim.tv_sec ||
            (src->st_mtim.tv_sec == st.st_mtim.tv_sec && src->st_mtim.tv_nsec > st.st_mtim.tv_nsec))
                return false;
        if (hd_load_at(sp->fd[SD_OUTBOX], dst, &lim, &have, &vd) < 0)
                return false;
        return json_equal(have, (json_t *)doc);
}

int outbox_dir_take(struct spool *sp, const char *name, const struct spool_ino *was,
                    const struct handoff *h, const char *dst)
{
        _cleanup_free_ char *own = NULL;
        const char *buf = h->canon;
        size_t len = h->canon_len;
        struct stat st;
        char q[300];
        int r;

        /* Still the file that verified (decide_claim() looked under the
         * id's lock; a swap since is a new file, looked at anew). */
        if (fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (was && (st.st_dev != was->dev || st.st_ino != was->ino))
                return -ENOENT;
        if (!S_ISREG(st.st_mode))
                return -EISDIR;
        if (!buf) {
                r = hd_canon_dump(h->doc, NULL, &own, &len);
                if (r < 0)
                        return r;
                buf = own;
        }
        /* What the archive will note in ids/ of the producer's file,
         * written before the copy: a kill between the two leaves a note
         * without its item, which the next outbox scan sweeps. */
        char side[NAME_MAX + 1], note[64];
        int nl = snprintf(note, sizeof(note), "src %llu %llu\n", (unsigned long long)st.st_dev,
                          (unsigned long long)st.st_ino);
        if (xsnprintf(side, sizeof(side), ".%s" OUTBOX_SRC_SUFFIX, h->id) >= 0)
                (void) store_side_write(sp, SD_OUTBOX, side, note, (size_t)nl);
        /* main.c's umask 027 keeps 0640, as claimed/'s records. */
        r = write_linked(sp->fd[SD_OUTBOX], dst, buf, len, 0640,
                         sp->cfg->fsync ? WRITE_SYNC_FILE : 0);
        if (r == -EEXIST && take_leftover(sp, &st, dst, h->doc)) {
                store_drop_source(sp, name, st.st_dev, st.st_ino);
                log_info("Removed %s: in outbox/ already as %s (left by a crash)",
                         log_quote(name, q, sizeof(q)), dst);
                return -ENOENT;
        }
        if (r < 0)
                return r;
        store_dirty(sp, SD_OUTBOX);
        store_drop_source(sp, name, st.st_dev, st.st_ino);
        return 0;
}

/* A take's note (.<id>.src) whose item is gone from outbox/ another way
 * than its archive (a power cut's recovery, an expiry): removed. */
static void sweep_src(struct spool *sp)
{
        DIR *d = opendir_at(sp->fd[SD_OUTBOX]);
        struct dirent *de;
        char item[NAME_MAX + 1];
        size_t l;

        if (!d)
                return;
        while ((de = readdir(d))) {
                l = strlen(de->d_name);
                if (de->d_name[0] != '.' || l < 6 || strcmp(de->d_name + l - 4, OUTBOX_SRC_SUFFIX) ||
                    l - 5 + 5 > NAME_MAX)
                        continue;
                memcpy(item, de->d_name + 1, l - 5);
                memcpy(item + l - 5, ".json", 6);
                if (faccessat(sp->fd[SD_OUTBOX], item, F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
                    errno == ENOENT)
                        (void) store_remove(sp, SD_OUTBOX, de->d_name);
        }
        closedir(d);
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
        sweep_src(sp);
        return q;
}

int outbox_dir_load(struct spool *sp, const char *name, int64_t now, json_t **ret,
                    hd_verdict *vd, int64_t *ret_at)
{
        hd_limits lim = { .max_size = OUTBOX_DIR_MAX(sp), .max_depth = HD_DEFAULT_MAX_DEPTH };
        struct stat st;
        int r;

        r = hd_load_at(sp->fd[SD_OUTBOX], name, &lim, ret, vd);
        if (r < 0)
                return r;
        *ret_at = fstatat(sp->fd[SD_OUTBOX], name, &st, AT_SYMLINK_NOFOLLOW) == 0
                ? (int64_t)st.st_ctim.tv_sec * 1000000LL + st.st_ctim.tv_nsec / 1000 : now;
        return 0;
}

int outbox_dir_archive(struct spool *sp, const struct store_outcome *o, int64_t at_s,
                       char *name, size_t n)
{
        char src[NAME_MAX + 1];
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int q;

        q = xsnprintf(src, sizeof(src), "%s.json", o->id);
        if (q >= 0)
                q = store_outcome_dump(o, &buf, &len);
        if (q < 0)
                return q;
        q = store_id_mark(sp, o->id);
        if (q < 0)
                return q;
        /* the take's note of the producer's file, read before the move */
        char side[NAME_MAX + 1], note[96] = "";
        ssize_t nn = -1;
        if (xsnprintf(side, sizeof(side), ".%s" OUTBOX_SRC_SUFFIX, o->id) >= 0) {
                int fd = openat(sp->fd[SD_OUTBOX], side, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0) {
                        nn = read(fd, note, sizeof(note) - 16);
                        close(fd);
                }
        }
        /* Noted before the move: a kill between the two leaves the item in
         * outbox/, sent again, and its producer's name, dropped as the
         * leftover it is; after the move, the name is known by the note. */
        bool noted = nn > 0 && nn < (ssize_t)sizeof(note) - 16 && !strncmp(note, "src ", 4);
        if (noted) {
                memcpy(note + nn, "archived\n", 10);
                (void) store_id_note(sp, o->id, note, (size_t)nn + 9);
        }
        q = store_archive_from(sp, SD_OUTBOX, src, at_s, o->from, o->to, o->id, buf, len,
                               name, n);
        if (q == 0 && noted)
                (void) store_remove(sp, SD_OUTBOX, side);
        return q;
}
