/* The inbox quota: how many bootstraps wait for each agent, in all and per
 * sender; see quota.c. */
#ifndef HD_QUOTA_H
#define HD_QUOTA_H

#include "spool.h"

/* Claimed item id waits for agent, sent by from (at the claim, and at
 * each look of the sweep).  Nothing is kept while no limit is set. */
void quota_note(struct spool *sp, const char *id, const char *agent, const char *from);
/* id waits no more (archived, rejected). */
void quota_forget(struct spool *sp, const char *id);
/* A sweep begins; at its end every id no look of it noted is dropped
 * (another daemon on the spool archived it). */
void quota_sweep_begin(struct spool *sp);
void quota_sweep_end(struct spool *sp);

/* May one more from `from` wait for agent?  0, or -EBADMSG with v
 * (inbox_full) when [spool] max_waiting or max_waiting_per_sender is
 * reached. */
int quota_check(struct spool *sp, const char *agent, const char *from, hd_verdict *v);

/* The number waiting for agent. */
size_t quota_waiting(struct spool *sp, const char *agent);

#endif
