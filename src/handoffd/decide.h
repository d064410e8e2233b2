/* The decision for one name in handoff/ (decide.c), up to the claim,
 * which the batch makes (intake.c).  Private to intake. */
#ifndef HD_DECIDE_H
#define HD_DECIDE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "handoff_doc.h"
#include "spool.h"

struct parts;

/* A name in handoff/ whose parse failed, when it was first seen as that
 * inode (a file still being written gets a grace). */
struct seen_entry {
        ino_t ino;
        int64_t first_usec;     /* monotonic */
};

/* What decide remembers of names it could not decide yet. */
struct decide_memo {
        struct dict seen;       /* handoff/ name -> struct seen_entry */
        struct dict dirs;       /* handoff/ name -> inode: a directory reported */
        bool dirs_full;         /* dirs was full: the rest are left unreported */
};

int decide_memo_new(struct decide_memo **ret);
void decide_memo_free(struct decide_memo *m);

/* One item between the first look and the claim. */
struct pending_look;

struct item {
        const char *name;
        int fd;
        struct pending_look *look;      /* opened when queued (watch.c), or NULL */
        uint64_t lock_id;       /* its id's byte of the lock file, held; 0: none */
        json_t *doc;            /* as parsed: not verified until h is filled */
        struct handoff h;       /* once verified (h.id[0]: filled) */
        struct agent_rt *agent;
        dev_t dev;              /* the producer's file, left once claimed */
        ino_t ino;
        uid_t uid;              /* its owner: its producer (quota.c) */
        struct timespec mtim;   /* its mtime, for claim_leftover() */
        bool authentic;         /* its MAC or signature good, its times past (h not filled) */
        bool counted;           /* quota_take() counted it as waiting */
        enum item_outcome outcome;
        int err;                /* < 0: a system error; it stays for a later look */
};

/* Steps 1-9 of handoffd(8), OPERATION, for it->name: 0 with the outcome in *ret, or
 * -errno.  IO_TO_CLAIM: it->h, it->agent and the id's lock stay
 * for the claim. */
int decide_item(struct parts *p, struct item *it, int64_t now, enum item_outcome *ret);

/* Does the decision of handoff/name open it (step 2)?  Not for a name
 * that is ignored, unsafe or left for another agent. */
bool decide_opens(const struct parts *p, const char *name);

/* Its id is known here already: the producer's file of a claim whose
 * record a crash kept beside it (the record made, this name not yet
 * removed) goes, as the claim would have done; anything else is a
 * replay, rejected as duplicate_id ("handoff_id '<id>' <how>").  0 with
 * the outcome in *ret, or -errno. */
int decide_claimed_again(struct spool *sp, struct item *it, const char *how, int64_t now,
                         enum item_outcome *ret);

/* It will not wait: what quota_take() counted goes. */
void decide_uncount(struct spool *sp, struct item *it);

#endif
