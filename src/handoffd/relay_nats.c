/* The NATS side of the relay; see relay.h.
 *
 * The loop never waits on the network: the connection is made by libnats
 * in the background (retry on failed connect, endless reconnects), the
 * stream and consumer requests and every publish are made by the worker
 * thread, the pulls and the acks by the fetch thread (relay_fetch.c).
 * What comes back (a
 * state change, a PubAck, a batch of messages) goes into r->evs under r->m
 * and wakes the loop with uv_async_send().  Nothing here touches the spool,
 * the config or the counters. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "log.h"
#include "nats_dl.h"
#include "relay_nats.h"
#include "relay_queue.h"

#define SETUP_RETRY_MAX_MS 30000
/* A PubAck later than this is taken as lost: the item is published again,
 * which the stream answers "duplicate" if the first one got there. */
#define PUBACK_WAIT_MS 2000
#define API_WAIT_MS 5000
#define UNREACHABLE_REPEAT_MS 30000
#define ACK_WAIT_NS (10LL * 1000000000LL)

#define JS(r) ((jsCtx *)(r)->js)

/* ---- the queue to the loop (any thread) ---------------------------- */

void relay_post_state(struct relay *r, const char *fmt, ...)
{
        struct relay_ev *ev = calloc(1, sizeof(*ev));
        va_list ap;

        if (!ev)
                return;
        ev->type = RELAY_EV_STATE;
        if (fmt) {
                va_start(ap, fmt);
                vsnprintf(ev->text, sizeof(ev->text), fmt, ap);
                va_end(ap);
        }
        relay_post(r, ev);
}

const char *relay_nats_err(natsStatus s)
{
        const char *t = sym_nats_GetLastError(NULL);
        return t && *t ? t : sym_natsStatus_GetText(s);
}

/* Milliseconds on the monotonic clock, as the condition variables wait
 * (relay.c cond_init_mono()); nats_Now() is the wall clock. */
static int64_t now_ms(void)
{
        return mono_usec() / 1000;
}

void relay_timed_wait(pthread_cond_t *c, pthread_mutex_t *m, int64_t ms)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(c, m, &ts);
}

/* Why the servers cannot be reached, as TCP says it (libnats only says
 * "not yet connected"): "HOST:PORT: Connection refused; ...".  Returns
 * how many of them accept a TCP connection. */
static int probe_servers(const char *servers, char *buf, size_t n)
{
        char copy[512], *save = NULL;
        size_t off = 0;
        int k = 0, answer = 0;

        buf[0] = '\0';
        snprintf(copy, sizeof(copy), "%s", servers);
        for (char *t = strtok_r(copy, ", \t", &save); t && k < 4; t = strtok_r(NULL, ", \t", &save), k++) {
                char host[256], port[16] = "4222", *p = strstr(t, "://");
                const char *why = NULL;
                struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
                p = p ? p + 3 : t;
                if (strchr(p, '@'))
                        p = strchr(p, '@') + 1;
                snprintf(host, sizeof(host), "%s", p);
                char *c = strrchr(host, ':');
                if (c && !strchr(c, ']')) {
                        snprintf(port, sizeof(port), "%s", c + 1);
                        *c = '\0';
                }
                host[strcspn(host, "/")] = '\0';
                if (host[0] == '[') {
                        memmove(host, host + 1, strlen(host));
                        host[strcspn(host, "]")] = '\0';
                }
                int g = getaddrinfo(host, port, &hints, &ai);
                if (g != 0) {
                        why = gai_strerror(g);
                } else {
                        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                        int e = fd < 0 ? errno : 0;
                        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
                                e = errno;
                                if (e == EINPROGRESS) {
                                        struct pollfd pf = { .fd = fd, .events = POLLOUT };
                                        socklen_t l = sizeof(e);
                                        if (poll(&pf, 1, 1000) <= 0)
                                                e = ETIMEDOUT;
                                        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
                                                e = errno;
                                }
                        }
                        if (fd >= 0)
                                close(fd);
                        why = e ? strerror(e) : "the port answers, NATS does not (TLS? auth?)";
                        answer += !e;
                        freeaddrinfo(ai);
                }
                int w = snprintf(buf + off, n - off, "%s%s:%s: %s", off ? "; " : "", host, port, why);
                if (w < 0 || (size_t)w >= n - off)
                        break;
                off += (size_t)w;
        }
        return answer;
}

/* ---- libnats callbacks (libnats threads) ---------------------------- */

static void set_connected(struct relay *r, bool up, const char *url)
{
        pthread_mutex_lock(&r->m);
        r->connected = up;
        if (url)
                snprintf(r->url, sizeof(r->url), "%s", url);
        pthread_cond_broadcast(&r->wake_worker);
        pthread_mutex_unlock(&r->m);
}

static void on_connected(natsConnection *nc, void *closure)
{
        struct relay *r = closure;
        char url[200] = "";

        sym_natsConnection_GetConnectedUrl(nc, url, sizeof(url));
        set_connected(r, true, url);
        relay_post_state(r, "%s", url);
}

static void on_disconnected(natsConnection *nc, void *closure)
{
        (void)nc;
        set_connected(closure, false, NULL);
        relay_post_state(closure, NULL);
}

static void on_async_error(natsConnection *nc, natsSubscription *sub, natsStatus s, void *closure)
{
        (void)nc;
        (void)sub;
        relay_post_state(closure, "!NATS: %s", sym_natsStatus_GetText(s));
}

static void on_puback(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
        struct relay *r = closure;
        struct relay_ev *ev = calloc(1, sizeof(*ev));
        const char *id = NULL;

        (void)js;
        if (ev && sym_natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK && id) {
                ev->type = RELAY_EV_PUBACK;
                /* handoff_id.DIGEST (msg_id()): the item is handoff_id */
                snprintf(ev->id, sizeof(ev->id), "%.*s", (int)strcspn(id, "."), id);
                ev->ok = pa != NULL;
                ev->duplicate = pa && pa->Duplicate;
                if (pae)
                        snprintf(ev->text, sizeof(ev->text), "%s%s%s",
                                 sym_natsStatus_GetText(pae->Err), pae->ErrText ? ": " : "",
                                 pae->ErrText ? pae->ErrText : "");
                relay_post(r, ev);
        } else {
                free(ev);
        }
        sym_natsMsg_Destroy(msg);
}

/* ---- the worker thread: stream, consumer, publishes ------------------- */

/* The stream (created when missing, else used as it is), the durable
 * consumer of this host, the pull subscription bound to it. */
static natsStatus setup(struct relay *r, char *err, size_t n)
{
        jsStreamInfo *si = NULL;
        jsConsumerInfo *ci = NULL;
        natsSubscription *sub = NULL;
        jsErrCode jerr = 0;
        natsStatus s;

        s = sym_js_GetStreamInfo(&si, JS(r), r->stream, NULL, &jerr);
        if (s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr) {
                const char *subjects[] = { "handoff.>" };
                jsStreamConfig sc;
                sym_jsStreamConfig_Init(&sc);
                sc.Name = r->stream;
                sc.Subjects = subjects;
                sc.SubjectsLen = 1;
                /* A message goes once it is acked by its host's consumer. */
                sc.Retention = js_WorkQueuePolicy;
                sc.Storage = js_FileStorage;
                sc.Replicas = r->replicas;
                sc.MaxAge = r->max_age_usec * 1000;
                s = sym_js_AddStream(&si, JS(r), &sc, NULL, &jerr);
                if (s != NATS_OK && jerr == JSStreamNameExistErr)
                        s = sym_js_GetStreamInfo(&si, JS(r), r->stream, NULL, &jerr);
        }
        if (s != NATS_OK && (s == NATS_NO_RESPONDERS || jerr == JSNotEnabledErr ||
                             jerr == JSNotEnabledForAccountErr)) {
                /* Nothing answers $JS.API on a server started without
                 * -js / jetstream {}: libnats' "No responders available
                 * for request" names neither the cause nor the server. */
                char url[200] = "";
                sym_natsConnection_GetConnectedUrl(r->nc, url, sizeof(url));
                snprintf(err, n, "JetStream is not enabled %son %s (nats-server -js, or jetstream {} "
                         "in its config); stream %s not made",
                         jerr == JSNotEnabledForAccountErr ? "for this account " : "",
                         url[0] ? url : r->servers, r->stream);
                return s;
        }
        if (s != NATS_OK) {
                snprintf(err, n, "stream %s: %s", r->stream, relay_nats_err(s));
                return s;
        }
        sym_jsStreamInfo_Destroy(si);

        s = sym_js_GetConsumerInfo(&ci, JS(r), r->stream, r->durable, NULL, &jerr);
        if (s == NATS_NOT_FOUND || jerr == JSConsumerNotFoundErr) {
                jsConsumerConfig cc;
                sym_jsConsumerConfig_Init(&cc);
                cc.Durable = r->durable;
                cc.FilterSubject = r->filter;
                cc.AckPolicy = js_AckExplicit;
                cc.DeliverPolicy = js_DeliverAll;
                cc.AckWait = ACK_WAIT_NS;
                cc.MaxAckPending = 4 * RELAY_FETCH_BATCH;
                s = sym_js_AddConsumer(&ci, JS(r), r->stream, &cc, NULL, &jerr);
        }
        if (s != NATS_OK) {
                snprintf(err, n, "consumer %s: %s", r->durable, relay_nats_err(s));
                return s;
        }
        sym_jsConsumerInfo_Destroy(ci);

        /* Bound to the consumer we made: destroying the subscription
         * never deletes it. */
        jsSubOptions so;
        sym_jsSubOptions_Init(&so);
        so.Stream = r->stream;
        so.Consumer = r->durable;
        s = sym_js_PullSubscribe(&sub, JS(r), r->filter, r->durable, NULL, &so, &jerr);
        if (s != NATS_OK) {
                snprintf(err, n, "subscription %s: %s", r->durable, relay_nats_err(s));
                return s;
        }
        pthread_mutex_lock(&r->m);
        r->sub = sub;
        r->ready = true;
        pthread_cond_broadcast(&r->wake_fetcher);
        pthread_mutex_unlock(&r->m);
        return NATS_OK;
}

/* Nats-Msg-Id: the handoff_id and a digest of the bytes.  JetStream
 * drops a second publish of the same bytes; a message someone else put
 * on the stream first under this handoff_id (issue 24.2) does not make
 * it drop ours.  A receipt's "ID:OUTCOME" goes as it is: the origin
 * checks it (receipt.c), and its signature already binds its bytes. */
static void msg_id(const struct relay_job *j, char *out, size_t n)
{
        unsigned char h[crypto_hash_sha256_BYTES];
        char hex[2 * 12 + 1];

        if (strchr(j->id, ':')) {
                snprintf(out, n, "%s", j->id);
                return;
        }
        crypto_hash_sha256(h, (const unsigned char *)j->data, j->len);
        sodium_bin2hex(hex, sizeof(hex), h, 12);
        snprintf(out, n, "%s.%s", j->id, hex);
}

static void publish(struct relay *r, struct relay_job *j)
{
        char id[RELAY_MSGID_MAX + 32];
        natsMsg *msg = NULL;
        jsPubOptions po;
        natsStatus s;

        sym_jsPubOptions_Init(&po);
        msg_id(j, id, sizeof(id));
        po.MsgId = id;
        po.MaxWait = PUBACK_WAIT_MS;
        s = sym_natsMsg_Create(&msg, j->subject, NULL, j->data, (int)j->len);
        if (s == NATS_OK)       /* where receipts go back (receipt.c) */
                s = sym_natsMsgHeader_Set(msg, "Handoff-Origin", r->host);
        /* receipts back to this host may come in batches (receipt.c) */
        if (s == NATS_OK && r->takes_batches)
                s = sym_natsMsgHeader_Set(msg, "Handoff-Receipts", "batch");
        if (s == NATS_OK)
                s = sym_js_PublishMsgAsync(JS(r), &msg, &po);
        sym_natsMsg_Destroy(msg);   /* NULL when libnats took it */
        if (s != NATS_OK) {
                struct relay_ev *ev = calloc(1, sizeof(*ev));
                if (ev) {
                        ev->type = RELAY_EV_PUBACK;
                        snprintf(ev->id, sizeof(ev->id), "%s", j->id);
                        snprintf(ev->text, sizeof(ev->text), "%s", relay_nats_err(s));
                        relay_post(r, ev);
                }
        }
}

/* The worker thread's own state (relay_worker_main()). */
struct worker {
        natsConnection *nc;
        int64_t setup_wait, setup_at;   /* ms: the stream's set-up, backed off */
        int64_t down_since, down_said;  /* ms: not connected since, last said */
};

/* The connection and its JetStream context, or NULL (said).  Not
 * connected yet is not an error: libnats retries in the background and
 * tells nothing until it connects, so it is said at once here and every
 * UNREACHABLE_REPEAT_MS while it lasts (worker_down()). */
static jsCtx *worker_connect(struct relay *r, struct worker *w)
{
        jsOptions jo;
        jsCtx *js = NULL;
        natsStatus s;

        s = sym_natsConnection_Connect(&w->nc, r->opts);
        if (s != NATS_OK && s != NATS_NOT_YET_CONNECTED) {
                relay_post_state(r, "!cannot connect: %s", relay_nats_err(s));
                return NULL;
        }
        if (s == NATS_OK)
                on_connected(w->nc, r);
        w->down_since = now_ms();
        if (s != NATS_OK) {
                char why[200];
                probe_servers(r->servers, why, sizeof(why));
                relay_post_state(r, "!cannot connect: %s; retrying every second", why);
                w->down_said = w->down_since;
        }
        sym_jsOptions_Init(&jo);
        jo.Wait = API_WAIT_MS;
        jo.PublishAsync.AckHandler = on_puback;
        jo.PublishAsync.AckHandlerClosure = r;
        jo.PublishAsync.MaxPending = RELAY_INFLIGHT_MAX;
        s = sym_natsConnection_JetStream(&js, w->nc, &jo);
        if (s != NATS_OK) {
                relay_post_state(r, "!JetStream context: %s", relay_nats_err(s));
                sym_natsConnection_Close(w->nc);
                sym_natsConnection_Destroy(w->nc);
                return NULL;
        }
        return js;
}

/* The stream and the consumer set up (m not held), again after 1, 2, 4
 * ... up to SETUP_RETRY_MAX_MS seconds while it fails. */
static void worker_setup(struct relay *r, struct worker *w)
{
        char err[300];

        if (setup(r, err, sizeof(err)) == NATS_OK) {
                w->setup_wait = 1000;
                relay_post_state(r, NULL);
                return;
        }
        relay_post_state(r, "!%s", err);
        w->setup_at = now_ms() + w->setup_wait;
        w->setup_wait = w->setup_wait * 2 > SETUP_RETRY_MAX_MS ? SETUP_RETRY_MAX_MS
                                                               : w->setup_wait * 2;
}

/* The jobs the loop queued, published in order and freed (m not held). */
static void worker_publish(struct relay *r, struct relay_job *j)
{
        while (j) {
                struct relay_job *next = j->next;
                publish(r, j);
                free(j->data);
                free(j);
                j = next;
        }
}

/* The connection's state said when it changed or while it lasts (m held,
 * let go while it talks to the network).  True when it said something. */
static bool worker_down(struct relay *r, struct worker *w)
{
        char why[200];

        if (r->connected) {
                w->down_since = 0;
                return false;
        }
        if (!w->down_since) {
                /* Dropped: said at once with why (libnats' last error on
                 * the connection, what TCP says to a reconnect), not left
                 * to "fetch: Error" until the repeat below.  A server
                 * killed closes our connection before its listening
                 * socket: while a port still answers, the drop is said as
                 * it is and TCP's answer follows in a second. */
                char url[200], lost[160] = "";
                const char *t = NULL;
                w->down_since = w->down_said = now_ms();
                snprintf(url, sizeof(url), "%s", r->url[0] ? r->url : r->servers);
                pthread_mutex_unlock(&r->m);
                if (sym_natsConnection_GetLastError(w->nc, &t) != NATS_OK && t && *t)
                        snprintf(lost, sizeof(lost), "%s", t);
                bool answers = probe_servers(r->servers, why, sizeof(why)) > 0;
                if (answers)
                        w->down_said -= UNREACHABLE_REPEAT_MS - 1000;
                relay_post_state(r, "!disconnected from %s: %s%s%s; retrying every second, "
                           "outbound items wait in outbox/", url,
                           lost[0] ? lost : answers ? "the server closed the connection" : "",
                           lost[0] && !answers ? "; " : "", answers ? "" : why);
                pthread_mutex_lock(&r->m);
                return true;
        }
        if (now_ms() - w->down_said >= UNREACHABLE_REPEAT_MS) {
                w->down_said = now_ms();
                pthread_mutex_unlock(&r->m);
                probe_servers(r->servers, why, sizeof(why));
                relay_post_state(r, "!cannot connect for %llds: %s; retrying",
                           (long long)((w->down_said - w->down_since) / 1000), why);
                pthread_mutex_lock(&r->m);
        }
        return false;
}

void *relay_worker_main(void *arg)
{
        struct relay *r = arg;
        struct worker w = { .setup_wait = 1000 };
        jsCtx *js = worker_connect(r, &w);

        if (!js)
                return NULL;
        pthread_mutex_lock(&r->m);
        r->nc = w.nc;
        r->js = js;
        while (!r->stop) {
                if (r->connected && !r->ready && now_ms() >= w.setup_at) {
                        pthread_mutex_unlock(&r->m);
                        worker_setup(r, &w);
                        pthread_mutex_lock(&r->m);
                        continue;
                }
                if (r->jobs) {
                        struct relay_job *j = r->jobs;
                        r->jobs = r->jobs_tail = NULL;
                        pthread_mutex_unlock(&r->m);
                        worker_publish(r, j);
                        pthread_mutex_lock(&r->m);
                        continue;
                }
                if (worker_down(r, &w))
                        continue;
                relay_timed_wait(&r->wake_worker, &r->m, 1000);
        }
        r->ready = false;
        pthread_cond_broadcast(&r->wake_fetcher);
        pthread_mutex_unlock(&r->m);
        /* Wakes a fetch in progress. */
        sym_natsConnection_Close(w.nc);
        return NULL;
}

static int split_servers(const char *s, char ***ret, int *n)
{
        char *copy = strdup(s), *save = NULL, **v;
        int k = 0;

        if (!copy)
                return -ENOMEM;
        v = calloc(strlen(s) / 2 + 2, sizeof(char *));
        if (!v) {
                free(copy);
                return -ENOMEM;
        }
        for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save))
                if (!(v[k++] = strdup(t))) {
                        k--;
                        break;
                }
        free(copy);
        *ret = v;
        *n = k;
        return k > 0 ? 0 : -EINVAL;
}

int relay_options(struct relay *r, const struct config_relay *c)
{
        natsOptions *o = NULL;
        char **servers = NULL, name[160];
        int n = 0, q;
        natsStatus s;

        q = split_servers(c->servers, &servers, &n);
        if (q < 0)
                goto out;
        snprintf(name, sizeof(name), "handoffd %s", r->host);
        s = sym_natsOptions_Create(&o);
        if (s == NATS_OK)
                s = sym_natsOptions_SetServers(o, (const char **)servers, n);
        if (s == NATS_OK)
                s = sym_natsOptions_SetName(o, name);
        /* Reconnect for ever, one attempt a second per server; a dead
         * server is noticed within 10 s even without a reset. */
        if (s == NATS_OK)
                s = sym_natsOptions_SetMaxReconnect(o, -1);
        if (s == NATS_OK)
                s = sym_natsOptions_SetReconnectWait(o, 1000);
        if (s == NATS_OK)
                s = sym_natsOptions_SetPingInterval(o, 5000);
        if (s == NATS_OK)
                s = sym_natsOptions_SetMaxPingsOut(o, 2);
        if (s == NATS_OK)
                s = sym_natsOptions_SetRetryOnFailedConnect(o, true, on_connected, r);
        if (s == NATS_OK)
                s = sym_natsOptions_SetReconnectedCB(o, on_connected, r);
        if (s == NATS_OK)
                s = sym_natsOptions_SetDisconnectedCB(o, on_disconnected, r);
        if (s == NATS_OK)
                s = sym_natsOptions_SetClosedCB(o, on_disconnected, r);
        if (s == NATS_OK)
                s = sym_natsOptions_SetErrorHandler(o, on_async_error, r);
        if (s == NATS_OK && c->credentials)
                s = sym_natsOptions_SetUserCredentialsFromFiles(o, c->credentials, NULL);
        if (s == NATS_OK && c->user)
                s = sym_natsOptions_SetUserInfo(o, c->user, c->password);
        if (s == NATS_OK && c->nkey)
                s = sym_natsOptions_SetNKeyFromSeed(o, c->nkey, c->nkey_seed);
        if (s == NATS_OK && (c->tls_ca || c->tls_cert))
                s = sym_natsOptions_SetSecure(o, true);
        if (s == NATS_OK && c->tls_ca)
                s = sym_natsOptions_LoadCATrustedCertificates(o, c->tls_ca);
        if (s == NATS_OK && c->tls_cert)
                s = sym_natsOptions_LoadCertificatesChain(o, c->tls_cert, c->tls_key);
        if (s != NATS_OK) {
                log_error("[relay]: %s", relay_nats_err(s));
                sym_natsOptions_Destroy(o);
                q = -EINVAL;
                goto out;
        }
        r->opts = o;
        q = 0;
out:
        for (int i = 0; i < n; i++)
                free(servers[i]);
        free(servers);
        return q;
}
