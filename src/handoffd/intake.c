/* Intake: the decisions for a batch of names in handoff/ (each one
 * decide.c's), then the claims of those that verified, each delivery step
 * (delivery.c) for the whole batch so that the batch shares its syncs;
 * items left for agents not served here decided again at their expiry;
 * the same checks on a claimed item read again (intake_verify_claimed).
 *
 * Exactly-once among several daemons on one spool rests on three things:
 * the claim is the link of the daemon's record as claimed/<handoff_id>.json
 * (a link never replaces), so of two files or two daemons with one id
 * only one wins; the claimer holds the lock of the id (lock.h: a byte of
 * SPOOL/.lock, which no producer can open) from before its verdict until
 * its bootstrap is published, so recovery in another daemon never
 * publishes an item that is being delivered; and ids/<handoff_id>
 * remembers every authenticated id after the item has left claimed/.
 * Nothing here waits for a lock. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"
#include "agents.h"
#include "deadline.h"
#include "decide.h"
#include "delivery.h"
#include "files.h"
#include "foreign.h"
#include "intake.h"
#include "lock.h"
#include "log.h"
#include "parts.h"

int intake_verify_claimed(struct spool *sp, json_t *doc, const char *id, struct handoff *ret,
                          hd_verdict *v)
{
        const struct config *c = sp->cfg;
        hd_policy pol = { .max_clock_skew_s = c->max_clock_skew, .max_window_s = c->max_window };
        hd_payload_opts po = { .roles = (const char *const *)c->roles };
        struct handoff h;
        const char *ini, *exp;
        int64_t at = 0;
        int r;

        /* Freshness was checked at the claim: verify as of the issue time,
         * when every signed handoff was fresh. */
        handoff_unverified_times(doc, &ini, &exp);
        if (ini)
                hd_time_parse(ini, &at);
        r = hd_verify(doc, config_key_lookup, (void *)c, &pol, &po, at, v);
        if (r < 0)
                return r;
        r = handoff_parse(doc, &h);
        if (r < 0)
                return r;
        if (strcmp(h.id, id)) {
                v->reason = HD_R_BAD_ID;
                snprintf(v->detail, sizeof(v->detail),
                         "claimed as '%s', now says handoff_id '%.64s'", id, h.id);
                handoff_clear(&h);
                return -EBADMSG;
        }
        if (!spool_agent(sp, h.to)) {
                v->reason = HD_R_BAD_AGENT;
                snprintf(v->detail, sizeof(v->detail),
                         "to_agent '%.64s' is not served here", h.to);
                handoff_clear(&h);
                return -EBADMSG;
        }
        if (ret)
                *ret = h;
        else
                handoff_clear(&h);
        return 0;
}

/* Still to be claimed: verified, and no step of its delivery failed. */
static bool to_claim(const struct item *it)
{
        return it->outcome == IO_TO_CLAIM && it->err == 0;
}

/* What intake_batch() reports for it: its outcome, or its system error. */
static int result(const struct item *it)
{
        return it->err < 0 ? it->err : (int)it->outcome;
}

/* Step 1's hidden bootstraps of a burst, written unsynced, synced
 * together (files.c fsync_many_at(): they share the device's flushes)
 * before any record is made: as durable, at the same point, as one
 * fsync each.  One that does not sync is removed again, as if its write
 * had failed: it is not claimed, a later look delivers it. */
static int sync_written(struct spool *sp, struct item *items, size_t n)
{
        _cleanup_free_ int *dirfds = NULL, *rets = NULL;
        _cleanup_free_ const char **names = NULL;
        _cleanup_free_ char (*pnames)[NAME_MAX + 1] = NULL;
        _cleanup_free_ size_t *idx = NULL;
        size_t k = 0, cap = n + sp->n_agents;
        int errors = 0;

        dirfds = calloc(cap, sizeof(*dirfds));
        rets = calloc(cap, sizeof(*rets));
        names = calloc(cap, sizeof(*names));
        pnames = calloc(cap, sizeof(*pnames));
        idx = calloc(cap, sizeof(*idx));
        if (!dirfds || !rets || !names || !pnames || !idx)
                return -ENOMEM;
        /* Their directories' new names in the same round: all were made
         * before any of these syncs starts. */
        for (size_t i = 0; i < sp->n_agents; i++)
                if (store_agent_take_dirty(&sp->agents[i])) {
                        dirfds[k] = sp->agents[i].handoffs_fd;
                        names[k] = NULL;
                        idx[k++] = SIZE_MAX;
                }
        for (size_t i = 0; i < n; i++) {
                if (!to_claim(&items[i]))
                        continue;
                if (delivery_pending_name(items[i].h.id, pnames[k], sizeof(pnames[k])) < 0)
                        return -EINVAL;         /* delivery_write() made it */
                dirfds[k] = items[i].agent->handoffs_fd;
                names[k] = pnames[k];
                idx[k++] = i;
        }
        if (fsync_many_at(dirfds, names, k, rets) == 0)
                return 0;
        for (size_t j = 0; j < k; j++) {
                if (rets[j] == 0)
                        continue;
                /* A directory: nothing of this burst may be recorded. */
                if (idx[j] == SIZE_MAX)
                        return rets[j];
                struct item *it = &items[idx[j]];
                (void) store_boot_remove(sp, it->agent, names[j]);
                decide_uncount(sp, it);
                it->err = rets[j];
                spool_error(sp, rets[j], "Cannot deliver %s to %s", it->h.id, it->agent->cfg->name);
                errors++;
        }
        return errors;
}

/* Its document freed; its id byte stays locked until the batch ends
 * (intake_batch() releases them all at once). */
static void item_release(struct spool *sp, struct item *it)
{
        (void)sp;
        json_decref(TAKE_PTR(it->doc));
        handoff_clear(&it->h);
}

/* The item will not be claimed this time: its hidden bootstrap goes, and
 * it no longer counts as waiting. */
static void drop_pending(struct spool *sp, struct item *it)
{
        char pname[NAME_MAX + 1];

        decide_uncount(sp, it);
        if (delivery_pending_name(it->h.id, pname, sizeof(pname)) == 0)
                (void) store_boot_remove(sp, it->agent, pname);
}

/* Its producer's file left handoff/ as the claim's step 2 moved it, and
 * the name no longer held that file (fsync = no: decide_claim() left
 * this look to the move).  Nothing of the claim is published yet: the
 * record goes, then the hidden bootstrap, and the name is decided anew
 * when it is seen again. */
static void withdraw(struct spool *sp, struct item *it)
{
        char rname[NAME_MAX + 1];
        char q[300];

        if (xsnprintf(rname, sizeof(rname), "%s.json", it->h.id) >= 0)
                (void) store_remove(sp, SD_CLAIMED, rname);
        drop_pending(sp, it);
        it->outcome = IO_GONE;
        log_info("Withdrew the claim of %s: handoff/%s is no longer the file decided on",
                 it->h.id, log_quote(it->name, q, sizeof(q)));
}

/* A step of an item's delivery failed (q < 0): before its record it is
 * not claimed, and stays in handoff/ for a later look (its hidden
 * bootstrap removed); after, it is claimed and the sweep publishes it. */
static int deliver_failed(struct parts *p, struct item *it, int step, int q, int64_t now)
{
        struct spool *sp = p->sp;
        if (step < 3)
                drop_pending(sp, it);
        if (q == -EAGAIN) {
                /* Another daemon holds the baton lock: not an error; a
                 * later look delivers it. */
                log_debug("Delivery of %s waits for the baton lock", it->h.id);
                it->outcome = IO_BUSY;
                return 0;
        }
        if (step < 3)
                it->err = q;
        else
                it->outcome = IO_CLAIMED;
        spool_error(sp, q, "Cannot deliver %s to %s", it->h.id, it->agent->cfg->name);
        if (step == 3)
                delivery_failed(p, it->h.id, now);
        return 1;
}

/* Steps 1-3 of delivery.c for the items of a batch to be claimed
 * (IO_TO_CLAIM), each step for the whole
 * batch, then one sync per directory; with fsync, a burst's bootstraps
 * are synced together, a lone one at once.  Returns the number of
 * errors; the items' outcomes are final; their documents and locks are
 * released. */
static int deliver(struct parts *p, struct item *items, size_t n, int64_t now)
{
        struct spool *sp = p->sp;
        int errors = 0, r = 0;
        size_t n_claimed = 0;

        for (size_t i = 0; i < n; i++)
                n_claimed += to_claim(&items[i]);
        bool sync_later = sp->cfg->fsync && n_claimed > 1;
        for (int step = 1; step <= 3; step++) {
                for (size_t i = 0; i < n; i++) {
                        struct item *it = &items[i];
                        int q;
                        if (!to_claim(it))
                                continue;
                        if (r < 0) {
                                /* A sync of the burst failed, and was
                                 * reported once. */
                                errors += deliver_failed(p, it, step, r, now);
                                continue;
                        }
                        if (step == 1)
                                q = delivery_write(p, it->agent, &it->h, now,
                                                   DELIVERY_NEW_CLAIM |
                                                   (sync_later ? DELIVERY_SYNC_LATER : 0));
                        else if (step == 2)
                                q = delivery_record(p, it->agent, it->h.id, false);
                        else
                                q = delivery_publish(p, it->agent, it->h.id);
                        if (step <= 2 && q == -EEXIST) {
                                /* Claimed already (decide_claim() left
                                 * the look to here): at step 1 the
                                 * .pending there is that claim's, at step
                                 * 2 ours. */
                                if (step == 2)
                                        drop_pending(sp, it);
                                else
                                        decide_uncount(sp, it);
                                q = decide_claimed_again(sp, it, "is already claimed", now,
                                                         &it->outcome);
                                if (q < 0) {
                                        it->err = q;
                                        errors++;
                                }
                        } else if (q < 0) {
                                errors += deliver_failed(p, it, step, q, now);
                        } else if (step == 2) {
                                if (store_drop_source(sp, it->name, it->dev, it->ino) < 0) {
                                        withdraw(sp, it);
                                        continue;
                                }
                                sp->st.claimed++;
                        } else if (step == 3) {
                                it->outcome = IO_CLAIMED;
                                p->delivery->backoff_usec = 0;
                                log_decision(LOG_INFO, it->h.id, it->agent->cfg->name, "claimed",
                                             NULL, "Claimed %s for %s", it->h.id,
                                             it->agent->cfg->name);
                        }
                }
                if (step == 1 && sync_later) {
                        int e = sync_written(sp, items, n);
                        if (e < 0) {
                                /* Not all synced: none may be recorded. */
                                spool_error(sp, e, "Cannot fsync the agents' handoffs/");
                                r = e;
                        } else {
                                errors += e;
                        }
                }
                /* Before the records, the hidden bootstraps are on disk;
                 * before the publish, the records (and the producers'
                 * names leave handoff/ after them). */
                if (r == 0)
                        r = store_flush(sp);    /* a failure said there, once */
        }
        /* What the failed sync left dirty: tried again when it is due. */
        (void)store_flush(sp);
        for (size_t i = 0; i < n; i++)
                item_release(sp, &items[i]);
        return errors;
}

int intake_batch(struct parts *p, char *const *names, size_t n,
                 int64_t now, int *outcomes)
{
        return intake_batch_looks(p, names, NULL, n, now, outcomes);
}

int intake_batch_looks(struct parts *p, char *const *names, struct pending_look *const *looks,
                       size_t n, int64_t now, int *outcomes)
{
        struct spool *sp = p->sp;
        struct item *items;
        struct fd_batch cl = { .n = 0 };
        int64_t t0 = mono_usec();
        int errors = 0, r;

        items = calloc(n ? n : 1, sizeof(*items));
        if (!items) {
                /* Every name a system error, so the caller's routing of
                 * outcomes (drain(): the retry timer, with its back-off)
                 * holds: nothing was looked at, each stays in handoff/. */
                spool_error(sp, -ENOMEM, "Cannot decide %zu name(s) in handoff/", n);
                for (size_t i = 0; outcomes && i < n; i++)
                        outcomes[i] = -ENOMEM;
                return (int)n;
        }
        /* The producers' descriptors, and with fsync = no the hidden
         * bootstraps' (delivery.c), closed together at the end: a burst's
         * looks (pending.c) opened the first one after the other, the
         * claims the others, so they are a few runs of numbers. */
        p->closing = &cl;
        for (size_t i = 0; i < n; i++) {
                items[i].name = names[i];
                items[i].fd = -1;
                items[i].look = looks ? looks[i] : NULL;
                /* Never hold the loop long: the rest waits for a later turn. */
                if (i > 0 && mono_usec() - t0 > INTAKE_BATCH_MAX_USEC) {
                        items[i].outcome = IO_SKIPPED;
                        if (outcomes)
                                outcomes[i] = IO_SKIPPED;
                        continue;
                }
                struct item *it = &items[i];
                r = decide_item(p, it, now, &it->outcome);
                if (r < 0)
                        it->err = r;
                /* Only the document of one to be claimed is needed (for
                 * delivery): a batch of big rejected ones must not add up. */
                if (!to_claim(it)) {
                        json_decref(TAKE_PTR(it->doc));
                        handoff_clear(&it->h);
                }
                if (it->fd >= 0)
                        fd_batch_add(&cl, TAKE_FD(it->fd));
                if (r < 0 || (it->outcome != IO_DEFERRED && it->outcome != IO_BUSY))
                        dict_del(&p->decide->seen, names[i]);
                if (r < 0) {
                        char q[300];
                        spool_error(sp, r, "Cannot process %s",
                                    log_quote(names[i], q, sizeof(q)));
                        errors++;
                }
                /* Without fsync nothing is gained by holding a burst's
                 * claims for their delivery together (the syncs are what
                 * a batch shares): each is delivered at once, and its
                 * document freed, so a burst holds one document. */
                if (to_claim(it) && !sp->cfg->fsync)
                        errors += deliver(p, it, 1, now);
                if (outcomes)
                        outcomes[i] = result(it);
        }
        if (sp->cfg->fsync) {
                errors += deliver(p, items, n, now);
                for (size_t i = 0; outcomes && i < n; i++)
                        outcomes[i] = result(&items[i]);
        } else if (dict_count(&sp->leaving) > 0) {
                /* Rejections linked out (store_reject_from(), with the
                 * relay) leave handoff/ now; with fsync deliver() did. */
                (void) store_flush(sp);
        }
        bool locked = false;
        for (size_t i = 0; i < n; i++) {
                locked |= items[i].lock_id != 0;
                item_release(sp, &items[i]);
        }
        /* Only this batch holds id bytes now (the sweep's checks release
         * theirs before they return): all of them go in one call. */
        lock_batch_end(sp->lock_fd, locked);
        p->closing = NULL;
        fd_batch_close(&cl);
        free(items);
        return errors;
}

void intake_foreign_due(struct parts *p, int64_t now)
{
        struct foreign_entry *v, *nx;
        _cleanup_free_ char **names = NULL;
        _cleanup_free_ int *outcomes = NULL;
        size_t n = 0;

        DICT_FOREACH_SAFE(v, nx, &p->foreign.names)
                n += v->expires <= now;
        if (n == 0) {
                DICT_FOREACH_SAFE(v, nx, &p->foreign.names)
                        deadline_note(&p->deadline, v->expires);
                return;
        }
        names = calloc(n, sizeof(char *));
        outcomes = calloc(n, sizeof(int));
        n = 0;
        DICT_FOREACH_SAFE(v, nx, &p->foreign.names) {
                if (v->expires > now) {
                        deadline_note(&p->deadline, v->expires);
                } else if (names && outcomes) {
                        names[n] = strdup(dict_key(v));
                        if (names[n])
                                n++;
                        foreign_remove(&p->foreign, v);
                } else {
                        foreign_remove(&p->foreign, v);
                }
        }
        if (!names || !outcomes)
                return;
        intake_batch(p, names, n, now, outcomes);
        /* Past the batch's time: at the next deadline. */
        for (size_t i = 0; i < n; i++)
                if (outcomes[i] == IO_SKIPPED)
                        foreign_again(&p->foreign, names[i], now);
        if (dict_count(&p->foreign.names))
                deadline_note(&p->deadline, now + 1000);
        for (size_t i = 0; i < n; i++)
                free(names[i]);
}
