/* [metrics] textfile: Prometheus text exposition of the daemon's counters
 * and the spool's counts, for node_exporter's textfile collector. */
#ifndef HD_METRICS_H
#define HD_METRICS_H

#include "spool.h"

/* At most once per this: a change is written within it. */
#define METRICS_MIN_INTERVAL_USEC 1000000

/* Rewrite the textfile atomically (no-op when not configured), every
 * state directory counted: at each housekeeping run. */
int metrics_write(struct spool *sp, int64_t now);

/* Rewrite it with handoff/ and claimed/ counted, archive/ and rejected/
 * as metrics_write() last counted them: after a change. */
int metrics_refresh(struct spool *sp, int64_t now);

/* Have the figures changed since the file was last written?  true with
 * *ret_due, when it may be written again (the last write plus
 * METRICS_MIN_INTERVAL_USEC; wall clock, as now). */
bool metrics_changed(struct spool *sp, int64_t now, int64_t *ret_due);

#endif
