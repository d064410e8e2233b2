/* The relay's fetch thread (relay.c starts it): it owns the pull
 * subscription's fetches and the acks.  It pulls a batch, hands the loop
 * a copy of each message (r->batch, a RELAY_EV_BATCH event), waits for the
 * loop's verdicts and acks each message the loop made durable or knew
 * already, naks the others for a redelivery.  Nothing here touches the
 * spool. */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "nats_dl.h"
#include "relay_nats.h"
#include "relay_queue.h"

#define FETCH_WAIT_MS 1000
#define SUB(r) ((natsSubscription *)(r)->sub)

/* The loop's copy of each message; one over max_msg is not copied (the
 * loop refuses it by its length). */
static struct relay_batch *batch_new(struct relay *r, natsMsgList *list)
{
        struct relay_batch *b = calloc(1, sizeof(*b));

        if (!b || !(b->in = calloc((size_t)list->Count, sizeof(*b->in)))) {
                free(b);
                return NULL;
        }
        b->n = (size_t)list->Count;
        for (size_t i = 0; i < b->n; i++) {
                natsMsg *m = list->Msgs[i];
                const char *id = NULL, *origin = NULL, *caps = NULL;
                int len = sym_natsMsg_GetDataLength(m);
                if (sym_natsMsgHeader_Get(m, "Nats-Msg-Id", &id) != NATS_OK)
                        id = NULL;
                if (sym_natsMsgHeader_Get(m, "Handoff-Origin", &origin) != NATS_OK)
                        origin = NULL;
                if (sym_natsMsgHeader_Get(m, "Handoff-Receipts", &caps) != NATS_OK)
                        caps = NULL;
                relay_in_fill(r, &b->in[i], sym_natsMsg_GetSubject(m), id, origin, caps,
                              sym_natsMsg_GetData(m), len > 0 ? (size_t)len : 0);
        }
        return b;
}

void *relay_fetch_main(void *arg)
{
        struct relay *r = arg;
        bool idle = true;
        natsStatus s;

        pthread_mutex_lock(&r->m);
        while (!r->stop) {
                if (!r->ready) {
                        relay_timed_wait(&r->wake_fetcher, &r->m, 1000);
                        continue;
                }
                natsSubscription *sub = SUB(r);
                pthread_mutex_unlock(&r->m);

                natsMsgList list = { 0 };
                jsErrCode jerr = 0;
                if (idle) {
                        /* One message, waited for: it comes back as soon
                         * as there is one (a larger batch would wait for
                         * the whole batch or the timeout). */
                        s = sym_natsSubscription_Fetch(&list, sub, 1, FETCH_WAIT_MS, &jerr);
                } else {
                        /* What is there now, up to a batch and up to
                         * RELAY_FETCH_MAX_BYTES: the messages and the
                         * loop's copies of them are what the relay holds.
                         * A message larger than that ends the batch (409
                         * "Message Size Exceeds MaxBytes"): it comes alone
                         * in the idle fetch next. */
                        jsFetchRequest req;
                        sym_jsFetchRequest_Init(&req);
                        req.Batch = RELAY_FETCH_BATCH;
                        req.MaxBytes = RELAY_FETCH_MAX_BYTES;
                        req.NoWait = true;
                        req.Expires = (int64_t)FETCH_WAIT_MS * 1000000;
                        s = sym_natsSubscription_FetchRequest(&list, sub, &req);
                }
                struct relay_batch *b = s == NATS_OK && list.Count > 0 ? batch_new(r, &list) : NULL;
                bool too_large = s == NATS_ERR && !idle && sym_nats_GetLastError(NULL) &&
                                 strstr(sym_nats_GetLastError(NULL), "MaxBytes");
                pthread_mutex_lock(&r->m);
                if (!b) {
                        sym_natsMsgList_Destroy(&list);
                        if (too_large) {
                                ;       /* the next fetch takes it alone */
                        } else if (s != NATS_OK && s != NATS_TIMEOUT && s != NATS_NOT_FOUND &&
                                   !r->stop && r->connected) {
                                pthread_mutex_unlock(&r->m);
                                relay_post_state(r, "!fetch: %s", relay_nats_err(s));
                                pthread_mutex_lock(&r->m);
                                relay_timed_wait(&r->wake_fetcher, &r->m, 1000);
                        } else if (s != NATS_OK && !r->connected && !r->stop) {
                                relay_timed_wait(&r->wake_fetcher, &r->m, 500);
                        }
                        idle = true;
                        continue;
                }
                idle = false;
                r->batch = b;
                pthread_mutex_unlock(&r->m);
                struct relay_ev *ev = calloc(1, sizeof(*ev));
                if (ev) {
                        ev->type = RELAY_EV_BATCH;
                        ev->batch = b;
                        relay_post(r, ev);
                }
                pthread_mutex_lock(&r->m);
                while (ev && !b->done && !r->stop)
                        pthread_cond_wait(&r->wake_fetcher, &r->m);
                bool done = ev && b->done;
                r->batch = NULL;
                pthread_mutex_unlock(&r->m);
                /* Acked only once the loop has the message durable in the
                 * spool, or knew it already; a stop before that leaves it
                 * for redelivery. */
                if (done)
                        for (size_t i = 0; i < b->n; i++) {
                                if (b->in[i].ack)
                                        sym_natsMsg_Ack(list.Msgs[i], NULL);
                                else
                                        sym_natsMsg_NakWithDelay(list.Msgs[i], 1000, NULL);
                        }
                sym_natsMsgList_Destroy(&list);
                /* Not done: the loop never saw it (stop); done: the loop
                 * has let go of it. */
                if (done || !ev)
                        relay_batch_free(b);
                pthread_mutex_lock(&r->m);
        }
        pthread_mutex_unlock(&r->m);
        return NULL;
}
