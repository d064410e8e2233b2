/* What the relay's inbound parsed of the messages it wrote; see relayed.c. */
#ifndef HD_RELAYED_H
#define HD_RELAYED_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "canon_src.h"
#include "dict.h"

/* At most this many entries, and this many bytes of messages, held: a
 * fetched batch is at most 64 messages (relay_queue.h), and the intake
 * takes each before the next batch's or soon after. */
#define RELAYED_MAX 256
#define RELAYED_MAX_BYTES (8 * 1024 * 1024)

/* handoff/NAME as the inbound wrote it: its bytes and the document
 * parsed from them. */
struct relayed_entry {
        char *buf;
        size_t len;
        json_t *doc;
        struct canon_src src;   /* its offsets into buf; src.buf unset */
};

struct relayed {
        struct dict items;      /* handoff/ name -> struct relayed_entry, oldest first */
        size_t bytes;           /* the entries' len together */
};

void relayed_init(struct relayed *m);
/* Every entry forgotten (a reload: [spool] max_file_size may differ). */
void relayed_clear(struct relayed *m);

/* handoff/name was just written with buf (len bytes, copied when kept),
 * doc the document canon_src_parse() gave of them (taken), src where in
 * buf its canonical bytes are.  The oldest go past RELAYED_MAX or
 * RELAYED_MAX_BYTES; a message over the bytes is not kept (nor copied). */
void relayed_put(struct relayed *m, const char *name, const char *buf, size_t len, json_t *doc,
                 const struct canon_src *src);

/* handoff/name read as buf (len bytes): if the inbound wrote these very
 * bytes under that name, the document it parsed of them (*ret, taken)
 * and *src pointing into buf, and true; else false (parse them).  The
 * entry goes either way. */
bool relayed_take(struct relayed *m, const char *name, const char *buf, size_t len,
                  json_t **ret, struct canon_src *src);

#endif
