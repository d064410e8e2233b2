/* What each big claimed record says; see verified.c. */
#ifndef HD_VERIFIED_H
#define HD_VERIFIED_H

#include <sys/stat.h>

#include "spool.h"

/* claimed/<id>.json (the inode st) is our record rec: remember what it
 * says (if it is big enough to be worth it). */
void verified_store(struct spool *sp, const char *id, const struct stat *st, const json_t *rec);

/* {from_agent, to_agent, accepted_at} of the record claimed/<id>.json
 * (st), if it is the one remembered; NULL: read it. */
json_t *verified_lookup(struct spool *sp, const char *id, const struct stat *st);

/* Forget id (archived, rejected), or (older) every id no sweep has seen
 * since the sweep gen began. */
void verified_forget(struct spool *sp, const char *id);
void verified_forget_older(struct spool *sp, uint64_t gen);

#endif
