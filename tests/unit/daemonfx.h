/* A temp spool opened as handoffd opens it (config_load + spool_open), for
 * the Check suites that call the daemon's plain functions directly, no
 * event loop: agents alice and carol served here; one HMAC key, the
 * default; carol signs with an Ed25519 key and requires it (require = sig). */
#ifndef HD_DAEMONFX_H
#define HD_DAEMONFX_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "spool.h"

struct fx {
        char *root;
        struct config *cfg;
        struct spool *sp;
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

#endif
