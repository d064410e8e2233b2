/* What the daemon leaves in handoff/ for agents not served here
 * (sp->foreign, struct foreign_entry): which files, until when, for whom,
 * and the bytes they hold against [retention] unclaimed_max_items and
 * unclaimed_max_bytes.  The decisions are intake's; this is their memory,
 * read by status (control.c). */
#ifndef HD_FOREIGN_H
#define HD_FOREIGN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "spool.h"

/* handoff/name is the file left (same inode, unchanged since), and not
 * yet expired: nothing to decide. */
bool foreign_fresh(struct spool *sp, const char *name, int64_t now);
/* handoff/name (st) left for to until expires (usec). */
void foreign_note(struct spool *sp, const char *name, const struct stat *st, int64_t expires,
                  const char *to);
/* handoff/name, due but not decided (the batch's time was up): decided
 * again at now, not counted as left meanwhile. */
void foreign_again(struct spool *sp, const char *name, int64_t now);
/* Would one more file of bytes, for name, go past a bound? */
bool foreign_full(struct spool *sp, const char *name, uint64_t bytes);
/* e, an entry of sp->foreign, forgotten. */
void foreign_remove(struct spool *sp, struct foreign_entry *e);
/* Everything forgotten (a reload: they are looked at again). */
void foreign_clear(struct spool *sp);

#endif
