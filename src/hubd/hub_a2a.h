/* What the parts of handoff-hubd's A2A side share: hub_a2a.c answers
 * (the card, the JSON-RPC dispatch), hub_a2a_methods.c the methods,
 * hub_a2a_task.c makes a task of what the spool holds, hub_a2a_kept.c
 * keeps the documents sent (state_dir/a2a/AGENT/ID.json). */
#ifndef HUBD_HUB_A2A_H
#define HUBD_HUB_A2A_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "hub.h"
#include "payload_a2a.h"

/* state_dir/A2A_DIR: a name no handoff_id can take (hd_id_valid()'s
 * alphabet has no '.'); A2A_DIR_OLD, one it can, moved at start. */
#define A2A_DIR "a2a.d"
#define A2A_DIR_OLD "a2a"
#define A2A_ID_MAX 128          /* hd_id_valid() */
#define A2A_AGENT_MAX 64        /* hd_agent_valid() */
#define A2A_CTX_MAX 256         /* payload_a2a.h A2A_MAX_ID */
#define A2A_VERSION "1.0"
#define A2A_CARD_PATH "/.well-known/agent-card.json"
#define A2A_LOCKS 64
#define A2A_PAGE_DEFAULT 50
#define A2A_PAGE_MAX 100

/* A2A 1.0's JSON-RPC error codes (section 9.5 / the SDK's A2A_ERROR_CODE). */
enum {
        RPC_PARSE_ERROR = -32700,
        RPC_INVALID_REQUEST = -32600,
        RPC_METHOD_NOT_FOUND = -32601,
        RPC_INVALID_PARAMS = -32602,
        RPC_INTERNAL = -32603,
        A2A_TASK_NOT_FOUND = -32001,
        A2A_TASK_NOT_CANCELABLE = -32002,
        A2A_PUSH_NOT_SUPPORTED = -32003,
        A2A_UNSUPPORTED = -32004,
        A2A_CONTENT_TYPE = -32005,
        A2A_EXTENDED_CARD = -32007,
        A2A_VERSION_NOT_SUPPORTED = -32009,
};

struct a2a_kept;

/* One JSON-RPC call: who asks (the token's agent), of which agent, what. */
struct a2a_call {
        struct hub *h;
        const char *agent;      /* the token's */
        const char *name;       /* NAME of /a2a/NAME */
        const json_t *id, *params;
        const char *last_event_id;      /* the Last-Event-ID header; NULL: none */
        struct hub_answer *a;
};

/* ---- hub_a2a.c ---- */
/* The answer {jsonrpc, id, result}; result NULL: -ENOMEM. */
int a2a_answer_result(struct hub_answer *a, const json_t *id, json_t *result);
/* The call's JSON-RPC error, code and message. */
int a2a_call_error(struct a2a_call *c, int code, const char *message);
/* An internal failure (r) of what: logged, answered "retry". */
int a2a_call_internal(struct a2a_call *c, const char *what, int r);
/* Whether this host serves name or reaches it through a [remote]. */
bool a2a_agent_reachable(const struct config *c, const char *name);

/* ---- hub_a2a_methods.c: SendMessage, GetTask, CancelTask, ListTasks ---- */
int a2a_send_message(struct a2a_call *c);
int a2a_get_task(struct a2a_call *c);
/* The push notification configs' methods (hub_push.c). */
int a2a_push_create(struct a2a_call *c);
int a2a_push_get(struct a2a_call *c);
int a2a_push_list(struct a2a_call *c);
int a2a_push_delete(struct a2a_call *c);
/* Whether push notifications are on: a signing key (hub_push.c). */
bool hub_push_on(const struct hub *h);
int a2a_cancel_task(struct a2a_call *c);
int a2a_list_tasks(struct a2a_call *c);
/* SendMessage, answered with a stream (hub_a2a_stream.c). */
int a2a_send_streaming_message(struct a2a_call *c);
/* COMPLETED, FAILED, CANCELED, REJECTED. */
bool a2a_state_terminal(const char *state);

/* ---- hub_a2a_stream.c: the streams ---- */
int a2a_subscribe_to_task(struct a2a_call *c);
/* The client's last event (Last-Event-ID, else params.metadata's
 * generation): 0 with *ret (0: none), -EINVAL when it is not one. */
int a2a_stream_from(struct a2a_call *c, int64_t *ret);
/* Whether the call's resume point is well formed: 1, or 0 with the
 * error answered. */
int a2a_stream_params_ok(struct a2a_call *c);
/* The answer a stream of task kept, from the client's last event from
 * (0: the Task as it is now): into c->a->wait (hub_http.c sends it). */
int a2a_stream_open(struct a2a_call *c, const struct a2a_kept *kept, int64_t from);
/* A stream of task (taken) alone, ended at once: a send that ended there. */
int a2a_stream_task_once(struct a2a_call *c, json_t *task);

/* ---- hub_a2a_task.c ---- */
/* The string k of o, or NULL. */
const char *a2a_str(const json_t *o, const char *k);
/* A Task of state, with hstatus (the spool's word) and a status message
 * when reason is set; NULL when out of memory. */
json_t *a2a_task_new(const char *id, const char *ctx, const char *state,
                     const char *hstatus, const char *reason, const char *detail,
                     const char *at);
/* Whether s is a TaskState of A2A 1.0. */
bool a2a_task_state_known(const char *s);
struct a2a_kept;
/* The task t that agent sent, from the spool, numbered (its generation
 * in metadata): 0 with *ret; -ENOENT when the spool no longer holds it.
 * One the daemon rejected has its document removed (a2a_kept_rejected()). */
int a2a_task_lookup(struct hub *h, const char *agent, const struct a2a_kept *t, json_t **ret);
/* a2a_task_lookup() with its history of messages (the last history of
 * them; 0: none) in the task, and with ret_hist its events (as
 * a2a_task_history() has them, numbered through every turn). */
int a2a_task_lookup_full(struct hub *h, const char *agent, const struct a2a_kept *t,
                         int64_t history, json_t **ret, json_t **ret_hist);
/* Whether state is INPUT_REQUIRED: a task that takes a message. */
bool a2a_state_asks(const char *state);
/* Terminal (COMPLETED, FAILED, CANCELED, REJECTED) or interrupted
 * (INPUT_REQUIRED, AUTH_REQUIRED): where a blocking send answers and a
 * stream ends. */
bool a2a_state_final(const char *state);
/* The events of a task of one turn (hub_a2a_task.c's comment), in order,
 * as A2A 1.0's StreamResponse: statusUpdate or artifactUpdate, the i-th
 * (from 0) of generation i + 1 in its metadata.  NULL when out of
 * memory.  A task of several turns has its events from
 * a2a_task_lookup_full(). */
json_t *a2a_task_history(const json_t *task);
/* The generation of task (its history's length) into its metadata. */
int a2a_task_number(json_t *task);
/* task as it was at generation gen of its history (task itself from the
 * last on).  NULL when out of memory. */
json_t *a2a_task_at(const json_t *task, const json_t *history, size_t gen);
/* The metadata key of an event's generation (the card's extension). */
#define A2A_GENERATION "generation"
#define A2A_EXT_GENERATION "urn:handoffd:a2a:generation:1"

/* ---- hub_a2a_kept.c ---- */
/* A task as the index keeps it: what GetTask and ListTasks need.  A
 * task of several turns (an agent asked for input, its sender answered)
 * has an entry per turn, each a handoff of its own: the first is the
 * task's (its id the task's), each later one names it in task. */
struct a2a_kept {
        char id[A2A_ID_MAX + 1];
        char task[A2A_ID_MAX + 1];      /* a later turn: the task's id; else "" */
        char last[A2A_ID_MAX + 1];      /* the first: its latest turn's id */
        unsigned turns;                 /* the first: how many turns, itself too */
        char to[A2A_AGENT_MAX + 1];
        char ctx[A2A_CTX_MAX + 1];
        struct timespec mtime;  /* of its document: the order of ListTasks */
        uint64_t size;
        bool on_disk;           /* false: rejected, its document removed */
};
/* The lock of task id: one SendMessage of it at a time. */
pthread_mutex_t *a2a_lock(const char *id);
/* The directory of agent's documents (with create, made if missing). */
int a2a_kept_dir(struct hub *h, const char *agent, bool create, int *ret);
/* agent's document of id: 0 with *ret_doc (and its bytes when
 * ret_body), -ENOENT, or -errno. */
int a2a_kept_read(struct hub *h, const char *agent, const char *id, json_t **ret_doc,
                  char **ret_body, size_t *ret_len);
/* agent's entry id from the index (a task or a turn): 0 with *ret, or -ENOENT. */
int a2a_kept_get(const char *agent, const char *id, struct a2a_kept *ret);
/* agent's task id (its first turn) from the index: 0 with *ret, or -ENOENT. */
int a2a_kept_task(const char *agent, const char *id, struct a2a_kept *ret);
/* The turns of agent's task id, oldest first: a malloc'ed copy. */
int a2a_kept_turns(const char *agent, const char *id, struct a2a_kept **ret, size_t *ret_n);
/* Keep doc (its bytes body) as agent's task id, file and index entry:
 * 0, -EDQUOT (agent at [hub] a2a_kept_max_items or _bytes), -errno. */
int a2a_kept_write(struct hub *h, const char *agent, const char *id, const json_t *doc,
                   const char *body, size_t len);
/* Refused by the spool at the drop: file and entry gone. */
void a2a_kept_remove(struct hub *h, const char *agent, const char *id);
/* Rejected by the daemon: the file gone (a retry makes it anew), the
 * entry kept to answer GetTask. */
void a2a_kept_rejected(struct hub *h, const char *agent, const char *id);
/* agent's tasks to to (of context ctx, unless NULL), newest first, their
 * later turns left out: a malloc'ed copy. */
int a2a_kept_list(const char *agent, const char *to, const char *ctx, struct a2a_kept **ret,
                  size_t *ret_n);
/* Whether a task of another sender than agent has context ctx. */
bool a2a_kept_ctx_foreign(const char *agent, const char *ctx);
/* The documents of what the spool's rejected/ holds, removed (soon: at
 * most once a second, for a sender at its cap). */
void a2a_kept_sweep(struct hub *h, bool soon);

#endif
