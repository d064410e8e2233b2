/* What handoffctl status/list/show read from a spool directly, daemon or
 * not: the items of each state directory with their ids, agents, times and
 * outcome or reason. */
#ifndef HANDOFFCTL_ITEMS_H
#define HANDOFFCTL_ITEMS_H

#include <jansson.h>

#include "config.h"

extern const char *const items_states[4];   /* handoff claimed archive rejected */

/* Items of one state ("handoff", ...) of spool_dir as a JSON array of
 * {handoff_id?, state, name, path, from_agent?, to_agent?, at, age_s,
 *  outcome?, reason?, detail?, accepted_at?}.  Untrusted files are read
 * with the library's limits; unreadable ones still count. */
int items_list(const char *spool_dir, const char *state, json_t **ret);

/* Load the config for a subcommand: -c path or the default.  Prints the
 * error and returns a CTL_EXIT_* code (non-zero) on failure. */
int ctl_config(const char *path, struct config **ret);

#endif
