/* The A2A server's answers, as handoff-a2a reads them (see a2a_answer.h).
 * A2A 1.0 JSON-RPC: {"result": {"task": TASK} | {"message": MSG}} for
 * SendMessage, {"result": TASK} for GetTask, {"result": {"tasks": [TASK...]}}
 * for ListTasks, {"error": {code, message}};
 * TASK = {"id", "status": {"state": "TASK_STATE_...", "message"?},
 * "artifacts"?: [{"parts": [{"text"}...]}]}.  0.3's lower-case states
 * are read too.  Everything bounded: the body (A2A_ANSWER_MAX, checked by
 * the caller), the JSON's depth (jansson's), the ids and texts kept. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "a2a_answer.h"

static const struct {
        const char *wire, *wire03, *name;
} states[] = {
        { "TASK_STATE_COMPLETED", "completed", "completed" },
        { "TASK_STATE_FAILED", "failed", "failed" },
        { "TASK_STATE_CANCELED", "canceled", "canceled" },
        { "TASK_STATE_REJECTED", "rejected", "rejected" },
        { "TASK_STATE_INPUT_REQUIRED", "input-required", "input_required" },
        { "TASK_STATE_AUTH_REQUIRED", "auth-required", "auth_required" },
        { "TASK_STATE_SUBMITTED", "submitted", "submitted" },
        { "TASK_STATE_WORKING", "working", "working" },
};
#define N_FINAL 6

bool a2a_state_final(const char *state)
{
        for (size_t i = 0; i < N_FINAL; i++)
                if (!strcmp(state, states[i].name))
                        return true;
        return false;
}

void a2a_clean(char *buf, size_t size, const char *s, size_t n)
{
        size_t o = 0;

        if (size == 0)
                return;
        for (size_t i = 0; s && i < n && s[i] && o + 1 < size; i++) {
                unsigned char c = (unsigned char)s[i];
                buf[o++] = c >= 0x20 && c < 0x7f ? (char)c : c == '\t' || c == '\n' ? ' ' : '?';
        }
        buf[o] = '\0';
}

static void say(struct a2a_result *out, enum a2a_verdict v, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void say(struct a2a_result *out, enum a2a_verdict v, const char *fmt, ...)
{
        char t[A2A_TEXT_MAX + 64];
        va_list ap;

        out->verdict = v;
        va_start(ap, fmt);
        vsnprintf(t, sizeof(t), fmt, ap);
        va_end(ap);
        a2a_clean(out->text, sizeof(out->text), t, sizeof(t));
}

/* The first text of parts (a message's or an artifact's). */
static const char *parts_text(const json_t *parts)
{
        size_t i;
        json_t *p;

        json_array_foreach(parts, i, p) {
                const char *t = json_string_value(json_object_get(p, "text"));
                if (t)
                        return t;
                /* 0.3: {"kind": "text", "text": ...} is the same key */
        }
        return NULL;
}

static void read_task(const json_t *task, struct a2a_result *out)
{
        const char *id = json_string_value(json_object_get(task, "id"));
        const json_t *status = json_object_get(task, "status");
        const char *st = json_string_value(json_object_get(status, "state"));
        const char *text = NULL;
        size_t i;
        json_t *a;

        if (!json_is_object(task) || !id || !*id || strlen(id) > A2A_TASK_ID_MAX) {
                say(out, A2A_RETRY, "the answer holds no usable task id");
                return;
        }
        for (const char *p = id; *p; p++)
                if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
                        say(out, A2A_RETRY, "the task id is not printable ASCII");
                        return;
                }
        memcpy(out->task, id, strlen(id) + 1);
        out->state = "unknown";
        for (size_t k = 0; st && k < sizeof(states) / sizeof(states[0]); k++)
                if (!strcmp(st, states[k].wire) || !strcmp(st, states[k].wire03))
                        out->state = states[k].name;
        /* The result: an artifact's text, else what the status says. */
        json_array_foreach(json_object_get(task, "artifacts"), i, a)
                if ((text = parts_text(json_object_get(a, "parts"))))
                        break;
        if (!text)
                text = parts_text(json_object_get(json_object_get(status, "message"), "parts"));
        out->verdict = A2A_OK;
        a2a_clean(out->text, sizeof(out->text), text, A2A_TEXT_MAX);
}

/* The first task of ours (contextId ctx) a ListTasks result names. */
static void read_list(const json_t *res, const char *ctx, struct a2a_result *out)
{
        size_t i;
        json_t *t;

        if (!json_is_array(json_object_get(res, "tasks"))) {
                say(out, A2A_RETRY, "a ListTasks result without tasks");
                return;
        }
        json_array_foreach(json_object_get(res, "tasks"), i, t) {
                const char *c = json_string_value(json_object_get(t, "contextId"));
                if (!c || !ctx || strcmp(c, ctx))
                        continue;
                read_task(t, out);
                if (out->verdict == A2A_OK)
                        return;
        }
        memset(out, 0, sizeof(*out));
        out->state = "unknown";
        out->verdict = A2A_OK;  /* none: the message never made a task */
}

void a2a_answer_parse(enum a2a_op op, long http, const char *curl_err, const char *ctx,
                      const char *body, size_t len, struct a2a_result *out)
{
        json_t *doc = NULL, *res, *err;
        json_error_t je;

        memset(out, 0, sizeof(*out));
        out->state = "unknown";
        if (http == 0) {
                say(out, A2A_RETRY, "no answer: %s", curl_err ? curl_err : "?");
                return;
        }
        if (len > A2A_ANSWER_MAX) {
                say(out, A2A_RETRY, "an answer over %d bytes", A2A_ANSWER_MAX);
                return;
        }
        if (body && len)
                doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
        err = json_object_get(doc, "error");
        if (http >= 500 || http == 408 || http == 429 || (http >= 200 && http < 300 && !doc)) {
                if (http >= 200 && http < 300)
                        say(out, A2A_RETRY, "HTTP %ld with a body that is not JSON", http);
                else
                        say(out, A2A_RETRY, "HTTP %ld", http);
                goto out;
        }
        if (json_is_object(err)) {
                const char *m = json_string_value(json_object_get(err, "message"));
                json_int_t code = json_integer_value(json_object_get(err, "code"));
                /* -32601 method not found, -32004 unsupported operation */
                out->unsupported = op == A2A_OP_LIST && (code == -32601 || code == -32004);
                /* -32603 internal error: the server's trouble, not the message's */
                say(out, code == -32603 ? A2A_RETRY : A2A_FINAL, "A2A error %lld: %.250s",
                    (long long)code, m ? m : "(no message)");
                goto out;
        }
        if (http < 200 || http >= 300) {
                out->unsupported = op == A2A_OP_LIST && (http == 404 || http == 405 || http == 501);
                say(out, A2A_FINAL, "HTTP %ld", http);
                goto out;
        }
        res = json_object_get(doc, "result");
        if (op == A2A_OP_LIST) {
                read_list(res, ctx, out);
                goto out;
        }
        if (op == A2A_OP_SEND && json_is_object(json_object_get(res, "message")) &&
            !json_object_get(res, "task")) {
                /* A direct answer, no task: the exchange ended there. */
                out->verdict = A2A_OK;
                out->state = "completed";
                a2a_clean(out->text, sizeof(out->text),
                          parts_text(json_object_get(json_object_get(res, "message"), "parts")),
                          A2A_TEXT_MAX);
                goto out;
        }
        if (json_is_object(json_object_get(res, "task")))
                res = json_object_get(res, "task");
        if (!json_is_object(res)) {
                say(out, A2A_RETRY, "HTTP %ld without a result or an error", http);
                goto out;
        }
        read_task(res, out);
out:
        json_decref(doc);
}
