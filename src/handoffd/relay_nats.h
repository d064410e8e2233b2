/* The NATS side of the relay (relay_nats.c): the connection options from
 * [relay] and the two threads relay.c starts. */
#ifndef HD_RELAY_NATS_H
#define HD_RELAY_NATS_H

#include "config.h"
#include "relay_queue.h"

int relay_options(struct relay *r, const struct config_relay *c);
/* Connects, sets up the stream, the consumer and the pull subscription,
 * publishes the jobs; closes the connection at stop. */
void *relay_worker_main(void *arg);
/* Pulls, hands each batch to the loop, acks what the loop made durable. */
void *relay_fetch_main(void *arg);

#endif
