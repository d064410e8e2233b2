/* Inbound relay messages into handoff/; see inbox.c. */
#ifndef HD_INBOX_H
#define HD_INBOX_H

#include <stdint.h>

struct relay;
struct relay_batch;

/* Write each message of b into handoff/ (or drop it as a duplicate), make
 * them durable, set each one's ack verdict and hand b back. */
void inbox_batch(struct relay *r, struct relay_batch *b, int64_t now);
/* At start: our temp files in tmp/ left by a crash. */
void inbox_clean(struct relay *r);

#endif
