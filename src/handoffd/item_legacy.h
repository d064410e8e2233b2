/* An earlier version's claimed items; see item_legacy.c. */
#ifndef HD_ITEM_LEGACY_H
#define HD_ITEM_LEGACY_H

#include <sys/stat.h>

#include "item_files.h"

/* claimed/<id>.json open as fd (st) is not the daemon's record: read it
 * as an earlier version's item, verified; *ret IS_GONE, IS_NOT_OURS,
 * IS_TAMPERED or IS_LEGACY (f->files not read yet). */
int item_legacy_state(struct spool *sp, const char *id, int fd, struct stat *st,
                      struct item_files *f, enum item_state *ret);
/* IS_TAMPERED: withdrawn, rejected as changed after its claim. */
item_action item_legacy_reject;
/* IS_LEGACY: made a record, or delivered as new, or archived as taken. */
item_action item_legacy_convert;

#endif
