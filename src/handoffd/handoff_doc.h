/* A verified handoff as the daemon's modules see it (handoff_doc.c): its
 * fields parsed once, right after verification, so that no module looks
 * one up by key.  The library's calls that want the document itself
 * (bootstrap, baton, delivery profiles, the relay's copy) get h->doc. */
#ifndef HD_HANDOFF_DOC_H
#define HD_HANDOFF_DOC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handoff.h"
#include "payload.h"

#define HANDOFF_ID_SIZE 129             /* hd_id_valid(): at most 128 */
#define HANDOFF_AGENT_SIZE 65           /* hd_agent_valid(): at most 64 */

struct handoff {
        char id[HANDOFF_ID_SIZE];
        char from[HANDOFF_AGENT_SIZE], to[HANDOFF_AGENT_SIZE];
        char kid[HD_KID_MAX + 1];       /* "": signed by no named key */
        int64_t initiated_usec, expires_usec;   /* 0: not known (verified.c) */
        const struct payload_type *ptype;       /* NULL: not a known type */
        const json_t *payload;          /* in doc */
        json_t *doc;                    /* a reference held; NULL: only the
                                         * fields are known (verified.c) */
        /* The bytes it was read from, when they are its canonical bytes
         * (canon_src.c: what every producer writes); NULL when they were
         * not, and for a handoff read back from a record. */
        char *canon;
        size_t canon_len;
};

/* The fields of doc, a handoff that verified (hd_verify() checked each
 * one's form), into *ret, which takes a reference to doc.  -EBADMSG when
 * one it requires is missing or out of its bounds: a file of ours that
 * no longer reads as it was written. */
int handoff_parse(json_t *doc, struct handoff *ret);

/* handoff_parse() of the handoff a record holds (record.h), which the
 * daemon wrote from a handoff that verified. */
int handoff_from_record(const json_t *rec, struct handoff *ret);

/* Drops the reference and the bytes; *h zeroed.  NULL is fine. */
void handoff_clear(struct handoff *h);
#define _cleanup_handoff_ __attribute__((cleanup(handoff_clear)))

/* What a document not (or not yet) verified says of itself, for the
 * verdicts that come before the MAC and for a rejection's id: trusted
 * for nothing.  NULL where it says nothing (or not a string). */
const char *handoff_unverified_id(const json_t *doc);
const char *handoff_unverified_to(const json_t *doc);
/* Its initiated_at and expires_at, as written (NULL: none). */
void handoff_unverified_times(const json_t *doc, const char **ret_ini, const char **ret_exp);

#endif
