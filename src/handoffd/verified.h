/* What each big claimed record says; see verified.c. */
#ifndef HD_VERIFIED_H
#define HD_VERIFIED_H

#include <sys/stat.h>

#include "handoff_doc.h"
#include "spool.h"

/* claimed/<id>.json (the inode st) is our record of h, claimed at
 * accepted_usec: remember what it says (if it is big enough to be worth
 * it). */
void verified_store(struct spool *sp, const struct stat *st, const struct handoff *h,
                    int64_t accepted_usec);

/* The fields of the record claimed/<id>.json (st) in *ret (no doc) and
 * its accepted time, if it is the one remembered; false: read it. */
bool verified_lookup(struct spool *sp, const char *id, const struct stat *st,
                     struct handoff *ret, int64_t *ret_accepted);

/* Forget id (archived, rejected), or (older) every id no sweep has seen
 * since the sweep gen began. */
void verified_forget(struct spool *sp, const char *id);
void verified_forget_older(struct spool *sp, uint64_t gen);

#endif
