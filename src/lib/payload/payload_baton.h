/* Private: baton/1, the shape of a Baton payload and of a baton
 * (payload_baton.c); the store is baton.c. */
#ifndef HD_PAYLOAD_BATON_H
#define HD_PAYLOAD_BATON_H

#include <jansson.h>

#include "handoff.h"


int payload_baton_validate(const json_t *p, hd_verdict *v);
/* A whole baton (the stored one, or the result of a patch); where names
 * the member in details, e.g. "baton" or "baton_patch". */
int baton_validate(const json_t *b, const char *where, hd_verdict *v);

/* A session's key: a bare id, or CREATOR.ID (an agent name, a dot, an
 * id): the store's file name without .json. */
bool payload_baton_key_valid(const char *key);

#endif
