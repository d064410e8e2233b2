/* What the relay's inbound parsed of the messages it wrote into handoff/
 * (struct relayed).  The inbound parses each message, for its id and to
 * verify it; the intake then read the same bytes from handoff/ and
 * parsed them again (perf: about a twelfth of the receiving host's main
 * thread in a relayed burst).  So the inbound keeps, per name it wrote,
 * its bytes and the document, and the intake takes the document only
 * when the file holds those very bytes.
 *
 * A parse is a function of the bytes (and [spool] max_file_size, whose
 * reload clears every entry), so nothing a producer can do to the file
 * or its name gets a document the file's bytes do not give: other bytes,
 * another inode under the name, a file swapped in since, all are parsed
 * as any file is.  Only the parse is taken.  The intake still
 * authenticates, validates and checks the times of every file itself,
 * and the inbound's verdict is not carried over. */
#include <stdlib.h>
#include <string.h>

#include "relayed.h"

static void drop(void *p)
{
        struct relayed_entry *e = p;

        free(e->buf);
        json_decref(e->doc);
}

void relayed_init(struct relayed *m)
{
        *m = (struct relayed){ 0 };
        dict_init_drop(&m->items, sizeof(struct relayed_entry), drop);
}

void relayed_clear(struct relayed *m)
{
        dict_clear(&m->items);
        m->bytes = 0;
}

static void forget(struct relayed *m, struct relayed_entry *e)
{
        m->bytes -= e->len;
        dict_remove(&m->items, e);
}

void relayed_put(struct relayed *m, const char *name, const char *buf, size_t len, json_t *doc,
                 const struct canon_src *src)
{
        struct relayed_entry *e;
        char *copy = NULL;

        if ((e = dict_get(&m->items, name)))
                forget(m, e);
        if (len > RELAYED_MAX_BYTES)
                goto skip;
        while ((e = dict_first(&m->items)) &&
               (dict_count(&m->items) >= RELAYED_MAX || m->bytes + len > RELAYED_MAX_BYTES))
                forget(m, e);
        /* out of memory: the intake parses it */
        if (!(copy = malloc(len ? len : 1)) || !(e = dict_put(&m->items, name, NULL)))
                goto skip;
        memcpy(copy, buf, len);
        *e = (struct relayed_entry){ .buf = copy, .len = len, .doc = doc, .src = *src };
        e->src.buf = NULL;
        m->bytes += len;
        return;
skip:
        free(copy);
        json_decref(doc);
}

bool relayed_take(struct relayed *m, const char *name, const char *buf, size_t len,
                  json_t **ret, struct canon_src *src)
{
        struct relayed_entry *e = dict_get(&m->items, name);
        bool same;

        if (!e)
                return false;
        same = e->len == len && !memcmp(e->buf, buf, len);
        if (same) {
                *ret = e->doc;
                e->doc = NULL;
                *src = e->src;
                src->buf = buf;
        }
        forget(m, e);
        return same;
}
