/* A2A's methods: SendMessage (a handoff signed here, kept, dropped into
 * the spool; without returnImmediately its answer awaits the task's end,
 * [hub] a2a_block_max at most), GetTask, CancelTask (a cancel request
 * into cancel/, the daemon's answer awaited) and ListTasks (the index of
 * the kept documents, newest first, a page at a time).  SendStreamingMessage
 * sends as SendMessage does and answers with a stream (hub_a2a_stream.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cancelreq.h"
#include "files.h"
#include "handoff.h"
#include "hub.h"
#include "hub_a2a.h"
#include "hub_push.h"
#include "payload_a2a.h"
#include "util.h"

/* The signed document of payload p from c->agent to c->name: its bytes. */
static int send_build(struct a2a_call *c, const hd_key *k, const char *id, json_t *p, char **ret,
                      size_t *ret_len)
{
        const struct config *cfg = c->h->cfg;
        int64_t now = c->h->now_usec ? c->h->now_usec() : hd_now_usec();
        char init[HD_TIME_MAX], exp[HD_TIME_MAX];
        _cleanup_json_ json_t *doc = NULL;
        int r;

        if (hd_time_format(now, init, sizeof(init)) < 0 ||
            hd_time_format(now + cfg->max_window * 1000000, exp, sizeof(exp)) < 0)
                return -EINVAL;
        doc = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:O}", "protocol_version", 1,
                        "handoff_id", id, "from_agent", c->agent, "to_agent", c->name,
                        "reason", "a2a", "initiated_at", init, "expires_at", exp,
                        "payload_type", "a2a/1", "payload", p);
        if (!doc)
                return -ENOMEM;
        r = hd_sign(doc, k);
        if (r < 0)
                return r;
        return hd_canon_dump(doc, NULL, ret, ret_len);
}

/* hub_accept_post()'s answer: 1 accepted, 0 refused (reason and detail
 * into *ret_refusal), or -errno (an internal failure). */
static int send_drop(struct a2a_call *c, const char *body, size_t len, json_t **ret_refusal)
{
        struct hub_answer pa = { 0 };
        int r;

        r = hub_accept_post(c->h, c->agent, body, len, &pa);
        if (r < 0)
                return r;
        if (pa.status == 200) {
                free(pa.body);
                return 1;
        }
        *ret_refusal = json_loads(pa.body ? pa.body : "", 0, NULL);
        free(pa.body);
        if (!*ret_refusal)
                return -ENOMEM;
        return pa.status == 503 ? -EAGAIN : 0;
}

/* The history a send's answer holds (configuration.historyLength, A2A
 * 1.0 section 3.2.4: unset, all of it; 0, none): task's again, looked up
 * with it, when it has a history. */
static int send_history(struct a2a_call *c, int64_t history, json_t **task)
{
        const char *id = a2a_str(*task, "id");
        json_t *full = NULL;
        struct a2a_kept t;

        if (history == 0 || !id || a2a_kept_task(c->agent, id, &t) < 0)
                return 0;
        if (a2a_task_lookup_full(c->h, c->agent, &t, history, &full, NULL) < 0)
                return 0;       /* the task as it was looked up stands */
        json_decref(*task);
        *task = full;
        return 0;
}

static int send_answer(struct a2a_call *c, json_t *task)
{
        /* configuration.taskPushNotificationConfig kept, its first
         * event queued, before the task is told (hub_push.c) */
        int r = task ? a2a_push_inline_attach(c, task) : 0;

        if (r < 0) {
                json_decref(task);
                return a2a_call_internal(c, "SendMessage: its push config", r);
        }
        return a2a_answer_result(c->a, c->id, json_pack("{s:o}", "task", task));
}

/* A blocking SendMessage's wait (hub_wait.c): its connection suspended
 * until the task is terminal or interrupted (the watcher's look at each
 * event naming its id in claimed/, archive/, rejected/), or until
 * [hub] a2a_block_max has passed; then the task as it is. */
struct block_wait {
        struct hub_wait w;              /* w.name: the id of the task's latest turn */
        json_t *jid;
        struct a2a_kept kept;
        int64_t history;                /* configuration.historyLength */
};

static bool block_look(struct hub *h, struct hub_wait *w)
{
        struct block_wait *bw = (struct block_wait *)w;
        _cleanup_json_ json_t *task = NULL;

        if (a2a_task_lookup(h, w->agent, &bw->kept, &task) < 0)
                return true;    /* the finish says what it is */
        return a2a_state_final(a2a_str(json_object_get(task, "status"), "state") ?: "");
}

static int block_finish(struct hub *h, struct hub_wait *w, struct hub_answer *a)
{
        struct block_wait *bw = (struct block_wait *)w;
        struct a2a_call call = { .h = h, .agent = w->agent, .name = bw->kept.to, .id = bw->jid,
                                 .a = a };
        json_t *task = NULL;
        int r;

        r = a2a_task_lookup_full(h, w->agent, &bw->kept, bw->history, &task, NULL);
        if (r == -ENOENT)
                return a2a_call_error(&call, A2A_TASK_NOT_FOUND, "the spool no longer holds the task");
        if (r < 0)
                return a2a_call_internal(&call, "SendMessage", r);
        return send_answer(&call, task);
}

static void block_free(struct hub_wait *w)
{
        struct block_wait *bw = (struct block_wait *)w;

        json_decref(bw->jid);
        free(bw);
}

static const struct hub_wait_ops block_ops = {
        .look = block_look, .finish = block_finish, .free = block_free,
};

/* How a send is answered: at once, at the task's end, or with a stream. */
enum send_mode {
        SEND_RETURN,
        SEND_BLOCK,
        SEND_STREAM,
};

/* The answer to a send whose task is task (taken), of id: as mode says;
 * history: configuration.historyLength. */
static int send_settle(struct a2a_call *c, const char *id, json_t *task, enum send_mode mode,
                       int64_t history)
{
        const char *st = a2a_str(json_object_get(task, "status"), "state") ?: "";
        struct block_wait *bw;
        struct a2a_kept kept;

        if (mode == SEND_RETURN || (mode == SEND_BLOCK && a2a_state_final(st))) {
                if (history != 0 && !json_object_get(task, "history"))
                        (void)send_history(c, history, &task);
                return send_answer(c, task);
        }
        if (a2a_kept_task(c->agent, id, &kept) < 0) {
                /* refused at the drop, or rejected: it has ended */
                if (mode == SEND_STREAM)
                        return a2a_stream_task_once(c, task);
                return send_answer(c, task);
        }
        if (mode == SEND_STREAM) {
                int64_t from = 0;
                json_decref(task);
                (void)a2a_stream_from(c, &from);        /* checked before the send */
                return a2a_stream_open(c, &kept, from);
        }
        json_decref(task);
        bw = calloc(1, sizeof(*bw));
        if (!bw)
                return -ENOMEM;
        bw->w.ops = &block_ops;
        snprintf(bw->w.agent, sizeof(bw->w.agent), "%s", c->agent);
        snprintf(bw->w.name, sizeof(bw->w.name), "%s", kept.last);
        bw->history = history;
        bw->w.name_in = true;
        bw->w.dirs = HUB_WAIT_DIRS_ITEM;
        bw->w.deadline = mono_usec() + c->h->cfg->hub.a2a_block_max * 1000000;
        bw->jid = json_incref((json_t *)c->id);
        bw->kept = kept;
        c->a->wait = &bw->w;
        return 0;
}

static int send_rejected(struct a2a_call *c, const char *id, const char *ctx, const char *reason,
                         const char *detail, enum send_mode mode)
{
        json_t *t = a2a_task_new(id, ctx, "TASK_STATE_REJECTED", "rejected", reason, detail, NULL);

        hub_log("a2a: %s from %s to %s rejected: %s", id, c->agent, c->name, reason);
        if (!t || a2a_task_number(t) < 0) {
                json_decref(t);
                return -ENOMEM;
        }
        if (mode == SEND_STREAM)
                return a2a_stream_task_once(c, t);
        return send_answer(c, t);
}

/* The task id of c->agent's to c->name, from the index: 0 or -ENOENT
 * (only the sender's token knows its tasks, at their target's endpoint). */
static int task_get(struct a2a_call *c, const char *id, struct a2a_kept *ret)
{
        int r = a2a_kept_task(c->agent, id, ret);

        return r == 0 && strcmp(ret->to, c->name) ? -ENOENT : r;
}

/* An int32 of params (ProtoJSON: a number or a decimal string) in
 * [min, max]: 0 with *ret (untouched when absent), -EINVAL. */
static int int32_param(const json_t *params, const char *key, int64_t min, int64_t max,
                       int64_t *ret)
{
        const json_t *j = json_object_get(params, key);
        int64_t v;

        if (!j)
                return 0;
        if (json_is_integer(j))
                v = json_integer_value(j);
        else if (!json_is_string(j) || parse_int64(json_string_value(j), INT32_MIN, INT32_MAX,
                                                    &v) < 0)
                return -EINVAL;
        if (v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* historyLength (GetTask, ListTasks, SendMessage's configuration): unset
 * (into *ret: none), or 0 and up (A2A 1.0 section 3.2.4).  Whether it is
 * one. */
static bool history_length_ok(const json_t *params, int64_t none, int64_t *ret)
{
        int64_t n = none;

        if (int32_param(params, "historyLength", 0, INT32_MAX, &n) < 0)
                return false;
        if (ret)
                *ret = n;
        return true;
}

bool a2a_state_terminal(const char *s)
{
        return !strcmp(s, "TASK_STATE_COMPLETED") || !strcmp(s, "TASK_STATE_FAILED") ||
               !strcmp(s, "TASK_STATE_CANCELED") || !strcmp(s, "TASK_STATE_REJECTED");
}

/* A message naming a task (taskId), A2A 1.0 section 3.4.2: an existing
 * one, else TaskNotFoundError; its contextId, when the message has one.
 * 1 with the task's entry in *ret, or 0 with the error answered. */
static int turn_task(struct a2a_call *c, const json_t *tid, struct a2a_kept *ret)
{
        const char *id = json_string_value(tid);
        const char *ctx = a2a_str(json_object_get(c->params, "message"), "contextId");
        int r;

        if (!id)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.message.taskId is not a string");
        r = task_get(c, id, ret);
        if (r == -ENOENT)
                return a2a_call_error(c, A2A_TASK_NOT_FOUND,
                                      "params.message.taskId: no such task for this token");
        if (r < 0)
                return a2a_call_internal(c, "SendMessage", r);
        if (ctx && strcmp(ctx, ret->ctx))
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.message.contextId is not "
                                      "the context of the task it names (taskId)");
        /* the next turn goes as a handoff of its own: the daemon of a
         * [remote] host delivers it there naming the task, as here, but an
         * A2A server behind a [remote] a2a would take it for a new task */
        if (config_remote_a2a(c->h->cfg, c->name))
                return a2a_call_error(c, A2A_UNSUPPORTED, "continuing a task (taskId) of an "
                                      "agent behind another A2A server is not supported here");
        return 1;
}

/* Whether task t takes a message now: 1, when its agent asks for input
 * (INPUT_REQUIRED); else 0 with the error answered (ended, or still at
 * work: UnsupportedOperationError), or -errno. */
static int turn_open(struct a2a_call *c, const struct a2a_kept *t)
{
        _cleanup_json_ json_t *task = NULL;
        const char *st;
        char msg[256];
        int r;

        r = a2a_task_lookup(c->h, c->agent, t, &task);
        if (r == -ENOENT)
                return a2a_call_error(c, A2A_TASK_NOT_FOUND,
                                      "params.message.taskId: the spool no longer holds the task");
        if (r < 0)
                return r;
        st = a2a_str(json_object_get(task, "status"), "state") ?: "";
        if (a2a_state_asks(st))
                return 1;
        if (a2a_state_terminal(st))
                snprintf(msg, sizeof(msg), "the task has ended (%s): it takes no more messages", st);
        else
                snprintf(msg, sizeof(msg), "the task is %s: it takes a message when its agent "
                         "asks for input (TASK_STATE_INPUT_REQUIRED)", st);
        return a2a_call_error(c, A2A_UNSUPPORTED, msg);
}

/* Both locks of a turn (its own id's, its task's), in one order. */
static void turn_lock(pthread_mutex_t *a, pthread_mutex_t *b)
{
        if (a == b || !b) {
                pthread_mutex_lock(a);
                return;
        }
        pthread_mutex_lock(a < b ? a : b);
        pthread_mutex_lock(a < b ? b : a);
}

static void turn_unlock(pthread_mutex_t *a, pthread_mutex_t *b)
{
        if (b && b != a)
                pthread_mutex_unlock(b);
        pthread_mutex_unlock(a);
}

/* The task of a send that continued task tk: as it is now, all turns. */
static int turn_answer(struct a2a_call *c, const struct a2a_kept *tk, enum send_mode mode,
                       int64_t history)
{
        json_t *task = NULL;
        struct a2a_kept t;
        int r;

        r = a2a_kept_task(c->agent, tk->id, &t);
        if (r == 0)
                r = a2a_task_lookup(c->h, c->agent, &t, &task);
        if (r < 0)
                return a2a_call_internal(c, "SendMessage", r);
        return send_settle(c, t.id, task, mode, history);
}

/* Whether payload p is the one kept (a retry) or another message under
 * the same messageId: compared as the daemon reads them, canonical. */
static int send_same(const json_t *kept, const json_t *p, bool *ret)
{
        _cleanup_free_ char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        int r;

        r = hd_canon_dump(json_object_get(kept, "payload"), NULL, &a, &na);
        if (r == 0)
                r = hd_canon_dump(p, NULL, &b, &nb);
        if (r < 0)
                return r;
        *ret = na == nb && !memcmp(a, b, na);
        return 0;
}

static int send_message(struct a2a_call *c, enum send_mode mode)
{
        _cleanup_json_ json_t *p = NULL, *kept = NULL, *refusal = NULL, *task = NULL, *doc = NULL;
        _cleanup_free_ char *body = NULL;
        const json_t *msg = json_object_get(c->params, "message");
        const json_t *tid = json_object_get(msg, "taskId");
        const json_t *conf = json_object_get(c->params, "configuration");
        const char *mid = a2a_str(msg, "messageId"), *ctx, *role;
        const hd_key *k = config_key_lookup((void *)c->h->cfg, NULL, c->agent);
        const hd_limits lim = { .max_size = c->h->cfg->max_file_size };
        char id[64], ctx_new[64], emsg[A2A_CTX_MAX + 160];
        enum a2a_msg_verdict kind;
        struct a2a_kept t, tk;
        pthread_mutex_t *lk, *tlk = NULL;
        int64_t history;
        unsigned retry;
        size_t len = 0;
        bool same;
        hd_verdict v;
        int r;

        /* the token's bucket, before anything is signed, kept or dropped */
        if (!hub_limits_take(c->h->limits, c->agent, &retry))
                return hub_a2a_limited(c->a, c->id, retry, false);
        if (!mid || !*mid)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.message.messageId is required");
        if (!history_length_ok(conf, INT32_MAX, &history))
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.configuration.historyLength "
                                      "is an integer of 0 or more");
        /* an answer to its agent's question: the next turn of that task */
        if (tid && (r = turn_task(c, tid, &tk)) != 1)
                return r;
        /* the key the daemon checks this agent with signs, and keys the
         * task id (payload_a2a.h): the daemon refuses an a2a- id that is
         * not its document's own */
        if (!k || hd_key_kind_of(k) != HD_KEY_HMAC)
                return a2a_call_error(c, A2A_UNSUPPORTED,
                                      "the hub holds no key that signs for this token's agent "
                                      "here (require = sig: only the agent holds its secret key)");
        r = payload_a2a_task_id(k, c->agent, c->name, mid, id, sizeof(id));
        if (r < 0)
                return a2a_call_internal(c, "SendMessage", r);
        /* a context of its own when the client names none, the same on a
         * retry; a later turn's is its task's */
        snprintf(ctx_new, sizeof(ctx_new), "ctx-%s", id + 4);
        r = a2a_message_payload(msg, tid ? tk.ctx : ctx_new, &p, &kind, &v);
        if (r < 0)
                return a2a_call_internal(c, "SendMessage", r);
        if (kind == A2A_MSG_CONTENT_UNSUPPORTED)
                return a2a_call_error(c, A2A_CONTENT_TYPE, v.detail);
        if (kind != A2A_MSG_OK)
                return a2a_call_error(c, RPC_INVALID_PARAMS, v.detail);
        /* REQUIRED in A2A 1.0's Message (a2a.proto: role) */
        role = a2a_str(msg, "role");
        if (!role || !strcmp(role, "ROLE_UNSPECIFIED"))
                return a2a_call_error(c, RPC_INVALID_PARAMS,
                                      "params.message.role is required: ROLE_USER or ROLE_AGENT");
        r = a2a_push_inline_check(c);
        if (r != 0)
                return r < 0 ? r : 0;
        ctx = a2a_str(p, "contextId");
        /* A context is its sender's: one another token's tasks have
         * would put this message into that conversation. */
        if (a2a_kept_ctx_foreign(c->agent, ctx))
                return a2a_call_error(c, RPC_INVALID_PARAMS,
                                      "params.message.contextId is not a context of this token's");
        if (!a2a_agent_reachable(c->h->cfg, c->name))
                return send_rejected(c, id, ctx, "unknown_agent",
                                     "no agent of that name is served here or reachable "
                                     "through a [remote]", mode);

        /* a turn holds its task's lock too: one turn of a task at a time */
        lk = a2a_lock(id);
        if (tid)
                tlk = a2a_lock(tk.id);
        turn_lock(lk, tlk);
        r = a2a_kept_get(c->agent, id, &t);
        if (r == 0 && t.on_disk)
                r = a2a_kept_read(c->h, c->agent, id, &kept, &body, &len);
        else if (r == 0)
                r = -ENOENT;    /* rejected: made anew, dropped again */
        if (r == 0)
                r = send_same(kept, p, &same);
        if (r == 0 && !same) {
                /* a messageId names one message: another one under it
                 * would be answered with the first one's task */
                turn_unlock(lk, tlk);
                hub_log("a2a: %s from %s to %s refused: its messageId came again with "
                        "another message", id, c->agent, c->name);
                snprintf(emsg, sizeof(emsg), "messageId '%s' was sent already with another "
                         "message (task %s): a new message needs a new messageId", mid,
                         t.task[0] ? t.task : id);
                return a2a_call_error(c, RPC_INVALID_PARAMS, emsg);
        }
        if (r == 0) {
                /* a retry: the task as it is, or its bytes dropped again
                 * when the spool does not know them (a crash in between) */
                t.on_disk = false;      /* the spool's word only */
                unsigned turns = t.turns;
                t.turns = 1;            /* this turn's bytes alone */
                r = a2a_task_lookup(c->h, c->agent, &t, &task);
                if (r == 0) {
                        turn_unlock(lk, tlk);
                        /* answered with the task, every turn of it */
                        if (tid)
                                return turn_answer(c, &tk, mode, history);
                        if (turns > 1)
                                return turn_answer(c, &t, mode, history);
                        return send_settle(c, id, TAKE_PTR(task), mode, history);
                }
                if (r != -ENOENT)
                        goto fail;
                ctx = a2a_str(json_object_get(kept, "payload"), "contextId");
        } else if (r == -ENOENT) {
                /* a new turn only while the agent asks for input */
                if (tid && (r = turn_open(c, &tk)) != 1) {
                        turn_unlock(lk, tlk);
                        return r < 0 ? a2a_call_internal(c, "SendMessage", r) : 0;
                }
                r = send_build(c, k, id, p, &body, &len);
                if (r == 0)
                        r = hd_parse(body, len, &lim, &doc, &v);
                /* kept, and in the index, before the drop: once answered
                 * the task exists for GetTask */
                if (r == 0)
                        r = a2a_kept_write(c->h, c->agent, id, doc, body, len);
                if (r == -EDQUOT) {
                        turn_unlock(lk, tlk);
                        hub_log("a2a: %s from %s to %s refused: the token keeps "
                                "a2a_kept_max_items or a2a_kept_max_bytes already", id,
                                c->agent, c->name);
                        return a2a_call_error(c, RPC_INTERNAL,
                                              "this token has as many tasks kept as the hub "
                                              "allows ([hub] a2a_kept_max_items, "
                                              "a2a_kept_max_bytes); retry once some have ended");
                }
                if (r < 0)
                        goto fail;
        } else {
                goto fail;
        }
        r = send_drop(c, body, len, &refusal);
        if (r == 0)
                a2a_kept_remove(c->h, c->agent, id);
        turn_unlock(lk, tlk);
        if (r < 0)
                return a2a_call_internal(c, "SendMessage: dropping into the spool", r);
        if (r == 0 && tid) {
                /* the task stands as it was, still asking */
                snprintf(emsg, sizeof(emsg), "the spool refused the answer: %.64s: %.200s",
                         a2a_str(refusal, "reason") ?: "rejected",
                         a2a_str(refusal, "detail") ?: "");
                return a2a_call_error(c, RPC_INTERNAL, emsg);
        }
        if (r == 0)
                return send_rejected(c, id, ctx, a2a_str(refusal, "reason") ?: "rejected",
                                     a2a_str(refusal, "detail"), mode);
        if (tid) {
                hub_log("a2a: %s from %s to %s accepted: turn of task %s (message %.64s)", id,
                        c->agent, c->name, tk.id, mid);
                return turn_answer(c, &tk, mode, history);
        }
        hub_log("a2a: %s from %s to %s accepted (message %.64s)", id, c->agent, c->name, mid);
        task = a2a_task_new(id, ctx, "TASK_STATE_SUBMITTED", "pending", NULL, NULL, NULL);
        if (!task || a2a_task_number(task) < 0)
                return -ENOMEM;
        /* its history: the one message */
        if (history > 0) {
                json_t *m = json_deep_copy(p);
                if (!m || json_object_set_new(m, "taskId", json_string(id)) < 0 ||
                    json_object_set_new(task, "history", json_pack("[o]", m)) < 0)
                        return -ENOMEM;
        }
        return send_settle(c, id, TAKE_PTR(task), mode, history);
fail:
        turn_unlock(lk, tlk);
        return a2a_call_internal(c, "SendMessage", r);
}

int a2a_send_message(struct a2a_call *c)
{
        const json_t *conf = json_object_get(c->params, "configuration");
        const json_t *ri = json_object_get(conf, "returnImmediately");

        if (conf && !json_is_object(conf))
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.configuration is not an object");
        if (ri && !json_is_boolean(ri))
                return a2a_call_error(c, RPC_INVALID_PARAMS,
                                      "params.configuration.returnImmediately is true or false");
        /* A2A 1.0 section 3.2.2: blocking unless returnImmediately; here
         * for a2a_block_max at most (0: not at all), since a handoff may
         * wait hours for an agent that is down */
        return send_message(c, json_is_true(ri) || c->h->cfg->hub.a2a_block_max <= 0 ? SEND_RETURN
                                                                                     : SEND_BLOCK);
}

int a2a_send_streaming_message(struct a2a_call *c)
{
        return a2a_stream_params_ok(c) ? send_message(c, SEND_STREAM) : 0;
}

int a2a_get_task(struct a2a_call *c)
{
        _cleanup_json_ json_t *task = NULL;
        const char *id = a2a_str(c->params, "id");
        struct a2a_kept t;
        int64_t history;
        int r;

        if (!id)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.id is required");
        /* A2A 1.0 section 3.2.4: unset, the whole history */
        if (!history_length_ok(c->params, INT32_MAX, &history))
                return a2a_call_error(c, RPC_INVALID_PARAMS,
                                      "params.historyLength is an integer of 0 or more");
        r = task_get(c, id, &t);
        if (r == 0)
                r = a2a_task_lookup_full(c->h, c->agent, &t, history, &task, NULL);
        if (r == -ENOENT)
                return a2a_call_error(c, A2A_TASK_NOT_FOUND, "no such task for this token");
        if (r < 0)
                return a2a_call_internal(c, "GetTask", r);
        return a2a_answer_result(c->a, c->id, TAKE_PTR(task));
}

/* The request to cancel id as c->agent, dropped into cancel/ (fd): what
 * its answer is known by into *ret (cancelreq.h). */
static int cancel_send(struct a2a_call *c, int fd, const char *id, struct cancelreq_ticket *ret)
{
        const struct config *cfg = c->h->cfg;
        const hd_key *k = config_key_lookup((void *)cfg, NULL, c->agent);
        int64_t now = c->h->now_usec ? c->h->now_usec() : hd_now_usec();
        _cleanup_free_ char *buf = NULL;
        char name[NAME_MAX + 1], tmp[NAME_MAX + 1];
        size_t len;
        int r;

        /* the key its SendMessage was signed with (send_build()) */
        if (!k || hd_key_kind_of(k) == HD_KEY_ED25519_PUBLIC)
                return -EPERM;
        r = cancelreq_build(id, c->agent, k, now, cfg->max_window, &buf, &len);
        if (r == 0)
                r = cancelreq_name(id, name, sizeof(name));
        if (r == 0)
                r = xsnprintf(tmp, sizeof(tmp), "hub.%s", name) < 0 ? -ENAMETOOLONG : 0;
        if (r == 0)
                r = cancelreq_drop(c->h->tmp_fd, tmp, fd, name, buf, len, cfg->fsync, ret);
        if (r < 0)
                return r;
        hub_log("a2a: %s: cancel requested by %s (%s)", id, c->agent, name);
        return 0;
}

/* CancelTask's wait for the daemon's answer (hub_wait.c): its connection
 * suspended until the answer comes into cancel/ or the wait is over. */
struct cancel_wait {
        struct hub_wait w;              /* w.name: the request's */
        struct cancelreq_ticket ticket; /* the request, as its answer is known */
        json_t *jid;                    /* the call's id */
        struct a2a_kept kept;           /* the task, from the index */
        char id[NAME_MAX + 1];          /* the task's */
        char target[65];                /* NAME of /a2a/NAME */
        int fd;                         /* cancel/ */
        int own_fd;                     /* fd when we opened it, else -1 */
        enum cancelreq_answer ans;      /* CA_NONE: not yet */
};

/* The one place the daemon's answer is looked for (taken when there). */
static void cancel_answer_look(struct cancel_wait *cw)
{
        if (cw->ans == CA_NONE && cancelreq_await(cw->fd, &cw->ticket, 0, &cw->ans) < 0)
                cw->ans = CA_NONE;
}

static bool cancel_look(struct hub *h, struct hub_wait *w)
{
        struct cancel_wait *cw = (struct cancel_wait *)w;

        (void)h;
        cancel_answer_look(cw);
        return cw->ans != CA_NONE;
}

static int cancel_finish(struct hub *h, struct hub_wait *w, struct hub_answer *a)
{
        struct cancel_wait *cw = (struct cancel_wait *)w;
        struct a2a_call call = { .h = h, .agent = w->agent, .name = cw->target, .id = cw->jid,
                                 .a = a };
        struct a2a_call *c = &call;
        _cleanup_json_ json_t *task = NULL;
        const char *id = cw->id;
        int r;

        cancel_answer_look(cw);
        hub_log("a2a: %s: cancel by %s: %s", id, c->agent,
                cw->ans == CA_NONE ? "no answer yet" : cancelreq_answer_name(cw->ans));
        switch (cw->ans) {
        case CA_CANCELED:
                break;
        case CA_NOT_CANCELABLE:
                return a2a_call_error(c, A2A_TASK_NOT_CANCELABLE,
                                      "the task cannot be canceled: its agent took it first, "
                                      "or it has ended");
        case CA_UNKNOWN:
                return a2a_call_error(c, A2A_TASK_NOT_FOUND, "the spool holds no such task");
        case CA_REFUSED:
                return a2a_call_error(c, RPC_INTERNAL, "handoffd refused the hub's cancel request "
                                      "(see its log: the keys of the two differ?)");
        case CA_BUSY:
                return a2a_call_error(c, RPC_INTERNAL, "too many cancel requests wait at "
                                      "handoffd: try again later");
        default:
                /* The daemon has not answered within the wait (stopped,
                 * busy): the request stands and is acted on when it comes;
                 * the task as it is now says so. */
                r = a2a_task_lookup(h, c->agent, &cw->kept, &task);
                if (r < 0)
                        return a2a_call_internal(c, "CancelTask", r);
                json_object_set_new(json_object_get(task, "metadata"), "cancel",
                                    json_string("requested"));
                return a2a_answer_result(c->a, c->id, TAKE_PTR(task));
        }
        /* Canceled is decided (the daemon took the bootstrap back), the
         * archive may follow a moment later. */
        task = a2a_task_new(id, cw->kept.ctx, "TASK_STATE_CANCELED", "canceled", NULL, NULL, NULL);
        return a2a_answer_result(c->a, c->id, TAKE_PTR(task));
}

static void cancel_free(struct hub_wait *w)
{
        struct cancel_wait *cw = (struct cancel_wait *)w;

        json_decref(cw->jid);
        closep(&cw->own_fd);
        free(cw);
}

static const struct hub_wait_ops cancel_ops = {
        .look = cancel_look, .finish = cancel_finish, .free = cancel_free,
};

int a2a_cancel_task(struct a2a_call *c)
{
        _cleanup_json_ json_t *task = NULL;
        _cleanup_close_ int own_fd = -1;
        struct a2a_kept kept;
        const char *id = a2a_str(c->params, "id"), *st;
        struct cancel_wait *cw;
        char msg[160];
        int fd, r;

        if (!id)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.id is required");
        /* only the sender's token knows its tasks, as GetTask */
        r = task_get(c, id, &kept);
        if (r == -ENOENT)
                return a2a_call_error(c, A2A_TASK_NOT_FOUND, "no such task for this token");
        if (r == 0)
                r = a2a_task_lookup(c->h, c->agent, &kept, &task);
        if (r == -ENOENT)
                return a2a_call_error(c, A2A_TASK_NOT_FOUND, "the spool holds no such task");
        if (r < 0)
                return a2a_call_internal(c, "CancelTask", r);
        /* Not yet taken by its agent: waiting in handoff/ (pending) or
         * for its consumer (claimed), or relayed to another host and not
         * ended there (SUBMITTED: the daemon sends the request on, and
         * that host's receipt answers).  Anything else has ended, or
         * waits in outbox/. */
        st = a2a_str(json_object_get(task, "metadata"), "handoffStatus") ?: "";
        bool relayed = !strcmp(st, "relayed") &&
                       !strcmp(a2a_str(json_object_get(task, "status"), "state") ?: "",
                               "TASK_STATE_SUBMITTED");
        if (!config_agent(c->h->cfg, c->name) && !relayed)
                st = "for another host";        /* waits in outbox/, or ended there */
        if (strcmp(st, "pending") && strcmp(st, "claimed") && !relayed) {
                snprintf(msg, sizeof(msg), "the task cannot be canceled: its handoff is %s", st);
                return a2a_call_error(c, A2A_TASK_NOT_CANCELABLE, msg);
        }
        fd = c->h->cancel_fd;
        if (fd < 0) {
                /* made by a daemon started after us, maybe */
                char path[PATH_MAX];
                if (xsnprintf(path, sizeof(path), "%s/%s", c->h->cfg->spool_dir,
                              CANCELREQ_DIR) >= 0)
                        own_fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if ((fd = own_fd) < 0)
                        return a2a_call_error(c, A2A_UNSUPPORTED, "the spool has no cancel/: its "
                                              "handoffd cannot cancel");
        }
        cw = calloc(1, sizeof(*cw));
        if (!cw)
                return -ENOMEM;
        r = cancel_send(c, fd, id, &cw->ticket);
        if (r == 0)
                snprintf(cw->w.name, sizeof(cw->w.name), "%s", cw->ticket.name);
        if (r < 0) {
                free(cw);
                if (r == -EPERM)
                        return a2a_call_error(c, A2A_UNSUPPORTED, "the hub holds no key that "
                                              "signs for this token's agent here");
                return a2a_call_internal(c, "CancelTask: the request into cancel/", r);
        }
        /* The answer is awaited on no thread: the HTTP side suspends the
         * connection and cancel_finish() answers. */
        cw->w.ops = &cancel_ops;
        snprintf(cw->w.agent, sizeof(cw->w.agent), "%s", c->agent);
        cw->w.dirs = HUB_WAIT_DIR(HUB_WAIT_ON_CANCEL);
        cw->w.deadline = mono_usec() + c->h->wait_ms * 1000;
        /* a cancel/ the watcher does not watch: looked at on a tick */
        if (fd != c->h->cancel_fd)
                cw->w.tick = HUB_WAIT_TICK_USEC;
        cw->jid = json_incref((json_t *)c->id);
        cw->kept = kept;
        snprintf(cw->id, sizeof(cw->id), "%s", id);
        snprintf(cw->target, sizeof(cw->target), "%s", c->name);
        cw->fd = fd;
        cw->own_fd = TAKE_FD(own_fd);
        c->a->wait = &cw->w;
        return 0;
}

/* When the task's status last changed, for statusTimestampAfter: its
 * status timestamp, else (not found in the spool yet) when it was sent. */
static int64_t task_time(const json_t *task, const struct a2a_kept *k)
{
        int64_t t;

        if (hd_time_parse(a2a_str(json_object_get(task, "status"), "timestamp"), &t) == 0)
                return t;
        return (int64_t)k->mtime.tv_sec * 1000000 + k->mtime.tv_nsec / 1000;
}

int a2a_list_tasks(struct a2a_call *c)
{
        _cleanup_free_ struct a2a_kept *v = NULL;
        _cleanup_json_ json_t *tasks = NULL;
        const json_t *ia = json_object_get(c->params, "includeArtifacts");
        const json_t *after_j = json_object_get(c->params, "statusTimestampAfter");
        const char *ctx = a2a_str(c->params, "contextId"), *status = a2a_str(c->params, "status");
        const char *tok = a2a_str(c->params, "pageToken");
        int64_t page = A2A_PAGE_DEFAULT, skip = 0, matched = 0, after = INT64_MIN, history;
        bool filtered, with_artifacts = json_is_true(ia);
        size_t n = 0, i;
        char next[32] = "";
        int r;

        if (int32_param(c->params, "pageSize", 1, A2A_PAGE_MAX, &page) < 0)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.pageSize is 1 to 100");
        if (tok && *tok && parse_int64(tok, 0, INT32_MAX, &skip) < 0)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.pageToken is not one of ours");
        if ((json_object_get(c->params, "contextId") && !ctx) ||
            (json_object_get(c->params, "status") && !status))
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.contextId and status are strings");
        /* unset: none, since a page would read each task's documents */
        if (!history_length_ok(c->params, 0, &history))
                return a2a_call_error(c, RPC_INVALID_PARAMS,
                                      "params.historyLength is an integer of 0 or more");
        if (ia && !json_is_boolean(ia))
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.includeArtifacts is true or false");
        if (after_j && (!json_is_string(after_j) ||
                        hd_time_parse(json_string_value(after_j), &after) < 0))
                return a2a_call_error(c, RPC_INVALID_PARAMS,
                                      "params.statusTimestampAfter is not a timestamp "
                                      "(RFC 3339 with its offset, as 2026-01-02T03:04:05Z)");
        /* The default of the enum, and what the SDK's generated code
         * sends for a status left undefined in plain JS: no filter. */
        if (status && (!strcmp(status, "TASK_STATE_UNSPECIFIED") ||
                       !strcmp(status, "UNRECOGNIZED")))
                status = NULL;
        if (status && !a2a_task_state_known(status))
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.status is not a TaskState");
        filtered = status || after_j;
        /* the index, newest first: no document is read */
        r = a2a_kept_list(c->agent, c->name, ctx, &v, &n);
        if (r < 0)
                return a2a_call_internal(c, "ListTasks", r);
        tasks = json_array();
        if (!tasks)
                return -ENOMEM;
        for (i = 0; i < n; i++) {
                _cleanup_json_ json_t *task = NULL;
                bool on_page = matched >= skip && (int64_t)json_array_size(tasks) < page;

                /* the spool is asked only for what the page shows, or
                 * for every one when the filter is what it says */
                if ((on_page || filtered) && a2a_task_lookup(c->h, c->agent, &v[i], &task) < 0)
                        continue;
                if (status && strcmp(a2a_str(json_object_get(task, "status"), "state") ?: "", status))
                        continue;
                if (after_j && task_time(task, &v[i]) < after)
                        continue;
                /* A2A 1.0 section 3.1.4: without includeArtifacts: true,
                 * no artifacts member at all */
                if (on_page && !with_artifacts)
                        json_object_del(task, "artifacts");
                else if (on_page && !json_object_get(task, "artifacts"))
                        json_object_set_new(task, "artifacts", json_array());
                if (on_page && history > 0) {
                        json_t *full = NULL;
                        if (a2a_task_lookup_full(c->h, c->agent, &v[i], history, &full, NULL) == 0) {
                                if (!with_artifacts)
                                        json_object_del(full, "artifacts");
                                else if (!json_object_get(full, "artifacts"))
                                        json_object_set_new(full, "artifacts", json_array());
                                json_decref(task);
                                task = full;
                        }
                }
                if (on_page)
                        json_array_append(tasks, task);
                matched++;
        }
        if (skip + (int64_t)json_array_size(tasks) < matched)
                snprintf(next, sizeof(next), "%lld", (long long)(skip + page));
        return a2a_answer_result(c->a, c->id,
                                 json_pack("{s:O, s:s, s:I, s:I}", "tasks", tasks, "nextPageToken",
                                       next, "pageSize", (json_int_t)page, "totalSize",
                                       (json_int_t)matched));
}
