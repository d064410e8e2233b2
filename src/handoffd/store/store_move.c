/* The moves: out of handoff/ (a claim, a rejection, to outbox/), into
 * rejected/ with a reason file and into archive/ with an outcome file,
 * from handoff/, claimed/ or outbox/: the sidecar written first, the id
 * remembered, then the move; and what rejected/ has grown by since
 * retention's last run.  Steps and crash windows: handoffd(8),
 * "Durability and crash windows". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents.h"
#include "files.h"
#include "layout.h"
#include "log.h"
#include "lock.h"
#include "store.h"
#include "store_doc.h"
#include "store_int.h"


static bool same_ino(const struct stat *st, const struct spool_ino *was)
{
        return st->st_dev == was->dev && st->st_ino == was->ino;
}

int store_take_link(struct spool *sp, const char *name, const struct spool_ino *was,
                        enum spool_dir to, const char *dst, bool link_first)
{
        struct stat st;
        int r;

        /* What is plainly not to be moved is not, without a move and a
         * return (store_arrived() settles a swap after this look). */
        if (fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (was && !same_ino(&st, was))
                return -ENOENT;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (link_first) {
                if (linkat(sp->fd[SD_HANDOFF], name, sp->fd[to], dst, 0) == 0) {
                        r = store_arrived(sp, name, was, to, dst, true);
                        if (r < 0)
                                return r;
                        store_dirty(sp, to);
                        if (fstatat(sp->fd[to], dst, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                return -errno;
                        store_leaving_note(sp, name, st.st_dev, st.st_ino, false);
                        return 0;
                }
                /* EPERM: fs.protected_hardlinks and a producer's file the
                 * daemon may not write, or a directory; EXDEV, ENOSYS...:
                 * no links.  Then a rename, as without fsync. */
                if (errno == EEXIST || errno == ENOENT)
                        return -errno;
        }
        r = move_noreplace(sp->fd[SD_HANDOFF], name, sp->fd[to], dst);
        if (r < 0)
                return r;
        store_dirty(sp, SD_HANDOFF);
        store_dirty(sp, to);
        return store_arrived(sp, name, was, to, dst, false);
}

int store_take(struct spool *sp, const char *name, const struct spool_ino *was,
               enum spool_dir to, const char *dst)
{
        return store_take_link(sp, name, was, to, dst, sp->cfg->fsync);
}

int store_drop_source(struct spool *sp, const char *name, dev_t dev, ino_t ino)
{
        struct spool_ino was = { .dev = dev, .ino = ino };

        if (sp->cfg->fsync) {
                store_leaving_note(sp, name, dev, ino, true);
                return 0;
        }
        return store_leave_name(sp, name, &was, true);
}

/* rejected/ grew by dst and its reason of len bytes: past a bound of
 * [retention], retention runs within a second (lifecycle.c sweep_end())
 * rather than at the next rescan_interval, so that a flood of rejections
 * does not hold rejected_max_bytes over its bound for that long. */
static void rejected_count(struct spool *sp, const char *dst, size_t len, int64_t now)
{
        const struct config *c = sp->cfg;
        struct stat st;

        sp->st.rejected_items++;
        sp->st.rejected_bytes += len;
        if (fstatat(sp->fd[SD_REJECTED], dst, &st, AT_SYMLINK_NOFOLLOW) == 0)
                sp->st.rejected_bytes += st_bytes(&st);
        if (sp->retention_due)
                return;
        if ((c->rejected_max_items && sp->st.rejected_items > c->rejected_max_items) ||
            (c->rejected_max_bytes && sp->st.rejected_bytes > c->rejected_max_bytes)) {
                sp->retention_due = true;
                deadline_note(&sp->due, now + RETENTION_SOON_USEC);
        }
}

int store_archive_from(struct spool *sp, enum spool_dir dir, const char *src, int64_t at_s,
                       const char *from, const char *to, const char *id, const char *buf,
                       size_t len, char *name, size_t n)
{
        char side[NAME_MAX + 16];
        int q;

        for (unsigned k = 0; k < LAYOUT_ARCHIVE_TRIES; k++) {
                q = layout_archive_name(at_s, from, to, id, k, name, n);
                if (q == 0)
                        q = layout_suffixed(name, LAYOUT_OUTCOME, side, sizeof(side));
                if (q < 0)
                        return q;
                /* Taken: another item's, whose .outcome must stay its own. */
                if (spool_exists_at(sp->fd[SD_ARCHIVE], name))
                        continue;
                /* Synced before archive/ (fsync = yes), which makes the
                 * move durable, as item_act.c's: a power cut must not
                 * leave the archived item's outcome empty.  With the
                 * other archives of the loop turn (the PubAcks of a
                 * round), by the caller's store_flush(). */
                q = store_side_write_later(sp, SD_ARCHIVE, side, buf, len);
                if (q < 0)
                        return q;
                q = move_noreplace(sp->fd[dir], src, sp->fd[SD_ARCHIVE], name);
                if (q == -EEXIST)
                        continue;
                if (q < 0) {
                        (void) store_remove(sp, SD_ARCHIVE, side);
                        return q;
                }
                store_dirty(sp, SD_ARCHIVE);
                store_dirty(sp, dir);
                return 0;
        }
        return -EEXIST;
}


/* from/name is at rejected/dst (its reason of len bytes beside it): the
 * relay told, the counts and the log line. */
static void rejected_done(struct spool *sp, enum spool_dir from, const char *name,
                          const struct spool_ino *was, const char *dst, size_t len,
                          hd_reason reason, const char *detail, const char *handoff_id,
                          int64_t now)
{
        char q[300];

        if (from != SD_HANDOFF)
                {
                store_dirty(sp, SD_REJECTED);
                store_dirty(sp, from);
        }
        if (sp->relay.outcome && from == SD_HANDOFF)
                sp->relay.outcome(sp->relay.ctx, handoff_id, name, "rejected",
                                  hd_reason_name(reason), detail, now);
        /* Its other names in handoff/ go as this file's
         * (store_drop_claim_leftover()): one rejection a file. */
        if (from == SD_HANDOFF && was && reason == HD_R_HARDLINK)
                store_kept_note(sp, was->dev, was->ino, SD_REJECTED, dst, false);
        sp->st.rejected[reason]++;
        rejected_count(sp, dst, len, now);
        log_decision(LOG_NOTICE, handoff_id, NULL, "rejected", hd_reason_name(reason),
                     "Rejected %s: %s: %s", log_quote(name, q, sizeof(q)),
                     hd_reason_name(reason), detail ? detail : "");
}

static int reject_from(struct spool *sp, enum spool_dir from, const char *name,
                       const struct spool_ino *was, hd_reason reason, const char *detail,
                       const char *handoff_id, int64_t now, enum item_outcome *ret)
{
        char base[NAME_MAX + 1], dst[NAME_MAX + 1], rsn[NAME_MAX + 16];
        char origin[80], rdetail[HD_DETAIL_MAX + 160];
        _cleanup_free_ char *buf = NULL;
        size_t len;
        struct stat st;
        int r;

        store_reject_base(name, base, sizeof(base));
        /* Relayed here: the reason says from where, or an operator reads
         * a bad_mac without knowing that the sender's key is another
         * host's (handoffd(8) RELAY). */
        if (from == SD_HANDOFF && sp->relay.origin &&
            sp->relay.origin(sp->relay.ctx, name, origin, sizeof(origin))) {
                snprintf(rdetail, sizeof(rdetail), "came through the relay from host %s: %s", origin,
                         detail ? detail : "");
                detail = rdetail;
        } else {
                origin[0] = '\0';
        }
        r = store_reason_dump(base, reason, detail, origin, handoff_id, now, &buf, &len);
        if (r < 0)
                return r;

        for (unsigned n = 0; n < STORE_REJECT_NAMES; n++) {
                /* base is 200 characters at most: "~999", the .reason and
                 * its temp name fit */
                r = n == 0 ? xsnprintf(dst, sizeof(dst), "%s", base)
                           : xsnprintf(dst, sizeof(dst), "%s~%u", base, n);
                if (r >= 0)
                        r = layout_suffixed(dst, LAYOUT_REASON, rsn, sizeof(rsn));
                if (r < 0)
                        return r;
                /* A .reason without its item is what a crash between the
                 * two steps below leaves: its name is free to reuse. */
                if (fstatat(sp->fd[SD_REJECTED], dst, &st, AT_SYMLINK_NOFOLLOW) == 0)
                        continue;
                /* The reason first: an item in rejected/ always has one. */
                r = store_side_write(sp, SD_REJECTED, rsn, buf, len);
                if (r < 0)
                        return r;
                /* The id is remembered before the item shows in rejected/,
                 * as an archiving does: a replay is known at every moment. */
                if (handoff_id && (r = store_id_mark(sp, handoff_id)) < 0)
                        return r;
                /* The outcome goes out before the move from claimed/ (the
                 * caller holds the id's lock: nothing else moves it), so
                 * a crash between never loses it.  From handoff/ only
                 * once the move is made: another daemon may have claimed
                 * the file meanwhile, and then the move finds it gone.
                 * With the relay the move is a link (the relay's own
                 * files can always be linked), the name in handoff/ left
                 * until the next store_flush(): a crash before the
                 * outcome leaves it beside its rejection, and
                 * store_drop_claim_leftover() tells it then. */
                if (sp->relay.outcome && from == SD_CLAIMED)
                        sp->relay.outcome(sp->relay.ctx, handoff_id, NULL, "rejected",
                                          hd_reason_name(reason), detail, now);
                r = from == SD_HANDOFF
                    ? store_take_link(sp, name, was, SD_REJECTED, dst,
                                          sp->cfg->fsync || sp->relay.outcome)
                    : move_noreplace(sp->fd[from], name, sp->fd[SD_REJECTED], dst);
                if (r == -EEXIST)
                        continue;       /* another rejecter took dst: its reason stands */
                if (r < 0) {
                        /* Gone: unless another rejecter just put it at dst
                         * (then the reason is its), the reason is ours to
                         * take back. */
                        if (fstatat(sp->fd[SD_REJECTED], dst, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                (void) store_remove(sp, SD_REJECTED, rsn);
                        if (r != -ENOENT)
                                return r;
                        *ret = IO_GONE;
                        return 0;
                }
                rejected_done(sp, from, name, was, dst, len, reason, detail, handoff_id, now);
                *ret = IO_REJECTED;
                return 0;
        }
        return -EEXIST;
}

int store_reject_from(struct spool *sp, enum spool_dir from, const char *name,
                      const struct spool_ino *was, hd_reason reason, const char *detail,
                      const char *handoff_id, int64_t now, enum item_outcome *ret)
{
        enum item_outcome o;
        int r = reject_from(sp, from, name, was, reason, detail, handoff_id, now, &o);

        if (r == 0 && ret)
                *ret = o;
        return r;
}

/* A rejection from handoff/ is a link into rejected/ made before the
 * name leaves handoff/, and two daemons may reject one file at once (an
 * unauthenticated one's id takes no lock): so the rejection of the inode
 * was holds its lock (lock_off_inode()) from before its reason is
 * written until the link is made.  Linux counts a link before its name
 * shows in the directory (ext4_link() raises i_nlink, then adds the
 * entry): another daemon that sees two links judges them under this lock
 * (decide.c), when rejected/NAME names the file, rather than as a hard
 * link of its producer's, with its own reason over this one's.  A second
 * link found under the lock is a rejection made since the caller looked:
 * the file goes as its leftover, not rejected again as NAME~1. */
int store_reject(struct spool *sp, const char *name, const struct spool_ino *was,
                 hd_reason reason, const char *detail, const char *handoff_id, int64_t now,
                 enum item_outcome *ret)
{
        uint64_t off;
        struct stat st;
        int r;

        if (!was)
                return store_reject_from(sp, SD_HANDOFF, name, NULL, reason, detail, handoff_id,
                                         now, ret);
        off = lock_off_inode(was->dev, was->ino);
        r = lock_try(sp->lock_fd, off, true);
        if (r == -EAGAIN && ret)
                *ret = IO_BUSY;
        if (r < 0)
                return r == -EAGAIN ? 0 : r;
        if (fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            st.st_dev == was->dev && st.st_ino == was->ino && st.st_nlink > 1 &&
            store_drop_claim_leftover(sp, name)) {
                if (ret)
                        *ret = IO_GONE;
                r = 0;
        } else {
                r = store_reject_from(sp, SD_HANDOFF, name, was, reason, detail, handoff_id, now,
                                      ret);
        }
        lock_release(sp->lock_fd, off);
        return r;
}

int store_reject_claimed(struct spool *sp, const char *id, hd_reason reason,
                         const char *detail, int64_t now, enum item_outcome *ret)
{
        char name[NAME_MAX + 1];

        if (xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                return -ENAMETOOLONG;
        return store_reject_from(sp, SD_CLAIMED, name, NULL, reason, detail, id, now, ret);
}

/* The record as a copy of the agent's file src (no link possible). */
static int record_copy(struct spool *sp, struct agent_rt *a, const char *src, const char *dst,
                       size_t max)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        fd = openat(a->handoffs_fd, src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = read_all(fd, max, 0, &buf, &len);
        if (r < 0)
                return r;
        return write_linked(sp->fd[SD_CLAIMED], dst, buf, len, 0640,
                            sp->cfg->fsync ? WRITE_SYNC_FILE : 0);
}

int store_claim(struct spool *sp, struct agent_rt *a, const char *id, const char *src,
                bool replace, size_t max)
{
        char rname[NAME_MAX + 1], tname[NAME_MAX + 1];
        const char *dst;
        int r;

        if (xsnprintf(rname, sizeof(rname), "%s.json", id) < 0 ||
            xsnprintf(tname, sizeof(tname), ".%s.record", id) < 0)
                return -ENAMETOOLONG;
        dst = replace ? tname : rname;
        if (replace && unlinkat(sp->fd[SD_CLAIMED], tname, 0) < 0 && errno != ENOENT)
                return -errno;
        if (linkat(a->handoffs_fd, src, sp->fd[SD_CLAIMED], dst, 0) < 0) {
                if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOSYS &&
                    errno != EOPNOTSUPP)
                        return -errno;
                r = record_copy(sp, a, src, dst, max);
                if (r < 0)
                        return r;
        }
        if (replace && renameat(sp->fd[SD_CLAIMED], tname, sp->fd[SD_CLAIMED], rname) < 0) {
                r = -errno;
                unlinkat(sp->fd[SD_CLAIMED], tname, 0);
                return r;
        }
        store_dirty(sp, SD_CLAIMED);
        return 0;
}

int store_publish_bootstrap(struct spool *sp, struct agent_rt *a, const char *pname,
                            const char *bname)
{
        return store_boot_rename(sp, a, pname, bname);
}

int store_archive(struct spool *sp, const char *id, const char *name, const char *outcome,
                  const void *buf, size_t len, const char *marker, int64_t now, bool *ret_moved)
{
        char side[NAME_MAX + 16], src[NAME_MAX + 1];
        int r;

        *ret_moved = false;
        r = xsnprintf(src, sizeof(src), "%s.json", id);
        if (r >= 0)
                r = layout_suffixed(name, LAYOUT_OUTCOME, side, sizeof(side));
        if (r < 0)
                return r;
        /* The outcome first: an archived item always says how it ended, and
         * a crash in the middle leaves the item in claimed/ for the retry,
         * which writes the same sidecar under the same name.  The id is
         * remembered before the item leaves claimed/, so a replay is
         * recognised at every moment. */
        r = store_side_write(sp, SD_ARCHIVE, side, buf, len);
        if (r < 0)
                return r;
        r = store_id_mark(sp, id);
        if (r < 0)
                return r;
        if (sp->relay.outcome)
                sp->relay.outcome(sp->relay.ctx, id, name, outcome, NULL, NULL, now);
        r = move_noreplace(sp->fd[SD_CLAIMED], src, sp->fd[SD_ARCHIVE], name);
        if (r == -ENOENT)
                return 0;       /* another daemon archived it */
        if (r < 0)
                return r;
        if (marker)
                unlinkat(sp->fd[SD_CLAIMED], marker, 0);
        store_dirty(sp, SD_ARCHIVE);
        store_dirty(sp, SD_CLAIMED);
        *ret_moved = true;
        return 0;
}
