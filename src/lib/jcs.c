/* JCS, the JSON Canonicalization Scheme (RFC 8785): the bytes an agent
 * card's signature covers (A2A 1.0 section 8.4.1): the hub signs its
 * cards with it (src/hubd/hub_jws.c), handoff-a2a checks a remote's card
 * (src/a2a/).  Members sorted by the
 * UTF-16 code units of their names, no whitespace, strings as ECMAScript's
 * JSON.stringify writes them (raw UTF-8, the short escapes, \u00xx for
 * the other controls), numbers as ECMAScript's Number.prototype.toString.
 *
 * This is not src/lib/canon.c's form (Python's json.dumps with
 * ensure_ascii): that one escapes every non-ASCII character, sorts by code
 * point and writes reals as Python's repr ("1.0", "1e+16"), where JCS
 * writes "1" and "10000000000000000". */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jcs.h"
#include "shortest.h"
#include "util.h"

/* The parser's depth limit is far below; this guards documents built in
 * code against a cycle. */
#define JCS_MAX_DEPTH 256

struct jcs_buf {
        char *p;
        size_t len, cap;
};

static int put(struct jcs_buf *b, const char *s, size_t n)
{
        if (b->cap - b->len <= n) {
                size_t ncap = b->cap ? b->cap : 512;
                char *np;
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
        }
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
        return 0;
}

static int put_string(struct jcs_buf *b, const char *s, size_t n)
{
        size_t start = 0;
        int r = put(b, "\"", 1);

        for (size_t i = 0; r == 0 && i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                const char *esc = NULL;
                char u[7];

                switch (c) {
                case '"': esc = "\\\""; break;
                case '\\': esc = "\\\\"; break;
                case '\b': esc = "\\b"; break;
                case '\t': esc = "\\t"; break;
                case '\n': esc = "\\n"; break;
                case '\f': esc = "\\f"; break;
                case '\r': esc = "\\r"; break;
                default:
                        if (c < 0x20) {
                                snprintf(u, sizeof(u), "\\u%04x", c);
                                esc = u;
                        }
                }
                if (!esc)
                        continue;
                r = put(b, s + start, i - start);
                if (r == 0)
                        r = put(b, esc, strlen(esc));
                start = i + 1;
        }
        if (r == 0)
                r = put(b, s + start, n - start);
        return r ?: put(b, "\"", 1);
}

/* ECMAScript's Number::toString of a finite x (ECMA-262 7.1.12.1), from
 * the shortest digits that read back as x. */
static int put_number(struct jcs_buf *b, double x)
{
        char d[SHORTEST_DIGITS_MAX + 1], out[40], *o = out;
        int k, n;

        if (!isfinite(x))
                return -ERANGE;
        if (x == 0)
                return put(b, "0", 1);  /* -0 too */
        if (x < 0) {
                *o++ = '-';
                x = -x;
        }
        k = shortest_digits(x, d, &n);  /* x = 0.d * 10^n: k digits */
        if (k < 1 || k > SHORTEST_DIGITS_MAX)
                return -ERANGE;
        if (k <= n && n <= 21) {
                memcpy(o, d, (size_t)k);
                o += k;
                memset(o, '0', (size_t)(n - k));
                o += n - k;
        } else if (0 < n && n <= 21) {
                memcpy(o, d, (size_t)n);
                o += n;
                *o++ = '.';
                memcpy(o, d + n, (size_t)(k - n));
                o += k - n;
        } else if (-6 < n && n <= 0) {
                *o++ = '0';
                *o++ = '.';
                memset(o, '0', (size_t)-n);
                o += -n;
                memcpy(o, d, (size_t)k);
                o += k;
        } else {
                *o++ = d[0];
                if (k > 1) {
                        *o++ = '.';
                        memcpy(o, d + 1, (size_t)(k - 1));
                        o += k - 1;
                }
                o += sprintf(o, "e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
        }
        return put(b, out, (size_t)(o - out));
}

/* The next UTF-16 code unit of the UTF-8 string at *s (0 at its end);
 * *low holds the second unit of a pair. jansson's strings are valid
 * UTF-8. */
static unsigned next_unit(const unsigned char **s, unsigned *low)
{
        const unsigned char *p = *s;
        uint32_t cp;

        if (*low) {
                unsigned u = *low;
                *low = 0;
                return u;
        }
        if (!*p)
                return 0;
        if (p[0] < 0x80) {
                cp = p[0];
                p += 1;
        } else if (p[0] < 0xe0) {
                cp = (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f);
                p += 2;
        } else if (p[0] < 0xf0) {
                cp = (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 |
                     (p[2] & 0x3f);
                p += 3;
        } else {
                cp = (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 |
                     (uint32_t)(p[2] & 0x3f) << 6 | (p[3] & 0x3f);
                p += 4;
        }
        *s = p;
        if (cp < 0x10000)
                return cp;
        cp -= 0x10000;
        *low = 0xdc00 + (cp & 0x3ff);
        return 0xd800 + (cp >> 10);
}

int jcs_keycmp(const char *a, const char *b)
{
        const unsigned char *p = (const unsigned char *)a, *q = (const unsigned char *)b;
        unsigned la = 0, lb = 0;

        for (;;) {
                unsigned ua = next_unit(&p, &la), ub = next_unit(&q, &lb);
                if (ua != ub || !ua)
                        return ua < ub ? -1 : ua > ub;
        }
}

static int key_cmp(const void *a, const void *b)
{
        return jcs_keycmp(*(const char *const *)a, *(const char *const *)b);
}

static int put_value(struct jcs_buf *b, const json_t *v, const char *skip, unsigned depth);

static int put_object(struct jcs_buf *b, const json_t *v, const char *skip, unsigned depth)
{
        size_t n = json_object_size(v), i = 0;
        _cleanup_free_ const char **keys = calloc(n ? n : 1, sizeof(*keys));
        const char *k;
        json_t *m;
        bool first = true;
        int r;

        if (!keys)
                return -ENOMEM;
        json_object_foreach((json_t *)v, k, m)
                if (!skip || strcmp(k, skip))
                        keys[i++] = k;
        qsort(keys, i, sizeof(*keys), key_cmp);
        r = put(b, "{", 1);
        for (size_t j = 0; r == 0 && j < i; j++) {
                if (!first)
                        r = put(b, ",", 1);
                first = false;
                if (r == 0)
                        r = put_string(b, keys[j], strlen(keys[j]));
                if (r == 0)
                        r = put(b, ":", 1);
                if (r == 0)
                        r = put_value(b, json_object_get(v, keys[j]), NULL, depth + 1);
        }
        return r ?: put(b, "}", 1);
}

static int put_value(struct jcs_buf *b, const json_t *v, const char *skip, unsigned depth)
{
        size_t i;
        json_t *m;
        int r;

        if (depth > JCS_MAX_DEPTH)
                return -ELOOP;
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return put_object(b, v, skip, depth);
        case JSON_ARRAY:
                r = put(b, "[", 1);
                json_array_foreach(v, i, m) {
                        if (r == 0 && i)
                                r = put(b, ",", 1);
                        if (r == 0)
                                r = put_value(b, m, NULL, depth + 1);
                }
                return r ?: put(b, "]", 1);
        case JSON_STRING:
                return put_string(b, json_string_value(v), json_string_length(v));
        case JSON_INTEGER: {
                /* an I-JSON number: exact as an integer up to 2^53 */
                json_int_t x = json_integer_value(v);
                char buf[24];
                if (x > -(INT64_C(1) << 53) && x < (INT64_C(1) << 53))
                        return put(b, buf, (size_t)snprintf(buf, sizeof(buf), "%lld",
                                                              (long long)x));
                return put_number(b, (double)x);
        }
        case JSON_REAL:
                return put_number(b, json_real_value(v));
        case JSON_TRUE:
                return put(b, "true", 4);
        case JSON_FALSE:
                return put(b, "false", 5);
        case JSON_NULL:
                return put(b, "null", 4);
        }
        return -EINVAL;
}

int jcs_dump(const json_t *v, const char *skip, char **ret, size_t *ret_len)
{
        struct jcs_buf b = { 0 };
        int r;

        if (!v)
                return -EINVAL;
        r = put_value(&b, v, skip, 0);
        if (r == 0 && !b.p)
                r = -ENOMEM;
        if (r < 0) {
                free(b.p);
                return r;
        }
        *ret = b.p;
        *ret_len = b.len;
        return 0;
}
