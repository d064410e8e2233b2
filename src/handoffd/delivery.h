/* Delivery of a claimed handoff; see delivery.c. */
#ifndef HD_DELIVERY_H
#define HD_DELIVERY_H

#include "spool.h"

/* Step 1: Baton, profile copies, the bootstrap under its hidden name (file
 * synced, the directory marked for the burst's sync). */
int delivery_write(struct spool *sp, struct agent_rt *a, const json_t *doc, int64_t now,
                   bool sync_later);
/* Step 2: claimed/<id>.delivered. */
int delivery_mark(struct spool *sp, struct agent_rt *a, const char *id, int64_t now);
/* Step 3: the bootstrap under its name. */
int delivery_publish(struct spool *sp, struct agent_rt *a, const char *id);
/* All three for one handoff, each synced. */
int delivery_run(struct spool *sp, struct agent_rt *a, const json_t *doc, int64_t now);
/* A step failed: retry through the sweep after a growing backoff. */
void delivery_failed(struct spool *sp, const char *id, int64_t now);

#endif
