/* [metrics] textfile: Prometheus text exposition of the daemon's counters
 * and the spool's counts, for node_exporter's textfile collector. */
#ifndef HD_METRICS_H
#define HD_METRICS_H

#include "spool.h"

/* Rewrite the textfile atomically (no-op when not configured). */
int metrics_write(struct spool *sp, int64_t now);

#endif
