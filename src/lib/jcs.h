/* JCS, the JSON Canonicalization Scheme (RFC 8785), see jcs.c. */
#ifndef HD_JCS_H
#define HD_JCS_H

#include <stddef.h>

#include <jansson.h>

/* v's RFC 8785 bytes (without the top-level member skip, unless NULL),
 * malloc'ed and NUL-terminated: 0, -ENOMEM, -ERANGE (not finite). */
int jcs_dump(const json_t *v, const char *skip, char **ret, size_t *ret_len);
/* The order of member names: by their UTF-16 code units. */
int jcs_keycmp(const char *a, const char *b);

#endif
