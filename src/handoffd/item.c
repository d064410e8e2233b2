/* The claimed item's state machine (DESIGN.md "Lifecycle after claim" and
 * "Durability and recovery"; handoffd(8) "Crash windows").  A claimed
 * item is claimed/<id>.json, the daemon's record: the bootstrap it wrote
 * once, a hard link of the agent's bootstrap (delivery.c).  No producer
 * holds it, so it is never verified again and nothing in it changes;
 * its state is which of the agent's names for it are there: .pending.
 * (not yet published), the bootstrap (published), .expire. (an expiry
 * under way), .cancel. (a cancel under way), none (taken).  item_state()
 * reads that once and names the state; item_actions[] says what is done
 * in each, in the manner of a state x event table with two events: "look
 * at it" (the sweep, a deadline, a bootstrap gone) and "its sender asks
 * to cancel it" (a request of cancel.c's pending for the id:
 * item_cancel_actions[]).  The caller (lifecycle_check) holds the lock of
 * the id (lock.h), as the claimer does, so two daemons never act on one
 * item at once.
 *
 * An earlier version left the producer's own file in claimed/ with a
 * marker claimed/<id>.delivered: such an item is verified as before and
 * converted to a record at its first look (act_convert). */
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
#include "cancel.h"
#include "deadline.h"
#include "delivery.h"
#include "files.h"
#include "intake.h"
#include "layout.h"
#include "item.h"
#include "log.h"
#include "quota.h"
#include "completion.h"
#include "verified.h"

#define BUSY_RETRY_USEC 1000000LL

/* What item_state() read off the files, for the action. */
struct item_files {
        const char *id;
        json_t *doc;            /* the record (or what the cache keeps of
                                 * it); legacy: the verified handoff */
        json_t *marker;         /* legacy: claimed/<id>.delivered, or NULL */
        bool legacy;            /* an earlier version's item */
        struct agent_rt *a;
        hd_verdict v;           /* legacy: why it no longer verifies */
        char bname[NAME_MAX + 1], pname[NAME_MAX + 1], xname[NAME_MAX + 16];
        char cname[NAME_MAX + 16];
        char mname[NAME_MAX + 1];
        unsigned files;         /* F_*: which of the agent's names are there */
        struct stat st;         /* claimed/<id>.json */
        /* What the action decided for a cancel of the item: the answer
         * its sender's requests get (CA_NONE: none yet, they wait). */
        enum cancelreq_answer answer;
};

enum { F_EXPIRE = 1, F_BOOT = 2, F_PENDING = 4, F_CANCEL = 8 };

/* One of our own small files (a marker, a bootstrap), parsed. */
static int load_own(int dirfd, const char *name, size_t max, json_t **ret)
{
        hd_limits lim = { .max_size = max };
        hd_verdict v;

        return hd_load_at(dirfd, name, &lim, ret, &v);
}

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
        const json_t *m = f->legacy ? f->marker : f->doc;
        const char *acc = m ? json_string_value(json_object_get(m, "accepted_at")) : NULL;
        int64_t t;

        return acc && hd_time_parse(acc, &t) == 0 ? t : now;
}

/* Move claimed/<id>.json to archive/ with its .outcome, the outcome
 * first: an archived item always says how it ended, and a crash in the
 * middle leaves the item in claimed/ for the retry.  The archive name
 * (layout_archive_name(): the real implementation's
 * "{unix_ts}-{from}-{to}-{id}.json", bounded) takes its time from the
 * claim, so the retry chooses the same name and writes the same sidecar
 * (an earlier version's marker may have chosen it already:
 * "archive_as"). */
static int archive(struct spool *sp, struct item_files *f, const char *outcome, int64_t now)
{
        const char *id = f->id;
        const char *from = json_string_value(json_object_get(f->doc, "from_agent"));
        const char *to = json_string_value(json_object_get(f->doc, "to_agent"));
        const char *name = json_string_value(json_object_get(f->marker, "archive_as"));
        char fresh[NAME_MAX + 1], side[NAME_MAX + 16], src[NAME_MAX + 1], at[HD_TIME_MAX];
        char acc[HD_TIME_MAX];
        int64_t t = item_accepted(f, now);
        _cleanup_free_ char *buf = NULL;
        json_t *o;
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
                struct stat st;
                for (unsigned n = 0;; n++) {
                        if (n >= LAYOUT_ARCHIVE_TRIES)
                                return -EEXIST;
                        r = layout_archive_name(t / 1000000, from, to, id, n, fresh, sizeof(fresh));
                        if (r < 0)
                                return r;
                        if (fstatat(sp->fd[SD_ARCHIVE], fresh, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                                if (errno != ENOENT)
                                        return -errno;
                                break;
                        }
                        /* Our record there already: the move was made,
                         * and a power cut kept its claimed/ name too. */
                        if (!f->legacy && st.st_dev == f->st.st_dev && st.st_ino == f->st.st_ino) {
                                if (unlinkat(sp->fd[SD_CLAIMED], src, 0) < 0)
                                        return -errno;
                                sp->dirty[SD_CLAIMED] = true;
                                log_info("Removed claimed/%s, left beside its archive by a power cut", src);
                                return 1;
                        }
                }
                name = fresh;
        }
        hd_time_format(now, at, sizeof(at));
        hd_time_format(t, acc, sizeof(acc));
        r = layout_suffixed(name, LAYOUT_OUTCOME, side, sizeof(side));
        if (r < 0)
                return r;
        o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "handoff_id", id, "outcome", outcome,
                      "from_agent", from ? from : "", "to_agent", to ? to : "",
                      "archived_at", at, "accepted_at", acc);
        if (!o)
                return -ENOMEM;
        r = hd_canon_dump(o, NULL, &buf, &len);
        json_decref(o);
        if (r < 0)
                return r;
        /* The id is remembered before the item leaves claimed/, so a
         * replay is recognised at every moment. */
        r = write_atomic(sp->fd[SD_ARCHIVE], side, buf, len, 0640,
                         sp->cfg->fsync ? WRITE_SYNC_FILE : 0);
        if (r < 0)
                return r;
        r = spool_id_mark(sp, id);
        if (r < 0)
                return r;
        if (sp->relay.outcome)
                sp->relay.outcome(sp->relay.ctx, id, NULL, outcome, NULL, NULL, now);
        r = move_noreplace(sp->fd[SD_CLAIMED], src, sp->fd[SD_ARCHIVE], name);
        if (r < 0)
                return r == -ENOENT ? 0 : r;    /* another daemon archived it */
        if (f->legacy)
                unlinkat(sp->fd[SD_CLAIMED], f->mname, 0);
        sp->dirty[SD_ARCHIVE] = sp->dirty[SD_CLAIMED] = true;
        if (!strcmp(outcome, "consumed"))
                sp->st.consumed++;
        else if (!strcmp(outcome, "canceled"))
                sp->st.canceled++;
        else
                sp->st.expired++;
        log_decision(LOG_INFO, id, to, outcome, NULL, "Archived %s as %s", id, outcome);
        /* A result its agent gave between the consume and now. */
        if (!strcmp(outcome, "consumed") && !f->legacy &&
            (r = completion_archived_locked(sp, f->a, id, name, now)) < 0) {
                sp->results_due = true;
                spool_error(sp, r, "Cannot take the result of %s", id);
        }
        return 1;
}

/* An earlier version's claimed item that no longer verifies: nothing of
 * it may reach the agent from now on.  A bootstrap not yet taken is
 * withdrawn, the marker and a hidden bootstrap go, and the item ends in
 * rejected/ with the reason. */
static int reject_tampered(struct spool *sp, struct item_files *f, int64_t now)
{
        struct agent_rt *a = f->a;
        char detail[HD_DETAIL_MAX + 64];
        int r;

        if (renameat(a->handoffs_fd, f->bname, a->handoffs_fd, f->xname) == 0 || errno == ENOENT)
                unlinkat(a->handoffs_fd, f->xname, 0);
        unlinkat(a->handoffs_fd, f->pname, 0);
        a->dirty = true;
        snprintf(detail, sizeof(detail), "changed after its claim: %s", f->v.detail);
        r = spool_reject_claimed(sp, f->id, f->v.reason, detail, now);
        if (r < 0)
                return r;
        if (unlinkat(sp->fd[SD_CLAIMED], f->mname, 0) == 0)
                sp->dirty[SD_CLAIMED] = true;
        json_object_del(sp->failed, f->id);
        return 0;
}

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

/* An earlier version's claimed item: the producer's file (fd, st), which
 * may have changed since its claim, verified before anything is done. */
static int legacy_state(struct spool *sp, const char *id, int fd, struct stat *st,
                        struct item_files *f)
{
        _cleanup_free_ char *buf = NULL;
        hd_limits lim = { .max_size = sp->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        size_t len;
        bool readable;
        int r;

        f->legacy = true;
        json_decref(TAKE_PTR(f->doc));
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        r = read_fd_stat(fd, st, id, sp->cfg->max_file_size, &buf, &len, &f->v);
        if (r == -EBADMSG && f->v.reason == HD_R_HARDLINK) {
                /* Its other link a claim left in handoff/, its archive,
                 * or a producer's tmp/ name a power cut kept: not
                 * tampering. */
                char name[NAME_MAX + 1];
                if (spool_drop_archived_leftover(sp, id))
                        return IS_GONE;
                if (xsnprintf(name, sizeof(name), "%s.json", id) >= 0 &&
                    (spool_drop_id_leftover(sp, name, id) || spool_drop_claim_leftover(sp, name) ||
                     spool_drop_tmp_twin(sp, SD_CLAIMED, name))) {
                        if (fstat(fd, st) < 0)
                                return -errno;
                        r = read_fd_stat(fd, st, id, sp->cfg->max_file_size, &buf, &len, &f->v);
                }
        }
        if (r == -ENOENT)
                return IS_GONE;
        if (r < 0 && r != -EBADMSG)
                return r;
        readable = r == 0 && (r = hd_parse(buf, len, &lim, &f->doc, &f->v)) == 0;
        if (r < 0 && r != -EBADMSG)
                return r;
        /* Not authenticated yet: only says whose item it may be. */
        f->a = spool_agent(sp, readable ? json_string_value(json_object_get(f->doc, "to_agent")) : NULL);
        if (!f->a && readable)
                return IS_NOT_OURS;     /* served by another daemon (or no more) */
        /* Unreadable now: whose it was is lost with its bytes.  The
         * bootstrap name tells, if one of our agents has one. */
        for (size_t i = 0; i < sp->n_agents && !f->a; i++)
                if (spool_exists_at(sp->agents[i].handoffs_fd, f->bname) ||
                    spool_exists_at(sp->agents[i].handoffs_fd, f->pname))
                        f->a = &sp->agents[i];
        if (!f->a)
                return IS_NOT_OURS;
        if (!readable || intake_verify_claimed(sp, f->doc, id, &f->v) < 0)
                return IS_TAMPERED;
        r = load_own(sp->fd[SD_CLAIMED], f->mname, 65536, &f->marker);
        if (r == -EBADMSG) {
                /* Being there is what says the bootstrap may have been seen. */
                f->marker = json_object();
                if (!f->marker)
                        return -ENOMEM;
        } else if (r < 0 && r != -ENOENT) {
                return r;
        }
        f->files = item_look(f);
        return IS_LEGACY;
}

/* Is .pending.NAME the record's own file, written at step 1 of its claim?
 * Else it is a later look's step 1 for the same id (its producer's file
 * left in handoff/ by a crash after the record, the item published and its
 * bootstrap taken since), cut short by a second crash before its record's
 * link failed: published, it would show the agent the handoff twice
 * (test_crash's SIGKILL cycles found one, 1 run in 5).  The
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

/* Read claimed/<id>.json (fd) and the agent's names for it, once. */
static int item_state(struct spool *sp, const char *id, int fd, struct item_files *f)
{
        struct stat st;
        int r;

        f->id = id;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_nlink == 0)
                return IS_GONE;         /* archived by another daemon since our open */
        f->st = st;
        r = item_names(f, id);
        if (r < 0)
                return r;
        f->doc = verified_lookup(sp, id, &st);
        if (!f->doc) {
                /* Whatever is not the daemon's record is verified as an
                 * earlier version's item. */
                r = delivery_record_read(sp, fd, &st, &f->doc);
                if (r == -ENOMSG)
                        return legacy_state(sp, id, fd, &st, f);
                if (r < 0)
                        return r;
                verified_store(sp, id, &st, f->doc);
        }
        f->a = spool_agent(sp, json_string_value(json_object_get(f->doc, "to_agent")));
        if (!f->a)
                return IS_NOT_OURS;     /* another daemon's agent (or no more) */
        f->files = item_look(f);
        if ((f->files & F_PENDING) && !pending_is_record(f, fd)) {
                char q[300];
                if (unlinkat(f->a->handoffs_fd, f->pname, 0) == 0)
                        f->a->dirty = true;
                f->files &= ~F_PENDING;
                log_info("Removed %s: not the record of claimed item %s (a later look at its "
                         "handoff, cut short by a crash)", log_quote(f->pname, q, sizeof(q)), id);
        }
        return item_by_files[f->files];
}

static void item_files_clear(struct item_files *f)
{
        json_decref(f->doc);
        json_decref(f->marker);
        *f = (struct item_files){ 0 };
}

static int act_none(struct spool *sp, struct item_files *f, int64_t now)
{
        return 0;
}

static int act_reject(struct spool *sp, struct item_files *f, int64_t now)
{
        char q[300];

        log_warning("Claimed item %s no longer verifies (%s: %s): not delivered",
                    log_quote(f->id, q, sizeof(q)), hd_reason_name(f->v.reason), f->v.detail);
        return reject_tampered(sp, f, now);
}

/* The record is there, the publish was not done. */
static int act_publish(struct spool *sp, struct item_files *f, int64_t now)
{
        int r;

        /* The record on disk first (a failed sync may have left it not);
         * what left claimed/ in this sweep is on disk where it went. */
        if ((r = spool_sync_dir(sp, SD_CLAIMED)) < 0)
                return r;
        r = delivery_publish(sp, f->a, f->id);
        if (r < 0)
                return r;
        bool retry = json_object_get(sp->failed, f->id) != NULL;
        json_object_del(sp->failed, f->id);
        if (retry)
                sp->st.retried++;
        else
                sp->st.recovered++;
        log_decision(LOG_NOTICE, f->id, f->a->cfg->name, retry ? "retried" : "recovered", NULL,
                     "Published %s to %s after a restart or failure", f->id, f->a->cfg->name);
        return spool_flush(sp);
}

/* The bootstrap's taking (a consumer's, which may not sync it, or the
 * expiry's rename) on disk before the item is archived: else a power cut
 * brings the bootstrap back beside an archived item. */
static int sync_taken(struct spool *sp, struct agent_rt *a)
{
        return sp->cfg->fsync ? fsync_dir(a->handoffs_fd) : 0;
}

/* The .expire. (.cancel.) name is the record of an expiry (a cancel)
 * until its archive is on disk (a power cut could otherwise keep its
 * removal and lose the move, and the item would be taken for consumed). */
static int drop_taken(struct spool *sp, struct item_files *f, const char *name, int archived)
{
        int r = sp->cfg->fsync ? spool_flush(sp) : 0;

        if (r < 0)
                return r;
        if (unlinkat(f->a->handoffs_fd, name, 0) == 0)
                f->a->dirty = true;
        return archived;
}

/* An expiry's or a cancel's taking, cut short: a bootstrap or hidden
 * bootstrap still there goes, and the taking is on disk before the item
 * is archived. */
static int withdraw_names(struct spool *sp, struct item_files *f)
{
        if (f->files & F_BOOT)
                unlinkat(f->a->handoffs_fd, f->bname, 0);
        if (f->files & F_PENDING)
                unlinkat(f->a->handoffs_fd, f->pname, 0);
        return sync_taken(sp, f->a);
}

/* An expiry that was cut short: finish it. */
static int act_archive_expired(struct spool *sp, struct item_files *f, int64_t now)
{
        int r = withdraw_names(sp, f);

        if (r < 0)
                return r;
        r = archive(sp, f, "expired", now);
        return r < 0 ? r : drop_taken(sp, f, f->xname, r);
}

static int act_archive_consumed(struct spool *sp, struct item_files *f, int64_t now)
{
        if (consume_in_progress(f->a, f->bname)) {
                deadline_note(&sp->deadline, now + BUSY_RETRY_USEC);
                return 0;
        }
        int r = sync_taken(sp, f->a);
        if (r < 0)
                return r;
        return archive(sp, f, "consumed", now);
}

static int act_wait_or_expire(struct spool *sp, struct item_files *f, int64_t now)
{
        int64_t deadline = item_accepted(f, now) + sp->cfg->resume_window * 1000000LL;
        struct agent_rt *a = f->a;
        int r;

        if (now < deadline) {
                deadline_note(&sp->deadline, deadline);
                return 0;
        }
        /* Take the bootstrap as a consumer would, so a consumer racing us
         * either got it (consumed) or finds nothing.  The taken name is
         * also the record of the expiry, should we die before the end. */
        if (renameat(a->handoffs_fd, f->bname, a->handoffs_fd, f->xname) < 0) {
                if (errno != ENOENT)
                        return -errno;
                if ((r = sync_taken(sp, a)) < 0)
                        return r;
                return archive(sp, f, "consumed", now);
        }
        if ((r = sync_taken(sp, a)) < 0)
                return r;
        r = archive(sp, f, "expired", now);
        if (r < 0)
                return r;       /* .expire.NAME tells the retry */
        return drop_taken(sp, f, f->xname, r);
}

static int act_taken_not_cancelable(struct spool *sp, struct item_files *f, int64_t now);

/* A cancel that was cut short (or just made: act_cancel): finish it.
 * Its sender's requests are answered once the taken name is on disk: from
 * then on the item ends canceled whatever crash comes (a request read
 * again after one finds the item archived and could no longer tell that
 * it was the one). */
static int act_archive_canceled(struct spool *sp, struct item_files *f, int64_t now)
{
        int r = withdraw_names(sp, f);

        if (r < 0)
                return r;
        cancel_answer(sp, f->id, json_string_value(json_object_get(f->doc, "from_agent")),
                      CA_CANCELED);
        r = archive(sp, f, "canceled", now);
        if (r < 0)
                return r;       /* .cancel.NAME tells the retry */
        json_object_del(sp->failed, f->id);     /* a publish to retry: none now */
        return drop_taken(sp, f, f->cname, r);
}

/* Its sender takes it back: the bootstrap is taken by the rename a
 * consumer makes, as the expiry takes it, so of a consumer and the cancel
 * exactly one wins; not yet published, its hidden name is taken, and the
 * agent never sees it.  The taken name is the record of the cancel until
 * its archive is on disk. */
static int act_cancel(struct spool *sp, struct item_files *f, int64_t now)
{
        struct agent_rt *a = f->a;
        bool published = f->files & F_BOOT;

        if (renameat(a->handoffs_fd, published ? f->bname : f->pname, a->handoffs_fd,
                     f->cname) < 0) {
                if (errno != ENOENT)
                        return -errno;
                if (!published) {
                        /* Only a daemon moves a hidden name, and we hold
                         * the id's lock: look again. */
                        deadline_note(&sp->deadline, now);
                        return 0;
                }
                /* The consumer won. */
                f->files &= ~F_BOOT;
                return act_taken_not_cancelable(sp, f, now);
        }
        a->dirty = true;
        f->files = (f->files & ~(published ? F_BOOT : F_PENDING)) | F_CANCEL;
        return act_archive_canceled(sp, f, now);
}

/* Ended already, or its agent has it: the cancel comes too late. */
static int act_expired_not_cancelable(struct spool *sp, struct item_files *f, int64_t now)
{
        f->answer = CA_NOT_CANCELABLE;
        return act_archive_expired(sp, f, now);
}

static int act_taken_not_cancelable(struct spool *sp, struct item_files *f, int64_t now)
{
        f->answer = CA_NOT_CANCELABLE;
        return act_archive_consumed(sp, f, now);
}

/* An earlier version's item, verified: made a record.  Its bootstrap
 * (the daemon's file, built from the bytes verified at its claim) becomes
 * the record, replacing the producer's file in one rename; the marker
 * goes after.  Never visible (no marker, no published bootstrap): it is
 * delivered as new.  Marked and taken: archived as it is. */
static int act_convert(struct spool *sp, struct item_files *f, int64_t now)
{
        const char *src = (f->files & F_EXPIRE) ? f->xname : (f->files & F_BOOT) ? f->bname :
                          (f->files & F_PENDING) ? f->pname : NULL;
        int r;

        if (!f->marker && !(f->files & F_BOOT)) {
                unlinkat(f->a->handoffs_fd, f->xname, 0);
                r = delivery_run(sp, f->a, f->doc, now, true);
                if (r == -EAGAIN) {     /* the baton lock: soon again */
                        deadline_note(&sp->deadline, now + 100000);
                        return 0;
                }
                if (r < 0)
                        return r;
                sp->st.recovered++;
                log_decision(LOG_NOTICE, f->id, f->a->cfg->name, "recovered", NULL,
                             "Delivered %s to %s after a restart (claimed by an earlier "
                             "version, never delivered)", f->id, f->a->cfg->name);
                return 0;
        }
        if (!src)
                return act_archive_consumed(sp, f, now);
        r = delivery_record_from(sp, f->a, f->id, src);
        if (r < 0)
                return r;
        r = spool_flush(sp);
        if (r < 0)
                return r;
        if (unlinkat(sp->fd[SD_CLAIMED], f->mname, 0) == 0)
                sp->dirty[SD_CLAIMED] = true;
        log_info("Converted claimed item %s of an earlier version to a record", f->id);
        /* Looked at again as a record at once. */
        deadline_note(&sp->deadline, now);
        return 0;
}

/* state -> action: the one place that says what happens next. */
static int (*const item_actions[_IS_MAX])(struct spool *, struct item_files *, int64_t) = {
        [IS_GONE]      = act_none,              /* another daemon finished it */
        [IS_NOT_OURS]  = act_none,              /* another daemon's agent */
        [IS_TAMPERED]  = act_reject,            /* withdraw, reject as changed */
        [IS_LEGACY]    = act_convert,           /* an earlier version's: a record */
        [IS_HIDDEN]    = act_publish,
        [IS_PUBLISHED] = act_wait_or_expire,
        [IS_EXPIRING]  = act_archive_expired,
        [IS_CANCELING] = act_archive_canceled,
        [IS_TAKEN]     = act_archive_consumed,  /* unless a consume is in progress */
};

/* state -> action when its sender asks to cancel it (cancel_wanted());
 * the first four never get here: the item's sender is not known yet. */
static int (*const item_cancel_actions[_IS_MAX])(struct spool *, struct item_files *, int64_t) = {
        [IS_GONE]      = act_none,
        [IS_NOT_OURS]  = act_none,
        [IS_TAMPERED]  = act_reject,
        [IS_LEGACY]    = act_convert,
        [IS_HIDDEN]    = act_cancel,            /* never shown to its agent */
        [IS_PUBLISHED] = act_cancel,            /* unless its consumer wins */
        [IS_EXPIRING]  = act_expired_not_cancelable,
        [IS_CANCELING] = act_archive_canceled,
        [IS_TAKEN]     = act_taken_not_cancelable,
};

int item_state_at(struct spool *sp, const char *id, int fd)
{
        struct item_files f = {};
        int s;

        s = item_state(sp, id, fd, &f);
        item_files_clear(&f);
        return s;
}

int item_check_locked(struct spool *sp, const char *id, int fd, int64_t now)
{
        struct item_files f = {};
        const char *from = NULL;
        bool cancel = false;
        int s, r;

        s = item_state(sp, id, fd, &f);
        /* A record says who sent it: only that sender's request counts
         * (the others' are refused first, so they hold nothing up). */
        if (s >= IS_HIDDEN) {
                from = json_string_value(json_object_get(f.doc, "from_agent"));
                cancel_answer(sp, id, from, CA_NONE);
                cancel = cancel_wanted(sp, id, from);
        }
        r = s < 0 ? s : (cancel ? item_cancel_actions : item_actions)[s](sp, &f, now);
        if (r >= 0 && cancel)
                cancel_answer(sp, id, from, f.answer);
        if (s == IS_GONE || r > 0)
                verified_forget(sp, id);    /* archived */
        /* What waits for each agent (quota.c): released by the daemon
         * that archives or rejects it (IS_GONE: another one did). */
        if ((r > 0 || (s == IS_TAMPERED && r == 0)) && f.a)
                quota_release(sp, f.a->cfg->name, id);
        else if (s > IS_TAMPERED && r == 0 && f.a && f.doc)
                quota_note(sp, f.a->cfg->name, id,
                           json_string_value(json_object_get(f.doc, "from_agent")));
        item_files_clear(&f);
        return r;
}
