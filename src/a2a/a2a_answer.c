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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

void a2a_result_free(struct a2a_result *r)
{
        free(r->result);
        r->result = NULL;
}

/* The members of a part kept: A2A 1.0's text, data, raw, url and their
 * media type and file name; 0.3's kind and file. */
static json_t *part_copy(const json_t *p)
{
        static const char *const keep[] = { "text", "data", "raw", "url", "mediaType",
                                            "filename", "kind", "file" };
        json_t *c = json_object();

        for (size_t i = 0; c && i < sizeof(keep) / sizeof(keep[0]); i++) {
                json_t *v = json_object_get(p, keep[i]);
                if (v && json_object_set(c, keep[i], v) < 0) {
                        json_decref(c);
                        return NULL;
                }
        }
        return c;
}

static size_t dumped_len(const json_t *j)
{
        char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
        size_t n = s ? strlen(s) : SIZE_MAX / 2;

        free(s);
        return n;
}

/* Every artifact whole, in order, while the whole fits A2A_RESULT_MAX;
 * one that does not is left out whole and counted. */
static char *artifacts_result(const json_t *arts)
{
        json_t *kept = json_array(), *text = NULL, *res = NULL;
        char *joined = NULL, *out = NULL;
        size_t total = 64, jlen = 0, i, omitted = 0;
        json_t *a;

        if (!kept)
                return NULL;
        json_array_foreach(arts, i, a) {
                json_t *parts = json_array(), *p;
                char *t = NULL;
                size_t tl = 0, k;

                if (!parts || i >= A2A_ARTIFACTS_MAX || !json_is_object(a)) {
                        json_decref(parts);
                        omitted++;
                        continue;
                }
                json_array_foreach(json_object_get(a, "parts"), k, p) {
                        const char *pt = json_string_value(json_object_get(p, "text"));
                        json_array_append_new(parts, part_copy(p));
                        if (pt) {
                                size_t n = strlen(pt);
                                char *nt = realloc(t, tl + n + 2);
                                if (!nt)
                                        break;
                                t = nt;
                                if (tl)
                                        t[tl++] = '\n';
                                memcpy(t + tl, pt, n + 1);
                                tl += n;
                        }
                }
                json_t *c = json_pack("{s:O?, s:O?, s:O?, s:o}", "artifactId",
                                      json_object_get(a, "artifactId"), "name",
                                      json_object_get(a, "name"), "description",
                                      json_object_get(a, "description"), "parts", parts);
                json_t *ts = t ? json_stringn(t, tl) : NULL;
                size_t l = c ? dumped_len(c) + 1 + (ts ? dumped_len(ts) + 1 : 0) : SIZE_MAX / 2;
                if (!c || total + l > A2A_RESULT_MAX) {
                        omitted++;
                } else {
                        total += l;
                        json_array_append(kept, c);
                        if (ts) {
                                char *nj = realloc(joined, jlen + tl + 2);
                                if (nj) {
                                        joined = nj;
                                        if (jlen)
                                                joined[jlen++] = '\n';
                                        memcpy(joined + jlen, t, tl);
                                        jlen += tl;
                                }
                        }
                }
                json_decref(c);
                json_decref(ts);
                free(t);
        }
        if (json_array_size(kept) == 0 && !omitted)
                goto out;
        text = joined ? json_stringn(joined, jlen) : NULL;
        res = json_pack("{s:O?, s:{s:O, s:I}}", "text", text, "data", "artifacts", kept,
                        "omitted", (json_int_t)omitted);
        out = res ? json_dumps(res, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        if (out && strlen(out) > A2A_RESULT_MAX) {
                free(out);      /* an estimate off: nothing rather than too much */
                out = NULL;
        }
out:
        json_decref(text);
        json_decref(res);
        json_decref(kept);
        free(joined);
        return out;
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
        if (json_array_size(json_object_get(task, "artifacts")))
                out->result = artifacts_result(json_object_get(task, "artifacts"));
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
        if (http == 401 || http == 403) {
                /* a token slip or a rotation not done yet: not the
                 * message's fault, never final */
                say(out, A2A_TOKEN, "token refused: HTTP %ld", http);
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
        if (http >= 300 && http < 400) {
                /* a redirect, not followed (the caller says where) */
                say(out, A2A_RETRY, "HTTP %ld redirect: not followed", http);
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
        if (op == A2A_OP_GET && ctx && out->verdict == A2A_OK && strcmp(out->task, ctx)) {
                /* another task than the one asked for: nothing of it is ours */
                char t[A2A_TASK_ID_MAX + 1];
                memcpy(t, out->task, sizeof(t));
                a2a_result_free(out);
                memset(out, 0, sizeof(*out));
                out->state = "unknown";
                say(out, A2A_RETRY, "GetTask of %.100s answered with task %.100s: not ours", ctx, t);
        }
out:
        json_decref(doc);
}

int a2a_stream_event(const char *data, size_t len, const char *task, const char **ret_state)
{
        json_t *doc, *res, *t, *st = NULL;
        json_error_t je;
        const char *id = NULL;
        int r = -1;

        *ret_state = NULL;
        if (len > A2A_ANSWER_MAX)
                return -1;
        doc = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
        res = json_object_get(doc, "result");
        if (!json_is_object(res))
                goto out;       /* an error, or not JSON-RPC */
        if (json_is_object(t = json_object_get(res, "task"))) {
                id = json_string_value(json_object_get(t, "id"));
                st = json_object_get(json_object_get(t, "status"), "state");
        } else if (json_is_object(t = json_object_get(res, "statusUpdate"))) {
                id = json_string_value(json_object_get(t, "taskId"));
                st = json_object_get(json_object_get(t, "status"), "state");
        } else if (json_is_object(t = json_object_get(res, "artifactUpdate"))) {
                id = json_string_value(json_object_get(t, "taskId"));
        } else {
                goto out;
        }
        if (!id || strcmp(id, task))
                goto out;       /* not the task asked for */
        r = 0;
        for (size_t k = 0; json_is_string(st) && k < sizeof(states) / sizeof(states[0]); k++)
                if (!strcmp(json_string_value(st), states[k].wire) ||
                    !strcmp(json_string_value(st), states[k].wire03))
                        *ret_state = states[k].name;
out:
        json_decref(doc);
        return r;
}

bool a2a_card_url(const char *url)
{
        static const char *const ends[] = { "/.well-known/agent-card.json",
                                            "/.well-known/agent.json" };
        size_t n = strcspn(url, "?#");

        for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
                size_t e = strlen(ends[i]);
                if (n >= e && !strncmp(url + n - e, ends[i], e))
                        return true;
        }
        return false;
}

/* scheme://host[:port] of url, lower-cased, the default port dropped. */
static void origin_of(const char *url, char *buf, size_t size)
{
        const char *h = strstr(url, "://");
        size_t n = h ? (size_t)(h + 3 - url) + strcspn(h + 3, "/?#") : 0;

        if (n >= size)
                n = size - 1;
        for (size_t i = 0; i < n; i++)
                buf[i] = (char)(url[i] >= 'A' && url[i] <= 'Z' ? url[i] + 32 : url[i]);
        buf[n] = '\0';
        size_t l = strlen(buf);
        if (!strncmp(buf, "https://", 8) && l > 4 && !strcmp(buf + l - 4, ":443"))
                buf[l - 4] = '\0';
        else if (!strncmp(buf, "http://", 7) && l > 3 && !strcmp(buf + l - 3, ":80"))
                buf[l - 3] = '\0';
}

static const char *card_jsonrpc(const json_t *card)
{
        size_t i;
        json_t *f;

        json_array_foreach(json_object_get(card, "supportedInterfaces"), i, f) {
                const char *b = json_string_value(json_object_get(f, "protocolBinding"));
                const char *u = json_string_value(json_object_get(f, "url"));
                if (b && u && !strcasecmp(b, "JSONRPC"))
                        return u;
        }
        /* 0.3: url in preferredTransport (JSONRPC when absent), others
         * in additionalInterfaces {url, transport} */
        const char *pt = json_string_value(json_object_get(card, "preferredTransport"));
        const char *u = json_string_value(json_object_get(card, "url"));
        if (u && (!pt || !strcasecmp(pt, "JSONRPC")))
                return u;
        json_array_foreach(json_object_get(card, "additionalInterfaces"), i, f) {
                const char *t = json_string_value(json_object_get(f, "transport"));
                const char *au = json_string_value(json_object_get(f, "url"));
                if (t && au && !strcasecmp(t, "JSONRPC"))
                        return au;
        }
        return NULL;
}

int a2a_card_interface(const char *body, size_t len, const char *card_url, bool cross_origin,
                       char *buf, size_t size, bool *ret_streaming, char *why, size_t why_size)
{
        char o1[512], o2[512], t[A2A_TEXT_MAX + 1];
        json_error_t je;
        json_t *card = NULL;
        const char *u;
        int r = -1;

        if (!body || len > A2A_CARD_MAX) {
                snprintf(why, why_size, "the agent card is over %d bytes", A2A_CARD_MAX);
                return -1;
        }
        card = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(card) || !json_is_string(json_object_get(card, "name"))) {
                snprintf(why, why_size, "%s is not an agent card (JSON with a name)", "the answer");
                goto out;
        }
        u = card_jsonrpc(card);
        if (!u) {
                snprintf(why, why_size, "the agent card has no JSON-RPC interface");
                goto out;
        }
        origin_of(u, o1, sizeof(o1));
        origin_of(card_url, o2, sizeof(o2));
        a2a_clean(t, sizeof(t), u, 200);
        if (!cross_origin && strcmp(o1, o2)) {
                snprintf(why, why_size, "the card's JSON-RPC interface %s is on another origin than "
                         "the card (a2a_card_cross_origin = yes allows it)", t);
                goto out;
        }
        if (strlen(u) >= size) {
                snprintf(why, why_size, "the card's interface URL is too long");
                goto out;
        }
        memcpy(buf, u, strlen(u) + 1);
        *ret_streaming = json_is_true(json_object_get(json_object_get(card, "capabilities"),
                                                      "streaming"));
        r = 0;
out:
        json_decref(card);
        return r;
}
