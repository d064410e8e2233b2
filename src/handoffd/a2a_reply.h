/* A line of handoff-a2a checked and acted on; see a2a_reply.c. */
#ifndef HD_A2A_REPLY_H
#define HD_A2A_REPLY_H

#include <stdint.h>

#include "a2a_item.h"

/* One line from remote r's helper (without its newline; cut into its
 * fields in place): its item moved on.  0, or -EPROTO when any field does
 * not check, or names an item of another remote (the caller stops the
 * helper then). */
int a2a_reply(struct a2a_out *a, struct a2a_remote_st *r, char *line, int64_t now);

#endif
