/* The inbox quota: how many bootstraps wait for each agent, in all and per
 * sender, counted in the spool for every daemon that serves it; see
 * quota.c. */
#ifndef HD_QUOTA_H
#define HD_QUOTA_H

#include <stdbool.h>

#include "spool.h"

/* May handoff id, sent by from, wait for agent?  When it may, it is
 * counted at once, so the other daemons see it.  0: it may (*ret_taken:
 * this call counted it; false when nothing is counted, no limit set, or
 * id was counted already); -EBADMSG with v (inbox_full) when [spool]
 * max_waiting or max_waiting_per_sender is reached; -EAGAIN when another
 * daemon is counting for agent (look again later); other -errno. */
int quota_take(struct spool *sp, const char *agent, const char *id, const char *from,
               hd_verdict *v, bool *ret_taken);

/* id waits for agent no more: archived, rejected, or its claim failed
 * after quota_take() counted it. */
void quota_release(struct spool *sp, const char *agent, const char *id);

/* A look of the sweep found claimed item id waiting for agent: counted
 * when the sweep recounts (sweep.recount) and it is not yet. */
void quota_note(struct spool *sp, const char *agent, const char *id, const char *from);

/* What a daemon killed between a count and its claim, or between an
 * archive and its release, left counted is no longer: ids counted for
 * the agents served here with no item in claimed/, and the counts of
 * senders with nothing waiting, are removed.  At start and with each
 * housekeeping run. */
void quota_repair(struct spool *sp);

#endif
