/* A claimed item as one look reads it off its files (item.c): its state,
 * the agent's names for it, and what the action of that state (item_act.c,
 * item_legacy.c) decides. */
#ifndef HD_ITEM_FILES_H
#define HD_ITEM_FILES_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cancelreq.h"
#include "handoff_doc.h"
#include "spool.h"

struct parts;

/* The states of a claimed item, read off its files (handoffd(8), "Crash
 * windows"); the order matters to item_check_locked(). */
enum item_state {
        IS_GONE,        /* archived by another daemon since it was opened */
        IS_NOT_OURS,    /* for an agent not served here: left alone */
        IS_TAMPERED,    /* an earlier version's item that no longer verifies */
        IS_LEGACY,      /* an earlier version's item (producer's file, marker) */
        IS_HIDDEN,      /* record, hidden .pending. bootstrap: publish */
        IS_PUBLISHED,   /* record, bootstrap: waits for its consumer */
        IS_EXPIRING,    /* record, .expire.: the expiry was cut short */
        IS_CANCELING,   /* record, .cancel.: the cancel was cut short */
        IS_TAKEN,       /* record, no bootstrap: consumed */
        _IS_MAX
};

/* The agent's names for an item, as bits of item_files.files. */
enum { F_EXPIRE = 1, F_BOOT = 2, F_PENDING = 4, F_CANCEL = 8 };

/* What the look read off the files, for the action; what the action
 * decided, for item_check_locked(). */
struct item_files {
        const char *id;
        struct handoff h;       /* the handoff the record holds (from the
                                 * cache: its fields, no doc); legacy: the
                                 * producer's file, once it verified */
        int64_t accepted_usec;  /* the record's accepted_at; 0: none */
        json_t *marker;         /* legacy: claimed/<id>.delivered, or NULL */
        bool legacy;            /* an earlier version's item */
        struct agent_rt *a;
        hd_verdict v;           /* legacy: why it no longer verifies */
        char bname[NAME_MAX + 1], pname[NAME_MAX + 1], xname[NAME_MAX + 16];
        char cname[NAME_MAX + 16];
        char mname[NAME_MAX + 1];
        unsigned files;         /* F_*: which of the agent's names are there */
        struct stat st;         /* claimed/<id>.json */
        /* What the action decided for a cancel of the item: the answer
         * its sender's requests get (CA_NONE: none yet, they wait). */
        enum cancelreq_answer answer;
        /* The action archived the item here (not: another daemon did). */
        bool archived;
};

/* An action of item.c's table, the id's lock held: 0 or -errno; what it
 * decided in f. */
typedef int item_action(struct parts *p, struct item_files *f, int64_t now);

#endif
