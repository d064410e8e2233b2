/* /mcp's sessions (see hub_mcp.c): the table, bounded per token, each
 * session an MCP server of src/lib/mcp/ for the token's agent (its
 * inbox, the key the daemon checks it with, handoff_send dropped as a
 * POST), taken by a request or a stream and freed once ended and unused. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <sys/stat.h>

#include "agent.h"
#include "hub.h"
#include "hub_mcp.h"
#include "mcp.h"
#include "util.h"

#define MCP_SID_BYTES (MCP_SID_LEN / 2)

/* ---- sessions ------------------------------------------------------------ */

static void mcp_session_free(struct mcp_session *s)
{
        if (!s)
                return;
        inbox_done(&s->m.ib);
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->ev_lock);
        free(s);
}

/* Under the table's lock: s out of the table, freed once unused. */
void hub_mcp_session_end_locked(struct hub_mcp *t, struct mcp_session *s)
{
        if (s->gone)
                return;
        s->gone = true;
        TAILQ_REMOVE(&t->sessions, s, link);
        if (!s->refs)
                mcp_session_free(s);
}

void hub_mcp_session_put(struct hub_mcp *t, struct mcp_session *s)
{
        pthread_mutex_lock(&t->lock);
        s->used = mono_usec();
        if (--s->refs == 0 && s->gone)
                mcp_session_free(s);
        pthread_mutex_unlock(&t->lock);
}

/* Under the table's lock: the sessions unused past the idle timeout end. */
static void sweep_locked(struct hub_mcp *t, int64_t now)
{
        struct mcp_session *s, *next;

        for (s = TAILQ_FIRST(&t->sessions); s; s = next) {
                next = TAILQ_NEXT(s, link);
                if (!s->refs && now - s->used > t->idle_usec)
                        hub_mcp_session_end_locked(t, s);
        }
}

/* The session id of agent's, taken (hub_mcp_session_put() gives it back); NULL
 * when there is none: never made, ended, or another agent's. */
struct mcp_session *hub_mcp_session_get(struct hub_mcp *t, const char *id, const char *agent)
{
        struct mcp_session *s, *found = NULL;
        int64_t now = mono_usec();

        if (!hub_mcp_session_id_valid(id))
                return NULL;
        pthread_mutex_lock(&t->lock);
        sweep_locked(t, now);
        TAILQ_FOREACH(s, &t->sessions, link)
                if (!sodium_memcmp(s->id, id, sizeof(s->id) - 1) && !strcmp(s->agent, agent)) {
                        found = s;
                        break;
                }
        if (found) {
                found->refs++;
                found->used = now;
        }
        pthread_mutex_unlock(&t->lock);
        return found;
}

int hub_mcp_inbox_mtime(struct hub *h, struct mcp_session *s, bool fresh,
                        struct timespec *ret)
{
        int64_t now = mono_usec();
        struct timespec ts;
        bool cached;
        int r;

        /* Without an event, handoffd is asked at most once an
         * MCP_STAMP_USEC for a session (its stream's look, then its
         * writer's); an event asks now: the claim may have come before
         * the bootstrap, and the next event says it is there. */
        pthread_mutex_lock(&s->ev_lock);
        cached = !fresh && s->stamp_at && now - s->stamp_at < MCP_STAMP_USEC;
        ts = s->stamp;
        r = s->stamp_r;
        pthread_mutex_unlock(&s->ev_lock);
        if (!cached) {
                r = hub_inboxd_stamp(h, s->agent, &ts);
                pthread_mutex_lock(&s->ev_lock);
                s->stamp_at = now;
                s->stamp = ts;
                s->stamp_r = r;
                pthread_mutex_unlock(&s->ev_lock);
        }
        if (r < 0)
                return r;
        *ret = ts;
        return 0;
}

static int publish(struct mcp *m, const char *id, const char *buf, size_t len, char *err,
                   size_t errlen);

/* A new session for agent, taken: 0, -EBUSY (the token's sessions all
 * have a stream open) or -ENOMEM; -EINVAL with err filled when the
 * agent is not one of this hub's. */
int hub_mcp_session_new(struct hub *h, const char *agent, struct mcp_session **ret,
                        char *err, size_t errlen)
{
        struct hub_mcp *t = h->mcp;
        struct mcp_session *s = calloc(1, sizeof(*s)), *x, *lru = NULL;
        const hd_key *k;
        unsigned mine = 0;
        unsigned char rnd[MCP_SID_BYTES];
        int64_t now = mono_usec();

        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_init(&s->ev_lock, NULL);
        snprintf(s->agent, sizeof(s->agent), "%s", agent);
        s->m.ib.fd = -1;
        s->m.ib.wd = -1;
        /* the inbox is handoffd's to open (hub_inboxd.c): only its path here,
         * for the tools' words */
        const struct config_agent *ca = config_agent(h->cfg, s->agent);
        if (!ca || !ca->state_dir ||
            xsnprintf(s->m.ib.dir, sizeof(s->m.ib.dir), "%s/handoffs", ca->state_dir) < 0) {
                /* the client is told what it can act on, not our paths */
                snprintf(err, errlen, "Forbidden: %s has no inbox here (not an [agent] of "
                         "the hub's configuration)", agent);
                mcp_session_free(s);
                return -EINVAL;
        }
        s->m.ib.window = h->cfg->resume_window;
        s->m.inbox_ops = &hub_inboxd_ops;
        s->m.cfg = h->cfg;
        s->m.agent = s->agent;
        s->m.tools = t->tools;
        s->m.copts = t->copts;
        s->m.copts.agent = s->agent;
        s->m.ib.copts = &s->m.copts;
        s->m.publish = publish;
        s->m.userdata = h;
        s->m.complete_deferred = true;  /* a wait would hold a pool thread */
        s->m.server_name = "handoff-hubd";
        /* the key the daemon checks this agent with signs, as for A2A */
        k = config_key_lookup(h->cfg, NULL, agent);
        if (k && hd_key_kind_of(k) == HD_KEY_HMAC)
                s->m.key = k;
        else
                snprintf(s->m.key_error, sizeof(s->m.key_error),
                         "the hub holds no key that signs for %s (require = sig: only the "
                         "agent holds its secret key; use handoffctl mcp on the spool's host)",
                         agent);
        if (hub_mcp_inbox_mtime(h, s, true, &s->seen) < 0)
                s->seen = (struct timespec){ 0 };
        randombytes_buf(rnd, sizeof(rnd));
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(s->id + 2 * i, 3, "%02x", rnd[i]);
        s->refs = 1;
        s->used = now;

        pthread_mutex_lock(&t->lock);
        sweep_locked(t, now);
        TAILQ_FOREACH(x, &t->sessions, link) {
                if (strcmp(x->agent, agent))
                        continue;
                mine++;
                if (!x->refs && (!lru || x->used < lru->used))
                        lru = x;
        }
        if (mine >= t->max_per_token && !lru) {
                pthread_mutex_unlock(&t->lock);
                mcp_session_free(s);
                return -EBUSY;
        }
        if (mine >= t->max_per_token)
                hub_mcp_session_end_locked(t, lru);
        TAILQ_INSERT_TAIL(&t->sessions, s, link);
        pthread_mutex_unlock(&t->lock);
        *ret = s;
        return 0;
}

/* handoff_send's document into the spool as a POST brings one: the
 * token's bucket first, then hub_accept_post()'s judgement and drop. */
static int publish(struct mcp *m, const char *id, const char *buf, size_t len, char *err,
                   size_t errlen)
{
        struct hub *h = m->userdata;
        struct hub_answer a = { 0 };
        _cleanup_json_ json_t *o = NULL;
        unsigned retry;
        int r;

        (void)id;
        if (!hub_limits_take(h->limits, m->agent, &retry)) {
                snprintf(err, errlen, "rate limited: this token's handoffs a second "
                         "([hub] rate_per_token); retry in %u s", retry);
                return AG_NEGATIVE;
        }
        r = hub_accept_post(h, m->agent, buf, len, &a);
        if (r < 0) {
                snprintf(err, errlen, "out of memory");
                return AG_ERROR;
        }
        if (a.status == 200 || a.status == 201) {
                free(a.body);
                return AG_OK;
        }
        o = a.body ? json_loads(a.body, 0, NULL) : NULL;
        snprintf(err, errlen, "refused by the hub (%u): %s: %s", a.status,
                 json_string_value(json_object_get(o, "reason")) ?: "?",
                 json_string_value(json_object_get(o, "detail")) ?: "");
        hub_refused(h, "mcp", m->agent, buf, len, &a);
        free(a.body);
        return AG_NEGATIVE;
}

/* ---- the table ------------------------------------------------------------ */

int hub_mcp_new(struct hub *h, struct hub_mcp **ret)
{
        struct hub_mcp *t = calloc(1, sizeof(*t));
        int r;

        if (!t)
                return -ENOMEM;
        pthread_mutex_init(&t->lock, NULL);
        TAILQ_INIT(&t->sessions);
        t->max_per_token = h->cfg->hub.mcp_sessions_per_token > 0
                ? (unsigned)h->cfg->hub.mcp_sessions_per_token : HUB_MCP_DEFAULT_SESSIONS;
        t->idle_usec = (h->cfg->hub.mcp_session_idle > 0 ? h->cfg->hub.mcp_session_idle
                                                         : HUB_MCP_DEFAULT_IDLE) * 1000000LL;
        r = mcp_tools_new(&t->tools);
        /* handoff_take checks the proof of origin as handoffctl mcp does,
         * with the keys the hub loaded at its start (all of them, or it
         * would not have started) */
        if (r == 0)
                r = consume_opts_from_config(h->cfg, false, &t->copts);
        t->copts.lookup = config_key_lookup;
        t->copts.userdata = h->cfg;
        if (r < 0) {
                hub_mcp_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

unsigned hub_mcp_count(struct hub_mcp *t)
{
        struct mcp_session *s;
        unsigned n = 0;

        pthread_mutex_lock(&t->lock);
        sweep_locked(t, mono_usec());
        TAILQ_FOREACH(s, &t->sessions, link)
                n++;
        pthread_mutex_unlock(&t->lock);
        return n;
}

unsigned hub_mcp_streams(struct hub_mcp *t)
{
        unsigned n;

        pthread_mutex_lock(&t->lock);
        n = t->streams;
        pthread_mutex_unlock(&t->lock);
        return n;
}

void hub_mcp_free(struct hub_mcp *t)
{
        struct mcp_session *s;

        if (!t)
                return;
        while ((s = TAILQ_FIRST(&t->sessions))) {
                TAILQ_REMOVE(&t->sessions, s, link);
                mcp_session_free(s);
        }
        json_decref(t->tools);
        pthread_mutex_destroy(&t->lock);
        free(t);
}
