/* Private to receipt.c (the whole, and the sending host) and
 * receipt_in.c (the origin): the receipts' state and the helpers both
 * use. */
#ifndef HD_RECEIPT_INT_H
#define HD_RECEIPT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <limits.h>

#include <jansson.h>
#include <uv.h>

#include "handoff.h"

struct relay;

#define RECEIPT_MAX 16384
#define RECEIPT_RETRY_MS 2000

struct receipts {
        int dir_fd, owed_fd, out_fd, sent_fd;
        int pub_fd;             /* host_pubkey_dir, -1: accepting off */
        char *pub_dir;          /* its name, as configured at start */
        hd_key *key;            /* host_key, NULL: sending off */
        json_t *pending;        /* out/ name -> busy (true while published) */
        /* Sending off (no host_key): id -> origin in memory only, for a
         * rejection to say where a file came from (no file per item). */
        json_t *origins;
        bool owed_dirty;
        uv_timer_t timer;       /* a retry after a failed publish */
        bool timer_open;
        /* Written since the last spool_flush(), synced by flush_hook()
         * before the spool's directories: n files, and the directories. */
        struct { int fd; char name[NAME_MAX + 1]; } *unsynced;
        size_t n_unsynced, cap_unsynced;
        bool out_dirty;
        /* For status: entries of owed/ (outcomes still owed a final
         * receipt) and of sent/ (items relayed from here whose final
         * receipt has not come), counted at start and kept since. */
        size_t n_owed, n_awaited;
};

/* A final outcome (consumed, expired, rejected); any outcome (those and
 * delivered). */
bool receipt_is_final(const char *o);
bool receipt_is_outcome(const char *o);

/* A small file of ours, NUL-terminated, or NULL. */
char *receipt_read_small(int dirfd, const char *name, size_t max, size_t *ret_len);

/* dirfd/name, just written: synced at the next spool_flush(), before the
 * outcome it precedes.  Without room, synced now. */
int receipt_note_unsynced(struct relay *r, int dirfd, const char *name);

#endif
