/* Agents' results (completion.c): the word of the agent that consumed a
 * handoff on what came of it, taken from the agent's handoffs/ and
 * recorded beside the archived item. */
#ifndef HD_COMPLETION_H
#define HD_COMPLETION_H

#include <stdint.h>

#include "spool.h"

struct parts;

/* An item archived as consumed lately: its archive/ name. */
struct result_recent {
        char archive[NAME_MAX + 1];
};

/* The agents' results not taken yet, and the items they may be for. */
struct results {
        bool due;               /* a result waits: the sweep's end looks */
        /* id -> struct result_recent of the items archived as consumed
         * lately (the oldest dropped) */
        struct dict recent;
        int64_t listed_at;      /* archive/ last listed for results (monotonic
                                 * usec: at most once a second) */
};

int completion_new(struct results **ret);
void completion_free(struct results *rs);

/* Why a result is refused beyond what its document says (an hd_reason
 * then): the names go into .refused.<id> and the log. */
enum completion_refusal {
        RR_NOT_CONSUMED,        /* no item of that id consumed by this agent */
        RR_ALREADY_COMPLETED,   /* it has a result already: the first stands */
        _RR_MAX
};
const char *completion_refusal_name(enum completion_refusal r);

/* name appeared in a's handoffs/ (inotify IN_MOVED_TO): a result
 * (.result.<id>) is verified and recorded or refused; any other name is
 * not ours here (0). */
int completion_arrived(struct parts *p, struct agent_rt *a, const char *name, int64_t now);

/* item_act.c, the lock of id held: id has just been archived as aname,
 * consumed by a.  A result that came before the archive (between the
 * consume and its archive) is taken now.  0, 1 taken, or -errno. */
int completion_archived_locked(struct parts *p, struct agent_rt *a, const char *id,
                           const char *aname, int64_t now);

/* The sweep (inotify is a hint): every result waiting in the agents'
 * handoffs/, and refusals no agent read for RESULT_REFUSED_KEEP_S
 * removed. */
#define RESULT_REFUSED_KEEP_S 86400
void completion_scan(struct parts *p, int64_t now);

#endif
