/* HTTP, through libmicrohttpd: its threads read requests (no HTTP parsing
 * here), this file routes them, enforces the token and the body cap, and
 * turns what hub_accept.c decides into answers.
 *
 *   POST /api/v1/handoffs/start    a signed handoff (hub_accept_post);
 *                                  ?wait=claimed: and its outcome
 *   GET  /api/v1/handoffs/{id}     its state (hub_accept_show)
 *   GET  /healthz                  "ok"
 *   GET  /metrics                  Prometheus text (hub_stats.c)
 *   GET  /a2a/NAME/.well-known/agent-card.json, POST /a2a/NAME,
 *        /.well-known/agent-card.json
 *                                  A2A (hub_a2a.c); a stream's answer
 *                                  is text/event-stream, parked on no
 *                                  thread between its events
 *   POST, GET, DELETE /mcp         MCP's Streamable HTTP (hub_mcp.c) */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hub.h"
#include "hub_jws.h"
#include "hub_mcp.h"
#include "util.h"

#define PATH_START "/api/v1/handoffs/start"
#define PATH_ITEM "/api/v1/handoffs/"
/* A connection's memory in libmicrohttpd: its request line and headers,
 * and the buffers of its answer.  Held by each open stream, so kept small:
 * 8 KiB, not 64 (1,000 streams took 97 MB at 64 KiB, 61 MB at 8 KiB).
 * Headers of 7 KiB still leave room for a stream's answer. */
#define HEADER_MEMORY (8 * 1024)
#define STREAM_BLOCK 1024
#define PATH_A2A "/a2a/"
#define A2A_CARD "/.well-known/agent-card.json"

struct hub_http {
        struct MHD_Daemon *d;
        struct hub *h;
};

struct req {
        struct hub *h;
        struct timespec t0;
        struct hub_request q;
        char peer[INET6_ADDRSTRLEN + 1];        /* q.peer */
        /* a wait its answer comes after (hub_wait.c): the connection
         * suspended meanwhile, the answer so far in a */
        struct MHD_Connection *conn;
        struct hub_wait *wait;
        struct hub_answer a;
};

static double since(const struct timespec *t0)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ---- the decision, without libmicrohttpd ------------------------------ */

/* a's answer is a refusal */
static bool refuse(struct hub_answer *a, unsigned status, const char *reason,
                   const char *detail)
{
        hub_answer_reject(a, status, reason, detail);
        return true;
}

static bool answer_text(struct hub_answer *a, char *body, const char *ctype)
{
        a->status = 200;
        a->body = body;
        a->ctype = ctype;
        return true;
}

/* Authorization: Bearer TOKEN -> the agent it speaks for into agent[65];
 * false when none. */
static bool auth_agent(struct hub *h, const char *v, const char *peer, char *agent)
{
        const char *a = NULL, *why = "no Authorization header";

        agent[0] = '\0';
        if (v && strncasecmp(v, "Bearer ", 7))
                why = "an Authorization header that is not Bearer";
        if (v && !strncasecmp(v, "Bearer ", 7)) {
                v += 7;
                while (*v == ' ')
                        v++;
                why = "a token not in token_dir";
                /* SIGHUP may swap the tokens meanwhile */
                pthread_rwlock_rdlock(&h->tokens_lock);
                a = hub_tokens_agent(h->tokens, v, strlen(v));
                if (a)
                        snprintf(agent, 65, "%s", a);
                pthread_rwlock_unlock(&h->tokens_lock);
        }
        if (!a)
                hub_auth_failed(h, peer ? peer : "an unknown address", why);
        return a != NULL;
}

bool hub_request_auth(struct hub *h, struct hub_request *q)
{
        return auth_agent(h, q->authorization, q->peer, q->agent);
}

static bool json_content_type(const char *v)
{
        size_t n = strlen("application/json");

        if (!v || strncasecmp(v, "application/json", n))
                return false;
        v += n;
        while (*v == ' ' || *v == '\t')
                v++;
        return *v == '\0' || *v == ';';
}

bool hub_request_json(const struct hub_request *q)
{
        return json_content_type(q->content_type);
}

/* /a2a/NAME[SUFFIX] -> NAME into name[65]: true when url is that. */
static bool a2a_path(const char *url, const char *suffix, char *name)
{
        size_t n;

        if (strncmp(url, PATH_A2A, strlen(PATH_A2A)))
                return false;
        url += strlen(PATH_A2A);
        n = strcspn(url, "/");
        if (n == 0 || n > 64 || strcmp(url + n, suffix))
                return false;
        memcpy(name, url, n);
        name[n] = '\0';
        return true;
}

/* A JSON-RPC error refusal, for /a2a/. */
static bool a2a_refuse(struct hub_answer *a, unsigned status, int code, const char *message)
{
        hub_a2a_error(a, status, NULL, code, message);
        return true;
}

/* The first call for a POST to /a2a/NAME: as post_begin(), its refusals
 * JSON-RPC errors (-32600: the request is not one to answer). */
static bool a2a_begin(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        const char *ct = q->content_type;
        int64_t n;

        if (!auth_agent(h, q->authorization, q->peer, q->agent))
                return a2a_refuse(a, 401, -32600,
                                  "unauthorized: a valid Authorization: Bearer token is required");
        if (!json_content_type(ct) &&
            !(ct && !strncasecmp(ct, "application/a2a+json", 20) &&
              (ct[20] == '\0' || ct[20] == ';')))
                return a2a_refuse(a, 415, -32600,
                                  "Content-Type must be application/json or application/a2a+json");
        if (q->content_length && (parse_int64(q->content_length, 0, INT64_MAX, &n) < 0 ||
                                  (uint64_t)n > h->cfg->max_file_size))
                return a2a_refuse(a, 413, -32600, "the request is larger than max_file_size");
        return false;
}

/* The first call for a POST: refuse what can be refused before the body. */
static bool post_begin(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        char detail[128];
        unsigned retry;
        int64_t n;

        if (!auth_agent(h, q->authorization, q->peer, q->agent))
                return refuse(a, 401, "unauthorized",
                              "a valid Authorization: Bearer token is required");
        if (!json_content_type(q->content_type))
                return refuse(a, 415, "unsupported_media_type",
                              "Content-Type must be application/json");
        if (q->content_length && (parse_int64(q->content_length, 0, INT64_MAX, &n) < 0 ||
                                  (uint64_t)n > h->cfg->max_file_size)) {
                snprintf(detail, sizeof(detail), "the body is larger than %llu bytes",
                         (unsigned long long)h->cfg->max_file_size);
                return refuse(a, 413, "too_large", detail);
        }
        if (q->wait && strcmp(q->wait, "claimed"))
                return refuse(a, 400, "bad_request", "wait= takes claimed only");
        q->wait_claimed = q->wait != NULL;
        /* counted before the body is read, and before anything is dropped */
        if (!hub_limits_take(h->limits, q->agent, &retry)) {
                hub_answer_limited(a, retry, false);
                return true;
        }
        return false;
}

static bool on_get(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        char agent[65];
        const char *url = q->url;

        if (!strcmp(url, "/healthz"))
                return answer_text(a, strdup("ok\n"), "text/plain");
        if (!strcmp(url, "/metrics")) {
                long conns_open = h->conns ? (long)hub_conns_count(h->conns) : -1;
                return answer_text(a, hub_stats_text(h, conns_open), "text/plain; version=0.0.4");
        }
        if (a2a_path(url, A2A_CARD, agent)) {
                if (hub_a2a_card(h, agent, q->host, a) < 0)
                        return refuse(a, 500, "internal", "out of memory");
                return true;
        }
        if (!strcmp(url, A2A_CARD)) {
                if (hub_a2a_root_card(h, q->host, a) < 0)
                        return refuse(a, 500, "internal", "out of memory");
                return true;
        }
        if (!strcmp(url, HUB_JWKS_PATH)) {
                if (hub_jwks_answer(h->signer, a) < 0)
                        return refuse(a, 500, "internal", "out of memory");
                return true;
        }
        if (!strcmp(url, "/a2a" A2A_CARD)) {
                if (hub_a2a_card_elsewhere(h, q->host, a) < 0)
                        return refuse(a, 500, "internal", "out of memory");
                return true;
        }
        if (a2a_path(url, "", agent) || a2a_path(url, "/", agent))
                return a2a_refuse(a, 405, -32600, "use POST for JSON-RPC");
        if (strncmp(url, PATH_ITEM, strlen(PATH_ITEM)) || !strcmp(url, PATH_START))
                return refuse(a, 404, "not_found", "no such resource");
        if (!auth_agent(h, q->authorization, q->peer, agent))
                return refuse(a, 401, "unauthorized",
                              "a valid Authorization: Bearer token is required");
        if (hub_accept_show(h, agent, url + strlen(PATH_ITEM), a) < 0)
                return refuse(a, 500, "internal", "out of memory");
        return true;
}

bool hub_request_head(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        const char *url = q->url, *method = q->method;

        *a = (struct hub_answer){ 0 };
        if (!strcmp(url, HUB_MCP_PATH))
                return hub_mcp_head(h, q, a);
        if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
                return on_get(h, q, a);
        if (a2a_path(url, "", q->a2a) || a2a_path(url, "/", q->a2a)) {
                if (strcmp(method, "POST"))
                        return a2a_refuse(a, 405, -32600, "use POST");
                return a2a_begin(h, q, a);
        }
        q->a2a[0] = '\0';
        if (strcmp(url, PATH_START))
                return strncmp(url, PATH_ITEM, strlen(PATH_ITEM)) &&
                               strcmp(url, "/healthz") && strcmp(url, "/metrics")
                        ? refuse(a, 404, "not_found", "no such resource")
                        : refuse(a, 405, "method_not_allowed", "use GET");
        if (strcmp(method, "POST"))
                return refuse(a, 405, "method_not_allowed", "use POST");
        if (!post_begin(h, q, a))
                return false;
        /* a failed authentication is logged as one (hub_auth_failed()) */
        if (a->status != 401)
                hub_refused(h, q->peer, q->agent, NULL, 0, a);
        return true;
}

int hub_request_body(struct hub *h, struct hub_request *q, const char *data,
                     size_t size)
{
        size_t cap = h->cfg->max_file_size, want;
        int64_t n;
        char *nb;

        if (q->too_large || size > cap - q->len) {
                /* read on and drop: the answer comes at the end */
                q->too_large = true;
                free(q->body);
                q->body = NULL;
                q->len = q->room = 0;
                return 0;
        }
        if (size > q->room - q->len) {
                /* The body's size, not the cap's: a buffer of max_file_size
                 * a request (1 MiB) left a page or two of each resident,
                 * and the heap between them in pieces, while its stream
                 * was open.  Content-Length (checked against the cap in
                 * post_begin) is the size; without it, doubled as it comes. */
                want = q->len + size;
                if (!q->room && q->content_length &&
                    parse_int64(q->content_length, 0, INT64_MAX, &n) == 0 &&
                    (uint64_t)n <= cap && (size_t)n > want)
                        want = (size_t)n;
                else if (want < 2 * q->room)
                        want = 2 * q->room < cap ? 2 * q->room : cap;
                nb = realloc(q->body, want + 1);
                if (!nb)
                        return -ENOMEM;
                q->body = nb;
                q->room = want;
        }
        memcpy(q->body + q->len, data, size);
        q->len += size;
        return 0;
}

/* The request made on this pool thread, the token's share allowing. */
static void request_make(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        char detail[128];

        if (q->mcp) {
                hub_mcp_post(h, q, a);
                return;
        }
        if (q->a2a[0]) {
                if (q->too_large)
                        a2a_refuse(a, 413, -32600, "the request is larger than max_file_size");
                else if (hub_a2a_rpc(h, q->agent, q->a2a, q->a2a_version, q->last_event_id,
                                     q->body ? q->body : "", q->len, a) < 0)
                        a2a_refuse(a, 500, -32603, "out of memory");
                return;
        }
        if (q->too_large) {
                snprintf(detail, sizeof(detail), "the body is larger than %llu bytes",
                         (unsigned long long)h->cfg->max_file_size);
                refuse(a, 413, "too_large", detail);
        } else if (hub_accept_post(h, q->agent, q->body ? q->body : "", q->len, a) < 0) {
                refuse(a, 500, "internal", "out of memory");
        }
        if (a->status == 200 && q->wait_claimed) {
                json_t *o = json_loads(a->body, 0, NULL);
                const char *id = json_string_value(json_object_get(o, "handoff_id"));
                int r = id ? hub_accept_wait(h, q->agent, id, h->wait_ms, &a->wait) : 0;
                json_decref(o);
                if (r < 0) {
                        free(a->body);
                        refuse(a, 500, "internal", "out of memory");
                }
        }
        /* the sender's client may show only the status: the reason is
         * in the body, and here */
        if (a->status >= 400)
                hub_refused(h, q->peer, q->agent, q->body, q->len, a);
}

void hub_request_end(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        *a = (struct hub_answer){ 0 };
        /* One token's requests take at most its share of the threads: a
         * request beyond it is refused at once, which holds a thread for
         * no longer than the refusal. */
        if (!hub_limits_enter(h->limits, q->agent)) {
                if (q->a2a[0])
                        hub_a2a_limited(a, NULL, 1, true);
                else
                        hub_answer_limited(a, 1, true);
                return;
        }
        request_make(h, q, a);
        hub_limits_leave(h->limits, q->agent);
}

void hub_request_done(struct hub_request *q)
{
        free(q->body);
        q->body = NULL;
        q->len = q->room = 0;
}

/* ---- libmicrohttpd ---------------------------------------------------- */

static enum MHD_Result respond(struct MHD_Connection *c, struct req *rq,
                               struct hub_answer *a)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;
        unsigned status = a->status;
        char *body = a->body;

        if (!body) {
                status = 500;
                body = strdup("{\"status\":\"rejected\",\"reason\":\"internal\",\"detail\":\"out of memory\"}");
                if (!body)
                        return MHD_NO;
        }
        resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                a->ctype ? a->ctype : "application/json");
        MHD_add_response_header(resp, "Cache-Control", "no-store");
        if (status == 401)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        if (a->session[0])
                MHD_add_response_header(resp, "Mcp-Session-Id", a->session);
        if (a->retry_after) {
                char v[16];
                snprintf(v, sizeof(v), "%u", a->retry_after);
                MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, v);
        }
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        hub_stats_request(status, since(&rq->t0));
        return ret;
}

/* The peer's address as text ("unix" on a unix socket). */
static const char *peer_address(struct MHD_Connection *c, char *buf, size_t n)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;

        if (sa && sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)n);
        else if (sa && sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)n);
        else
                snprintf(buf, n, "unix");
        return buf;
}

static const char *header(struct MHD_Connection *c, const char *name)
{
        return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* Our entry for c in h->conns (hub_conns.c), or NULL. */
static struct hub_conn *conn_of(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return ci ? ci->socket_context : NULL;
}

static void conn_phase(struct hub *h, struct MHD_Connection *c, enum hub_conn_phase p)
{
        hub_conns_phase(h->conns, conn_of(c), p, mono_usec());
}

static void wait_suspend(void *arg)
{
        MHD_suspend_connection(((struct req *)arg)->conn);
}

static void wait_resume(void *arg)
{
        MHD_resume_connection(((struct req *)arg)->conn);
}

void hub_wait_answer(struct hub *h, struct hub_wait *w, struct hub_answer *a)
{
        if (w->ops->finish(h, w, a) < 0) {
                free(a->body);
                *a = (struct hub_answer){ 0 };
                refuse(a, 500, "internal", "out of memory");
        }
        w->ops->free(w);
}

static enum MHD_Result wait_answer(struct hub *h, struct MHD_Connection *c, struct req *rq);

/* libmicrohttpd's content reader of a stream (an A2A SSE answer): what
 * its writer has, or the connection parked with the watcher until there
 * is more (it holds no thread meanwhile). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct req *rq = cls;
        long n;

        (void)pos;
        n = rq->wait->ops->stream(rq->h, rq->wait, buf, max);
        if (n > 0)
                return n;
        if (n == HUB_STREAM_PARK &&
            hub_waits_park(rq->h->waits, rq->wait, wait_suspend, wait_resume, rq) == 0)
                return 0;
        return MHD_CONTENT_READER_END_OF_STREAM;
}

/* rq's answer is a stream: held by the watcher (or, without room, the
 * refusal its finish makes), its events sent as they come. */
static enum MHD_Result stream_answer(struct hub *h, struct MHD_Connection *c, struct req *rq)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;

        if (hub_waits_hold(h->waits, rq->wait) < 0)
                return wait_answer(h, c, rq);
        /* The block is allocated with the response and held while the
         * stream is open, yet read into only for an HTTP/1.0 client (a
         * chunked answer is read into the connection's memory): 1 KiB, not
         * 4 (1,000 streams 34 MB, not 37). */
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read,
                                                 rq, NULL);
        if (!resp)
                return MHD_NO;  /* on_completed() forgets and frees it */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-store");
        ret = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        hub_stats_request(200, since(&rq->t0));
        return ret;
}

/* rq's wait is over (or never began): its answer, sent. */
static enum MHD_Result wait_answer(struct hub *h, struct MHD_Connection *c, struct req *rq)
{
        struct hub_answer a = rq->a;
        struct hub_wait *w = rq->wait;

        rq->wait = NULL;
        rq->a = (struct hub_answer){ 0 };
        hub_wait_answer(h, w, &a);
        return respond(c, rq, &a);
}

/* a's answer waits: on no thread, or at once when there is no room. */
static enum MHD_Result answer_later(struct hub *h, struct MHD_Connection *c, struct req *rq,
                                    struct hub_answer *a)
{
        rq->conn = c;
        rq->wait = a->wait;
        a->wait = NULL;
        rq->a = *a;
        if (rq->wait->ops->stream)
                return stream_answer(h, c, rq);
        if (hub_waits_add(h->waits, rq->wait, wait_suspend, wait_resume, rq) == 0)
                return MHD_YES;
        return wait_answer(h, c, rq);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
        struct hub *h = cls;
        struct req *rq = *con_cls;
        struct hub_answer a;

        if (!rq) {
                rq = calloc(1, sizeof(*rq));
                if (!rq)
                        return MHD_NO;
                clock_gettime(CLOCK_MONOTONIC, &rq->t0);
                *con_cls = rq;
                rq->q.method = method;
                rq->q.url = url;
                rq->q.authorization = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
                rq->q.content_type = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
                rq->q.content_length = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
                rq->q.wait = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "wait");
                rq->q.host = header(c, MHD_HTTP_HEADER_HOST);
                rq->q.a2a_version = header(c, "A2A-Version");
                rq->q.last_event_id = header(c, "Last-Event-ID");
                rq->q.origin = header(c, "Origin");
                rq->q.accept = header(c, MHD_HTTP_HEADER_ACCEPT);
                rq->q.mcp_session = header(c, "Mcp-Session-Id");
                rq->q.mcp_version = header(c, "MCP-Protocol-Version");
                rq->h = h;
                rq->q.peer = peer_address(c, rq->peer, sizeof(rq->peer));
                /* headers whole: no longer dropped to make room */
                conn_phase(h, c, HUB_CONN_BODY);
                if (hub_request_head(h, &rq->q, &a)) {
                        conn_phase(h, c, HUB_CONN_ANSWER);
                        if (a.wait)
                                return answer_later(h, c, rq, &a);
                        return respond(c, rq, &a);
                }
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                size_t n = *upload_data_size;
                *upload_data_size = 0;
                return hub_request_body(h, &rq->q, upload_data, n) < 0 ? MHD_NO : MHD_YES;
        }
        /* resumed: the wait is over */
        if (rq->wait)
                return wait_answer(h, c, rq);
        /* the request is whole: its deadline is met (?wait=claimed may
         * take its seconds now) */
        conn_phase(h, c, HUB_CONN_ANSWER);
        hub_request_end(h, &rq->q, &a);
        /* read: not held by a wait or a stream for as long as it is open */
        hub_request_done(&rq->q);
        if (!a.wait)
                return respond(c, rq, &a);
        return answer_later(h, c, rq, &a);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct req *rq = *con_cls;

        if (rq) {
                if (rq->wait) {
                        hub_waits_forget(((struct hub *)cls)->waits, rq->wait);
                        rq->wait->ops->free(rq->wait);
                }
                free(rq->a.body);
                hub_request_done(&rq->q);
                free(rq);
                *con_cls = NULL;
        }
        /* a next request on the connection has its own headers to send */
        conn_phase(cls, c, HUB_CONN_HEAD);
}

/* A connection accepted, and closed: into and out of h->conns. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
        struct hub *h = cls;
        const union MHD_ConnectionInfo *fi, *ai;
        struct hub_conn *hc = NULL;

        if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                hub_conns_close(h->conns, *socket_context);
                *socket_context = NULL;
                return;
        }
        fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (!fi)
                return;
        if (hub_conns_open(h->conns, fi->connect_fd, ai ? ai->client_addr : NULL,
                           mono_usec(), &hc) == 0)
                *socket_context = hc;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
        char buf[512];
        size_t n;

        vsnprintf(buf, sizeof(buf), fmt, ap);
        n = strlen(buf);
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = '\0';
        if (((struct hub *)cls)->verbose)
                hub_log("libmicrohttpd: %s", buf);
}

int hub_http_start(struct hub *h, int listen_fd, bool is_unix,
                   struct hub_http **ret, char *err, size_t errlen)
{
        const struct config_hub *ch = &h->cfg->hub;
        /* suspend/resume: a wait holds its connection, not a thread (hub_wait.c) */
        unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
                         MHD_ALLOW_SUSPEND_RESUME;
        /* a unix socket has no peer address to count by: 0 = no share */
        unsigned per_ip = is_unix ? 0 : (unsigned)ch->max_per_address;
        unsigned max = (unsigned)ch->max_connections;
        /* The limits are hub_conns.c's: libmicrohttpd refuses at its own,
         * where the oldest without headers should have made room.  Its
         * limit leaves room for the ones cut and not yet closed (it
         * splits it among its threads, each accepting while it has some). */
        unsigned mhd_max = max + (max / 2 > HUB_THREADS ? max / 2 : HUB_THREADS);
        struct hub_http *s;
        int r;

        s = calloc(1, sizeof(*s));
        r = s ? hub_conns_new(max, per_ip, ch->request_timeout * 1000000, &h->conns) : -ENOMEM;
        if (r == 0)
                r = hub_limits_new(ch, &h->limits);
        if (r == 0)
                r = hub_waits_start(h, &h->waits);
        if (r == 0)
                r = hub_mcp_new(h, &h->mcp);
        if (r < 0) {
                if (h->waits) {
                        hub_waits_stop(h->waits);
                        hub_waits_free(h->waits);
                        h->waits = NULL;
                }
                hub_limits_free(h->limits);
                h->limits = NULL;
                hub_conns_free(h->conns);
                h->conns = NULL;
                free(s);
                snprintf(err, errlen, "%s", strerror(-r));
                return r;
        }
        s->h = h;
#define HUB_MHD_OPTIONS \
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h, \
        MHD_OPTION_LISTEN_SOCKET, listen_fd, \
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HUB_THREADS, \
        MHD_OPTION_CONNECTION_LIMIT, mhd_max, \
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ch->timeout, \
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADER_MEMORY, \
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, \
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h
        if (h->tls) {
                hub_tls_set_global(h->tls);
                s->d = MHD_start_daemon(flags | MHD_USE_TLS, 0, NULL, NULL,
                                        on_request, h, HUB_MHD_OPTIONS,
                                        MHD_OPTION_HTTPS_CERT_CALLBACK,
                                        hub_tls_callback(), MHD_OPTION_END);
        } else {
                s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
                                        HUB_MHD_OPTIONS, MHD_OPTION_END);
        }
#undef HUB_MHD_OPTIONS
        if (!s->d) {
                hub_waits_stop(h->waits);
                hub_waits_free(h->waits);
                h->waits = NULL;
                hub_mcp_free(h->mcp);
                h->mcp = NULL;
                hub_limits_free(h->limits);
                h->limits = NULL;
                hub_conns_free(h->conns);
                h->conns = NULL;
                free(s);
                snprintf(err, errlen, "libmicrohttpd did not start%s",
                         h->verbose ? " (see above)" : " (run with -v for why)");
                return -EIO;
        }
        *ret = s;
        return 0;
}

void hub_http_stop(struct hub_http *s)
{
        if (!s)
                return;
        /* the waits answered as they stand, then every connection closed
         * (and out of the table) when MHD_stop_daemon returns */
        hub_waits_stop(s->h->waits);
        MHD_stop_daemon(s->d);
        hub_waits_free(s->h->waits);
        s->h->waits = NULL;
        hub_mcp_free(s->h->mcp);
        s->h->mcp = NULL;
        hub_limits_free(s->h->limits);
        s->h->limits = NULL;
        hub_conns_free(s->h->conns);
        s->h->conns = NULL;
        free(s);
}
