/* What an agent does with the spool, shared by handoffctl and by
 * handoff-hubd's /mcp: send (submit.c), list and take its inbox
 * (inbox.c), report a result (complete.c), show a producer's text
 * (esc.c), the checks of a take (consume_opts.c).  None of it logs or
 * exits: each says what went wrong in a line and a code below. */
#ifndef AGENT_H
#define AGENT_H

#include <stdbool.h>

#include "config.h"
#include "handoff.h"

/* Outcome codes: the numbers of handoffctl's exit codes (handoffctl(1)). */
enum {
        AG_OK = 0,
        AG_NEGATIVE = 1,        /* rejected, none there */
        AG_USAGE = 2,           /* bad usage, bad config or key */
        AG_STALE = 3,           /* stale, or no word from the daemon in time */
        AG_ERROR = 4,           /* a system error (I/O, permissions) */
};

/* A producer's text as shown to a person: control characters, C1
 * controls, line separators and bidi overrides written as \e, \n, \x1b,
 * \u2028...  esc_text() keeps newlines and tabs (a multi-line text whose
 * lines the caller marks).  NULL stays NULL; the result lives until 16
 * more calls on the same thread. */
const char *esc_line(const char *s);
const char *esc_text(const char *s);

/* The consume options of cfg (resume window, size cap, clock policy) and,
 * with verify, the keys this user can read for the proof of origin (a
 * sender's own key that cannot be read stands in as a random one, so its
 * handoffs fail rather than verify with another key).  > 0 when keys
 * were loaded (o->lookup set), 0 when none, or -errno. */
int consume_opts_from_config(struct config *cfg, bool verify, hd_consume_opts *o);

#endif
