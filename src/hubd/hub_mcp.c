/* /mcp: the MCP server of src/lib/mcp/ (the tool table of handoffctl mcp)
 * over MCP's Streamable HTTP transport (specification 2025-11-25,
 * "Transports"), for the agent of each request's token.
 *
 *   POST /mcp     one JSON-RPC message; a request is answered with
 *                 application/json, a notification or a response with
 *                 202 and no body.  initialize starts a session: its
 *                 answer names it in Mcp-Session-Id, which every later
 *                 request carries.
 *   GET /mcp      the session's stream (text/event-stream): a
 *                 notifications/resources/list_changed when a handoff
 *                 comes into the agent's inbox or leaves it.  Resumed
 *                 with Last-Event-ID within the session's idle timeout.
 *   DELETE /mcp   the session ends.
 *
 * A session belongs to its token's agent: another agent's id is not
 * found.  Sessions are bounded per token ([hub] mcp_sessions_per_token:
 * a new one pushes out the token's least recently used one that has no
 * stream open) and end when unused for [hub] mcp_session_idle.  A
 * session has one stream: a second GET takes over from the first, which
 * ends.  A tool call holds a pool thread only while it runs:
 * handoff_complete's wait for the daemon's word, like a stream, holds
 * none (hub_wait.c). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub.h"
#include "hub_mcp.h"
#include "mcp.h"
#include "util.h"

/* ---- the rules of the transport, without a session --------------------- */

bool hub_mcp_origin_ok(const char *allowed, const char *origin)
{
        size_t n;

        if (!origin)
                return true;    /* not a browser's request */
        n = strlen(origin);
        for (const char *p = allowed ? allowed : ""; *p;) {
                size_t k;
                p += strspn(p, " \t,");
                k = strcspn(p, " \t,");
                if (k && k == n && !strncasecmp(p, origin, n))
                        return true;
                p += k;
        }
        return false;
}

bool hub_mcp_accepts(const char *accept, const char *type)
{
        size_t n = strlen(type);
        const char *slash = strchr(type, '/');

        if (!accept)
                return true;
        for (const char *p = accept; *p;) {
                size_t k;
                p += strspn(p, " \t,");
                k = strcspn(p, ",;");
                while (k && (p[k - 1] == ' ' || p[k - 1] == '\t'))
                        k--;
                if ((k == n && !strncasecmp(p, type, n)) || (k == 3 && !strncmp(p, "*/*", 3)) ||
                    (slash && k == (size_t)(slash - type) + 2 &&
                     !strncasecmp(p, type, k - 1) && p[k - 1] == '*'))
                        return true;
                p += strcspn(p, ",");
        }
        return false;
}

int hub_mcp_event_id(const char *v, uint64_t *ret)
{
        int64_t n;

        if (!v || !*v) {
                *ret = 0;
                return 0;
        }
        /* ours are digits alone: no sign, no blank */
        if (strspn(v, "0123456789") != strlen(v) || parse_int64(v, 0, INT64_MAX, &n) < 0)
                return -EINVAL;
        *ret = (uint64_t)n;
        return 0;
}

bool hub_mcp_session_id_valid(const char *v)
{
        size_t n = 0;

        for (; v && v[n]; n++)
                if (!((v[n] >= '0' && v[n] <= '9') || (v[n] >= 'a' && v[n] <= 'f')))
                        return false;
        return n == MCP_SID_LEN;
}

/* ---- answers ----------------------------------------------------------- */

int hub_mcp_answer(struct hub_answer *a, unsigned status, json_t *msg)
{
        a->status = status;
        a->body = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
        json_decref(msg);
        return a->body ? 0 : -ENOMEM;
}

/* An HTTP refusal whose body is a JSON-RPC error without an id, as the
 * transport allows. */
bool hub_mcp_refuse(struct hub_answer *a, unsigned status, const char *msg)
{
        hub_mcp_answer(a, status, mcp_error_new(NULL, RPC_INVALID_REQUEST, msg, NULL));
        return true;
}

int hub_mcp_answer_empty(struct hub_answer *a, unsigned status)
{
        a->status = status;
        a->body = strdup("");
        a->ctype = "text/plain";
        return a->body ? 0 : -ENOMEM;
}

/* ---- requests ------------------------------------------------------------ */

/* The rules every request to /mcp follows before its token is looked at:
 * true with a filled when it is refused. */
static bool check_origin(struct hub *h, const struct hub_request *q, struct hub_answer *a)
{
        /* Transports, Security Warning: a present Origin that is not
         * allowed is 403, against DNS rebinding */
        if (!hub_mcp_origin_ok(h->cfg->hub.mcp_origins, q->origin))
                return hub_mcp_refuse(a, 403, "Forbidden: Origin is not in [hub] mcp_origins");
        return false;
}

/* Protocol Version Header: an unsupported or invalid version is 400; one
 * other than the session's is invalid for it; none is taken as 2025-03-26. */
static bool check_version(const struct hub_request *q, const struct mcp_session *s,
                          struct hub_answer *a)
{
        const char *v = q->mcp_version;

        if (!v)
                return false;
        if (!mcp_version_known(v))
                return hub_mcp_refuse(a, 400, "Bad Request: unsupported MCP-Protocol-Version");
        if (s && s->m.version[0] && strcmp(v, s->m.version))
                return hub_mcp_refuse(a, 400, "Bad Request: MCP-Protocol-Version is not the "
                                      "version this session agreed on");
        return false;
}

/* Session Management: the session a request names, taken into *ret;
 * true with a filled when there is none to use. */
static bool find_session(struct hub *h, const struct hub_request *q, struct hub_answer *a,
                         struct mcp_session **ret)
{
        *ret = NULL;
        if (!q->mcp_session)
                return hub_mcp_refuse(a, 400, "Bad Request: Mcp-Session-Id is required "
                                      "(initialize starts a session)");
        *ret = hub_mcp_session_get(h->mcp, q->mcp_session, q->agent);
        if (!*ret)
                return hub_mcp_refuse(a, 404, "Not Found: no such session (it ended: "
                                      "initialize a new one)");
        return false;
}

static bool on_get(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        struct mcp_session *s;
        uint64_t from;

        if (!hub_mcp_accepts(q->accept, "text/event-stream"))
                return hub_mcp_refuse(a, 406, "Not Acceptable: the stream is text/event-stream");
        if (hub_mcp_event_id(q->last_event_id, &from) < 0)
                return hub_mcp_refuse(a, 400, "Bad Request: Last-Event-ID is not one of ours");
        if (find_session(h, q, a, &s))
                return true;
        if (check_version(q, s, a)) {
                hub_mcp_session_put(h->mcp, s);
                return true;
        }
        if (hub_mcp_stream_new(h, s, from, &a->wait) < 0) {
                hub_mcp_session_put(h->mcp, s);
                return hub_mcp_refuse(a, 500, "out of memory");
        }
        a->status = 200;
        return true;
}

static bool on_delete(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        struct mcp_session *s;

        if (find_session(h, q, a, &s))
                return true;
        pthread_mutex_lock(&h->mcp->lock);
        hub_mcp_session_end_locked(h->mcp, s);
        pthread_mutex_unlock(&h->mcp->lock);
        hub_mcp_session_put(h->mcp, s);
        hub_mcp_answer_empty(a, 200);
        return true;
}

bool hub_mcp_head(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        const char *method = q->method;
        int64_t n;

        if (check_origin(h, q, a))
                return true;
        if (!hub_request_auth(h, q))
                return hub_mcp_refuse(a, 401, "Unauthorized: a valid Authorization: Bearer "
                                      "token is required");
        if (!strcmp(method, "GET"))
                return on_get(h, q, a);
        if (!strcmp(method, "DELETE"))
                return on_delete(h, q, a);
        if (strcmp(method, "POST"))
                return hub_mcp_refuse(a, 405, "Method Not Allowed: POST, GET or DELETE");
        /* Sending Messages to the Server: the client accepts both */
        if (!hub_mcp_accepts(q->accept, "application/json"))
                return hub_mcp_refuse(a, 406, "Not Acceptable: answers are application/json");
        if (!hub_request_json(q))
                return hub_mcp_refuse(a, 415, "Unsupported Media Type: Content-Type must be "
                                      "application/json");
        if (q->content_length && (parse_int64(q->content_length, 0, INT64_MAX, &n) < 0 ||
                                  (uint64_t)n > h->cfg->max_file_size))
                return hub_mcp_refuse(a, 413, "Payload Too Large: a message is at most "
                                      "max_file_size");
        q->mcp = true;
        return false;
}

/* initialize: a session, and its answer naming it. */
static void post_initialize(struct hub *h, struct hub_request *q, const json_t *msg,
                            struct hub_answer *a)
{
        struct mcp_session *s;
        json_t *ans = NULL;
        char err[512];
        int r;

        if (q->mcp_session) {
                hub_mcp_refuse(a, 400, "Bad Request: initialize starts a session; send it "
                               "without Mcp-Session-Id");
                return;
        }
        r = hub_mcp_session_new(h, q->agent, &s, err, sizeof(err));
        if (r == -EBUSY) {
                hub_mcp_refuse(a, 429, "Too Many Requests: this token's sessions ([hub] "
                               "mcp_sessions_per_token) all have a stream open");
                a->retry_after = 1;
                return;
        }
        if (r == -EINVAL) {
                hub_mcp_answer(a, 403, mcp_error_new(json_object_get(msg, "id"),
                                                     RPC_INVALID_REQUEST, err, NULL));
                return;
        }
        if (r < 0) {
                hub_mcp_refuse(a, 500, "out of memory");
                return;
        }
        pthread_mutex_lock(&s->lock);
        r = mcp_handle(&s->m, msg, &ans);
        pthread_mutex_unlock(&s->lock);
        if (r < 0 || hub_mcp_answer(a, 200, ans) < 0) {
                pthread_mutex_lock(&h->mcp->lock);
                hub_mcp_session_end_locked(h->mcp, s);
                pthread_mutex_unlock(&h->mcp->lock);
                hub_mcp_session_put(h->mcp, s);
                free(a->body);
                *a = (struct hub_answer){ 0 };
                hub_mcp_refuse(a, 500, "out of memory");
                return;
        }
        snprintf(a->session, sizeof(a->session), "%s", s->id);
        hub_mcp_session_put(h->mcp, s);
}

void hub_mcp_post(struct hub *h, struct hub_request *q, struct hub_answer *a)
{
        _cleanup_json_ json_t *msg = NULL;
        struct mcp_session *s;
        enum mcp_kind kind;
        json_t *ans = NULL, *err = NULL;
        int r;

        if (q->too_large) {
                hub_mcp_refuse(a, 413, "Payload Too Large: a message is at most max_file_size");
                return;
        }
        if (mcp_parse(q->body ? q->body : "", q->len, &msg, &kind, &err) < 0) {
                if (err)
                        hub_mcp_answer(a, 400, err);
                else
                        hub_mcp_refuse(a, 400, "Bad Request: not a JSON-RPC 2.0 message");
                return;
        }
        if (check_version(q, NULL, a))
                return;
        if (kind == MCP_REQUEST &&
            !strcmp(json_string_value(json_object_get(msg, "method")), "initialize")) {
                post_initialize(h, q, msg, a);
                return;
        }
        if (find_session(h, q, a, &s))
                return;
        if (check_version(q, s, a)) {
                hub_mcp_session_put(h->mcp, s);
                return;
        }
        pthread_mutex_lock(&s->lock);
        r = mcp_handle(&s->m, msg, &ans);
        if (r == 0 && s->m.later.on) {
                /* its answer comes when the daemon took the result */
                json_decref(TAKE_PTR(ans));
                r = hub_mcp_later_new(h, s, json_object_get(msg, "id"), &a->wait);
                s->m.later.on = false;
        }
        pthread_mutex_unlock(&s->lock);
        hub_mcp_session_put(h->mcp, s);
        if (r == 0 && a->wait)
                return;
        if (r < 0)
                hub_mcp_refuse(a, 500, "out of memory");
        else if (kind != MCP_REQUEST)
                hub_mcp_answer_empty(a, 202);   /* a notification or a response: accepted */
        else
                hub_mcp_answer(a, 200, ans);
}

