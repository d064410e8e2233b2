/* What the parts of the spool (spool.c, spool_move.c, spool_leftover.c,
 * spool_reject.c) share; no other module includes it. */
#ifndef HD_SPOOL_INT_H
#define HD_SPOOL_INT_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "spool.h"

/* rejected/NAME, NAME~1 ... NAME~999: a rejection's names. */
#define SPOOL_REJECT_NAMES 1000

/* NAME of a rejection of in: a name that can live in rejected/, unsafe
 * bytes become '_'. */
static inline void spool_reject_base(const char *in, char *out, size_t n)
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

/* spool_move_out(); link_first: a link, the name in handoff/ left until
 * the next spool_flush(), where one can be made. */
int spool_move_out_link(struct spool *sp, const char *name, const struct spool_ino *was,
                        enum spool_dir to, const char *dst, bool link_first);

/* The file (dev, ino) is kept as dir/name: its further names in handoff/
 * go without a look elsewhere.  The oldest entry makes room. */
void spool_kept_note(struct spool *sp, dev_t dev, ino_t ino, enum spool_dir dir,
                     const char *name, bool synced);

#endif
