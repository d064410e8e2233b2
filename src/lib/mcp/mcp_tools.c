/* The MCP server's tools: send, list, take, follow and complete handoffs.  Each has
 * a JSON Schema for its arguments (checked before it runs: a mismatch is a
 * JSON-RPC invalid-params error) and for its structured result; what goes
 * wrong while it runs is a result with isError and a one-line reason. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "complete.h"
#include "items.h"
#include "mcp.h"
#include "submit.h"
#include "util.h"

struct mcp_tool {
        const char *name, *title, *description;
        const char *input, *output;     /* schemas, ' for " (mcp_json()) */
        int (*fn)(struct mcp *m, const json_t *args, json_t **ret);
};

/* ---- results ---------------------------------------------------------- */

static json_t *tool_result(json_t *structured, const char *text)
{
        json_t *r = json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text",
                              "text", text, "structuredContent", structured,
                              "isError", 0);
        return r;
}

_printf_(1, 2) static json_t *tool_error(const char *fmt, ...)
{
        char msg[768];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        utf8_fix(msg);  /* a truncated message may end inside a character */
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", msg,
                         "isError", 1);
}

static const char *arg_str(const json_t *args, const char *k)
{
        return json_string_value(json_object_get(args, k));
}

/* ---- handoff_send ----------------------------------------------------- */

static int tool_send(struct mcp *m, const json_t *args, json_t **ret)
{
        const json_t *payload = json_object_get(args, "payload");
        const json_t *ttl = json_object_get(args, "ttl_seconds");
        _cleanup_free_ char *buf = NULL;
        char id[SUBMIT_ID_MAX], text[512];
        struct submit_err e;
        size_t len;
        int r;

        struct submit_req rq = {
                .from = m->agent,
                .to = arg_str(args, "to_agent"),
                .reason = arg_str(args, "reason"),
                .context = arg_str(args, "context"),
                .kid = m->kid,
                .type = arg_str(args, "payload_type"),
                .payload = payload,
                .transcript = json_object_get(args, "transcript"),
                .ttl = ttl ? json_integer_value(ttl) : SUBMIT_DEFAULT_TTL,
        };
        if (!!rq.type != !!payload) {
                *ret = tool_error("payload_type and payload go together");
                return 0;
        }
        if (!m->key) {
                *ret = tool_error("no signing key: %s", m->key_error);
                return 0;
        }
        r = submit_build(&rq, m->key, &buf, &len, id, &e);
        if (r == 0 && m->publish)
                r = e.code = m->publish(m, id, buf, len, e.msg, sizeof(e.msg));
        else if (r == 0)
                r = submit_publish(m->cfg->spool_dir, id, buf, len, false, &e);
        if (r != 0) {
                *ret = tool_error("%s", e.msg);
                return 0;
        }
        snprintf(text, sizeof(text), "Sent handoff %s to %s. Follow it with handoff_status.",
                 id, rq.to);
        *ret = tool_result(json_pack("{s:s, s:s, s:s}", "handoff_id", id, "from_agent", m->agent,
                                     "to_agent", rq.to), text);
        return 0;
}

/* ---- handoff_inbox ---------------------------------------------------- */

static int tool_inbox(struct mcp *m, const json_t *args, json_t **ret)
{
        _cleanup_json_ json_t *list = NULL;
        _cleanup_free_ char *text = NULL;
        size_t size = 0, i, more = 0;
        FILE *f;
        json_t *e;
        int r;

        if (m->inbox_ops) {
                char err[512];
                r = m->inbox_ops->list(m, &list, &more, err, sizeof(err));
                if (r < 0) {
                        *ret = tool_error("%s", err);
                        return 0;
                }
        } else {
                inbox_reopen(&m->ib);
                r = inbox_list(&m->ib, hd_now_usec(), &list, &more);
                if (r < 0) {
                        *ret = tool_error("%s: %s", m->ib.dir, strerror(-r));
                        return 0;
                }
        }
        f = open_memstream(&text, &size);
        if (!f)
                return -errno;
        if (json_array_size(list) == 0)
                fprintf(f, "No handoffs waiting for %s.", m->agent);
        else
                fprintf(f, "%zu handoff%s waiting for %s (oldest first):", json_array_size(list),
                        json_array_size(list) == 1 ? "" : "s", m->agent);
        json_array_foreach(list, i, e) {
                fprintf(f, "\n- ");
                inbox_text(f, e);
        }
        /* only the oldest are read (inbox_list()): the rest counted */
        if (more)
                fprintf(f, "\n%zu more waiting, not shown (handoff_take takes the oldest first).", more);
        if (fclose(f) != 0)
                return -ENOMEM;
        *ret = tool_result(json_pack("{s:O, s:I}", "handoffs", list, "not_shown", (json_int_t)more),
                           text);
        return 0;
}

/* ---- handoff_take ----------------------------------------------------- */

static int tool_take(struct mcp *m, const json_t *args, json_t **ret)
{
        static const char *const copy[] = { "handoff_id", "from_agent", "reason",
                                            "resume_context", "accepted_at",
                                            "payload_type", "payload" };
        const char *id = arg_str(args, "handoff_id");
        _cleanup_json_ json_t *b = NULL;
        hd_verdict v = { 0 };
        _cleanup_free_ char *text = NULL;
        json_t *out;
        int r;

        if (id && !hd_id_valid(id)) {
                *ret = tool_error("'%.128s' is not a handoff_id", id);
                return 0;
        }
        char err[512] = "";

        if (m->inbox_ops) {
                r = m->inbox_ops->take(m, id, &b, &v, err, sizeof(err));
        } else {
                inbox_reopen(&m->ib);
                r = m->ib.fd < 0 ? -ENOTDIR
                                 : hd_consume_with(m->ib.fd, id, &m->copts, hd_now_usec(), &b, &v);
                snprintf(err, sizeof(err), "%s: %s", m->ib.dir, strerror(-r));
        }
        if (r == -ENOTDIR) {
                *ret = tool_error("%s does not exist (yet): no handoffs", m->ib.dir);
                return 0;
        }
        if (r == -ENOENT) {
                *ret = id ? tool_error("no handoff %s is waiting for %s", id, m->agent)
                          : tool_error("no handoff is waiting for %s", m->agent);
                return 0;
        }
        if (r == -ESTALE) {
                *ret = tool_error("handoff %s is older than the resume window (%llds): left for the daemon to expire",
                                  id, (long long)m->ib.window);
                return 0;
        }
        if (r == -EBADMSG) {
                *ret = tool_error("handoff %s refused: %s: %s", id ? id : "(oldest)",
                                  hd_reason_name(v.reason), v.detail);
                return 0;
        }
        if (r < 0) {
                *ret = tool_error("%s", err);
                return 0;
        }
        out = json_object();
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(copy); i++) {
                json_t *x = json_object_get(b, copy[i]);
                if (x)
                        json_object_set(out, copy[i], x);
        }
        if (asprintf(&text, "Took handoff %s from %s (%s):\n\n%s",
                     json_string_value(json_object_get(b, "handoff_id")),
                     arg_str(b, "from_agent") ?: "another agent", arg_str(b, "reason") ?: "no reason given",
                     arg_str(b, "resume_context")) < 0) {
                json_decref(out);
                return -ENOMEM;
        }
        *ret = tool_result(out, text);
        return 0;
}

/* ---- handoff_complete ------------------------------------------------- */

/* What handoff_complete answers once r and out say what the daemon did. */
static json_t *complete_result(const char *id, const char *status, int r,
                               const struct complete_out *out)
{
        char text[1024];

        if (r != AG_OK)
                return tool_error("%s", out->msg);
        snprintf(text, sizeof(text), "Reported handoff %s as %s; the daemon recorded it "
                 "(its sender sees it with handoff_status).", id, status);
        return tool_result(json_pack("{s:s, s:s, s:b}", "handoff_id", id, "status",
                                     status, "recorded", 1), text);
}

static int tool_complete(struct mcp *m, const json_t *args, json_t **ret)
{
        const char *id = arg_str(args, "handoff_id");
        hd_result res = {
                .text = arg_str(args, "text"),
                .data = json_object_get(args, "data"),
                .failed = arg_str(args, "failed"),
                .input_required = arg_str(args, "input_required"),
        };
        struct complete_out out;
        int r;

        if (!hd_id_valid(id)) {
                *ret = tool_error("'%.128s' is not a handoff_id", id);
                return 0;
        }
        if (res.text && res.data) {
                *ret = tool_error("text or data, not both");
                return 0;
        }
        if (res.input_required && (res.text || res.failed)) {
                *ret = tool_error("input_required is the question: not with text or failed");
                return 0;
        }
        if (!m->key) {
                *ret = tool_error("no signing key: %s", m->key_error);
                return 0;
        }
        if (m->inbox_ops) {
                /* handoffd writes it; the transport waits for its word */
                r = m->inbox_ops->complete(m, id, &res, &out);
                if (r != AG_OK) {
                        *ret = tool_error("%s", out.msg);
                        return 0;
                }
                m->later = (struct mcp_later){ .on = true, .status = complete_status(&res) };
                snprintf(m->later.id, sizeof(m->later.id), "%s", id);
                *ret = complete_result(id, m->later.status, r, &out);
                return 0;
        }
        inbox_reopen(&m->ib);
        if (m->ib.fd < 0) {
                *ret = tool_error("%s does not exist: this agent consumed nothing", m->ib.dir);
                return 0;
        }
        if (!m->complete_deferred) {
                r = complete_run(m->ib.dir, m->ib.fd, id, m->agent, &res, m->key, m->cfg->fsync,
                                 m->complete_wait_ms, &out);
                *ret = complete_result(id, complete_status(&res), r, &out);
                return 0;
        }
        r = complete_write(m->ib.dir, m->ib.fd, id, m->agent, &res, m->key, m->cfg->fsync, &out);
        if (r != AG_OK) {
                *ret = tool_error("%s", out.msg);
                return 0;
        }
        /* the transport waits for the daemon, then mcp_complete_finish() */
        m->later = (struct mcp_later){ .on = true, .status = complete_status(&res) };
        snprintf(m->later.id, sizeof(m->later.id), "%s", id);
        *ret = complete_result(id, m->later.status, r, &out);
        return 0;
}

bool mcp_complete_taken(const struct mcp *m, struct mcp_later *l)
{
        if (!m->inbox_ops)
                return m->ib.fd < 0 || complete_taken(m->ib.fd, l->id);
        /* the daemon's word is read once: it removes a refusal it gives */
        if (!l->have_word)
                l->have_word = m->inbox_ops->word(m, l->id, l->status, &l->word.code,
                                                  l->word.msg, sizeof(l->word.msg));
        return l->have_word;
}

int mcp_complete_finish(const struct mcp *m, struct mcp_later *l, const json_t *rpc_id,
                        json_t **ret)
{
        struct complete_out out;
        json_t *result;
        int r;

        if (m->inbox_ops && mcp_complete_taken(m, l)) {
                out.code = r = l->word.code;
                snprintf(out.msg, sizeof(out.msg), "%s", l->word.msg);
        } else if (m->inbox_ops) {
                out.code = r = AG_STALE;
                snprintf(out.msg, sizeof(out.msg), "%s: result written for handoffd, which has "
                         "not taken it yet: it will when it runs", l->id);
        } else
                r = complete_answer(m->ib.dir, m->ib.fd, l->id, l->status, &out);
        result = complete_result(l->id, l->status, r, &out);
        if (!result)
                return -ENOMEM;
        *ret = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", rpc_id, "result", result);
        return *ret ? 0 : -ENOMEM;
}

/* ---- handoff_status --------------------------------------------------- */

static int tool_status(struct mcp *m, const json_t *args, json_t **ret)
{
        static const char *const copy[] = { "from_agent", "to_agent", "reason", "detail",
                                            "at", "expires_at", "accepted_at", "relayed_to",
                                            "remote_outcome", "remote_host", "remote_at",
                                            "remote_reason", "remote_detail" };
        const char *id = arg_str(args, "handoff_id");
        _cleanup_json_ json_t *it = NULL;
        char text[768];
        json_t *out;
        int r;

        if (!hd_id_valid(id)) {
                *ret = tool_error("'%.128s' is not a handoff_id", id);
                return 0;
        }
        r = items_find(m->cfg->spool_dir, id, &it);
        if (r == -ENOENT) {
                *ret = tool_error("no handoff %s in the spool (never submitted, or pruned)", id);
                return 0;
        }
        if (r < 0) {
                *ret = tool_error("%s: %s", m->cfg->spool_dir, strerror(-r));
                return 0;
        }
        out = json_pack("{s:s, s:s}", "handoff_id", id, "status", items_status(it));
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(copy); i++) {
                const char *s = arg_str(it, copy[i]);
                if (s && *s)
                        json_object_set_new(out, copy[i], json_string(s));
        }
        /* what its agent reported, if it did (handoff_complete) */
        const json_t *res = json_object_get(it, "result");
        if (res)
                json_object_set(out, "result", (json_t *)res);
        if (arg_str(it, "reason"))
                snprintf(text, sizeof(text), "%s: %s (%s: %s)", id, items_status(it),
                         esc_line(arg_str(it, "reason")), esc_line(arg_str(it, "detail")) ?: "");
        else if (arg_str(it, "remote_outcome"))
                snprintf(text, sizeof(text), "%s: relayed to %s, there %s%s%s", id,
                         esc_line(arg_str(it, "remote_host")) ?: "", arg_str(it, "remote_outcome"),
                         *(arg_str(it, "remote_reason") ?: "") ? ": " : "",
                         esc_line(arg_str(it, "remote_reason")) ?: "");
        else if (res)
                snprintf(text, sizeof(text), "%s: %s; %s reported it %s%s%s%s%s", id,
                         items_status(it), arg_str(res, "agent") ?: "its agent",
                         arg_str(res, "status") ?: "completed",
                         arg_str(res, "reason") ? ": " : "",
                         arg_str(res, "reason") ? esc_line(arg_str(res, "reason")) : "",
                         arg_str(res, "text") ? ": " : "",
                         arg_str(res, "text") ? esc_text(arg_str(res, "text")) : "");
        else
                snprintf(text, sizeof(text), "%s: %s", id, items_status(it));
        utf8_fix(text);
        *ret = tool_result(out, text);
        return 0;
}

/* ---- the table -------------------------------------------------------- */

static const struct mcp_tool mcp_tool_table[] = {
        {
                "handoff_send", "Send a handoff",
                "Hand work over to another agent: a handoff from this agent, signed "
                "with its key and dropped into the spool; the daemon delivers it to "
                "to_agent. Returns the handoff_id (follow it with handoff_status). "
                "Refused with the reason when a field or the payload does not validate.",
                "{'type':'object','properties':{"
                "'to_agent':{'type':'string','description':'The agent that takes over ([a-z0-9][a-z0-9_-]*)'},"
                "'reason':{'type':'string','minLength':1,'description':'Why it is handed over, in a line'},"
                "'context':{'type':'string','description':'What the receiver resumes from: the state of the work, in prose'},"
                "'transcript':{'type':'array','maxItems':1000,'description':'The conversation so far',"
                "'items':{'type':'object','properties':{'role':{'type':'string','enum':['user','assistant','system']},"
                "'text':{'type':'string'}},'required':['role','text']}},"
                "'payload_type':{'type':'string','enum':['vox/1.0','baton/1','U.AgentHandoff/0.1.0','act/1.0'],"
                "'description':'A structured payload format; needs payload'},"
                "'payload':{'type':['object','string'],'description':'The payload of payload_type (act/1.0: the XML text)'},"
                "'ttl_seconds':{'type':'integer','minimum':1,'maximum':31622400,"
                "'description':'How long the handoff stays valid (default 60)'}},"
                "'required':['to_agent','reason'],'additionalProperties':false}",
                "{'type':'object','properties':{'handoff_id':{'type':'string'},"
                "'from_agent':{'type':'string'},'to_agent':{'type':'string'}},"
                "'required':['handoff_id','to_agent']}",
                tool_send,
        },
        {
                "handoff_inbox", "List waiting handoffs",
                "The handoffs delivered to this agent and not taken yet, oldest first: "
                "id, sender, reason, age and seconds left to take it; at most the oldest "
                "100, not_shown says how many more wait. Takes nothing.",
                "{'type':'object','properties':{},'additionalProperties':false}",
                "{'type':'object','properties':{'handoffs':{'type':'array','items':{'type':'object',"
                "'properties':{'handoff_id':{'type':'string'},'from_agent':{'type':'string'},"
                "'reason':{'type':'string'},'accepted_at':{'type':'string'},'payload_type':{'type':'string'},"
                "'age_s':{'type':'integer'},'seconds_left':{'type':'integer'}},"
                "'required':['handoff_id','age_s','seconds_left']}},'not_shown':{'type':'integer'}},"
                "'required':['handoffs']}",
                tool_inbox,
        },
        {
                "handoff_take", "Take a handoff",
                "Take over a handoff delivered to this agent: the one of handoff_id, or the "
                "oldest. Returns what to resume from. Once taken it is gone: of two takers "
                "exactly one gets it.",
                "{'type':'object','properties':{'handoff_id':{'type':'string',"
                "'description':'Which one (default: the oldest)'}},'additionalProperties':false}",
                "{'type':'object','properties':{'handoff_id':{'type':'string'},'from_agent':{'type':'string'},"
                "'reason':{'type':'string'},'resume_context':{'type':'string'},'accepted_at':{'type':'string'},"
                "'payload_type':{'type':'string'},'payload':{'type':['object','string']}},"
                "'required':['handoff_id','resume_context']}",
                tool_take,
        },
        {
                "handoff_status", "Where a handoff is",
                "What became of a handoff: pending (not claimed yet), claimed (delivered, "
                "not taken), consumed, expired, rejected (with the reason) or relayed to another host; "
                "and the result its agent reported, once it did.",
                "{'type':'object','properties':{'handoff_id':{'type':'string'}},"
                "'required':['handoff_id'],'additionalProperties':false}",
                "{'type':'object','properties':{'handoff_id':{'type':'string'},"
                "'status':{'type':'string','description':'pending, claimed, consumed, expired, rejected or relayed'},"
                "'reason':{'type':'string'},'detail':{'type':'string'},'from_agent':{'type':'string'},"
                "'to_agent':{'type':'string'},'at':{'type':'string'},'expires_at':{'type':'string'},"
                "'accepted_at':{'type':'string'},"
                "'relayed_to':{'type':'string'},"
                "'remote_outcome':{'type':'string','description':'relayed: the outcome on the receiving host (delivered, consumed, expired, rejected), from its signed receipt'},"
                "'remote_host':{'type':'string'},'remote_at':{'type':'string'},"
                "'remote_reason':{'type':'string'},'remote_detail':{'type':'string'},"
                "'result':{'type':'object','description':'What the agent that consumed it reported (handoff_complete)',"
                "'properties':{'status':{'type':'string','enum':['completed','failed','input_required']},'agent':{'type':'string'},"
                "'completed_at':{'type':'string'},'recorded_at':{'type':'string'},'text':{'type':'string'},"
                "'data':{'description':'Any JSON value'},'reason':{'type':'string'},'kid':{'type':'string'}},"
                "'required':['status','agent']}},'required':['handoff_id','status']}",
                tool_status,
        },
        {
                "handoff_complete", "Report the result of a handoff",
                "Say what came of a handoff this agent took (handoff_take): completed, with "
                "its result as text or as JSON data, or failed with the reason. Signed with "
                "this agent's key; the daemon records it with the handoff, and its sender "
                "reads it (handoff_status, A2A). The first result of a handoff stands; refused "
                "with the reason when the handoff is not one this agent took.",
                "{'type':'object','properties':{"
                "'handoff_id':{'type':'string','description':'The handoff taken'},"
                "'text':{'type':'string','description':'The result, in prose'},"
                "'data':{'description':'The result as JSON, any value (instead of text)'},"
                "'failed':{'type':'string','minLength':1,'maxLength':1024,"
                "'description':'The work failed: why (omit when it was done)'},"
                "'input_required':{'type':'string','minLength':1,"
                "'description':'A question for the sender, asked before the work goes on "
                "(instead of text); the answer comes as a new handoff of the same task'}},"
                "'required':['handoff_id'],'additionalProperties':false}",
                "{'type':'object','properties':{'handoff_id':{'type':'string'},"
                "'status':{'type':'string','enum':['completed','failed','input_required']},"
                "'recorded':{'type':'boolean'}},"
                "'required':['handoff_id','status','recorded']}",
                tool_complete,
        },
};

int mcp_tools_new(json_t **ret)
{
        json_t *arr = json_array();

        if (!arr)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(mcp_tool_table); i++) {
                const struct mcp_tool *t = &mcp_tool_table[i];
                json_t *in = mcp_json(t->input), *out = mcp_json(t->output);
                if (!in || !out ||
                    json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", t->name,
                                                         "title", t->title, "description", t->description,
                                                         "inputSchema", in, "outputSchema", out)) < 0) {
                        json_decref(arr);
                        return -EINVAL;
                }
        }
        *ret = arr;
        return 0;
}

int mcp_tools_call(struct mcp *m, const json_t *params, json_t **ret,
                   struct mcp_err *e)
{
        const char *name = json_string_value(json_object_get(params, "name"));
        const json_t *args = json_object_get(params, "arguments");
        _cleanup_json_ json_t *empty = NULL;
        char err[384];
        size_t i;

        if (!name) {
                e->code = RPC_INVALID_PARAMS;
                snprintf(e->msg, sizeof(e->msg), "Invalid params: 'name' must be a string");
                return e->code;
        }
        for (i = 0; i < ELEMENTSOF(mcp_tool_table); i++)
                if (!strcmp(mcp_tool_table[i].name, name))
                        break;
        if (i == ELEMENTSOF(mcp_tool_table)) {
                e->code = RPC_INVALID_PARAMS;
                snprintf(e->msg, sizeof(e->msg), "Unknown tool: %.128s", name);
                return e->code;
        }
        if (!args && !(args = empty = json_object())) {
                e->code = RPC_INTERNAL_ERROR;
                snprintf(e->msg, sizeof(e->msg), "Internal error: out of memory");
                return e->code;
        }
        if (mcp_schema_check(json_object_get(json_array_get(m->tools, i), "inputSchema"),
                             args, "arguments", err, sizeof(err)) < 0) {
                e->code = RPC_INVALID_PARAMS;
                snprintf(e->msg, sizeof(e->msg), "Invalid params: %s", err);
                return e->code;
        }
        int r = mcp_tool_table[i].fn(m, args, ret);
        if (r < 0 || !*ret) {
                e->code = RPC_INTERNAL_ERROR;
                snprintf(e->msg, sizeof(e->msg), "Internal error: %s: %s", name,
                         strerror(r < 0 ? -r : ENOMEM));
                return e->code;
        }
        return 0;
}
