/* Canonical bytes: the exact output of Python's
 *   json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
 * which is what the MAC covers.  jansson's own dumper differs (uppercase
 * \u escapes, raw 0x7f, its own float digits), so this is a separate writer
 * into a growable buffer. */
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff.h"
#include "shortest.h"
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

/* Python's float repr: the shortest digits that read back as x, the
 * nearest to x where several do (David Gay's mode 0, which
 * shortest_digits() gives too); fixed notation when the decimal point
 * position satisfies -4 < point <= 16, else d.ddde[+-]XX with at least two
 * exponent digits; ".0" on integral fixed values.  x is finite. */
static int canon_real(canon_buf *b, double x)
{
        char digits[SHORTEST_DIGITS_MAX + 1], out[32], *o = out;
        int nd, point;

        if (x == 0) {
                const char *z = signbit(x) ? "-0.0" : "0.0";
                return canon_put(b, z, strlen(z));
        }
        if (x < 0) {
                *o++ = '-';
                x = -x;
        }
        nd = shortest_digits(x, digits, &point);
        if (nd < 1 || nd > SHORTEST_DIGITS_MAX)
                return -ERANGE;

        /* At most 24 bytes: "-0.000" and 17 digits, 17 digits and ".",
         * "1" 15 zeros ".0", or "-d." 16 digits "e-308". */
        if (point > -4 && point <= 16) {
                if (point <= 0) {
                        *o++ = '0';
                        *o++ = '.';
                        memset(o, '0', (size_t)-point);
                        o += -point;
                        memcpy(o, digits, (size_t)nd);
                        o += nd;
                } else if (point >= nd) {
                        memcpy(o, digits, (size_t)nd);
                        o += nd;
                        memset(o, '0', (size_t)(point - nd));
                        o += point - nd;
                        *o++ = '.';
                        *o++ = '0';
                } else {
                        memcpy(o, digits, (size_t)point);
                        o += point;
                        *o++ = '.';
                        memcpy(o, digits + point, (size_t)(nd - point));
                        o += nd - point;
                }
        } else {
                int xe = point - 1;
                unsigned ax = (unsigned)(xe < 0 ? -xe : xe);

                *o++ = digits[0];
                if (nd > 1) {
                        *o++ = '.';
                        memcpy(o, digits + 1, (size_t)(nd - 1));
                        o += nd - 1;
                }
                *o++ = 'e';
                *o++ = xe < 0 ? '-' : '+';
                if (ax >= 100)
                        *o++ = (char)('0' + ax / 100);
                *o++ = (char)('0' + ax / 10 % 10);
                *o++ = (char)('0' + ax % 10);
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
