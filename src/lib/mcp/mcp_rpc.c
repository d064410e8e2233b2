/* The MCP server's JSON-RPC side (see mcp.h): a message parsed and
 * checked, the lifecycle (initialize, the protocol version), the
 * dispatch, and the resources: one handoff://inbox/ID for each bootstrap
 * waiting for the agent.  Bad input gets a JSON-RPC error, never more:
 * the transport decides what a connection is worth. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "mcp.h"
#include "util.h"

/* Newest first: the answer to a version we do not know is the first. */
const char *const mcp_versions[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };
const size_t mcp_n_versions = ELEMENTSOF(mcp_versions);

bool mcp_version_known(const char *v)
{
        for (size_t i = 0; v && i < mcp_n_versions; i++)
                if (!strcmp(v, mcp_versions[i]))
                        return true;
        return false;
}

json_t *mcp_error_new(const json_t *id, int code, const char *msg, json_t *data)
{
        char text[512];
        json_t *err;

        snprintf(text, sizeof(text), "%s", msg);
        utf8_fix(text);
        err = json_pack("{s:i, s:s}", "code", code, "message", text);
        if (err && data)
                json_object_set_new(err, "data", data);
        else
                json_decref(data);
        if (!err)
                return NULL;
        return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                         "error", err);
}

json_t *mcp_notification_new(const char *method)
{
        return json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
}

/* ---- lifecycle -------------------------------------------------------- */

static json_t *mcp_initialize(struct mcp *m, const json_t *params)
{
        const char *want = json_string_value(json_object_get(params, "protocolVersion"));
        const char *ver = mcp_version_known(want) ? want : mcp_versions[0];
        char instr[512];

        snprintf(m->version, sizeof(m->version), "%s", ver);
        snprintf(instr, sizeof(instr),
                 "Handoffs for agent %s. handoff_send hands work to another agent; "
                 "handoff_inbox lists what was handed to %s, handoff_take takes one over "
                 "(once); handoff_status follows a handoff. Each waiting handoff is also "
                 "a resource handoff://inbox/ID; the list changes when one arrives or is taken.",
                 m->agent, m->agent);
        return json_pack("{s:s, s:{s:{s:b}, s:{s:b, s:b}}, s:{s:s, s:s, s:s}, s:s}",
                         "protocolVersion", ver,
                         "capabilities", "tools", "listChanged", 0,
                         "resources", "listChanged", 1, "subscribe", 0,
                         "serverInfo", "name", m->server_name ? m->server_name : "handoffctl",
                         "title", "handoffd agent tools", "version", HD_VERSION_STRING,
                         "instructions", instr);
}

/* ---- resources -------------------------------------------------------- */

static json_t *mcp_resources_list(struct mcp *m, struct mcp_err *e)
{
        _cleanup_json_ json_t *list = NULL;
        json_t *res = json_array(), *it;
        size_t i;
        int r;

        char err[512] = "out of memory";

        if (m->inbox_ops) {
                size_t more;
                r = m->inbox_ops->list(m, &list, &more, err, sizeof(err));
        } else {
                inbox_reopen(&m->ib);
                r = inbox_list(&m->ib, hd_now_usec(), &list, NULL);
                if (r < 0)
                        snprintf(err, sizeof(err), "%s: %s", m->ib.dir, strerror(-r));
        }
        if (r < 0 || !res) {
                json_decref(res);
                e->code = RPC_INTERNAL_ERROR;
                snprintf(e->msg, sizeof(e->msg), "Internal error: %s", err);
                return NULL;
        }
        json_array_foreach(list, i, it) {
                const char *id = json_string_value(json_object_get(it, "handoff_id"));
                char uri[256], title[512], desc[256];
                snprintf(uri, sizeof(uri), MCP_URI_PREFIX "%s", id);
                snprintf(title, sizeof(title), "Handoff from %s: %s",
                         json_string_value(json_object_get(it, "from_agent")) ?: "?",
                         json_string_value(json_object_get(it, "reason")) ?: "");
                utf8_fix(title);
                snprintf(desc, sizeof(desc),
                         "Delivered to %s %llds ago; %llds left to take it (handoff_take). "
                         "Reading it does not take it.", m->agent,
                         (long long)json_integer_value(json_object_get(it, "age_s")),
                         (long long)json_integer_value(json_object_get(it, "seconds_left")));
                json_array_append_new(res, json_pack("{s:s, s:s, s:s, s:s, s:s}", "uri", uri,
                                                     "name", id, "title", title,
                                                     "description", desc,
                                                     "mimeType", "application/json"));
        }
        return json_pack("{s:o}", "resources", res);
}

static json_t *mcp_resources_read(struct mcp *m, const json_t *params, struct mcp_err *e,
                                  json_t **ret_data)
{
        const char *uri = json_string_value(json_object_get(params, "uri"));
        _cleanup_json_ json_t *b = NULL;
        _cleanup_free_ char *text = NULL;
        const char *id;
        char name[NAME_MAX + 1];
        hd_verdict v;

        e->code = RPC_INVALID_PARAMS;
        if (!uri) {
                snprintf(e->msg, sizeof(e->msg), "Invalid params: 'uri' must be a string");
                return NULL;
        }
        id = strncmp(uri, MCP_URI_PREFIX, strlen(MCP_URI_PREFIX)) ? NULL
                                                                 : uri + strlen(MCP_URI_PREFIX);
        char err[512];

        if (!m->inbox_ops)
                inbox_reopen(&m->ib);
        /* What handoff_take would give: a file that would be refused
         * (planted, copied from another agent, stale) is not found. */
        if (!id || !hd_id_valid(id) || hd_bootstrap_name(id, name, sizeof(name)) < 0 ||
            (m->inbox_ops ? m->inbox_ops->peek(m, id, &b, err, sizeof(err)) < 0
                          : m->ib.fd < 0 ||
                            hd_consume_peek(m->ib.fd, name, &m->copts, hd_now_usec(), &b, &v) < 0) ||
            strcmp(json_string_value(json_object_get(b, "handoff_id")) ?: "", id)) {
                snprintf(e->msg, sizeof(e->msg), "Resource not found");
                *ret_data = json_pack("{s:s}", "uri", uri);
                return NULL;
        }
        text = json_dumps(b, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (!text) {
                e->code = RPC_INTERNAL_ERROR;
                snprintf(e->msg, sizeof(e->msg), "Internal error: out of memory");
                return NULL;
        }
        return json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri,
                         "mimeType", "application/json", "text", text);
}

static json_t *mcp_templates_list(void)
{
        return json_pack("{s:[{s:s, s:s, s:s, s:s, s:s}]}", "resourceTemplates",
                         "uriTemplate", MCP_URI_PREFIX "{handoff_id}", "name", "inbox",
                         "title", "A handoff waiting for this agent",
                         "description", "The bootstrap of a delivered handoff, as JSON; reading it does not take it",
                         "mimeType", "application/json");
}

/* ---- dispatch --------------------------------------------------------- */

static json_t *mcp_request(struct mcp *m, const char *method, const json_t *id,
                           const json_t *params)
{
        struct mcp_err e = { .code = RPC_INTERNAL_ERROR, .msg = "Internal error" };
        json_t *result = NULL, *data = NULL;

        if (!strcmp(method, "initialize"))
                result = mcp_initialize(m, params);
        else if (!strcmp(method, "ping"))
                result = json_object();
        else if (!strcmp(method, "tools/list"))
                result = json_pack("{s:O}", "tools", m->tools);
        else if (!strcmp(method, "tools/call")) {
                if (mcp_tools_call(m, params, &result, &e) < 0)
                        result = NULL;
        } else if (!strcmp(method, "resources/list"))
                result = mcp_resources_list(m, &e);
        else if (!strcmp(method, "resources/read"))
                result = mcp_resources_read(m, params, &e, &data);
        else if (!strcmp(method, "resources/templates/list"))
                result = mcp_templates_list();
        else {
                e.code = RPC_METHOD_NOT_FOUND;
                snprintf(e.msg, sizeof(e.msg), "Method not found: %.128s", method);
        }
        if (result)
                return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
        return mcp_error_new(id, e.code, e.msg, data);
}

int mcp_parse(const char *buf, size_t len, json_t **ret_msg, enum mcp_kind *ret_kind,
              json_t **ret_err)
{
        _cleanup_json_ json_t *msg = NULL;
        const json_t *id, *params;
        const char *method;
        hd_limits lim = { .max_size = MCP_MAX_MESSAGE };
        hd_verdict v;
        char text[400];
        int r;

        *ret_err = NULL;
        r = hd_parse(buf, len, &lim, &msg, &v);
        if (r == -EBADMSG && v.reason == HD_R_BAD_TYPE) {
                *ret_err = mcp_error_new(NULL, RPC_INVALID_REQUEST,
                                         "Invalid Request: a message is one JSON object (no batches)", NULL);
                return -EINVAL;
        }
        if (r < 0) {
                snprintf(text, sizeof(text), "Parse error: %s", r == -EBADMSG ? v.detail : strerror(-r));
                *ret_err = mcp_error_new(NULL, RPC_PARSE_ERROR, text, NULL);
                return -EINVAL;
        }
        id = json_object_get(msg, "id");
        method = json_string_value(json_object_get(msg, "method"));
        params = json_object_get(msg, "params");
        if (id && !json_is_string(id) && !json_is_integer(id)) {
                *ret_err = mcp_error_new(NULL, RPC_INVALID_REQUEST,
                                         "Invalid Request: id must be a string or an integer", NULL);
                return -EINVAL;
        }
        if (!method) {
                if (!json_object_get(msg, "method") && id &&
                    (json_object_get(msg, "result") || json_object_get(msg, "error"))) {
                        *ret_kind = MCP_RESPONSE;
                        *ret_msg = TAKE_PTR(msg);
                        return 0;
                }
                *ret_err = mcp_error_new(id, RPC_INVALID_REQUEST, "Invalid Request: no method", NULL);
                return -EINVAL;
        }
        if (!json_is_string(json_object_get(msg, "jsonrpc")) ||
            strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0")) {
                if (id)
                        *ret_err = mcp_error_new(id, RPC_INVALID_REQUEST,
                                                 "Invalid Request: jsonrpc must be \"2.0\"", NULL);
                return -EINVAL;
        }
        if (params && !json_is_object(params)) {
                if (id)
                        *ret_err = mcp_error_new(id, RPC_INVALID_PARAMS,
                                                 "Invalid params: params must be an object", NULL);
                return -EINVAL;
        }
        *ret_kind = id ? MCP_REQUEST : MCP_NOTIFICATION;
        *ret_msg = TAKE_PTR(msg);
        return 0;
}

int mcp_handle(struct mcp *m, const json_t *msg, json_t **ret)
{
        const json_t *id = json_object_get(msg, "id");
        const char *method = json_string_value(json_object_get(msg, "method"));

        *ret = NULL;
        if (!method)
                return 0;       /* a response: we send no requests */
        if (!id) {
                /* notifications: nothing is answered */
                if (!strcmp(method, "notifications/initialized"))
                        m->initialized = true;
                return 0;
        }
        *ret = mcp_request(m, method, id, json_object_get(msg, "params"));
        return *ret ? 0 : -ENOMEM;
}

int mcp_message(struct mcp *m, const char *buf, size_t len, json_t **ret)
{
        _cleanup_json_ json_t *msg = NULL;
        enum mcp_kind kind;

        if (mcp_parse(buf, len, &msg, &kind, ret) < 0)
                return 0;
        return mcp_handle(m, msg, ret);
}
