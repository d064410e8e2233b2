/* The daemon's record of a claimed item (issue 25): claimed/<id>.json and
 * its archive are the bootstrap the agent got, one file of the daemon's,
 * which holds the handoff exactly as signed under "handoff".  An earlier
 * version kept the producer's file there, the handoff itself.  The
 * readers (handoffd, handoffctl list/show/wait, the MCP server, the hub)
 * ask here which one a document is. */
#ifndef HD_RECORD_H
#define HD_RECORD_H

#include <stdbool.h>
#include <jansson.h>

/* Is doc a record (a bootstrap: "handoff" an object, "accepted_at" a
 * string)?  Whose file it is, is the caller's to check. */
bool record_form(const json_t *doc);

/* The handoff of a record, or doc itself (an earlier version's item, a
 * rejected or pending file). */
const json_t *record_handoff(const json_t *doc);

#endif
