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
 * bootstrap, and only the daemon knows whether the agent took it first.
 * This file answers: the card, the JSON-RPC dispatch to the methods
 * (hub_a2a_methods.c); hub_a2a.h names the other parts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "handoff.h"
#include "hub.h"
#include "hub_a2a.h"
#include "hub_jws.h"
#include "util.h"

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

int a2a_answer_result(struct hub_answer *a, const json_t *id, json_t *result)
{
        if (!result)
                return -ENOMEM;
        return answer(a, 200, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
                                        "result", result));
}

/* ---- the card ---------------------------------------------------------- */

bool a2a_agent_reachable(const struct config *c, const char *name)
{
        return config_reachable(c, name);
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

/* The host a card names: the Host the client reached us by, else
 * [hub] listen, else localhost. */
static const char *card_host(struct hub *h, const char *host)
{
        if (!host_ok(host))
                host = h->cfg->hub.listen;
        return host_ok(host) ? host : "localhost";
}

/* Agent name's interface: its endpoint under host. */
static json_t *card_interface(struct hub *h, const char *name, const char *host)
{
        _cleanup_free_ char *url = NULL;

        if (asprintf(&url, "%s://%s/a2a/%s", h->tls ? "https" : "http", host, name) < 0)
                return NULL;
        return json_pack("{s:s, s:s, s:s}", "url", url, "protocolBinding", "JSONRPC",
                         "protocolVersion", A2A_VERSION);
}

/* The [remote] section of name, or NULL (an [agent], or none). */
static const struct config_remote *card_remote(struct hub *h, const char *name)
{
        for (size_t i = 0; !config_agent(h->cfg, name) && i < h->cfg->n_remotes; i++)
                if (!strcmp(h->cfg->remotes[i].name, name))
                        return &h->cfg->remotes[i];
        return NULL;
}

/* What agent name does, for its card (NULL: out of memory).  A remote's
 * own card is not read: the transport is ours, and what the agent does is
 * what this host's config says of it. */
static char *card_description(struct hub *h, const char *name)
{
        const struct config_agent *ag = config_agent(h->cfg, name);
        const struct config_remote *rm = card_remote(h, name);
        char *desc = NULL;
        int q;

        if (ag && ag->description)
                return strdup(ag->description);
        if (rm && rm->description)
                return strdup(rm->description);
        if (rm && rm->host)
                q = asprintf(&desc, "handoffd agent %s, reached through host %s", name, rm->host);
        else if (rm)
                q = asprintf(&desc, "agent %s, sent on by handoffd to an A2A server", name);
        else
                q = asprintf(&desc, "handoffd agent %s", name);
        return q < 0 ? NULL : desc;
}

/* The card's skills: an [agent]'s, or a [remote]'s, as configured. */
static json_t *card_skills(char *const *ids, char *const *descs, size_t n)
{
        json_t *skills = json_array();

        for (size_t i = 0; skills && i < n; i++)
                if (json_array_append_new(skills, json_pack("{s:s, s:s, s:s, s:[s]}", "id",
                                                            ids[i], "name", ids[i],
                                                            "description", descs[i], "tags",
                                                            ids[i])) < 0) {
                        json_decref(skills);
                        return NULL;
                }
        return skills;
}

/* The card signed by [hub] signing_key, if set (A2A 1.0 section 8.4):
 * the key's JWK at host's /.well-known/jwks.json.  The card holds no
 * member at its default value (no empty list, no unset field), so that
 * a verifier's removal of defaults leaves the bytes signed.  NULL on
 * failure. */
static json_t *card_sign(struct hub *h, const char *host, json_t *card)
{
        _cleanup_free_ char *jku = NULL;

        if (!card || !h->signer)
                return card;
        if (asprintf(&jku, "%s://%s" HUB_JWKS_PATH, h->tls ? "https" : "http", host) < 0 ||
            hub_jws_sign_card(h->signer, card, jku) < 0) {
                jku = NULL;
                json_decref(card);
                return NULL;
        }
        return card;
}

/* A card of name, description desc, with interfaces and skills (both
 * taken); what every card of this hub says alike around them, signed
 * for host. */
static json_t *card_pack(struct hub *h, const char *host, const char *name, const char *desc,
                         json_t *ifaces, json_t *skills)
{
        if (!ifaces || !skills) {
                json_decref(ifaces);
                json_decref(skills);
                return NULL;
        }
        return card_sign(h, host, json_pack(
                "{s:s, s:s, s:s, s:o,"
                " s:{s:b, s:b, s:b, s:[{s:s, s:s}]},"
                " s:{s:{s:{s:s, s:s}}}, s:[{s:{s:{}}}],"
                " s:[s, s], s:[s], s:o}",
                "name", name, "description", desc, "version", HD_VERSION_STRING,
                "supportedInterfaces", ifaces,
                "capabilities", "streaming", 1, "pushNotifications", hub_push_on(h),
                "extendedAgentCard", 0, "extensions", "uri", A2A_EXT_GENERATION, "description",
                "each event of a task is numbered: metadata.generation and the SSE id, from 1, "
                "one more at each change, kept with the task across restarts; SubscribeToTask "
                "or SendStreamingMessage with Last-Event-ID (or params.metadata.generation) "
                "gives the Task as it was at that event, then every event after it",
                /* required: false, its default, so not written (a signed
                 * card's verifier drops defaults before it checks) */
                "securitySchemes", "bearer", "httpAuthSecurityScheme", "scheme", "Bearer",
                "description", "a token of handoff-hubd's token_dir; it speaks for one "
                "sending agent",
                /* StringList's list: empty, its default, so not written */
                "securityRequirements", "schemes", "bearer",
                "defaultInputModes", "text/plain", "application/json",
                "defaultOutputModes", "text/plain",
                "skills", skills));
}

/* The card of agent name; NULL when out of memory. */
static json_t *card_of(struct hub *h, const char *name, const char *host)
{
        const struct config_agent *ag = config_agent(h->cfg, name);
        const struct config_remote *rm = card_remote(h, name);
        _cleanup_free_ char *desc = card_description(h, name);
        json_t *skills = ag ? card_skills(ag->skill_ids, ag->skill_descs, ag->n_skills)
                       : rm ? card_skills(rm->skill_ids, rm->skill_descs, rm->n_skills)
                            : json_array();

        if (!desc || !skills) {
                json_decref(skills);
                return NULL;
        }
        return card_pack(h, host, name, desc, json_pack("[o]", card_interface(h, name, host)),
                         skills);
}

int hub_a2a_card(struct hub *h, const char *name, const char *host, struct hub_answer *a)
{
        json_t *card;

        if (!hd_agent_valid(name) || !a2a_agent_reachable(h->cfg, name))
                return hub_answer_reject(a, 404, "not_found", "no such agent here");
        card = card_of(h, name, card_host(h, host));
        return answer(a, card ? 200 : 500, card);
}

/* Each agent this host serves or reaches, in the file's order. */
static int each_agent(const struct config *c, int (*fn)(void *u, const char *name), void *u)
{
        int r = 0;

        for (size_t i = 0; r == 0 && i < c->n_agents; i++)
                r = fn(u, c->agents[i].name);
        for (size_t i = 0; r == 0 && i < c->n_remotes; i++)
                if (!config_agent(c, c->remotes[i].name))
                        r = fn(u, c->remotes[i].name);
        return r;
}

struct root_card {
        struct hub *h;
        const char *host;
        json_t *ifaces, *skills;
};

static int root_add(void *u, const char *name)
{
        struct root_card *rc = u;
        _cleanup_free_ char *desc = card_description(rc->h, name);

        if (!desc || json_array_append_new(rc->ifaces, card_interface(rc->h, name, rc->host)) < 0 ||
            json_array_append_new(rc->skills, json_pack("{s:s, s:s, s:s, s:[s]}", "id", name,
                                                        "name", name, "description", desc,
                                                        "tags", name)) < 0)
                return -ENOMEM;
        return 0;
}

int hub_a2a_root_card(struct hub *h, const char *host, struct hub_answer *a)
{
        struct root_card rc = { .h = h, .host = card_host(h, host), .ifaces = json_array(),
                                .skills = json_array() };
        const char *def = h->cfg->hub.default_agent;

        /* one agent's card ([hub] default_agent, checked at start) */
        if (def) {
                json_decref(rc.ifaces);
                json_decref(rc.skills);
                return hub_a2a_card(h, def, host, a);
        }
        /* Else one card for them all: an interface per agent (a client
         * takes the first, or the one it picks), and a skill per agent
         * naming it, its description what the agent does. */
        if (!rc.ifaces || !rc.skills || each_agent(h->cfg, root_add, &rc) < 0) {
                json_decref(rc.ifaces);
                json_decref(rc.skills);
                return -ENOMEM;
        }
        return answer(a, 200, card_pack(h, rc.host, "handoffd",
                                        "the agents of this handoffd host: each interface is "
                                        "one agent's endpoint, each skill one agent (its id "
                                        "the agent's name)", rc.ifaces, rc.skills));
}

/* GET /a2a/.well-known/agent-card.json: what a client asks for when it
 * resolves the card relative to /a2a/NAME without its trailing slash
 * (the A2A SDK's createFromUrl() does).  NAME is lost by then; the 404
 * says where each card is and how to ask. */
int hub_a2a_card_elsewhere(struct hub *h, const char *host, struct hub_answer *a)
{
        _cleanup_free_ char *detail = NULL;

        host = card_host(h, host);
        if (asprintf(&detail,
                     "no card here: the card of agent NAME is at /a2a/NAME" A2A_CARD_PATH
                     "; give an A2A client the endpoint with its trailing slash, %s://%s/a2a/NAME/ "
                     "(a card resolved relative to /a2a/NAME, without it, is looked for here)",
                     h->tls ? "https" : "http", host) < 0)
                return -ENOMEM;
        return answer(a, 404, json_pack("{s:s, s:s, s:s, s:s}", "status", "rejected", "reason",
                                        "not_found", "detail", detail, "card",
                                        "/a2a/NAME" A2A_CARD_PATH));
}

/* ---- calls ------------------------------------------------------------ */

int a2a_call_error(struct a2a_call *c, int code, const char *message)
{
        return hub_a2a_error(c->a, 200, c->id, code, message);
}

int a2a_call_internal(struct a2a_call *c, const char *what, int r)
{
        hub_log("a2a: %s failed: %s", what, strerror(-r));
        return a2a_call_error(c, RPC_INTERNAL, "the hub could not do it now; retry");
}

/* ---- dispatch ---------------------------------------------------------- */

static const struct {
        const char *name;
        int (*fn)(struct a2a_call *c);
        int code;               /* without fn: the error it answers */
        const char *message;
} methods[] = {
        { "SendMessage", a2a_send_message, 0, NULL },
        { "GetTask", a2a_get_task, 0, NULL },
        { "ListTasks", a2a_list_tasks, 0, NULL },
        { "CancelTask", a2a_cancel_task, 0, NULL },
        { "SendStreamingMessage", a2a_send_streaming_message, 0, NULL },
        { "SubscribeToTask", a2a_subscribe_to_task, 0, NULL },
        { "CreateTaskPushNotificationConfig", a2a_push_create, 0, NULL },
        { "GetTaskPushNotificationConfig", a2a_push_get, 0, NULL },
        { "ListTaskPushNotificationConfigs", a2a_push_list, 0, NULL },
        { "DeleteTaskPushNotificationConfig", a2a_push_delete, 0, NULL },
        /* A2A 1.0 section 3.3.4: the card says extendedAgentCard: false */
        { "GetExtendedAgentCard", NULL, A2A_UNSUPPORTED,
          "there is no extended agent card (the card says extendedAgentCard: false)" },
};

/* ProtoJSON reads a member whose value is null as unset, and a string
 * field of "" as its default, unset too: such members of o go (strs: the
 * string fields for which "" means unset). */
static void unset_nulls(json_t *o, const char *const *strs)
{
        const char *k;
        json_t *v;
        void *tmp;

        json_object_foreach_safe(o, tmp, k, v) {
                bool empty = false;
                for (size_t i = 0; strs && strs[i]; i++)
                        if (!strcmp(k, strs[i]) && json_is_string(v) && !json_string_length(v))
                                empty = true;
                if (json_is_null(v) || empty)
                        json_object_del(o, k);
        }
}

/* params as the methods read them: null members of the request's
 * messages unset (ProtoJSON), at the levels A2A's messages have fields;
 * inside a data part or metadata (a google.protobuf.Struct) null is a
 * value and stays.  NULL when out of memory. */
static json_t *params_unset(const json_t *params)
{
        static const char *const msg_strs[] = { "taskId", "contextId", NULL };
        json_t *p = json_deep_copy(params), *msg, *parts, *part;
        size_t i;

        if (!p)
                return NULL;
        unset_nulls(p, NULL);
        msg = json_object_get(p, "message");
        if (json_is_object(msg)) {
                unset_nulls(msg, msg_strs);
                parts = json_object_get(msg, "parts");
                json_array_foreach(parts, i, part)
                        if (json_is_object(part))
                                unset_nulls(part, NULL);
        }
        if (json_is_object(json_object_get(p, "configuration")))
                unset_nulls(json_object_get(p, "configuration"), NULL);
        return p;
}

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
                const char *last_event_id, const char *body, size_t len, struct hub_answer *a)
{
        const hd_limits lim = { .max_size = h->cfg->max_file_size };
        _cleanup_json_ json_t *req = NULL, *empty = json_object(), *unset = NULL;
        struct a2a_call c = { .h = h, .agent = agent, .name = name, .a = a,
                              .last_event_id = last_event_id };
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
        method = a2a_str(req, "method");
        if (strcmp(a2a_str(req, "jsonrpc") ?: "", "2.0") || !method || !jid)
                return hub_a2a_error(a, 200, jid, RPC_INVALID_REQUEST,
                                     "a JSON-RPC 2.0 request with jsonrpc, method and id");
        params = json_object_get(req, "params");
        if (params && !json_is_object(params))
                return hub_a2a_error(a, 200, jid, RPC_INVALID_PARAMS, "params is not an object");
        if (!version_ok(version))
                return hub_a2a_error(a, 200, jid, A2A_VERSION_NOT_SUPPORTED,
                                     "this server speaks A2A-Version 1.0 only (no header: 0.3)");
        c.id = jid;
        unset = params_unset(params ? params : empty);
        if (!unset)
                return -ENOMEM;
        c.params = unset;
        for (i = 0; i < ELEMENTSOF(methods); i++) {
                if (strcmp(method, methods[i].name))
                        continue;
                if (!methods[i].fn)
                        return a2a_call_error(&c, methods[i].code, methods[i].message);
                return methods[i].fn(&c);
        }
        return hub_a2a_error(a, 200, jid, RPC_METHOD_NOT_FOUND, "no such method");
}
