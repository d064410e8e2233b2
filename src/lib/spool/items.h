/* What handoffctl status/list/show and the hub (GET /api/v1/handoffs/{id},
 * A2A tasks/get) read from a spool directly, daemon or not: the items of
 * each state directory with their ids, agents, times and outcome or
 * reason. */
#ifndef HD_ITEMS_H
#define HD_ITEMS_H

#include <jansson.h>
#include <stdint.h>

extern const char *const items_states[4];   /* handoff claimed archive rejected */

/* Items of one state ("handoff", ...) of spool_dir as a JSON array of
 * {handoff_id?, state, name, path, from_agent?, to_agent?, at, age_s,
 *  bytes (its own file, no sidecar), outcome?, reason?, detail?,
 *  accepted_at?, completes?, result?}, a field the item does not have
 *  absent (never ""); completes: the agent's [agent] completes when it
 *  consumed it (a boolean; absent before the daemon recorded it);
 *  result: what the agent that consumed it reported
 *  (archive/NAME.result), {status (completed or failed), agent,
 *  completed_at, recorded_at, text?, data?, reason?, kid?}.
 * Untrusted files are read with the library's limits; unreadable ones
 * still count.  The id and the
 * agents of a file in rejected/ are the document's only when the daemon
 * authenticated it (its .reason names that id): a file rejected before
 * that is its name alone.  A file over max_read bytes (0: no bound) is
 * not read: its item is its name, stat and sidecar, with "unread": true. */
int items_list(const char *spool_dir, const char *state, size_t max_read, json_t **ret);

/* Count the items of one state from names and stat alone, never opening
 * a file: *ret_n items (as items_list() counts them), *ret_bytes with
 * their sidecars; with ages, an array of [inode, age_s] per item. */
int items_count(const char *spool_dir, const char *state, size_t *ret_n,
                uint64_t *ret_bytes, json_t *ages);

/* How much an item found for a handoff_id says, least first: a file of
 * that name rejected before it was authenticated, pending (handoff/ or
 * outbox/), rejected (authenticated: the .reason names the id; a replay's
 * duplicate_id does not count), claimed, archived.  An id is where its
 * highest-ranked item is. */
enum items_rank {
        ITEMS_NONE,
        ITEMS_REJECTED_BY_NAME,
        ITEMS_PENDING,
        ITEMS_REJECTED,
        ITEMS_CLAIMED,
        ITEMS_ARCHIVED,
};

/* The states items_find() looks in: items_states and outbox/. */
extern const char *const items_find_states[5];

/* Is name (in spool_dir/state, from readdir or inotify) handoff_id's
 * item?  Returns its rank (> 0) and *ret (as items_list() describes it),
 * ITEMS_NONE when it is not, or -errno. */
int items_match(const char *spool_dir, const char *state, const char *name,
                const char *handoff_id, json_t **ret);

/* Where handoff_id is: its highest-ranked item, or -ENOENT. */
int items_find(const char *spool_dir, const char *handoff_id, json_t **ret);

/* What became of an item, in one word: pending, claimed, consumed,
 * expired, relayed (an archive's outcome as written), rejected. */
const char *items_status(const json_t *item);

#endif
