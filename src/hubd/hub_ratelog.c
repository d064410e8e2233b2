/* The log lines a client can cause -- failed authentications and refused
 * posts -- rate-limited (hub.h, struct hub_ratelog): the first `burst` of
 * an interval are logged at once, one line each; the ones after are
 * counted, and the count with the last of them is said once an interval
 * (hub_run() calls the tick).  An interval without one resets the burst.
 * A client that fails on every request makes a line a minute, not one a
 * request, and the first line (the one that says why) is never held
 * back.  A refusal is the only place the reason of a refused post is
 * told on this side: the daemon never sees the post, and a client may
 * show its caller only the HTTP status. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "hub.h"
#include "util.h"

void hub_ratelog_init(struct hub_ratelog *r, unsigned burst)
{
        *r = (struct hub_ratelog){ .burst = burst ? burst : 1 };
        pthread_mutex_init(&r->lock, NULL);
}

void hub_ratelog_destroy(struct hub_ratelog *r)
{
        pthread_mutex_destroy(&r->lock);
}

bool hub_ratelog_take(struct hub_ratelog *r, const char *what, bool *ret_last)
{
        bool now;

        pthread_mutex_lock(&r->lock);
        now = r->logged < r->burst;
        if (now)
                r->logged++;
        else
                r->more++;
        *ret_last = now && r->logged == r->burst;
        snprintf(r->last, sizeof(r->last), "%s", what);
        pthread_mutex_unlock(&r->lock);
        return now;
}

uint64_t hub_ratelog_tick(struct hub_ratelog *r, char *last, size_t n)
{
        uint64_t more;

        pthread_mutex_lock(&r->lock);
        more = r->more;
        r->more = 0;
        /* none since the last line: the next ones are logged at once */
        if (more == 0)
                r->logged = 0;
        snprintf(last, n, "%s", r->last);
        pthread_mutex_unlock(&r->lock);
        return more;
}

void hub_auth_failed(struct hub *h, const char *from, const char *why)
{
        char what[sizeof(h->auth_log.last)];
        bool last;

        hub_stats_auth_failed();
        snprintf(what, sizeof(what), "%s: %s", from, why);
        /* the address and the reason are ours (no byte of the request) */
        if (hub_ratelog_take(&h->auth_log, what, &last))
                hub_log("authentication failed from %s: %s (those after it are counted "
                        "and said every %d s)", from, why, HUB_AUTH_LOG_INTERVAL);
}

/* s as one line for the log: control bytes (the detail may quote a
 * producer's) as '?', at most n - 1 bytes. */
static const char *one_line(const char *s, char *buf, size_t n)
{
        size_t i;

        for (i = 0; s && s[i] && i + 1 < n; i++)
                buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
        buf[i] = '\0';
        return buf;
}

void hub_refused(struct hub *h, const char *from, const char *agent, const char *body,
                 size_t len, const struct hub_answer *a)
{
        _cleanup_json_ json_t *ans = a->body ? json_loads(a->body, 0, NULL) : NULL;
        _cleanup_json_ json_t *doc = NULL;
        const char *reason = json_string_value(json_object_get(ans, "reason"));
        const char *id = NULL;
        char what[sizeof(h->refusal_log.last)], detail[256], qid[QBUF_LEN], after[96] = "";
        bool last;

        snprintf(what, sizeof(what), "agent %s at %s: %u %s", agent[0] ? agent : "(none)",
                 from ? from : "an unknown address", a->status, reason ? reason : "(none)");
        if (!hub_ratelog_take(&h->refusal_log, what, &last))
                return;
        /* the id the sender will look for, when what it posted has one */
        if (body && len > 0)
                doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
        id = json_string_value(json_object_get(doc, "handoff_id"));
        if (id)
                quote_untrusted(id, strlen(id), qid, sizeof(qid));
        if (last)
                snprintf(after, sizeof(after), "; the refusals after it are counted and said "
                         "every %d s", HUB_AUTH_LOG_INTERVAL);
        hub_log("refused a post from %s: %s%s%s%s%s", what,
                one_line(json_string_value(json_object_get(ans, "detail")), detail, sizeof(detail)),
                id ? " (handoff_id " : "", id ? qid : "", id ? ")" : "",
                after);
}

void hub_limited_tick(struct hub *h)
{
        char last[sizeof(h->auth_log.last)];
        uint64_t n;

        n = hub_ratelog_tick(&h->auth_log, last, sizeof(last));
        if (n > 0)
                hub_log("authentication failed for %llu more request(s) in the last %d s, "
                        "the last from %s", (unsigned long long)n, HUB_AUTH_LOG_INTERVAL, last);
        n = hub_ratelog_tick(&h->refusal_log, last, sizeof(last));
        if (n > 0)
                hub_log("refused %llu more post(s) in the last %d s, the last from %s",
                        (unsigned long long)n, HUB_AUTH_LOG_INTERVAL, last);
}
