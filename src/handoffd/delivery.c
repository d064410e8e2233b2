/* Delivery of a claimed handoff to its agent: Baton sessions, delivery
 * profile copies, the bootstrap written hidden, the record (the claim),
 * the publish.  The steps are separate so a burst can sync each
 * directory once between them (intake_batch) and recovery can redo any
 * one (item.c).
 *
 * Delivery is three steps, each made durable for a whole burst at once
 * (one sync per directory), and the one file the daemon writes per item:
 *
 *   1. the bootstrap, written once into a file of the daemon's (no
 *      producer holds it, so nothing a producer does after the claim
 *      changes what is delivered, archived or counted), under a hidden
 *      name .pending.NAME in the agent's handoffs/: no agent sees it
 *   2. the same file linked as claimed/<id>.json: the claim (a link never
 *      replaces: of two with one id only one wins) and the daemon's
 *      record of the item, which holds the handoff exactly as signed
 *      ("handoff"); a copy where handoffs/ is on another file system or
 *      mount (a link cannot cross it).  The producer's file leaves
 *      handoff/ once the record is durable.
 *   3. the rename of .pending.NAME to NAME: the agent may take it now
 *
 * So after any crash the files tell what happened: no record = not
 * claimed (the producer's file is still in handoff/; a .pending.NAME
 * without its record is removed); record and .pending = publish it;
 * record and NAME = published; record and neither = the agent took it.
 * A handoff is never shown to its agent twice.  The names are layout.h's;
 * the table is handoffd(8)'s "Crash windows". */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"
#include "agents.h"
#include "cancel.h"
#include "delivery.h"
#include "files.h"
#include "layout.h"
#include "deadline.h"
#include "lock.h"
#include "log.h"
#include "parts.h"
#include "payload.h"
#include "record.h"

/* A Baton handoff updates its session in baton/ (under the baton lock of
 * lock.h: daemons on one spool apply patches one at a time; -EAGAIN when
 * another holds it, the caller tries again later), and the agent gets the
 * resulting full baton, not the patch: *ret is a copy of h's whose payload
 * carries it, or NULL for other payloads. */
static int delivery_baton(struct spool *sp, const struct handoff *h, int64_t now, json_t **ret)
{
        const json_t *doc = h->doc, *payload = h->payload;
        _cleanup_json_ json_t *session = NULL;
        _cleanup_free_ char *key = NULL;
        hd_verdict v;
        json_t *copy, *np;
        int r;

        *ret = NULL;
        if (!h->ptype || !h->ptype->session_store)
                return 0;
        r = lock_try(sp->lock_fd, LOCK_OFF_BATON, true);
        if (r < 0)
                return r;
        r = hd_baton_apply_handoff(sp->fd[SD_BATON], doc, now, sp->cfg->fsync, &v);
        /* the session the stage went to: the sender's, or one it
         * passed through (scoped by creator: baton.c) */
        if (r == 0)
                r = hd_baton_load_handoff(sp->fd[SD_BATON], doc, &session, &key);
        lock_release(sp->lock_fd, LOCK_OFF_BATON);
        if (r == -EBADMSG) {
                /* Another daemon applied a conflicting patch between our
                 * check and our claim: deliver what was sent, say so. */
                log_warning("Baton patch of %s not applied: %s: %s", h->id, hd_reason_name(v.reason), v.detail);
                return 0;
        }
        if (r < 0)
                return r;
        copy = json_deep_copy(doc);
        /* session_key: what the recipient names to send the next stage
         * when several sessions of that name passed through it */
        np = json_pack("{s:O, s:s, s:O, s:O}", "session_id", json_object_get(payload, "session_id"),
                       "session_key", key,
                       "stage_id", json_object_get(payload, "stage_id"),
                       "baton", json_object_get(session, "baton"));
        if (!copy || !np || json_object_set_new(copy, "payload", np) < 0) {
                json_decref(copy);
                return -ENOMEM;
        }
        *ret = copy;
        return 0;
}

int delivery_pending_name(const char *id, char *buf, size_t n)
{
        char bname[NAME_MAX + 1];
        int r = hd_bootstrap_name(id, bname, sizeof(bname));

        return r < 0 ? r : layout_prefixed(LAYOUT_PENDING, bname, buf, n);
}

/* A record is at most a bootstrap, which the size cap bounds, with the
 * handoff inside it (bootstrap.c). */
static size_t record_max(const struct spool *sp)
{
        return 4 * sp->cfg->max_file_size + 65536;
}

int delivery_record_read(struct spool *sp, int fd, const struct stat *st, json_t **ret)
{
        hd_limits lim = { .max_size = record_max(sp), .max_depth = HD_DEFAULT_MAX_DEPTH + 2 };
        _cleanup_free_ char *buf = NULL;
        json_t *doc = NULL;
        hd_verdict v;
        size_t len;
        int r;
        /* the daemon's own uid does not change while it runs: asked once,
         * not once a record */
        static uid_t self = (uid_t)-1;

        if (self == (uid_t)-1)
                self = geteuid();
        /* Only the daemon's own file can be its record. */
        if (st->st_uid != self || !S_ISREG(st->st_mode))
                return -ENOMSG;
        /* st is fd's: one read for a record that does not change */
        r = read_all_sized(fd, lim.max_size, (size_t)st->st_size, &buf, &len);
        if (r == -EFBIG)
                return -ENOMSG;
        if (r < 0)
                return r;
        if (hd_parse(buf, len, &lim, &doc, &v) < 0 || !record_form(doc)) {
                json_decref(doc);
                return -ENOMSG;
        }
        *ret = doc;
        return 0;
}

bool delivery_plain(const struct agent_rt *a)
{
        return !a->cfg->delivery || !strcmp(a->cfg->delivery, "bootstrap");
}

/* Step 1, with Baton and the profile copies.  The file is synced, its
 * directory not yet; with DELIVERY_SYNC_LATER not even the file: the
 * caller syncs a burst's files together (intake_batch), before any
 * record is made. */
int delivery_write(struct parts *p, struct agent_rt *a, const struct handoff *h,
                   int64_t now, unsigned flags)
{
        struct spool *sp = p->sp;
        const char *id = h->id;
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *b = NULL, *merged = NULL;
        char pname[NAME_MAX + 1];
        size_t len;
        int r;

        /* Named first: a name that cannot be made changes nothing. */
        r = delivery_pending_name(id, pname, sizeof(pname));
        if (r < 0)
                return r;
        r = delivery_baton(sp, h, now, &merged);
        if (r < 0)
                return r;
        r = bootstrap_build_canon(h->doc, merged, now, sp->cfg->max_file_size, &b, &buf, &len);
        if (r < 0)
                return r;
        if (!delivery_plain(a)) {
                hd_deliver_opts o = {
                        .profile = a->cfg->delivery,
                        .act_format = a->cfg->act_format,
                        .act_max_files = a->cfg->act_max_files,
                        .do_fsync = sp->cfg->fsync,
                };
                r = hd_deliver_profile(a->state_fd, h->doc, &o, now);
                if (r < 0)
                        return r;
        }
        /* main.c's umask 027 keeps 0640: no fchmod.  Written under its
         * hidden name directly: a .pending.NAME without its record is
         * removed after a crash whatever it holds (the table above), so
         * an unnamed file linked in once written would add nothing. */
        bool sync = !(flags & DELIVERY_SYNC_LATER);
        /* A big record's inode, to remember what it says (verified.c):
         * the sweep's first look would read it all again. */
        struct stat st, *stp = verified_worth(len) ? &st : NULL;
        /* Not synced, so its close says nothing: with the batch's
         * (intake.c), not one call each. */
        int fd = -1, *fdp = p->closing && !sp->cfg->fsync ? &fd : NULL;
        r = store_boot_write(sp, a, pname, buf, len, sync, stp, fdp);
        if (r == -EEXIST) {
                /* A claimed item's, its publish to come (record and
                 * .pending): not ours to replace.  intake.c left the look
                 * in claimed/ to the record's link; here it is needed. */
                if ((flags & DELIVERY_NEW_CLAIM) && spool_id_claimed(sp, id))
                        return -EEXIST;
                /* Left by a crash before its record: never visible. */
                r = store_boot_remove(sp, a, pname);
                if (r < 0 && r != -ENOENT)
                        return r;
                r = store_boot_write(sp, a, pname, buf, len, sync, stp, fdp);
        }
        if (fd >= 0)
                fd_batch_add(p->closing, fd);
        if (r == 0 && stp)
                verified_store_record(&p->verified, stp, b);
        return r;
}

/* The agent's file src (the daemon's) as claimed/<id>.json; with replace,
 * over what is there, in one rename (store_claim()). */
static int record_link(struct parts *p, struct agent_rt *a, const char *id, const char *src,
                       bool replace)
{
        struct spool *sp = p->sp;
        int r = store_claim(sp, a, id, src, replace, record_max(sp));

        if (r < 0)
                return r;
        deadline_note(&p->deadline, hd_now_usec() + sp->cfg->resume_window * 1000000LL);
        return 0;
}

/* Step 2, once the hidden bootstrap is on disk. */
int delivery_record(struct parts *p, struct agent_rt *a, const char *id, bool replace)
{
        char pname[NAME_MAX + 1];
        int r;

        r = delivery_pending_name(id, pname, sizeof(pname));
        if (r < 0)
                return r;
        /* An earlier version's claimed item (the producer's inode) is
         * replaced by the record in one rename. */
        return record_link(p, a, id, pname, replace);
}

int delivery_record_from(struct parts *p, struct agent_rt *a, const char *id, const char *src)
{
        return record_link(p, a, id, src, true);
}

/* Step 3, once the record is on disk. */
int delivery_publish(struct parts *p, struct agent_rt *a, const char *id)
{
        struct spool *sp = p->sp;
        char bname[NAME_MAX + 1], pname[NAME_MAX + 1];
        int r;

        r = hd_bootstrap_name(id, bname, sizeof(bname));
        if (r == 0)
                r = delivery_pending_name(id, pname, sizeof(pname));
        if (r < 0)
                return r;
        /* A cancel asked for before its claim: never shown; the next look
         * (item.c, at once) takes it back, or refuses the request when
         * it is not the sender's and publishes it. */
        if (cancel_wanted(p, id, NULL)) {
                deadline_note(&p->deadline, hd_now_usec());
                return 0;
        }
        /* The record is on disk: delivered is decided. */
        if (sp->relay.outcome)
                sp->relay.outcome(sp->relay.ctx, id, NULL, "delivered", NULL, NULL, hd_now_usec());
        r = store_publish_bootstrap(sp, a, pname, bname);
        if (r < 0)
                return r;
        sp->st.delivered++;
        return 0;
}

int delivery_run(struct parts *p, struct agent_rt *a, const struct handoff *h,
                 int64_t now, bool replace)
{
        struct spool *sp = p->sp;
        const char *id = h->id;
        int r;

        r = delivery_write(p, a, h, now, 0);
        if (r == 0)
                r = store_flush(sp);
        if (r == 0)
                r = delivery_record(p, a, id, replace);
        if (r == 0)
                r = store_flush(sp);
        if (r == 0)
                r = delivery_publish(p, a, id);
        if (r == 0)
                r = store_flush(sp);
        return r;
}

/* A delivery failed: the sweep tries again after a backoff (1 s doubling
 * to 60 s while failures go on), not at once and not in a busy loop. */
void delivery_failed(struct parts *p, const char *id, int64_t now)
{
        if (p->delivery->backoff_usec < 1000000)
                p->delivery->backoff_usec = 1000000;
        deadline_note(&p->deadline, now + p->delivery->backoff_usec);
        p->delivery->backoff_usec *= 2;
        if (p->delivery->backoff_usec > 60 * 1000000LL)
                p->delivery->backoff_usec = 60 * 1000000LL;
        (void)dict_put(&p->delivery->failed, id, NULL); /* out of memory: counted as a first try */
}


int delivery_new(struct delivery **ret)
{
        struct delivery *dv = calloc(1, sizeof(*dv));

        if (!dv)
                return -ENOMEM;
        dict_init(&dv->failed, 0);
        *ret = dv;
        return 0;
}

void delivery_free(struct delivery *dv)
{
        if (!dv)
                return;
        dict_clear(&dv->failed);
        free(dv);
}
