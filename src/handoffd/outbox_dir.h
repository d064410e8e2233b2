/* outbox/ as its two senders read it at start; see outbox_dir.c. */
#ifndef HD_OUTBOX_DIR_H
#define HD_OUTBOX_DIR_H

#include <jansson.h>
#include <stdint.h>

#include "handoff.h"
#include "spool.h"
#include "store.h"
#include "store_doc.h"

/* One item of outbox/: name is "<id>.json", id that name without
 * ".json".  0 to go on, or -errno to stop the listing. */
typedef int outbox_dir_fn(void *ctx, const char *name, const char *id, int64_t now);

/* fn for every "<id>.json" in outbox/ (dot names as well: fn decides).
 * 0, or -errno: the listing's error (the names it got are still
 * passed), or the one fn stopped with. */
int outbox_dir_each(struct spool *sp, int64_t now, outbox_dir_fn *fn, void *ctx);

/* An item of outbox/ is the canonical dump of a handoff that was within
 * max_file_size: a number written 1e9 by the producer grows in it. */
#define OUTBOX_DIR_MAX(sp) STORE_OUTBOX_MAX(sp)

/* The take (outbox_dir.c): outbox/dst written from h, the verified
 * handoff of handoff/name (the inode was): its canonical bytes as they
 * were verified, or its document written again when they were not
 * canonical; and that name leaving
 * handoff/ once outbox/ is synced.  -EEXIST: dst is there already;
 * -ENOENT: name is no longer was, or was what a take left after a crash
 * (then it goes, as the take would have done it). */
int outbox_dir_take(struct spool *sp, const char *name, const struct stat *was,
                    const struct handoff *h, const char *dst);

/* outbox/name parsed (within OUTBOX_DIR_MAX) into *ret, and when it
 * entered outbox/ (its ctime; now when that cannot be read) in *ret_at.
 * 0, or -errno with vd saying why. */
int outbox_dir_load(struct spool *sp, const char *name, int64_t now, json_t **ret,
                    hd_verdict *vd, int64_t *ret_at);

/* outbox/<id>.json to archive/ as relayed, under a free archive name
 * (store_archive_from(), its time at_s, when it entered outbox/: the same
 * name on a retry after a crash; in name), with its outcome o as the
 * .outcome.  The id is marked in ids/ first: from then on a replay of it
 * is refused here.  src: the producer's file the take's note names, as
 * the take saw it (NULL: the note is read).  0 or -errno. */
int outbox_dir_archive(struct spool *sp, const struct store_outcome *o, int64_t at_s,
                       const struct spool_ino *src, char *name, size_t n);

#endif
