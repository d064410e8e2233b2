/* Private to receipt.c (the sending host), receipt_in.c (the origin) and
 * receipt_state.c (the state, its journal, start and stop): the receipts'
 * state and the helpers they share. */
#ifndef HD_RECEIPT_INT_H
#define HD_RECEIPT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <limits.h>

#include <sys/stat.h>
#include <uv.h>

#include "handoff.h"
#include "receipt_journal.h"
#include "dict.h"
#include "relay_queue.h"

struct relay;

#define RECEIPT_MAX RELAY_RECEIPT_MAX    /* relay_queue.h */
/* Items consumed here from another host whose result may still come, at
 * most: past that the oldest is forgotten (its result stays here). */
#define RECEIPT_RESULTS_MAX 65536
#define RECEIPT_RETRY_MS 2000
/* Sending off: origins kept in memory for the rejections' detail. */
#define RECEIPT_ORIGINS_MAX 65536
/* Receipts one batch message carries at most (receipt.c); its bytes stay
 * within RECEIPT_MAX as a single receipt's. */
#define RECEIPT_BATCH_MAX 256

/* A host's public keys as host_pubkey_dir/HOST.pub held them (st). */
struct rhostkeys {
        char host[72];
        struct stat st;
        hd_key *keys[HD_PUBKEYS_MAX];
        size_t n;
};
#define RECEIPT_HOSTS_CACHED 8

/* The receipts' tables (struct dict, keyed SipHash: the ids are chosen by
 * producers and remote hosts).  The variable-length values are pointers
 * the entry owns, freed by the table's drop hook (receipt_state.c). */
#define RECEIPT_HOST_MAX 72     /* a host name and its NUL (hd_agent_valid) */
/* owed, keyed by handoff id: a final receipt owed to origin */
struct receipt_owed {
        char origin[RECEIPT_HOST_MAX];
};
/* queued, keyed by its Nats-Msg-Id ID:OUTCOME: a receipt to publish to
 * origin, unsigned as the journal records it (signed when it goes, alone
 * or in a batch), or signed (a single one signed already, or one an older
 * handoffd recorded) */
struct receipt_queued {
        char origin[RECEIPT_HOST_MAX];
        char *receipt;          /* len bytes and a NUL; owned */
        size_t len;
        bool busy;              /* published, its PubAck still to come */
};
/* sent, keyed by the id of an item relayed from here: the receipt
 * awaited for it, and its archive name */
struct receipt_sent {
        char *archive;          /* owned */
        bool gone;              /* the archived item is not there (rewrite) */
};

/* batches, keyed by a batch message's Nats-Msg-Id "receipts:DIGEST":
 * the queued keys it carries, published, its PubAck still to come */
struct receipt_batch {
        char (*keys)[RELAY_MSGID_MAX + 1];      /* owned */
        size_t n;
};
/* batching, keyed by an origin host: whether its last relayed message
 * said it takes batches (Handoff-Receipts: batch); memory only */
struct receipt_caps {
        bool batch;
};

/* fwd, keyed by handoff id: a cancel request going to the host the
 * item was relayed to (receipt_cancel.c) */
struct receipt_fwd {
        char host[RECEIPT_HOST_MAX];
        char *req;              /* the request's bytes; owned */
        size_t len;
        bool busy;              /* published, its PubAck still to come */
        bool acked;             /* its PubAck came: the answer is a receipt */
};

struct receipts {
        bool relay_locked;      /* LOCK_OFF_RELAY held */
        int dir_fd;             /* receipts/ */
        int pub_fd;             /* host_pubkey_dir, -1: accepting off */
        char *pub_dir;          /* its name, as configured at start */
        hd_key *key;            /* host_key, NULL: sending off */
        struct rhostkeys hk[RECEIPT_HOSTS_CACHED];
        size_t hk_next;
        /* receipts/journal: every change of the three tables below is a
         * record of it (sending off: owed is memory only) */
        struct rjournal j;
        struct dict owed;       /* of struct receipt_owed */
        struct dict queued;     /* of struct receipt_queued */
        struct dict sent;       /* of struct receipt_sent */
        struct dict results;    /* of struct receipt_owed: consumed, result owed */
        struct dict fwd;        /* of struct receipt_fwd (memory only) */
        struct dict batches;    /* of struct receipt_batch (memory only) */
        struct dict batching;   /* of struct receipt_caps (memory only) */
        size_t sent_kept;       /* sent's size after the last rewrite */
        uv_timer_t timer;       /* a retry after a failed publish */
        bool timer_open;
        /* archive/ files written since the last store_flush(), synced by
         * the flush hook before the spool's directories */
};

/* A receipt as it came, its fields pointing into doc (receipt_doc_read(),
 * in receipt.c with the writer, so one file spells a receipt's keys). */
struct rdoc {
        json_t *doc;
        const char *type, *id, *outcome, *host, *origin, *at, *reason, *detail;
        int completes;          /* consumed: its agent reports results; -1 unsaid */
        const json_t *result;   /* a result: the .result document */
};
void receipt_doc_read(struct rdoc *d);

/* A final outcome (consumed, expired, rejected, canceled); a result
 * (completed, failed, input_required), which may follow consumed; any
 * outcome (those and delivered). */
bool receipt_is_final(const char *o);
bool receipt_is_result(const char *o);
bool receipt_is_outcome(const char *o);


/* k's keys freed, k empty. */
void receipt_host_keys_drop(struct rhostkeys *k);

/* id owed a final receipt to origin (a host name), in owed only; 0,
 * -EINVAL (origin too long) or -ENOMEM.  Sending off: the origins kept
 * for the rejections' detail. */
int receipt_owed_put(struct receipts *rc, const char *id, const char *origin);

/* rec appended to the journal, then applied to the tables (as the start
 * applies it when it reads the journal back).  Not synced. */
int receipt_record(struct relay *r, const struct rj_rec *rec);
/* The journal rewritten with the live records when the dead ones
 * dominate; then synced (flush hook, before the spool's directories). */
int receipt_journal_sync(struct relay *r);

/* receipt_cancel.c's: the fwd table's requests published (again: those
 * in flight too, after a new connection); id ended there, its .outcome
 * archive/sname: the requests for it answered. */
void receipt_cancel_kick(struct relay *r, bool again);
void receipt_cancel_ended(struct relay *r, const char *id, const char *sname, const char *outcome);
bool receipt_cancel_hook(void *ctx, const char *id, const char *name);

/* receipt.c's, for the start: the spool's hooks, and a publish of what
 * waits. */
int receipt_flush_hook(void *ctx);
bool receipt_origin_hook(void *ctx, const char *name, char *buf, size_t n);
void receipt_outcome_hook(void *ctx, const char *id, const char *name, const char *outcome,
                          const char *reason, const char *detail, int64_t now);
void receipt_result_hook(void *ctx, const char *id, const char *status, const char *doc,
                         size_t len, int64_t now);

#endif
