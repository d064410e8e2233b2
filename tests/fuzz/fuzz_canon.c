/* libFuzzer target: the canonical form of reals.  Every 8 bytes of input
 * are the bits of a double; each finite one, alone and in an array of them
 * all, goes through hd_canon_dump().  The text of each must read back as
 * exactly the same bits, follow Python's repr layout (fixed notation for a
 * decimal point position in -4 < point <= 16, else d.ddde[+-]XX), and have
 * no more significant digits than the shortest correctly rounded string
 * glibc finds for it (printf "%.*e" and strtod, one precision after
 * another: an independent, slow way to the same answer), the very same
 * digits for a double whose round-trip interval is symmetric (not a power
 * of two).  Python itself is the reference of make check and make stress
 * (tests/py/repr_doubles.py); this one looks for crashes and broken
 * layout on inputs no list of doubles thought of. */
#include <math.h>
#include <string.h>

#include "fuzz.h"

#define FUZZ_CANON_MAX 256

/* The significant digits of a repr text (sign, point, leading and
 * trailing zeros and exponent left out), NUL-terminated, and the position
 * of the decimal point as 0.DIGITS * 10^point. */
static void repr_digits(const char *t, char *digits, size_t n, int *ret_point)
{
        const char *p = t, *e;
        size_t k = 0;
        int point = 0, lead = 1, before = 1;

        if (*p == '-')
                p++;
        e = strchr(p, 'e');
        for (; *p && p != e; p++) {
                if (*p == '.') {
                        before = 0;
                        continue;
                }
                if (lead && *p == '0') {
                        if (!before)
                                point--;
                        continue;
                }
                lead = 0;
                if (before)
                        point++;
                if (k + 1 < n)
                        digits[k++] = *p;
        }
        while (k > 0 && digits[k - 1] == '0')
                k--;
        digits[k] = '\0';
        if (e)
                point += atoi(e + 1);
        *ret_point = point;
}

/* The layout of Python's repr of a finite, non-zero double. */
static void check_layout(const char *t, int point, size_t nd)
{
        const char *p = t + (*t == '-');
        const char *e = strchr(p, 'e');

        if (point > -4 && point <= 16) {
                FUZZ_ASSERT(!e, "%s: exponent notation for point %d", t, point);
                FUZZ_ASSERT(strchr(p, '.') && p[strlen(p) - 1] != '.',
                            "%s: fixed notation without a fraction", t);
                if (point <= 0)
                        FUZZ_ASSERT(p[0] == '0' && p[1] == '.', "%s: no leading 0.", t);
                else
                        FUZZ_ASSERT(p[0] != '0', "%s: leading zero", t);
                return;
        }
        FUZZ_ASSERT(e, "%s: fixed notation for point %d", t, point);
        FUZZ_ASSERT(p[0] >= '1' && p[0] <= '9', "%s: mantissa starts with %c", t, p[0]);
        FUZZ_ASSERT(nd == 1 ? p + 1 == e : (p[1] == '.' && e[-1] != '0'),
                    "%s: mantissa layout", t);
        FUZZ_ASSERT((e[1] == '+' || e[1] == '-') && strlen(e + 2) >= 2 &&
                    (strlen(e + 2) == 2 || e[2] != '0'),
                    "%s: exponent layout", t);
}

/* The fewest digits, 1 to 17, whose correctly rounded string reads back
 * as x (x > 0, finite), by glibc alone. */
static int glibc_shortest(double x, char *digits, size_t n, int *ret_point)
{
        char s[40];

        for (int prec = 0; prec < 17; prec++) {
                snprintf(s, sizeof(s), "%.*e", prec, x);
                if (strtod(s, NULL) == x)
                        break;
        }
        repr_digits(s, digits, n, ret_point);
        return (int)strlen(digits);
}

static void check_one(double x, const char *t)
{
        char dig[32], gdig[32];
        int point, gpoint, gnd;
        uint64_t a, b;
        double back;
        size_t nd;

        back = strtod(t, NULL);
        memcpy(&a, &x, sizeof(a));
        memcpy(&b, &back, sizeof(b));
        FUZZ_ASSERT(a == b, "%s does not read back as %a", t, x);
        FUZZ_ASSERT((x < 0 || (x == 0 && signbit(x))) == (t[0] == '-'), "%s: sign", t);
        if (x == 0) {
                FUZZ_ASSERT(strcmp(t + (t[0] == '-'), "0.0") == 0, "zero as %s", t);
                return;
        }
        repr_digits(t, dig, sizeof(dig), &point);
        nd = strlen(dig);
        FUZZ_ASSERT(nd >= 1 && nd <= 17, "%s: %zu digits", t, nd);
        check_layout(t, point, nd);

        gnd = glibc_shortest(fabs(x), gdig, sizeof(gdig), &gpoint);
        FUZZ_ASSERT(nd <= (size_t)gnd, "%s: %zu digits, glibc reads back %s (%d)",
                    t, nd, gdig, gnd);
        if ((a & 0x000fffffffffffffu) != 0 || (a & 0x7ff0000000000000u) == 0)
                FUZZ_ASSERT(strcmp(dig, gdig) == 0 && point == gpoint,
                            "%s: digits %s point %d, glibc %s point %d",
                            t, dig, point, gdig, gpoint);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_json_ json_t *arr = json_array();
        _cleanup_free_ char *all = NULL;
        size_t n = 0, len;
        const char *p;

        FUZZ_ASSERT(arr, "json_array");
        for (size_t off = 0; off + 8 <= size && n < FUZZ_CANON_MAX; off += 8) {
                _cleanup_json_ json_t *v = NULL;
                _cleanup_free_ char *t = NULL;
                double x;
                int r;

                memcpy(&x, data + off, sizeof(x));
                v = json_real(x);
                if (!isfinite(x)) {
                        /* jansson refuses them, and so must the writer. */
                        FUZZ_ASSERT(!v, "json_real took %a", x);
                        continue;
                }
                FUZZ_ASSERT(v, "json_real(%a)", x);
                r = hd_canon_dump(v, NULL, &t, &len);
                FUZZ_ASSERT(r == 0, "hd_canon_dump(%a): %s", x, strerror(-r));
                FUZZ_ASSERT(strlen(t) == len && len <= 24, "%s: length %zu", t, len);
                check_one(x, t);
                FUZZ_ASSERT(json_array_append(arr, v) == 0, "append");
                n++;
        }

        /* The same reals in one array: the same texts, joined by commas. */
        FUZZ_ASSERT(hd_canon_dump(arr, NULL, &all, &len) == 0, "dump of the array");
        FUZZ_ASSERT(all[0] == '[' && all[len - 1] == ']', "array %s", all);
        p = all + 1;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *t = NULL;
                size_t tl;

                FUZZ_ASSERT(hd_canon_dump(json_array_get(arr, i), NULL, &t, &tl) == 0, "dump");
                FUZZ_ASSERT(strncmp(p, t, tl) == 0 && (p[tl] == ',' || p[tl] == ']'),
                            "element %zu: %s in %s", i, t, all);
                p += tl + 1;
        }
        return 0;
}
