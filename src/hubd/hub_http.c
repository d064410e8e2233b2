/* HTTP, through libmicrohttpd: its threads read requests (no HTTP parsing
 * here), this file routes them, enforces the token and the body cap, and
 * turns what hub_accept.c decides into answers.
 *
 *   POST /api/v1/handoffs/start    a signed handoff (hub_accept_post);
 *                                  ?wait=claimed: and its outcome
 *   GET  /api/v1/handoffs/{id}     its state (hub_accept_show)
 *   GET  /healthz                  "ok"
 *   GET  /metrics                  Prometheus text (hub_stats.c) */
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

#include "handoff.h"
#include "hub.h"
#include "util.h"

#define PATH_START "/api/v1/handoffs/start"
#define PATH_ITEM "/api/v1/handoffs/"
#define HEADER_MEMORY (64 * 1024)       /* request line and headers */

struct hub_http {
        struct MHD_Daemon *d;
};

struct req {
        struct timespec t0;
        char agent[65];                 /* the token's, once checked */
        char *body;
        size_t len;
        bool too_large;
        bool wait;                      /* ?wait=claimed */
};

static double since(const struct timespec *t0)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static enum MHD_Result respond(struct MHD_Connection *c, struct req *rq,
                               unsigned status, char *body, const char *ctype)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;

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
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
        MHD_add_response_header(resp, "Cache-Control", "no-store");
        if (status == 401)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        hub_stats_request(status, since(&rq->t0));
        return ret;
}

static enum MHD_Result respond_answer(struct MHD_Connection *c, struct req *rq,
                                      struct hub_answer *a)
{
        return respond(c, rq, a->status, a->body, "application/json");
}

static enum MHD_Result refuse(struct MHD_Connection *c, struct req *rq,
                              unsigned status, const char *reason,
                              const char *detail)
{
        struct hub_answer a = { 0 };

        hub_answer_reject(&a, status, reason, detail);
        return respond_answer(c, rq, &a);
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

/* Authorization: Bearer TOKEN -> the agent it speaks for into agent[65];
 * false when none. */
static bool auth_agent(struct hub *h, struct MHD_Connection *c, char *agent)
{
        const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                    MHD_HTTP_HEADER_AUTHORIZATION);
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
        if (!a) {
                char from[INET6_ADDRSTRLEN + 1];
                hub_auth_failed(h, peer_address(c, from, sizeof(from)), why);
        }
        return a != NULL;
}

static bool json_content_type(struct MHD_Connection *c)
{
        const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                    MHD_HTTP_HEADER_CONTENT_TYPE);
        size_t n = strlen("application/json");

        if (!v || strncasecmp(v, "application/json", n))
                return false;
        v += n;
        while (*v == ' ' || *v == '\t')
                v++;
        return *v == '\0' || *v == ';';
}

/* The first call for a POST: refuse what can be refused before the body. */
static enum MHD_Result post_begin(struct hub *h, struct MHD_Connection *c,
                                  struct req *rq, bool *decided)
{
        const char *cl, *v;
        char detail[128];
        int64_t n;

        *decided = true;
        if (!auth_agent(h, c, rq->agent))
                return refuse(c, rq, 401, "unauthorized",
                              "a valid Authorization: Bearer token is required");
        if (!json_content_type(c))
                return refuse(c, rq, 415, "unsupported_media_type",
                              "Content-Type must be application/json");
        cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                         MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && (parse_int64(cl, 0, INT64_MAX, &n) < 0 ||
                   (uint64_t)n > h->cfg->max_file_size)) {
                snprintf(detail, sizeof(detail), "the body is larger than %llu bytes",
                         (unsigned long long)h->cfg->max_file_size);
                return refuse(c, rq, 413, "too_large", detail);
        }
        v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "wait");
        if (v && strcmp(v, "claimed"))
                return refuse(c, rq, 400, "bad_request", "wait= takes claimed only");
        rq->wait = v != NULL;
        *decided = false;
        return MHD_YES;
}

static enum MHD_Result post_body(struct hub *h, struct req *rq,
                                 const char *data, size_t size)
{
        size_t cap = h->cfg->max_file_size;

        if (rq->too_large || size > cap - rq->len) {
                /* read on and drop: the answer comes at the end */
                rq->too_large = true;
                free(rq->body);
                rq->body = NULL;
                rq->len = 0;
                return MHD_YES;
        }
        if (!rq->body) {
                rq->body = malloc(cap + 1);
                if (!rq->body)
                        return MHD_NO;
        }
        memcpy(rq->body + rq->len, data, size);
        rq->len += size;
        return MHD_YES;
}

static enum MHD_Result post_end(struct hub *h, struct MHD_Connection *c,
                                struct req *rq)
{
        struct hub_answer a = { 0 };
        char detail[128];

        if (rq->too_large) {
                snprintf(detail, sizeof(detail), "the body is larger than %llu bytes",
                         (unsigned long long)h->cfg->max_file_size);
                return refuse(c, rq, 413, "too_large", detail);
        }
        if (hub_accept_post(h, rq->agent, rq->body ? rq->body : "", rq->len, &a) < 0)
                return refuse(c, rq, 500, "internal", "out of memory");
        if (a.status == 200 && rq->wait) {
                json_t *o = json_loads(a.body, 0, NULL);
                const char *id = json_string_value(json_object_get(o, "handoff_id"));
                int r = id ? hub_accept_wait(h, id, HUB_WAIT_MS, &a) : 0;
                json_decref(o);
                if (r < 0)
                        return refuse(c, rq, 500, "internal", "out of memory");
        }
        return respond_answer(c, rq, &a);
}

static enum MHD_Result on_get(struct hub *h, struct MHD_Connection *c,
                              struct req *rq, const char *url)
{
        struct hub_answer a = { 0 };
        char agent[65];

        if (!strcmp(url, "/healthz"))
                return respond(c, rq, 200, strdup("ok\n"), "text/plain");
        if (!strcmp(url, "/metrics"))
                return respond(c, rq, 200, hub_stats_text(h),
                               "text/plain; version=0.0.4");
        if (strncmp(url, PATH_ITEM, strlen(PATH_ITEM)) || !strcmp(url, PATH_START))
                return refuse(c, rq, 404, "not_found", "no such resource");
        if (!auth_agent(h, c, agent))
                return refuse(c, rq, 401, "unauthorized",
                              "a valid Authorization: Bearer token is required");
        if (hub_accept_show(h, agent, url + strlen(PATH_ITEM), &a) < 0)
                return refuse(c, rq, 500, "internal", "out of memory");
        return respond_answer(c, rq, &a);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
        struct hub *h = cls;
        struct req *rq = *con_cls;
        bool decided;

        if (!rq) {
                rq = calloc(1, sizeof(*rq));
                if (!rq)
                        return MHD_NO;
                clock_gettime(CLOCK_MONOTONIC, &rq->t0);
                *con_cls = rq;
                if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
                        return on_get(h, c, rq, url);
                if (strcmp(url, PATH_START))
                        return strncmp(url, PATH_ITEM, strlen(PATH_ITEM)) &&
                                       strcmp(url, "/healthz") && strcmp(url, "/metrics")
                                ? refuse(c, rq, 404, "not_found", "no such resource")
                                : refuse(c, rq, 405, "method_not_allowed", "use GET");
                if (strcmp(method, "POST"))
                        return refuse(c, rq, 405, "method_not_allowed", "use POST");
                return post_begin(h, c, rq, &decided);
        }
        if (*upload_data_size > 0) {
                size_t n = *upload_data_size;
                *upload_data_size = 0;
                return post_body(h, rq, upload_data, n);
        }
        return post_end(h, c, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct req *rq = *con_cls;

        if (rq) {
                free(rq->body);
                free(rq);
                *con_cls = NULL;
        }
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
        unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
        /* a unix socket has no peer address to count by: 0 = no limit */
        unsigned per_ip = is_unix ? 0 : (unsigned)ch->max_per_address;
        struct hub_http *s;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
#define HUB_MHD_OPTIONS \
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h, \
        MHD_OPTION_LISTEN_SOCKET, listen_fd, \
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HUB_THREADS, \
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)ch->max_connections, \
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, \
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ch->timeout, \
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADER_MEMORY, \
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL
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
        MHD_stop_daemon(s->d);
        free(s);
}
