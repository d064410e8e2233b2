/* A request to withdraw a handoff (handoffd(8) "CANCELING"): the signed
 * document its sender drops into the spool's cancel/, and the answer the
 * daemon gives by renaming that file.  One place for the three that use
 * it: handoff-hubd (A2A CancelTask), handoffctl cancel, and the daemon,
 * so the writer and the reader of a name or a field cannot drift apart.
 *
 * The request is {"protocol_version": 1, "type": "cancel/1",
 * "handoff_id", "from_agent", "initiated_at", "expires_at"} signed as a
 * handoff is ("hmac", or "sig" and "kid"), by the key the daemon checks
 * from_agent's handoffs with: whoever may send as from_agent may take
 * back what it sent, and nobody else.  It never has a "to_agent", which
 * every handoff has: neither passes for the other.
 *
 * A request is answered once: cancel/NAME becomes cancel/.WORD.NAME (the
 * requester's file still, so the requester removes it; the daemon
 * removes answers nobody picked up after CANCELREQ_ANSWER_KEEP_S).
 * cancel/ is the group's to write, so anyone in it may drop a file of
 * that name first: an answer counts only as the request's own inode
 * under the answer's name alone (struct cancelreq_ticket). */
#ifndef HD_CANCELREQ_H
#define HD_CANCELREQ_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "handoff.h"

#define CANCELREQ_DIR "cancel"
#define CANCELREQ_TYPE "cancel/1"
#define CANCELREQ_MAX 4096              /* bytes of a request, at most */
#define CANCELREQ_ANSWER_KEEP_S 600     /* an answer nobody removed */
/* The longest wait for an answer: a request is good for max_window (a
 * day at most, by default) and then answered unknown. */
#define CANCELREQ_WAIT_MAX_MS (24LL * 3600 * 1000)

enum cancelreq_answer {
        CA_NONE,                /* not answered (yet) */
        CA_CANCELED,            /* withdrawn: archived as canceled */
        CA_NOT_CANCELABLE,      /* its agent has it, or it has ended already */
        CA_REFUSED,             /* a request that does not verify, or not its sender's */
        CA_UNKNOWN,             /* no such handoff came before the request expired */
        CA_BUSY,                /* good, but too many requests wait: not acted on */
        _CA_MAX
};

/* "canceled", "not_cancelable", "refused", "unknown", "busy" (NULL for
 * CA_NONE). */
const char *cancelreq_answer_name(enum cancelreq_answer a);

/* The signed request of from for id, valid ttl_s seconds from now_usec:
 * its bytes (malloc'ed).  0, or -errno (-EINVAL: a bad id or agent, a
 * key that cannot sign). */
int cancelreq_build(const char *id, const char *from, const hd_key *k, int64_t now_usec,
                    int64_t ttl_s, char **ret_buf, size_t *ret_len);

/* Is doc a request, signed for its from_agent (lookup as the daemon
 * checks handoffs), fresh at now_usec (policy p)?  0, or -EBADMSG with v
 * (bad_type, missing_field, bad_id, the key's and the clock's reasons). */
int cancelreq_check(const json_t *doc, hd_key_lookup_fn lookup, void *userdata,
                    const hd_policy *p, int64_t now_usec, hd_verdict *v);

/* What a request says of itself, pointing into doc (NULL: not there, or
 * not a string): checked by cancelreq_check(), not here. */
struct cancelreq_fields {
        const char *id, *from, *kid, *expires_at;
};
void cancelreq_fields(const json_t *doc, struct cancelreq_fields *ret);

/* A new request's name for id: "ID.RANDOM" (16 hex characters). */
int cancelreq_name(const char *id, char *buf, size_t n);
/* The name of the answer to request name: ".WORD.NAME". */
int cancelreq_answer_file(const char *name, enum cancelreq_answer a, char *buf, size_t n);
/* Is name (in cancel/) an answer?  Which one into *ret (may be NULL). */
bool cancelreq_is_answer(const char *name, enum cancelreq_answer *ret);

/* A request as dropped: its name and the file it is.  The rename that
 * answers it keeps the inode; a file someone else dropped under the
 * answer's name is another inode, or not the requester's. */
struct cancelreq_ticket {
        char name[NAME_MAX + 1];        /* in cancel/ */
        dev_t dev;
        ino_t ino;
        uid_t uid;              /* its owner: the requester */
};

/* The request buf as cancel_fd/name: written as tmp_fd/tmp_name, moved
 * without replacing (-EEXIST), synced with sync; *ret the ticket to wait
 * for its answer with.  0 or -errno. */
int cancelreq_drop(int tmp_fd, const char *tmp_name, int cancel_fd, const char *name,
                   const char *buf, size_t len, bool sync, struct cancelreq_ticket *ret);

/* Wait up to timeout_ms (at most CANCELREQ_WAIT_MAX_MS) for the answer
 * to the request of t (inotify on cancel_fd's directory, no polling): *ret
 * is the answer, CA_NONE when there is none yet; the answer found is
 * removed.  A file under an answer's name that is not t's request
 * renamed (another inode, another owner, a second link, or the request's
 * name still there) is no answer: it is left for the daemon to remove,
 * and the wait goes on.  0 or -errno. */
int cancelreq_await(int cancel_fd, const struct cancelreq_ticket *t, int64_t timeout_ms,
                    enum cancelreq_answer *ret);

#endif
