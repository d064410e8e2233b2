/* The watch on handoff/ and the agents' handoffs/ (inotify, a hint,
 * never the truth: watch first, then scan), the rescans, and the pending
 * names decided a chunk a loop turn; see watch.c. */
#ifndef HD_WATCH_H
#define HD_WATCH_H

#include "loop.h"

/* The inotify instance, its watch on handoff/ and on each agent's
 * handoffs/ (before the first scan). */
int watch_open(struct daemon *d);

/* Watch the agents' handoffs/ (after a reload; the old watches removed
 * first with watch_agents_drop()). */
void watch_agents(struct daemon *d);
void watch_agents_drop(struct daemon *d);

/* Read inotify events, and rescan every rescan_interval. */
int watch_start(struct daemon *d);

/* Queue every name in handoff/ (start, overflow, periodic safety net). */
int watch_rescan(struct daemon *d, const char *why);

#endif
