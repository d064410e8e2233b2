/* What the parts of the storage layer (store.c, store_move.c,
 * store_side.c) share; no module outside store/ includes it. */
#ifndef HD_STORE_INT_H
#define HD_STORE_INT_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "spool.h"

/* handoff/name has just been moved to to/dst by name (linked: a link
 * made there): 0 when what arrived is was (NULL: any) and no directory,
 * else undone and -ENOENT or -EISDIR (store.c). */
int store_arrived(struct spool *sp, const char *name, const struct spool_ino *was,
                  enum spool_dir to, const char *dst, bool linked);
/* handoff/name, the inode (dev, ino), leaves in store_flush(); spent:
 * a claim's producer file, to spent/. */
void store_leaving_note(struct spool *sp, const char *name, dev_t dev, ino_t ino, bool spent);

/* handoff/name goes now if it is still was: to spent/ (spent), else
 * unlinked. */
int store_leave_name(struct spool *sp, const char *name, const struct spool_ino *was, bool spent);

/* rejected/NAME, NAME~1 ... NAME~999: a rejection's names. */
#define STORE_REJECT_NAMES 1000


/* NAME of a rejection of in: a name that can live in rejected/, unsafe
 * bytes become '_'. */
static inline void store_reject_base(const char *in, char *out, size_t n)
{
        size_t o = 0;

        for (; *in && o + 1 < n && o < 200; in++) {
                unsigned char c = (unsigned char)*in;
                out[o++] = (c < 0x21 || c == 0x7f || c == '/' || c >= 0x80) ? '_' : (char)c;
        }
        out[o] = '\0';
        if (o == 0 || !strcmp(out, ".") || !strcmp(out, ".."))
                snprintf(out, n, "unnamed");
        if (out[0] == '.')
                out[0] = '_';
}

/* store_take(); link_first: a link, the name in handoff/ left until
 * the next store_flush(), where one can be made. */
int store_take_link(struct spool *sp, const char *name, const struct spool_ino *was,
                    enum spool_dir to, const char *dst, bool link_first);

/* The file (dev, ino) is kept as dir/name: its further names in handoff/
 * go without a look elsewhere.  The oldest entry makes room. */
void store_kept_note(struct spool *sp, dev_t dev, ino_t ino, enum spool_dir dir,
                     const char *name, bool synced);

#endif

