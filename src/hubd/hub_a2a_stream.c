/* A2A's streams: SendStreamingMessage and SubscribeToTask answered with
 * Server-Sent Events (A2A 1.0 sections 3.1.2, 3.1.6, 9.4.2): the Task
 * first, then each statusUpdate and artifactUpdate of its history
 * (hub_a2a_task.c) as the spool's moves make it, the stream ended at a
 * terminal or interrupted state.  Each event's SSE id and its metadata's
 * generation is its place in the task's history, so a client that comes
 * back with Last-Event-ID (or params.metadata.generation) gets the Task
 * as it was at that event, then every event after it, in order.
 *
 * A stream holds no thread: the watcher (hub_wait.c) has it while it is
 * open, the HTTP side (hub_http.c) parks its connection when there is
 * nothing to send and the watcher resumes it at an event naming the task
 * or at the keepalive, when a comment goes out (which also finds a
 * client that has gone). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub.h"
#include "hub_a2a.h"
#include "util.h"

#define STREAM_KEEPALIVE_USEC (15 * 1000000LL)

struct a2a_stream {
        struct hub_wait w;              /* w.name: the id of the task's latest turn */
        json_t *jid;                    /* the call's id, in each event */
        struct a2a_kept kept;           /* the task, from the index */
        json_t *once;                   /* a task that ended at the send: it alone */
        int64_t from;                   /* the client's last event; 0: none */
        size_t sent;                    /* the generation sent last */
        bool task_sent, ended;
        char *buf;                      /* made, not yet taken by libmicrohttpd */
        size_t len, off;
};

int a2a_stream_from(struct a2a_call *c, int64_t *ret)
{
        const json_t *g = json_object_get(json_object_get(c->params, "metadata"), A2A_GENERATION);
        int64_t v = 0;

        /* the header an EventSource sends back, else the extension's */
        if (c->last_event_id && *c->last_event_id) {
                if (parse_int64(c->last_event_id, 0, INT32_MAX, &v) < 0)
                        return -EINVAL;
        } else if (json_is_integer(g)) {
                v = json_integer_value(g);
                if (v < 0 || v > INT32_MAX)
                        return -EINVAL;
        } else if (g && (!json_is_string(g) ||
                         parse_int64(json_string_value(g), 0, INT32_MAX, &v) < 0)) {
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

int a2a_stream_params_ok(struct a2a_call *c)
{
        int64_t from;

        if (a2a_stream_from(c, &from) < 0) {
                a2a_call_error(c, RPC_INVALID_PARAMS, "Last-Event-ID and params.metadata."
                               A2A_GENERATION " are a generation: an integer of 0 or more");
                return 0;
        }
        return 1;
}

/* One event into s->buf: "id: GEN", the JSON-RPC answer whose result is
 * ev (taken).  0 or -ENOMEM. */
static int stream_put(struct a2a_stream *s, size_t gen, json_t *ev)
{
        _cleanup_json_ json_t *o = NULL;
        _cleanup_free_ char *data = NULL, *all = NULL;
        char *nb;
        int n;

        if (!ev)
                return -ENOMEM;
        o = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", s->jid, "result", ev);
        data = o ? json_dumps(o, JSON_COMPACT) : NULL;
        /* json_dumps escapes every newline: the data is one line */
        if (!data || (n = asprintf(&all, "id: %zu\ndata: %s\n\n", gen, data)) < 0)
                return -ENOMEM;
        nb = realloc(s->buf, s->len + (size_t)n);
        if (!nb)
                return -ENOMEM;
        memcpy(nb + s->len, all, (size_t)n);
        s->buf = nb;
        s->len += (size_t)n;
        return 0;
}

/* What the task's history has that the client has not: into s->buf. */
static int stream_fill(struct hub *h, struct a2a_stream *s)
{
        _cleanup_json_ json_t *task = NULL, *hist = NULL;
        size_t n;
        int r;

        if (s->once) {
                task = json_incref(s->once);
                hist = a2a_task_history(task);
        } else if ((r = a2a_task_lookup_full(h, s->w.agent, &s->kept, 0, &task, &hist)) < 0) {
                return r;
        }
        if (!hist)
                return -ENOMEM;
        n = json_array_size(hist);
        if (!s->task_sent) {
                /* A2A 1.0 section 3.1.6: a Task first; for a client that
                 * comes back, the Task it had, then what it missed */
                size_t g = s->from > 0 && (size_t)s->from < n ? (size_t)s->from : n;
                r = stream_put(s, g, json_pack("{s:o}", "task", a2a_task_at(task, hist, g)));
                if (r < 0)
                        return r;
                s->sent = g;
                s->task_sent = true;
        }
        for (; s->sent < n; s->sent++) {
                r = stream_put(s, s->sent + 1, json_incref(json_array_get(hist, s->sent)));
                if (r < 0)
                        return r;
        }
        if (s->once ||
            a2a_state_final(a2a_str(json_object_get(task, "status"), "state") ?: ""))
                s->ended = true;
        return 0;
}

static long stream_read(struct hub *h, struct hub_wait *w, char *buf, size_t max)
{
        struct a2a_stream *s = (struct a2a_stream *)w;
        int64_t now = mono_usec();
        size_t k;

        if (s->off == s->len) {
                free(s->buf);
                s->buf = NULL;
                s->len = s->off = 0;
                if (s->ended)
                        return HUB_STREAM_END;
                if (stream_fill(h, s) < 0) {
                        /* gone from the spool, or out of memory: what
                         * was sent stands, the client may come back */
                        s->ended = true;
                        if (!s->len)
                                return HUB_STREAM_END;
                }
                if (!s->len && w->deadline && now >= w->deadline) {
                        /* an SSE comment: nothing for the client, a
                         * write that fails for a client that went */
                        s->buf = strdup(": keepalive\n\n");
                        s->len = s->buf ? strlen(s->buf) : 0;
                        w->deadline = now + STREAM_KEEPALIVE_USEC;
                }
                if (!s->len) {
                        w->deadline = now + STREAM_KEEPALIVE_USEC;
                        return HUB_STREAM_PARK;
                }
        }
        k = s->len - s->off < max ? s->len - s->off : max;
        memcpy(buf, s->buf + s->off, k);
        s->off += k;
        return (long)k;
}

/* Parked: is there more than the client has? */
static bool stream_look(struct hub *h, struct hub_wait *w)
{
        struct a2a_stream *s = (struct a2a_stream *)w;
        _cleanup_json_ json_t *task = NULL;
        int64_t gen;

        if (s->once || a2a_task_lookup(h, w->agent, &s->kept, &task) < 0)
                return true;
        gen = json_integer_value(json_object_get(json_object_get(task, "metadata"),
                                                 A2A_GENERATION));
        return gen < 0 || (size_t)gen > s->sent;
}

/* No room for one more stream: an error, the send (if any) standing. */
static int stream_finish(struct hub *h, struct hub_wait *w, struct hub_answer *a)
{
        struct a2a_stream *s = (struct a2a_stream *)w;
        char msg[A2A_ID_MAX + 200];

        (void)h;
        snprintf(msg, sizeof(msg), "too many open streams and waits (this token's "
                 "[hub] max_waits_per_token, or max_connections); task %s stands: "
                 "SubscribeToTask or GetTask later", s->kept.id[0] ? s->kept.id : "(none)");
        hub_log("a2a: a stream of %s refused: no room", w->agent);
        return hub_a2a_error(a, 200, s->jid, RPC_INTERNAL, msg);
}

static void stream_free(struct hub_wait *w)
{
        struct a2a_stream *s = (struct a2a_stream *)w;

        json_decref(s->jid);
        json_decref(s->once);
        free(s->buf);
        free(s);
}

static const struct hub_wait_ops stream_ops = {
        .look = stream_look, .finish = stream_finish, .free = stream_free,
        .stream = stream_read,
};

static struct a2a_stream *stream_new(struct a2a_call *c)
{
        struct a2a_stream *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        s->w.ops = &stream_ops;
        snprintf(s->w.agent, sizeof(s->w.agent), "%s", c->agent);
        s->w.name_in = true;
        s->w.dirs = HUB_WAIT_DIRS_ITEM;
        s->jid = json_incref((json_t *)c->id);
        return s;
}

int a2a_stream_open(struct a2a_call *c, const struct a2a_kept *kept, int64_t from)
{
        struct a2a_stream *s = stream_new(c);

        if (!s)
                return -ENOMEM;
        /* the events that concern it name its latest turn */
        snprintf(s->w.name, sizeof(s->w.name), "%s", kept->last);
        s->kept = *kept;
        s->from = from;
        c->a->status = 200;
        c->a->wait = &s->w;
        return 0;
}

int a2a_stream_task_once(struct a2a_call *c, json_t *task)
{
        struct a2a_stream *s = stream_new(c);

        if (!s) {
                json_decref(task);
                return -ENOMEM;
        }
        snprintf(s->kept.id, sizeof(s->kept.id), "%s", a2a_str(task, "id") ?: "");
        s->once = task;
        c->a->status = 200;
        c->a->wait = &s->w;
        return 0;
}

int a2a_subscribe_to_task(struct a2a_call *c)
{
        _cleanup_json_ json_t *task = NULL;
        const char *id = a2a_str(c->params, "id"), *st;
        struct a2a_kept kept;
        int64_t from, gen;
        int r;

        if (!id)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.id is required");
        if (!a2a_stream_params_ok(c))
                return 0;
        (void)a2a_stream_from(c, &from);
        /* only the sender's token knows its tasks, at their target's endpoint */
        r = a2a_kept_task(c->agent, id, &kept);
        if (r == 0 && strcmp(kept.to, c->name))
                r = -ENOENT;
        if (r == 0)
                r = a2a_task_lookup(c->h, c->agent, &kept, &task);
        if (r == -ENOENT)
                return a2a_call_error(c, A2A_TASK_NOT_FOUND, "no such task for this token");
        if (r < 0)
                return a2a_call_internal(c, "SubscribeToTask", r);
        st = a2a_str(json_object_get(task, "status"), "state") ?: "";
        gen = json_integer_value(json_object_get(json_object_get(task, "metadata"),
                                                 A2A_GENERATION));
        /* A2A 1.0 section 3.1.6: not on a terminal task; but a client that
         * comes back for what it missed (the extension) gets it */
        if (a2a_state_terminal(st) && (from <= 0 || from >= gen)) {
                char msg[160];
                snprintf(msg, sizeof(msg), "the task has ended (%s): there is nothing to "
                         "subscribe to (GetTask has it)", st);
                return a2a_call_error(c, A2A_UNSUPPORTED, msg);
        }
        return a2a_stream_open(c, &kept, from);
}
