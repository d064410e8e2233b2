/* Receipts (handoffd(8), RELAY, receipts), the host where
 * a relayed item ended.
 *
 * A handoff that came in through the relay with a Handoff-Origin header is
 * owed receipts: an owe record in receipts/journal (receipt_state.c),
 * synced before the message is acked, so before any outcome.  Each outcome
 * of that id (delivered, consumed, expired, canceled, rejected with its
 * reason) is decided before it is final on disk; then (spool hook) the
 * receipt is built, signed with [relay] host_key (Ed25519 over the
 * canonical bytes, hd_sign()) and recorded (out), the record synced with
 * the outcome's own directories and before them; a final outcome ends the
 * owe.  Every receipt recorded is published on
 * handoff.<origin>.receipt.<host> with Nats-Msg-Id "<id>:<outcome>" until
 * its PubAck (pub): a SIGKILL or a power cut anywhere publishes it again
 * after the restart, and the stream's dedup and the origin's record drop a
 * second copy.
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

static int publish_one(struct relay *r, struct receipt_queued *e)
{
        char subject[160], *data;

        if (xsnprintf(subject, sizeof(subject), "handoff.%s.receipt.%s", e->origin, r->host) < 0)
                return -EINVAL;
        /* the job owns its copy */
        if (!(data = malloc(e->len)))
                return -ENOMEM;
        memcpy(data, e->receipt, e->len);
        int q = relay_publish(r, dict_key(e), subject, data, e->len);
        if (q == 0)
                e->busy = true;
        return q;
}

static void kick(struct relay *r)
{
        struct receipts *rc = r->rc;
        struct receipt_queued *e;

        if (!rc || !r->st.ready)
                return;
        for (e = dict_first(&rc->queued); e; e = dict_next(e)) {
                if (e->busy)
                        continue;
                int q = publish_one(r, e);
                if (q < 0)
                        relay_error(r, "cannot publish receipt %s: %s", dict_key(e), strerror(-q));
        }
        receipt_cancel_kick(r, false);
}

/* The receipt just recorded for id and outcome, published now: the
 * others wait for their PubAck, or for the timer after a failure. */
static void publish_new(struct relay *r, const char *id, const char *outcome)
{
        char key[RELAY_MSGID_MAX + 1];
        struct receipt_queued *e;

        if (!r->st.ready || xsnprintf(key, sizeof(key), "%s:%s", id, outcome) < 0 ||
            !(e = dict_get(&r->rc->queued, key)) || e->busy)
                return;
        int q = publish_one(r, e);
        if (q < 0) {
                relay_error(r, "cannot publish receipt %s: %s", key, strerror(-q));
                retry_later(r->rc);
        }
}

void receipt_resend(struct relay *r)
{
        struct receipt_queued *e;

        if (!r->rc)
                return;
        for (e = dict_first(&r->rc->queued); e; e = dict_next(e))
                e->busy = false;
        receipt_cancel_kick(r, true);
        kick(r);
}

void receipt_puback(struct relay *r, const char *msg_id, bool ok, const char *err, int64_t now)
{
        struct receipts *rc = r->rc;
        char id[RELAY_MSGID_MAX + 1];
        const char *colon = strrchr(msg_id, ':');
        struct receipt_queued *e;
        int q;

        (void)now;
        if (!rc || !colon || xsnprintf(id, sizeof(id), "%.*s", (int)(colon - msg_id), msg_id) < 0)
                return;
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
        struct receipts *rc = r->rc;
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
        q = hd_sign(doc, rc->key);
        if (q < 0)
                return q;
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
        publish_new(r, id, outcome);
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
        publish_new(r, id, "rejected");
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
        publish_new(r, id, status);
}
