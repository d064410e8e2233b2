/* The relay: handoffs across hosts through NATS JetStream (handoffd(8),
 * RELAY).  Its parts:
 *
 *   relay.c          start, stop, the events from the threads, status.
 *   relay_queue.c    the shared state and the queues between the loop and
 *                    the threads.
 *   relay_nats.c     the NATS side: the connection, the stream and the
 *                    durable consumer, a worker thread that publishes and a
 *                    fetch thread that pulls; results reach the loop
 *                    through a mutex-protected queue and a uv_async_t.
 *   outbox.c         outbound: outbox/ -> publish -> archive/ (relayed) or,
 *                    expired first, rejected/ (expired_unrelayed).
 *   relay_inbound.c  inbound: each message into handoff/ (tmp/ then
 *                    rename), acked only when durable; known ids dropped,
 *                    one for an agent not taken here refused unwritten.
 *   nats_dl.c        libnats, loaded by relay_start() (never without a
 *                    relay); relay*.c call it through sym_ pointers.
 *
 * libnats threads and ours never touch the spool, the config or the
 * counters: they only fill the queue.  The spool reaches the relay only
 * through the hooks relay_start() puts in sp->relay. */
#ifndef HD_RELAY_H
#define HD_RELAY_H

#include <uv.h>

#include "spool.h"

struct relay;

/* Start the relay when the config has one (*ret NULL otherwise): scan
 * outbox/, set sp->relay's hooks, connect in the background.  Never waits
 * for the network.  On failure *ret is NULL and nothing of the relay is
 * left but what the loop's close callbacks free when it next runs. */
struct parts;
int relay_start(uv_loop_t *loop, struct parts *p, struct relay **ret);
/* Stop the threads, close the connection (items in flight stay in
 * outbox/), clear the hooks, close the loop handles. */
void relay_stop(struct relay *r);
/* After relay_stop(): r is freed now, or by the last close callback of
 * its handles when the loop has not run them yet. */
void relay_free(struct relay *r);

#endif
