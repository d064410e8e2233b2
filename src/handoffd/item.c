/* The claimed item's state machine (handoffd(8), OPERATION: "States" and
 * "Durability and crash windows").  A claimed item is claimed/<id>.json,
 * the daemon's record.  It is the bootstrap the daemon wrote once,
 * hard-linked to the agent's bootstrap (delivery.c).  No producer holds it,
 * so it is never verified again and never changes.
 *
 * Its state is which of the agent's names for it exist: .pending. (not yet
 * published), the bootstrap (published), .expire. (an expiry under way),
 * .cancel. (a cancel under way), or none (taken).  item_state() reads them
 * once and names the state.  item_actions[] says what to do in each state
 * when the item is looked at (the sweep, a deadline, a bootstrap gone);
 * item_cancel_actions[] says what to do when its sender asks to cancel it
 * (a request of cancel.c waits for the id).  The actions are in item_act.c,
 * and in item_legacy.c for an earlier version's items.
 *
 * The caller (lifecycle_check()) holds the id's lock (lock.h), as the
 * claimer does, so two daemons never act on one item at once. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents.h"
#include "cancel.h"
#include "delivery.h"
#include "files.h"
#include "item.h"
#include "item_act.h"
#include "item_legacy.h"
#include "layout.h"
#include "log.h"
#include "parts.h"
#include "quota.h"
#include "store.h"
#include "verified.h"

/* The agent's names for a record -> its state.  Index: F_CANCEL,
 * F_PENDING, F_BOOT, F_EXPIRE.  A cut-short expiry wins, then a cut-short
 * cancel (each took the one bootstrap by a rename, so both are there only
 * when someone made the other name), then a published bootstrap; the
 * hidden one alone is a publish not done; none: taken. */
static const enum item_state item_by_files[16] = {
        /* cancel pending boot expire */
        [0x0] = IS_TAKEN,       /* no  no  no  no  */
        [0x1] = IS_EXPIRING,    /* no  no  no  yes */
        [0x2] = IS_PUBLISHED,   /* no  no  yes no  */
        [0x3] = IS_EXPIRING,    /* no  no  yes yes */
        [0x4] = IS_HIDDEN,      /* no  yes no  no  */
        [0x5] = IS_EXPIRING,    /* no  yes no  yes */
        [0x6] = IS_PUBLISHED,   /* no  yes yes no  */
        [0x7] = IS_EXPIRING,    /* no  yes yes yes */
        [0x8] = IS_CANCELING,   /* yes no  no  no  */
        [0x9] = IS_EXPIRING,    /* yes no  no  yes */
        [0xa] = IS_CANCELING,   /* yes no  yes no  */
        [0xb] = IS_EXPIRING,    /* yes no  yes yes */
        [0xc] = IS_CANCELING,   /* yes yes no  no  */
        [0xd] = IS_EXPIRING,    /* yes yes no  yes */
        [0xe] = IS_CANCELING,   /* yes yes yes no  */
        [0xf] = IS_EXPIRING,    /* yes yes yes yes */
};

static int item_names(struct item_files *f, const char *id)
{
        int r = hd_bootstrap_name(id, f->bname, sizeof(f->bname));

        if (r == 0)
                r = layout_prefixed(LAYOUT_PENDING, f->bname, f->pname, sizeof(f->pname));
        if (r == 0)
                r = layout_prefixed(LAYOUT_EXPIRE, f->bname, f->xname, sizeof(f->xname));
        if (r == 0)
                r = layout_prefixed(LAYOUT_CANCEL, f->bname, f->cname, sizeof(f->cname));
        if (r == 0)
                r = layout_suffixed(id, LAYOUT_DELIVERED, f->mname, sizeof(f->mname));
        return r;
}

static unsigned item_look(const struct item_files *f)
{
        return (spool_exists_at(f->a->handoffs_fd, f->pname) ? F_PENDING : 0) |
               (spool_exists_at(f->a->handoffs_fd, f->bname) ? F_BOOT : 0) |
               (spool_exists_at(f->a->handoffs_fd, f->xname) ? F_EXPIRE : 0) |
               (spool_exists_at(f->a->handoffs_fd, f->cname) ? F_CANCEL : 0);
}

/* Is .pending.NAME the record's own file, written at step 1 of its claim?
 * Else it is a later look's step 1 for the same id (its producer's file
 * left in handoff/ by a crash after the record, the item published and its
 * bootstrap taken since), cut short by a second crash before its record's
 * link failed: published, it would show the agent the handoff twice.  The
 * record is the same inode where it is a link, the same bytes where it is
 * a copy; a later step 1 wrote its own accepted_at. */
static bool pending_is_record(const struct item_files *f, int fd)
{
        _cleanup_free_ char *a = NULL, *b = NULL;
        _cleanup_close_ int pfd = -1;
        size_t alen, blen;
        struct stat st;

        pfd = openat(f->a->handoffs_fd, f->pname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (pfd < 0 || fstat(pfd, &st) < 0)
                return errno != ENOENT;         /* unsure: as before */
        if (st.st_dev == f->st.st_dev && st.st_ino == f->st.st_ino)
                return true;
        if (st.st_size != f->st.st_size || lseek(fd, 0, SEEK_SET) < 0 ||
            read_all(fd, (size_t)f->st.st_size + 1, 0, &a, &alen) < 0 ||
            read_all(pfd, (size_t)f->st.st_size + 1, 0, &b, &blen) < 0)
                return false;
        return alen == blen && memcmp(a, b, alen) == 0;
}

/* Read claimed/<id>.json (fd) and the agent's names for it, once: the
 * state in *ret. */
static int item_state(struct spool *sp, struct verified *vc, const char *id, int fd,
                      struct item_files *f, enum item_state *ret)
{
        struct stat st;
        int r;

        f->id = id;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_nlink == 0) {
                *ret = IS_GONE;         /* archived by another daemon since our open */
                return 0;
        }
        f->st = st;
        r = item_names(f, id);
        if (r < 0)
                return r;
        if (!verified_lookup(vc, id, &st, &f->h, &f->accepted_usec)) {
                _cleanup_json_ json_t *rec = NULL;
                /* Whatever is not the daemon's record is verified as an
                 * earlier version's item. */
                r = delivery_record_read(sp, fd, &st, &rec);
                if (r == -ENOMSG) {
                        r = item_legacy_state(sp, id, fd, &st, f, ret);
                        if (r == 0 && *ret == IS_LEGACY)
                                f->files = item_look(f);
                        return r;
                }
                if (r == 0)
                        r = verified_record_parse(rec, &f->h, &f->accepted_usec);
                if (r < 0)
                        return r;
                verified_store(vc, &st, &f->h, f->accepted_usec);
        }
        f->a = spool_agent(sp, f->h.to);
        if (!f->a) {
                *ret = IS_NOT_OURS;     /* another daemon's agent (or no more) */
                return 0;
        }
        f->files = item_look(f);
        if ((f->files & F_PENDING) && !pending_is_record(f, fd)) {
                char q[300];
                (void) store_boot_remove(sp, f->a, f->pname);
                f->files &= ~F_PENDING;
                log_info("Removed %s: not the record of claimed item %s (a later look at its "
                         "handoff, cut short by a crash)", log_quote(f->pname, q, sizeof(q)), id);
        }
        *ret = item_by_files[f->files];
        return 0;
}

static void item_files_clear(struct item_files *f)
{
        handoff_clear(&f->h);
        json_decref(f->marker);
        *f = (struct item_files){ 0 };
}

static int act_none(struct parts *p, struct item_files *f, int64_t now)
{
        return 0;
}

/* state -> action: the one place that says what happens next. */
static item_action *const item_actions[_IS_MAX] = {
        [IS_GONE]      = act_none,                      /* another daemon finished it */
        [IS_NOT_OURS]  = act_none,                      /* another daemon's agent */
        [IS_TAMPERED]  = item_legacy_reject,            /* withdraw, reject as changed */
        [IS_LEGACY]    = item_legacy_convert,           /* an earlier version's: a record */
        [IS_HIDDEN]    = item_act_publish,
        [IS_PUBLISHED] = item_act_wait_or_expire,
        [IS_EXPIRING]  = item_act_archive_expired,
        [IS_CANCELING] = item_act_archive_canceled,
        [IS_TAKEN]     = item_act_archive_consumed,     /* unless a consume is in progress */
};

/* state -> action when its sender asks to cancel it (cancel_wanted());
 * the first four never get here: the item's sender is not known yet. */
static item_action *const item_cancel_actions[_IS_MAX] = {
        [IS_GONE]      = act_none,
        [IS_NOT_OURS]  = act_none,
        [IS_TAMPERED]  = item_legacy_reject,
        [IS_LEGACY]    = item_legacy_convert,
        [IS_HIDDEN]    = item_act_cancel,               /* never shown to its agent */
        [IS_PUBLISHED] = item_act_cancel,               /* unless its consumer wins */
        [IS_EXPIRING]  = item_act_expired_not_cancelable,
        [IS_CANCELING] = item_act_archive_canceled,
        [IS_TAKEN]     = item_act_taken_not_cancelable,
};

int item_state_at(struct parts *p, const char *id, int fd, enum item_state *ret)
{
        struct item_files f = {};
        int r;

        r = item_state(p->sp, &p->verified, id, fd, &f, ret);
        item_files_clear(&f);
        return r;
}

int item_check_locked(struct parts *p, const char *id, int fd, int64_t now, bool *ret_archived)
{
        struct spool *sp = p->sp;
        struct item_files f = {};
        enum item_state s;
        const char *from = NULL;
        bool cancel = false;
        int r;

        r = item_state(sp, &p->verified, id, fd, &f, &s);
        if (r < 0)
                goto out;
        /* A record says who sent it: only that sender's request counts
         * (the others' are refused first, so they hold nothing up). */
        if (s >= IS_HIDDEN) {
                from = f.h.from;
                cancel_answer(p, id, from, CA_NONE);
                cancel = cancel_wanted(p, id, from);
        }
        r = (cancel ? item_cancel_actions : item_actions)[s](p, &f, now);
        if (r < 0)
                goto out;
        if (cancel)
                cancel_answer(p, id, from, f.answer);
        if (s == IS_GONE || f.archived)
                verified_forget(&p->verified, id);
        /* What waits for each agent (quota.c): released by the daemon
         * that archives or rejects it (IS_GONE: another one did). */
        if ((f.archived || s == IS_TAMPERED) && f.a)
                quota_release(sp, f.a->cfg->name, id);
        else if (s > IS_TAMPERED && f.a && f.h.id[0]) {
                const struct quota_sender qs = {
                        .from = f.h.from,
                        .own_key = config_key_own(sp->cfg, f.h.kid[0] ? f.h.kid : NULL, f.h.from),
                };
                quota_note(sp, &p->quota, f.a->cfg->name, id, &qs);
        }
        if (ret_archived)
                *ret_archived = f.archived;
out:
        item_files_clear(&f);
        return r;
}
