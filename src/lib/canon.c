/* Canonical bytes: the exact output of Python's
 *   json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
 * which is what the MAC covers.  jansson's own dumper differs (uppercase
 * \u escapes, raw 0x7f, its own float digits), so this is a separate writer
 * into a growable buffer. */
#include <errno.h>
#include <stdbool.h>
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

/* A container that more than one parent holds (its refcount says) may
 * come again in the same dump: the bootstrap holds the handoff's
 * transcript beside the handoff itself.  Its bytes are the same wherever
 * it stands below the top level (skip_key acts on the top level only), so
 * the first writing is remembered and copied for the next. */
#define CANON_MEMO 8

struct canon_memo {
        const json_t *v;
        size_t off, len;
        unsigned depth;
};

typedef struct canon_buf {
        char *p;
        size_t len, cap;
        struct canon_memo memo[CANON_MEMO];
        size_t n_memo;
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
        return 0;
}

static int canon_putc(canon_buf *b, char c)
{
        return canon_put(b, &c, 1);
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

static char *canon_put_u16(char *o, unsigned u)
{
        static const char hex[] = "0123456789abcdef";

        *o++ = '\\';
        *o++ = 'u';
        *o++ = hex[(u >> 12) & 0xf];
        *o++ = hex[(u >> 8) & 0xf];
        *o++ = hex[(u >> 4) & 0xf];
        *o++ = hex[u & 0xf];
        return o;
}

/* Written in place: no byte of input takes more than 6 bytes of output
 * (4 bytes of UTF-8 make a surrogate pair, 12), room made once. */
static int canon_string(canon_buf *b, const char *str, size_t n)
{
        const unsigned char *s = (const unsigned char *)str;
        size_t i = 0;
        char *o;
        int r;

        if (n > (SIZE_MAX - 2) / 6)
                return -ENOMEM;
        r = canon_reserve(b, 6 * n + 2);
        if (r < 0)
                return r;
        o = b->p + b->len;
        *o++ = '"';
        while (i < n) {
                uint32_t cp;
                size_t run;

                /* Runs of printable ASCII (0x20..0x7e but '"' '\\') are
                 * copied as they are; everything else is escaped. */
                for (run = i; run < n && s[run] >= 0x20 && s[run] < 0x7f &&
                              s[run] != '"' && s[run] != '\\'; run++)
                        ;
                if (run > i) {
                        memcpy(o, str + i, run - i);
                        o += run - i;
                        i = run;
                        continue;
                }
                r = utf8_decode(s + i, n - i, &cp);
                if (r < 0)
                        return r;
                i += (size_t)r;
                switch (cp) {
                case '"':  *o++ = '\\'; *o++ = '"'; break;
                case '\\': *o++ = '\\'; *o++ = '\\'; break;
                case '\n': *o++ = '\\'; *o++ = 'n'; break;
                case '\r': *o++ = '\\'; *o++ = 'r'; break;
                case '\t': *o++ = '\\'; *o++ = 't'; break;
                case '\b': *o++ = '\\'; *o++ = 'b'; break;
                case '\f': *o++ = '\\'; *o++ = 'f'; break;
                default:
                        if (cp >= 0x10000) {
                                cp -= 0x10000;
                                o = canon_put_u16(o, 0xd800 | (cp >> 10));
                                o = canon_put_u16(o, 0xdc00 | (cp & 0x3ff));
                        } else
                                o = canon_put_u16(o, cp);
                        break;
                }
        }
        *o++ = '"';
        b->len = (size_t)(o - b->p);
        return 0;
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

struct canon_member {
        const char *key;
        const json_t *val;
};

static int member_cmp(const void *a, const void *b)
{
        /* UTF-8 bytewise order is code point order, which is Python's. */
        return strcmp(((const struct canon_member *)a)->key,
                      ((const struct canon_member *)b)->key);
}

static int canon_value(canon_buf *b, const json_t *v, const char *skip_key,
                       unsigned depth);

/* Most objects are small: their members sorted on the stack. */
#define CANON_STACK_MEMBERS 16

static int canon_object(canon_buf *b, const json_t *v, const char *skip_key,
                        unsigned depth)
{
        struct canon_member stack[CANON_STACK_MEMBERS], *m = stack;
        _cleanup_free_ struct canon_member *heap = NULL;
        size_t n = json_object_size(v), k = 0;
        const char *key;
        json_t *val;
        int r;

        if (n > CANON_STACK_MEMBERS) {
                m = heap = calloc(n, sizeof(*heap));
                if (!heap)
                        return -ENOMEM;
        }
        json_object_foreach((json_t *)v, key, val) {
                if (skip_key && strcmp(key, skip_key) == 0)
                        continue;
                if (k < n)
                        m[k++] = (struct canon_member){ .key = key, .val = val };
        }
        if (k > 1)
                qsort(m, k, sizeof(*m), member_cmp);

        r = canon_putc(b, '{');
        if (r < 0)
                return r;
        for (size_t i = 0; i < k; i++) {
                if (i > 0 && (r = canon_putc(b, ',')) < 0)
                        return r;
                r = canon_string(b, m[i].key, strlen(m[i].key));
                if (r < 0)
                        return r;
                r = canon_putc(b, ':');
                if (r < 0)
                        return r;
                r = canon_value(b, m[i].val, NULL, depth + 1);
                if (r < 0)
                        return r;
        }
        return canon_putc(b, '}');
}

static int canon_array(canon_buf *b, const json_t *v, unsigned depth)
{
        int r = canon_putc(b, '[');

        for (size_t i = 0; r >= 0 && i < json_array_size(v); i++) {
                if (i > 0 && (r = canon_putc(b, ',')) < 0)
                        break;
                r = canon_value(b, json_array_get(v, i), NULL, depth + 1);
        }
        return r < 0 ? r : canon_putc(b, ']');
}

static int canon_integer(canon_buf *b, json_int_t x)
{
        char num[24], *o = num + sizeof(num);
        unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;

        do
                *--o = (char)('0' + u % 10);
        while ((u /= 10) > 0);
        if (x < 0)
                *--o = '-';
        return canon_put(b, o, (size_t)(num + sizeof(num) - o));
}

/* A container below the top level written before in this dump, deeper
 * than here or as deep (so no deeper than CANON_MAX_DEPTH): its bytes. */
static const struct canon_memo *memo_find(const canon_buf *b, const json_t *v,
                                          unsigned depth)
{
        for (size_t i = 0; i < b->n_memo; i++)
                if (b->memo[i].v == v && depth <= b->memo[i].depth)
                        return &b->memo[i];
        return NULL;
}

static int canon_container(canon_buf *b, const json_t *v, const char *skip_key,
                           unsigned depth)
{
        bool shared = depth > 0 && v->refcount > 1;
        const struct canon_memo *m = shared ? memo_find(b, v, depth) : NULL;
        size_t off = b->len;
        int r;

        if (m) {
                r = canon_reserve(b, m->len);
                if (r < 0)
                        return r;
                memcpy(b->p + b->len, b->p + m->off, m->len);
                b->len += m->len;
                return 0;
        }
        r = json_is_object(v) ? canon_object(b, v, skip_key, depth) : canon_array(b, v, depth);
        if (r < 0 || !shared || b->n_memo >= CANON_MEMO)
                return r;
        b->memo[b->n_memo++] = (struct canon_memo){ .v = v, .off = off,
                                                    .len = b->len - off, .depth = depth };
        return 0;
}

static int canon_value(canon_buf *b, const json_t *v, const char *skip_key,
                       unsigned depth)
{
        if (!v)
                return -EINVAL;
        if (depth > CANON_MAX_DEPTH)
                return -ELOOP;

        switch (json_typeof(v)) {
        case JSON_OBJECT:
        case JSON_ARRAY:
                return canon_container(b, v, skip_key, depth);
        case JSON_STRING:
                return canon_string(b, json_string_value(v), json_string_length(v));
        case JSON_INTEGER:
                return canon_integer(b, json_integer_value(v));
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
        if (p)
                p[b.len] = '\0';       /* canon_reserve() leaves room for it */
        else {
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
