/* /mcp: MCP's Streamable HTTP transport over the tool table of
 * src/lib/mcp/ (hub_mcp.c), its sessions (hub_mcp_session.c), its stream
 * and handoff_complete's wait (hub_mcp_stream.c). */
#ifndef HUBD_HUB_MCP_H
#define HUBD_HUB_MCP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <time.h>

#include "hub.h"
#include "mcp.h"

#define HUB_MCP_PATH "/mcp"
#define HUB_MCP_DEFAULT_SESSIONS 8      /* [hub] mcp_sessions_per_token */
#define HUB_MCP_DEFAULT_IDLE 600        /* [hub] mcp_session_idle, seconds */

int hub_mcp_new(struct hub *h, struct hub_mcp **ret);
void hub_mcp_free(struct hub_mcp *t);
/* A request to /mcp, its head: true with a filled when it is answered
 * now (a refusal, DELETE, GET: a.wait the stream), false when a POST's
 * body is to be read (q->mcp set). */
bool hub_mcp_head(struct hub *h, struct hub_request *q, struct hub_answer *a);
/* The POST's body is whole: its answer into a, on a pool thread. */
void hub_mcp_post(struct hub *h, struct hub_request *q, struct hub_answer *a);

/* The sessions open (those past their idle timeout ended first); the
 * GET streams open. */
unsigned hub_mcp_count(struct hub_mcp *t);
unsigned hub_mcp_streams(struct hub_mcp *t);

/* The parts a fuzzer calls alone.  Is origin (NULL: none) one of the
 * space or comma separated list allowed (NULL: none)? */
bool hub_mcp_origin_ok(const char *allowed, const char *origin);
/* Does the Accept header accept (NULL: anything) the media type type? */
bool hub_mcp_accepts(const char *accept, const char *type);
/* A Last-Event-ID (NULL or "": none, 0): 0 with *ret, or -EINVAL. */
int hub_mcp_event_id(const char *v, uint64_t *ret);
/* Is v a session id as we make them (32 lowercase hex digits)? */
bool hub_mcp_session_id_valid(const char *v);

/* ---- the parts' own ---- */

#define MCP_SID_LEN 32

struct mcp_session {
        char id[MCP_SID_LEN + 1];
        char agent[65];
        struct mcp m;
        pthread_mutex_t lock;           /* m: one message at a time */
        /* under the table's lock */
        unsigned refs;
        bool gone;                      /* ended: not found from now on */
        uint64_t stream_gen;            /* the newest stream's: only it is sent to */
        int64_t used;                   /* monotonic usec of its last request */
        /* under ev_lock: what its stream said */
        pthread_mutex_t ev_lock;
        uint64_t event;                 /* the last SSE id given */
        struct timespec seen;           /* the inbox's mtime at the last list_changed */
        struct timespec stamp;          /* the inbox's mtime as handoffd last said */
        int stamp_r;                    /* ... or why it could not */
        int64_t stamp_at;               /* monotonic usec it said it; 0: never */
        TAILQ_ENTRY(mcp_session) link;
};

struct hub_mcp {
        pthread_mutex_t lock;
        TAILQ_HEAD(, mcp_session) sessions;
        json_t *tools;
        hd_consume_opts copts;
        unsigned max_per_token;
        int64_t idle_usec;
        unsigned streams;               /* GET streams made and not yet freed */
};

/* The session id of agent's, taken (hub_mcp_session_put() gives it
 * back); NULL when there is none: never made, ended, or another agent's. */
struct mcp_session *hub_mcp_session_get(struct hub_mcp *t, const char *id, const char *agent);
void hub_mcp_session_put(struct hub_mcp *t, struct mcp_session *s);
/* A new session for agent, taken: 0, -EBUSY (the token's sessions all
 * are in use), -ENOMEM; -EINVAL with err the refusal to give the client
 * (the agent has no inbox here). */
int hub_mcp_session_new(struct hub *h, const char *agent, struct mcp_session **ret,
                        char *err, size_t errlen);
/* Under the table's lock: s ended (out of the table, freed once unused). */
void hub_mcp_session_end_locked(struct hub_mcp *t, struct mcp_session *s);
/* The mtime of s's inbox, as handoffd says it (now with fresh, else at
 * most MCP_STAMP_USEC old): 0 or -errno. */
#define MCP_STAMP_USEC 200000
int hub_mcp_inbox_mtime(struct hub *h, struct mcp_session *s, bool fresh,
                        struct timespec *ret);

/* hub_inboxd.c: the inbox tools done by handoffd; the mtime of agent's
 * inbox (-ENOENT: none yet), 0 or -errno. */
extern const struct mcp_inbox_ops hub_inboxd_ops;
int hub_inboxd_stamp(const struct hub *h, const char *agent, struct timespec *ret);

/* s's stream from the event after from (0: a new one), holding s. */
int hub_mcp_stream_new(struct hub *h, struct mcp_session *s, uint64_t from,
                       struct hub_wait **ret);
/* s's handoff_complete (s->m.later, taken) answers rpc_id once the daemon
 * took its result: a wait holding s.  0 or -ENOMEM. */
int hub_mcp_later_new(struct hub *h, struct mcp_session *s, const json_t *rpc_id,
                      struct hub_wait **ret);

/* Answers: msg (taken) as the body with status; a refusal whose body is
 * a JSON-RPC error without an id (true, for the caller to return); an
 * empty body. */
int hub_mcp_answer(struct hub_answer *a, unsigned status, json_t *msg);
bool hub_mcp_refuse(struct hub_answer *a, unsigned status, const char *msg);
int hub_mcp_answer_empty(struct hub_answer *a, unsigned status);

#endif
