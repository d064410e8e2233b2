/* What waits at /mcp on no thread (hub_wait.c): a session's GET stream
 * (text/event-stream: an event with an id first, then
 * notifications/resources/list_changed when the agent's inbox changes, a
 * comment every MCP_KEEPALIVE_USEC) and a handoff_complete's wait for the
 * daemon's word. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub.h"
#include "hub_mcp.h"
#include "mcp.h"
#include "util.h"

#define MCP_KEEPALIVE_USEC (15 * 1000000LL)
/* The daemon makes the claim (claimed/, an event we watch) before the
 * bootstrap reaches the inbox: a stream looks again this often. */
#define MCP_STREAM_TICK_USEC 250000
/* ... for this long after such an event; past it, a quiet spool makes a
 * stream ask handoffd nothing (the inbox is the daemon's to read). */
#define MCP_STREAM_HOT_USEC (5 * 1000000LL)

/* ---- the session's stream ------------------------------------------------ */

struct mcp_stream {
        struct hub_wait w;
        struct hub_mcp *t;
        struct mcp_session *s;
        uint64_t from;                  /* Last-Event-ID; 0: none */
        uint64_t gen;                   /* its place among the session's streams */
        bool primed;
        char buf[256];
        size_t len, off;
        int64_t keepalive;              /* monotonic usec of the next comment */
        int64_t hot_until;              /* its ticks look until then (the watcher's) */
};

/* Did the inbox change since the last list_changed?  With take, the
 * change is taken: the next look compares with now. */
static bool stream_changed(struct hub *h, struct mcp_session *s, bool take, bool fresh)
{
        struct timespec now;
        bool changed;

        if (hub_mcp_inbox_mtime(h, s, fresh, &now) < 0)
                return false;
        pthread_mutex_lock(&s->ev_lock);
        changed = now.tv_sec != s->seen.tv_sec || now.tv_nsec != s->seen.tv_nsec;
        if (changed && take)
                s->seen = now;
        pthread_mutex_unlock(&s->ev_lock);
        return changed;
}

static uint64_t next_event(struct mcp_session *s)
{
        uint64_t id;

        pthread_mutex_lock(&s->ev_lock);
        id = ++s->event;
        pthread_mutex_unlock(&s->ev_lock);
        return id;
}

static void put_event(struct mcp_stream *x, bool notify)
{
        uint64_t id = next_event(x->s);

        /* An event without data primes the client's Last-Event-ID. */
        if (notify)
                x->len = (size_t)snprintf(x->buf, sizeof(x->buf),
                                          "id: %llu\nevent: message\ndata: "
                                          "{\"jsonrpc\":\"2.0\",\"method\":"
                                          "\"notifications/resources/list_changed\"}\n\n",
                                          (unsigned long long)id);
        else
                x->len = (size_t)snprintf(x->buf, sizeof(x->buf), "id: %llu\ndata: \n\n",
                                          (unsigned long long)id);
        x->off = 0;
}

/* The session ended, or a newer stream of it took over. */
static bool stream_over(struct mcp_stream *x)
{
        bool over;

        pthread_mutex_lock(&x->t->lock);
        over = x->s->gone || x->gen != x->s->stream_gen;
        pthread_mutex_unlock(&x->t->lock);
        return over;
}

static long stream_read(struct hub *h, struct hub_wait *w, char *buf, size_t max)
{
        struct mcp_stream *x = (struct mcp_stream *)w;
        int64_t now = mono_usec();
        size_t k;

        if (x->off == x->len) {
                x->len = x->off = 0;
                if (stream_over(x))
                        return HUB_STREAM_END;
                if (!x->primed) {
                        uint64_t last;
                        x->primed = true;
                        pthread_mutex_lock(&x->s->ev_lock);
                        last = x->s->event;
                        pthread_mutex_unlock(&x->s->ev_lock);
                        /* a client that missed an event gets it again: the
                         * list changed, whatever it is now */
                        put_event(x, x->from && x->from < last);
                        if (x->from && x->from < last)
                                stream_changed(h, x->s, true, false);
                } else if (stream_changed(h, x->s, true, false)) {
                        put_event(x, true);
                } else if (now >= x->keepalive) {
                        /* a comment: a write that fails for a client that went */
                        x->len = (size_t)snprintf(x->buf, sizeof(x->buf), ": keepalive\n\n");
                }
                if (x->len)
                        x->keepalive = now + MCP_KEEPALIVE_USEC;
                if (!x->len) {
                        w->deadline = x->keepalive;
                        return HUB_STREAM_PARK;
                }
        }
        k = x->len - x->off < max ? x->len - x->off : max;
        memcpy(buf, x->buf + x->off, k);
        x->off += k;
        return (long)k;
}

/* Parked: has the inbox changed, or the stream is over? */
static bool stream_look(struct hub *h, struct hub_wait *w)
{
        struct mcp_stream *x = (struct mcp_stream *)w;
        int64_t now = mono_usec();

        if (stream_over(x))
                return true;
        /* an event asks now (the claim comes before the bootstrap: then
         * the ticks look for a while); a tick of a quiet spool asks nothing */
        if (w->named)
                x->hot_until = now + MCP_STREAM_HOT_USEC;
        else if (now >= x->hot_until)
                return false;
        return stream_changed(h, x->s, false, w->named);
}

static int stream_finish(struct hub *h, struct hub_wait *w, struct hub_answer *a)
{
        (void)h;
        (void)w;
        hub_mcp_refuse(a, 429, "too many open streams and waits (this token's [hub] "
                       "max_waits_per_token, or max_connections)");
        a->retry_after = 1;
        return a->body ? 0 : -ENOMEM;
}

static void stream_free(struct hub_wait *w)
{
        struct mcp_stream *x = (struct mcp_stream *)w;

        pthread_mutex_lock(&x->t->lock);
        x->t->streams--;
        pthread_mutex_unlock(&x->t->lock);
        hub_mcp_session_put(x->t, x->s);
        free(x);
}

static const struct hub_wait_ops stream_ops = {
        .look = stream_look, .finish = stream_finish, .free = stream_free,
        .stream = stream_read,
};

int hub_mcp_stream_new(struct hub *h, struct mcp_session *s, uint64_t from,
                       struct hub_wait **ret)
{
        struct mcp_stream *x;

        x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        /* Multiple Connections: each message goes on one stream only.  A
         * client back from a dropped connection is on the newest; the one
         * before ends (the hub would learn it is gone only at a write). */
        pthread_mutex_lock(&h->mcp->lock);
        x->gen = ++s->stream_gen;
        h->mcp->streams++;      /* until stream_free(): GET /metrics counts it */
        pthread_mutex_unlock(&h->mcp->lock);
        x->w.ops = &stream_ops;
        snprintf(x->w.agent, sizeof(x->w.agent), "%s", s->agent);
        x->w.dirs = HUB_WAIT_DIR(HUB_WAIT_ON_CLAIMED) | HUB_WAIT_DIR(HUB_WAIT_ON_ARCHIVE);
        x->w.name_in = true;    /* name "": every event of those looks */
        x->w.tick = MCP_STREAM_TICK_USEC;
        x->t = h->mcp;
        x->s = s;
        x->from = from;
        x->keepalive = mono_usec() + MCP_KEEPALIVE_USEC;
        x->hot_until = mono_usec() + MCP_STREAM_HOT_USEC;
        *ret = &x->w;
        return 0;
}

/* ---- handoff_complete's wait for the daemon -------------------------------- */

struct mcp_later_wait {
        struct hub_wait w;
        struct hub_mcp *t;
        struct mcp_session *s;
        struct mcp_later later;
        json_t *rpc_id;
};

/* The daemon takes the result from the inbox and records it beside the
 * archived item (archive/, an event we watch); a refusal it writes into
 * the inbox, which we look at each tick. */
static bool later_look(struct hub *h, struct hub_wait *w)
{
        struct mcp_later_wait *x = (struct mcp_later_wait *)w;

        (void)h;
        return mcp_complete_taken(&x->s->m, &x->later);
}

static int later_finish(struct hub *h, struct hub_wait *w, struct hub_answer *a)
{
        struct mcp_later_wait *x = (struct mcp_later_wait *)w;
        json_t *ans = NULL;
        int r;

        (void)h;
        r = mcp_complete_finish(&x->s->m, &x->later, x->rpc_id, &ans);
        if (r < 0)
                return r;
        return hub_mcp_answer(a, 200, ans);
}

static void later_free(struct hub_wait *w)
{
        struct mcp_later_wait *x = (struct mcp_later_wait *)w;

        json_decref(x->rpc_id);
        hub_mcp_session_put(x->t, x->s);
        free(x);
}

static const struct hub_wait_ops later_ops = {
        .look = later_look, .finish = later_finish, .free = later_free,
};

/* s's handoff_complete answers once the daemon took its result (at most
 * MCP_COMPLETE_WAIT_MS): a wait on no thread, holding s. */
int hub_mcp_later_new(struct hub *h, struct mcp_session *s, const json_t *rpc_id,
                      struct hub_wait **ret)
{
        struct mcp_later_wait *x = calloc(1, sizeof(*x));

        if (!x)
                return -ENOMEM;
        x->w.ops = &later_ops;
        snprintf(x->w.agent, sizeof(x->w.agent), "%s", s->agent);
        x->w.dirs = HUB_WAIT_DIR(HUB_WAIT_ON_ARCHIVE);
        snprintf(x->w.name, sizeof(x->w.name), "%s", s->m.later.id);
        x->w.name_in = true;
        x->w.tick = MCP_STREAM_TICK_USEC;
        x->w.deadline = mono_usec() + MCP_COMPLETE_WAIT_MS * 1000LL;
        x->t = h->mcp;
        x->s = s;
        x->later = s->m.later;
        x->rpc_id = json_incref((json_t *)rpc_id);
        s->m.later.on = false;
        pthread_mutex_lock(&h->mcp->lock);
        s->refs++;
        pthread_mutex_unlock(&h->mcp->lock);
        *ret = &x->w;
        return 0;
}

