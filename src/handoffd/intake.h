/* Intake: the decision for each name in handoff/ and the delivery of a
 * batch of claims; see intake.c. */
#ifndef HD_INTAKE_H
#define HD_INTAKE_H

#include "handoff_doc.h"
#include "spool.h"

struct parts;

/* One batch decides for at most this long (then yields to the loop; the
 * rest comes back IO_SKIPPED), and always decides at least one name. */
#define INTAKE_BATCH_MAX_USEC 10000

/* Decide about names in handoff/ (a burst): claims are made durable with one
 * fsync per directory for the whole batch before any bootstrap is written.
 * outcomes (may be NULL) gets one enum item_outcome per name, always, for
 * every name; a negative entry is a system error for that name (it stays
 * where it is; every name when the batch cannot be set up).  Returns the
 * number of system errors. */
int intake_batch(struct parts *p, char *const *names, size_t n,
                 int64_t now, int *outcomes);
/* The same with each name's look when it was queued (looks[i]: NULL, or
 * its fd -1, for none): a decision takes the fd of the look it uses
 * (sets it to -1) and closes it; a name not looked at (IO_SKIPPED) keeps
 * its look. */
struct pending_look;
int intake_batch_looks(struct parts *p, char *const *names, struct pending_look *const *looks,
                       size_t n, int64_t now, int *outcomes);

/* Claimed content read again (recovery, retry, lifecycle, archive): the
 * producer still owns that inode and may have rewritten it.  Every check
 * of the claim but freshness (the item may rightly be old): key, MAC or
 * signature, fields, payload, handoff_id equal to id, to_agent served
 * here.  0 with its fields in *ret (NULL: not wanted; the caller's to
 * clear), or -EBADMSG with v. */
int intake_verify_claimed(struct spool *sp, json_t *doc, const char *id, struct handoff *ret,
                          hd_verdict *v);

/* Items left for agents not served here, now past their expiry: decided
 * again (they end as expired_unclaimed); the others' expiry is noted as a
 * deadline. */
void intake_foreign_due(struct parts *p, int64_t now);

#endif
