/* Receipts (handoffd(8), RELAY, receipts), the host where
 * a relayed item ended.
 *
 * A handoff that came in through the relay with a Handoff-Origin header is
 * owed receipts: an owe record in receipts/journal (receipt_state.c),
 * synced before the message is acked, so before any outcome.  Each outcome
 * of that id (delivered, consumed, expired, canceled, rejected with its
 * reason) is decided before it is final on disk; then (spool hook) the
 * receipt is built and recorded unsigned (out), the record synced with the
 * outcome's own directories and before them; a final outcome ends the
 * owe.  What one turn of the loop recorded is published at the start of
 * the next on handoff.<origin>.receipt.<host>, signed with [relay]
 * host_key (Ed25519 over the canonical bytes, hd_sign()) as it goes: to an
 * origin whose last verified message said "Handoff-Receipts: batch", as
 * batches (type handoff-receipts, one signature over many receipts,
 * Nats-Msg-Id "receipts:<digest>"); to any other alone, Nats-Msg-Id
 * "<id>:<outcome>" (an older origin drops a batch and acks it).  Each is
 * published until its PubAck (pub): a SIGKILL or a power cut anywhere
 * publishes it again after the restart, and the stream's dedup and the
 * origin's record drop a second copy.
 *
 * A consumed receipt says whether the agent reports results ("completes",
 * its [agent] completes at the consume); the id's result is owed to the
 * origin from then on (res), and the agent's result, when completion.c
 * records it, goes as one more receipt, completed, failed or
 * input_required, carrying the .result document whole ("result"),
 * through the same journal.  A question (input_required) ends the item
 * as the others do: its answer comes from the origin as a handoff of its
 * own, the task's next turn.  The origin's side is receipt_in.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "files.h"
#include "layout.h"
#include "log.h"
#include "receipt.h"
#include "receipt_int.h"
#include "relay_queue.h"
#include "spool.h"
#include "store_doc.h"

/* ---- sending: the host where the item ended ---------------------------- */

static void kick(struct relay *r);

static void on_timer(uv_timer_t *t)
{
        kick(t->data);
}

/* What is not published is tried again in RECEIPT_RETRY_MS. */
static void retry_later(struct receipts *rc)
{
        if (rc->timer_open && !uv_is_active((uv_handle_t *)&rc->timer))
                uv_timer_start(&rc->timer, on_timer, RECEIPT_RETRY_MS, 0);
}

/* The receipts recorded in this turn of the loop go out at the start of
 * the next, together: one flush round's outcomes make one batch per
 * origin, one signature. */
static void kick_soon(struct receipts *rc)
{
        if (rc->timer_open)
                uv_timer_start(&rc->timer, on_timer, 0, 0);
}

static int subject_of(struct relay *r, const char *origin, char *subject, size_t n)
{
        return xsnprintf(subject, n, "handoff.%s.receipt.%s", origin, r->host) < 0 ? -EINVAL : 0;
}

/* e's receipt as it goes alone: signed now if the journal holds it
 * unsigned, the signed bytes kept for a retry (Ed25519 is deterministic:
 * signed again after a restart, it is the same message). */
static int sign_single(struct relay *r, struct receipt_queued *e, json_t *doc)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int q;

        if (!doc || json_object_get(doc, "sig"))
                return 0;
        q = hd_sign(doc, r->rc->key);
        if (q == 0)
                q = hd_canon_dump(doc, NULL, &buf, &len);
        if (q < 0)
                return q;
        r->st.receipts_signed++;
        free(e->receipt);
        e->receipt = TAKE_PTR(buf);
        e->len = len;
        return 0;
}

static int publish_one(struct relay *r, struct receipt_queued *e, json_t *doc)
{
        char subject[160], *data;
        int q;

        if ((q = subject_of(r, e->origin, subject, sizeof(subject))) < 0 ||
            (q = sign_single(r, e, doc)) < 0)
                return q;
        /* the job owns its copy */
        if (!(data = malloc(e->len)))
                return -ENOMEM;
        memcpy(data, e->receipt, e->len);
        q = relay_publish(r, dict_key(e), subject, data, e->len);
        if (q == 0)
                e->busy = true;
        return q;
}

/* n unsigned receipts (docs) of es, all to origin, as one message: one
 * signature over its canonical bytes (handoffd(8), RELAY, receipts). */
static int publish_batch(struct relay *r, const char *origin, struct receipt_queued **es,
                         json_t **docs, size_t n)
{
        struct receipts *rc = r->rc;
        char subject[160], msg_id[RELAY_MSGID_MAX + 1], hex[2 * 12 + 1];
        unsigned char h[crypto_hash_sha256_BYTES];
        _cleanup_json_ json_t *doc = NULL;
        json_t *list = json_array();
        char *buf = NULL;
        size_t len;
        int q;

        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (json_array_append(list, docs[i]) < 0) {
                        json_decref(list);
                        return -ENOMEM;
                }
        doc = json_pack("{s:s, s:i, s:s, s:s, s:o}", "type", "handoff-receipts", "version", 1,
                        "host", r->host, "origin", origin, "receipts", list);
        if (!doc)
                return -ENOMEM;
        if ((q = subject_of(r, origin, subject, sizeof(subject))) < 0 ||
            (q = hd_sign(doc, rc->key)) < 0 || (q = hd_canon_dump(doc, NULL, &buf, &len)) < 0)
                return q;
        r->st.receipts_signed++;
        if (len > RECEIPT_MAX) {
                free(buf);
                return -EMSGSIZE;
        }
        /* The same batch published again is the same message: the
         * stream's duplicate window drops it. */
        crypto_hash_sha256(h, (const unsigned char *)buf, len);
        sodium_bin2hex(hex, sizeof(hex), h, 12);
        snprintf(msg_id, sizeof(msg_id), "receipts:%s", hex);
        struct receipt_batch *b = dict_put(&rc->batches, msg_id, NULL);
        if (!b) {
                free(buf);
                return -ENOMEM;
        }
        free(b->keys);
        if (!(b->keys = calloc(n, sizeof(*b->keys)))) {
                dict_remove(&rc->batches, b);
                free(buf);
                return -ENOMEM;
        }
        b->n = n;
        for (size_t i = 0; i < n; i++)
                snprintf(b->keys[i], sizeof(b->keys[i]), "%s", dict_key(es[i]));
        q = relay_publish(r, msg_id, subject, buf, len);
        if (q < 0) {
                dict_remove(&rc->batches, b);
                return q;
        }
        for (size_t i = 0; i < n; i++)
                es[i]->busy = true;
        return 0;
}

static bool takes_batches(struct receipts *rc, const char *origin)
{
        struct receipt_caps *c = dict_get(&rc->batching, origin);

        return c && c->batch;
}

/* What is gathered for one origin: unsigned receipts for a batch. */
struct gather {
        struct receipt_queued *es[RECEIPT_BATCH_MAX];
        json_t *docs[RECEIPT_BATCH_MAX];
        size_t n, bytes;
};

static int gather_flush(struct relay *r, const char *origin, struct gather *g)
{
        int q = 0;

        if (g->n > 1)
                q = publish_batch(r, origin, g->es, g->docs, g->n);
        /* one alone, or a batch over the bound after all: each alone */
        if (g->n == 1 || q == -EMSGSIZE) {
                q = 0;
                for (size_t i = 0; i < g->n && q == 0; i++)
                        q = publish_one(r, g->es[i], g->docs[i]);
        }
        if (q < 0)
                relay_error(r, "cannot publish %zu receipt(s) to %s: %s", g->n, origin,
                            strerror(-q));
        for (size_t i = 0; i < g->n; i++)
                json_decref(g->docs[i]);
        g->n = g->bytes = 0;
        return q;
}

/* Every receipt not in flight, published: to an origin that takes
 * batches, those the journal holds unsigned go in batches (one per origin
 * and RECEIPT_BATCH_MAX, within RECEIPT_MAX bytes), the rest alone. */
static void kick(struct relay *r)
{
        struct receipts *rc = r->rc;
        struct receipt_queued *e, *f;
        _cleanup_free_ struct gather *g = NULL;
        int q = 0;

        if (!rc || !r->st.ready)
                return;
        if (!(g = calloc(1, sizeof(*g)))) {
                retry_later(rc);
                return;
        }
        for (e = dict_first(&rc->queued); e && q == 0; e = dict_next(e)) {
                if (e->busy)
                        continue;
                char origin[RECEIPT_HOST_MAX];
                snprintf(origin, sizeof(origin), "%s", e->origin);
                bool batches = takes_batches(rc, origin);
                /* e and the others of its origin after it */
                for (f = e; f && q == 0; f = dict_next(f)) {
                        if (f->busy || strcmp(f->origin, origin))
                                continue;
                        json_t *doc = json_loadb(f->receipt, f->len, 0, NULL);
                        /* one that does not read back goes as it is */
                        if (!doc || !batches || json_object_get(doc, "sig")) {
                                q = publish_one(r, f, doc);
                                json_decref(doc);
                                if (q < 0)
                                        relay_error(r, "cannot publish receipt %s: %s",
                                                    dict_key(f), strerror(-q));
                        } else {
                                if (g->n == RECEIPT_BATCH_MAX ||
                                    (g->n && g->bytes + f->len + 1024 > RECEIPT_MAX))
                                        q = gather_flush(r, origin, g);
                                if (q < 0) {
                                        json_decref(doc);
                                        break;
                                }
                                g->es[g->n] = f;
                                g->docs[g->n++] = doc;
                                g->bytes += f->len + 1;
                        }
                }
                int q2 = gather_flush(r, origin, g);
                if (q == 0)
                        q = q2;
        }
        if (q < 0)
                retry_later(rc);
        receipt_cancel_kick(r, false);
}

void receipt_resend(struct relay *r)
{
        struct receipt_queued *e;

        if (!r->rc)
                return;
        for (e = dict_first(&r->rc->queued); e; e = dict_next(e))
                e->busy = false;
        /* a PubAck of a batch before this is for receipts sent again now */
        dict_clear(&r->rc->batches);
        receipt_cancel_kick(r, true);
        kick(r);
}

/* The PubAck of the batch b (msg_id): each receipt in it published. */
static void batch_puback(struct relay *r, struct receipt_batch *b, const char *msg_id, bool ok,
                         const char *err)
{
        struct receipts *rc = r->rc;

        for (size_t i = 0; i < b->n; i++) {
                const char *key = b->keys[i], *colon = strrchr(key, ':');
                char id[RELAY_MSGID_MAX + 1];
                struct receipt_queued *e = dict_get(&rc->queued, key);
                if (!e || !e->busy || !colon ||
                    xsnprintf(id, sizeof(id), "%.*s", (int)(colon - key), key) < 0)
                        continue;
                if (!ok) {
                        e->busy = false;
                        continue;
                }
                /* Not synced: lost, the receipt goes out again and the
                 * origin drops the second copy. */
                int q = receipt_record(r, &(struct rj_rec){ RJ_PUB, { id, colon + 1 } });
                if (q < 0) {
                        log_warning_errno(q, "Relay: cannot record the publish of receipt %s: %m",
                                          key);
                        dict_del(&rc->queued, key);
                }
                r->st.receipts_sent++;
        }
        if (ok) {
                r->st.receipt_msgs_sent++;
                r->st.receipt_batches_sent++;
                log_debug("Relay: receipts %s published (%zu)", msg_id, b->n);
        } else {
                r->st.publish_errors++;
                log_warning("Relay: publish of receipts %s failed: %s; retrying", msg_id, err);
                relay_error(r, "receipt: %s", err);
                retry_later(rc);
        }
        dict_remove(&rc->batches, b);
}

void receipt_puback(struct relay *r, const char *msg_id, bool ok, const char *err, int64_t now)
{
        struct receipts *rc = r->rc;
        char id[RELAY_MSGID_MAX + 1];
        const char *colon = strrchr(msg_id, ':');
        struct receipt_queued *e;
        struct receipt_batch *b;
        int q;

        (void)now;
        if (!rc || !colon || xsnprintf(id, sizeof(id), "%.*s", (int)(colon - msg_id), msg_id) < 0)
                return;
        if ((b = dict_get(&rc->batches, msg_id))) {
                batch_puback(r, b, msg_id, ok, err);
                return;
        }
        if (receipt_cancel_puback(r, msg_id, ok, err)) {
                if (!ok)
                        retry_later(rc);
                return;
        }
        e = dict_get(&rc->queued, msg_id);
        if (!e || !e->busy)
                return;
        if (ok) {
                /* Not synced: lost, the receipt goes out again and the
                 * origin drops the second copy. */
                q = receipt_record(r, &(struct rj_rec){ RJ_PUB, { id, colon + 1 } });
                if (q < 0) {
                        log_warning_errno(q, "Relay: cannot record the publish of receipt %s: %m",
                                          msg_id);
                        dict_del(&rc->queued, msg_id);
                }
                r->st.receipts_sent++;
                r->st.receipt_msgs_sent++;
                log_debug("Relay: receipt %s published", msg_id);
                return;
        }
        e->busy = false;
        r->st.publish_errors++;
        if (strcmp(r->st.last_error + (strncmp(r->st.last_error, "receipt: ", 9) ? 0 : 9), err))
                log_warning("Relay: publish of receipt %s failed: %s; retrying", msg_id, err);
        relay_error(r, "receipt: %s", err);
        retry_later(rc);
}

void receipt_caps(struct relay *r, const char *origin, bool batch)
{
        struct receipts *rc = r->rc;
        struct receipt_caps *c;

        /* The origin's last word: an older handoffd put in its place
         * says nothing, and gets single receipts from then on. */
        if (!rc || !rc->key || !hd_agent_valid(origin))
                return;
        c = dict_get(&rc->batching, origin);
        if (!c && (!batch || dict_count(&rc->batching) >= RECEIPT_ORIGINS_MAX))
                return;
        if (!c && !(c = dict_put(&rc->batching, origin, NULL)))
                return;
        c->batch = batch;
}

void receipt_owe(struct relay *r, const char *id, const char *origin)
{
        struct receipts *rc = r->rc;
        struct receipt_owed *e;
        int q;

        if (!rc || !origin[0] || !hd_agent_valid(origin) || !strcmp(origin, r->host))
                return;
        /* a message redelivered after a crash: owed once */
        e = dict_get(&rc->owed, id);
        if (e && !strcmp(e->origin, origin))
                return;
        if (!rc->key) {
                if (dict_count(&rc->owed) < RECEIPT_ORIGINS_MAX)
                        (void)receipt_owed_put(rc, id, origin);
                return;
        }
        /* synced by receipt_sync() before the message is acked */
        q = receipt_record(r, &(struct rj_rec){ RJ_OWE, { id, origin } });
        if (q < 0)
                spool_error(r->sp, q, "Cannot record in receipts/journal that %s is owed to %s",
                            id, origin);
}

bool receipt_sending(const struct relay *r)
{
        return r->rc && r->rc->key;
}

/* The spool's hooks into the receipts, set once receipt_start() has
 * succeeded (nothing fails after it). */
void receipt_hook(struct relay *r)
{
        r->sp->relay.outcome = receipt_outcome_hook;
        r->sp->relay.origin = receipt_origin_hook;
        r->sp->relay.result = receipt_result_hook;
        r->sp->relay.cancel = receipt_cancel_hook;
        r->sp->relay.flush = receipt_flush_hook;
}

int receipt_sync(struct relay *r)
{
        return r->rc ? receipt_flush_hook(r) : 0;
}

/* The id of handoff/name (ID.json), or false. */
static bool name_id(const char *name, char *id, size_t n)
{
        if (!name || layout_strip(name, ".json", id, n) < 0)
                return false;
        return hd_id_valid(id);
}

static bool owed_origin(struct receipts *rc, const char *id, char *buf, size_t n)
{
        struct receipt_owed *e = dict_get(&rc->owed, id);

        return e && xsnprintf(buf, n, "%s", e->origin) >= 0;
}

bool receipt_origin_hook(void *ctx, const char *name, char *buf, size_t n)
{
        struct relay *r = ctx;
        char id[NAME_MAX + 1];

        return r->rc && name_id(name, id, sizeof(id)) && owed_origin(r->rc, id, buf, n);
}

void receipt_doc_read(struct rdoc *d)
{
        const json_t *o = d->doc;

        d->type = json_string_value(json_object_get(o, "type"));
        d->id = json_string_value(json_object_get(o, "handoff_id"));
        d->outcome = json_string_value(json_object_get(o, "outcome"));
        d->host = json_string_value(json_object_get(o, "host"));
        d->origin = json_string_value(json_object_get(o, "origin"));
        d->at = json_string_value(json_object_get(o, "at"));
        d->reason = json_string_value(json_object_get(o, "reason"));
        d->detail = json_string_value(json_object_get(o, "detail"));
        d->completes = json_is_boolean(json_object_get(o, "completes"))
                       ? json_is_true(json_object_get(o, "completes")) : -1;
        d->result = json_object_get(o, "result");
        if (!json_is_object(d->result))
                d->result = NULL;
}

/* What a receipt adds to its outcome: whether the agent reports results
 * (consumed, -1 unsaid), the .result document (a result). */
struct rextra {
        int completes;
        json_t *result;
};

static int receipt_write(struct relay *r, const char *id, const char *origin, const char *outcome,
                         const char *reason, const char *detail, const struct rextra *x,
                         int64_t now)
{
        char at[HD_TIME_MAX];
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *doc = NULL;
        size_t len;
        int q;

        hd_time_format(now, at, sizeof(at));
        doc = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "type", "handoff-receipt",
                        "version", 1, "handoff_id", id, "outcome", outcome, "reason",
                        reason ? reason : "", "detail", detail ? detail : "", "host", r->host,
                        "origin", origin, "at", at);
        if (!doc)       /* a detail that is no UTF-8 */
                doc = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "type",
                                "handoff-receipt", "version", 1, "handoff_id", id, "outcome",
                                outcome, "reason", reason ? reason : "", "detail", "",
                                "host", r->host, "origin", origin, "at", at);
        if (!doc)
                return -ENOMEM;
        if (x && x->completes >= 0 &&
            json_object_set_new(doc, "completes", json_boolean(x->completes)) < 0)
                return -ENOMEM;
        if (x && x->result && json_object_set(doc, "result", x->result) < 0)
                return -ENOMEM;
        /* Unsigned: signed as it goes, alone or in a batch (kick()). */
        q = hd_canon_dump(doc, NULL, &buf, &len);
        if (q < 0)
                return q;
        if (memchr(buf, '\n', len) || strlen(buf) != len || len > RECEIPT_MAX)
                return -EINVAL;
        /* Synced with the outcome's own directories, before them. */
        return receipt_record(r, &(struct rj_rec){ RJ_OUT, { id, outcome, origin, buf } });
}

/* Whether the agent that consumed the item archived as name reports
 * results: its .outcome's completes (item_act.c), -1 unsaid. */
static int consumed_completes(struct relay *r, const char *name)
{
        char sname[NAME_MAX + 16];
        struct store_outcome side;

        if (!name || layout_suffixed(name, LAYOUT_OUTCOME, sname, sizeof(sname)) < 0 ||
            store_outcome_load(r->sp->fd[SD_ARCHIVE], sname, &side) < 0)
                return -1;
        return side.completes;
}

void receipt_outcome_hook(void *ctx, const char *id, const char *name, const char *outcome,
                          const char *reason, const char *detail, int64_t now)
{
        struct relay *r = ctx;
        struct receipts *rc = r->rc;
        char nid[NAME_MAX + 1], origin[80];
        int q;

        if (!rc)
                return;
        if (!id || !hd_id_valid(id)) {
                if (!name_id(name, nid, sizeof(nid)))
                        return;
                id = nid;
        }
        if (!owed_origin(rc, id, origin, sizeof(origin)))
                return;         /* not relayed here, or its final receipt is written */
        if (!rc->key) {
                if (receipt_is_final(outcome))
                        dict_del(&rc->owed, id);
                return;
        }
        /* a final outcome's record ends the owe */
        struct rextra x = { .completes = -1 };
        if (!strcmp(outcome, "consumed"))
                x.completes = consumed_completes(r, name);
        q = receipt_write(r, id, origin, outcome, reason, detail, &x, now);
        if (q < 0) {
                spool_error(r->sp, q, "Cannot write the receipt of %s (%s) for %s", id, outcome,
                            origin);
                return;
        }
        log_decision(LOG_INFO, id, NULL, "receipt", outcome, "Receipt for %s to %s: %s", id, origin,
                     outcome);
        kick_soon(rc);
}

void receipt_refused(struct relay *r, const char *id, const char *origin, const char *reason,
                     const char *detail, int64_t now)
{
        int q;

        if (!receipt_sending(r) || !hd_id_valid(id) || !hd_agent_valid(origin) ||
            !strcmp(origin, r->host))
                return;
        /* synced by receipt_sync() before the message is acked */
        q = receipt_write(r, id, origin, "rejected", reason, detail, NULL, now);
        if (q < 0) {
                spool_error(r->sp, q, "Cannot write the receipt of %s (rejected) for %s", id, origin);
                return;
        }
        log_decision(LOG_INFO, id, NULL, "receipt", "rejected", "Receipt for %s to %s: rejected",
                     id, origin);
        kick_soon(r->rc);
}

void receipt_result_hook(void *ctx, const char *id, const char *status, const char *doc,
                         size_t len, int64_t now)
{
        struct relay *r = ctx;
        struct receipts *rc = r->rc;
        struct receipt_owed *o;
        char origin[RECEIPT_HOST_MAX];
        hd_limits lim = { .max_size = RECEIPT_MAX, .max_depth = HD_DEFAULT_MAX_DEPTH + 2 };
        _cleanup_json_ json_t *res = NULL;
        hd_verdict v;
        int q;

        /* consumed here from another host, its result not yet written */
        if (!rc || !rc->key || !hd_id_valid(id) || !receipt_is_result(status) ||
            !(o = dict_get(&rc->results, id)))
                return;
        snprintf(origin, sizeof(origin), "%s", o->origin);
        q = hd_parse(doc, len, &lim, &res, &v);
        if (q == 0)
                q = receipt_write(r, id, origin, status, NULL, NULL,
                                  &(struct rextra){ .completes = -1, .result = res }, now);
        if (q < 0) {
                spool_error(r->sp, q, "Cannot write the receipt of %s (%s) for %s", id, status,
                            origin);
                return;
        }
        log_decision(LOG_INFO, id, NULL, "receipt", status, "Receipt for %s to %s: %s", id, origin,
                     status);
        kick_soon(rc);
}
