/* The relay's shared state (see relay.h for the parts): its settings, the
 * queue of jobs from the loop to the worker thread, the queue of events
 * from the threads to the loop (woken by a uv_async_t), and the loop's own
 * outbox index and counters.  Everything under m is shared; the rest is the
 * loop's, or the threads' (the NATS objects). */
#ifndef HD_RELAY_QUEUE_H
#define HD_RELAY_QUEUE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "dict.h"

struct spool;

#define RELAY_ID_MAX 128        /* hd_id_valid's limit */
/* A receipt's bytes at most (receipt.c), whatever max_file_size says: a
 * result's carries the agent's .result document (64 KiB), whose escapes
 * may triple it. */
#define RELAY_RECEIPT_MAX (3 * 64 * 1024 + 16384)
/* A Nats-Msg-Id: a handoff_id, or a receipt's "ID:OUTCOME" (receipt.c). */
#define RELAY_MSGID_MAX (RELAY_ID_MAX + 16)
#define RELAY_FETCH_BATCH 64
/* What one fetch of a batch may hold (the server's byte count: subject,
 * headers and data); a larger message comes alone (relay_nats.c). */
#define RELAY_FETCH_MAX_BYTES (4 * 1024 * 1024)
#define RELAY_INFLIGHT_MAX 512  /* publishes waiting for their PubAck */
#define RELAY_HELD_MAX (8u << 20) /* outbox/ bytes kept in memory for their publish */
#define RELAY_BACKOFF_MIN_USEC 1000000LL
#define RELAY_BACKOFF_MAX_USEC 60000000LL

/* One inbound message, as plain data for the loop. */
struct relay_in {
        char *data;
        size_t len;
        char msg_id[RELAY_ID_MAX + 1];  /* Nats-Msg-Id, "" when absent or unusable */
        bool ack;                       /* the loop's verdict */
        bool too_large;                 /* over max_msg (a receipt: RELAY_RECEIPT_MAX):
                                         * data not copied */
        /* Receipts (receipt.c): the Handoff-Origin header of a handoff
         * ("" when absent or not a host name); a message on this host's
         * receipt subject is a receipt, its Nats-Msg-Id in rmsg_id. */
        char origin[65];
        /* the agent its subject (handoff.<host>.<agent>) names, "" when
         * none that is a valid name */
        char agent[65];
        bool receipt;
        /* on handoff.<host>.cancel.<from>: a cancel request from the
         * item's origin (receipt_cancel.c), its Nats-Msg-Id in rmsg_id */
        bool cancel;
        char rmsg_id[RELAY_MSGID_MAX + 1];
        /* its Handoff-Receipts header is "batch": its origin takes
         * receipts in batches (receipt.c) */
        bool batch_ok;
};

struct relay_batch {
        size_t n;
        struct relay_in *in;
        bool done;                      /* the loop has decided (under m) */
};

enum relay_ev_type {
        RELAY_EV_STATE,         /* connected / ready changed, or an error */
        RELAY_EV_PUBACK,        /* a publish ended: ok (duplicate) or error */
        RELAY_EV_BATCH,         /* inbound messages to write */
};

struct relay_ev {
        struct relay_ev *next;
        enum relay_ev_type type;
        bool ok, duplicate;
        char id[RELAY_MSGID_MAX + 1];
        char text[256];         /* error text, or the server's URL */
        struct relay_batch *batch;
};

struct relay_job {
        struct relay_job *next;
        char id[RELAY_MSGID_MAX + 1];
        char subject[160];
        char *data;
        size_t len;
};

/* The ids of outbox/ items to publish now, in order from head on
 * (outbox.c): one allocation for them all, none per id. */
struct relay_ids {
        char (*id)[RELAY_ID_MAX + 1];
        size_t n, cap, head;
};

struct relay_stats {
        bool connected, ready;
        char server[256];
        uint64_t relayed, received, duplicates, publish_errors;
        /* receipt.c: sent (PubAck), applied, known already, dropped as
         * not verifying. */
        uint64_t receipts_sent, receipts_applied, receipts_duplicate, receipts_bad;
        /* receipt messages PubAck'ed (a batch counts once), the Ed25519
         * signatures made for them, the batch messages among them; at the
         * origin, receipt messages whose signature was checked and the
         * batches among them */
        uint64_t receipt_msgs_sent, receipts_signed, receipt_batches_sent;
        uint64_t receipts_verified, receipt_batches_in;
        /* relay_inbound.c: messages that owed no receipt (origin without
         * a key here, or unverified over the rate) */
        uint64_t receipts_withheld;
        char last_error[256];
        int64_t last_error_usec;
};

/* Receipts one origin may still be owed for messages that do not verify
 * here (relay_inbound.c): a bucket of RELAY_UNVERIFIED_BURST, refilled
 * by one a second. */
struct relay_owed_rate {
        int64_t credit_usec;    /* one receipt costs a second of it */
        int64_t at;             /* usec: the credit's last update */
        bool said;              /* the withholding logged since the last receipt */
};
#define RELAY_UNVERIFIED_BURST 100

struct relay {
        uv_loop_t *loop;
        /* the daemon's parts (the cancels a receipt answers), and their
         * storage */
        struct parts *p;
        struct spool *sp;
        uv_async_t async;
        uv_timer_t timer;       /* outbox: submit, retry, expire */
        bool handles_open;
        /* Loop handles of r's (these two, the receipts' timer) not yet
         * through their close callback: r is freed with the last of them
         * when relay_free() came first (relay.c). */
        unsigned n_handles;
        bool free_pending;

        /* Settings, copied at start: a reload does not change them. */
        char *host, *stream, *durable, *filter;
        char *servers;          /* as configured, for what is said */
        int replicas;
        int64_t max_age_usec;
        size_t max_msg;                 /* [spool] max_file_size */
        bool takes_batches;             /* receipts accepted here: say so
                                         * (Handoff-Receipts: batch) */

        /* NATS objects: made and used by the two threads only. */
        void *opts, *nc, *js, *sub;     /* natsOptions, natsConnection, jsCtx, natsSubscription */
        pthread_t worker, fetcher;
        bool worker_started, fetcher_started;

        pthread_mutex_t m;
        pthread_cond_t wake_worker, wake_fetcher;
        /* Under m. */
        bool stop, connected, ready;
        char url[200];          /* the server connected to last */
        bool closed;            /* async closed: libnats callbacks still
                                 * running after the stop post nothing */
        struct relay_job *jobs, *jobs_tail;
        struct relay_ev *evs, *evs_tail;
        struct relay_batch *batch;      /* handed to the loop, not yet done */

        /* The loop's own. */
        struct dict outbox;     /* id -> struct outbox_entry (outbox.h) */
        size_t held;            /* bytes the entries hold for their first publish */
        /* ids taken into outbox/ since the last store_flush() that synced:
         * their "Queued" line waits for it (id -> the agent) */
        struct dict unsaid;
        struct relay_ids queue; /* ids to publish now */
        int64_t scan_at;        /* next look at every item (expiry, retries) */
        size_t inflight;
        struct relay_stats st;
        struct receipts *rc;    /* receipt.c's; NULL: receipts off */
        /* origin -> struct relay_owed_rate (relay_inbound.c): the
         * receipts owed for messages that do not verify here, per origin
         * with a key in host_pubkey_dir (so no more entries than keys) */
        struct dict unverified;
        /* host_pubkey_dir/ORIGIN.pub looked at once a batch of fetched
         * messages, not once each (relay_inbound.c origin_keyed()): the
         * origin looked at last in this batch ("" none yet), and whether
         * it has a key */
        char keyed_origin[sizeof(((struct relay_in *)0)->origin)];
        bool keyed;
};

/* The close callback of each loop handle of r's (its data r): relay.c's,
 * handed to receipt_stop() for the receipts' timer. */
void relay_handle_closed(uv_handle_t *h);

/* From the loop: publish data on subject with Nats-Msg-Id id (takes data). */
int relay_publish(struct relay *r, const char *id, const char *subject,
                  char *data, size_t len);
/* From the loop: the verdicts of a batch are in; the fetch thread acks. */
void relay_batch_done(struct relay *r, struct relay_batch *b);
/* Record an error for status (loop only). */
void relay_error(struct relay *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Queue an event for the loop and wake it (any thread). */
void relay_post(struct relay *r, struct relay_ev *ev);
/* A batch and its messages (the fetch thread, or at stop). */
void relay_batch_free(struct relay_batch *b);
/* One message as the fetch thread got it into *in (zeroed): its subject,
 * its Nats-Msg-Id, Handoff-Origin and Handoff-Receipts headers (NULL when
 * absent) and its
 * data, copied unless over r->max_msg.  No NATS: the fuzz target calls it. */
void relay_in_fill(const struct relay *r, struct relay_in *in, const char *subject,
                   const char *msg_id, const char *origin, const char *caps,
                   const void *data, size_t len);

#endif
