/* Reporting a result and learning what the daemon made of it, shared by
 * handoffctl complete and the handoff_complete tool of handoffctl mcp:
 * hd_complete() writes the agent's signed result into its handoffs/, and
 * the daemon takes it from there (recorded beside the archived item, or
 * refused with .refused.<id> saying why). */
#ifndef HANDOFFCTL_COMPLETE_H
#define HANDOFFCTL_COMPLETE_H

#include <stdbool.h>
#include <stdint.h>

#include "handoff.h"

/* What came of it: a AG_* code and one line, without the
 * "complete: " prefix.  AG_OK recorded; AG_NEGATIVE refused
 * (by the daemon, "REASON: detail", REASON as it names it, or here
 * before it was written: the same reasons); AG_STALE written and
 * not taken within the timeout (it stays for handoffd to take); others
 * as their names say. */
struct complete_out {
        int code;
        char msg[768];
};

/* The result res of agent for id, signed with k, into dir (the agent's
 * handoffs/, its path for the watch; dirfd held open), then up to
 * timeout_ms (0: not at all) for the daemon's word.  Returns out->code. */
int complete_run(const char *dir, int dirfd, const char *id, const char *agent,
                 const hd_result *res, const hd_key *k, bool do_fsync, int64_t timeout_ms,
                 struct complete_out *out);

/* The status res reports: completed, failed or input_required. */
const char *complete_status(const hd_result *res);

/* The two halves of it, for a caller that waits in its own way (the
 * hub's watcher): the result written (AG_OK) or refused before; then,
 * once complete_taken() says the daemon took it (or the caller's time is
 * up), what the daemon said of the result of status (complete_status()) (AG_STALE:
 * not taken yet). */
int complete_write(const char *dir, int dirfd, const char *id, const char *agent,
                   const hd_result *res, const hd_key *k, bool do_fsync, struct complete_out *out);
bool complete_taken(int dirfd, const char *id);
int complete_answer(const char *dir, int dirfd, const char *id, const char *status,
                    struct complete_out *out);

#endif
