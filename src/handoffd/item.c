/* The claimed item's state machine (DESIGN.md "Lifecycle after claim" and
 * "Durability and recovery").  A claimed item is claimed/<id>.json; once
 * its bootstrap is written, claimed/<id>.delivered (the marker) records
 * where and when.  item_state() reads the item's files once and names its
 * state; item_actions[] says what is done in each, in the manner of a
 * state x event table with one event: "look at it" (the sweep, a deadline,
 * a bootstrap gone).  The caller (lifecycle_check) holds the lock of the
 * id (lock.h), as the claimer does, so two daemons never act on one item
 * at once.  The content of claimed/<id>.json is verified again each time
 * it is read: the producer still owns that inode and may have rewritten
 * it since the claim. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deadline.h"
#include "delivery.h"
#include "files.h"
#include "intake.h"
#include "layout.h"
#include "item.h"
#include "log.h"
#include "quota.h"
#include "verified.h"

#define BUSY_RETRY_USEC 1000000LL

/* What item_state() read off the files, for the action. */
struct item_files {
        const char *id;
        json_t *doc;            /* claimed/<id>.json, verified (NULL: tampered) */
        json_t *marker;         /* claimed/<id>.delivered, or NULL */
        struct agent_rt *a;
        hd_verdict v;           /* why it no longer verifies */
        char bname[NAME_MAX + 1], pname[NAME_MAX + 1], xname[NAME_MAX + 16];
        char mname[NAME_MAX + 1];
        unsigned files;         /* F_*: which of them are there */
        bool stub;              /* doc holds only from/to, from the cache */
};

enum { F_EXPIRE = 1, F_BOOT = 2, F_PENDING = 4, F_MARKER = 8 };

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

static int write_marker(struct spool *sp, const char *mname, json_t *m)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        r = hd_canon_dump(m, NULL, &buf, &len);
        if (r < 0)
                return r;
        /* On disk (fsync = yes) before anything else happens: it holds the
         * outcome an interrupted expiry must end with, once its bootstrap
         * is gone.  claimed/ synced through spool_flush(), which syncs the
         * directories earlier moves went to first. */
        r = write_atomic(sp->fd[SD_CLAIMED], mname, buf, len, 0640,
                         sp->cfg->fsync ? WRITE_SYNC_FILE : 0);
        if (r == 0) {
                sp->dirty[SD_CLAIMED] = true;
                if (sp->cfg->fsync)
                        r = spool_flush(sp);
        }
        return r;
}

/* Whether id already names the two agents: "FROM-TO-..." or, as the real
 * writer makes them, "UNIXTIME-FROM-TO-...". */
static bool id_names_agents(const char *id, const char *from, const char *to)
{
        size_t lf = strlen(from), lt = strlen(to);

        if (isdigit((unsigned char)*id)) {
                const char *p = id + strspn(id, "0123456789");
                if (*p == '-' && !strncmp(p + 1, from, lf) && p[1 + lf] == '-' &&
                    !strncmp(p + 2 + lf, to, lt) && p[2 + lf + lt] == '-')
                        return true;
        }
        return !strncmp(id, from, lf) && id[lf] == '-' && !strncmp(id + lf + 1, to, lt) &&
               id[lf + 1 + lt] == '-';
}

/* Move claimed/<id>.json to archive/ with its .outcome.  The archive name
 * (the real implementation's "{unix_ts}-{from}-{to}-{id}.json", ts = when
 * it ended; "{unix_ts}-{id}.json" when the id already names from and to)
 * is chosen once and kept in the marker first, so a crash in the middle
 * and the retry after it end with one name and one sidecar. */
static int archive(struct spool *sp, const char *id, const json_t *doc, json_t *marker,
                   const char *mname, const char *outcome, int64_t now)
{
        const char *from = json_string_value(json_object_get(doc, "from_agent"));
        const char *to = json_string_value(json_object_get(doc, "to_agent"));
        const char *acc = json_string_value(json_object_get(marker, "accepted_at"));
        const char *name = json_string_value(json_object_get(marker, "archive_as"));
        char fresh[NAME_MAX + 1], side[NAME_MAX + 16], src[NAME_MAX + 1], at[HD_TIME_MAX];
        _cleanup_free_ char *buf = NULL;
        json_t *o;
        size_t len;
        int r;

        if (!name || !hd_name_safe(name)) {
                struct stat st;
                for (unsigned n = 0;; n++) {
                        if (n >= 100)
                                return -EEXIST;
                        if (from && to && id_names_agents(id, from, to))
                                snprintf(fresh, sizeof(fresh), n ? "%lld-%s~%u.json" : "%lld-%s.json",
                                         (long long)(now / 1000000), id, n);
                        else
                                snprintf(fresh, sizeof(fresh),
                                         n ? "%lld-%s-%s-%s~%u.json" : "%lld-%s-%s-%s.json",
                                         (long long)(now / 1000000), from ? from : "unknown",
                                         to ? to : "unknown", id, n);
                        if (fstatat(sp->fd[SD_ARCHIVE], fresh, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                break;
                }
                name = fresh;
                json_object_set_new(marker, "archive_as", json_string(fresh));
                json_object_set_new(marker, "outcome", json_string(outcome));
                r = write_marker(sp, mname, marker);
                if (r < 0)
                        return r;
        } else {
                /* A retry: the outcome decided first stands. */
                const char *o0 = json_string_value(json_object_get(marker, "outcome"));
                if (o0 && (!strcmp(o0, "consumed") || !strcmp(o0, "expired")))
                        outcome = o0;
        }
        hd_time_format(now, at, sizeof(at));
        r = layout_suffixed(name, LAYOUT_OUTCOME, side, sizeof(side));
        if (r < 0)
                return r;
        snprintf(src, sizeof(src), "%s.json", id);
        o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "handoff_id", id, "outcome", outcome,
                      "from_agent", from ? from : "", "to_agent", to ? to : "",
                      "archived_at", at, "accepted_at", acc ? acc : "");
        if (!o)
                return -ENOMEM;
        r = hd_canon_dump(o, NULL, &buf, &len);
        json_decref(o);
        if (r < 0)
                return r;
        /* Outcome first: an archived item always says how it ended.  And
         * the id is remembered before the item leaves claimed/, so a
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
        unlinkat(sp->fd[SD_CLAIMED], mname, 0);
        sp->dirty[SD_ARCHIVE] = sp->dirty[SD_CLAIMED] = true;
        if (!strcmp(outcome, "consumed"))
                sp->st.consumed++;
        else
                sp->st.expired++;
        log_decision(LOG_INFO, id, to, outcome, NULL, "Archived %s as %s", id, outcome);
        return 1;
}


/* A claimed item that no longer verifies: nothing of it may reach the
 * agent from now on.  A bootstrap not yet taken is withdrawn (it was built
 * from the verified bytes, but the item's record is gone), the marker and
 * a hidden bootstrap go, and the item ends in rejected/ with the reason. */
static int reject_tampered(struct spool *sp, struct agent_rt *a, const char *id,
                           const char *bname, const char *pname, const char *xname,
                           const hd_verdict *v, int64_t now)
{
        char mname[NAME_MAX + 1], detail[HD_DETAIL_MAX + 64];
        int r;

        if (renameat(a->handoffs_fd, bname, a->handoffs_fd, xname) == 0 || errno == ENOENT)
                unlinkat(a->handoffs_fd, xname, 0);
        unlinkat(a->handoffs_fd, pname, 0);
        a->dirty = true;
        snprintf(detail, sizeof(detail), "changed after its claim: %s", v->detail);
        r = spool_reject_claimed(sp, id, v->reason, detail, now);
        if (r < 0)
                return r;
        if (layout_suffixed(id, LAYOUT_DELIVERED, mname, sizeof(mname)) == 0 &&
            unlinkat(sp->fd[SD_CLAIMED], mname, 0) == 0)
                sp->dirty[SD_CLAIMED] = true;
        json_object_del(sp->failed, id);
        return 0;
}


/* The files of a verified item with a marker or not -> its state.  Index:
 * F_MARKER, F_PENDING, F_BOOT, F_EXPIRE.  Without a marker only
 * the bootstrap counts: a hidden bootstrap of an unmarked item is
 * rewritten by the delivery, a .expire. name without a marker is never
 * made.  With one, a cut-short expiry wins, then a published bootstrap.
 * The item's own content comes first: IS_NOT_OURS and IS_TAMPERED are
 * decided before the files are looked at. */
static const enum item_state item_by_files[16] = {
        /* marker pending boot expire */
        [0x0] = IS_CLAIMED,     /* no  no  no  no  */
        [0x1] = IS_CLAIMED,     /* no  no  no  yes */
        [0x2] = IS_UNMARKED,    /* no  no  yes no  */
        [0x3] = IS_UNMARKED,    /* no  no  yes yes */
        [0x4] = IS_CLAIMED,     /* no  yes no  no  */
        [0x5] = IS_CLAIMED,     /* no  yes no  yes */
        [0x6] = IS_UNMARKED,    /* no  yes yes no  */
        [0x7] = IS_UNMARKED,    /* no  yes yes yes */
        [0x8] = IS_TAKEN,       /* yes no  no  no  */
        [0x9] = IS_EXPIRING,    /* yes no  no  yes */
        [0xa] = IS_PUBLISHED,   /* yes no  yes no  */
        [0xb] = IS_EXPIRING,    /* yes no  yes yes */
        [0xc] = IS_MARKED,      /* yes yes no  no  */
        [0xd] = IS_EXPIRING,    /* yes yes no  yes */
        [0xe] = IS_PUBLISHED,   /* yes yes yes no  */
        [0xf] = IS_EXPIRING,    /* yes yes yes yes */
};

/* Read claimed/<id>.json (fd) and the item's other files, once. */
static int item_state_files(struct spool *sp, const char *id, int fd, struct item_files *f,
                            bool cached)
{
        _cleanup_free_ char *buf = NULL;
        hd_limits lim = { .max_size = sp->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        struct stat st;
        size_t len;
        bool readable;
        int r;

        f->id = id;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_nlink == 0)
                return IS_GONE;         /* archived by another daemon since our open */
        f->doc = cached ? verified_lookup(sp, id, fd, &st) : NULL;
        if (f->doc) {
                f->stub = true;
                readable = true;
                goto known;
        }
        /* From the start: a look at the cache may have read it. */
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        r = read_fd_stat(fd, &st, id, sp->cfg->max_file_size, &buf, &len, &f->v);
        if (r == -EBADMSG && f->v.reason == HD_R_HARDLINK) {
                /* Its other link a claim left in handoff/, its archive,
                 * or a producer's tmp/ name a power cut kept: not
                 * tampering. */
                char name[NAME_MAX + 1];
                if (spool_drop_archived_leftover(sp, id))
                        return IS_GONE;
                if (xsnprintf(name, sizeof(name), "%s.json", id) >= 0 &&
                    (spool_drop_claim_leftover(sp, name) ||
                     spool_drop_tmp_twin(sp, SD_CLAIMED, name))) {
                        if (fstat(fd, &st) < 0)
                                return -errno;
                        r = read_fd_stat(fd, &st, id, sp->cfg->max_file_size, &buf, &len, &f->v);
                }
        }
        if (r == -ENOENT)
                return IS_GONE;         /* archived by another daemon since our open */
        if (r < 0 && r != -EBADMSG)
                return r;
        readable = r == 0 && (r = hd_parse(buf, len, &lim, &f->doc, &f->v)) == 0;
        if (r < 0 && r != -EBADMSG)
                return r;
known:
        /* Not authenticated yet: only says whose item it may be. */
        f->a = spool_agent(sp, readable ? json_string_value(json_object_get(f->doc, "to_agent")) : NULL);
        if (!f->a && readable) {
                if (!f->stub)   /* whose it is, as these bytes say */
                        verified_store(sp, id, &st, buf, len, f->doc);
                return IS_NOT_OURS;     /* served by another daemon (or no more) */
        }
        r = hd_bootstrap_name(id, f->bname, sizeof(f->bname));
        if (r < 0)
                return r;
        r = layout_prefixed(LAYOUT_PENDING, f->bname, f->pname, sizeof(f->pname));
        if (r == 0)
                r = layout_prefixed(LAYOUT_EXPIRE, f->bname, f->xname, sizeof(f->xname));
        if (r == 0)
                r = layout_suffixed(id, LAYOUT_DELIVERED, f->mname, sizeof(f->mname));
        if (r < 0)
                return r;
        /* Unreadable now: whose it was is lost with its bytes.  The
         * bootstrap name tells, if one of our agents has one. */
        for (size_t i = 0; i < sp->n_agents && !f->a; i++)
                if (spool_exists_at(sp->agents[i].handoffs_fd, f->bname) ||
                    spool_exists_at(sp->agents[i].handoffs_fd, f->pname))
                        f->a = &sp->agents[i];
        if (!f->a)
                return IS_NOT_OURS;
        if (!f->stub) {
                if (!readable || intake_verify_claimed(sp, f->doc, id, &f->v) < 0) {
                        verified_forget(sp, id);
                        return IS_TAMPERED;
                }
                verified_store(sp, id, &st, buf, len, f->doc);
        }
        r = load_own(sp->fd[SD_CLAIMED], f->mname, 65536, &f->marker);
        if (r == -EBADMSG) {
                /* Its name is synced, its bytes are not (one fsync less per
                 * item): after a power loss it may be empty.  Being there is
                 * what says the bootstrap may have been seen. */
                f->marker = json_object();
                if (!f->marker)
                        return -ENOMEM;
        } else if (r < 0 && r != -ENOENT) {
                return r;
        }
        f->files = (f->marker ? F_MARKER : 0) |
                   (spool_exists_at(f->a->handoffs_fd, f->pname) ? F_PENDING : 0) |
                   (spool_exists_at(f->a->handoffs_fd, f->bname) ? F_BOOT : 0) |
                   (spool_exists_at(f->a->handoffs_fd, f->xname) ? F_EXPIRE : 0);
        return item_by_files[f->files];
}

static void item_files_clear(struct item_files *f)
{
        json_decref(f->doc);
        json_decref(f->marker);
        *f = (struct item_files){ 0 };
}

/* The state from the cache when the item is known and unchanged; read in
 * full when the action needs the document (a delivery). */
static int item_state(struct spool *sp, const char *id, int fd, struct item_files *f)
{
        int s = item_state_files(sp, id, fd, f, true);

        if (s == IS_CLAIMED && f->stub) {
                item_files_clear(f);
                s = item_state_files(sp, id, fd, f, false);
        }
        return s;
}

static int64_t item_accepted(const json_t *m, int64_t now)
{
        const char *acc = m ? json_string_value(json_object_get(m, "accepted_at")) : NULL;
        int64_t t;

        return acc && hd_time_parse(acc, &t) == 0 ? t : now;
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
        return reject_tampered(sp, f->a, f->id, f->bname, f->pname, f->xname, &f->v, now);
}

/* Never visible to the agent: deliver it (the first time, as far as the
 * agent can tell). */
static int act_deliver(struct spool *sp, struct item_files *f, int64_t now)
{
        bool retry = json_object_get(sp->failed, f->id) != NULL;
        struct agent_rt *a = f->a;
        int r;

        r = delivery_run(sp, a, f->doc, now);
        if (r == -EAGAIN) {     /* the baton lock: soon again */
                deadline_note(&sp->deadline, now + 100000);
                return 0;
        }
        if (r < 0)
                return r;
        json_object_del(sp->failed, f->id);
        if (retry)
                sp->st.retried++;
        else
                sp->st.recovered++;
        log_decision(LOG_NOTICE, f->id, a->cfg->name, retry ? "retried" : "recovered", NULL,
                     "Delivered %s to %s %s", f->id, a->cfg->name,
                     retry ? "after an earlier failure" : "after a restart (it was claimed, never delivered)");
        return 0;
}

/* Published by a version that wrote no marker first: record it as it is. */
static int act_mark(struct spool *sp, struct item_files *f, int64_t now)
{
        _cleanup_json_ json_t *boot = NULL;
        int r;

        load_own(f->a->handoffs_fd, f->bname, sp->cfg->max_file_size, &boot);
        r = delivery_mark(sp, f->a, f->id, item_accepted(boot, now));
        return r < 0 ? r : spool_flush(sp);
}

/* The marker is on disk, the publish was not done. */
static int act_publish(struct spool *sp, struct item_files *f, int64_t now)
{
        int r;

        r = delivery_publish(sp, f->a, f->id);
        if (r < 0)
                return r;
        json_object_del(sp->failed, f->id);
        sp->st.recovered++;
        log_decision(LOG_NOTICE, f->id, f->a->cfg->name, "recovered", NULL,
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

/* An expiry that was cut short: finish it. */
static int act_archive_expired(struct spool *sp, struct item_files *f, int64_t now)
{
        int r;

        if (f->files & F_BOOT)
                unlinkat(f->a->handoffs_fd, f->bname, 0);
        if ((r = sync_taken(sp, f->a)) < 0)
                return r;
        r = archive(sp, f->id, f->doc, f->marker, f->mname, "expired", now);
        if (r >= 0)
                unlinkat(f->a->handoffs_fd, f->xname, 0);
        return r;
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
        return archive(sp, f->id, f->doc, f->marker, f->mname, "consumed", now);
}

static int act_wait_or_expire(struct spool *sp, struct item_files *f, int64_t now)
{
        int64_t deadline = item_accepted(f->marker, now) + sp->cfg->resume_window * 1000000LL;
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
                return archive(sp, f->id, f->doc, f->marker, f->mname, "consumed", now);
        }
        if ((r = sync_taken(sp, a)) < 0)
                return r;
        r = archive(sp, f->id, f->doc, f->marker, f->mname, "expired", now);
        if (r < 0)
                return r;       /* .expire.NAME tells the retry */
        unlinkat(a->handoffs_fd, f->xname, 0);
        a->dirty = true;
        return r;
}

/* state -> action: the one place that says what happens next. */
static int (*const item_actions[_IS_MAX])(struct spool *, struct item_files *, int64_t) = {
        [IS_GONE]      = act_none,              /* another daemon finished it */
        [IS_NOT_OURS]  = act_none,              /* another daemon's agent */
        [IS_TAMPERED]  = act_reject,            /* withdraw, reject as changed */
        [IS_CLAIMED]   = act_deliver,           /* write, mark, publish */
        [IS_UNMARKED]  = act_mark,              /* bootstrap without marker */
        [IS_MARKED]    = act_publish,
        [IS_PUBLISHED] = act_wait_or_expire,
        [IS_EXPIRING]  = act_archive_expired,
        [IS_TAKEN]     = act_archive_consumed,  /* unless a consume is in progress */
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
        int s, r;

        s = item_state(sp, id, fd, &f);
        r = s < 0 ? s : item_actions[s](sp, &f, now);
        if (s == IS_GONE || r > 0)
                verified_forget(sp, id);    /* archived */
        /* What waits for each agent (quota.c): rebuilt by the sweep. */
        if (s == IS_GONE || r > 0 || (s == IS_TAMPERED && r == 0))
                quota_forget(sp, id);
        else if (s > IS_TAMPERED && r == 0 && f.a && f.doc)
                quota_note(sp, id, f.a->cfg->name,
                           json_string_value(json_object_get(f.doc, "from_agent")));
        item_files_clear(&f);
        return r;
}
