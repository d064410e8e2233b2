/* Private to libhandoff's payload formats: the limits and field checks
 * every payload type shares (payload_str.c).  Not installed. */
#ifndef HD_PAYLOAD_STR_H
#define HD_PAYLOAD_STR_H

#include <jansson.h>
#include <stdbool.h>

#include "handoff.h"

/* Limits on what a producer controls, beyond the document size limit. */
#define PAYLOAD_MAX_ITEMS   1024    /* entries of any list */
#define PAYLOAD_MAX_STRING  65536   /* bytes of any one string */
#define PAYLOAD_MAX_NAME    256     /* ids, agent names, roles */

/* Quote s for a detail line: at most 64 bytes, control bytes as '?'. */
const char *payload_quote(const char *s, char buf[static 72]);
/* A required or optional string; *ret is set when present. */
int payload_string(const char *type, const json_t *o, const char *key,
                   bool required, const char **ret, hd_verdict *v);
/* An array of strings (required or optional), each at most
 * PAYLOAD_MAX_STRING bytes, at most PAYLOAD_MAX_ITEMS. */
int payload_string_array(const char *type, const json_t *o, const char *key,
                         bool required, hd_verdict *v);

#endif
