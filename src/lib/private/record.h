/* The daemon's record of a claimed item (issue 25): claimed/<id>.json and
 * its archive are the bootstrap the agent got, one file of the daemon's,
 * which holds the handoff exactly as signed under "handoff".  An earlier
 * version kept the producer's file there, the handoff itself.  The
 * readers (handoffd, handoffctl list/show/wait, the MCP server, the hub)
 * ask here which one a document is. */
#ifndef HD_RECORD_H
#define HD_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/* Is doc a record (a bootstrap: "handoff" an object, "accepted_at" a
 * string)?  Whose file it is, is the caller's to check. */
bool record_form(const json_t *doc);

/* The handoff of a record, or doc itself (an earlier version's item, a
 * rejected or pending file). */
const json_t *record_handoff(const json_t *doc);

/* hd_bootstrap_build_shown() that also gives the bootstrap's canonical
 * bytes (*ret_buf, the caller's to free, and *ret_len): the ones the size
 * check made, not a second dump.  The record is written from them. */
int bootstrap_build_canon(const json_t *handoff, const json_t *shown, int64_t accepted_usec,
                          size_t max_size, json_t **ret, char **ret_buf, size_t *ret_len);

#endif
