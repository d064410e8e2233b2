/* A line of handoff-a2a (a2a_out.c's helper) and what it does to its
 * item.  The line is "id op outcome task state text result", seven
 * tab-separated fields: op "get" (or "stream": a SubscribeToTask held to
 * its time bound, the task still running), or for a send "send", "adopt" (the
 * server listed a task of ours: followed, not sent), "checked" (listed
 * none: sent) or "resend" (no ListTasks: sent again); outcome "ok" (the
 * server took it: state is its task's), "final" (refused, or a task the
 * server no longer knows), "retry" (unreachable, 5xx) or "token" (401,
 * 403: retried too); result the task's artifacts as JSON; "-" for a
 * field not given.  Every field is checked before anything moves: the
 * helper parses the server's bytes, and the daemon trusts none of them.
 *
 * What an item does next is a2a_actions[], its state x the event (the
 * answer's kind, or the timer's), in the manner of item.c's table. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "a2a_reply.h"
#include "a2a_item.h"
#include "log.h"
#include "util.h"

static bool field_ok(const char *s, size_t max, bool spaces)
{
        size_t n = 0;

        for (; s[n]; n++)
                if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] >= 0x7f ||
                    (!spaces && s[n] == ' '))
                        return false;
        return n > 0 && n <= max;
}

static const char *const run_states[] = { "submitted", "working", "unknown" };

static const char *state_of(const char *s, bool *final, enum a2a_end *end)
{
        if (a2a_end_from_state(s, end) == 0) {
                *final = true;
                return a2a_end_names[*end];
        }
        for (size_t i = 0; i < ELEMENTSOF(run_states); i++)
                if (!strcmp(s, run_states[i])) {
                        *final = false;
                        return run_states[i];
                }
        return NULL;
}

/* The artifacts field: "-", or {"text"?: string, "data"?: object} as
 * handoff-a2a writes it (ASCII JSON), parsed within the line's bound.
 * 0 with *ret (NULL for "-"), or -EPROTO. */
static int result_of(const char *s, json_t **ret)
{
        hd_limits lim = { .max_size = A2A_RESULT_LINE_MAX, .max_depth = HD_DEFAULT_MAX_DEPTH };
        _cleanup_json_ json_t *doc = NULL;
        size_t n = strlen(s);
        hd_verdict v;
        const char *k;
        json_t *x;

        *ret = NULL;
        if (!strcmp(s, "-"))
                return 0;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7f)
                        return -EPROTO;
        if (n > A2A_RESULT_LINE_MAX || hd_parse(s, n, &lim, &doc, &v) < 0 || !json_is_object(doc))
                return -EPROTO;
        json_object_foreach(doc, k, x)
                if (!(!strcmp(k, "text") && json_is_string(x)) &&
                    !(!strcmp(k, "data") && json_is_object(x)))
                        return -EPROTO;
        *ret = TAKE_PTR(doc);
        return 0;
}

/* What an answer says, its fields checked (a2a_reply()). */
struct a2a_answer {
        bool send;              /* an answer to a send (send, adopt, checked, resend) */
        bool token;             /* retry: 401 or 403 */
        bool stream;            /* "stream": a SubscribeToTask held to its bound, no end seen */
        const char *task;       /* "" when none */
        const char *state;      /* its task's state (a static string), or NULL */
        enum a2a_end end;       /* the state as an end, when AE_ENDED */
        const char *text;
        const json_t *result;
};

typedef int a2a_action(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                       int64_t now);

static int act_none(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                    int64_t now)
{
        return 0;
}

/* An answer to a request the item does not have in flight. */
static int act_proto(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                     int64_t now)
{
        return -EPROTO;
}

static int act_request(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                       int64_t now)
{
        struct a2a_remote_st *r = a2a_item_remote(a, it->remote);
        int q = r ? a2a_item_request(a, r, it) : -ENXIO;

        if (q == -ENOENT) {     /* removed by hand */
                it->gone = true;
        } else if (q < 0) {
                a2a_item_remote_error(a, it->remote, strerror(-q), now);
                it->next = now + A2A_BACKOFF_MAX_USEC;
        }
        return 0;
}

/* expires_at bounds the sending only: a task the server has is
 * followed to its end. */
static int act_expire_unsent(struct a2a_out *a, struct a2a_item *it,
                             const struct a2a_answer *an, int64_t now)
{
        struct a2a_remote_st *r = a2a_item_remote(a, it->remote);
        char detail[400];

        snprintf(detail, sizeof(detail), "expired in outbox/ before A2A remote %.64s took it%s%.250s",
                 it->remote, r && r->last_error[0] ? "; last error: " : "", r ? r->last_error : "");
        a2a_item_rejected(a, it, HD_R_EXPIRED_UNSENT, detail, now);
        return 0;
}

/* [remote NAME] a2a_follow_max: a server that says "working" for ever is
 * not asked for ever. */
static int act_expire_unfinished(struct a2a_out *a, struct a2a_item *it,
                                 const struct a2a_answer *an, int64_t now)
{
        char text[200];

        snprintf(text, sizeof(text), "no end after %llds (last state %s): no longer followed",
                 (long long)(a2a_item_follow_max(a, it) / 1000000),
                 it->state ? it->state : "not seen since the start");
        log_warning("A2A remote %s: task %s of %s: %s", it->remote, it->task, it->id, text);
        a2a_item_archived(a, it, A2A_END_EXPIRED_UNFINISHED, text, NULL, now);
        return 0;
}

static void record_task(struct a2a_out *a, struct a2a_item *it)
{
        int q = a2a_item_task_record(a, it);

        if (q < 0)
                spool_error(a->sp, q, "Cannot record the A2A task of %s", it->id);
}

/* The server took it as a task that has not ended: followed. */
static int act_follow_new(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                          int64_t now)
{
        snprintf(it->task, sizeof(it->task), "%s", an->task);
        record_task(a, it);
        a->st.followed++;
        log_info("A2A remote %s took %s as task %s (%s); following it", it->remote, it->id,
                 it->task, an->state);
        it->tries = 0;
        it->st = AI_FOLLOW;
        it->state = an->state;
        it->next = now + a2a_item_backoff(++it->tries, A2A_FOLLOW_BACKOFF_MAX_USEC);
        return 0;
}

/* The server has it from an earlier try: followed, not sent again; its
 * end (and artifacts) come by GetTask. */
static int act_adopt(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                     int64_t now)
{
        struct a2a_remote_st *r = a2a_item_remote(a, it->remote);

        snprintf(it->task, sizeof(it->task), "%s", an->task);
        record_task(a, it);
        if (r)
                r->adopted++;
        a->st.followed++;
        log_info("A2A remote %s already has %s as task %s (%s): following it, not sent again",
                 it->remote, it->id, it->task, an->state);
        it->tries = 0;
        it->st = AI_FOLLOW;
        it->state = an->state;
        it->next = now;
        return 0;
}

/* Still running at a GetTask: asked again, later each time.  After a
 * stream held to its bound the helper has waited already: followed again
 * at once. */
static int act_follow_again(struct a2a_out *a, struct a2a_item *it,
                            const struct a2a_answer *an, int64_t now)
{
        it->st = AI_FOLLOW;
        it->state = an->state;
        if (an->stream)
                it->tries = 0;
        it->next = an->stream ? now
                              : now + a2a_item_backoff(++it->tries, A2A_FOLLOW_BACKOFF_MAX_USEC);
        return 0;
}

/* An end: the task's, or a message without a task (taken as completed). */
static int act_archive(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                       int64_t now)
{
        if (an->send && an->task[0])
                snprintf(it->task, sizeof(it->task), "%s", an->task);
        a2a_item_archived(a, it, an->end, an->text, an->result, now);
        return 0;
}

static int act_refused(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                       int64_t now)
{
        char detail[400];

        snprintf(detail, sizeof(detail), "A2A remote %.64s refused it: %.300s", it->remote, an->text);
        a2a_item_remote_error(a, it->remote, an->text, now);
        a2a_item_rejected(a, it, HD_R_REMOTE_REJECTED, detail, now);
        return 0;
}

/* The server no longer knows its task (restarted with its store in
 * memory?): an end too, and the result is lost, so said at warning. */
static int act_forgotten(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                         int64_t now)
{
        log_warning("A2A remote %s no longer knows task %s of %s: %s", it->remote, it->task,
                    it->id, an->text);
        a2a_item_archived(a, it, A2A_END_UNKNOWN, an->text, NULL, now);
        return 0;
}

/* Unreachable, 5xx, or the token refused: tried again later, from where
 * it was (a send is a send again, a GetTask a GetTask). */
static int act_retry(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                     int64_t now)
{
        struct a2a_remote_st *r = a2a_item_remote(a, it->remote);
        bool send = it->st == AI_SENDING;

        if (r && an->token && !r->token_refused_usec) {
                r->token_refused_usec = now;
                log_error("A2A remote %s refuses the token (%s): %s waits, retried", it->remote,
                          an->text, it->id);
        } else if (r && strcmp(r->last_error, an->text)) {
                log_warning("A2A remote %s: %s %s: %s; retrying", it->remote,
                            send ? "SendMessage of" : "GetTask of", it->id, an->text);
        }
        a2a_item_remote_error(a, it->remote, an->text, now);
        a->st.retries++;
        it->st = send ? AI_UNSENT : AI_FOLLOW;
        it->next = now + a2a_item_backoff(++it->tries, send ? A2A_BACKOFF_MAX_USEC
                                                            : A2A_FOLLOW_BACKOFF_MAX_USEC);
        return 0;
}

/* Its helper stopped before it answered: the request waits for the next
 * helper (a send is asked for by ListTasks first, a2a_out.c). */
static int act_unsent(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                      int64_t now)
{
        it->st = AI_UNSENT;
        return 0;
}

static int act_follow(struct a2a_out *a, struct a2a_item *it, const struct a2a_answer *an,
                      int64_t now)
{
        it->st = AI_FOLLOW;
        return 0;
}

/* state x event -> action: the one place that says what happens next. */
static a2a_action *const a2a_actions[AI_MAX_][AE_MAX_] = {
        [AI_UNSENT] = {
                [AE_DUE]        = act_request,          /* SendMessage (ListTasks first if began) */
                [AE_EXPIRED]    = act_expire_unsent,    /* rejected/: expired_unsent */
                [AE_RUNNING]    = act_proto,
                [AE_ENDED]      = act_proto,
                [AE_ADOPTED]    = act_proto,
                [AE_FINAL]      = act_proto,
                [AE_RETRY]      = act_proto,
                [AE_DOWN]       = act_none,
        },
        [AI_SENDING] = {
                [AE_DUE]        = act_none,             /* the answer is awaited */
                [AE_EXPIRED]    = act_none,
                [AE_RUNNING]    = act_follow_new,       /* -> FOLLOW */
                [AE_ENDED]      = act_archive,          /* archive/ with its end */
                [AE_ADOPTED]    = act_adopt,            /* -> FOLLOW, not sent again */
                [AE_FINAL]      = act_refused,          /* rejected/: remote_rejected */
                [AE_RETRY]      = act_retry,            /* -> UNSENT, backed off */
                [AE_DOWN]       = act_unsent,           /* -> UNSENT */
        },
        [AI_FOLLOW] = {
                [AE_DUE]        = act_request,          /* GetTask */
                [AE_EXPIRED]    = act_expire_unfinished, /* archive/: expired_unfinished */
                [AE_RUNNING]    = act_proto,
                [AE_ENDED]      = act_proto,
                [AE_ADOPTED]    = act_proto,
                [AE_FINAL]      = act_proto,
                [AE_RETRY]      = act_proto,
                [AE_DOWN]       = act_none,
        },
        [AI_GETTING] = {
                [AE_DUE]        = act_none,
                [AE_EXPIRED]    = act_none,
                [AE_RUNNING]    = act_follow_again,     /* -> FOLLOW, backed off */
                [AE_ENDED]      = act_archive,
                [AE_ADOPTED]    = act_proto,
                [AE_FINAL]      = act_forgotten,        /* archive/: unknown */
                [AE_RETRY]      = act_retry,            /* -> FOLLOW, backed off */
                [AE_DOWN]       = act_follow,           /* -> FOLLOW */
        },
};

int a2a_item_event(struct a2a_out *a, struct a2a_item *it, enum a2a_event ev, int64_t now)
{
        return a2a_actions[it->st][ev](a, it, NULL, now);
}

int a2a_reply(struct a2a_out *a, struct a2a_remote_st *r, char *line, int64_t now)
{
        _cleanup_json_ json_t *result = NULL;
        char *f[7], *p = line;
        struct a2a_item *it;
        bool final = false;
        enum a2a_event ev;

        for (size_t i = 0; i < 7; i++) {
                f[i] = p;
                p = i < 6 ? strchr(p, '\t') : NULL;
                if (i < 6 && !p)
                        return -EPROTO;
                if (p)
                        *p++ = '\0';
        }
        if (strchr(f[6], '\t') || !field_ok(f[0], NAME_MAX, false) ||
            !field_ok(f[3], A2A_TASK_MAX, false) || !field_ok(f[5], 300, true) ||
            result_of(f[6], &result) < 0)
                return -EPROTO;
        struct a2a_answer an = { .task = strcmp(f[3], "-") ? f[3] : "",
                                 .text = strcmp(f[5], "-") ? f[5] : "", .result = result,
                                 .end = A2A_END_COMPLETED };
        /* adopt, checked, resend: a send that asked ListTasks first */
        bool adopt = !strcmp(f[1], "adopt");
        an.send = adopt || !strcmp(f[1], "send") || !strcmp(f[1], "checked") ||
                  !strcmp(f[1], "resend");
        an.stream = !strcmp(f[1], "stream");
        if (!an.send && !an.stream && strcmp(f[1], "get"))
                return -EPROTO;
        /* Each item has one request in flight at most: its id names the
         * request an answer is for, in whatever order they come. */
        it = a2a_item_find(a, f[0]);
        if (!it || strcmp(it->remote, r->name) || it->st != (an.send ? AI_SENDING : AI_GETTING))
                return -EPROTO;
        if (strcmp(f[4], "-") && !(an.state = state_of(f[4], &final, &an.end)))
                return -EPROTO;
        if (an.stream && (strcmp(f[2], "ok") || !an.state || final))
                return -EPROTO;
        if (!strcmp(f[2], "ok") && an.state)
                ev = adopt ? AE_ADOPTED
                   : final || (an.send ? !an.task[0] : false) ? AE_ENDED : AE_RUNNING;
        else if (!strcmp(f[2], "final") && !an.state && !adopt)
                ev = AE_FINAL;
        else if ((!strcmp(f[2], "retry") || !strcmp(f[2], "token")) && !an.state && !adopt)
                ev = AE_RETRY;
        else
                return -EPROTO;
        if (adopt && !an.task[0])
                return -EPROTO;
        if (!final)
                an.end = A2A_END_COMPLETED;
        an.token = !strcmp(f[2], "token");
        r->inflight--;
        if (!an.token)
                r->token_refused_usec = 0;      /* any other answer: the token passed */
        if (!strcmp(f[1], "resend")) {
                r->list_tasks = 0;
                r->resent_unchecked++;
        } else if (adopt || !strcmp(f[1], "checked")) {
                r->list_tasks = 1;
        }
        if (an.send && ev != AE_FINAL && ev != AE_RETRY && !adopt) {
                a->st.sent++;
                /* The server is back: what waits for it goes now. */
                for (size_t i = 0; i < a->n_items; i++)
                        if (!a->items[i].gone && a->items[i].st == AI_UNSENT &&
                            !strcmp(a->items[i].remote, it->remote))
                                a->items[i].next = 0;
        }
        return a2a_actions[it->st][ev](a, it, &an, now);
}
