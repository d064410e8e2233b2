/* Making a handoff and publishing it into a spool, shared by handoffctl
 * submit and the handoff_send tool of handoffctl mcp: build the
 * protocol_version 1 document the way the real producer does, check it
 * as the daemon would, sign it, write it atomically into tmp/ and move it
 * (no replace) into handoff/. */
#ifndef HANDOFFCTL_SUBMIT_H
#define HANDOFFCTL_SUBMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "handoff.h"

#define SUBMIT_DEFAULT_TTL 60
#define SUBMIT_MAX_TTL (366LL * 86400)
#define SUBMIT_ID_MAX 256

struct submit_req {
        const char *from, *to, *reason;
        const char *context;            /* context_summary, or NULL */
        const char *id;                 /* NULL: UNIXTIME-FROM-TO-16HEX */
        const char *kid, *caller_hash;  /* or NULL */
        const char *type;               /* payload_type, with payload */
        const json_t *payload;
        const json_t *transcript;       /* NULL: [] */
        int64_t ttl;                    /* seconds */
};

/* Why a submit did not happen: a AG_* code and one line, without
 * the "submit: " prefix (for a refusal "REASON: detail", REASON as the
 * daemon names it). */
struct submit_err {
        int code;
        char msg[512];
};

/* Can key sign, with kid (or NULL) in the document?  A public key cannot;
 * an Ed25519 key names itself, so a kid can only repeat its own.  Returns
 * 0 or AG_USAGE with e filled (path names the key). */
int submit_key_check(const hd_key *key, const char *path, const char *kid,
                     struct submit_err *e);

/* Build, check (fields and payload), sign and serialize.  Returns 0, or
 * the AG_* code of e.  On success *ret_buf holds the file's bytes
 * (malloc'ed) and ret_id its handoff_id. */
int submit_build(const struct submit_req *rq, const hd_key *key,
                 char **ret_buf, size_t *ret_len,
                 char ret_id[static SUBMIT_ID_MAX], struct submit_err *e);

/* Publish buf as <id>.json into spool's handoff/ via tmp/.  With create,
 * missing state directories (and the spool) are created with the modes
 * of systemd/handoffd.tmpfiles; without, they must exist.  Returns 0 or
 * the AG_* code of e (1 when the name is already in handoff/). */
int submit_publish(const char *spool, const char *id, const char *buf,
                   size_t len, bool create, struct submit_err *e);

/* Write buf as the file path (submit --output), atomically: a reader
 * (curl --data-binary @FILE) sees the old file or the whole new one.
 * Mode 0600: it may carry a transcript.  Returns 0 or the AG_*
 * code of e. */
int submit_write_file(const char *path, const char *buf, size_t len,
                      struct submit_err *e);

#endif
