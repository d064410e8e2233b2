/* handoff-a2a: handoffd's A2A sender, a process of its own (handoffd(8),
 * "A2A remotes").  handoffd starts it and keeps the spool: this program
 * holds no descriptor of it and never sees the config.  It reads one JSON
 * request a line on stdin,
 *
 *   {"op": "send", "id", "url", "token_file", "ca_file"?, "doc", "check"?,
 *    "card_cross_origin"?, "card_key"?}
 *   {"op": "get",  "id", "url", "token_file", "ca_file"?, "task", ...}
 *
 * url: the JSON-RPC interface, or an agent card's URL (card_resolve();
 * card_key: the public key its signature must verify under, a2a_card.c).
 *
 * makes the A2A call (SendMessage, messageId and contextId = the
 * handoff_id, Idempotency-Key the same; GetTask, after a SubscribeToTask
 * stream where the card says streaming, see subscribe(); ListTasks first
 * for a send with "check", see call()), and writes one line on stdout as
 * the call ends, that handoffd checks field by field (up to CALLS_MAX
 * calls run at once, so the lines need not come in the order of the
 * requests):
 *
 *   ID \t send|get|stream|adopt|checked|resend \t ok|retry|final|token \t TASK|-
 *      \t STATE|- \t TEXT \t RESULT|-
 *
 * "stream": a get whose stream was held to its time bound, the task
 * still running.  RESULT: the task's artifacts as ASCII JSON on one line
 * (a2a_answer.h).
 *
 * So an outside server's bytes are parsed here (a2a_answer.c), in a
 * process that can lose nothing of the spool when they are hostile. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "a2a_answer.h"
#include "a2a_card.h"
#include "config.h"

#define LINE_MAX_BYTES (64 * 1024 * 1024)
#define CALLS_MAX 8     /* calls at once (threads), see main() */
#define CONNECT_TIMEOUT_S 10L
#define TIMEOUT_S 30L

struct body {
        char *buf;
        size_t len, max;        /* max 0: A2A_ANSWER_MAX */
        size_t header_len;
        bool over, headers_over;
};

/* An answer's header lines, all of them, are held to HEADERS_MAX: curl
 * keeps each one (curl_easy_header()), and a server may send them for
 * ever. */
#define HEADERS_MAX (64 * 1024)
static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
        struct body *b = ud;

        (void)p;
        b->header_len += size * n;
        if (b->header_len > HEADERS_MAX) {
                b->headers_over = true;
                return 0;
        }
        return size * n;
}

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
        struct body *b = ud;
        size_t add = size * n;

        if (b->len + add > (b->max ? b->max : A2A_ANSWER_MAX)) {
                b->over = true;
                return 0;       /* curl stops: CURLE_WRITE_ERROR */
        }
        char *nb = realloc(b->buf, b->len + add + 1);
        if (!nb)
                return 0;
        memcpy(nb + b->len, p, add);
        b->buf = nb;
        b->len += add;
        b->buf[b->len] = '\0';
        return add;
}

/* The message SendMessage carries for handoff doc.  A message a client
 * sent through the hub (payload a2a/1) goes as the client wrote it: its
 * role, parts and metadata.  Any other handoff goes as its reason and
 * summary in text parts, the whole document as a data part.  Either way
 * messageId and contextId are the handoff_id, and the metadata names the
 * handoff's agents.  NULL when out of memory. */
static json_t *send_message(const json_t *doc, const char *id)
{
        const char *type = json_string_value(json_object_get(doc, "payload_type"));
        const json_t *p = json_object_get(doc, "payload");
        const char *role = "ROLE_USER";
        json_t *parts, *meta;

        if (type && !strcmp(type, "a2a/1") && json_is_array(json_object_get(p, "parts"))) {
                parts = json_deep_copy(json_object_get(p, "parts"));
                meta = json_is_object(json_object_get(p, "metadata"))
                               ? json_deep_copy(json_object_get(p, "metadata"))
                               : json_object();
                role = json_string_value(json_object_get(p, "role")) ?: role;
        } else {
                const char *reason = json_string_value(json_object_get(doc, "reason"));
                const char *summary = json_string_value(json_object_get(doc, "summary"));
                parts = json_array();
                if (parts && reason)
                        json_array_append_new(parts, json_pack("{s:s}", "text", reason));
                if (parts && summary)
                        json_array_append_new(parts, json_pack("{s:s}", "text", summary));
                if (parts)
                        json_array_append_new(parts, json_pack("{s:O, s:s}", "data", doc,
                                                               "mediaType", "application/json"));
                meta = json_object();
        }
        if (meta) {
                json_object_set_new(meta, "handoffFrom", json_string(
                        json_string_value(json_object_get(doc, "from_agent")) ?: ""));
                json_object_set_new(meta, "handoffTo", json_string(
                        json_string_value(json_object_get(doc, "to_agent")) ?: ""));
        }
        if (!parts || !meta) {
                json_decref(parts);
                json_decref(meta);
                return NULL;
        }
        return json_pack("{s:s, s:s, s:s, s:o, s:o}", "messageId", id, "contextId", id,
                         "role", role, "parts", parts, "metadata", meta);
}

/* The JSON-RPC request of op ("send", "get", "list") for req. */
static char *request_body(const char *op, const json_t *req)
{
        const char *id = json_string_value(json_object_get(req, "id"));
        json_t *rpc, *params;

        if (!strcmp(op, "get")) {
                params = json_pack("{s:O?}", "id", json_object_get(req, "task"));
                rpc = json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", id,
                                "method", "GetTask", "params", params);
        } else if (!strcmp(op, "list")) {
                params = json_pack("{s:s, s:i}", "contextId", id, "pageSize", 10);
                rpc = json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", id,
                                "method", "ListTasks", "params", params);
        } else {
                /* contextId = the handoff_id: what ListTasks finds it by
                 * when a crash lost the answer. */
                params = json_pack("{s:o, s:{s:b}}", "message",
                                   send_message(json_object_get(req, "doc"), id),
                                   "configuration", "returnImmediately", 1);
                rpc = json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", id,
                                "method", "SendMessage", "params", params);
        }
        char *s = rpc ? json_dumps(rpc, JSON_COMPACT) : NULL;
        json_decref(rpc);
        return s;
}

/* The options every call has: no redirects (a 3xx is an answer), the
 * timeouts, TLS verified. */
static void common_opts(CURL *c, const char *url, const char *ca, struct body *b, char *cerr)
{
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, TIMEOUT_S);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
        if (ca)
                curl_easy_setopt(c, CURLOPT_CAINFO, ca);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, b);
        /* a Content-Length over the bound: not read at all */
        curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE,
                         (curl_off_t)(b->max ? b->max : A2A_ANSWER_MAX));
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
}

/* A 3xx: never followed, since the bearer token must not go where the
 * server points (another origin may be anyone's); the error says where,
 * for the operator to set a2a there. */
static void redirected(CURL *c, long http, char *text, size_t size)
{
        char *loc = NULL, where[200];

        curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &loc);
        a2a_clean(where, sizeof(where), loc ? loc : "(no Location)", 190);
        snprintf(text, size, "HTTP %ld redirect to %s: not followed (the token stays with the "
                 "URL configured; set a2a to the new one)", http, where);
}

/* a2a = an agent card's URL: the JSON-RPC interface it names, read
 * without the token (a card is public) and kept CARD_KEEP_S. */
#define CARD_KEEP_S 300
static struct {
        pthread_mutex_t lock;
        char card[2049], iface[2049], key[PATH_MAX];
        bool streaming;
        time_t at;
} card_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int card_resolve(const json_t *req, const char *url, char *iface, size_t size,
                        bool *streaming, char *why, size_t why_size)
{
        const char *ca = json_string_value(json_object_get(req, "ca_file"));
        bool cross = json_is_true(json_object_get(req, "card_cross_origin"));
        const char *key = json_string_value(json_object_get(req, "card_key"));
        struct a2a_card_key ck;
        char cerr[CURL_ERROR_SIZE] = "";
        struct body b = { .max = A2A_CARD_MAX };
        char t2[A2A_TEXT_MAX + 1];
        const char *uwhy = NULL;
        time_t now = time(NULL);
        long http = 0;
        int r = -1;

        pthread_mutex_lock(&card_cache.lock);
        bool kept = !strcmp(card_cache.card, url) && !strcmp(card_cache.key, key ? key : "") &&
                    now - card_cache.at < CARD_KEEP_S && now >= card_cache.at;
        if (kept) {
                snprintf(iface, size, "%s", card_cache.iface);
                *streaming = card_cache.streaming;
        }
        pthread_mutex_unlock(&card_cache.lock);
        if (kept)
                return 0;
        CURL *c = curl_easy_init();
        if (!c) {
                snprintf(why, why_size, "out of memory");
                return -1;
        }
        struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
        common_opts(c, url, ca, &b, cerr);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        CURLcode cc = curl_easy_perform(c);
        if (cc == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
        if (b.over || cc == CURLE_FILESIZE_EXCEEDED)
                snprintf(why, why_size, "agent card: over %d bytes", A2A_CARD_MAX);
        else if (b.headers_over)
                snprintf(why, why_size, "agent card: headers over %d bytes", HEADERS_MAX);
        else if (http >= 300 && http < 400) {
                char t[A2A_TEXT_MAX + 1];
                redirected(c, http, t, sizeof(t));
                snprintf(why, why_size, "agent card: %.280s", t);
        }
        else if (cc != CURLE_OK)
                snprintf(why, why_size, "agent card: no answer: %.200s",
                         cerr[0] ? cerr : curl_easy_strerror(cc));
        else if (http != 200)
                snprintf(why, why_size, "agent card: HTTP %ld", http);
        else if (key && a2a_card_key_load(key, &ck, why, why_size) < 0)
                ;
        else if (key && a2a_card_verify(b.buf, b.len, &ck, t2, sizeof(t2)) < 0)
                snprintf(why, why_size, "agent card: %.280s", t2);
        else if (a2a_card_interface(b.buf, b.len, url, cross, iface, size, streaming, why,
                                    why_size) < 0)
                ;
        else if (config_a2a_url_check(iface, &uwhy) < 0)
                snprintf(why, why_size, "agent card: its JSON-RPC interface %s", uwhy);
        else
                r = 0;
        if (r == 0) {
                pthread_mutex_lock(&card_cache.lock);
                snprintf(card_cache.card, sizeof(card_cache.card), "%s", url);
                snprintf(card_cache.iface, sizeof(card_cache.iface), "%s", iface);
                snprintf(card_cache.key, sizeof(card_cache.key), "%s", key ? key : "");
                card_cache.streaming = *streaming;
                card_cache.at = now;
                pthread_mutex_unlock(&card_cache.lock);
        }
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        free(b.buf);
        return r;
}

/* Following by stream (A2A 1.0 section 3.1.6 SubscribeToTask, Server-Sent
 * Events), where the agent card says capabilities.streaming.  A stream
 * holds one of the CALLS_MAX calls for up to STREAM_S, so at most
 * STREAMS_MAX run at once; a GetTask follows the others.  The stream is
 * bounded in bytes (STREAM_MAX) and in time (STREAM_S). */
#define STREAM_S 20L
#define STREAMS_MAX (CALLS_MAX / 2)
#define STREAM_MAX A2A_ANSWER_MAX

static struct {
        pthread_mutex_t lock;
        unsigned n;
} streams = { PTHREAD_MUTEX_INITIALIZER, 0 };

static bool stream_enter(void)
{
        bool ok;

        pthread_mutex_lock(&streams.lock);
        ok = streams.n < STREAMS_MAX;
        streams.n += ok;
        pthread_mutex_unlock(&streams.lock);
        return ok;
}

static void stream_leave(void)
{
        pthread_mutex_lock(&streams.lock);
        streams.n--;
        pthread_mutex_unlock(&streams.lock);
}

struct sse {
        const char *task;
        char *ev;               /* the event's data: lines, joined */
        size_t ev_len, ev_cap, line_len, total;
        char line[8192];        /* a longer line than this is a data line's rest */
        bool line_long, data_line;
        const char *state;      /* the last state the stream gave */
        bool seen, ended, bad;
};

/* Room for n more bytes of the event (and a NUL), A2A_ANSWER_MAX at
 * most: 0, or -1 with e->bad set. */
static int sse_room(struct sse *e, size_t n)
{
        if (e->ev_len + n > A2A_ANSWER_MAX) {
                e->bad = true;
                return -1;
        }
        if (e->ev_len + n + 1 <= e->ev_cap)
                return 0;
        size_t cap = e->ev_cap ? e->ev_cap : 4096;
        while (cap < e->ev_len + n + 1)
                cap *= 2;
        char *nb = realloc(e->ev, cap);
        if (!nb) {
                e->bad = true;
                return -1;
        }
        e->ev = nb;
        e->ev_cap = cap;
        return 0;
}

/* A line of the stream, its end of line cut: a data: line adds to the
 * event, a blank line ends it (text/event-stream's rules; other fields
 * and comments are passed over). */
static void sse_line(struct sse *e, const char *l, size_t n, bool first_piece)
{
        if (first_piece) {
                e->data_line = n >= 5 && !strncmp(l, "data:", 5);
                if (n == 0) {
                        const char *st;
                        if (e->ev_len && a2a_stream_event(e->ev, e->ev_len, e->task, &st) < 0)
                                e->bad = true;
                        else if (e->ev_len) {
                                e->seen = true;
                                if (st)
                                        e->state = st;
                                if (st && a2a_state_final(st))
                                        e->ended = true;
                        }
                        e->ev_len = 0;
                        return;
                }
                if (!e->data_line)
                        return;
                l += 5;
                n -= 5;
                if (n && *l == ' ') {
                        l++;
                        n--;
                }
                if (e->ev_len && sse_room(e, 1) == 0)  /* data: lines joined by a newline */
                        e->ev[e->ev_len++] = '\n';
        } else if (!e->data_line) {
                return;
        }
        if (e->bad || sse_room(e, n) < 0)
                return;
        memcpy(e->ev + e->ev_len, l, n);
        e->ev_len += n;
        e->ev[e->ev_len] = '\0';
}

static size_t on_sse(char *p, size_t size, size_t n, void *ud)
{
        struct sse *e = ud;
        size_t len = size * n;

        e->total += len;
        if (e->total > STREAM_MAX)
                e->bad = true;
        for (size_t i = 0; i < len && !e->bad && !e->ended; i++) {
                if (p[i] == '\n') {
                        if (e->line_len && e->line[e->line_len - 1] == '\r')
                                e->line_len--;
                        sse_line(e, e->line, e->line_len, !e->line_long);
                        e->line_len = 0;
                        e->line_long = false;
                        continue;
                }
                if (e->line_len == sizeof(e->line)) {
                        sse_line(e, e->line, e->line_len, !e->line_long);
                        e->line_len = 0;
                        e->line_long = true;
                }
                e->line[e->line_len++] = p[i];
        }
        return e->bad || e->ended ? 0 : len;    /* 0: curl stops */
}

/* SubscribeToTask of task: 1 it ended (or the stream failed: a GetTask
 * then says how it stands), or 0 with *out filled when the stream's time
 * bound passed with the task still running. */
static int subscribe(const char *url, const char *ca, const char *auth, const char *id,
                     const char *task, struct a2a_result *out)
{
        struct sse e = { .task = task };
        struct body hb = { .max = 1 };  /* on_header's count only */
        char cerr[CURL_ERROR_SIZE] = "";
        struct curl_slist *h = NULL;
        char *data = NULL;
        long http = 0;
        int r = 1;

        json_t *rpc = json_pack("{s:s, s:s, s:s, s:{s:s}}", "jsonrpc", "2.0", "id", id,
                                "method", "SubscribeToTask", "params", "id", task);
        data = rpc ? json_dumps(rpc, JSON_COMPACT) : NULL;
        json_decref(rpc);
        CURL *c = curl_easy_init();
        if (!data || !c)
                goto out;
        h = curl_slist_append(h, "Content-Type: application/json");
        h = curl_slist_append(h, "Accept: text/event-stream");
        h = curl_slist_append(h, "A2A-Version: 1.0");
        h = curl_slist_append(h, auth);
        common_opts(c, url, ca, &hb, cerr);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, STREAM_S);
        curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)STREAM_MAX);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_sse);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &e);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
        CURLcode cc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
        if (cc == CURLE_OPERATION_TIMEDOUT && http == 200 && e.seen && !e.bad && !e.ended &&
            e.state) {
                memset(out, 0, sizeof(*out));
                out->verdict = A2A_OK;
                out->state = e.state;
                out->streamed = true;
                snprintf(out->task, sizeof(out->task), "%s", task);
                r = 0;
        }
out:
        curl_slist_free_all(h);
        if (c)
                curl_easy_cleanup(c);
        free(data);
        free(e.ev);
        return r;
}

/* One JSON-RPC call of op for req, its answer read into *out. */
static void post(const json_t *req, const char *op, struct a2a_result *out)
{
        const char *id = json_string_value(json_object_get(req, "id"));
        const char *url = json_string_value(json_object_get(req, "url"));
        const char *tf = json_string_value(json_object_get(req, "token_file"));
        const char *ca = json_string_value(json_object_get(req, "ca_file"));
        enum a2a_op aop = !strcmp(op, "get") ? A2A_OP_GET : !strcmp(op, "list") ? A2A_OP_LIST
                                                                                : A2A_OP_SEND;
        char token[CONFIG_A2A_TOKEN_MAX + 1], auth[CONFIG_A2A_TOKEN_MAX + 32];
        char cerr[CURL_ERROR_SIZE] = "", idem[NAME_MAX + 32];
        struct curl_slist *h = NULL;
        struct body b = { 0 };
        const char *why = NULL;
        char *data = NULL;
        long http = 0;
        CURL *c = NULL;
        int q;

        memset(out, 0, sizeof(*out));
        out->state = "unknown";
        out->verdict = A2A_RETRY;
        if (!url || !tf || config_a2a_url_check(url, &why) < 0) {
                snprintf(out->text, sizeof(out->text), "bad request from handoffd");
                return;
        }
        char iface[2049], cwhy[A2A_TEXT_MAX + 1];
        bool streaming = false;
        if (a2a_card_url(url)) {
                if (card_resolve(req, url, iface, sizeof(iface), &streaming, cwhy,
                                 sizeof(cwhy)) < 0) {
                        a2a_clean(out->text, sizeof(out->text), cwhy, sizeof(cwhy));
                        return;
                }
                url = iface;
        }
        q = config_a2a_token_read(tf, token, sizeof(token), &why);
        if (q < 0) {
                snprintf(out->text, sizeof(out->text), "token_file: %s", why ? why : strerror(-q));
                return;
        }
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        explicit_bzero(token, sizeof(token));
        /* A stream that ends with the task's end, fails, or is not open
         * to us: the GetTask below says how the task stands (its
         * artifacts whole). */
        const char *task = json_string_value(json_object_get(req, "task"));
        if (aop == A2A_OP_GET && streaming && task && stream_enter()) {
                int s = subscribe(url, ca, auth, id, task, out);
                stream_leave();
                if (s == 0)
                        goto out;
        }
        data = request_body(op, req);
        c = curl_easy_init();
        if (!data || !c) {
                snprintf(out->text, sizeof(out->text), "out of memory");
                goto out;
        }
        h = curl_slist_append(h, "Content-Type: application/json");
        h = curl_slist_append(h, "Accept: application/json");
        h = curl_slist_append(h, "A2A-Version: 1.0");
        if (aop == A2A_OP_SEND) {
                /* The A2A project's proposal: a server that knows it
                 * answers a repeat with the task it made. */
                snprintf(idem, sizeof(idem), "Idempotency-Key: %s", id);
                h = curl_slist_append(h, idem);
        }
        h = curl_slist_append(h, auth);
        common_opts(c, url, ca, &b, cerr);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
        CURLcode cc = curl_easy_perform(c);
        if (b.over || cc == CURLE_FILESIZE_EXCEEDED) {
                a2a_answer_parse(aop, 200, NULL, id, NULL, A2A_ANSWER_MAX + 1, out);
                goto out;
        }
        if (b.headers_over) {
                snprintf(out->text, sizeof(out->text), "an answer with headers over %d bytes",
                         HEADERS_MAX);
                goto out;
        }
        if (cc == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
        /* GetTask: the answer must be the task asked for */
        const char *want = aop == A2A_OP_GET ? json_string_value(json_object_get(req, "task")) : id;
        a2a_answer_parse(aop, cc == CURLE_OK ? http : 0, cerr[0] ? cerr : curl_easy_strerror(cc),
                         want, b.buf, b.len, out);
        if (http >= 300 && http < 400)
                redirected(c, http, out->text, sizeof(out->text));
out:
        explicit_bzero(auth, sizeof(auth));
        curl_slist_free_all(h);
        if (c)
                curl_easy_cleanup(c);
        free(data);
        free(b.buf);
}

/* req's call; *label: what the line calls it.  A send with "check" (an
 * earlier try's outcome unknown: a crash, a timeout) first asks the
 * server by ListTasks whether a task of this contextId exists: "adopt"
 * with it, else the send as "checked"; a server without ListTasks gets
 * the send again, "resend", the one case a message may reach it twice. */
static void call(const json_t *req, const char *op, const char **label, struct a2a_result *out)
{
        *label = op;
        if (strcmp(op, "send") || !json_is_true(json_object_get(req, "check"))) {
                post(req, op, out);
                return;
        }
        post(req, "list", out);
        if (out->verdict == A2A_OK && out->task[0]) {
                *label = "adopt";
                return;
        }
        if (out->verdict == A2A_OK || out->unsupported) {
                *label = out->verdict == A2A_OK ? "checked" : "resend";
                a2a_result_free(out);
                post(req, "send", out);
                return;
        }
        /* Not known whether it has it: not sent, asked again later. */
        char t[A2A_TEXT_MAX + 1];
        enum a2a_verdict v = out->verdict == A2A_TOKEN ? A2A_TOKEN : A2A_RETRY;
        memcpy(t, out->text, sizeof(t));
        a2a_result_free(out);
        memset(out, 0, sizeof(*out));
        out->state = "unknown";
        out->verdict = v;
        snprintf(out->text, sizeof(out->text), "ListTasks: %.280s", t);
}

/* The calls: CALLS_MAX threads, each one call at a time, so one answer
 * that is slow to come holds one thread, never the requests behind it.
 * The requests wait in a list; the lines go out whole, one at a time, as
 * each call ends (handoffd matches them by id). */
struct job {
        struct job *next;
        json_t *req;
};

static struct {
        pthread_mutex_t lock, out;
        pthread_cond_t more;
        struct job *head, **tail;
        bool eof;
} jobs = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
           NULL, &jobs.head, false };

static void answer(const json_t *req)
{
        const char *id = json_string_value(json_object_get(req, "id"));
        const char *op = json_string_value(json_object_get(req, "op"));
        const char *label;
        struct a2a_result res;

        call(req, op, &label, &res);
        if (res.streamed)
                label = "stream";
        pthread_mutex_lock(&jobs.out);
        printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, label,
               res.verdict == A2A_OK ? "ok" : res.verdict == A2A_FINAL ? "final"
               : res.verdict == A2A_TOKEN ? "token" : "retry",
               res.task[0] ? res.task : "-", res.verdict == A2A_OK ? res.state : "-",
               res.text[0] ? res.text : "-",
               res.verdict == A2A_OK && res.result ? res.result : "-");
        fflush(stdout);
        pthread_mutex_unlock(&jobs.out);
        a2a_result_free(&res);
}

static void *worker(void *unused)
{
        (void)unused;
        for (;;) {
                pthread_mutex_lock(&jobs.lock);
                while (!jobs.head && !jobs.eof)
                        pthread_cond_wait(&jobs.more, &jobs.lock);
                struct job *j = jobs.head;
                if (j) {
                        jobs.head = j->next;
                        if (!jobs.head)
                                jobs.tail = &jobs.head;
                }
                pthread_mutex_unlock(&jobs.lock);
                if (!j)
                        return NULL;    /* stdin closed, nothing left */
                answer(j->req);
                json_decref(j->req);
                free(j);
        }
}

int main(int argc, char **argv)
{
        pthread_t th[CALLS_MAX];
        size_t n_th = 0;
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;

        (void)argv;
        if (argc != 1) {
                fprintf(stderr, "handoff-a2a: started by handoffd, no arguments\n");
                return 2;
        }
        /* Nothing it runs may gain privileges.  It dies with handoffd: a
         * call of a dead daemon's helper must not reach the server after
         * the next daemon asked whether the server has it. */
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return 1;
        while (n_th < CALLS_MAX && pthread_create(&th[n_th], NULL, worker, NULL) == 0)
                n_th++;
        if (n_th == 0)
                return 1;
        while ((n = getline(&line, &cap, stdin)) > 0) {
                json_error_t je;
                if (n > LINE_MAX_BYTES)
                        return 1;
                json_t *req = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES, &je);
                const char *id = json_string_value(json_object_get(req, "id"));
                const char *op = json_string_value(json_object_get(req, "op"));
                if (!id || !op || (strcmp(op, "send") && strcmp(op, "get")) ||
                    strchr(id, '\t') || strchr(id, '\n'))
                        return 1;       /* handoffd wrote that: a bug, stop */
                struct job *j = calloc(1, sizeof(*j));
                if (!j)
                        return 1;
                j->req = req;
                pthread_mutex_lock(&jobs.lock);
                *jobs.tail = j;
                jobs.tail = &j->next;
                pthread_cond_signal(&jobs.more);
                pthread_mutex_unlock(&jobs.lock);
        }
        pthread_mutex_lock(&jobs.lock);
        jobs.eof = true;
        pthread_cond_broadcast(&jobs.more);
        pthread_mutex_unlock(&jobs.lock);
        for (size_t i = 0; i < n_th; i++)
                pthread_join(th[i], NULL);
        free(line);
        curl_global_cleanup();
        return 0;
}
