/* Private: the delivery profiles' writers into an agent's state_dir
 * (deliver.c); payload.c picks one by payload_type. */
#ifndef HD_DELIVER_H
#define HD_DELIVER_H

#include <jansson.h>
#include <stdint.h>

#include "handoff.h"

/* The Vox contract file, .vox/handoffs/<session_id>.json. */
int deliver_vox(int state_dirfd, const json_t *p, const hd_deliver_opts *o,
                int64_t now_usec);
/* The ACT handoff directory, in o->act_format. */
int deliver_act(int state_dirfd, const json_t *p, const hd_deliver_opts *o,
                int64_t now_usec);

#endif
