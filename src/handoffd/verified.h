/* What was verified of each claimed item; see verified.c. */
#ifndef HD_VERIFIED_H
#define HD_VERIFIED_H

#include <sys/stat.h>

#include "spool.h"

/* These bytes (buf) of claimed/<id>.json (the inode st) verified as doc. */
void verified_store(struct spool *sp, const char *id, const struct stat *st,
                    const char *buf, size_t len, const json_t *doc);

/* The same for claimed/<id>.json open as fd, just claimed (intake.c). */
void verified_claimed(struct spool *sp, const char *id, int fd, const char *buf, size_t len,
                      const json_t *doc);

/* {from_agent, to_agent} of claimed/<id>.json (fd, st) if it still holds
 * the bytes verified; NULL: read and verify it. */
json_t *verified_lookup(struct spool *sp, const char *id, int fd, const struct stat *st);

/* What was verified of id (its agents, the hash of its bytes), for its
 * marker; NULL if nothing is known. */
json_t *verified_record(struct spool *sp, const char *id);

/* Forget id (archived, rejected), or (older) every id no sweep has seen
 * since the sweep gen began. */
void verified_forget(struct spool *sp, const char *id);
void verified_forget_older(struct spool *sp, uint64_t gen);

#endif
