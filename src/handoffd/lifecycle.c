/* Lifecycle after the claim (handoffd(8), OPERATION: "States" and
 * "Durability and crash windows"): when a claimed item is looked at (the sweep
 * over claimed/, a deadline, a bootstrap gone from an agent's handoffs/),
 * with the lock of its id held (lock.h), as the claimer does, so two
 * daemons never act on one item at once; a busy item is looked at again
 * later, never waited for.  What is done then is item.c's state table.
 * The sweep also removes what a crash left (temp files, orphan .pending.,
 * .expire. and .cancel. names, an earlier version's markers without an
 * item), looks at the cancel requests again (cancel.c), runs intake's
 * expiry of items left for other agents, retention and the metrics. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#include "agents.h"
#include "cancel.h"
#include "intake.h"
#include "files.h"
#include "item.h"
#include "layout.h"
#include "lifecycle.h"
#include "lock.h"
#include "log.h"
#include "parts.h"
#include "metrics.h"
#include "quota.h"
#include "completion.h"
#include "retention.h"
#include "verified.h"

#define BUSY_RETRY_USEC 1000000LL

int lifecycle_check(struct parts *p, const char *id, int64_t now)
{
        struct spool *sp = p->sp;
        char name[NAME_MAX + 1];
        _cleanup_close_ int fd = -1;
        uint64_t off;
        hd_verdict v;
        int r;

        if (!hd_id_valid(id) || xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                return 0;
        off = lock_off_id(id);
        r = lock_try(sp->lock_fd, off, true);
        if (r == -EAGAIN) {
                deadline_note(&p->deadline, now + BUSY_RETRY_USEC);
                return 0;
        }
        if (r < 0)
                return r;
        /* Opened under the lock: what another daemon finished before it
         * is no longer here. */
        r = hd_open_at(sp->fd[SD_CLAIMED], name, &fd, &v);
        if (r == 0)
                r = item_check_locked(p, id, fd, now, NULL);
        else if (r == -EBADMSG) {
                /* A claimed name that is no regular file: not something we
                 * claimed (its id stays remembered).  Gone meanwhile
                 * (IO_GONE) is done as well. */
                r = store_reject_claimed(sp, id, v.reason, v.detail, now, NULL);
        } else if (r == -ENOENT) {
                /* Not claimed (yet, or any more): a cancel request for
                 * it waits, or is answered when the id has an outcome. */
                cancel_unclaimed(p, id);
                r = 0;
        }
        lock_release(sp->lock_fd, off);
        return r;
}

int lifecycle_bootstrap_gone(struct parts *p, const char *name, int64_t now)
{
        char id[NAME_MAX + 1];
        size_t l = strlen(name);

        /* A consumer that took NAME by renaming it to .consume.PID.RAND.NAME
         * (hd_consume) has now deleted that: look at NAME's item at once,
         * rather than at the next sweep. */
        if (layout_classify(name) == LK_CONSUME) {
                name = layout_consume_target(name);
                if (!name)
                        return 0;
                l = strlen(name);
        }
        /* A valid id's bootstrap name is the id plus ".json". */
        if (name[0] == '.' || l < 6 || l - 5 >= sizeof(id) || strcmp(name + l - 5, ".json"))
                return 0;
        memcpy(id, name, l - 5);
        id[l - 5] = '\0';
        return lifecycle_check(p, id, now);
}

/* .pending.NAME, .expire.NAME and .cancel.NAME whose item has no record
 * in claimed/: a crash after the archive, before the unlink, or after the hidden
 * bootstrap, before the record (the claim): never visible, and the
 * producer's file is still in handoff/.  An id another daemon is
 * delivering right now (its lock held) is left alone. */
static void remove_orphans(struct spool *sp, struct agent_rt *a)
{
        struct dirent *de;
        DIR *d;

        d = opendir_at(a->handoffs_fd);
        if (!d)
                return;
        while ((de = readdir(d))) {
                const char *n = de->d_name, *base = layout_hidden_target(n);
                char id[NAME_MAX + 1];
                size_t l;
                if (!base || (l = strlen(base)) < 6 || strcmp(base + l - 5, ".json"))
                        continue;
                /* The bootstrap name is the id + ".json", the claimed name too. */
                if (spool_exists_at(sp->fd[SD_CLAIMED], base))
                        continue;
                memcpy(id, base, l - 5);
                id[l - 5] = '\0';
                uint64_t off = lock_off_id(id);
                if (lock_try(sp->lock_fd, off, true) < 0)
                        continue;
                if (!spool_exists_at(sp->fd[SD_CLAIMED], base) && store_boot_remove(sp, a, n) == 0)
                        log_info("Removed '%s', left by a crash (its item has no record in claimed/)", n);
                lock_release(sp->lock_fd, off);
        }
        closedir(d);
}

int lifecycle_sweep_begin(struct parts *p, int64_t now, bool at_start)
{
        struct spool *sp = p->sp;
        DIR *dir;

        (void)now;
        if (p->lc->sweep.dir) {
                /* Items it has passed may have changed: once more after it. */
                p->lc->sweep.again = true;
                return 0;
        }
        if (at_start) {
                /* Every daemon holds its running byte shared while it
                 * runs; getting it exclusively means we are alone.  Another
                 * daemon holds it exclusively only for this instant. */
                bool sole = lock_try(sp->lock_fd, LOCK_OFF_RUNNING, true) == 0;
                for (int i = 0; i < 100; i++) {
                        if (lock_try(sp->lock_fd, LOCK_OFF_RUNNING, false) != -EAGAIN)
                                break;
                        usleep(1000);
                }
                store_remove_temps(sp, sole);
                for (size_t i = 0; i < sp->n_agents; i++)
                        remove_orphans(sp, &sp->agents[i]);
        }
        deadline_reset(&p->deadline);
        deadline_reset(&sp->due);
        p->verified.gen++;
        /* After a start or a reload, what a kill left counted goes, and
         * this sweep's looks count every claimed item (quota.c). */
        bool recount = p->quota.recount;
        p->quota.recount = false;
        if (recount)
                quota_repair(sp);
        /* Read as it goes (a claimed backlog of any size costs no
         * memory): an entry the checks move out or add meanwhile may be
         * seen or not, and either is fine (a marker is kept while its item
         * is there). */
        dir = opendir_at(sp->fd[SD_CLAIMED]);
        if (!dir) {
                p->quota.recount |= recount;
                return spool_error(sp, -errno, "Cannot list claimed/");
        }
        p->lc->sweep = (struct sweep){ .dir = dir, .at_start = at_start };
        p->quota.counting = recount;
        return 0;
}

/* What a sweep does once it has seen every claimed item. */
static void sweep_end(struct parts *p, int64_t now)
{
        struct spool *sp = p->sp;
        bool at_start = p->lc->sweep.at_start;
        /* Sweeps also come at every deadline; retention and metrics list
         * whole directories, so they run at most once per rescan_interval. */
        bool house = at_start || now - p->lc->housekeeping_at >= sp->cfg->rescan_interval * 1000000LL;

        intake_foreign_due(p, now);
        cancel_scan(p, now);
        /* The agents' results (completion.c): at the housekeeping, as inotify
         * is a hint, and at once when one waited for its item. */
        if (house || p->results->due)
                completion_scan(p, now);
        if (house) {
                p->lc->housekeeping_at = now;
                if (!p->quota.counting)         /* repaired at its start */
                        quota_repair(sp);
                retention_run(sp, &p->retention, now);
                int q = metrics_write(sp, now);
                if (q < 0)
                        log_warning_errno(q, "Cannot write the metrics textfile %s",
                                          sp->cfg->metrics_textfile);
        } else {
                retention_rejected_due(sp, &p->retention, &p->deadline, now);
        }
}

int lifecycle_sweep_step(struct parts *p, int64_t now, int64_t budget_usec, bool *ret_more)
{
        struct spool *sp = p->sp;
        int64_t t0 = mono_usec();
        struct dirent *de;
        bool more = true;
        int r = 0, q;

        if (!p->lc->sweep.dir) {
                *ret_more = false;
                return 0;
        }
        for (;;) {
                if (mono_usec() - t0 > budget_usec)
                        goto out;       /* the rest at the next turn */
                errno = 0;
                de = readdir(p->lc->sweep.dir);
                if (!de) {
                        r = -errno;
                        break;
                }
                const char *k = de->d_name;
                size_t l = strlen(k);
                if (k[0] == '.')
                        continue;
                char id[NAME_MAX + 1];
                if (layout_strip(k, LAYOUT_DELIVERED, id, sizeof(id)) == 0) {
                        /* A marker outlives its item only when the archive
                         * was cut short after the move: it is done with. */
                        char item[NAME_MAX + 1];
                        if ((xsnprintf(item, sizeof(item), "%s.json", id) < 0 ||
                             !spool_exists_at(sp->fd[SD_CLAIMED], item)))
                                (void) store_remove(sp, SD_CLAIMED, k);
                        continue;
                }
                if (l < 6 || strcmp(k + l - 5, ".json") || l - 5 >= sizeof(id))
                        continue;
                memcpy(id, k, l - 5);
                id[l - 5] = '\0';
                q = lifecycle_check(p, id, now);
                if (q < 0 && p->lc->sweep.first == 0) {
                        p->lc->sweep.first = q;
                        spool_error(sp, q, "Cannot finish claimed item %s", id);
                }
        }
        closedir(p->lc->sweep.dir);
        p->lc->sweep.dir = NULL;
        if (r < 0) {
                spool_error(sp, r, "Cannot list claimed/");
        } else {
                /* Seen by no look of this sweep: no longer claimed. */
                verified_forget_older(&p->verified, p->verified.gen);
                sweep_end(p, now);
        }
        more = false;
        if (p->lc->sweep.again) {
                r = lifecycle_sweep_begin(p, now, false);
                more = r == 0;
        } else if (r == 0 && p->lc->sweep.first) {
                r = p->lc->sweep.first;
        }
out:
        /* A failed sync is said there, once, and retried there. */
        (void)store_flush(sp);
        if (r < 0)
                return r;
        *ret_more = more;
        return 0;
}

int lifecycle_sweep(struct parts *p, int64_t now, bool at_start)
{
        int r = lifecycle_sweep_begin(p, now, at_start);
        bool more = p->lc->sweep.dir != NULL;

        while (r == 0 && more)
                r = lifecycle_sweep_step(p, now, INT64_MAX, &more);
        return r;
}

int lifecycle_new(struct lifecycle **ret)
{
        struct lifecycle *lc = calloc(1, sizeof(*lc));

        if (!lc)
                return -ENOMEM;
        *ret = lc;
        return 0;
}

void lifecycle_free(struct lifecycle *lc)
{
        if (!lc)
                return;
        if (lc->sweep.dir)
                closedir(lc->sweep.dir);
        free(lc);
}
