/* A line of handoff-a2a checked and acted on; see a2a_reply.c. */
#ifndef HD_A2A_REPLY_H
#define HD_A2A_REPLY_H

#include <stdint.h>

#include "a2a_item.h"

/* What moves an item (a2a_reply.c's table, state x event). */
enum a2a_event {
        AE_DUE,         /* the time of its next try came */
        AE_EXPIRED,     /* unsent past expires_at, or followed past a2a_follow_max */
        AE_RUNNING,     /* "ok": its task is submitted or working */
        AE_ENDED,       /* "ok": its task ended, or the server answered without a task */
        AE_ADOPTED,     /* "adopt": ListTasks listed a task of ours */
        AE_FINAL,       /* "final": refused, or a task the server no longer knows */
        AE_RETRY,       /* "retry", "token": unreachable, 5xx, 401/403 */
        AE_DOWN,        /* its helper stopped before it answered */
        AE_MAX_,
};

/* Event ev (one of AE_DUE, AE_EXPIRED, AE_DOWN: those without an
 * answer) for it: 0, or -EPROTO. */
int a2a_item_event(struct a2a_out *a, struct a2a_item *it, enum a2a_event ev, int64_t now);

/* One line from remote r's helper (without its newline; cut into its
 * fields in place): its item moved on.  0, or -EPROTO when any field does
 * not check, or names an item of another remote (the caller stops the
 * helper then). */
int a2a_reply(struct a2a_out *a, struct a2a_remote_st *r, char *line, int64_t now);

#endif
