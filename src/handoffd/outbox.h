/* outbox/: handoffs for remote agents, verified here, waiting for the
 * relay's PubAck; see outbox.c. */
#ifndef HD_OUTBOX_H
#define HD_OUTBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "handoff_doc.h"

struct relay;
struct spool_ino;

#define OUTBOX_NAME_SIZE 65     /* an agent or host name: hd_agent_valid()'s 64 */

/* An item of outbox/ the relay sends, keyed by its handoff_id in
 * r->outbox (relay_queue.h). */
struct outbox_entry {
        int64_t at;             /* usec: entered outbox/ */
        int64_t exp;            /* usec: its expires_at; the next look when a reject failed */
        int64_t next;           /* usec: its next try (0: at once) */
        int64_t tries;          /* publishes failed in a row */
        bool busy;              /* published, its PubAck not yet in */
        bool queued;            /* its id in r->queue */
        char to[OUTBOX_NAME_SIZE], from[OUTBOX_NAME_SIZE];
        char host[OUTBOX_NAME_SIZE];    /* published to ("" before the first publish) */
        /* Its bytes as the take wrote them into outbox/<id>.json, kept
         * for the first publish (NULL: read from the file; at most
         * RELAY_HELD_MAX bytes held in all), and the producer's file that
         * the take's note names (src_dev 0: read the note). */
        char *data;
        size_t len;
        dev_t src_dev;
        ino_t src_ino;
};
/* Frees what an entry holds (its dict's drop). */
void outbox_entry_drop(void *e);

/* The relay's take (relay.c), asked by decide.c: move handoff/name
 * (verified, for a [remote] agent, its id not seen here; the inode was)
 * to outbox/<id>.json and queue it.
 * -EEXIST: that id is already in outbox/; -ENOENT: was has left the name. */
int outbox_take(struct relay *r, const char *name, const struct stat *was,
                const struct handoff *h, int64_t now);
/* At start: every item in outbox/ (it survives restarts). */
int outbox_scan(struct relay *r, int64_t now);
/* Publish what is due and expire what is late, soon (in the loop). */
void outbox_kick(struct relay *r);
/* The relay is (again) connected and set up: retry everything now. */
void outbox_ready(struct relay *r);
/* A new connection: what was in flight on the old one will get no
 * PubAck; publish it again now (the stream drops a second copy). */
void outbox_resend(struct relay *r);
/* A publish ended: archive it as relayed, or back off. */
void outbox_puback(struct relay *r, const char *id, bool ok, bool duplicate,
                   const char *err, int64_t now);

/* The store's hook after a flush whose syncs succeeded: the "Queued" line
 * of each item taken into outbox/ since. */
void outbox_synced(void *ctx);

#endif
