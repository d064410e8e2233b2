/* SPOOL/receipts/journal (receipt_journal.c): the receipts' state on disk
 * as one append-only file of records, read back at the start, rewritten
 * with the live records only when the dead ones dominate.  It knows the
 * records' form, not what they mean (receipt_state.c). */
#ifndef HD_RECEIPT_JOURNAL_H
#define HD_RECEIPT_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "sbuf.h"

#define RJ_NAME "journal"

enum rj_kind {
        RJ_OWE,         /* owe ID ORIGIN: ID came from ORIGIN, owed its receipts */
        RJ_OUT,         /* out ID OUTCOME ORIGIN RECEIPT: signed, to publish */
        RJ_PUB,         /* pub ID OUTCOME: its PubAck came */
        RJ_SENT,        /* sent ID NAME: relayed from here, archived as NAME */
        RJ_DONE,        /* done ID: its final receipt is applied here */
        RJ_RES,         /* res ID ORIGIN: consumed here, its result owed to ORIGIN */
        _RJ_MAX,
};

/* One record: its fields, the last of which alone may hold spaces. */
struct rj_rec {
        enum rj_kind kind;
        const char *f[4];
};

struct rjournal {
        int dir_fd;             /* receipts/ (not owned) */
        int fd;                 /* receipts/journal, O_APPEND */
        bool sync;              /* [spool] fsync */
        bool dirty;             /* appended since the last rj_sync() */
        size_t n_rec;           /* records in the file */
        off_t size;             /* its length: where the next record starts */
        struct sbuf *into;      /* rj_rewrite(): records go here */
};

/* Opens (creates) dir_fd/journal and hands each record to apply in
 * order.  A last record cut short (a power cut in its append) or whose
 * sum is wrong ends the journal there: the file is cut back to the
 * records before it.  apply's <0 ends the read with that error. */
typedef int (*rj_apply_fn)(void *ctx, const struct rj_rec *rec);
int rj_open(struct rjournal *j, int dir_fd, bool sync, rj_apply_fn apply, void *ctx);
/* One record, appended with one write(): kept through a SIGKILL at once,
 * through a power cut after the next rj_sync(). */
int rj_append(struct rjournal *j, const struct rj_rec *rec);
int rj_sync(struct rjournal *j);
/* The journal replaced by what emit appends (rj_append() on the journal
 * it is given): written to a temp file, synced, renamed over journal, the
 * directory synced (write_atomic()).  On error the old journal stays. */
typedef int (*rj_emit_fn)(void *ctx, struct rjournal *j);
int rj_rewrite(struct rjournal *j, rj_emit_fn emit, void *ctx);
void rj_close(struct rjournal *j);

#endif
