/* Private helpers shared by libhandoff, handoffd and handoffctl: cleanup
 * attributes, checked string formatting, small macros.  Not installed. */
#ifndef HD_UTIL_H
#define HD_UTIL_H

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "handoff.h"

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}

/* Microseconds on the monotonic clock: for budgets and quiet spells,
 * which a step of the wall clock must not stretch or cut. */
/* FNV-1a, 64 bits, over n bytes from h (FNV_BASIS to start): the lock
 * offsets of lock.c, the metrics' fingerprint, the hub's lock stripes. */
#define FNV_BASIS UINT64_C(0xcbf29ce484222325)
static inline uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
        const unsigned char *c = p;

        for (size_t i = 0; i < n; i++)
                h = (h ^ c[i]) * UINT64_C(0x100000001b3);
        return h;
}

static inline int64_t mono_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_json_ _cleanup_(json_decrefp)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Take ownership: return *p and set it to the empty value. */
#define TAKE_PTR(p) ({ __typeof__(p) _t = (p); (p) = NULL; _t; })
#define TAKE_FD(fd) ({ int _t = (fd); (fd) = -1; _t; })

/* snprintf that reports truncation as -ENAMETOOLONG. */
_printf_(3, 4) static inline int
xsnprintf(char *buf, size_t n, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vsnprintf(buf, n, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -EINVAL;
        if ((size_t)r >= n)
                return -ENAMETOOLONG;
        return r;
}

/* Replace every byte of s that is not part of valid UTF-8 with '?', in
 * place: details quote untrusted bytes and must fit in JSON strings. */
void utf8_fix(char *s);

/* Python's str.isspace() for one code point, and whether a UTF-8 string is
 * empty once stripped as str.strip() strips (invalid UTF-8 is not blank). */
bool py_isspace(uint32_t cp);
bool utf8_blank(const char *s);

/* Fill a verdict and return -EBADMSG, so rejections read as one line:
 *         return verdict(v, HD_R_BAD_ID, "handoff_id '%s' ...", id); */
_printf_(3, 4) static inline int
verdict(hd_verdict *v, hd_reason r, const char *fmt, ...)
{
        va_list ap;

        if (v) {
                v->reason = r;
                va_start(ap, fmt);
                vsnprintf(v->detail, sizeof(v->detail), fmt, ap);
                va_end(ap);
                utf8_fix(v->detail);
        }
        return -EBADMSG;
}

static inline void verdict_clear(hd_verdict *v)
{
        if (v) {
                v->reason = HD_OK;
                v->detail[0] = '\0';
        }
}

/* An untrusted string for a one-line detail: quoted, '"' and
 * '\\' escaped, control and non-ASCII bytes as \xNN, cut at QUOTE_MAX
 * input bytes; buf needs QBUF_LEN bytes. */
#define QUOTE_MAX 48
#define QBUF_LEN (4 * QUOTE_MAX + 8)
const char *quote_untrusted(const char *s, size_t len, char *buf, size_t n);

/* Parse a whole decimal integer in [min, max] with an optional unit suffix
 * from units (e.g. "s60m3600h86400d604800" style tables are in config code).
 * Plain helper: strict, no sign games, no trailing junk. */
int parse_int64(const char *s, int64_t min, int64_t max, int64_t *ret);


#endif
