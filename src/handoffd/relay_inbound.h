/* Inbound relay messages into handoff/; see relay_inbound.c. */
#ifndef HD_RELAY_INBOUND_H
#define HD_RELAY_INBOUND_H

#include <stdint.h>

struct relay;
struct relay_batch;

/* Write each message of b into handoff/ (or drop it as a duplicate), make
 * them durable, set each one's ack verdict and hand b back. */
void relay_inbound_batch(struct relay *r, struct relay_batch *b, int64_t now);
/* At start: our temp files in tmp/ left by a crash. */
void relay_inbound_clean(struct relay *r);

#endif
