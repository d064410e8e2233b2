/* Private to libhandoff and the daemon: the payload types as one table
 * (payload.c).  Everything that differs by payload_type is a field here,
 * so code elsewhere asks the table instead of comparing names.  Not
 * installed. */
#ifndef HD_PAYLOAD_H
#define HD_PAYLOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handoff.h"
#include "payload_names.h"

struct payload_type {
        const char *name;               /* the payload_type value */
        bool text;                      /* payload is a JSON string, not an object */
        bool session_store;             /* the daemon keeps its sessions (baton.c) */
        size_t max_file;                /* a payload file for handoffctl submit */
        /* envelope NULL = a bare payload; roles NULL = the default set. */
        int (*validate)(const json_t *p, const json_t *envelope,
                        const char *const *roles, hd_verdict *v);
        /* A payload file's bytes to the payload; NULL = JSON (hd_parse). */
        int (*load)(const char *buf, size_t len, json_t **ret, hd_verdict *v);
        int (*render)(const json_t *p, char **ret_md);
        const char *(*target)(const json_t *p);         /* NULL = none */
        const char *profile;            /* the delivery profile that writes it */
        int (*deliver)(int state_dirfd, const json_t *p,
                       const hd_deliver_opts *o, int64_t now_usec);
};

/* The entry for a payload_type value; NULL for NULL or an unknown type. */
const struct payload_type *payload_type_find(const char *name);

static inline bool payload_type_session_store(const char *name)
{
        const struct payload_type *t = payload_type_find(name);

        return t && t->session_store;
}

#endif
