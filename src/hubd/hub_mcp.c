/* /mcp: the MCP server of src/lib/mcp/ (the tool table of handoffctl mcp)
 * over MCP's Streamable HTTP transport (specification 2025-11-25,
 * "Transports"), for the agent of each request's token.
 *
 *   POST /mcp     one JSON-RPC message; a request is answered with
 *                 application/json, a notification or a response with
 *                 202 and no body.  initialize starts a session: its
 *                 answer names it in Mcp-Session-Id, which every later
 *                 request carries.
 *   GET /mcp      the session's stream (text/event-stream): a
 *                 notifications/resources/list_changed when a handoff
 *                 comes into the agent's inbox or leaves it.  Resumed
 *                 with Last-Event-ID within the session's idle timeout.
 *   DELETE /mcp   the session ends.
 *
 * A session belongs to its token's agent: another agent's id is not
 * found.  Sessions are bounded per token ([hub] mcp_sessions_per_token:
 * a new one pushes out the token's least recently used one that has no
 * stream open) and end when unused for [hub] mcp_session_idle.  A
 * session has one stream: a second GET takes over from the first, which
 * ends.  A tool
 * call holds a pool thread only while it runs: handoff_complete's wait
 * for the daemon's word, like a stream, holds none (hub_wait.c). */
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include "agent.h"
#include "hub.h"
#include "hub_mcp.h"
#include "mcp.h"
#include "util.h"

#define MCP_SID_BYTES 16
#define MCP_KEEPALIVE_USEC (15 * 1000000LL)
/* The daemon makes the claim (claimed/, an event we watch) before the
 * bootstrap reaches the inbox: a stream looks again this often. */
#define MCP_STREAM_TICK_USEC 250000
#define MCP_ASSUMED_VERSION "2025-03-26"

struct mcp_session {
        char id[2 * MCP_SID_BYTES + 1];
        char agent[65];
        struct mcp m;
        pthread_mutex_t lock;           /* m: one message at a time */
        /* under the table's lock */
        unsigned refs;
        bool gone;                      /* ended: not found from now on */
        unsigned streams;               /* its GET streams not closed yet */
        uint64_t stream_gen;            /* the newest stream's: only it is sent to */
        int64_t used;                   /* monotonic usec of its last request */
        /* under ev_lock: what its stream said */
        pthread_mutex_t ev_lock;
        uint64_t event;                 /* the last SSE id given */
        struct timespec seen;           /* the inbox's mtime at the last list_changed */
        TAILQ_ENTRY(mcp_session) link;
};

struct hub_mcp {
        pthread_mutex_t lock;
        TAILQ_HEAD(, mcp_session) sessions;
        json_t *tools;
        hd_consume_opts copts;
        unsigned max_per_token;
        int64_t idle_usec;
};

/* ---- the rules of the transport, without a session --------------------- */

bool hub_mcp_origin_ok(const char *allowed, const char *origin)
{
        size_t n;

        if (!origin)
                return true;    /* not a browser's request */
        n = strlen(origin);
        for (const char *p = allowed ? allowed : ""; *p;) {
                size_t k;
                p += strspn(p, " \t,");
                k = strcspn(p, " \t,");
                if (k && k == n && !strncasecmp(p, origin, n))
                        return true;
                p += k;
        }
        return false;
}

bool hub_mcp_accepts(const char *accept, const char *type)
{
        size_t n = strlen(type);
        const char *slash = strchr(type, '/');

        if (!accept)
                return true;
        for (const char *p = accept; *p;) {
                size_t k;
                p += strspn(p, " \t,");
                k = strcspn(p, ",;");
                while (k && (p[k - 1] == ' ' || p[k - 1] == '\t'))
                        k--;
                if ((k == n && !strncasecmp(p, type, n)) || (k == 3 && !strncmp(p, "*/*", 3)) ||
                    (slash && k == (size_t)(slash - type) + 2 &&
                     !strncasecmp(p, type, k - 1) && p[k - 1] == '*'))
                        return true;
                p += strcspn(p, ",");
        }
        return false;
}

int hub_mcp_event_id(const char *v, uint64_t *ret)
{
        int64_t n;

        if (!v || !*v) {
                *ret = 0;
                return 0;
        }
        /* ours are digits alone: no sign, no blank */
        if (strspn(v, "0123456789") != strlen(v) || parse_int64(v, 0, INT64_MAX, &n) < 0)
                return -EINVAL;
        *ret = (uint64_t)n;
        return 0;
}

bool hub_mcp_session_id_valid(const char *v)
{
        size_t n = 0;

        for (; v && v[n]; n++)
                if (!((v[n] >= '0' && v[n] <= '9') || (v[n] >= 'a' && v[n] <= 'f')))
                        return false;
        return n == 2 * MCP_SID_BYTES;
}

/* ---- answers ----------------------------------------------------------- */

static int answer_rpc(struct hub_answer *a, unsigned status, json_t *msg)
{
        a->status = status;
        a->body = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
        json_decref(msg);
        return a->body ? 0 : -ENOMEM;
}

/* An HTTP refusal whose body is a JSON-RPC error without an id, as the
 * transport allows. */
static bool refuse(struct hub_answer *a, unsigned status, const char *msg)
{
        answer_rpc(a, status, mcp_error_new(NULL, RPC_INVALID_REQUEST, msg, NULL));
        return true;
}

static int answer_empty(struct hub_answer *a, unsigned status)
{
        a->status = status;
        a->body = strdup("");
        a->ctype = "text/plain";
        return a->body ? 0 : -ENOMEM;
}

/* ---- sessions ------------------------------------------------------------ */

static void session_free(struct mcp_session *s)
{
        if (!s)
                return;
        inbox_done(&s->m.ib);
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->ev_lock);
        free(s);
}

/* Under the table's lock: s out of the table, freed once unused. */
static void session_end_locked(struct hub_mcp *t, struct mcp_session *s)
{
        if (s->gone)
                return;
        s->gone = true;
        TAILQ_REMOVE(&t->sessions, s, link);
        if (!s->refs)
                session_free(s);
}

static void session_put(struct hub_mcp *t, struct mcp_session *s)
{
        pthread_mutex_lock(&t->lock);
        s->used = mono_usec();
        if (--s->refs == 0 && s->gone)
                session_free(s);
        pthread_mutex_unlock(&t->lock);
}

/* Under the table's lock: the sessions unused past the idle timeout end. */
static void sweep_locked(struct hub_mcp *t, int64_t now)
{
        struct mcp_session *s, *next;

        for (s = TAILQ_FIRST(&t->sessions); s; s = next) {
                next = TAILQ_NEXT(s, link);
                if (!s->refs && now - s->used > t->idle_usec)
                        session_end_locked(t, s);
        }
}

/* The session id of agent's, taken (session_put() gives it back); NULL
 * when there is none: never made, ended, or another agent's. */
static struct mcp_session *session_get(struct hub_mcp *t, const char *id, const char *agent)
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

static int inbox_mtime(struct mcp_session *s, struct timespec *ret)
{
        struct stat st;

        if (stat(s->m.ib.dir, &st) < 0)
                return -errno;
        *ret = st.st_mtim;
        return 0;
}

static int publish(struct mcp *m, const char *id, const char *buf, size_t len, char *err,
                   size_t errlen);

/* A new session for agent, taken: 0, -EBUSY (the token's sessions all
 * have a stream open) or -ENOMEM; -EINVAL with err filled when the
 * agent is not one of this hub's. */
static int session_new(struct hub *h, const char *agent, struct mcp_session **ret,
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
        if (inbox_init(&s->m.ib, h->cfg, s->agent, NULL, 0, err, errlen) != 0) {
                /* the client is told what it can act on, not our paths */
                snprintf(err, errlen, "Forbidden: %s has no inbox here (not an [agent] of "
                         "the hub's configuration)", agent);
                session_free(s);
                return -EINVAL;
        }
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
        if (inbox_mtime(s, &s->seen) < 0)
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
                session_free(s);
                return -EBUSY;
        }
        if (mine >= t->max_per_token)
                session_end_locked(t, lru);
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
};

/* Did the inbox change since the last list_changed?  With take, the
 * change is taken: the next look compares with now. */
static bool stream_changed(struct mcp_session *s, bool take)
{
        struct timespec now;
        bool changed;

        if (inbox_mtime(s, &now) < 0)
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

        (void)h;
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
                                stream_changed(x->s, true);
                } else if (stream_changed(x->s, true)) {
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

        (void)h;
        return stream_over(x) || stream_changed(x->s, false);
}

static int stream_finish(struct hub *h, struct hub_wait *w, struct hub_answer *a)
{
        (void)h;
        (void)w;
        refuse(a, 429, "too many open streams and waits (this token's [hub] "
               "max_waits_per_token, or max_connections)");
        a->retry_after = 1;
        return a->body ? 0 : -ENOMEM;
}

static void stream_free(struct hub_wait *w)
{
        struct mcp_stream *x = (struct mcp_stream *)w;

        pthread_mutex_lock(&x->t->lock);
        x->s->streams--;
        pthread_mutex_unlock(&x->t->lock);
        session_put(x->t, x->s);
        free(x);
}

static const struct hub_wait_ops stream_ops = {
        .look = stream_look, .finish = stream_finish, .free = stream_free,
        .stream = stream_read,
};

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
        return answer_rpc(a, 200, ans);
}

static void later_free(struct hub_wait *w)
{
        struct mcp_later_wait *x = (struct mcp_later_wait *)w;

        json_decref(x->rpc_id);
        session_put(x->t, x->s);
        free(x);
}

static const struct hub_wait_ops later_ops = {
        .look = later_look, .finish = later_finish, .free = later_free,
};

/* s's handoff_complete answers once the daemon took its result (at most
 * MCP_COMPLETE_WAIT_MS): a wait on no thread, holding s. */
static int later_new(struct hub *h, struct mcp_session *s, const json_t *rpc_id,
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

/* ---- requests ------------------------------------------------------------ */

/* The rules every request to /mcp follows before its token is looked at:
 * true with a filled when it is refused. */
static bool check_origin(struct hub *h, const struct hub_request *q, struct hub_answer *a)
{
        /* Transports, Security Warning: a present Origin that is not
         * allowed is 403, against DNS rebinding */
        if (!hub_mcp_origin_ok(h->cfg->hub.mcp_origins, q->origin))
                return refuse(a, 403, "Forbidden: Origin is not in [hub] mcp_origins");
        return false;
}

/* Protocol Version Header: an unsupported or invalid version is 400; one
 * other than the session's is invalid for it; none is taken as 2025-03-26. */
static bool check_version(const struct hub_request *q, const struct mcp_session *s,
                          struct hub_answer *a)
{
        const char *v = q->mcp_version;

        if (!v)
                return false;
        if (!mcp_version_known(v))
                return refuse(a, 400, "Bad Request: unsupported MCP-Protocol-Version");
        if (s && s->m.version[0] && strcmp(v, s->m.version))
                return refuse(a, 400, "Bad Request: MCP-Protocol-Version is not the "
                              "version this session agreed on");
        return false;
}

/* Session Management: the session a request names, taken into *ret;
 * true with a filled when there is none to use. */
static bool find_session(struct hub *h, const struct hub_request *q, struct hub_answer *a,
                         struct mcp_session **ret)
{
        *ret = NULL;
        if (!q->mcp_session)
                return refuse(a, 400, "Bad Request: Mcp-Session-Id is required (initialize "
                              "starts a session)");
        *ret = session_get(h->mcp, q->mcp_session, q->agent);
        if (!*ret)
                return refuse(a, 404, "Not Found: no such session (it ended: initialize "
                              "a new one)");
        return false;
}

static bool on_get(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        struct mcp_session *s;
        struct mcp_stream *x;
        uint64_t from;

        if (!hub_mcp_accepts(q->accept, "text/event-stream"))
                return refuse(a, 406, "Not Acceptable: the stream is text/event-stream");
        if (hub_mcp_event_id(q->last_event_id, &from) < 0)
                return refuse(a, 400, "Bad Request: Last-Event-ID is not one of ours");
        if (find_session(h, q, a, &s))
                return true;
        if (check_version(q, s, a)) {
                session_put(h->mcp, s);
                return true;
        }
        x = calloc(1, sizeof(*x));
        if (!x) {
                session_put(h->mcp, s);
                return refuse(a, 500, "out of memory");
        }
        /* Multiple Connections: each message goes on one stream only.  A
         * client back from a dropped connection is on the newest; the one
         * before ends (the hub would learn it is gone only at a write). */
        pthread_mutex_lock(&h->mcp->lock);
        s->streams++;
        x->gen = ++s->stream_gen;
        pthread_mutex_unlock(&h->mcp->lock);
        x->w.ops = &stream_ops;
        snprintf(x->w.agent, sizeof(x->w.agent), "%s", q->agent);
        x->w.dirs = HUB_WAIT_DIR(HUB_WAIT_ON_CLAIMED) | HUB_WAIT_DIR(HUB_WAIT_ON_ARCHIVE);
        x->w.name_in = true;    /* name "": every event of those looks */
        x->w.tick = MCP_STREAM_TICK_USEC;
        x->t = h->mcp;
        x->s = s;
        x->from = from;
        x->keepalive = mono_usec() + MCP_KEEPALIVE_USEC;
        a->status = 200;
        a->wait = &x->w;
        return true;
}

static bool on_delete(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        struct mcp_session *s;

        if (find_session(h, q, a, &s))
                return true;
        pthread_mutex_lock(&h->mcp->lock);
        session_end_locked(h->mcp, s);
        pthread_mutex_unlock(&h->mcp->lock);
        session_put(h->mcp, s);
        answer_empty(a, 200);
        return true;
}

bool hub_mcp_head(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        const char *method = q->method;
        int64_t n;

        if (check_origin(h, q, a))
                return true;
        if (!hub_request_auth(h, q))
                return refuse(a, 401, "Unauthorized: a valid Authorization: Bearer token is "
                              "required");
        if (!strcmp(method, "GET"))
                return on_get(h, q, a);
        if (!strcmp(method, "DELETE"))
                return on_delete(h, q, a);
        if (strcmp(method, "POST"))
                return refuse(a, 405, "Method Not Allowed: POST, GET or DELETE");
        /* Sending Messages to the Server: the client accepts both */
        if (!hub_mcp_accepts(q->accept, "application/json"))
                return refuse(a, 406, "Not Acceptable: answers are application/json");
        if (!hub_request_json(q))
                return refuse(a, 415, "Unsupported Media Type: Content-Type must be "
                              "application/json");
        if (q->content_length && (parse_int64(q->content_length, 0, INT64_MAX, &n) < 0 ||
                                  (uint64_t)n > h->cfg->max_file_size))
                return refuse(a, 413, "Payload Too Large: a message is at most max_file_size");
        q->mcp = true;
        return false;
}

/* initialize: a session, and its answer naming it. */
static void post_initialize(struct hub *h, struct hub_request *q, const json_t *msg,
                            struct hub_answer *a)
{
        struct mcp_session *s;
        json_t *ans = NULL;
        char err[512];
        int r;

        if (q->mcp_session) {
                refuse(a, 400, "Bad Request: initialize starts a session; send it without "
                       "Mcp-Session-Id");
                return;
        }
        r = session_new(h, q->agent, &s, err, sizeof(err));
        if (r == -EBUSY) {
                refuse(a, 429, "Too Many Requests: this token's sessions ([hub] "
                       "mcp_sessions_per_token) all have a stream open");
                a->retry_after = 1;
                return;
        }
        if (r == -EINVAL) {
                answer_rpc(a, 403, mcp_error_new(json_object_get(msg, "id"), RPC_INVALID_REQUEST,
                                                 err, NULL));
                return;
        }
        if (r < 0) {
                refuse(a, 500, "out of memory");
                return;
        }
        pthread_mutex_lock(&s->lock);
        r = mcp_handle(&s->m, msg, &ans);
        pthread_mutex_unlock(&s->lock);
        if (r < 0 || answer_rpc(a, 200, ans) < 0) {
                pthread_mutex_lock(&h->mcp->lock);
                session_end_locked(h->mcp, s);
                pthread_mutex_unlock(&h->mcp->lock);
                session_put(h->mcp, s);
                free(a->body);
                *a = (struct hub_answer){ 0 };
                refuse(a, 500, "out of memory");
                return;
        }
        snprintf(a->session, sizeof(a->session), "%s", s->id);
        session_put(h->mcp, s);
}

void hub_mcp_post(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        _cleanup_json_ json_t *msg = NULL;
        struct mcp_session *s;
        enum mcp_kind kind;
        json_t *ans = NULL, *err = NULL;
        int r;

        if (q->too_large) {
                refuse(a, 413, "Payload Too Large: a message is at most max_file_size");
                return;
        }
        if (mcp_parse(q->body ? q->body : "", q->len, &msg, &kind, &err) < 0) {
                if (err)
                        answer_rpc(a, 400, err);
                else
                        refuse(a, 400, "Bad Request: not a JSON-RPC 2.0 message");
                return;
        }
        if (check_version(q, NULL, a))
                return;
        if (kind == MCP_REQUEST &&
            !strcmp(json_string_value(json_object_get(msg, "method")), "initialize")) {
                post_initialize(h, q, msg, a);
                return;
        }
        if (find_session(h, q, a, &s))
                return;
        if (check_version(q, s, a)) {
                session_put(h->mcp, s);
                return;
        }
        pthread_mutex_lock(&s->lock);
        r = mcp_handle(&s->m, msg, &ans);
        if (r == 0 && s->m.later.on) {
                /* its answer comes when the daemon took the result */
                json_decref(TAKE_PTR(ans));
                r = later_new(h, s, json_object_get(msg, "id"), &a->wait);
                s->m.later.on = false;
        }
        pthread_mutex_unlock(&s->lock);
        session_put(h->mcp, s);
        if (r == 0 && a->wait)
                return;
        if (r < 0)
                refuse(a, 500, "out of memory");
        else if (kind != MCP_REQUEST)
                answer_empty(a, 202);   /* a notification or a response: accepted */
        else
                answer_rpc(a, 200, ans);
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

void hub_mcp_free(struct hub_mcp *t)
{
        struct mcp_session *s;

        if (!t)
                return;
        while ((s = TAILQ_FIRST(&t->sessions))) {
                TAILQ_REMOVE(&t->sessions, s, link);
                session_free(s);
        }
        json_decref(t->tools);
        pthread_mutex_destroy(&t->lock);
        free(t);
}
