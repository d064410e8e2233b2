/* A2A (Agent2Agent 1.0) over JSON-RPC 2.0: each agent this host serves
 * or reaches through a [remote] has an agent card and an endpoint.
 *
 *   GET  /a2a/NAME/.well-known/agent-card.json   the card (no token)
 *   POST /a2a/NAME                               JSON-RPC, Bearer token
 *
 * SendMessage becomes a handoff from the token's agent to NAME, payload
 * a2a/1, signed here with the key the daemon checks that agent's
 * documents with (its [agent] key, else [keys] default: the hub holds it
 * already to verify what that token posts, so it gains no power; an
 * agent with require = sig has its secret key alone and cannot be sent
 * as).  The document is kept in state_dir/a2a/AGENT/ID.json before
 * hub_accept_post() drops it as any POST, so a retry of the same
 * messageId (its id is derived from the sender, NAME and messageId) is
 * the same task and the same bytes, dropped again only when the spool
 * does not know them.  GetTask and ListTasks read the task's state from
 * the spool as GET /api/v1/handoffs/{id} does, the result its agent
 * reported included (archive/NAME.result: COMPLETED or FAILED, its words
 * the task's artifact); the hub keeps no task state of its own.
 * CancelTask drops a cancel request signed for the token's agent
 * (cancelreq.h) into the spool's cancel/ and waits for the daemon's
 * answer: the hub can neither touch a claimed item nor an agent's
 * bootstrap, and only the daemon knows whether the agent took it first. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cancelreq.h"
#include "files.h"
#include "handoff.h"
#include "hub.h"
#include "items.h"
#include "payload_a2a.h"
#include "util.h"

#define A2A_DIR "a2a"
#define A2A_VERSION "1.0"
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

static pthread_mutex_t a2a_locks[A2A_LOCKS] = {
        [0 ... A2A_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER
};

static pthread_mutex_t *a2a_lock(const char *id)
{
        return &a2a_locks[fnv1a(id, strlen(id), FNV_BASIS) % A2A_LOCKS];
}

/* ---- answers ---------------------------------------------------------- */

static int answer(struct hub_answer *a, unsigned status, json_t *o)
{
        a->status = status;
        a->ctype = NULL;
        a->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return a->body ? 0 : -ENOMEM;
}

int hub_a2a_error(struct hub_answer *a, unsigned status, const json_t *id, int code,
                  const char *message)
{
        return answer(a, status, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
                                           "id", id ? (json_t *)id : json_null(), "error",
                                           "code", code, "message", message));
}

static int answer_result(struct hub_answer *a, const json_t *id, json_t *result)
{
        if (!result)
                return -ENOMEM;
        return answer(a, 200, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
                                        "result", result));
}

/* ---- the card ---------------------------------------------------------- */

static bool agent_reachable(const struct config *c, const char *name)
{
        return config_agent(c, name) || config_remote(c, name);
}

/* Host as a client may name a server: letters, digits, . - : [ ] */
static bool host_ok(const char *s)
{
        if (!s || !*s || strlen(s) > 255)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || strchr(".-:[]", *s)))
                        return false;
        return true;
}

int hub_a2a_card(struct hub *h, const char *name, const char *host, struct hub_answer *a)
{
        const struct config_agent *ag = config_agent(h->cfg, name);
        const char *remote = config_remote(h->cfg, name);
        _cleanup_free_ char *url = NULL, *desc = NULL;
        json_t *card, *skills;

        if (!hd_agent_valid(name) || !agent_reachable(h->cfg, name))
                return hub_answer_reject(a, 404, "not_found", "no such agent here");
        /* the URL the client reached us by: the card names the endpoint */
        if (!host_ok(host))
                host = h->cfg->hub.listen;
        if (!host_ok(host))
                host = "localhost";
        if (asprintf(&url, "%s://%s/a2a/%s", h->tls ? "https" : "http", host, name) < 0)
                return -ENOMEM;
        if (ag && ag->description)
                desc = strdup(ag->description);
        else if (remote ? asprintf(&desc, "handoffd agent %s, reached through host %s", name,
                                   remote) < 0
                        : asprintf(&desc, "handoffd agent %s", name) < 0)
                desc = NULL;
        if (!desc)
                return -ENOMEM;
        skills = json_array();
        for (size_t i = 0; ag && skills && i < ag->n_skills; i++)
                json_array_append_new(skills, json_pack("{s:s, s:s, s:s, s:[s]}", "id",
                                                        ag->skill_ids[i], "name",
                                                        ag->skill_ids[i], "description",
                                                        ag->skill_descs[i], "tags",
                                                        ag->skill_ids[i]));
        card = json_pack(
                "{s:s, s:s, s:s, s:[{s:s, s:s, s:s}],"
                " s:{s:b, s:b, s:b},"
                " s:{s:{s:{s:s, s:s}}}, s:[{s:{s:{s:[]}}}],"
                " s:[s, s], s:[s], s:o}",
                "name", name, "description", desc, "version", HD_VERSION_STRING,
                "supportedInterfaces", "url", url, "protocolBinding", "JSONRPC",
                "protocolVersion", A2A_VERSION,
                "capabilities", "streaming", 0, "pushNotifications", 0,
                "extendedAgentCard", 0,
                "securitySchemes", "bearer", "httpAuthSecurityScheme", "scheme", "Bearer",
                "description", "a token of handoff-hubd's token_dir; it speaks for one "
                "sending agent",
                "securityRequirements", "schemes", "bearer", "list",
                "defaultInputModes", "text/plain", "application/json",
                "defaultOutputModes", "text/plain",
                "skills", skills);
        return answer(a, card ? 200 : 500, card);
}

/* ---- the kept documents: state_dir/a2a/AGENT/ID.json -------------------- */

/* The directory of agent's documents; with create, made if missing. */
static int kept_dir(struct hub *h, const char *agent, bool create, int *ret)
{
        _cleanup_close_ int top = -1;
        int fd;

        if (create && mkdirat(h->state_fd, A2A_DIR, 0750) < 0 && errno != EEXIST)
                return -errno;
        top = openat(h->state_fd, A2A_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return -errno;
        if (create && mkdirat(top, agent, 0750) == 0 && h->cfg->fsync) {
                int r = fsync_dir(top);
                if (r == 0)
                        r = fsync_dir(h->state_fd);
                if (r < 0)
                        return r;
        }
        fd = openat(top, agent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret = fd;
        return 0;
}

/* agent's document of id: 0 with *ret_doc (and the bytes when asked),
 * -ENOENT, or -errno. */
static int kept_read(struct hub *h, const char *agent, const char *id, json_t **ret_doc,
                     char **ret_body, size_t *ret_len)
{
        const hd_limits lim = { .max_size = h->cfg->max_file_size };
        _cleanup_close_ int dfd = -1;
        _cleanup_free_ char *buf = NULL;
        char name[NAME_MAX + 1];
        size_t len;
        hd_verdict v;
        int r;

        if (!hd_id_valid(id) || xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                return -ENOENT;
        r = kept_dir(h, agent, false, &dfd);
        if (r < 0)
                return r;
        r = hd_read_at(dfd, name, lim.max_size, &buf, &len, &v);
        if (r < 0)
                return r == -EBADMSG ? -EIO : r;
        r = hd_parse(buf, len, &lim, ret_doc, &v);
        if (r < 0)
                return r == -EBADMSG ? -EIO : r;
        if (ret_body) {
                *ret_body = TAKE_PTR(buf);
                *ret_len = len;
        }
        return 0;
}

static int kept_write(struct hub *h, const char *agent, const char *id, const char *body,
                      size_t len)
{
        _cleanup_close_ int dfd = -1;
        char name[NAME_MAX + 1];
        int r;

        r = xsnprintf(name, sizeof(name), "%s.json", id);
        if (r >= 0)
                r = kept_dir(h, agent, true, &dfd);
        if (r < 0)
                return r;
        return hd_write_atomic(dfd, name, body, len, 0640, h->cfg->fsync);
}

static void kept_remove(struct hub *h, const char *agent, const char *id)
{
        _cleanup_close_ int dfd = -1;
        char name[NAME_MAX + 1];

        if (xsnprintf(name, sizeof(name), "%s.json", id) >= 0 &&
            kept_dir(h, agent, false, &dfd) == 0)
                unlinkat(dfd, name, 0);
}

int hub_a2a_prune(struct hub *h, int64_t now_s)
{
        _cleanup_close_ int top = -1;
        struct dirent *de, *fe;
        struct stat st;
        DIR *d, *ad;
        int n = 0;

        top = openat(h->state_fd, A2A_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return errno == ENOENT ? 0 : -errno;
        d = opendir_at(top);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                int afd;

                if (de->d_name[0] == '.' || !hd_agent_valid(de->d_name))
                        continue;
                afd = openat(top, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (afd < 0)
                        continue;
                ad = fdopendir(afd);
                if (!ad) {
                        close(afd);
                        continue;
                }
                while ((fe = readdir(ad)))
                        if (fe->d_name[0] != '.' &&
                            fstatat(dirfd(ad), fe->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                            S_ISREG(st.st_mode) && st.st_mtime < now_s - HUB_A2A_KEEP &&
                            unlinkat(dirfd(ad), fe->d_name, 0) == 0)
                                n++;
                closedir(ad);
        }
        closedir(d);
        return n;
}

/* ---- tasks ------------------------------------------------------------- */

/* The task id of a message: the same sender, target and messageId make
 * the same id (a retry is the same task), a different one another. */
static void task_id(const char *from, const char *to, const char *message_id, char *id,
                    size_t n)
{
        unsigned char hash[crypto_hash_sha256_BYTES];
        crypto_hash_sha256_state s;
        char hex[2 * 20 + 1];

        crypto_hash_sha256_init(&s);
        crypto_hash_sha256_update(&s, (const unsigned char *)"a2a/1", 6);
        crypto_hash_sha256_update(&s, (const unsigned char *)from, strlen(from) + 1);
        crypto_hash_sha256_update(&s, (const unsigned char *)to, strlen(to) + 1);
        crypto_hash_sha256_update(&s, (const unsigned char *)message_id, strlen(message_id));
        crypto_hash_sha256_final(&s, hash);
        sodium_bin2hex(hex, sizeof(hex), hash, 20);
        snprintf(id, n, "a2a-%s", hex);
}

/* A Task: its state, and a status message with text when there is one
 * (a reason code and its detail).  hstatus: the spool's word for it. */
static json_t *task_new(const char *id, const char *ctx, const char *state,
                        const char *hstatus, const char *reason, const char *detail,
                        const char *at)
{
        json_t *t, *status, *meta;

        status = json_pack("{s:s}", "state", state);
        meta = json_pack("{s:s}", "handoffStatus", hstatus);
        t = json_pack("{s:s, s:s, s:o, s:o}", "id", id, "contextId", ctx ? ctx : "",
                      "status", status, "metadata", meta);
        if (!t || !status || !meta)
                return NULL;
        if (at)
                json_object_set_new(status, "timestamp", json_string(at));
        if (reason) {
                _cleanup_free_ char *text = NULL;
                char mid[NAME_MAX + 1];
                snprintf(mid, sizeof(mid), "%s-status", id);
                if (asprintf(&text, "%s%s%s", reason, detail && *detail ? ": " : "",
                             detail ? detail : "") < 0) {
                        json_decref(t);
                        return NULL;
                }
                json_object_set_new(meta, "reason", json_string(reason));
                json_object_set_new(status, "message",
                                    json_pack("{s:s, s:s, s:s, s:s, s:[{s:s}]}", "messageId",
                                              mid, "role", "ROLE_AGENT", "taskId", id,
                                              "contextId", ctx ? ctx : "", "parts", "text", text));
        }
        return t;
}

static const char *jstr(const json_t *o, const char *k)
{
        return json_string_value(json_object_get(o, k));
}

/* The A2A state of what became of the handoff (items_status()): consumed
 * ends the task for an agent whose handoffs are never completed ([agent]
 * completes = no, the default); for one that reports a result (completes
 * = yes) the task is WORKING from the consume until the result comes. */
static const char *task_state(const char *st, bool completes, bool *ret_reason)
{
        *ret_reason = false;
        if (!strcmp(st, "consumed"))
                return completes ? "TASK_STATE_WORKING" : "TASK_STATE_COMPLETED";
        if (!strcmp(st, "rejected")) {
                *ret_reason = true;
                return "TASK_STATE_REJECTED";
        }
        if (!strcmp(st, "expired")) {
                *ret_reason = true;
                return "TASK_STATE_CANCELED";
        }
        if (!strcmp(st, "canceled"))
                return "TASK_STATE_CANCELED";   /* withdrawn by its sender */
        return "TASK_STATE_SUBMITTED";
}

static bool state_known(const char *s)
{
        static const char *const states[] = {
                "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED",
                "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED",
                "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED",
        };

        for (size_t i = 0; i < ELEMENTSOF(states); i++)
                if (!strcmp(s, states[i]))
                        return true;
        return false;
}

/* The result its agent reported (items.h "result"), as the task's one
 * artifact: a text part, a data part, or both. */
static json_t *result_artifact(const char *id, const json_t *res)
{
        const char *text = jstr(res, "text");
        const json_t *data = json_object_get(res, "data");
        char aid[NAME_MAX + 1];
        json_t *parts = json_array();

        snprintf(aid, sizeof(aid), "%s-result", id);
        if (text)
                json_array_append_new(parts, json_pack("{s:s}", "text", text));
        if (data)
                json_array_append_new(parts, json_pack("{s:O, s:s}", "data", data, "mediaType",
                                                       "application/json"));
        return json_pack("{s:s, s:s, s:o, s:{s:s, s:s}}", "artifactId", aid, "name", "result",
                         "parts", parts, "metadata", "agent", jstr(res, "agent") ?: "",
                         "completedAt", jstr(res, "completed_at") ?: "");
}

/* The task of a result: COMPLETED, or FAILED with the agent's reason; its
 * words, if any, the artifact. */
static json_t *task_of_result(const char *id, const char *ctx, const char *st, const json_t *res)
{
        bool failed = !strcmp(jstr(res, "status") ?: "", "failed");
        json_t *t = task_new(id, ctx, failed ? "TASK_STATE_FAILED" : "TASK_STATE_COMPLETED", st,
                             failed ? "failed" : NULL, failed ? jstr(res, "reason") : NULL,
                             jstr(res, "recorded_at"));

        if (t && (jstr(res, "text") || json_object_get(res, "data")))
                json_object_set_new(t, "artifacts", json_pack("[o]", result_artifact(id, res)));
        return t;
}

/* The task of item (hub_item_find()); completes: its agent's [agent]
 * completes. */
static json_t *task_of_item(const char *id, const char *ctx, const json_t *item, bool completes)
{
        const char *st = jstr(item, "status") ? jstr(item, "status") : "pending";
        const char *reason = jstr(item, "reason"), *detail = jstr(item, "detail");
        const char *at = jstr(item, "archived_at") ? jstr(item, "archived_at") : jstr(item, "at");
        bool with_reason;
        const char *state;

        if (!strcmp(st, "relayed")) {
                /* the receipt of the host it went to, if one came */
                const char *ro = jstr(item, "remote_outcome");
                if (!ro)
                        return task_new(id, ctx, "TASK_STATE_SUBMITTED", st, NULL, NULL, at);
                state = task_state(ro, false, &with_reason);
                return task_new(id, ctx, state, st, with_reason ? (jstr(item, "remote_reason") ?: ro)
                                                                : NULL,
                                jstr(item, "remote_detail"), jstr(item, "remote_at") ?: at);
        }
        if (!strcmp(st, "consumed") && json_object_get(item, "result"))
                return task_of_result(id, ctx, st, json_object_get(item, "result"));
        state = task_state(st, completes, &with_reason);
        if (with_reason && !reason)
                reason = st;
        return task_new(id, ctx, state, st, with_reason ? reason : NULL, detail, at);
}

/* The task of agent's document doc under id, from the spool.  0 with
 * *ret; -ENOENT when the spool no longer (or not yet) holds it. */
static int task_lookup(struct hub *h, const char *id, const json_t *doc, json_t **ret)
{
        _cleanup_json_ json_t *item = NULL;
        const char *ctx = jstr(json_object_get(doc, "payload"), "contextId");
        const struct config_agent *to = config_agent(h->cfg, jstr(doc, "to_agent") ?: "");
        int r;

        r = hub_item_find(h, id, &item);
        if (r < 0)
                return r;
        json_object_set_new(item, "status", json_string(items_status(item)));
        *ret = task_of_item(id, ctx, item, to && to->completes);
        return *ret ? 0 : -ENOMEM;
}

/* ---- the methods ------------------------------------------------------- */

struct call {
        struct hub *h;
        const char *agent;      /* the token's */
        const char *name;       /* NAME of /a2a/NAME */
        const json_t *id, *params;
        struct hub_answer *a;
};

static int call_error(struct call *c, int code, const char *message)
{
        return hub_a2a_error(c->a, 200, c->id, code, message);
}

static int call_internal(struct call *c, const char *what, int r)
{
        hub_log("a2a: %s failed: %s", what, strerror(-r));
        return call_error(c, RPC_INTERNAL, "the hub could not do it now; retry");
}

/* The signed document of payload p from c->agent to c->name: its bytes. */
static int send_build(struct call *c, const char *id, json_t *p, char **ret, size_t *ret_len,
                      const char **ret_why)
{
        const struct config *cfg = c->h->cfg;
        const hd_key *k = config_key_lookup((void *)cfg, NULL, c->agent);
        int64_t now = c->h->now_usec ? c->h->now_usec() : hd_now_usec();
        char init[HD_TIME_MAX], exp[HD_TIME_MAX];
        _cleanup_json_ json_t *doc = NULL;
        int r;

        if (!k || hd_key_kind_of(k) == HD_KEY_ED25519_PUBLIC) {
                *ret_why = "the hub holds no key that signs for this token's agent here "
                           "(require = sig: only the agent holds its secret key)";
                return -EPERM;
        }
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
static int send_drop(struct call *c, const char *body, size_t len, json_t **ret_refusal)
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

static int send_answer(struct call *c, json_t *task)
{
        return answer_result(c->a, c->id, json_pack("{s:o}", "task", task));
}

static int send_rejected(struct call *c, const char *id, const char *ctx, const char *reason,
                         const char *detail)
{
        hub_log("a2a: %s from %s to %s rejected: %s", id, c->agent, c->name, reason);
        return send_answer(c, task_new(id, ctx, "TASK_STATE_REJECTED", "rejected", reason,
                                       detail, NULL));
}

static int m_send(struct call *c)
{
        _cleanup_json_ json_t *p = NULL, *kept = NULL, *refusal = NULL, *task = NULL;
        _cleanup_free_ char *body = NULL;
        const json_t *msg = json_object_get(c->params, "message");
        const char *mid = jstr(msg, "messageId"), *ctx, *why = NULL;
        char id[64], ctx_new[64];
        enum a2a_msg_verdict kind;
        pthread_mutex_t *lk;
        size_t len = 0;
        hd_verdict v;
        int r;

        if (!mid || !*mid)
                return call_error(c, RPC_INVALID_PARAMS, "params.message.messageId is required");
        task_id(c->agent, c->name, mid, id, sizeof(id));
        /* a context of its own when the client names none, the same on a retry */
        snprintf(ctx_new, sizeof(ctx_new), "ctx-%s", id + 4);
        r = a2a_message_payload(msg, ctx_new, &p, &kind, &v);
        if (r < 0)
                return call_internal(c, "SendMessage", r);
        if (kind == A2A_MSG_CONTENT_UNSUPPORTED)
                return call_error(c, A2A_CONTENT_TYPE, v.detail);
        if (kind == A2A_MSG_TASK_UNSUPPORTED)
                return call_error(c, A2A_UNSUPPORTED, v.detail);
        if (kind != A2A_MSG_OK)
                return call_error(c, RPC_INVALID_PARAMS, v.detail);
        ctx = jstr(p, "contextId");
        if (!agent_reachable(c->h->cfg, c->name))
                return send_rejected(c, id, ctx, "unknown_agent",
                                     "no agent of that name is served here or reachable "
                                     "through a [remote]");

        lk = a2a_lock(id);
        pthread_mutex_lock(lk);
        r = kept_read(c->h, c->agent, id, &kept, &body, &len);
        if (r == 0) {
                /* a retry: the task as it is, or its bytes dropped again
                 * when the spool does not know them (a crash in between) */
                r = task_lookup(c->h, id, kept, &task);
                if (r == 0) {
                        pthread_mutex_unlock(lk);
                        return send_answer(c, TAKE_PTR(task));
                }
                if (r != -ENOENT)
                        goto fail;
                ctx = jstr(json_object_get(kept, "payload"), "contextId");
        } else if (r == -ENOENT) {
                r = send_build(c, id, p, &body, &len, &why);
                if (r == -EPERM) {
                        pthread_mutex_unlock(lk);
                        return call_error(c, A2A_UNSUPPORTED, why);
                }
                if (r == 0)
                        r = kept_write(c->h, c->agent, id, body, len);
                if (r < 0)
                        goto fail;
        } else {
                goto fail;
        }
        r = send_drop(c, body, len, &refusal);
        if (r == 0)
                kept_remove(c->h, c->agent, id);
        pthread_mutex_unlock(lk);
        if (r < 0)
                return call_internal(c, "SendMessage: dropping into the spool", r);
        if (r == 0)
                return send_rejected(c, id, ctx, jstr(refusal, "reason") ?: "rejected",
                                     jstr(refusal, "detail"));
        hub_log("a2a: %s from %s to %s accepted (message %.64s)", id, c->agent, c->name, mid);
        return send_answer(c, task_new(id, ctx, "TASK_STATE_SUBMITTED", "pending", NULL, NULL,
                                       NULL));
fail:
        pthread_mutex_unlock(lk);
        return call_internal(c, "SendMessage", r);
}

static int m_get(struct call *c)
{
        _cleanup_json_ json_t *kept = NULL, *task = NULL;
        const char *id = jstr(c->params, "id");
        int r;

        if (!id)
                return call_error(c, RPC_INVALID_PARAMS, "params.id is required");
        /* only the sender's token knows its tasks */
        r = kept_read(c->h, c->agent, id, &kept, NULL, NULL);
        if (r == 0 && strcmp(jstr(kept, "to_agent") ?: "", c->name))
                r = -ENOENT;
        if (r == 0)
                r = task_lookup(c->h, id, kept, &task);
        if (r == -ENOENT)
                return call_error(c, A2A_TASK_NOT_FOUND, "no such task for this token");
        if (r < 0)
                return call_internal(c, "GetTask", r);
        return answer_result(c->a, c->id, TAKE_PTR(task));
}

/* The request to cancel id as c->agent, dropped into cancel/ (fd) and
 * answered by the daemon within the wait: *ret (CA_NONE: not yet). */
static int cancel_send(struct call *c, int fd, const char *id, enum cancelreq_answer *ret)
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
                r = cancelreq_drop(c->h->tmp_fd, tmp, fd, name, buf, len, cfg->fsync);
        if (r < 0)
                return r;
        hub_log("a2a: %s: cancel requested by %s (%s)", id, c->agent, name);
        return cancelreq_await(fd, name, c->h->wait_ms, ret);
}

static int m_cancel(struct call *c)
{
        _cleanup_json_ json_t *kept = NULL, *task = NULL;
        _cleanup_close_ int own_fd = -1;
        const char *id = jstr(c->params, "id"), *st;
        enum cancelreq_answer ans = CA_NONE;
        char msg[160];
        int fd, r;

        if (!id)
                return call_error(c, RPC_INVALID_PARAMS, "params.id is required");
        /* only the sender's token knows its tasks, as GetTask */
        r = kept_read(c->h, c->agent, id, &kept, NULL, NULL);
        if (r == -ENOENT || (r == 0 && strcmp(jstr(kept, "to_agent") ?: "", c->name)))
                return call_error(c, A2A_TASK_NOT_FOUND, "no such task for this token");
        if (r == 0)
                r = task_lookup(c->h, id, kept, &task);
        if (r == -ENOENT)
                return call_error(c, A2A_TASK_NOT_FOUND, "the spool holds no such task");
        if (r < 0)
                return call_internal(c, "CancelTask", r);
        /* Not yet taken by its agent: waiting in handoff/ (pending) or
         * for its consumer (claimed).  Anything else has ended, or is
         * another host's to decide (relayed: a cancel does not cross). */
        st = jstr(json_object_get(task, "metadata"), "handoffStatus") ?: "";
        if (!config_agent(c->h->cfg, c->name))
                st = "for another host";        /* waits in outbox/, or relayed */
        if (strcmp(st, "pending") && strcmp(st, "claimed")) {
                snprintf(msg, sizeof(msg), "the task cannot be canceled: its handoff is %s", st);
                return call_error(c, A2A_TASK_NOT_CANCELABLE, msg);
        }
        fd = c->h->cancel_fd;
        if (fd < 0) {
                /* made by a daemon started after us, maybe */
                char path[PATH_MAX];
                if (xsnprintf(path, sizeof(path), "%s/%s", c->h->cfg->spool_dir,
                              CANCELREQ_DIR) >= 0)
                        own_fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if ((fd = own_fd) < 0)
                        return call_error(c, A2A_UNSUPPORTED, "the spool has no cancel/: its "
                                          "handoffd cannot cancel");
        }
        r = cancel_send(c, fd, id, &ans);
        if (r == -EPERM)
                return call_error(c, A2A_UNSUPPORTED, "the hub holds no key that signs for "
                                  "this token's agent here");
        if (r < 0)
                return call_internal(c, "CancelTask: the request into cancel/", r);
        hub_log("a2a: %s: cancel by %s: %s", id, c->agent,
                ans == CA_NONE ? "no answer yet" : cancelreq_answer_name(ans));
        switch (ans) {
        case CA_CANCELED:
                break;
        case CA_NOT_CANCELABLE:
                return call_error(c, A2A_TASK_NOT_CANCELABLE,
                                  "the task cannot be canceled: its agent took it first, "
                                  "or it has ended");
        case CA_UNKNOWN:
                return call_error(c, A2A_TASK_NOT_FOUND, "the spool holds no such task");
        case CA_REFUSED:
                return call_error(c, RPC_INTERNAL, "handoffd refused the hub's cancel request "
                                  "(see its log: the keys of the two differ?)");
        default:
                /* The daemon has not answered within the wait (stopped,
                 * busy): the request stands and is acted on when it comes;
                 * the task as it is now says so. */
                json_decref(TAKE_PTR(task));
                r = task_lookup(c->h, id, kept, &task);
                if (r < 0)
                        return call_internal(c, "CancelTask", r);
                json_object_set_new(json_object_get(task, "metadata"), "cancel",
                                    json_string("requested"));
                return answer_result(c->a, c->id, TAKE_PTR(task));
        }
        /* Canceled is decided (the daemon took the bootstrap back), the
         * archive may follow a moment later. */
        json_decref(TAKE_PTR(task));
        task = task_new(id, jstr(json_object_get(kept, "payload"), "contextId"),
                        "TASK_STATE_CANCELED", "canceled", NULL, NULL, NULL);
        return answer_result(c->a, c->id, TAKE_PTR(task));
}

struct listed {
        char id[NAME_MAX + 1];
        struct timespec mtime;
};

static int listed_cmp(const void *x, const void *y)
{
        const struct listed *a = x, *b = y;

        /* newest first; the same instant by id, so pages do not shift */
        if (a->mtime.tv_sec != b->mtime.tv_sec)
                return a->mtime.tv_sec < b->mtime.tv_sec ? 1 : -1;
        if (a->mtime.tv_nsec != b->mtime.tv_nsec)
                return a->mtime.tv_nsec < b->mtime.tv_nsec ? 1 : -1;
        return strcmp(a->id, b->id);
}

/* The ids of agent's documents, newest first. */
static int listed_read(struct hub *h, const char *agent, struct listed **ret, size_t *ret_n)
{
        _cleanup_free_ struct listed *v = NULL;
        _cleanup_close_ int dfd = -1;
        size_t n = 0, cap = 0;
        struct dirent *de;
        struct stat st;
        DIR *d;
        int r;

        r = kept_dir(h, agent, false, &dfd);
        if (r == -ENOENT) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (r < 0)
                return r;
        d = opendir_at(dfd);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                size_t l = strlen(de->d_name);
                if (de->d_name[0] == '.' || l <= 5 || strcmp(de->d_name + l - 5, ".json") ||
                    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (n == cap) {
                        struct listed *nv = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
                        if (!nv) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        v = nv;
                }
                memcpy(v[n].id, de->d_name, l - 5);
                v[n].id[l - 5] = '\0';
                v[n].mtime = st.st_mtim;
                n++;
        }
        closedir(d);
        if (n)
                qsort(v, n, sizeof(*v), listed_cmp);
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

static int m_list(struct call *c)
{
        _cleanup_free_ struct listed *v = NULL;
        _cleanup_json_ json_t *tasks = NULL;
        const json_t *ps = json_object_get(c->params, "pageSize");
        const char *ctx = jstr(c->params, "contextId"), *status = jstr(c->params, "status");
        const char *tok = jstr(c->params, "pageToken");
        int64_t page = A2A_PAGE_DEFAULT, skip = 0, matched = 0;
        size_t n = 0, i;
        char next[32] = "";
        int r;

        if (ps && (!json_is_integer(ps) || json_integer_value(ps) < 1 ||
                   json_integer_value(ps) > A2A_PAGE_MAX))
                return call_error(c, RPC_INVALID_PARAMS, "params.pageSize is 1 to 100");
        if (ps)
                page = json_integer_value(ps);
        if (tok && *tok && parse_int64(tok, 0, INT32_MAX, &skip) < 0)
                return call_error(c, RPC_INVALID_PARAMS, "params.pageToken is not one of ours");
        if ((json_object_get(c->params, "contextId") && !ctx) ||
            (json_object_get(c->params, "status") && !status))
                return call_error(c, RPC_INVALID_PARAMS, "params.contextId and status are strings");
        if (status && !strcmp(status, "TASK_STATE_UNSPECIFIED"))
                status = NULL;
        if (status && !state_known(status))
                return call_error(c, RPC_INVALID_PARAMS, "params.status is not a TaskState");
        r = listed_read(c->h, c->agent, &v, &n);
        if (r < 0)
                return call_internal(c, "ListTasks", r);
        tasks = json_array();
        if (!tasks)
                return -ENOMEM;
        for (i = 0; i < n; i++) {
                _cleanup_json_ json_t *kept = NULL, *task = NULL;
                bool on_page;

                if (kept_read(c->h, c->agent, v[i].id, &kept, NULL, NULL) < 0 ||
                    strcmp(jstr(kept, "to_agent") ?: "", c->name))
                        continue;
                if (ctx && strcmp(jstr(json_object_get(kept, "payload"), "contextId") ?: "", ctx))
                        continue;
                on_page = matched >= skip && (int64_t)json_array_size(tasks) < page;
                /* the spool is asked only for what the page shows, or
                 * for every one when the state is what is asked */
                if ((on_page || status) && task_lookup(c->h, v[i].id, kept, &task) < 0)
                        continue;
                if (status && strcmp(jstr(json_object_get(task, "status"), "state") ?: "", status))
                        continue;
                if (on_page)
                        json_array_append(tasks, task);
                matched++;
        }
        if (skip + (int64_t)json_array_size(tasks) < matched)
                snprintf(next, sizeof(next), "%lld", (long long)(skip + page));
        return answer_result(c->a, c->id,
                             json_pack("{s:O, s:s, s:I, s:I}", "tasks", tasks, "nextPageToken",
                                       next, "pageSize", (json_int_t)page, "totalSize",
                                       (json_int_t)matched));
}

/* ---- dispatch ---------------------------------------------------------- */

static const struct {
        const char *name;
        int (*fn)(struct call *c);
        int code;               /* without fn: the error it answers */
        const char *message;
} methods[] = {
        { "SendMessage", m_send, 0, NULL },
        { "GetTask", m_get, 0, NULL },
        { "ListTasks", m_list, 0, NULL },
        { "CancelTask", m_cancel, 0, NULL },
        { "SendStreamingMessage", NULL, A2A_UNSUPPORTED, "streaming is not supported here" },
        { "SubscribeToTask", NULL, A2A_UNSUPPORTED, "streaming is not supported here" },
        { "CreateTaskPushNotificationConfig", NULL, A2A_PUSH_NOT_SUPPORTED,
          "push notifications are not supported here" },
        { "GetTaskPushNotificationConfig", NULL, A2A_PUSH_NOT_SUPPORTED,
          "push notifications are not supported here" },
        { "ListTaskPushNotificationConfigs", NULL, A2A_PUSH_NOT_SUPPORTED,
          "push notifications are not supported here" },
        { "DeleteTaskPushNotificationConfig", NULL, A2A_PUSH_NOT_SUPPORTED,
          "push notifications are not supported here" },
        { "GetExtendedAgentCard", NULL, A2A_EXTENDED_CARD, "there is no extended agent card" },
};

/* A2A-Version: absent or empty is 0.3 (the specification's rule); this
 * hub speaks 1.0 (a patch number, if sent, does not matter). */
static bool version_ok(const char *v)
{
        if (!v)
                return false;
        while (*v == ' ' || *v == '\t')
                v++;
        if (strncmp(v, "1.0", 3))
                return false;
        v += 3;
        if (*v == '.')
                for (v++; *v >= '0' && *v <= '9'; v++)
                        ;
        while (*v == ' ' || *v == '\t')
                v++;
        return *v == '\0';
}

int hub_a2a_rpc(struct hub *h, const char *agent, const char *name, const char *version,
                const char *body, size_t len, struct hub_answer *a)
{
        const hd_limits lim = { .max_size = h->cfg->max_file_size };
        _cleanup_json_ json_t *req = NULL, *empty = json_object();
        struct call c = { .h = h, .agent = agent, .name = name, .a = a };
        const json_t *jid, *params;
        const char *method;
        hd_verdict v;
        size_t i;
        int r;

        for (i = 0; i < len && strchr(" \t\r\n", body[i]); i++)
                ;
        if (i < len && body[i] == '[')
                return hub_a2a_error(a, 200, NULL, RPC_INVALID_REQUEST,
                                     "batch requests are not supported");
        r = hd_parse(body, len, &lim, &req, &v);
        if (r == -EBADMSG)
                return hub_a2a_error(a, 200, NULL, RPC_PARSE_ERROR, v.detail);
        if (r < 0)
                return r;
        if (!empty)
                return -ENOMEM;
        jid = json_object_get(req, "id");
        if (jid && !json_is_string(jid) && !json_is_integer(jid) && !json_is_null(jid))
                jid = NULL;
        method = jstr(req, "method");
        if (strcmp(jstr(req, "jsonrpc") ?: "", "2.0") || !method || !jid)
                return hub_a2a_error(a, 200, jid, RPC_INVALID_REQUEST,
                                     "a JSON-RPC 2.0 request with jsonrpc, method and id");
        params = json_object_get(req, "params");
        if (params && !json_is_object(params))
                return hub_a2a_error(a, 200, jid, RPC_INVALID_PARAMS, "params is not an object");
        if (!version_ok(version))
                return hub_a2a_error(a, 200, jid, A2A_VERSION_NOT_SUPPORTED,
                                     "this server speaks A2A-Version 1.0 only (no header: 0.3)");
        c.id = jid;
        c.params = params ? params : empty;
        for (i = 0; i < ELEMENTSOF(methods); i++) {
                if (strcmp(method, methods[i].name))
                        continue;
                if (!methods[i].fn)
                        return call_error(&c, methods[i].code, methods[i].message);
                return methods[i].fn(&c);
        }
        return hub_a2a_error(a, 200, jid, RPC_METHOD_NOT_FOUND, "no such method");
}
