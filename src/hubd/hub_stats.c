/* The hub's own figures for GET /metrics: requests by status code, a
 * latency histogram, handoffs accepted and retries answered again.  All
 * counters are atomics bumped by the request threads; the text is built
 * on demand in Prometheus' text exposition format, followed by the
 * daemon's figures from its [metrics] textfile when it writes one. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handoff.h"
#include "hub.h"
#include "hub_mcp.h"
#include "sbuf.h"
#include "util.h"

#define STATS_DAEMON_MAX (256 * 1024)

static const unsigned stat_codes[] = { 200, 400, 401, 403, 404, 405, 409, 413,
                                       415, 422, 431, 500, 503 };
/* seconds; the last bucket is +Inf */
static const double stat_bounds[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                      0.1, 0.25, 0.5, 1, 2.5, 5, 10 };

static atomic_uint_fast64_t by_code[ELEMENTSOF(stat_codes) + 1];
static atomic_uint_fast64_t buckets[ELEMENTSOF(stat_bounds) + 1];
static atomic_uint_fast64_t sum_usec, accepted, repeated, auth_failed;
static atomic_uint_fast64_t dropped[_HUB_DROP_MAX];
static const char *const drop_names[_HUB_DROP_MAX] = {
        [HUB_DROP_FULL] = "full",
        [HUB_DROP_REFUSED] = "refused",
        [HUB_DROP_DEADLINE] = "deadline",
};

void hub_stats_request(unsigned status, double seconds)
{
        size_t i;

        for (i = 0; i < ELEMENTSOF(stat_codes); i++)
                if (stat_codes[i] == status)
                        break;
        atomic_fetch_add(&by_code[i], 1);
        for (i = 0; i < ELEMENTSOF(stat_bounds); i++)
                if (seconds <= stat_bounds[i])
                        break;
        atomic_fetch_add(&buckets[i], 1);
        atomic_fetch_add(&sum_usec, (uint64_t)(seconds * 1e6));
}

void hub_stats_accepted(bool duplicate)
{
        atomic_fetch_add(duplicate ? &repeated : &accepted, 1);
}

void hub_stats_auth_failed(void)
{
        atomic_fetch_add(&auth_failed, 1);
}

void hub_stats_dropped(enum hub_drop why)
{
        atomic_fetch_add(&dropped[why], 1);
}

/* The daemon's own figures, as it last wrote them to [metrics] textfile
 * (on every sweep): appended as they are, when there is one to read. */
static void stats_daemon(struct hub *h, struct sbuf *b)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        hd_verdict v;

        if (!h->cfg->metrics_textfile ||
            hd_read_at(AT_FDCWD, h->cfg->metrics_textfile, STATS_DAEMON_MAX, &buf, &len,
                       &v) < 0)
                return;
        sb_put(b, buf, len);
        if (len > 0 && buf[len - 1] != '\n')
                sb_puts(b, "\n");
}

char *hub_stats_text(struct hub *h, long conns_open)
{
        size_t ntok;

        struct sbuf b = { 0 };
        char *out = NULL;
        uint64_t cum = 0;

        pthread_rwlock_rdlock(&h->tokens_lock);
        ntok = hub_tokens_count(h->tokens);
        pthread_rwlock_unlock(&h->tokens_lock);
        sb_printf(&b, "# HELP handoff_hub_requests_total HTTP requests answered, by status code.\n"
                    "# TYPE handoff_hub_requests_total counter\n");
        for (size_t i = 0; i <= ELEMENTSOF(stat_codes); i++) {
                uint64_t n = atomic_load(&by_code[i]);
                if (i < ELEMENTSOF(stat_codes))
                        sb_printf(&b, "handoff_hub_requests_total{code=\"%u\"} %llu\n",
                                    stat_codes[i], (unsigned long long)n);
                else
                        sb_printf(&b, "handoff_hub_requests_total{code=\"other\"} %llu\n",
                                    (unsigned long long)n);
        }
        sb_printf(&b, "# HELP handoff_hub_request_seconds Time from the request's headers to its answer.\n"
                    "# TYPE handoff_hub_request_seconds histogram\n");
        for (size_t i = 0; i <= ELEMENTSOF(stat_bounds); i++) {
                cum += atomic_load(&buckets[i]);
                if (i < ELEMENTSOF(stat_bounds))
                        sb_printf(&b, "handoff_hub_request_seconds_bucket{le=\"%g\"} %llu\n",
                                    stat_bounds[i], (unsigned long long)cum);
                else
                        sb_printf(&b, "handoff_hub_request_seconds_bucket{le=\"+Inf\"} %llu\n",
                                    (unsigned long long)cum);
        }
        sb_printf(&b, "handoff_hub_request_seconds_sum %.6f\n"
                    "handoff_hub_request_seconds_count %llu\n",
                    (double)atomic_load(&sum_usec) / 1e6, (unsigned long long)cum);
        sb_printf(&b, "# HELP handoff_hub_accepted_total Handoffs dropped into the spool.\n"
                    "# TYPE handoff_hub_accepted_total counter\n"
                    "handoff_hub_accepted_total %llu\n"
                    "# HELP handoff_hub_repeated_total Posts of an id already accepted (answered from the record).\n"
                    "# TYPE handoff_hub_repeated_total counter\n"
                    "handoff_hub_repeated_total %llu\n"
                    "# HELP handoff_hub_auth_failed_total Requests that failed to authenticate.\n"
                    "# TYPE handoff_hub_auth_failed_total counter\n"
                    "handoff_hub_auth_failed_total %llu\n"
                    "# HELP handoff_hub_tokens Tokens loaded.\n"
                    "# TYPE handoff_hub_tokens gauge\n"
                    "handoff_hub_tokens %zu\n",
                    (unsigned long long)atomic_load(&accepted),
                    (unsigned long long)atomic_load(&repeated),
                    (unsigned long long)atomic_load(&auth_failed),
                    ntok);
        sb_printf(&b, "# HELP handoff_hub_connections_dropped_total Connections the hub closed: the oldest "
                    "without headers to make room (full), a new one nothing could give way to (refused), "
                    "a request not whole by request_timeout (deadline).\n"
                    "# TYPE handoff_hub_connections_dropped_total counter\n");
        for (size_t i = 0; i < _HUB_DROP_MAX; i++)
                sb_printf(&b, "handoff_hub_connections_dropped_total{reason=\"%s\"} %llu\n",
                          drop_names[i], (unsigned long long)atomic_load(&dropped[i]));
        if (conns_open >= 0)
                sb_printf(&b, "# HELP handoff_hub_connections Connections open.\n"
                            "# TYPE handoff_hub_connections gauge\n"
                            "handoff_hub_connections %ld\n", conns_open);
        if (h->mcp)
                sb_printf(&b, "# HELP handoff_hub_mcp_sessions MCP sessions open at /mcp.\n"
                            "# TYPE handoff_hub_mcp_sessions gauge\n"
                            "handoff_hub_mcp_sessions %u\n"
                            "# HELP handoff_hub_mcp_streams MCP GET streams open at /mcp (a client's "
                            "notifications come on it).\n"
                            "# TYPE handoff_hub_mcp_streams gauge\n"
                            "handoff_hub_mcp_streams %u\n", hub_mcp_count(h->mcp),
                            hub_mcp_streams(h->mcp));
        stats_daemon(h, &b);
        return sb_take(&b, &out) < 0 ? NULL : out;
}

void hub_stats_write(struct hub *h, time_t now)
{
        static uint64_t last_sum = UINT64_MAX;
        static time_t last_at;
        _cleanup_json_ json_t *o = NULL;
        json_t *req = json_object();
        uint64_t sum = atomic_load(&auth_failed), total = 0;
        size_t ntok;
        char *s;

        if (!req)
                return;         /* written at the next call */
        for (size_t i = 0; i <= ELEMENTSOF(stat_codes); i++) {
                uint64_t n = atomic_load(&by_code[i]);
                char code[16];
                snprintf(code, sizeof(code), i < ELEMENTSOF(stat_codes) ? "%u" : "other",
                         i < ELEMENTSOF(stat_codes) ? stat_codes[i] : 0);
                total += n;
                if (n)
                        json_object_set_new(req, code, json_integer((json_int_t)n));
        }
        sum += total;
        if (sum == last_sum && now - last_at < HUB_STATUS_INTERVAL) {
                json_decref(req);
                return;
        }
        pthread_rwlock_rdlock(&h->tokens_lock);
        ntok = hub_tokens_count(h->tokens);
        pthread_rwlock_unlock(&h->tokens_lock);
        o = json_pack("{s:I, s:I, s:I, s:s, s:b, s:I, s:o, s:I, s:I, s:I, s:I}",
                      "pid", (json_int_t)getpid(), "started", (json_int_t)h->started,
                      "updated", (json_int_t)now, "listen", h->listen_desc ?: "",
                      "tls", h->tls != NULL, "tokens", (json_int_t)ntok, "requests", req,
                      "requests_total", (json_int_t)total,
                      "accepted", (json_int_t)atomic_load(&accepted),
                      "repeated", (json_int_t)atomic_load(&repeated),
                      "auth_failed", (json_int_t)atomic_load(&auth_failed));
        s = o ? json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
        /* figures, not records: no sync */
        if (s && hd_write_atomic(h->state_fd, CONFIG_HUB_STATUS_FILE, s, strlen(s), 0640,
                                 false) == 0) {
                last_sum = sum;
                last_at = now;
        }
        free(s);
}

void hub_stats_remove(struct hub *h)
{
        if (h->state_fd >= 0)
                unlinkat(h->state_fd, CONFIG_HUB_STATUS_FILE, 0);
}
