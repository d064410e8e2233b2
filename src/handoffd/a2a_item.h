/* The A2A sender's state and its items; see a2a_item.c.  Private to
 * a2a_out.c, a2a_reply.c and a2a_item.c. */
#ifndef HD_A2A_ITEM_H
#define HD_A2A_ITEM_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "spool.h"

#define A2A_BACKOFF_MIN_USEC 1000000LL
#define A2A_BACKOFF_MAX_USEC 60000000LL
/* GetTask: a result is late by this much at most. */
#define A2A_FOLLOW_BACKOFF_MAX_USEC 10000000LL
#define A2A_INFLIGHT_MAX 32
/* The artifacts' JSON on a line (src/a2a/a2a_answer.h, A2A_RESULT_MAX). */
#define A2A_RESULT_LINE_MAX (120 * 1024)
/* seven fields: six of 300 bytes at most, then the artifacts */
#define A2A_LINE_MAX (2048 + A2A_RESULT_LINE_MAX)
#define A2A_TASK_MAX 256

/* How an item sent to an A2A remote ended: remote_outcome in its
 * archive/ .outcome (handoffctl wait and show, the hub read it).  The
 * task's end states, then unknown (the server no longer knows the task)
 * and expired_unfinished (still not ended a2a_follow_max after the item
 * entered outbox/: no longer asked). */
enum a2a_end {
        A2A_END_COMPLETED,
        A2A_END_FAILED,
        A2A_END_CANCELED,
        A2A_END_REJECTED,
        A2A_END_INPUT_REQUIRED,
        A2A_END_AUTH_REQUIRED,
        A2A_END_UNKNOWN,
        A2A_END_EXPIRED_UNFINISHED,
        A2A_END_MAX_,
};
extern const char *const a2a_end_names[A2A_END_MAX_];
/* The end named s among the task's end states (those the helper says),
 * or -EINVAL. */
int a2a_end_from_state(const char *s, enum a2a_end *ret);

enum a2a_item_state {
        AI_UNSENT,      /* waits for its next try */
        AI_SENDING,     /* a SendMessage with the helper */
        AI_FOLLOW,      /* its task known: waits for the next GetTask */
        AI_GETTING,     /* a GetTask with the helper */
        AI_MAX_,
};

struct a2a_item {
        char id[NAME_MAX + 1];
        char remote[NAME_MAX + 1];
        char from[NAME_MAX + 1];
        char task[A2A_TASK_MAX + 1];
        enum a2a_item_state st;
        int64_t at, exp, next;  /* usec: entered outbox/, expires_at, next try */
        unsigned tries;
        const char *state;      /* its task's last state (a static string), or NULL */
        bool began;             /* a send began (its side file says so): the next asks first */
        bool gone;              /* left outbox/: the slot is free */
};

/* A remote and its own handoff-a2a (a2a_out.c): a server that hangs
 * holds its own helper's calls, never another remote's. */
struct a2a_remote_st {
        char name[NAME_MAX + 1];
        char last_error[256];
        int64_t last_error_usec;
        struct a2a_out *a;
        uv_process_t proc;
        uv_pipe_t to, from;
        bool running;
        bool proc_open;         /* proc not closed yet: no new helper */
        char line[A2A_LINE_MAX + 1];
        size_t line_len;
        size_t inflight;        /* requests written, not yet answered */
        int64_t helper_at;      /* the next start of the helper */
        int list_tasks;         /* has ListTasks: 1, 0, or -1 not seen yet */
        uint64_t adopted;       /* tasks found by ListTasks, not sent again */
        uint64_t resent_unchecked; /* sent again without ListTasks to ask */
        int64_t token_refused_usec; /* since when it answers 401/403; 0: it does not */
};

struct a2a_out {
        uv_loop_t *loop;
        struct spool *sp;
        uv_timer_t timer;
        bool handles_open, stopping;
        char helper[PATH_MAX];
        struct a2a_item *items;
        size_t n_items, cap_items;
        /* allocated once at start: the helpers' handles never move */
        struct a2a_remote_st *remotes;
        size_t n_remotes;
        struct {
                uint64_t sent, finished, rejected, expired, retries, followed,
                         helper_starts, helper_errors;
        } st;
};

/* The item of id in outbox/, or NULL. */
struct a2a_item *a2a_item_find(struct a2a_out *a, const char *id);
/* A free slot, zeroed; NULL when out of memory. */
struct a2a_item *a2a_item_add(struct a2a_out *a);
/* *it from a verified handoff h that entered outbox/ at at: 0, or
 * -EINVAL when a name is too long. */
int a2a_item_fill(struct a2a_item *it, const struct handoff *h, int64_t at);
/* [remote NAME] a2a_follow_max of its remote, in usec. */
int64_t a2a_item_follow_max(const struct a2a_out *a, const struct a2a_item *it);
/* The wait before try number tries: 1 s doubling to max. */
int64_t a2a_item_backoff(unsigned tries, int64_t max);

/* The remote's record of its last error, or NULL (not an A2A remote at
 * start). */
struct a2a_remote_st *a2a_item_remote(struct a2a_out *a, const char *name);
void a2a_item_remote_error(struct a2a_out *a, const char *remote, const char *err, int64_t now);

/* The task side file outbox/.<id>.a2a-task: written (0 or -errno), read
 * back at start (it->task and AI_FOLLOW when it holds a task id; "-",
 * written before the first send, sets it->began). */
int a2a_item_task_record(struct a2a_out *a, struct a2a_item *it);
int a2a_item_send_mark(struct a2a_out *a, struct a2a_item *it);
void a2a_item_task_load(struct a2a_out *a, struct a2a_item *it);

/* The ends: archive/ as relayed to a2a:NAME with the task's end and
 * text (and result, the artifacts {text?, data?} checked by a2a_reply(),
 * into archive/NAME.result), or rejected/ with reason; it->gone once
 * moved, else it waits and is tried again later (logged). */
void a2a_item_archived(struct a2a_out *a, struct a2a_item *it, enum a2a_end end,
                       const char *text, const json_t *result, int64_t now);
void a2a_item_rejected(struct a2a_out *a, struct a2a_item *it, hd_reason reason,
                       const char *detail, int64_t now);

/* Its request (a SendMessage for AI_UNSENT, else a GetTask) written to
 * remote r's helper: 0, or -errno (-ENOENT: its file is gone
 * from outbox/). */
int a2a_item_request(struct a2a_out *a, struct a2a_remote_st *r, struct a2a_item *it);

/* sp->a2a's status and metrics hooks (ctx: the a2a_out). */
json_t *a2a_item_status(void *ctx, int64_t now);
void a2a_item_metrics(void *ctx, FILE *f, int64_t now);

#endif
