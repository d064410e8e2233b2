/* The relay's queues; see relay_queue.h.  Called from the loop (publish,
 * batch done, error) and from the threads (post). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff.h"
#include "relay_queue.h"

void relay_post(struct relay *r, struct relay_ev *ev)
{
        pthread_mutex_lock(&r->m);
        if (r->closed) {
                /* A libnats callback after the stop (the connection's
                 * closed callback): nobody listens, and the async handle
                 * is gone. */
                pthread_mutex_unlock(&r->m);
                if (ev->type == RELAY_EV_BATCH)
                        relay_batch_free(ev->batch);
                free(ev);
                return;
        }
        if (r->evs_tail)
                r->evs_tail->next = ev;
        else
                r->evs = ev;
        r->evs_tail = ev;
        uv_async_send(&r->async);
        pthread_mutex_unlock(&r->m);
}

void relay_error(struct relay *r, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(r->st.last_error, sizeof(r->st.last_error), fmt, ap);
        va_end(ap);
        r->st.last_error_usec = hd_now_usec();
}

int relay_publish(struct relay *r, const char *id, const char *subject,
                  char *data, size_t len)
{
        struct relay_job *j = calloc(1, sizeof(*j));

        if (!j) {
                free(data);
                return -ENOMEM;
        }
        snprintf(j->id, sizeof(j->id), "%s", id);
        snprintf(j->subject, sizeof(j->subject), "%s", subject);
        j->data = data;
        j->len = len;
        pthread_mutex_lock(&r->m);
        if (r->jobs_tail)
                r->jobs_tail->next = j;
        else
                r->jobs = j;
        r->jobs_tail = j;
        pthread_cond_signal(&r->wake_worker);
        pthread_mutex_unlock(&r->m);
        return 0;
}

void relay_batch_done(struct relay *r, struct relay_batch *b)
{
        pthread_mutex_lock(&r->m);
        b->done = true;
        pthread_cond_broadcast(&r->wake_fetcher);
        pthread_mutex_unlock(&r->m);
}

void relay_batch_free(struct relay_batch *b)
{
        if (!b)
                return;
        for (size_t i = 0; i < b->n; i++)
                free(b->in[i].data);
        free(b->in);
        free(b);
}

/* receipt.c's part of a message: the origin of a handoff, or that it is
 * a receipt (on handoff.<host>.receipt.<from>) or a cancel request (on
 * handoff.<host>.cancel.<from>) and its Nats-Msg-Id. */
static void relay_in_receipt(const struct relay *r, const char *subj, const char *msg_id,
                             const char *origin, struct relay_in *in)
{
        size_t lh = strlen(r->host);
        bool ours = subj && !strncmp(subj, "handoff.", 8) && !strncmp(subj + 8, r->host, lh);

        if (ours && (!strncmp(subj + 8 + lh, ".receipt.", 9) ||
                     !strncmp(subj + 8 + lh, ".cancel.", 8))) {
                in->receipt = subj[9 + lh] == 'r';
                in->cancel = !in->receipt;
                if (msg_id && strlen(msg_id) <= RELAY_MSGID_MAX)
                        snprintf(in->rmsg_id, sizeof(in->rmsg_id), "%s", msg_id);
                return;
        }
        if (origin && hd_agent_valid(origin))
                snprintf(in->origin, sizeof(in->origin), "%s", origin);
        /* handoff.<host>.<agent>: outbox.c publishes on the to_agent's */
        if (subj && !strncmp(subj, "handoff.", 8) && !strncmp(subj + 8, r->host, lh) &&
            subj[8 + lh] == '.' && strlen(subj + 9 + lh) < sizeof(in->agent) &&
            hd_agent_valid(subj + 9 + lh))
                snprintf(in->agent, sizeof(in->agent), "%s", subj + 9 + lh);
}

void relay_in_fill(const struct relay *r, struct relay_in *in, const char *subject,
                   const char *msg_id, const char *origin, const char *caps,
                   const void *data, size_t len)
{
        in->len = len;
        in->batch_ok = caps && !strcmp(caps, "batch");
        relay_in_receipt(r, subject, msg_id, origin, in);
        in->too_large = in->len > (in->receipt ? RELAY_RECEIPT_MAX : r->max_msg);
        in->data = in->too_large ? NULL : malloc(in->len + 1);
        if (in->data) {
                if (in->len)
                        memcpy(in->data, data, in->len);
                in->data[in->len] = '\0';
        }
        /* handoff_id.DIGEST (relay_nats.c msg_id()): the handoff_id */
        if (msg_id && strcspn(msg_id, ".") <= RELAY_ID_MAX) {
                snprintf(in->msg_id, sizeof(in->msg_id), "%.*s", (int)strcspn(msg_id, "."), msg_id);
                if (!hd_id_valid(in->msg_id))
                        in->msg_id[0] = '\0';
        }
}
