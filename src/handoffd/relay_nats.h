/* The NATS side of the relay: the connection options from [relay] and the
 * worker thread (relay_nats.c), the fetch thread (relay_fetch.c), and what
 * both use to talk to the loop. */
#ifndef HD_RELAY_NATS_H
#define HD_RELAY_NATS_H

#include <pthread.h>
#include <stdint.h>

#include "config.h"
#include "nats_dl.h"
#include "relay_queue.h"

int relay_options(struct relay *r, const struct config_relay *c);
/* Connects, sets up the stream, the consumer and the pull subscription,
 * publishes the jobs; closes the connection at stop. */
void *relay_worker_main(void *arg);
/* A state event for the loop (any thread): fmt NULL, the state only;
 * "!..." an error; else the server now connected to. */
void relay_post_state(struct relay *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* libnats's last error, else the text of s. */
const char *relay_nats_err(natsStatus s);
/* Waits on c (the monotonic clock's) at most ms. */
void relay_timed_wait(pthread_cond_t *c, pthread_mutex_t *m, int64_t ms);
/* Pulls, hands each batch to the loop, acks what the loop made durable. */
void *relay_fetch_main(void *arg);

#endif
