/* handoff-hubd: what its parts share.  One process: libmicrohttpd's
 * threads answer requests (hub_http.c), each POST is judged and dropped
 * into the spool (hub_accept.c), the main thread waits for signals and
 * logs (main.c). */
#ifndef HUBD_HUB_H
#define HUBD_HUB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <time.h>

#include <jansson.h>

#include "config.h"
#include "hub_log.h"

/* Exit codes (handoff-hubd(8)). */
enum {
        HUB_EXIT_OK = 0,
        HUB_EXIT_RUNTIME = 1,   /* cannot listen, spool unusable, ... */
        HUB_EXIT_CONFIG = 2,    /* usage, config, keys, tokens, TLS files */
};

#define HUB_DEFAULT_TIMEOUT 10
#define HUB_DEFAULT_REQUEST_TIMEOUT 30
#define HUB_DEFAULT_MAX_CONNECTIONS 256
#define HUB_DEFAULT_MAX_PER_ADDRESS 32
#define HUB_THREADS 8
#define HUB_AUTH_LOG_INTERVAL 60        /* seconds between failed-auth lines */
#define HUB_REFUSAL_LOG_BURST 10        /* refusals logged one by one per interval */
#define HUB_DEFAULT_STATE_DIR CONFIG_HUB_STATE_DIR_DEFAULT
#define HUB_STATUS_INTERVAL 10          /* status.json rewritten at least this often */
#define HUB_DEFAULT_RATE_PER_TOKEN 20   /* handoffs a second, a token's bucket refills */
#define HUB_DEFAULT_BURST_PER_TOKEN 200 /* and holds at most */
#define HUB_DEFAULT_MAX_REQUESTS_PER_TOKEN (HUB_THREADS / 2)
#define HUB_DEFAULT_MAX_WAITS_PER_TOKEN 32
#define HUB_DEFAULT_A2A_BLOCK_MAX 60    /* seconds a blocking SendMessage waits */

/* Log lines a client can cause, rate-limited (hub_ratelog.c): the first
 * burst of an interval one line each, the others counted and said with
 * the last of them once an interval. */
struct hub_ratelog {
        pthread_mutex_t lock;
        unsigned burst;         /* lines logged at once per interval */
        unsigned logged;        /* of those, in this interval */
        uint64_t more;          /* since, not logged one by one */
        char last[512];         /* the last one, as the caller put it */
};
void hub_ratelog_init(struct hub_ratelog *r, unsigned burst);
void hub_ratelog_destroy(struct hub_ratelog *r);
/* One more: true when the caller logs it now (*ret_last: the last one
 * logged at once this interval), false when it is counted; what is kept
 * as the last either way. */
bool hub_ratelog_take(struct hub_ratelog *r, const char *what, bool *ret_last);
/* Once an interval: how many were counted since (0: the next ones are
 * logged at once again), the last of them into last. */
uint64_t hub_ratelog_tick(struct hub_ratelog *r, char *last, size_t n);

struct hub_answer;
struct hub_limits;
struct hub_mcp;
struct hub_waits;
struct hub_tokens;
struct hub_tls;
struct hub_conns;
struct hub_records;
struct sockaddr;

struct hub {
        struct config *cfg;
        bool verbose;
        /* held directory fds: the spool's tmp/ and handoff/, our records;
         * cancel/ (CancelTask's requests), -1 when the spool has none */
        int tmp_fd, handoff_fd, state_fd, ids_fd, claimed_fd, cancel_fd;
        struct hub_records *records;    /* the accepted ids (hub_records.c) */
        struct hub_tokens *tokens;      /* swapped on SIGHUP under the lock */
        pthread_rwlock_t tokens_lock;
        struct hub_tls *tls;            /* NULL: plain HTTP (loopback, unix) */
        /* Failed authentications: the first is logged at once with the
         * peer's address and why; the ones after it are counted and said
         * in one line per HUB_AUTH_LOG_INTERVAL, with the last of them.
         * Refusals of a post ("PEER, agent AGENT: STATUS REASON"): the
         * first HUB_REFUSAL_LOG_BURST of an interval one line each. */
        struct hub_ratelog auth_log, refusal_log;
        /* for status.json */
        time_t started;
        const char *listen_desc;
        int64_t wait_ms;                /* ?wait=claimed, CancelTask: HUB_WAIT_MS */
        int64_t (*now_usec)(void);      /* the clock documents are judged by;
                                         * NULL: hd_now_usec (a test's own) */
        struct hub_conns *conns;        /* while libmicrohttpd runs */
        struct hub_waits *waits;        /* likewise: the suspended waits */
        struct hub_limits *limits;      /* each token's rate and share */
        struct hub_signer *signer;      /* [hub] signing_key; NULL: none (hub_jws.h) */
        struct hub_mcp *mcp;            /* /mcp's sessions, while libmicrohttpd runs */
};

/* ---- logging: hub_log() (hub_log.h); what a client can cause,
 * rate-limited (hub_ratelog.c) ---- */
/* A request failed to authenticate: from (the peer's address), why. */
void hub_auth_failed(struct hub *h, const char *from, const char *why);
/* A post from agent (the token's) at from was refused with a's answer;
 * body: what it posted (its handoff_id is named when it has one). */
void hub_refused(struct hub *h, const char *from, const char *agent, const char *body,
                 size_t len, const struct hub_answer *a);
/* Once per HUB_AUTH_LOG_INTERVAL: the count of the failed
 * authentications and of the refusals not logged one by one. */
void hub_limited_tick(struct hub *h);
/* The hub of h->cfg made ready to answer (main.c): [hub] defaults, the
 * tokens, the TLS files, the spool's directories, state_dir (pruned), our
 * leftovers in tmp/ removed.  0, or a HUB_EXIT_* code (logged). */
int hub_setup(struct hub *h);

/* ---- tokens (hub_tokens.c) ---- */
/* Load every AGENT.token of dir.  Returns 0, or -errno with err filled. */
int hub_tokens_load(const char *dir, struct hub_tokens **ret, char *err,
                    size_t errlen);
void hub_tokens_free(struct hub_tokens *t);
size_t hub_tokens_count(const struct hub_tokens *t);
/* The agent the presented token speaks for, or NULL.  Every stored token
 * is compared, in constant time each. */
const char *hub_tokens_agent(const struct hub_tokens *t, const char *token,
                             size_t len);
/* "credential:NAME" -> $CREDENTIALS_DIRECTORY/NAME into buf. */
int hub_path_resolve(const char *spec, char *buf, size_t n);

/* ---- TLS (hub_tls.c) ---- */
int hub_tls_load(const char *cert, const char *key, struct hub_tls **ret,
                 char *err, size_t errlen);
/* Load the files again; on failure the old pair stays in use. */
int hub_tls_reload(struct hub_tls *t, char *err, size_t errlen);
/* The gnutls_certificate_retrieve_function2 for MHD_OPTION_HTTPS_CERT_CALLBACK. */
void *hub_tls_callback(void);
void hub_tls_set_global(struct hub_tls *t);
void hub_tls_free(struct hub_tls *t);

/* ---- listening (hub_listen.c) ---- */
/* A listening socket for spec (HOST:PORT, [V6]:PORT or unix:PATH), or the
 * one systemd passed (LISTEN_FDS).  *ret_loopback: only this host can
 * connect (a loopback address or a unix socket); *ret_unix likewise. */
int hub_listen_open(const char *spec, int *ret_fd, bool *ret_loopback,
                    bool *ret_unix, bool *ret_activated, char *err,
                    size_t errlen);
/* Whether spec is one hub_listen_open() takes, resolved but not bound
 * (handoff-hubd -n): 0 with *ret_loopback, or -errno with err filled. */
int hub_listen_check(const char *spec, bool *ret_loopback, char *err, size_t errlen);

/* ---- waits that hold no thread (hub_wait.c) ---- */
/* Which directory's events may make a wait ready. */
enum hub_wait_on {
        HUB_WAIT_ON_HANDOFF,    /* a file left handoff/ */
        HUB_WAIT_ON_CANCEL,     /* an answer came into cancel/ */
        HUB_WAIT_ON_CLAIMED,    /* a bootstrap came into claimed/ or left it */
        HUB_WAIT_ON_ARCHIVE,    /* an item, its .outcome or .result came into archive/ */
        HUB_WAIT_ON_REJECTED,   /* an item or its .reason came into rejected/ */
        _HUB_WAIT_ON_MAX,
};
#define HUB_WAIT_DIR(on) (1u << (on))
/* What changes the state of an item once it left handoff/ (an A2A task). */
#define HUB_WAIT_DIRS_ITEM (HUB_WAIT_DIR(HUB_WAIT_ON_HANDOFF) | HUB_WAIT_DIR(HUB_WAIT_ON_CLAIMED) | \
                            HUB_WAIT_DIR(HUB_WAIT_ON_ARCHIVE) | HUB_WAIT_DIR(HUB_WAIT_ON_REJECTED))
#define HUB_WAIT_TICK_USEC 10000        /* a look without events, when one is needed */
struct hub_wait;
TAILQ_HEAD(hub_wait_list, hub_wait);
/* What a stream's writer gives: bytes (> 0), HUB_STREAM_PARK (nothing
 * now: the connection waits for the watcher), HUB_STREAM_END. */
#define HUB_STREAM_PARK 0
#define HUB_STREAM_END (-1)
struct hub_wait_ops {
        /* On the watcher's thread: is the condition met?  (May set w->tick
         * when events alone cannot tell.)  Never blocks. */
        bool (*look)(struct hub *h, struct hub_wait *w);
        /* On a pool thread, once resumed (ready or past the deadline, or
         * never suspended): the answer into a.  0 or -ENOMEM.  Of a
         * stream: the answer when it cannot be held after all. */
        int (*finish)(struct hub *h, struct hub_wait *w, struct hub_answer *a);
        void (*free)(struct hub_wait *w);
        /* A stream's (NULL: a wait with one answer): on a pool thread,
         * libmicrohttpd's content reader, up to max bytes into buf
         * (HUB_STREAM_PARK, HUB_STREAM_END as above).  Before it parks
         * it sets w->deadline: it is called again then at the latest. */
        long (*stream)(struct hub *h, struct hub_wait *w, char *buf, size_t max);
};
/* A request's wait, made by whoever knows its condition (hub_accept.c,
 * hub_a2a_methods.c, hub_a2a_stream.c), handed to the HTTP side in
 * hub_answer.wait. */
struct hub_wait {
        const struct hub_wait_ops *ops;
        char agent[65];                 /* the token's: its share of waits */
        unsigned dirs;                  /* HUB_WAIT_DIR()s whose events concern it */
        char name[256];                 /* the file an event names */
        bool name_in;                   /* or: any name that holds name (a task id) */
        int64_t deadline;               /* monotonic usec */
        int64_t tick;                   /* usec between looks without an event; 0: none */
        bool ready;                     /* look() said so before the resume */
        /* the watcher's, under its lock */
        bool armed, fresh;
        bool parked;                    /* a stream's connection suspended */
        bool named;                     /* this look: an event named it, or an overflow */
        int64_t next_look;
        void (*resume)(void *);
        void *resume_arg;
        TAILQ_ENTRY(hub_wait) link;
        TAILQ_ENTRY(hub_wait) out_link; /* the watcher's list of those to resume */
};
/* w's answer into a as things are now (its finish), and w freed: a wait
 * that is over, or that has no room to wait. */
void hub_wait_answer(struct hub *h, struct hub_wait *w, struct hub_answer *a);
int hub_waits_start(struct hub *h, struct hub_waits **ret);
/* Every wait resumed (as it stands), the thread ended. */
void hub_waits_stop(struct hub_waits *w);
/* After libmicrohttpd stopped: nothing can add any more. */
void hub_waits_free(struct hub_waits *w);
/* x armed: suspend(arg) is called under the watcher's lock (before the
 * watcher may resume it), resume(arg) from the watcher's thread when x
 * is ready or past its deadline.  -EBUSY: no room (w NULL, the bounds):
 * not suspended, to be finished at once. */
int hub_waits_add(struct hub_waits *w, struct hub_wait *x, void (*suspend)(void *),
                  void (*resume)(void *), void *arg);
/* A stream x (x->ops->stream) taken into the watcher's hands for as long
 * as it is open, counted in the bounds as a wait: 0, or -EBUSY (no room). */
int hub_waits_hold(struct hub_waits *w, struct hub_wait *x);
/* Its writer has nothing now: suspend(arg) under the watcher's lock,
 * resume(arg) when x looks ready, at x->deadline, or at the stop.
 * -ESHUTDOWN: the hub stops (or x is not held): end the stream. */
int hub_waits_park(struct hub_waits *w, struct hub_wait *x, void (*suspend)(void *),
                   void (*resume)(void *), void *arg);
/* x out of the watcher's hands if it still was (its connection closed). */
void hub_waits_forget(struct hub_waits *w, struct hub_wait *x);
unsigned hub_waits_count(struct hub_waits *w);

/* ---- each token's rate and share of threads (hub_limits.c) ---- */
int hub_limits_new(const struct config_hub *ch, struct hub_limits **ret);
void hub_limits_free(struct hub_limits *l);
/* One handoff of agent's, from its bucket: true, or false with the
 * seconds until one is there (*ret_retry, >= 1). */
bool hub_limits_take(struct hub_limits *l, const char *agent, unsigned *ret_retry);
/* A request of agent's is being made on a pool thread: true, or false
 * when agent has max_requests_per_token being made already.  Each true
 * is followed by one hub_limits_leave(). */
bool hub_limits_enter(struct hub_limits *l, const char *agent);
void hub_limits_leave(struct hub_limits *l, const char *agent);
/* The refusal for either: 429 with Retry-After retry_s; for A2A a
 * JSON-RPC error -32603 whose data says reason rate_limited and
 * retryAfterSeconds (id NULL: null). */
int hub_answer_limited(struct hub_answer *a, unsigned retry_s, bool busy);
int hub_a2a_limited(struct hub_answer *a, const json_t *id, unsigned retry_s, bool busy);

/* ---- judging and dropping a POST (hub_accept.c) ---- */
struct hub_answer {
        unsigned status;        /* HTTP status */
        char *body;             /* JSON text, malloc'ed */
        const char *ctype;      /* Content-Type; NULL: application/json */
        unsigned retry_after;   /* seconds for Retry-After; 0: none */
        struct hub_wait *wait;  /* the answer comes when it ends (its finish) */
        char session[40];       /* Mcp-Session-Id to send; "": none */
};
/* agent: the token's agent.  Fills a; returns 0 (also for refusals) or
 * -ENOMEM. */
int hub_accept_post(struct hub *h, const char *agent, const char *body,
                    size_t len, struct hub_answer *a);
/* ?wait=claimed after an accepted POST by agent: the wait whose finish
 * answers again with "outcome" (claimed, relayed, rejected, ...;
 * "pending" when timeout_ms passed) into *ret.  0 or -ENOMEM. */
#define HUB_WAIT_MS 5000
int hub_accept_wait(struct hub *h, const char *agent, const char *id, int64_t timeout_ms,
                    struct hub_wait **ret);

/* GET /api/v1/handoffs/{id} for agent. */
int hub_accept_show(struct hub *h, const char *agent, const char *id,
                    struct hub_answer *a);
/* Where handoff_id is (items_find()), with the ends the hub recorded
 * when the spool's file is closed to it: 0 with *ret, -ENOENT, -errno. */
int hub_item_find(struct hub *h, const char *id, json_t **ret);
/* A refusal as JSON: {"status":"rejected","reason":..,"detail":..}. */
int hub_answer_reject(struct hub_answer *a, unsigned status,
                      const char *reason, const char *detail);
/* hub_records_prune() (hub_records.h) and the others' prunes run this often. */
#define HUB_PRUNE_INTERVAL 600
/* Remove what an earlier run of ours left in tmp/. */
int hub_spool_clean_tmp(struct hub *h);

/* ---- A2A (hub_a2a.c; its parts: hub_a2a.h) ---- */
/* GET /a2a/NAME/.well-known/agent-card.json; host: the request's Host. */
int hub_a2a_card(struct hub *h, const char *name, const char *host, struct hub_answer *a);
/* GET /a2a/.well-known/agent-card.json (a card asked for relative to
 * /a2a/NAME without its slash): a 404 that says where the cards are. */
int hub_a2a_card_elsewhere(struct hub *h, const char *host, struct hub_answer *a);
/* GET /.well-known/agent-card.json: [hub] default_agent's card, or one
 * whose interfaces are every agent's endpoint. */
int hub_a2a_root_card(struct hub *h, const char *host, struct hub_answer *a);
/* POST /a2a/NAME by agent (the token's), A2A-Version version and
 * Last-Event-ID last_event_id (NULL: absent): the JSON-RPC answer in a
 * (a.wait: it comes when that ends, or it is a stream, its ops'
 * stream).  0, or -ENOMEM. */
int hub_a2a_rpc(struct hub *h, const char *agent, const char *name, const char *version,
                const char *last_event_id, const char *body, size_t len, struct hub_answer *a);
/* A JSON-RPC error answer with HTTP status (id NULL: null). */
int hub_a2a_error(struct hub_answer *a, unsigned status, const json_t *id, int code,
                  const char *message);
/* The messages kept for retries (state_dir/a2a/, hub_a2a_kept.c): those
 * older than HUB_A2A_KEEP seconds removed; how many. */
#define HUB_A2A_KEEP (7 * 86400)
int hub_a2a_prune(struct hub *h, int64_t now_s);
/* At start: state_dir made 0700 (or -errno, logged), the kept messages
 * indexed (state_dir/a2a/ moved to a2a.d/ first). */
int hub_a2a_load(struct hub *h);
#define HUB_A2A_KEPT_MAX_ITEMS 10000
#define HUB_A2A_KEPT_MAX_BYTES (256ULL << 20)

/* ---- connections (hub_conns.c) ---- */
/* Where a connection's request is: its headers are awaited (it may be
 * dropped to make room), its body (past the headers: kept), or the
 * answer is being made and sent (no deadline). */
enum hub_conn_phase {
        HUB_CONN_HEAD,
        HUB_CONN_BODY,
        HUB_CONN_ANSWER,
};
struct hub_conn;
/* max connections in all, max_per_address from one address (0: no
 * share), limit_usec for a request to arrive whole. */
int hub_conns_new(unsigned max, unsigned max_per_address, int64_t limit_usec,
                  struct hub_conns **ret);
void hub_conns_free(struct hub_conns *t);
/* A connection accepted on fd, from sa (NULL: a unix socket): its entry
 * in *ret, made room for, or already cut when nothing could give way
 * (it stays until closed).  0, or -ENOMEM (the socket shut down). */
int hub_conns_open(struct hub_conns *t, int fd, const struct sockaddr *sa, int64_t now,
                   struct hub_conn **ret);
/* Its request moved on; HUB_CONN_HEAD again: a new request, its own
 * deadline.  c NULL: nothing. */
void hub_conns_phase(struct hub_conns *t, struct hub_conn *c, enum hub_conn_phase phase,
                     int64_t now);
/* libmicrohttpd closed it (before it closes the descriptor). */
void hub_conns_close(struct hub_conns *t, struct hub_conn *c);
/* Cut each request past its deadline: the next deadline, or INT64_MAX
 * (monotonic usec, as now). */
int64_t hub_conns_tick(struct hub_conns *t, int64_t now);
/* Connections open and not cut. */
unsigned hub_conns_count(struct hub_conns *t);

/* ---- HTTP (hub_http.c) ---- */
/* A request as libmicrohttpd hands it over, and what is decided of it:
 * routing, the token, the content type and length, ?wait=, the body cap,
 * then hub_accept.c's judgement.  The HTTP parsing is the library's. */
struct hub_request {
        /* read by hub_request_head() only; header values NULL when absent */
        const char *method, *url;       /* url without its query */
        const char *authorization, *content_type, *content_length;
        const char *wait;               /* the query's wait= */
        const char *host, *a2a_version; /* Host, A2A-Version */
        const char *last_event_id;      /* Last-Event-ID (an A2A or MCP stream resumed) */
        const char *origin, *accept;    /* Origin, Accept (/mcp) */
        const char *mcp_session, *mcp_version;  /* Mcp-Session-Id, MCP-Protocol-Version */
        const char *peer;               /* the peer's address, for the log; NULL: unknown */
        /* the decision's state */
        char agent[65];                 /* the token's, once checked */
        char *body;                     /* so far, malloc'ed */
        size_t len, room;               /* room: body's size, less its NUL's byte */
        bool too_large;
        bool wait_claimed;
        char a2a[65];                   /* NAME of a POST to /a2a/NAME; "": not one */
        bool mcp;                       /* a POST to /mcp */
};
/* The token of q, checked: true with q->agent its agent (a failure is
 * logged as one). */
bool hub_request_auth(struct hub *h, struct hub_request *q);
/* Is q's Content-Type application/json? */
bool hub_request_json(const struct hub_request *q);
/* The head: true with a filled when the answer is decided now (a GET, a
 * refusal), false when a POST's body is to be read and ended. */
bool hub_request_head(struct hub *h, struct hub_request *q, struct hub_answer *a);
/* A piece of the body: 0, or -ENOMEM (the connection is dropped). */
int hub_request_body(struct hub *h, struct hub_request *q, const char *data,
                     size_t size);
/* The body is complete: a filled. */
void hub_request_end(struct hub *h, struct hub_request *q, struct hub_answer *a);
/* Free what the decision kept. */
void hub_request_done(struct hub_request *q);
struct hub_http;
int hub_http_start(struct hub *h, int listen_fd, bool is_unix,
                   struct hub_http **ret, char *err, size_t errlen);
void hub_http_stop(struct hub_http *s);

/* ---- figures (hub_stats.c) ---- */
void hub_stats_request(unsigned status, double seconds);
void hub_stats_accepted(bool duplicate);
void hub_stats_auth_failed(void);
/* Why a connection was closed by the hub (hub_conns.c). */
enum hub_drop {
        HUB_DROP_FULL,          /* the oldest without headers, to make room */
        HUB_DROP_REFUSED,       /* a new one, nothing could give way */
        HUB_DROP_DEADLINE,      /* its request not whole by request_timeout */
        _HUB_DROP_MAX,
};
void hub_stats_dropped(enum hub_drop why);
/* Prometheus text exposition, malloc'ed; conns_open: the connections
 * open (hub_conns_count()), -1 without a table of them. */
char *hub_stats_text(struct hub *h, long conns_open);
/* state_dir/status.json: the hub's figures for handoffctl status, written
 * when they changed or every HUB_STATUS_INTERVAL s; removed at a clean stop. */
void hub_stats_write(struct hub *h, time_t now);
void hub_stats_remove(struct hub *h);

#endif
