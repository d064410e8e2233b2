/* What each big claimed record says; see verified.c. */
#ifndef HD_VERIFIED_H
#define HD_VERIFIED_H

#include <sys/stat.h>

#include "handoff_doc.h"
#include "dict.h"
#include "spool.h"

/* What a big claimed record says, valid while claimed/<id>.json is still
 * that inode of that size. */
struct verified_entry {
        dev_t dev;
        ino_t ino;
        off_t size;
        uint64_t gen;           /* the sweep that last looked */
        char from[SPOOL_AGENT_SIZE], to[SPOOL_AGENT_SIZE];
        char kid[HD_KID_MAX + 1];
        int64_t accepted_usec;
};

struct verified {
        struct dict items;      /* id -> struct verified_entry; cleared by a reload */
        uint64_t gen;           /* sweeps begun (lifecycle.c counts them) */
};

void verified_init(struct verified *vc);
/* Every entry forgotten: keys and agents may have changed. */
void verified_clear(struct verified *vc);

/* claimed/<id>.json (the inode st) is our record of h, claimed at
 * accepted_usec: remember what it says (if it is big enough to be worth
 * it). */
void verified_store(struct verified *vc, const struct stat *st, const struct handoff *h,
                    int64_t accepted_usec);

/* Is a record of size bytes worth remembering? */
bool verified_worth(size_t size);
/* The handoff a record (the daemon's, record.h) holds, and its accepted
 * time (0 when it has none): handoff_from_record(), then clear *ret. */
int verified_record_parse(const json_t *rec, struct handoff *ret, int64_t *ret_accepted);
/* verified_store() of the record rec just written as the inode st (the
 * hidden bootstrap that becomes claimed/<id>.json). */
void verified_store_record(struct verified *vc, const struct stat *st, const json_t *rec);

/* The fields of the record claimed/<id>.json (st) in *ret (no doc) and
 * its accepted time, if it is the one remembered; false: read it. */
bool verified_lookup(struct verified *vc, const char *id, const struct stat *st,
                     struct handoff *ret, int64_t *ret_accepted);

/* Forget id (archived, rejected), or (older) every id no sweep has seen
 * since the sweep gen began. */
void verified_forget(struct verified *vc, const char *id);
void verified_forget_older(struct verified *vc, uint64_t gen);

#endif
