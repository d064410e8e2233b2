/* A temp spool and the daemon's parts, opened as handoffd opens them
 * (config_load(), daemon_parts_open()), for the Check suites that call
 * the daemon's plain functions directly, with no event loop.  Agents
 * alice and carol are served here, with one HMAC key, the default; carol
 * signs with an Ed25519 key and requires it (require = sig). */
#ifndef HD_DAEMONFX_H
#define HD_DAEMONFX_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "parts.h"
#include "spool.h"

struct fx {
        char *root;
        struct config *cfg;
        struct parts p;         /* as the daemon holds them (daemon_parts_open()) */
        struct spool *sp;       /* p.sp */
        struct agent_rt *alice;
        hd_key *k;              /* the spool's key */
        hd_key *other;          /* a key the spool does not know */
        hd_key *carol;          /* carol's Ed25519 secret key (pubkeys = carol.pub) */
};

void fx_open(struct fx *f);
void fx_close(struct fx *f);

/* A handoff from bob to `to`, initiated age_s seconds ago and expiring
 * ttl_s after now, signed with k (NULL: unsigned). */
json_t *fx_doc(const char *id, const char *to, int64_t age_s, int64_t ttl_s, const hd_key *k);
/* doc as dirfd/name; doc's reference is taken. */
void fx_put_doc(int dirfd, const char *name, json_t *doc);
/* prefix + name + suffix in dirfd, holding text. */
void fx_put(int dirfd, const char *prefix, const char *name, const char *suffix,
            const char *text);
bool fx_there(int dirfd, const char *prefix, const char *name, const char *suffix);

/* For the intake suites (test_intake*.c).  Decide one name (one batch of
 * one: a batch always decides its first); its item_outcome. */
int fx_decide(struct fx *f, const char *name);
/* The reason rejected/<name>.reason gives, or "" (static). */
const char *fx_reason_of(struct fx *f, const char *name);
/* name decided (out) as rejected for reason: in rejected/ as `as` (its
 * name made printable), or as name. */
void fx_assert_rejected_as(struct fx *f, const char *name, const char *as, int out,
                           const char *reason);
void fx_assert_rejected(struct fx *f, const char *name, int out, const char *reason);
/* Make dirfd/name look written `age_s` seconds ago. */
void fx_age(int dirfd, const char *name, int64_t age_s);
/* A handoff from `from` to `to`, fresh, not signed. */
json_t *fx_doc_from(const char *id, const char *from, const char *to);
/* handoff/x.json one byte over the default max_size (and unparsable). */
void fx_put_too_large(struct fx *f);

#endif
