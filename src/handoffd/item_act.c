/* The actions of item.c's table on a record: publish it, wait for its
 * consumer or expire it, take it back for its sender's cancel, and the
 * end of each, archive/ with its .outcome (archive_claimed()).  An
 * expiry and a cancel take the bootstrap by the rename a consumer makes,
 * so of a consumer and the daemon exactly one wins; the taken name
 * (.expire.NAME, .cancel.NAME) is the record of the decision until the
 * archive is on disk.  Each action is called with the id's lock held and
 * returns 0 or -errno; f->archived says it archived the item, f->answer
 * what a cancel request for it is answered. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "store_doc.h"
#include "agents.h"
#include "cancel.h"
#include "completion.h"
#include "deadline.h"
#include "delivery.h"
#include "files.h"
#include "item_act.h"
#include "layout.h"
#include "log.h"
#include "parts.h"

/* A consume in progress: the item is looked at again this much later. */
#define BUSY_RETRY_USEC 1000000LL

/* A consumer has renamed the bootstrap to its private name and is reading
 * it: the item is not consumed until that name is gone too. */
static bool consume_in_progress(struct agent_rt *a, const char *bname)
{
        struct dirent *de;
        bool found = false;
        DIR *d;

        d = opendir_at(a->handoffs_fd);
        if (!d)
                return false;
        while (!found && (de = readdir(d))) {
                found = layout_classify(de->d_name) == LK_CONSUME &&
                        layout_has_suffix(de->d_name, bname);
        }
        closedir(d);
        return found;
}

static int64_t item_accepted(const struct item_files *f, int64_t now)
{
        const char *acc = f->legacy && f->marker ?
                          json_string_value(json_object_get(f->marker, "accepted_at")) : NULL;
        int64_t t;

        if (!f->legacy)
                return f->accepted_usec ? f->accepted_usec : now;
        return acc && hd_time_parse(acc, &t) == 0 ? t : now;
}

static void count_outcome(struct spool *sp, const char *outcome)
{
        if (!strcmp(outcome, "consumed"))
                sp->st.consumed++;
        else if (!strcmp(outcome, "canceled"))
                sp->st.canceled++;
        else
                sp->st.expired++;
}

/* The archive name (layout_archive_name(), "{unix_ts}-{from}-{to}-{id}.json",
 * bounded) takes its time from the claim, so a retry after a crash
 * chooses the same name.  In fresh; *ret_done when our record is there
 * already (the move was made, and a power cut kept its claimed/ name
 * too: that name, src, is removed). */
static int archive_name(struct spool *sp, const struct item_files *f, const char *src, int64_t t,
                        char *fresh, size_t n, bool *ret_done)
{
        struct stat st;
        int r;

        for (unsigned i = 0; i < LAYOUT_ARCHIVE_TRIES; i++) {
                r = layout_archive_name(t / 1000000, f->h.from, f->h.to, f->id, i, fresh, n);
                if (r < 0)
                        return r;
                if (fstatat(sp->fd[SD_ARCHIVE], fresh, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT)
                                return -errno;
                        *ret_done = false;
                        return 0;
                }
                if (!f->legacy && st.st_dev == f->st.st_dev && st.st_ino == f->st.st_ino) {
                        if ((r = store_remove(sp, SD_CLAIMED, src)) < 0)
                                return r;
                        log_info("Removed claimed/%s, left beside its archive by a power cut", src);
                        *ret_done = true;
                        return 0;
                }
        }
        return -EEXIST;
}

/* Move claimed/<id>.json to archive/ with its .outcome, the outcome
 * first: an archived item always says how it ended, and a crash in the
 * middle leaves the item in claimed/ for the retry, which writes the
 * same sidecar under the same name (an earlier version's marker may have
 * chosen the name already: "archive_as").  f->archived unless another
 * daemon archived it first. */
static int archive_claimed(struct parts *p, struct item_files *f, const char *outcome,
                           int64_t now)
{
        struct spool *sp = p->sp;
        const char *id = f->id;
        const char *name = json_string_value(json_object_get(f->marker, "archive_as"));
        char fresh[NAME_MAX + 1], src[NAME_MAX + 1];
        int64_t t = item_accepted(f, now);
        _cleanup_free_ char *buf = NULL;
        struct store_outcome o = { .archived_usec = now, .accepted_usec = t, .completes = -1 };
        size_t len;
        int r;

        r = xsnprintf(src, sizeof(src), "%s.json", id);
        if (r < 0)
                return r;
        bool marked = name && hd_name_safe(name);
        if (marked) {
                /* An earlier version's retry: the outcome decided first stands. */
                const char *o0 = json_string_value(json_object_get(f->marker, "outcome"));
                if (o0 && (!strcmp(o0, "consumed") || !strcmp(o0, "expired")))
                        outcome = o0;
        }
        /* A name of the marker's too long for its .outcome never got one:
         * the item gets a name of its own. */
        if (!marked || strlen(name) > LAYOUT_ARCHIVE_NAME_MAX) {
                bool done = false;
                r = archive_name(sp, f, src, t, fresh, sizeof(fresh), &done);
                if (r < 0)
                        return r;
                if (done) {
                        f->archived = true;
                        return 0;
                }
                name = fresh;
        }
        if (xsnprintf(o.id, sizeof(o.id), "%s", id) < 0 ||
            xsnprintf(o.outcome, sizeof(o.outcome), "%s", outcome) < 0)
                return -EINVAL;
        memcpy(o.from, f->h.from, sizeof(f->h.from));
        memcpy(o.to, f->h.to, sizeof(f->h.to));
        /* The agent's completes at the consume decides whether its A2A
         * task waits for a result (handoff-hubd(8)): a later change of
         * the setting must not reopen a task that ended here. */
        if (!strcmp(outcome, "consumed") && f->a && f->a->cfg)
                o.completes = f->a->cfg->completes;
        r = store_outcome_dump(&o, &buf, &len);
        if (r < 0)
                return r;
        /* The steps and their order: store_archive() (handoffd(8),
         * "Durability and crash windows"). */
        bool moved;
        r = store_archive(sp, id, name, outcome, buf, len, f->legacy ? f->mname : NULL, now,
                          &moved);
        if (r < 0 || !moved)
                return r;
        count_outcome(sp, outcome);
        f->archived = true;
        log_decision(LOG_INFO, id, f->h.to, outcome, NULL, "Archived %s as %s", id, outcome);
        /* A result its agent gave between the consume and now. */
        if (!strcmp(outcome, "consumed") && !f->legacy &&
            (r = completion_archived_locked(p, f->a, id, name, now)) < 0) {
                p->results->due = true;
                spool_error(sp, r, "Cannot take the result of %s", id);
        }
        return 0;
}

/* Sync the removal of the bootstrap (by a consumer, which may not sync
 * it, or by the expiry's rename) before the item is archived.  Otherwise
 * a power cut brings the bootstrap back beside an archived item. */
static int sync_taken(struct spool *sp, struct agent_rt *a)
{
        return store_boot_sync(sp, a);
}

/* The .expire. (.cancel.) name is the record of an expiry (a cancel)
 * until its archive is on disk (a power cut could otherwise keep its
 * removal and lose the move, and the item would be taken for consumed). */
static int drop_taken(struct spool *sp, struct item_files *f, const char *name)
{
        int r = sp->cfg->fsync ? store_flush(sp) : 0;

        if (r < 0)
                return r;
        (void) store_boot_remove(sp, f->a, name);
        return 0;
}

/* An expiry's or a cancel's taking, cut short: a bootstrap or hidden
 * bootstrap still there goes, and the taking is on disk before the item
 * is archived. */
static int withdraw_names(struct spool *sp, struct item_files *f)
{
        if (f->files & F_BOOT)
                (void) store_boot_remove(sp, f->a, f->bname);
        if (f->files & F_PENDING)
                (void) store_boot_remove(sp, f->a, f->pname);
        return sync_taken(sp, f->a);
}

/* The bootstrap taken by the expiry (.expire.NAME) and that on disk:
 * archived as expired, then the taken name goes. */
static int archive_expired(struct parts *p, struct item_files *f, int64_t now)
{
        struct spool *sp = p->sp;
        int r = archive_claimed(p, f, "expired", now);

        if (r < 0)
                return r;       /* .expire.NAME tells the retry */
        return drop_taken(sp, f, f->xname);
}

/* The record is there, the publish was not done. */
int item_act_publish(struct parts *p, struct item_files *f, int64_t now)
{
        struct spool *sp = p->sp;
        int r;

        (void)now;
        /* The record on disk first (a failed sync may have left it not);
         * what left claimed/ in this sweep is on disk where it went. */
        if ((r = store_sync_dir(sp, SD_CLAIMED)) < 0)
                return r;
        r = delivery_publish(p, f->a, f->id);
        if (r < 0)
                return r;
        bool retry = dict_get(&p->delivery->failed, f->id) != NULL;
        dict_del(&p->delivery->failed, f->id);
        if (retry)
                sp->st.retried++;
        else
                sp->st.recovered++;
        log_decision(LOG_NOTICE, f->id, f->a->cfg->name, retry ? "retried" : "recovered", NULL,
                     "Published %s to %s after a restart or failure", f->id, f->a->cfg->name);
        return store_flush(sp);
}

/* An expiry that was cut short: finish it. */
int item_act_archive_expired(struct parts *p, struct item_files *f, int64_t now)
{
        struct spool *sp = p->sp;
        int r = withdraw_names(sp, f);

        if (r < 0)
                return r;
        return archive_expired(p, f, now);
}

int item_act_archive_consumed(struct parts *p, struct item_files *f, int64_t now)
{
        struct spool *sp = p->sp;
        if (consume_in_progress(f->a, f->bname)) {
                deadline_note(&p->deadline, now + BUSY_RETRY_USEC);
                return 0;
        }
        int r = sync_taken(sp, f->a);
        if (r < 0)
                return r;
        return archive_claimed(p, f, "consumed", now);
}

int item_act_wait_or_expire(struct parts *p, struct item_files *f, int64_t now)
{
        struct spool *sp = p->sp;
        int64_t deadline = item_accepted(f, now) + sp->cfg->resume_window * 1000000LL;
        struct agent_rt *a = f->a;
        int r;

        if (now < deadline) {
                deadline_note(&p->deadline, deadline);
                return 0;
        }
        /* Take the bootstrap as a consumer would, so a consumer racing us
         * either got it (consumed) or finds nothing.  The taken name is
         * also the record of the expiry, should we die before the end. */
        if ((r = store_boot_rename(sp, a, f->bname, f->xname)) < 0) {
                if (r != -ENOENT)
                        return r;
                if ((r = sync_taken(sp, a)) < 0)
                        return r;
                return archive_claimed(p, f, "consumed", now);
        }
        if ((r = sync_taken(sp, a)) < 0)
                return r;
        return archive_expired(p, f, now);
}

/* Finish a cancel that was cut short, or just made by
 * item_act_cancel().  The sender's requests are answered only once the
 * taken name is on disk.  From then on the item ends canceled whatever
 * crash comes; a request read again after a crash finds the item archived
 * and could no longer tell that it was the one. */
int item_act_archive_canceled(struct parts *p, struct item_files *f, int64_t now)
{
        struct spool *sp = p->sp;
        int r = withdraw_names(sp, f);

        if (r < 0)
                return r;
        cancel_answer(p, f->id, f->h.from,
                      CA_CANCELED);
        r = archive_claimed(p, f, "canceled", now);
        if (r < 0)
                return r;       /* .cancel.NAME tells the retry */
        dict_del(&p->delivery->failed, f->id);   /* a publish to retry: none now */
        return drop_taken(sp, f, f->cname);
}

/* Its sender takes it back: the bootstrap is taken by the rename a
 * consumer makes; not yet published, its hidden name is taken, and the
 * agent never sees it. */
int item_act_cancel(struct parts *p, struct item_files *f, int64_t now)
{
        struct spool *sp = p->sp;
        struct agent_rt *a = f->a;
        bool published = f->files & F_BOOT;

        int r = store_boot_rename(sp, a, published ? f->bname : f->pname, f->cname);

        if (r < 0) {
                if (r != -ENOENT)
                        return r;
                if (!published) {
                        /* Only a daemon moves a hidden name, and we hold
                         * the id's lock: look again. */
                        deadline_note(&p->deadline, now);
                        return 0;
                }
                /* The consumer won. */
                f->files &= ~F_BOOT;
                return item_act_taken_not_cancelable(p, f, now);
        }
        f->files = (f->files & ~(published ? F_BOOT : F_PENDING)) | F_CANCEL;
        return item_act_archive_canceled(p, f, now);
}

/* Ended already, or its agent has it: the cancel comes too late. */
int item_act_expired_not_cancelable(struct parts *p, struct item_files *f, int64_t now)
{
        f->answer = CA_NOT_CANCELABLE;
        return item_act_archive_expired(p, f, now);
}

int item_act_taken_not_cancelable(struct parts *p, struct item_files *f, int64_t now)
{
        f->answer = CA_NOT_CANCELABLE;
        return item_act_archive_consumed(p, f, now);
}
