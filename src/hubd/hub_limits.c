/* Each token's limits: a bucket of handoffs (rate_per_token a second,
 * burst_per_token at most) taken by every POST and SendMessage before
 * anything is dropped, and a share of the pool threads
 * (max_requests_per_token requests being made at once).  One token sent
 * 17,128 SendMessage in 20 s, and 16 ListTasks loops of one token held
 * every thread; what one token may cost is now bounded, and other
 * tokens do not pay for it.
 *
 * Entries are per agent with a token, so their number is bounded by
 * token_dir's; one lock serves them all, held for a few instructions. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub.h"
#include "util.h"

struct token_use {
        char agent[65];
        double tokens;          /* in the bucket */
        int64_t at;             /* when tokens was counted, monotonic usec */
        unsigned running;       /* requests being made */
};

struct hub_limits {
        pthread_mutex_t lock;
        struct token_use *v;
        size_t n, cap;
        double rate, burst;     /* rate 0: no bucket */
        unsigned max_running;
};

int hub_limits_new(const struct config_hub *ch, struct hub_limits **ret)
{
        struct hub_limits *l = calloc(1, sizeof(*l));

        if (!l)
                return -ENOMEM;
        pthread_mutex_init(&l->lock, NULL);
        l->rate = (double)ch->rate_per_token;
        l->burst = (double)ch->burst_per_token;
        l->max_running = (unsigned)ch->max_requests_per_token;
        *ret = l;
        return 0;
}

void hub_limits_free(struct hub_limits *l)
{
        if (!l)
                return;
        pthread_mutex_destroy(&l->lock);
        free(l->v);
        free(l);
}

/* Under the lock: agent's entry, made with a full bucket; NULL when out
 * of memory (the request is then not limited: refusing it for our
 * memory would be a worse answer). */
static struct token_use *use_of(struct hub_limits *l, const char *agent, int64_t now)
{
        for (size_t i = 0; i < l->n; i++)
                if (!strcmp(l->v[i].agent, agent))
                        return &l->v[i];
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 16;
                struct token_use *nv = realloc(l->v, cap * sizeof(*nv));
                if (!nv)
                        return NULL;
                l->v = nv;
                l->cap = cap;
        }
        l->v[l->n] = (struct token_use){ .tokens = l->burst, .at = now };
        snprintf(l->v[l->n].agent, sizeof(l->v[l->n].agent), "%s", agent);
        return &l->v[l->n++];
}

bool hub_limits_take(struct hub_limits *l, const char *agent, unsigned *ret_retry)
{
        int64_t now = mono_usec();
        struct token_use *u;
        bool ok = true;

        if (!l || l->rate <= 0)
                return true;
        pthread_mutex_lock(&l->lock);
        u = use_of(l, agent, now);
        if (u) {
                u->tokens += (double)(now - u->at) / 1e6 * l->rate;
                if (u->tokens > l->burst)
                        u->tokens = l->burst;
                u->at = now;
                if (u->tokens >= 1.0) {
                        u->tokens -= 1.0;
                } else {
                        double s = (1.0 - u->tokens) / l->rate;
                        *ret_retry = s < 1.0 ? 1 : (unsigned)s + 1;
                        ok = false;
                }
        }
        pthread_mutex_unlock(&l->lock);
        return ok;
}

bool hub_limits_enter(struct hub_limits *l, const char *agent)
{
        struct token_use *u;
        bool ok = true;

        if (!l)
                return true;
        pthread_mutex_lock(&l->lock);
        u = use_of(l, agent, mono_usec());
        if (u && u->running >= l->max_running)
                ok = false;
        else if (u)
                u->running++;
        pthread_mutex_unlock(&l->lock);
        return ok;
}

void hub_limits_leave(struct hub_limits *l, const char *agent)
{
        if (!l)
                return;
        pthread_mutex_lock(&l->lock);
        for (size_t i = 0; i < l->n; i++)
                if (!strcmp(l->v[i].agent, agent) && l->v[i].running > 0) {
                        l->v[i].running--;
                        break;
                }
        pthread_mutex_unlock(&l->lock);
}

int hub_answer_limited(struct hub_answer *a, unsigned retry_s, bool busy)
{
        char detail[160];

        if (busy)
                snprintf(detail, sizeof(detail), "this token has as many requests being "
                         "answered as it may at once; retry in %u s", retry_s);
        else
                snprintf(detail, sizeof(detail), "this token posts faster than its rate; "
                         "retry in %u s", retry_s);
        a->retry_after = retry_s;
        return hub_answer_reject(a, 429, "rate_limited", detail);
}

int hub_a2a_limited(struct hub_answer *a, const json_t *id, unsigned retry_s, bool busy)
{
        json_t *o;

        /* A JSON-RPC error: an A2A client reads the body, not the status;
         * -32603 (internal: "retry") with when in data, as Retry-After. */
        o = json_pack("{s:s, s:O, s:{s:i, s:s, s:{s:s, s:i}}}", "jsonrpc", "2.0", "id",
                      id ? (json_t *)id : json_null(), "error", "code", -32603, "message",
                      busy ? "this token has as many requests being answered as it may at "
                             "once; retry"
                           : "this token sends faster than its rate; retry",
                      "data", "reason", "rate_limited", "retryAfterSeconds", (int)retry_s);
        a->status = 200;
        a->ctype = NULL;
        a->retry_after = retry_s;
        a->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return a->body ? 0 : -ENOMEM;
}
