/* Canonical bytes: the exact output of Python's
 *   json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
 * which is what the MAC covers.  jansson's own dumper differs (uppercase
 * \u escapes, raw 0x7f, its own float digits), so this is a separate writer
 * into a growable buffer. */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff.h"
#include "util.h"

/* Far above the parser's depth limit; only guards documents built in code
 * (and reference cycles) against running out of stack. */
#define CANON_MAX_DEPTH 4096

typedef struct canon_buf {
        char *p;
        size_t len, cap;
} canon_buf;

static int canon_reserve(canon_buf *b, size_t n)
{
        size_t ncap;
        char *np;

        if (b->cap - b->len > n)
                return 0;
        ncap = b->cap ? b->cap : 256;
        while (ncap - b->len <= n) {
                if (ncap > SIZE_MAX / 2)
                        return -ENOMEM;
                ncap *= 2;
        }
        np = realloc(b->p, ncap);
        if (!np)
                return -ENOMEM;
        b->p = np;
        b->cap = ncap;
        return 0;
}

static int canon_put(canon_buf *b, const char *s, size_t n)
{
        int r = canon_reserve(b, n);

        if (r < 0)
                return r;
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
        return 0;
}

static int canon_putc(canon_buf *b, char c)
{
        return canon_put(b, &c, 1);
}

static int canon_put_u16(canon_buf *b, unsigned u)
{
        static const char hex[] = "0123456789abcdef";
        char e[6] = { '\\', 'u', hex[(u >> 12) & 0xf], hex[(u >> 8) & 0xf],
                      hex[(u >> 4) & 0xf], hex[u & 0xf] };

        return canon_put(b, e, sizeof(e));
}

/* Decode one UTF-8 sequence at s (n bytes left).  jansson only hands out
 * valid UTF-8, but a value built in code may not be: refuse rather than
 * guess (-EINVAL). */
static int utf8_decode(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
        uint32_t cp;
        int k;

        if (s[0] < 0x80) {
                *ret_cp = s[0];
                return 1;
        } else if ((s[0] & 0xe0) == 0xc0) {
                cp = s[0] & 0x1f;
                k = 2;
        } else if ((s[0] & 0xf0) == 0xe0) {
                cp = s[0] & 0x0f;
                k = 3;
        } else if ((s[0] & 0xf8) == 0xf0) {
                cp = s[0] & 0x07;
                k = 4;
        } else
                return -EINVAL;
        if ((size_t)k > n)
                return -EINVAL;
        for (int i = 1; i < k; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return -EINVAL;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) ||
            (k == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return -EINVAL;
        *ret_cp = cp;
        return k;
}

static int canon_string(canon_buf *b, const char *str, size_t n)
{
        const unsigned char *s = (const unsigned char *)str;
        size_t i = 0, run;
        int r;

        r = canon_putc(b, '"');
        if (r < 0)
                return r;
        while (i < n) {
                uint32_t cp;
                const char *esc = NULL;

                /* Copy runs of printable ASCII (0x20..0x7e but '"' '\\') as
                 * they are; everything else is escaped. */
                for (run = i; run < n && s[run] >= 0x20 && s[run] < 0x7f &&
                              s[run] != '"' && s[run] != '\\'; run++)
                        ;
                if (run > i) {
                        r = canon_put(b, str + i, run - i);
                        if (r < 0)
                                return r;
                        i = run;
                        continue;
                }
                r = utf8_decode(s + i, n - i, &cp);
                if (r < 0)
                        return r;
                i += (size_t)r;
                switch (cp) {
                case '"':  esc = "\\\""; break;
                case '\\': esc = "\\\\"; break;
                case '\n': esc = "\\n"; break;
                case '\r': esc = "\\r"; break;
                case '\t': esc = "\\t"; break;
                case '\b': esc = "\\b"; break;
                case '\f': esc = "\\f"; break;
                default: break;
                }
                if (esc)
                        r = canon_put(b, esc, 2);
                else if (cp >= 0x10000) {
                        cp -= 0x10000;
                        r = canon_put_u16(b, 0xd800 | (cp >> 10));
                        if (r >= 0)
                                r = canon_put_u16(b, 0xdc00 | (cp & 0x3ff));
                } else
                        r = canon_put_u16(b, cp);
                if (r < 0)
                        return r;
        }
        return canon_putc(b, '"');
}

/* Does the decimal m * 10^e (m has at most 19 digits) read back as x? */
static bool real_round_trips(double x, uint64_t m, int e)
{
        char s[48];

        snprintf(s, sizeof(s), "%" PRIu64 "e%d", m, e);
        return strtod(s, NULL) == x;
}

/* The prec+1 significant digits of x (> 0), correctly rounded, as
 * m * 10^e. */
static void real_digits(double x, int prec, uint64_t *ret_m, int *ret_e)
{
        char s[40], *dot, *ep;

        snprintf(s, sizeof(s), "%.*e", prec, x);
        ep = strchr(s, 'e');
        *ret_e = atoi(ep + 1) - prec;
        *ep = '\0';
        dot = strchr(s, '.');
        if (dot)
                memmove(dot, dot + 1, strlen(dot));
        *ret_m = strtoull(s, NULL, 10);
}

/* Python's float repr (David Gay's shortest mode): the fewest significant
 * digits that read back as the same double, the closest such string when
 * there are several; fixed notation when the decimal point position decpt
 * satisfies -4 < decpt <= 16, else d.ddde[+-]XX; ".0" on integral fixed
 * values.  x is finite.
 *
 * For a normal double that is not a power of two, at most two digit
 * strings and two reads, whatever x (a file of reals must not cost a
 * second per MiB before its MAC is even checked):
 *  - 16 digits, correctly rounded: the closest 16-digit string to x.  The
 *    interval that reads back as x is symmetric around it, so when this
 *    one does not read back no string of 16 digits or fewer does (fewer
 *    digits padded with zeros are 16-digit strings no closer): the answer
 *    is the 17 correctly rounded digits, which always read back.
 *  - when it does, 15 digits: any decimal of at most DBL_DIG (15) digits
 *    survives decimal -> double -> 15 digits, so when the shortest string
 *    of x has at most 15 digits, x printed to 15 digits is that string
 *    padded with zeros; when that does not read back, the 16 stand.
 * A power of two has a lopsided interval (the gap below is half the gap
 * above): 15 digits first, then the 16 correctly rounded and, when they
 * do not read back, their neighbour on the other side, then 17.
 * Subnormals have fewer bits than DBL_DIG assumes, but evenly spaced: the
 * interval that reads back is symmetric, and the correctly rounded string
 * of n + 1 digits is never farther from x than that of n digits, so
 * whether it reads back only turns from no to yes as n grows: a binary
 * search over 1 to 17 digits (five tries) finds the shortest. */
static void real_shortest(double x, uint64_t *ret_m, int *ret_e)
{
        uint64_t m = 0, m15;
        int e = 0, e15, exp2;

        if (x < DBL_MIN) {
                int lo = 1, hi = 17;
                while (lo < hi) {
                        int mid = (lo + hi) / 2;
                        real_digits(x, mid - 1, &m, &e);
                        if (real_round_trips(x, m, e))
                                hi = mid;
                        else
                                lo = mid + 1;
                }
                real_digits(x, lo - 1, ret_m, ret_e);
                return;
        }
        if (frexp(x, &exp2) != 0.5) {
                real_digits(x, 15, &m, &e);
                if (!real_round_trips(x, m, e)) {
                        real_digits(x, 16, ret_m, ret_e);
                        return;
                }
                real_digits(x, 14, &m15, &e15);
                if (real_round_trips(x, m15, e15))
                        m = m15, e = e15;
                *ret_m = m;
                *ret_e = e;
                return;
        }
        for (int prec = DBL_DIG - 1; prec <= 16; prec++) {
                real_digits(x, prec, &m, &e);
                if (prec == 16 || real_round_trips(x, m, e))
                        break;
                if (prec == DBL_DIG) {
                        if (real_round_trips(x, m + 1, e)) {
                                m += 1;
                                break;
                        }
                        if (real_round_trips(x, m - 1, e)) {
                                m -= 1;
                                break;
                        }
                }
        }
        *ret_m = m;
        *ret_e = e;
}

static int canon_real(canon_buf *b, double x)
{
        char digits[32], out[64], *o = out;
        uint64_t m = 0;
        int e = 0, nd, decpt;

        if (x == 0) {
                const char *z = signbit(x) ? "-0.0" : "0.0";
                return canon_put(b, z, strlen(z));
        }
        if (x < 0) {
                *o++ = '-';
                x = -x;
        }
        real_shortest(x, &m, &e);

        /* Normalize to digits without trailing zeros. */
        while (m % 10 == 0) {
                m /= 10;
                e++;
        }
        nd = snprintf(digits, sizeof(digits), "%" PRIu64, m);
        decpt = nd + e;

        if (decpt > -4 && decpt <= 16) {
                if (decpt <= 0) {
                        o += sprintf(o, "0.");
                        for (int i = decpt; i < 0; i++)
                                *o++ = '0';
                        o += sprintf(o, "%s", digits);
                } else if (decpt >= nd) {
                        o += sprintf(o, "%s", digits);
                        for (int i = nd; i < decpt; i++)
                                *o++ = '0';
                        o += sprintf(o, ".0");
                } else {
                        memcpy(o, digits, (size_t)decpt);
                        o += decpt;
                        *o++ = '.';
                        o += sprintf(o, "%s", digits + decpt);
                }
        } else {
                int xe = decpt - 1;

                *o++ = digits[0];
                if (nd > 1)
                        o += sprintf(o, ".%s", digits + 1);
                o += sprintf(o, "e%c%02d", xe < 0 ? '-' : '+', xe < 0 ? -xe : xe);
        }
        return canon_put(b, out, (size_t)(o - out));
}

static int key_cmp(const void *a, const void *b)
{
        /* UTF-8 bytewise order is code point order, which is Python's. */
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int canon_value(canon_buf *b, const json_t *v, const char *skip_key,
                       unsigned depth);

static int canon_object(canon_buf *b, const json_t *v, const char *skip_key,
                        unsigned depth)
{
        _cleanup_free_ const char **keys = NULL;
        size_t n = json_object_size(v), k = 0;
        const char *key;
        json_t *val;
        int r;

        if (n > 0) {
                keys = calloc(n, sizeof(*keys));
                if (!keys)
                        return -ENOMEM;
        }
        json_object_foreach((json_t *)v, key, val) {
                if (skip_key && strcmp(key, skip_key) == 0)
                        continue;
                if (k < n)
                        keys[k++] = key;
        }
        if (k > 1)
                qsort(keys, k, sizeof(*keys), key_cmp);

        r = canon_putc(b, '{');
        if (r < 0)
                return r;
        for (size_t i = 0; i < k; i++) {
                if (i > 0 && (r = canon_putc(b, ',')) < 0)
                        return r;
                r = canon_string(b, keys[i], strlen(keys[i]));
                if (r < 0)
                        return r;
                r = canon_putc(b, ':');
                if (r < 0)
                        return r;
                r = canon_value(b, json_object_get(v, keys[i]), NULL, depth + 1);
                if (r < 0)
                        return r;
        }
        return canon_putc(b, '}');
}

static int canon_value(canon_buf *b, const json_t *v, const char *skip_key,
                       unsigned depth)
{
        char num[32];
        int r;

        if (!v)
                return -EINVAL;
        if (depth > CANON_MAX_DEPTH)
                return -ELOOP;

        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return canon_object(b, v, skip_key, depth);
        case JSON_ARRAY:
                r = canon_putc(b, '[');
                if (r < 0)
                        return r;
                for (size_t i = 0; i < json_array_size(v); i++) {
                        if (i > 0 && (r = canon_putc(b, ',')) < 0)
                                return r;
                        r = canon_value(b, json_array_get(v, i), NULL, depth + 1);
                        if (r < 0)
                                return r;
                }
                return canon_putc(b, ']');
        case JSON_STRING:
                return canon_string(b, json_string_value(v), json_string_length(v));
        case JSON_INTEGER:
                r = snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
                             json_integer_value(v));
                return canon_put(b, num, (size_t)r);
        case JSON_REAL:
                if (!isfinite(json_real_value(v)))
                        return -ERANGE;
                return canon_real(b, json_real_value(v));
        case JSON_TRUE:
                return canon_put(b, "true", 4);
        case JSON_FALSE:
                return canon_put(b, "false", 5);
        case JSON_NULL:
                return canon_put(b, "null", 4);
        }
        return -EINVAL;
}

int hd_canon_dump(const json_t *v, const char *skip_key,
                  char **ret_buf, size_t *ret_len)
{
        _cleanup_free_ char *p = NULL;
        canon_buf b = { 0 };
        int r;

        if (!v || !ret_buf)
                return -EINVAL;
        r = canon_value(&b, v, skip_key, 0);
        p = b.p;
        if (r < 0)
                return r;
        if (!p) {
                /* Every value writes at least one byte; keep the promise of a
                 * NUL-terminated result anyway. */
                p = strdup("");
                if (!p)
                        return -ENOMEM;
        }
        *ret_buf = TAKE_PTR(p);
        if (ret_len)
                *ret_len = b.len;
        return 0;
}
