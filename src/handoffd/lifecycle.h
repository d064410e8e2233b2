/* After the claim: consumed, expired, archived; crash recovery; the
 * earliest deadline; items left for other agents that expire. */
#ifndef HD_LIFECYCLE_H
#define HD_LIFECYCLE_H

#include "spool.h"

/* Look at one claimed item: deliver if never delivered, archive as consumed
 * when its bootstrap is gone, expire it when its window has passed. */
int lifecycle_check(struct spool *sp, const char *handoff_id, int64_t now);

/* A bootstrap name disappeared from an agent's handoffs/ directory. */
int lifecycle_bootstrap_gone(struct spool *sp, struct agent_rt *a,
                             const char *name, int64_t now);

/* Every claimed item, the foreign items past expiry, and retention.
 * Recomputes sp->deadline.  at_start also removes temp files left by
 * a crash. */
int lifecycle_sweep(struct spool *sp, int64_t now, bool at_start);

#endif
