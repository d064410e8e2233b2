/* The daemon's parts side by side: the storage (struct spool) and each
 * module's own state, declared in that module's header.  daemon.c opens
 * and closes them (daemon_parts_open()).
 *
 * A module whose state is kept here by value takes only what it uses
 * (foreign.c, verified.c, quota.c, retention.c never see this header).
 * The modules that act on an item across several others (intake, decide,
 * delivery, item, lifecycle, completion, cancel, control, metrics) take
 * the parts; their own state is kept by pointer, so this header includes
 * none of theirs.  The storage layer (store/) sees none of it. */
#ifndef HD_PARTS_H
#define HD_PARTS_H

#include <stdint.h>

#include "deadline.h"
#include "dict.h"
#include "foreign.h"
#include "quota.h"
#include "relayed.h"
#include "retention.h"
#include "spool.h"
#include "verified.h"

struct fd_batch;

struct cancels;
struct decide_memo;
struct delivery;
struct lifecycle;
struct results;

struct parts {
        struct spool *sp;
        /* The earliest time a module wants the daemon to look again; the
         * daemon's timer takes the earlier of this and the storage's own
         * (sp->due). */
        struct deadline deadline;
        /* agent -> struct unserved_entry (agents.h): why it is out of
         * service */
        struct dict unserved;
        struct foreign foreign;
        struct verified verified;
        /* what the relay's inbound parsed of the messages it wrote
         * (relayed.c), for the intake */
        struct relayed relayed;
        struct quota quota;
        struct retention retention;
        struct decide_memo *decide;     /* decide.h */
        struct delivery *delivery;      /* delivery.h */
        struct lifecycle *lc;           /* lifecycle.h: the sweep, the housekeeping */
        struct results *results;        /* completion.h */
        struct cancels *cancels;        /* cancel.c: the requests not answered yet */
        /* Looks at one claimed item under its lock (lifecycle_check());
         * cancel.c calls it when a request comes.  A pointer, like the
         * relay's hooks: lifecycle.c is above cancel.c, which may not
         * call up into it. */
        int (*check_item)(struct parts *p, const char *id, int64_t now);
        /* An intake batch's descriptors closed at its end (intake.c), or
         * NULL outside one. */
        struct fd_batch *closing;
};

#endif
