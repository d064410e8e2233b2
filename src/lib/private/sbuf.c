/* The string builder the payload writers share (XML, Markdown). */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbuf.h"

static bool sb_grow(struct sbuf *b, size_t n)
{
        if (b->err)
                return false;
        if (b->len + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 256;
                char *p;
                while (cap < b->len + n + 1)
                        cap *= 2;
                p = realloc(b->buf, cap);
                if (!p) {
                        b->err = -ENOMEM;
                        return false;
                }
                b->buf = p;
                b->cap = cap;
        }
        return true;
}

void sb_put(struct sbuf *b, const char *s, size_t n)
{
        if (!sb_grow(b, n))
                return;
        memcpy(b->buf + b->len, s, n);
        b->len += n;
        b->buf[b->len] = '\0';
}

void sb_puts(struct sbuf *b, const char *s)
{
        sb_put(b, s, strlen(s));
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
                if (!b->err)
                        b->err = -EINVAL;
                return;
        }
        if (!sb_grow(b, (size_t)n))
                return;
        va_start(ap, fmt);
        vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
}

int sb_take(struct sbuf *b, char **ret)
{
        int r = b->err;

        if (r == 0 && !b->buf)
                sb_grow(b, 0), r = b->err;
        if (r == 0 && b->buf)
                b->buf[b->len] = '\0';
        if (r < 0) {
                free(b->buf);
                *b = (struct sbuf){};
                return r;
        }
        *ret = b->buf;
        *b = (struct sbuf){};
        return 0;
}
