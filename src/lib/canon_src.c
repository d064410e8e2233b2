/* The canonical bytes of a document found in the bytes it was parsed
 * from (canon_src.h): a scan that accepts exactly what canon.c writes for
 * the document jansson reads from them, and nothing it is not sure of.
 * Sure means: no byte outside strings but the structure's own (no
 * whitespace); object keys of printable ASCII without escapes, in strictly
 * increasing byte order (code point order, Python's sort); strings of
 * printable ASCII but '"' and '\\', the short escapes for those two and
 * \n \r \t \b \f, and \u with four lowercase hex digits for every other
 * code point below 0x20, 0x7f and above (surrogate pairs above 0xffff);
 * integers without a sign on zero or a leading zero; true, false, null.
 * A real is never taken: its canonical digits are the writer's to make. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "canon_src.h"
#include "handoff.h"

/* Deeper than the parser's default depth limit; anything deeper is left
 * to the writer. */
#define SCAN_MAX_DEPTH 128

struct scan {
        const unsigned char *p, *e;
};

static bool hex4(const unsigned char *p, unsigned *ret)
{
        unsigned u = 0;

        for (int i = 0; i < 4; i++) {
                unsigned char c = p[i];
                if (c >= '0' && c <= '9')
                        u = u << 4 | (unsigned)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        u = u << 4 | (unsigned)(c - 'a' + 10);
                else
                        return false;
        }
        *ret = u;
        return true;
}

/* One \uXXXX (and its low surrogate) at s->p, as canon.c writes it. */
static bool scan_u(struct scan *s)
{
        unsigned u, lo;

        if (s->e - s->p < 6 || s->p[1] != 'u' || !hex4(s->p + 2, &u))
                return false;
        s->p += 6;
        if (u >= 0xd800 && u <= 0xdbff) {
                if (s->e - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u' ||
                    !hex4(s->p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                        return false;
                s->p += 6;
                return true;
        }
        /* a lone low surrogate; printable ASCII, written as itself; the
         * five with a short escape */
        return !(u >= 0xdc00 && u <= 0xdfff) && !(u >= 0x20 && u < 0x7f) &&
               u != '\b' && u != '\t' && u != '\n' && u != '\f' && u != '\r';
}

static bool scan_string(struct scan *s, const unsigned char **ret_s, size_t *ret_n,
                        bool *ret_escaped)
{
        const unsigned char *start;

        if (s->p >= s->e || *s->p != '"')
                return false;
        start = ++s->p;
        *ret_escaped = false;
        while (s->p < s->e) {
                unsigned char c = *s->p;

                if (c == '"') {
                        *ret_s = start;
                        *ret_n = (size_t)(s->p - start);
                        s->p++;
                        return true;
                }
                if (c < 0x20 || c >= 0x7f)
                        return false;
                if (c != '\\') {
                        s->p++;
                        continue;
                }
                *ret_escaped = true;
                if (s->e - s->p < 2)
                        return false;
                c = s->p[1];
                if (c == '"' || c == '\\' || c == 'n' || c == 'r' || c == 't' ||
                    c == 'b' || c == 'f')
                        s->p += 2;
                else if (!scan_u(s))
                        return false;
        }
        return false;
}

static bool scan_number(struct scan *s)
{
        const unsigned char *q = s->p;
        bool neg = q < s->e && *q == '-';

        if (neg)
                q++;
        if (q >= s->e)
                return false;
        if (*q == '0') {
                if (neg)
                        return false;   /* -0 is written 0 */
                q++;
        } else if (*q >= '1' && *q <= '9') {
                while (q < s->e && *q >= '0' && *q <= '9')
                        q++;
        } else
                return false;
        if (q < s->e && (*q == '.' || *q == 'e' || *q == 'E'))
                return false;           /* a real */
        s->p = q;
        return true;
}

static bool scan_word(struct scan *s, const char *w)
{
        size_t n = strlen(w);

        if ((size_t)(s->e - s->p) < n || memcmp(s->p, w, n) != 0)
                return false;
        s->p += n;
        return true;
}

static bool scan_value(struct scan *s, unsigned depth);

/* The key order of canon.c: strcmp() of the keys' bytes. */
static int key_cmp(const unsigned char *a, size_t an, const unsigned char *b, size_t bn)
{
        int c = memcmp(a, b, an < bn ? an : bn);

        return c ? c : an < bn ? -1 : an > bn;
}

/* The member key [m, s->p) of the top level: hmac and sig spans kept with
 * the comma that goes with them (before it; after it for the first). */
static void note_member(struct canon_src *src, const unsigned char *k, size_t kn,
                        const unsigned char *m, const struct scan *s)
{
        size_t off = (size_t)(m - (const unsigned char *)src->buf);
        size_t end = (size_t)(s->p - (const unsigned char *)src->buf);
        size_t *o, *n;

        if (kn == 4 && !memcmp(k, "hmac", 4))
                o = &src->hmac_off, n = &src->hmac_len;
        else if (kn == 3 && !memcmp(k, "sig", 3))
                o = &src->sig_off, n = &src->sig_len;
        else
                return;
        if (m[-1] == ',')
                off--;
        else if (s->p < s->e && *s->p == ',')
                end++;
        *o = off;
        *n = end - off;
}

static bool scan_object(struct scan *s, unsigned depth, struct canon_src *top)
{
        const unsigned char *prev = NULL;
        size_t prev_n = 0;

        s->p++;
        if (s->p < s->e && *s->p == '}') {
                s->p++;
                return true;
        }
        for (;;) {
                const unsigned char *m = s->p, *k;
                size_t kn;
                bool esc;

                if (!scan_string(s, &k, &kn, &esc) || esc)
                        return false;
                if (prev && key_cmp(prev, prev_n, k, kn) >= 0)
                        return false;
                prev = k;
                prev_n = kn;
                if (s->p >= s->e || *s->p++ != ':' || !scan_value(s, depth))
                        return false;
                if (top)
                        note_member(top, k, kn, m, s);
                if (s->p >= s->e)
                        return false;
                if (*s->p == '}') {
                        s->p++;
                        return true;
                }
                if (*s->p++ != ',')
                        return false;
        }
}

static bool scan_array(struct scan *s, unsigned depth)
{
        s->p++;
        if (s->p < s->e && *s->p == ']') {
                s->p++;
                return true;
        }
        for (;;) {
                if (!scan_value(s, depth) || s->p >= s->e)
                        return false;
                if (*s->p == ']') {
                        s->p++;
                        return true;
                }
                if (*s->p++ != ',')
                        return false;
        }
}

static bool scan_value(struct scan *s, unsigned depth)
{
        const unsigned char *k;
        size_t kn;
        bool esc;

        if (s->p >= s->e || depth >= SCAN_MAX_DEPTH)
                return false;
        switch (*s->p) {
        case '{':
                return scan_object(s, depth + 1, NULL);
        case '[':
                return scan_array(s, depth + 1);
        case '"':
                return scan_string(s, &k, &kn, &esc);
        case 't':
                return scan_word(s, "true");
        case 'f':
                return scan_word(s, "false");
        case 'n':
                return scan_word(s, "null");
        default:
                return scan_number(s);
        }
}

static bool is_space(unsigned char c)
{
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Whitespace around the top-level object is not part of it. */
static void canon_src_scan(const char *buf, size_t len, struct canon_src *src)
{
        struct scan s = { (const unsigned char *)buf, (const unsigned char *)buf + len };
        const unsigned char *start;

        *src = (struct canon_src){ .buf = buf };
        while (s.p < s.e && is_space(*s.p))
                s.p++;
        start = s.p;
        if (s.p >= s.e || *s.p != '{' || !scan_object(&s, 1, src))
                goto no;
        while (s.p < s.e && is_space(*s.p))
                s.p++;
        if (s.p != s.e)
                goto no;
        src->off = (size_t)(start - (const unsigned char *)buf);
        src->len = len - src->off;
        while (src->len > 0 && is_space((unsigned char)buf[src->off + src->len - 1]))
                src->len--;
        return;
no:
        *src = (struct canon_src){ .buf = buf };
}

int canon_src_parse(const void *buf, size_t len, const hd_limits *lim,
                    json_t **ret, struct canon_src *src, hd_verdict *v)
{
        int r;

        if (!src)
                return -EINVAL;
        *src = (struct canon_src){ 0 };
        r = hd_parse(buf, len, lim, ret, v);
        if (r < 0)
                return r;
        canon_src_scan(buf, len, src);
        return 0;
}

bool canon_src_pieces(const struct canon_src *src, const char *skip,
                      const char *ret_p[2], size_t ret_n[2])
{
        size_t cut_off = 0, cut_n = 0;

        if (!src || !src->len)
                return false;
        if (skip && !strcmp(skip, "hmac"))
                cut_off = src->hmac_off, cut_n = src->hmac_len;
        else if (skip && !strcmp(skip, "sig"))
                cut_off = src->sig_off, cut_n = src->sig_len;
        else if (skip)
                return false;
        if (!cut_n) {
                ret_p[0] = src->buf + src->off;
                ret_n[0] = src->len;
                ret_p[1] = NULL;
                ret_n[1] = 0;
                return true;
        }
        ret_p[0] = src->buf + src->off;
        ret_n[0] = cut_off - src->off;
        ret_p[1] = src->buf + cut_off + cut_n;
        ret_n[1] = src->off + src->len - (cut_off + cut_n);
        return true;
}
