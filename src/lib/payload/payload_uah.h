/* Private: U.AgentHandoff/0.1.0, the AgentWorkflow handoff spec and its
 * YAML form (payload_uah.c). */
#ifndef HD_PAYLOAD_UAH_H
#define HD_PAYLOAD_UAH_H

#include <jansson.h>
#include <stddef.h>

#include "handoff.h"


/* roles NULL = the default role set; envelope is unused (the signature is
 * payload.c's validate hook). */
int payload_uah_validate(const json_t *p, const json_t *envelope,
                         const char *const *roles, hd_verdict *v);
/* YAML (libyaml) to JSON: mappings with string keys, no duplicates, no
 * aliases, one document; plain scalars by the YAML 1.2 core schema,
 * everything quoted stays a string. */
int payload_uah_yaml(const char *buf, size_t len, json_t **ret,
                     hd_verdict *v);

#endif
