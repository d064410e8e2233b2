/* Private: vox/1.0, the Vox cross-agent handoff contract (payload_vox.c). */
#ifndef HD_PAYLOAD_VOX_H
#define HD_PAYLOAD_VOX_H

#include <jansson.h>

#include "handoff.h"


/* envelope may be NULL (a bare payload): then agent names are not
 * compared.  roles is unused: the signature is payload.c's validate hook. */
int payload_vox_validate(const json_t *p, const json_t *envelope,
                         const char *const *roles, hd_verdict *v);

#endif
