/* The claimed item's states and what is done in each; see item.c. */
#ifndef HD_ITEM_H
#define HD_ITEM_H

#include "spool.h"

/* The states of a claimed item, read off its files (handoffd(8), "Crash
 * windows"); the order matters to item_check_locked(). */
enum item_state {
        IS_GONE,        /* archived by another daemon since it was opened */
        IS_NOT_OURS,    /* for an agent not served here: left alone */
        IS_TAMPERED,    /* an earlier version's item that no longer verifies */
        IS_LEGACY,      /* an earlier version's item (producer's file, marker) */
        IS_HIDDEN,      /* record, hidden .pending. bootstrap: publish */
        IS_PUBLISHED,   /* record, bootstrap: waits for its consumer */
        IS_EXPIRING,    /* record, .expire.: the expiry was cut short */
        IS_CANCELING,   /* record, .cancel.: the cancel was cut short */
        IS_TAKEN,       /* record, no bootstrap: consumed */
        _IS_MAX
};

/* The state of claimed/<id>.json (open as fd), read off its files; no
 * action.  For the unit tests of the state table. */
int item_state_at(struct spool *sp, const char *id, int fd);

/* claimed/<id>.json open as fd, the lock of id held: read the item's
 * state and take the action of that state; with a cancel request of its
 * sender pending (cancel.c), the action of that event, and the requests
 * for id answered once its fate is known. */
int item_check_locked(struct spool *sp, const char *id, int fd, int64_t now);

#endif
