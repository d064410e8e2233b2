/* The record of accepted ids (hub_records.c): in memory, journalled in
 * state_dir/accepted.log. */
#ifndef HUBD_HUB_RECORDS_H
#define HUBD_HUB_RECORDS_H

#include <stdint.h>
#include <sodium.h>

#define HUB_HASH_HEX (2 * crypto_hash_sha256_BYTES + 1)
#define HUB_AGENT_MAX 64        /* hd_agent_valid() */

struct hub;

/* What the hub accepted under an id. */
struct hub_record {
        char hex[HUB_HASH_HEX];         /* SHA-256 of the bytes */
        char from[HUB_AGENT_MAX + 1], to[HUB_AGENT_MAX + 1]; /* "": unknown */
};

/* At start: the journal read, an older hub's record files taken in, the
 * journal written anew.  0 or -errno (h->records set either way, for
 * hub_records_close()). */
int hub_records_open(struct hub *h, int64_t now_s);
void hub_records_close(struct hub *h);
/* 1 with *ret, or 0: none. */
int hub_record_get(struct hub *h, const char *id, struct hub_record *ret);
/* Recorded, and journalled (synced with fsync = yes) before it returns. */
int hub_record_put(struct hub *h, const char *id, const struct hub_record *r, int64_t now_s);
/* Withdrawn (the drop it was for lost a race). */
int hub_record_drop(struct hub *h, const char *id);
/* The records past their time dropped; the journal written anew when most
 * of it is dead.  How many were dropped. */
int hub_records_prune(struct hub *h, int64_t now_s);
size_t hub_records_count(struct hub *h);

#endif
