/* The relay, the loop's side; see relay.h (and relay_nats.c for the
 * threads).  Events from the threads are taken from the queue in
 * on_async(); outbox.c and relay_inbound.c act on them. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "log.h"
#include "nats_dl.h"
#include "outbox.h"
#include "receipt.h"
#include "parts.h"
#include "relay.h"
#include "relay_inbound.h"
#include "relay_nats.h"
#include "relay_queue.h"

#define NC(r) ((natsConnection *)(r)->nc)
#define JS(r) ((jsCtx *)(r)->js)
#define SUB(r) ((natsSubscription *)(r)->sub)

/* ---- the loop side ---------------------------------------------------- */

static json_t *relay_status(void *ctx, int64_t now);
static void relay_metrics(void *ctx, FILE *f, int64_t now);

static int take_hook(void *ctx, const char *name, const struct stat *was,
                     const struct handoff *h, int64_t now)
{
        return outbox_take(ctx, name, was, h, now);
}

static void on_state(struct relay *r, struct relay_ev *ev)
{
        bool was_ready = r->st.ready;

        pthread_mutex_lock(&r->m);
        r->st.connected = r->connected;
        r->st.ready = r->ready && r->connected;
        pthread_mutex_unlock(&r->m);
        if (ev->text[0] == '!') {
                /* Logged when it changes, not at every retry. */
                if (strcmp(r->st.last_error, ev->text + 1))
                        log_warning("Relay: %s", ev->text + 1);
                relay_error(r, "%s", ev->text + 1);
        } else if (ev->text[0]) {
                snprintf(r->st.server, sizeof(r->st.server), "%s", ev->text);
                log_info("Relay: connected to %s", ev->text);
                outbox_resend(r);
                receipt_resend(r);
        }
        /* A drop is logged by the worker's "!disconnected from ..."
         * (relay_nats.c), with its reason. */
        if (r->st.ready && !was_ready) {
                log_info("Relay ready: host %s, stream %s, consumer %s", r->host, r->stream,
                         r->durable);
                outbox_ready(r);
                receipt_resend(r);
        }
}

static void on_async(uv_async_t *h)
{
        struct relay *r = h->data;
        struct relay_ev *ev, *next;
        int64_t now = hd_now_usec();
        bool acks = false;

        pthread_mutex_lock(&r->m);
        ev = r->evs;
        r->evs = r->evs_tail = NULL;
        pthread_mutex_unlock(&r->m);
        for (; ev; ev = next) {
                next = ev->next;
                switch (ev->type) {
                case RELAY_EV_STATE:
                        on_state(r, ev);
                        break;
                case RELAY_EV_PUBACK:
                        if (strchr(ev->id, ':'))        /* a receipt's ID:OUTCOME */
                                receipt_puback(r, ev->id, ev->ok, ev->text, now);
                        else
                                outbox_puback(r, ev->id, ev->ok, ev->duplicate, ev->text, now);
                        acks = true;
                        break;
                case RELAY_EV_BATCH:
                        relay_inbound_batch(r, ev->batch, now);
                        break;
                }
                free(ev);
        }
        if (acks) {
                /* The archive moves of this round, synced once. */
                (void)store_flush(r->sp);       /* a failure said there, once */
                outbox_kick(r);
        }
}

/* The relay's condition variables wait on the monotonic clock
 * (relay_nats.c timed_wait()): a step of the wall clock back must not
 * hold a thread past its wait (the worker's set-up retries and its
 * reports while the servers are down, the fetcher's pause while the
 * relay is not ready or a fetch failed). */
static void cond_init_mono(pthread_cond_t *c)
{
        pthread_condattr_t a;

        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(c, &a);
        pthread_condattr_destroy(&a);
}

/* Everything that can fail comes before the loop handles (receipt_start()
 * too inits its timer last): a start that fails there frees r at once,
 * with nothing of it in the loop.  Only a thread that does not start
 * comes after them; then r is stopped and freed from the handles' close
 * callbacks (relay_free()). */
int relay_start(uv_loop_t *loop, struct parts *p, struct relay **ret)
{
        struct spool *sp = p->sp;
        const struct config *c = sp->cfg;
        struct relay *r;
        int q;

        *ret = NULL;
        if (!config_relay_on(c))
                return 0;
        /* Only now: without a relay, libnats is never mapped. */
        q = nats_dl_open();
        if (q < 0)
                return q;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->loop = loop;
        r->p = p;
        r->sp = sp;
        r->replicas = c->relay.replicas;
        /* A handoff is never valid longer than this anywhere we relay to. */
        r->max_age_usec = (c->max_window + c->max_clock_skew) * 1000000LL;
        r->max_msg = c->max_file_size;
        dict_init_drop(&r->outbox, sizeof(struct outbox_entry), outbox_entry_drop);
        dict_init(&r->unsaid, SPOOL_AGENT_SIZE);
        dict_init(&r->unverified, sizeof(struct relay_owed_rate));
        pthread_mutex_init(&r->m, NULL);
        cond_init_mono(&r->wake_worker);
        cond_init_mono(&r->wake_fetcher);
        if (!(r->host = strdup(c->relay.host)) || !(r->stream = strdup(c->relay.stream)) ||
            !(r->servers = strdup(c->relay.servers)) ||
            asprintf(&r->durable, "handoffd-%s", c->relay.host) < 0 ||
            asprintf(&r->filter, "handoff.%s.>", c->relay.host) < 0) {
                q = -ENOMEM;
                goto fail;
        }
        q = relay_options(r, &c->relay);
        if (q < 0)
                goto fail;
        q = receipt_start(r);
        if (q < 0)
                goto fail;
        receipt_hook(r);

        /* Nothing fails from here on but the threads. */
        uv_async_init(loop, &r->async, on_async);
        uv_timer_init(loop, &r->timer);
        r->async.data = r->timer.data = r;
        r->handles_open = true;
        r->n_handles += 2;
        sp->relay.ctx = r;
        sp->relay.take = take_hook;
        sp->relay.synced = outbox_synced;
        sp->relay.status = relay_status;
        sp->relay.metrics = relay_metrics;
        relay_inbound_clean(r);
        q = outbox_scan(r, hd_now_usec());
        if (q < 0)
                log_warning_errno(q, "Cannot list outbox/");

        q = -pthread_create(&r->worker, NULL, relay_worker_main, r);
        if (q == 0) {
                r->worker_started = true;
                q = -pthread_create(&r->fetcher, NULL, relay_fetch_main, r);
        }
        if (q < 0) {
                log_error_errno(q, "Cannot start the relay threads");
                relay_stop(r);
                relay_free(r);          /* from the close callbacks */
                return q;
        }
        r->fetcher_started = true;
        log_info("Relay: host %s, servers %s, %zu item(s) in outbox/", r->host,
                 c->relay.servers, dict_count(&r->outbox));
        *ret = r;
        return 0;
fail:
        memset(&sp->relay, 0, sizeof(sp->relay));
        relay_free(r);
        return q;
}

static void free_queues(struct relay *r)
{
        while (r->jobs) {
                struct relay_job *j = r->jobs;
                r->jobs = j->next;
                free(j->data);
                free(j);
        }
        while (r->evs) {
                struct relay_ev *ev = r->evs;
                r->evs = ev->next;
                if (ev->type == RELAY_EV_BATCH)
                        relay_batch_free(ev->batch);
                free(ev);
        }
        r->jobs_tail = NULL;
        r->evs_tail = NULL;
}

void relay_stop(struct relay *r)
{
        if (!r)
                return;
        if (r->worker_started || r->fetcher_started) {
                pthread_mutex_lock(&r->m);
                r->stop = true;
                pthread_cond_broadcast(&r->wake_worker);
                pthread_cond_broadcast(&r->wake_fetcher);
                pthread_mutex_unlock(&r->m);
                /* only a thread that was made: a pthread_t that never
                 * was one is no thread to join */
                if (r->worker_started)
                        pthread_join(r->worker, NULL);
                if (r->fetcher_started)
                        pthread_join(r->fetcher, NULL);
                r->worker_started = r->fetcher_started = false;
        }
        /* PubAcks that came in before the stop: archive those items now
         * rather than publish them again at the next start. */
        pthread_mutex_lock(&r->m);
        struct relay_ev *ev = r->evs, **pp = &r->evs;
        while (ev) {
                if (ev->type == RELAY_EV_PUBACK && ev->ok) {
                        if (strchr(ev->id, ':'))
                                receipt_puback(r, ev->id, true, "", hd_now_usec());
                        else
                                outbox_puback(r, ev->id, true, ev->duplicate, "", hd_now_usec());
                        *pp = ev->next;
                        free(ev);
                        ev = *pp;
                        continue;
                }
                pp = &ev->next;
                ev = ev->next;
        }
        r->evs_tail = NULL;
        for (ev = r->evs; ev; ev = ev->next)
                r->evs_tail = ev;
        pthread_mutex_unlock(&r->m);
        store_flush(r->sp);
        pthread_mutex_lock(&r->m);
        r->closed = true;
        pthread_mutex_unlock(&r->m);
        receipt_stop(r, relay_handle_closed);
        if (r->handles_open) {
                uv_close((uv_handle_t *)&r->async, relay_handle_closed);
                uv_close((uv_handle_t *)&r->timer, relay_handle_closed);
                r->handles_open = false;
        }
        memset(&r->sp->relay, 0, sizeof(r->sp->relay));
}

static void relay_destroy(struct relay *r)
{
        free_queues(r);
        receipt_free(r);
        if (r->sub)
                sym_natsSubscription_Destroy(SUB(r));
        if (r->js)
                sym_jsCtx_Destroy(JS(r));
        if (r->nc)
                sym_natsConnection_Destroy(NC(r));
        if (r->opts)
                sym_natsOptions_Destroy((natsOptions *)r->opts);
        /* Its threads may still call us (a closed callback): r lives until
         * they are gone, or for ever if they do not end. */
        if (sym_nats_CloseAndWait(10000) != NATS_OK) {
                log_warning("Relay: the NATS library did not shut down in 10 s");
                return;
        }
        pthread_mutex_destroy(&r->m);
        pthread_cond_destroy(&r->wake_worker);
        pthread_cond_destroy(&r->wake_fetcher);
        dict_clear(&r->outbox);
        dict_clear(&r->unsaid);
        dict_clear(&r->unverified);
        free(r->queue.id);
        free(r->host);
        free(r->servers);
        free(r->stream);
        free(r->durable);
        free(r->filter);
        free(r);
}

void relay_handle_closed(uv_handle_t *h)
{
        struct relay *r = h->data;

        if (--r->n_handles == 0 && r->free_pending)
                relay_destroy(r);
}

void relay_free(struct relay *r)
{
        if (!r)
                return;
        /* A handle of r's still in the loop (closing since relay_stop(),
         * or the loop has not yet run its close callback): freed then. */
        if (r->n_handles > 0) {
                r->free_pending = true;
                return;
        }
        relay_destroy(r);
}

static json_t *relay_status(void *ctx, int64_t now)
{
        struct relay *r = ctx;
        int64_t oldest = -1;
        const struct outbox_entry *e;

        for (e = dict_first(&r->outbox); e; e = dict_next(e)) {
                int64_t age = (now - e->at) / 1000000;
                if (age > oldest)
                        oldest = age;
        }
        /* none (outbox empty, no error yet): null, never -1 */
        json_t *o = json_pack("{s:b, s:b, s:s, s:s, s:s, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:s?, "
                              "s:o}",
                         "connected", r->st.connected, "ready", r->st.ready,
                         /* before a first connection: the servers it tries */
                         "server", r->st.server[0] ? r->st.server : r->servers,
                         "host", r->host, "stream", r->stream,
                         "outbox", (json_int_t)dict_count(&r->outbox),
                         "outbox_oldest_s", oldest >= 0 ? json_integer(oldest) : json_null(),
                         "relayed", (json_int_t)r->st.relayed,
                         "received", (json_int_t)r->st.received,
                         "duplicates", (json_int_t)r->st.duplicates,
                         "receipts_withheld", (json_int_t)r->st.receipts_withheld,
                         "publish_errors", (json_int_t)r->st.publish_errors,
                         "last_error", r->st.last_error[0] ? r->st.last_error : NULL,
                         "last_error_age_s", r->st.last_error_usec
                         ? json_integer((now - r->st.last_error_usec) / 1000000) : json_null());
        if (o)
                json_object_set_new(o, "receipts", receipt_status(r));
        return o;
}

static void relay_metrics(void *ctx, FILE *f, int64_t now)
{
        struct relay *r = ctx;
        json_t *s = relay_status(r, now);

        fprintf(f, "# HELP handoffd_relay_connected 1 while the relay is connected and set up.\n"
                   "# TYPE handoffd_relay_connected gauge\n"
                   "handoffd_relay_connected %d\n", r->st.ready ? 1 : 0);
        fprintf(f, "# HELP handoffd_relay_outbox_items Items waiting in outbox/.\n"
                   "# TYPE handoffd_relay_outbox_items gauge\n"
                   "handoffd_relay_outbox_items %lld\n",
                (long long)json_integer_value(json_object_get(s, "outbox")));
        fprintf(f, "# HELP handoffd_relay_outbox_oldest_seconds Age of the oldest item in outbox/ (-1: none).\n"
                   "# TYPE handoffd_relay_outbox_oldest_seconds gauge\n"
                   "handoffd_relay_outbox_oldest_seconds %lld\n",
                json_is_integer(json_object_get(s, "outbox_oldest_s"))
                ? (long long)json_integer_value(json_object_get(s, "outbox_oldest_s")) : -1LL);
        fprintf(f, "# HELP handoffd_relay_total Relay events since start.\n"
                   "# TYPE handoffd_relay_total counter\n");
        fprintf(f, "handoffd_relay_total{event=\"relayed\"} %llu\n", (unsigned long long)r->st.relayed);
        fprintf(f, "handoffd_relay_total{event=\"received\"} %llu\n", (unsigned long long)r->st.received);
        fprintf(f, "handoffd_relay_total{event=\"duplicate\"} %llu\n", (unsigned long long)r->st.duplicates);
        fprintf(f, "handoffd_relay_total{event=\"publish_error\"} %llu\n",
                (unsigned long long)r->st.publish_errors);
        fprintf(f, "handoffd_relay_total{event=\"receipt_sent\"} %llu\n",
                (unsigned long long)r->st.receipts_sent);
        fprintf(f, "handoffd_relay_total{event=\"receipt_applied\"} %llu\n",
                (unsigned long long)r->st.receipts_applied);
        fprintf(f, "handoffd_relay_total{event=\"receipt_duplicate\"} %llu\n",
                (unsigned long long)r->st.receipts_duplicate);
        fprintf(f, "handoffd_relay_total{event=\"receipt_dropped\"} %llu\n",
                (unsigned long long)r->st.receipts_bad);
        json_t *rs = json_object_get(s, "receipts");
        fprintf(f, "# HELP handoffd_relay_receipts Receipts owed (final one not yet written), "
                   "queued (not yet PubAck'ed) and awaited (relayed from here, final one not in).\n"
                   "# TYPE handoffd_relay_receipts gauge\n");
        static const char *const gauges[] = { "owed", "queued", "awaited" };
        for (size_t i = 0; i < ELEMENTSOF(gauges); i++)
                fprintf(f, "handoffd_relay_receipts{state=\"%s\"} %lld\n", gauges[i],
                        (long long)json_integer_value(json_object_get(rs, gauges[i])));
        json_decref(s);
}
