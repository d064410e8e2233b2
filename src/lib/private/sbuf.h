/* Private to libhandoff: a growable string whose first error is sticky,
 * so a writer checks once, at sb_take() (sbuf.c).  Not installed. */
#ifndef HD_SBUF_H
#define HD_SBUF_H

#include <stddef.h>

struct sbuf {
        char *buf;
        size_t len, cap;
        int err;                        /* first error, sticky */
};
void sb_put(struct sbuf *b, const char *s, size_t n);
void sb_puts(struct sbuf *b, const char *s);
void sb_printf(struct sbuf *b, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* The string (malloc'ed) or -errno; b is emptied either way. */
int sb_take(struct sbuf *b, char **ret);

#endif
