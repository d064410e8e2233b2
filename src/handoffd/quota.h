/* The inbox quota: how many bootstraps wait for each agent, in all and per
 * sender, counted in the spool for every daemon that serves it; see
 * quota.c. */
#ifndef HD_QUOTA_H
#define HD_QUOTA_H

#include <stdbool.h>
#include <sys/types.h>

#include "spool.h"

/* What the counting needs between calls. */
struct quota {
        /* The next sweep counts every claimed item it looks at: after the
         * start and a reload. */
        bool recount;
        bool counting;          /* the sweep under way counts (quota_note()) */
        /* The hub's user, the owner of [hub] state_dir ((uid_t)-1: none
         * found).  It drops for every token, so its files count by name,
         * not as one producer. */
        uid_t hub_uid;
};

/* Whom a waiting item counts against, besides its agent. */
struct quota_sender {
        const char *from;       /* from_agent, as the file says: anyone's to choose */
        /* Who dropped it, counted on its own: "uNNNN" for the file's
         * owner (quota_producer()).  NULL when one owner drops for many
         * senders, as the daemon does for relayed items and the hub for
         * every token; those items count by name alone.  Once the daemon
         * knows which hub token dropped a file, it goes here as "t-NAME"
         * and counts as a producer of its own. */
        const char *producer;
        /* Signed with a key of from's own (config_key_own()): it may use
         * the reserve that items signed with a shared key may not. */
        bool own_key;
};

/* The producer of a file owned by uid into buf (n >= 16), or NULL (see
 * struct quota_sender). */
const char *quota_producer(const struct quota *qs, uid_t uid, char *buf, size_t n);

/* May handoff id, sent by s, wait for agent?  When it may, it is counted
 * at once, so the other daemons see it.  0: it may (*ret_taken: this call
 * counted it; false when nothing is counted, no limit set, or id was
 * counted already); -EBADMSG with v (inbox_full) when [spool] max_waiting
 * or max_waiting_per_sender is reached (per name, per producer, or for
 * shared keys max_waiting less its reserve); -EAGAIN when another daemon
 * is counting for agent (look again later); other -errno. */
int quota_take(struct spool *sp, const char *agent, const char *id,
               const struct quota_sender *s, hd_verdict *v, bool *ret_taken);

/* id waits for agent no more: archived, rejected, or its claim failed
 * after quota_take() counted it. */
void quota_release(struct spool *sp, const char *agent, const char *id);

/* A look of the sweep found claimed item id waiting for agent: counted
 * when the sweep recounts (qs->counting) and it is not yet, or its count
 * completed (a kill between its links).  Its producer is not known from
 * the record: s->producer is NULL. */
void quota_note(struct spool *sp, struct quota *qs, const char *agent, const char *id,
                const struct quota_sender *s);

/* What a daemon killed between a count and its claim, or between an
 * archive and its release, left counted is no longer: ids counted for
 * the agents served here with no item in claimed/, and the counts of
 * senders with nothing waiting, are removed.  At start and with each
 * housekeeping run. */
void quota_repair(struct spool *sp);

#endif
