/* Small private helpers declared in util.h: strict integer parsing, UTF-8
 * repair and quoting of untrusted strings in verdict details, and
 * whitespace as Python's str.strip() sees it. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "util.h"

int parse_int64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
        long long x;
        char *end;

        if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9')))
                return -EINVAL;
        errno = 0;
        x = strtoll(s, &end, 10);
        if (errno == ERANGE || x < min || x > max)
                return -ERANGE;
        if (errno || *end)
                return -EINVAL;
        *ret = x;
        return 0;
}

/* Length of the valid UTF-8 sequence at p (1-4), 0 if invalid: no
 * overlongs, no surrogates, nothing above U+10FFFF, no truncation. */
static size_t utf8_len(const unsigned char *p)
{
        unsigned c = p[0];
        size_t n;
        unsigned min, cp;

        if (c < 0x80)
                return 1;
        if ((c & 0xe0) == 0xc0)
                n = 2, min = 0x80, cp = c & 0x1f;
        else if ((c & 0xf0) == 0xe0)
                n = 3, min = 0x800, cp = c & 0x0f;
        else if ((c & 0xf8) == 0xf0)
                n = 4, min = 0x10000, cp = c & 0x07;
        else
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

void utf8_fix(char *s)
{
        unsigned char *p = (unsigned char *)s;

        while (*p) {
                size_t n = utf8_len(p);
                if (n == 0) {
                        *p++ = '?';
                        continue;
                }
                p += n;
        }
}

/* An untrusted string for a one-line detail: quoted, '"' and '\\' escaped,
 * control and non-ASCII bytes as \xNN, cut at QUOTE_MAX input bytes. */
const char *quote_untrusted(const char *s, size_t len, char *buf, size_t n)
{
        static const char hex[] = "0123456789abcdef";
        size_t o = 0, i;

        /* Worst case per byte is 4 chars; leave room for quotes, "..." and NUL. */
        if (n < 4 * QUOTE_MAX + 8)
                return "\"?\"";
        buf[o++] = '"';
        for (i = 0; i < len && i < QUOTE_MAX; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c == '"' || c == '\\') {
                        buf[o++] = '\\';
                        buf[o++] = (char)c;
                } else if (c < 0x20 || c >= 0x7f) {
                        buf[o++] = '\\';
                        buf[o++] = 'x';
                        buf[o++] = hex[c >> 4];
                        buf[o++] = hex[c & 15];
                } else {
                        buf[o++] = (char)c;
                }
        }
        buf[o++] = '"';
        if (i < len) {
                memcpy(buf + o, "...", 3);
                o += 3;
        }
        buf[o] = '\0';
        return buf;
}

/* The code points for which Python's str.isspace() is true (bidi class WS,
 * B or S, or category Zs): what the real consumer's .strip() removes.
 * tests/unit/test_whitespace.c compares it with python3 over every code point. */
static const struct { uint32_t lo, hi; } py_space_ranges[] = {
        { 0x0009, 0x000D }, { 0x001C, 0x0020 }, { 0x0085, 0x0085 },
        { 0x00A0, 0x00A0 }, { 0x1680, 0x1680 }, { 0x2000, 0x200A },
        { 0x2028, 0x2029 }, { 0x202F, 0x202F }, { 0x205F, 0x205F },
        { 0x3000, 0x3000 },
};

bool py_isspace(uint32_t cp)
{
        for (size_t i = 0; i < ELEMENTSOF(py_space_ranges); i++)
                if (cp >= py_space_ranges[i].lo && cp <= py_space_ranges[i].hi)
                        return true;
        return false;
}

bool utf8_blank(const char *s)
{
        const unsigned char *p = (const unsigned char *)s;

        while (*p) {
                size_t n = utf8_len(p);
                uint32_t cp;
                if (n == 0)
                        return false;   /* not text: not whitespace either */
                cp = n == 1 ? p[0] : p[0] & (0x7F >> n);
                for (size_t i = 1; i < n; i++)
                        cp = (cp << 6) | (p[i] & 0x3F);
                if (!py_isspace(cp))
                        return false;
                p += n;
        }
        return true;
}
