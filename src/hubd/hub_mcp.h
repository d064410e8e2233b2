/* /mcp (hub_mcp.c): MCP's Streamable HTTP transport over the tool table
 * of src/lib/mcp/. */
#ifndef HUBD_HUB_MCP_H
#define HUBD_HUB_MCP_H

#include <stdbool.h>
#include <stdint.h>

#include "hub.h"

#define HUB_MCP_PATH "/mcp"
#define HUB_MCP_DEFAULT_SESSIONS 8      /* [hub] mcp_sessions_per_token */
#define HUB_MCP_DEFAULT_IDLE 600        /* [hub] mcp_session_idle, seconds */

int hub_mcp_new(struct hub *h, struct hub_mcp **ret);
void hub_mcp_free(struct hub_mcp *t);
/* A request to /mcp, its head: true with a filled when it is answered
 * now (a refusal, DELETE, GET: a.wait the stream), false when a POST's
 * body is to be read (q->mcp set). */
bool hub_mcp_head(struct hub *h, struct hub_request *q, struct hub_answer *a);
/* The POST's body is whole: its answer into a, on a pool thread. */
void hub_mcp_post(struct hub *h, struct hub_request *q, struct hub_answer *a);

/* The sessions open (those past their idle timeout ended first). */
unsigned hub_mcp_count(struct hub_mcp *t);

/* The parts a fuzzer calls alone.  Is origin (NULL: none) one of the
 * space or comma separated list allowed (NULL: none)? */
bool hub_mcp_origin_ok(const char *allowed, const char *origin);
/* Does the Accept header accept (NULL: anything) the media type type? */
bool hub_mcp_accepts(const char *accept, const char *type);
/* A Last-Event-ID (NULL or "": none, 0): 0 with *ret, or -EINVAL. */
int hub_mcp_event_id(const char *v, uint64_t *ret);
/* Is v a session id as we make them (32 lowercase hex digits)? */
bool hub_mcp_session_id_valid(const char *v);

#endif
