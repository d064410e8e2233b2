/* Delivery of a claimed handoff to its agent: Baton sessions, delivery
 * profile copies, the bootstrap written hidden, the delivered marker, the
 * publish.  Why three steps: see the comment above delivery_write().
 * The steps are separate so a burst can sync each directory once between
 * them (intake_batch) and recovery can redo any one (lifecycle.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "delivery.h"
#include "verified.h"
#include "files.h"
#include "layout.h"
#include "deadline.h"
#include "lock.h"
#include "log.h"
#include "payload.h"

/* A Baton handoff updates its session in baton/ (under the baton lock of
 * lock.h: daemons on one spool apply patches one at a time; -EAGAIN when
 * another holds it, the caller tries again later), and the agent gets the
 * resulting full baton, not the patch: *ret is a copy of doc whose payload
 * carries it, or NULL for other payloads. */
static int delivery_baton(struct spool *sp, const json_t *doc, int64_t now, json_t **ret)
{
        const char *ptype = json_string_value(json_object_get(doc, "payload_type"));
        const json_t *payload = json_object_get(doc, "payload");
        _cleanup_json_ json_t *session = NULL;
        _cleanup_free_ char *key = NULL;
        hd_verdict v;
        json_t *copy, *np;
        int r;

        *ret = NULL;
        if (!payload_type_session_store(ptype))
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
                log_warning("Baton patch of %s not applied: %s: %s",
                            json_string_value(json_object_get(doc, "handoff_id")),
                            hd_reason_name(v.reason), v.detail);
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

/* Delivery is three steps, each made durable for a whole burst at once
 * (one sync per directory):
 *
 *   1. the bootstrap under a hidden name, .pending.NAME (no agent sees it)
 *   2. the marker claimed/<id>.delivered
 *   3. the rename of .pending.NAME to NAME: the agent may take it now
 *
 * So after any crash the state tells what happened: no marker = never
 * visible, write it (again); marker and .pending = publish it; marker and
 * neither file = the agent took it.  A handoff is never shown to its agent
 * twice.  The names are layout.h's. */

/* Step 1, with Baton and the profile copies.  The file is synced, its
 * directory not yet; with sync_later not even the file: the caller syncs
 * a burst's files together (intake_batch), and before its marker. */
int delivery_write(struct spool *sp, struct agent_rt *a, const json_t *doc,
                   int64_t now, bool sync_later)
{
        const char *id = json_string_value(json_object_get(doc, "handoff_id"));
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *b = NULL, *merged = NULL;
        char bname[NAME_MAX + 1], pname[NAME_MAX + 1];
        size_t len;
        int r;

        r = hd_bootstrap_name(id, bname, sizeof(bname));
        if (r < 0)
                return r;
        r = delivery_baton(sp, doc, now, &merged);
        if (r < 0)
                return r;
        r = hd_bootstrap_build_shown(doc, merged, now, sp->cfg->max_file_size, &b);
        if (r < 0)
                return r;
        r = hd_canon_dump(b, NULL, &buf, &len);
        if (r < 0)
                return r;
        if (a->cfg->delivery && strcmp(a->cfg->delivery, "bootstrap")) {
                hd_deliver_opts o = {
                        .profile = a->cfg->delivery,
                        .act_format = a->cfg->act_format,
                        .act_max_files = a->cfg->act_max_files,
                        .do_fsync = sp->cfg->fsync,
                };
                r = hd_deliver_profile(a->state_fd, doc, &o, now);
                if (r < 0)
                        return r;
        }
        r = layout_prefixed(LAYOUT_PENDING, bname, pname, sizeof(pname));
        if (r < 0)
                return r;
        r = write_atomic(a->handoffs_fd, pname, buf, len, 0640,
                         sp->cfg->fsync && !sync_later ? WRITE_SYNC_FILE : 0);
        if (r < 0)
                return r;
        a->dirty = true;
        return 0;
}

/* Step 2, once the hidden bootstrap is on disk. */
int delivery_mark(struct spool *sp, struct agent_rt *a, const char *id, int64_t now)
{
        _cleanup_free_ char *mbuf = NULL;
        _cleanup_json_ json_t *m = NULL;
        char bname[NAME_MAX + 1], mname[NAME_MAX + 1], at[HD_TIME_MAX];
        size_t mlen;
        int r;

        r = hd_bootstrap_name(id, bname, sizeof(bname));
        if (r < 0)
                return r;
        hd_time_format(now, at, sizeof(at));
        m = json_pack("{s:s, s:s, s:s, s:s}", "handoff_id", id, "agent", a->cfg->name,
                      "bootstrap", bname, "accepted_at", at);
        if (!m)
                return -ENOMEM;
        /* What was verified, so a restart need not verify it again. */
        json_t *vr = verified_record(sp, id);
        if (vr)
                json_object_set_new(m, "verified", vr);
        r = hd_canon_dump(m, NULL, &mbuf, &mlen);
        if (r < 0)
                return r;
        r = layout_suffixed(id, LAYOUT_DELIVERED, mname, sizeof(mname));
        if (r < 0)
                return r;
        /* Its being there is what counts (item.c reads an empty or cut
         * one as a marker): written in place. */
        r = write_direct(sp->fd[SD_CLAIMED], mname, mbuf, mlen, 0640, 0);
        if (r < 0)
                return r;
        sp->dirty[SD_CLAIMED] = true;
        deadline_note(&sp->deadline, now + sp->cfg->resume_window * 1000000LL);
        return 0;
}

/* Step 3, once the marker is on disk. */
int delivery_publish(struct spool *sp, struct agent_rt *a, const char *id)
{
        char bname[NAME_MAX + 1], pname[NAME_MAX + 1];
        int r;

        r = hd_bootstrap_name(id, bname, sizeof(bname));
        if (r == 0)
                r = layout_prefixed(LAYOUT_PENDING, bname, pname, sizeof(pname));
        if (r < 0)
                return r;
        /* The marker is on disk: delivered is decided. */
        if (sp->relay.outcome)
                sp->relay.outcome(sp->relay.ctx, id, NULL, "delivered", NULL, NULL, hd_now_usec());
        if (renameat(a->handoffs_fd, pname, a->handoffs_fd, bname) < 0)
                return -errno;
        a->dirty = true;
        sp->st.delivered++;
        return 0;
}

int delivery_run(struct spool *sp, struct agent_rt *a, const json_t *doc,
                  int64_t now)
{
        const char *id = json_string_value(json_object_get(doc, "handoff_id"));
        int r;

        r = delivery_write(sp, a, doc, now, false);
        if (r == 0)
                r = spool_flush(sp);
        if (r == 0)
                r = delivery_mark(sp, a, id, now);
        if (r == 0)
                r = spool_flush(sp);
        if (r == 0)
                r = delivery_publish(sp, a, id);
        if (r == 0)
                r = spool_flush(sp);
        return r;
}

/* A delivery failed: the sweep tries again after a backoff (1 s doubling
 * to 60 s while failures go on), not at once and not in a busy loop. */
void delivery_failed(struct spool *sp, const char *id, int64_t now)
{
        if (sp->deliver_backoff_usec < 1000000)
                sp->deliver_backoff_usec = 1000000;
        deadline_note(&sp->deadline, now + sp->deliver_backoff_usec);
        sp->deliver_backoff_usec *= 2;
        if (sp->deliver_backoff_usec > 60 * 1000000LL)
                sp->deliver_backoff_usec = 60 * 1000000LL;
        json_object_set_new_nocheck(sp->failed, id, json_null());
}

