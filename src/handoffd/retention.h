/* Retention of archive/ and rejected/ (count, age, bytes), oldest first, in
 * small batches, never younger than the replay window; and of ids/. */
#ifndef HD_RETENTION_H
#define HD_RETENTION_H

#include "deadline.h"
#include "spool.h"

/* Removals per directory per run, besides as many as arrived since the
 * last run: a mass delete on ext4 slows file creation for minutes
 * after it, but pruning must keep up with what arrives. */
#define RETENTION_BATCH 256

struct retention {
        int64_t pruned_at;      /* rejected/'s last pruning (usec) */
        uint64_t arrived;       /* rejected and archived items counted then */
};

void retention_run(struct spool *sp, struct retention *rt, int64_t now);
/* rejected/ alone, when a rejection took it past a bound of [retention]
 * (sp->retention_due), and not sooner than RETENTION_SOON_USEC after its
 * last run (then a deadline for it). */
void retention_rejected_due(struct spool *sp, struct retention *rt, struct deadline *dl,
                            int64_t now);

#endif
