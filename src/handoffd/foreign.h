/* What the daemon leaves in handoff/ for agents not served here
 * (struct foreign): which files, until when, for whom,
 * and the bytes they hold against [retention] unclaimed_max_items and
 * unclaimed_max_bytes.  The decisions are intake's; this is their memory,
 * read by status (control.c). */
#ifndef HD_FOREIGN_H
#define HD_FOREIGN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "dict.h"
#include "spool.h"

/* A file left in handoff/ for an agent not served here. */
struct foreign_entry {
        int64_t expires;        /* usec: decided again then */
        ino_t ino;              /* with ctime_ns: the same file, unchanged */
        int64_t ctime_ns;
        uint64_t bytes;         /* [retention] unclaimed_max_bytes */
        /* Due, but past the batch's time: decided again at expires, and
         * no longer counted as left. */
        bool again;
        char to[SPOOL_AGENT_SIZE]; /* "(invalid)": to_agent is not a name */
};

struct foreign {
        struct dict names;      /* handoff/ name -> struct foreign_entry */
        uint64_t bytes;         /* what their files hold */
        int64_t purged;         /* the last look at all of them (monotonic usec) */
};

void foreign_init(struct foreign *fg);

/* handoff/name is the file left (same inode, unchanged since), and not
 * yet expired: nothing to decide. */
bool foreign_fresh(struct foreign *fg, const struct spool *sp, const char *name, int64_t now);
/* handoff/name (st) left for to until expires (usec). */
void foreign_note(struct foreign *fg, const char *name, const struct stat *st, int64_t expires,
                  const char *to);
/* handoff/name, due but not decided (the batch's time was up): decided
 * again at now, not counted as left meanwhile. */
void foreign_again(struct foreign *fg, const char *name, int64_t now);
/* Would one more file of bytes, for name, go past a bound? */
bool foreign_full(struct foreign *fg, const struct spool *sp, const char *name, uint64_t bytes);
/* e, an entry of fg->names, forgotten. */
void foreign_remove(struct foreign *fg, struct foreign_entry *e);
/* Everything forgotten (a reload: they are looked at again). */
void foreign_clear(struct foreign *fg);

#endif
