/* A2A outward (a2a_out.c): handoffs to a [remote NAME] a2a wait in
 * outbox/ and are sent to its A2A server by handoff-a2a, a process of
 * its own; their task is followed to its end. */
#ifndef HD_A2A_OUT_H
#define HD_A2A_OUT_H

#include <uv.h>

#include "spool.h"

struct a2a_out;

/* When the config has an A2A remote (*ret NULL otherwise): index outbox/'s
 * items for A2A remotes, set sp->a2a's hooks, start handoff-a2a. */
int a2a_out_start(uv_loop_t *loop, struct spool *sp, struct a2a_out **ret);
/* After a reload replaced sp->cfg: start the sender (*ap NULL, the
 * first A2A remote), or add and remove remotes' helpers. */
int a2a_out_reload(uv_loop_t *loop, struct spool *sp, struct a2a_out **ap);
/* Stop the helper (items stay in outbox/), clear the hooks, close the
 * handles; a2a_out_free() after the loop ran the close callbacks. */
void a2a_out_stop(struct a2a_out *a);
void a2a_out_free(struct a2a_out *a);

#endif
