/* Delivery of a claimed handoff; see delivery.c. */
#ifndef HD_DELIVERY_H
#define HD_DELIVERY_H

#include <sys/stat.h>

#include "handoff_doc.h"
#include "spool.h"

struct parts;

/* Deliveries that failed, retried after a back-off. */
struct delivery {
        struct dict failed;     /* ids whose delivery failed: a set */
        int64_t backoff_usec;   /* the wait before the next retry */
};

int delivery_new(struct delivery **ret);
void delivery_free(struct delivery *dv);

/* The hidden name of id's bootstrap, .pending.<bootstrap name>. */
int delivery_pending_name(const char *id, char *buf, size_t n);
/* claimed/<id>.json, open as fd (st).  If it is the daemon's record (a
 * regular file of the daemon's, shaped as a record), 0 and *ret holds
 * its document.  -ENOMSG for anything else (an earlier version's item),
 * or -errno. */
int delivery_record_read(struct spool *sp, int fd, const struct stat *st, json_t **ret);

/* Does a's delivery make nothing but the bootstrap (no profile copy)? */
bool delivery_plain(const struct agent_rt *a);

enum {
        DELIVERY_SYNC_LATER = 1 << 0,   /* the file not synced: the caller syncs a burst's */
        DELIVERY_NEW_CLAIM  = 1 << 1,   /* not claimed yet: a .pending.NAME there is -EEXIST
                                         * when claimed/<id>.json is there (its publish to come) */
};
/* Step 1: Baton, profile copies, the bootstrap under its hidden name (file
 * synced, the directory marked for the burst's sync); a big one's inode
 * and what it says remembered (verified.c). */
int delivery_write(struct parts *p, struct agent_rt *a, const struct handoff *h, int64_t now,
                   unsigned flags);
/* Step 2: the same file as claimed/<id>.json, the record: -EEXIST when
 * the id is claimed already; with replace, over the claimed/<id>.json
 * an earlier version left. */
int delivery_record(struct parts *p, struct agent_rt *a, const char *id, bool replace);
/* An earlier version's claimed/<id>.json replaced by a link to (or a
 * copy of) its bootstrap, the agent's file src. */
int delivery_record_from(struct parts *p, struct agent_rt *a, const char *id, const char *src);
/* Step 3: the bootstrap under its name; left hidden (0, a deadline now)
 * when a cancel request for id waits (cancel.c): the next look decides. */
int delivery_publish(struct parts *p, struct agent_rt *a, const char *id);
/* All three for one handoff, each synced. */
int delivery_run(struct parts *p, struct agent_rt *a, const struct handoff *h, int64_t now,
                 bool replace);
/* A step failed: retry through the sweep after a growing backoff. */
void delivery_failed(struct parts *p, const char *id, int64_t now);

#endif
