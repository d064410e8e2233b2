/* After the claim: consumed, expired, archived; crash recovery; the
 * earliest deadline; items left for other agents that expire. */
#ifndef HD_LIFECYCLE_H
#define HD_LIFECYCLE_H

#include "spool.h"

struct parts;

/* A sweep under way (lifecycle_sweep_step()), a slice a loop turn. */
struct sweep {
        void *dir;              /* DIR * of claimed/, NULL: none */
        bool at_start, again;
        int first;              /* the first error met */
};

struct lifecycle {
        struct sweep sweep;
        int64_t housekeeping_at;/* the last retention and metrics run, usec */
};

int lifecycle_new(struct lifecycle **ret);
void lifecycle_free(struct lifecycle *lc);

/* Look at one claimed item: deliver if never delivered, archive as consumed
 * when its bootstrap is gone, expire it when its window has passed.  0
 * (also when its lock is busy: a deadline then) or -errno. */
int lifecycle_check(struct parts *p, const char *handoff_id, int64_t now);

/* A bootstrap name disappeared from an agent's handoffs/ directory: its
 * item is looked at (the caller syncs what it changed: store_flush()). */
int lifecycle_bootstrap_gone(struct parts *p, const char *name, int64_t now);

/* Every claimed item, the foreign items past expiry, and retention.
 * Recomputes p->deadline and sp->due.  at_start also removes temp files left by
 * a crash.  All at once: for tests and tools; the daemon sweeps in slices
 * with the two below. */
int lifecycle_sweep(struct parts *p, int64_t now, bool at_start);

/* Begin a sweep (what at_start removes is removed now, at once); one
 * under way is done once more when it ends. */
int lifecycle_sweep_begin(struct parts *p, int64_t now, bool at_start);

/* Go on with the sweep under way for about budget_usec (at least one
 * item): 0 and *ret_more while there is more, or not once it has ended
 * (or none is under way); -errno for the first error met (the sweep has
 * ended). */
int lifecycle_sweep_step(struct parts *p, int64_t now, int64_t budget_usec, bool *ret_more);

#endif
