/* The daemon's sidecars as typed structs (store_doc.c): an archived
 * item's .outcome, a rejection's .reason, a result's .result.  Each is
 * written and read there alone, so no module spells their keys. */
#ifndef HD_STORE_DOC_H
#define HD_STORE_DOC_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handoff.h"
#include "handoff_doc.h"

/* archive/NAME.outcome: how an item ended. */
struct store_outcome {
        char id[HANDOFF_ID_SIZE];
        char outcome[16];               /* consumed, expired, canceled, relayed */
        char from[HANDOFF_AGENT_SIZE], to[NAME_MAX + 1];
        int64_t archived_usec;
        int64_t accepted_usec;          /* 0: not claimed here (relayed) */
        char relayed_to[NAME_MAX + 8];  /* relayed: the host, or "a2a:REMOTE" */
        bool duplicate;                 /* relayed: the host had it already */
        int completes;                  /* consumed: the agent's completes; -1 unsaid */
        /* Relayed: how it ended there (an A2A remote's task, written
         * here; a relay host's, from its receipts); read back. */
        char remote_outcome[32];
        const char *remote_detail, *a2a_task;
};

/* The sidecar's bytes (canonical JSON), *ret_buf the caller's to free. */
int store_outcome_dump(const struct store_outcome *o, char **ret_buf, size_t *ret_len);
/* archive/name (an .outcome) into *ret: 0, -ENOENT, -EBADMSG (not one),
 * or -errno.  Only id, outcome, from, to, the times, relayed_to,
 * completes and remote_outcome are read back. */
int store_outcome_load(int dirfd, const char *name, struct store_outcome *ret);

/* A receipt's news of an item relayed (receipt_in.c), for its .outcome. */
struct store_remote_end {
        const char *outcome, *host, *at, *reason, *detail;
        int completes;          /* consumed: its agent reports results; -1 unsaid */
};

/* archive/name, the .outcome of an item relayed to host, as a document
 * for store_outcome_add_end() (*ret the caller's): 0, -ENOMSG when it is
 * not one relayed to host, -ENOENT, -EBADMSG, or -errno. */
int store_outcome_load_relayed(int dirfd, const char *name, const char *host, json_t **ret);
/* e's outcome added to the remote outcomes of side; the remote outcome
 * set too unless the one there is final (is_final()); *ret_dup when e's
 * outcome was there already (side unchanged). */
int store_outcome_add_end(json_t *side, const struct store_remote_end *e,
                          bool (*is_final)(const char *outcome), int64_t now, bool *ret_dup);

/* rejected/NAME.reason: why. */
struct store_reason {
        char reason[64];
        char detail[HD_DETAIL_MAX + 256];
        char id[HANDOFF_ID_SIZE];       /* "": it names none it proved */
};

int store_reason_dump(const char *base, hd_reason reason, const char *detail, const char *origin,
                      const char *handoff_id, int64_t now, char **ret_buf, size_t *ret_len);
int store_reason_load(int dirfd, const char *name, struct store_reason *ret);

/* handoffs/.refused.ID: why an agent's result was refused. */
int store_refusal_dump(const char *id, const char *reason, const char *detail, int64_t now,
                       char **ret_buf, size_t *ret_len);

/* archive/NAME.result: an agent's (or an A2A remote's) result. */
int store_result_dump(const char *id, const char *agent, const char *status, int64_t at,
                      const json_t *result, char **ret_buf, size_t *ret_len);
/* A .result document another host recorded for id (a receipt's,
 * receipt_in.c): 0 when it is one, of that id and with that status;
 * -EBADMSG else. */
int store_result_check(const json_t *doc, const char *id, const char *status);
/* archive/name (a .result): its result in *ret (the caller's), its
 * recorded_at as written in at. */
int store_result_load(int dirfd, const char *name, size_t max, json_t **ret, char *at, size_t n);

#endif
