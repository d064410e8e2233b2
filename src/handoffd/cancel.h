/* Cancel requests (handoffd(8) "CANCELING"; cancelreq.h).  A sender writes
 * a signed request into cancel/ to withdraw a handoff its agent has not
 * taken.  This module reads and checks the requests, keeps those not
 * answered yet, and answers them.  What happens to the item is item.c's
 * business (an event of its state table), under the id's lock. */
#ifndef HD_CANCEL_H
#define HD_CANCEL_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "cancelreq.h"
#include "spool.h"

struct parts;

/* Requests not answered, at most, and of one sender (from_agent, whose
 * key signed them).  The group shares [keys] default, which signs for any
 * name, so a request signed with a shared key also counts for its file's
 * owner (a uid nobody chooses), and such requests leave room for those of
 * senders with keys of their own.  Past a bound a new one is answered
 * busy. */
#define CANCEL_PENDING_MAX 1024
#define CANCEL_PENDING_PER_SENDER 64
#define CANCEL_PENDING_PER_UID 128      /* shared-key requests of one uid */
#define CANCEL_PENDING_RESERVE 256      /* of the MAX: own keys only */

/* p->cancels made, with the requests cancel/ holds (checked, not acted
 * on: the first sweep and the first look at each id do that).  0 or
 * -errno. */
int cancel_open(struct parts *p, int64_t now);
/* Watch cancel/ in loop (inotify; a scan at every sweep besides).  A
 * watch that cannot be had is logged: the sweeps still see requests. */
int cancel_watch(struct parts *p, uv_loop_t *loop);
/* After the loop has closed its handles: the rest freed.  NULL fine. */
void cancel_free(struct parts *p);

/* cancel/name, a new request: read, checked, kept and acted on (or
 * refused).  0 or -errno (a system error: looked at again by a scan). */
int cancel_request(struct parts *p, const char *name, int64_t now);
/* Every request of cancel/ looked at again: new ones taken in, the kept
 * ones past their expiry answered unknown, those of ids whose item has
 * an outcome answered; answers nobody took removed after
 * CANCELREQ_ANSWER_KEEP_S.  From the sweep. */
void cancel_scan(struct parts *p, int64_t now);

/* Is a request of from (NULL: anyone's) for id kept? */
bool cancel_wanted(const struct parts *p, const char *id, const char *from);
/* The item of id, sent by from, is looked at (its lock held): requests
 * of others refused, from's answered a (CA_NONE: they wait). */
void cancel_answer(struct parts *p, const char *id, const char *from,
                   enum cancelreq_answer a);
/* No claimed/<id>.json (its lock held): when the spool knows id (ids/:
 * archived, rejected, relayed), the requests for it are answered
 * not_cancelable, but for an item relayed whose host has not ended it
 * (sp->relay.cancel): those wait for its final receipt; else they wait
 * for it. */
void cancel_unclaimed(struct parts *p, const char *id);

#endif
