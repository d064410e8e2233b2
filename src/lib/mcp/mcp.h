/* The Model Context Protocol server of one agent, without its transport:
 * JSON-RPC 2.0 messages in, answers out as JSON (mcp_rpc.c: the lifecycle,
 * the dispatch and the resources), the tools (mcp_tools.c) and the JSON
 * Schema subset their arguments are checked against (mcp_schema.c).
 * handoffctl mcp carries it over stdio (src/handoffctl/cmd_mcp.c),
 * handoff-hubd over Streamable HTTP at /mcp (src/hubd/hub_mcp.c). */
#ifndef MCP_H
#define MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "handoff.h"
#include "inbox.h"

/* JSON-RPC 2.0 error codes */
#define RPC_PARSE_ERROR      -32700
#define RPC_INVALID_REQUEST  -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS   -32602
#define RPC_INTERNAL_ERROR   -32603

#define MCP_MAX_MESSAGE (1024 * 1024)
#define MCP_URI_PREFIX "handoff://inbox/"
/* How long handoff_complete waits for the daemon's word, by default. */
#define MCP_COMPLETE_WAIT_MS 10000

/* The protocol versions we speak, newest first (mcp_rpc.c). */
extern const char *const mcp_versions[];
extern const size_t mcp_n_versions;

struct mcp;
struct complete_out;
/* A handoff_complete whose result waits for the daemon's word. */
struct mcp_later {
        bool on;
        const char *status;     /* complete_status(): a static string */
        char id[256];
        bool have_word;         /* inbox_ops: word holds the daemon's word */
        struct { int code; char msg[768]; } word;
};

/* Where the inbox's tools and resources act.  NULL: on m->ib, which this
 * process opens itself (handoffctl mcp, as the agent's user).  The hub's
 * ask handoffd, which owns each agent's handoffs/ (src/hubd/hub_inboxd.c).
 * Each fails with -errno and the line to say in err: -ENOTDIR when the
 * agent has no handoffs/ yet; take and peek -ENOENT (none), -ESTALE (past
 * the resume window) or -EBADMSG (v says why) as hd_consume_with(). */
struct mcp_inbox_ops {
        int (*list)(const struct mcp *m, json_t **ret, size_t *ret_more, char *err, size_t errlen);
        int (*take)(const struct mcp *m, const char *id, json_t **ret, hd_verdict *v, char *err,
                    size_t errlen);
        int (*peek)(const struct mcp *m, const char *id, json_t **ret, char *err, size_t errlen);
        /* complete_write()'s, into out: its code */
        int (*complete)(const struct mcp *m, const char *id, const hd_result *res,
                        struct complete_out *out);
        /* Has the daemon taken id's result?  Then its word (complete_answer()'s)
         * in *ret_code and msg. */
        bool (*word)(const struct mcp *m, const char *id, const char *status, int *ret_code,
                     char *msg, size_t msglen);
};
/* Where handoff_send's document goes: 0, or an AG_* code with one line
 * in err.  NULL: submit_publish() into cfg's spool. */
typedef int (*mcp_publish_fn)(struct mcp *m, const char *id, const char *buf, size_t len,
                              char *err, size_t errlen);

struct mcp {
        struct config *cfg;
        const char *agent;
        const char *kid;        /* the kid of sent handoffs, or NULL */
        const hd_key *key;      /* signing key, or NULL (key_error says why) */
        char key_error[512];
        struct inbox ib;
        const struct mcp_inbox_ops *inbox_ops;  /* NULL: ib, directly */
        hd_consume_opts copts;  /* handoff_take: window, caps, proof of origin */
        const json_t *tools;    /* the tools/list array (mcp_tools_new()) */
        mcp_publish_fn publish;
        void *userdata;         /* the transport's, for publish */
        int64_t complete_wait_ms;       /* handoff_complete's wait; 0: none */
        /* handoff_complete only writes the result, and the transport
         * waits for the daemon's word (see mcp_complete_finish()) */
        bool complete_deferred;
        struct mcp_later later;
        const char *server_name;        /* serverInfo.name */
        /* the state of the session */
        bool initialized;       /* notifications/initialized was seen */
        char version[16];       /* the one initialize agreed on; "": none yet */
};

/* What a message is (mcp_parse()'s). */
enum mcp_kind {
        MCP_REQUEST,
        MCP_NOTIFICATION,
        MCP_RESPONSE,           /* to a request of ours: we send none */
};

/* A message parsed: 0 with *ret_msg and *ret_kind, or -EINVAL with
 * *ret_err the error answer (no JSON, a batch, no method, a bad id) or
 * NULL when nothing is to be answered (a notification that is not
 * JSON-RPC 2.0). */
int mcp_parse(const char *buf, size_t len, json_t **ret_msg, enum mcp_kind *ret_kind,
              json_t **ret_err);
/* What msg asks, done: *ret the answer of a request, NULL for a
 * notification or a response.  0 or -ENOMEM. */
int mcp_handle(struct mcp *m, const json_t *msg, json_t **ret);
/* The two together, for one message of len bytes. */
int mcp_message(struct mcp *m, const char *buf, size_t len, json_t **ret);
/* A JSON-RPC error answer (id NULL: null). */
json_t *mcp_error_new(const json_t *id, int code, const char *msg, json_t *data);
/* A notification without params. */
json_t *mcp_notification_new(const char *method);
/* Is v one of mcp_versions? */
bool mcp_version_known(const char *v);

/* The tool table (schemas parsed once): 0 with *ret, -ENOMEM or -EINVAL. */
int mcp_tools_new(json_t **ret);
/* A JSON-RPC error for a request: code and one line. */
struct mcp_err {
        int code;
        char msg[512];
};
/* tools/call: 0 with *ret the CallToolResult (isError set for a tool
 * error), or a negative JSON-RPC code with e filled (unknown tool,
 * arguments that do not match the tool's inputSchema). */
int mcp_tools_call(struct mcp *m, const json_t *params, json_t **ret,
                   struct mcp_err *e);

/* With complete_deferred, a handoff_complete that wrote its result sets
 * m->later.on (the transport takes it and clears it); its answer is then made by mcp_complete_finish() (the
 * answer mcp_handle() gave is dropped): once mcp_complete_taken() says
 * the daemon took the result, or when the transport's time is up (the
 * answer then says it was not taken yet).  0 with *ret the JSON-RPC
 * answer to rpc_id, or -ENOMEM. */
bool mcp_complete_taken(const struct mcp *m, struct mcp_later *l);
int mcp_complete_finish(const struct mcp *m, struct mcp_later *l, const json_t *rpc_id,
                        json_t **ret);

/* Does v match schema (the subset the tools use: type, properties,
 * required, additionalProperties false, items, enum, minimum, maximum,
 * minLength, maxLength, maxItems)?  0, or -EINVAL with one line in err
 * naming the place ("arguments.ttl_seconds: not an integer"). */
int mcp_schema_check(const json_t *schema, const json_t *v, const char *where,
                     char *err, size_t errlen);

/* A JSON document written with ' for " (readable schemas in C). */
json_t *mcp_json(const char *single_quoted);

#endif
