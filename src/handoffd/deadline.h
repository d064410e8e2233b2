/* The earliest time the daemon must look again (usec since the epoch; 0:
 * none).  The policy modules note their deadlines here and return; the
 * daemon arms its one timer for the earliest and sweeps then.  A leaf: it
 * calls nothing, so nobody calls up into lifecycle.c to be woken. */
#ifndef HD_DEADLINE_H
#define HD_DEADLINE_H

#include <stdint.h>

struct deadline {
        int64_t next;
};

static inline void deadline_note(struct deadline *d, int64_t t)
{
        if (d->next == 0 || t < d->next)
                d->next = t;
}

static inline void deadline_reset(struct deadline *d)
{
        d->next = 0;
}

#endif
