/* The claimed item's states and what is done in each; see item.c. */
#ifndef HD_ITEM_H
#define HD_ITEM_H

#include <stdbool.h>

#include "item_files.h"
#include "spool.h"

struct parts;

/* The state of claimed/<id>.json (open as fd), read off its files, in
 * *ret; no action.  For the unit tests of the state table. */
int item_state_at(struct parts *p, const char *id, int fd, enum item_state *ret);

/* claimed/<id>.json open as fd, the lock of id held: read the item's
 * state and take the action of that state; with a cancel request of its
 * sender pending (cancel.c), the action of that event, and the requests
 * for id answered once its fate is known.  0 or -errno; *ret_archived
 * (NULL: not asked) whether this look archived the item. */
int item_check_locked(struct parts *p, const char *id, int fd, int64_t now, bool *ret_archived);

#endif
