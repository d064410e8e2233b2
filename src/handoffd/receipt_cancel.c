/* Cancels across the relay (handoffd(8), CANCELING and RELAY): a cancel
 * request on the origin for an item relayed from here goes to the host it
 * was relayed to, and that host's receipts answer it.
 *
 * The origin: a request in cancel/ whose item left through the relay and
 * is still awaited (the journal's sent record; no final remote_outcome
 * in its .outcome) is published as it is, the sender's signed bytes, on
 * handoff.<host>.cancel.<origin> with Nats-Msg-Id "<id>:cancel", until
 * its PubAck.  The request stays unanswered in cancel/: the file is what
 * keeps it through a crash (cancel.c reads it again at the start and
 * asks again; the stream's dedup and the host drop a second copy).  The
 * item's final receipt answers it: canceled when the host withdrew it,
 * not_cancelable for any other end.
 *
 * The host: a cancel message is written into cancel/ as relay-<id>.cancel
 * (atomically, synced before the ack), where cancel.c checks it with this
 * host's keys as any request: the relay adds no trust.  Its answer there
 * is for nobody (cancel.c removes it after CANCELREQ_ANSWER_KEEP_S); what
 * reaches the origin is the outcome's receipt. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "parts.h"
#include "files.h"
#include "layout.h"
#include "log.h"
#include "receipt.h"
#include "receipt_int.h"
#include "relay_queue.h"
#include "spool.h"
#include "store.h"
#include "store_doc.h"

#define CANCEL_SUFFIX ":cancel"

static int fwd_publish(struct relay *r, const char *id, struct receipt_fwd *f)
{
        char subject[160], key[RELAY_MSGID_MAX + 1], *data;

        if (f->busy || f->acked || !r->st.ready)
                return 0;
        if (xsnprintf(subject, sizeof(subject), "handoff.%s.cancel.%s", f->host, r->host) < 0 ||
            xsnprintf(key, sizeof(key), "%s" CANCEL_SUFFIX, id) < 0)
                return -EINVAL;
        if (!(data = malloc(f->len)))
                return -ENOMEM;
        memcpy(data, f->req, f->len);
        int q = relay_publish(r, key, subject, data, f->len);
        if (q == 0)
                f->busy = true;
        return q;
}

void receipt_cancel_kick(struct relay *r, bool again)
{
        struct receipt_fwd *f;

        if (!r->rc)
                return;
        for (f = dict_first(&r->rc->fwd); f; f = dict_next(f)) {
                if (again)
                        f->busy = false;
                int q = fwd_publish(r, dict_key(f), f);
                if (q < 0)
                        relay_error(r, "cannot publish the cancel of %s: %s", dict_key(f),
                                    strerror(-q));
        }
}

bool receipt_cancel_puback(struct relay *r, const char *msg_id, bool ok, const char *err)
{
        char id[RELAY_MSGID_MAX + 1];
        size_t n = strlen(msg_id), ls = strlen(CANCEL_SUFFIX);
        struct receipt_fwd *f;

        if (!r->rc || n <= ls || strcmp(msg_id + n - ls, CANCEL_SUFFIX))
                return false;
        snprintf(id, sizeof(id), "%.*s", (int)(n - ls), msg_id);
        f = dict_get(&r->rc->fwd, id);
        if (!f)
                return true;
        f->busy = false;
        if (ok) {
                f->acked = true;
                log_decision(LOG_INFO, id, NULL, "cancel_relayed", NULL,
                             "Cancel request for %s relayed to host %s", id, f->host);
                return true;
        }
        r->st.publish_errors++;
        relay_error(r, "cancel: %s", err);
        return true;
}

/* The host an awaited item id went to, in host; false when it is not
 * awaited (not relayed from here, ended there, sent to an A2A remote). */
static bool awaited_host(struct relay *r, const char *id, char *host, size_t n)
{
        struct receipt_sent *e = dict_get(&r->rc->sent, id);
        char sname[NAME_MAX + 16];
        struct store_outcome side;

        if (!e || layout_suffixed(e->archive, LAYOUT_OUTCOME, sname, sizeof(sname)) < 0 ||
            store_outcome_load(r->sp->fd[SD_ARCHIVE], sname, &side) < 0)
                return false;
        if (!side.relayed_to[0] || !strncmp(side.relayed_to, "a2a:", 4) ||
            !hd_agent_valid(side.relayed_to) ||
            (side.remote_outcome[0] && receipt_is_final(side.remote_outcome)))
                return false;
        return xsnprintf(host, n, "%s", side.relayed_to) >= 0;
}

bool receipt_cancel_hook(void *ctx, const char *id, const char *name)
{
        struct relay *r = ctx;
        struct receipts *rc = r->rc;
        char host[RECEIPT_HOST_MAX];
        _cleanup_free_ char *buf = NULL;
        struct receipt_fwd *f;
        size_t len;
        hd_verdict v;

        /* The answer is the item's final receipt: none comes without
         * host_pubkey_dir. */
        if (!rc || rc->pub_fd < 0 || !hd_id_valid(id) || !awaited_host(r, id, host, sizeof(host)))
                return false;
        if (dict_get(&rc->fwd, id))
                return true;    /* on its way, or there */
        if (hd_read_at(r->sp->fd[SD_CANCEL], name, CANCELREQ_MAX, &buf, &len, &v) < 0)
                return false;
        /* Bounded as the requests are: the oldest, whose host never
         * answered, makes room. */
        if (dict_count(&rc->fwd) >= CANCEL_PENDING_MAX && (f = dict_first(&rc->fwd)))
                dict_remove(&rc->fwd, f);
        if (!(f = dict_put(&rc->fwd, id, NULL)))
                return false;
        snprintf(f->host, sizeof(f->host), "%s", host);
        f->req = TAKE_PTR(buf);
        f->len = len;
        f->busy = f->acked = false;
        log_decision(LOG_INFO, id, NULL, "cancel_relay", NULL,
                     "Cancel request for %s goes to host %s, where it was relayed", id, host);
        int q = fwd_publish(r, id, f);
        if (q < 0)
                relay_error(r, "cannot publish the cancel of %s: %s", id, strerror(-q));
        return true;
}

void receipt_cancel_ended(struct relay *r, const char *id, const char *sname, const char *outcome)
{
        struct spool *sp = r->sp;
        struct store_outcome side;

        dict_del(&r->rc->fwd, id);
        if (!cancel_wanted(r->p, id, NULL) ||
            store_outcome_load(sp->fd[SD_ARCHIVE], sname, &side) < 0)
                return;
        /* withdrawn there: by this request, or by another of its sender's */
        cancel_answer(r->p, id, side.from,
                      !strcmp(outcome, "canceled") ? CA_CANCELED : CA_NOT_CANCELABLE);
}

int receipt_cancel_in(struct relay *r, const struct relay_in *in)
{
        char id[RELAY_MSGID_MAX + 1], name[NAME_MAX + 1], q[200];
        size_t n = strlen(in->rmsg_id), ls = strlen(CANCEL_SUFFIX);
        int e;

        if (n <= ls || strcmp(in->rmsg_id + n - ls, CANCEL_SUFFIX) ||
            xsnprintf(id, sizeof(id), "%.*s", (int)(n - ls), in->rmsg_id) < 0 ||
            !hd_id_valid(id) || !in->data || in->len > CANCELREQ_MAX ||
            xsnprintf(name, sizeof(name), "relay-%s.cancel", id) < 0) {
                log_notice("Relay: dropped a cancel message %s: not one (Nats-Msg-Id ID:cancel, "
                           "at most %d bytes)", log_quote(in->rmsg_id, q, sizeof(q)), CANCELREQ_MAX);
                return 0;
        }
        /* Synced with the batch (store_flush()) before it is acked. */
        e = store_side_write(r->sp, SD_CANCEL, name, in->data, in->len);
        if (e < 0)
                return log_warning_errno(e, "Relay: cannot write the cancel request for %s "
                                         "into cancel/: %m; it comes again", id);
        log_decision(LOG_INFO, id, NULL, "cancel_received", NULL,
                     "Relay: cancel request for %s into cancel/%s", id, name);
        return 0;
}
