/* handoffctl mcp: a Model Context Protocol server over stdio for one agent.
 * cmd_mcp.c owns the transport (JSON-RPC 2.0, one message per line), the
 * lifecycle and the resources; mcp_tools.c the tools; mcp_schema.c the
 * JSON Schema subset their arguments are checked against. */
#ifndef HANDOFFCTL_MCP_H
#define HANDOFFCTL_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"
#include "handoff.h"
#include "inbox.h"

/* JSON-RPC 2.0 error codes */
#define RPC_PARSE_ERROR      -32700
#define RPC_INVALID_REQUEST  -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS   -32602
#define RPC_INTERNAL_ERROR   -32603

struct mcp {
        struct config *cfg;
        const char *agent;
        const char *kid;        /* --kid, or NULL */
        hd_key *key;            /* signing key, or NULL (key_error says why) */
        char key_error[512];
        struct inbox ib;
        hd_consume_opts copts;  /* handoff_take: window, caps, proof of origin */
        int ifd;                /* inotify: the inbox */
        bool initialized;       /* notifications/initialized was seen */
        json_t *tools;          /* the tools/list array */
        FILE *out;              /* where answers go, one per line: stdout */
};

/* A JSON-RPC error for a request: code and one line. */
struct mcp_err {
        int code;
        char msg[512];
};

/* The server for m->agent (and m->kid, m->out: stdout when NULL) without
 * its transport: the configuration conf (NULL: the default), the inbox,
 * the checks of a take, the signing key (key, else the configuration's),
 * the tools.  Returns 0 or a CTL_EXIT_* code (printed).  mcp_close()
 * frees it either way. */
int mcp_open(struct mcp *m, const char *conf, const char *key);
void mcp_close(struct mcp *m);
/* One message (a line without its newline, not blank), as read from
 * stdin: what it asks is done and answered on m->out (a notification or
 * a response gets nothing).  Returns 0, or -errno when the answer could
 * not be written. */
int mcp_message(struct mcp *m, const char *line, size_t len);

/* Build the tool table (schemas parsed once).  -ENOMEM or -EINVAL. */
int mcp_tools_init(struct mcp *m);
/* tools/call: 0 with *ret the CallToolResult (isError set for a tool
 * error), or a negative JSON-RPC code with e filled (unknown tool,
 * arguments that do not match the tool's inputSchema). */
int mcp_tools_call(struct mcp *m, const json_t *params, json_t **ret,
                   struct mcp_err *e);

/* Does v match schema (the subset the tools use: type, properties,
 * required, additionalProperties false, items, enum, minimum, maximum,
 * minLength, maxLength, maxItems)?  0, or -EINVAL with one line in err
 * naming the place ("arguments.ttl_seconds: not an integer"). */
int mcp_schema_check(const json_t *schema, const json_t *v, const char *where,
                     char *err, size_t errlen);

/* A JSON document written with ' for " (readable schemas in C). */
json_t *mcp_json(const char *single_quoted);

#endif
