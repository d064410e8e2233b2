/* Timestamps of the wire format: strict ISO-8601 with an offset, parsed to
 * and formatted from microseconds since the epoch.  Calendar arithmetic is
 * done here (proleptic Gregorian, days-from-civil) so nothing depends on TZ,
 * timegm() or the C library's idea of time_t range. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "handoff.h"
#include "util.h"

#define USEC_PER_SEC  INT64_C(1000000)
#define USEC_PER_DAY  (INT64_C(86400) * USEC_PER_SEC)

/* Days since 1970-01-01 of y-m-d (H. Hinnant's algorithm; any y). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
        y -= m <= 2;
        const int64_t era = (y >= 0 ? y : y - 399) / 400;
        const unsigned yoe = (unsigned)(y - era * 400);
        const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
        const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *ry, unsigned *rm, unsigned *rd)
{
        z += 719468;
        const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
        const unsigned doe = (unsigned)(z - era * 146097);
        const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        const unsigned mp = (5 * doy + 2) / 153;
        const unsigned m = mp < 10 ? mp + 3 : mp - 9;

        *rd = doy - (153 * mp + 2) / 5 + 1;
        *rm = m;
        *ry = (int64_t)yoe + era * 400 + (m <= 2);
}

static bool is_leap(int64_t y)
{
        return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned days_in_month(int64_t y, unsigned m)
{
        static const unsigned char dim[12] = { 31, 28, 31, 30, 31, 30,
                                               31, 31, 30, 31, 30, 31 };
        return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

/* Exactly n ASCII digits at s (no sign, no space: strtol would allow both). */
static bool digits(const char *s, unsigned n, unsigned *ret)
{
        unsigned v = 0;

        for (unsigned i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        *ret = v;
        return true;
}

/* Accepted: YYYY-MM-DDTHH:MM:SS, then an optional '.' with 1 to 9 digits
 * (Python 3.11's fromisoformat takes any count too; digits beyond the
 * sixth are truncated, as it does), then 'Z' or +HH:MM / -HH:MM.  Upper-
 * case 'T' and 'Z' only, no leap second, years 0001-9999 as Python's
 * datetime. */
int hd_time_parse(const char *s, int64_t *ret_usec)
{
        unsigned year, mon, day, hh, mm, ss, frac = 0, oh = 0, om = 0;
        int64_t usec, off = 0;
        const char *p;

        if (!s || !ret_usec)
                return -EINVAL;
        if (strnlen(s, 20) < 19)
                return -EINVAL;
        if (!digits(s, 4, &year) || s[4] != '-' ||
            !digits(s + 5, 2, &mon) || s[7] != '-' ||
            !digits(s + 8, 2, &day) || s[10] != 'T' ||
            !digits(s + 11, 2, &hh) || s[13] != ':' ||
            !digits(s + 14, 2, &mm) || s[16] != ':' ||
            !digits(s + 17, 2, &ss))
                return -EINVAL;
        if (year < 1 || mon < 1 || mon > 12 || day < 1 ||
            day > days_in_month(year, mon) || hh > 23 || mm > 59 || ss > 59)
                return -EINVAL;

        p = s + 19;
        if (*p == '.') {
                unsigned n = 0, scale = 100000;

                p++;
                while (p[n] >= '0' && p[n] <= '9') {
                        if (n >= 9)
                                return -EINVAL;
                        if (n < 6) {
                                frac += (unsigned)(p[n] - '0') * scale;
                                scale /= 10;
                        }
                        n++;
                }
                if (n == 0)
                        return -EINVAL;
                p += n;
        }

        if (*p == 'Z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                if (!digits(p + 1, 2, &oh) || p[3] != ':' ||
                    !digits(p + 4, 2, &om) || oh > 23 || om > 59)
                        return -EINVAL;
                off = ((int64_t)oh * 3600 + om * 60) * USEC_PER_SEC;
                if (*p == '-')
                        off = -off;
                p += 6;
        } else {
                /* Naive (or junk): a time without an offset means whatever
                 * the writer's clock zone was, which the reader cannot know. */
                return -EINVAL;
        }
        if (*p != '\0')
                return -EINVAL;

        usec = days_from_civil(year, mon, day) * USEC_PER_DAY +
               ((int64_t)hh * 3600 + mm * 60 + ss) * USEC_PER_SEC + frac;
        *ret_usec = usec - off;
        return 0;
}

int hd_time_format(int64_t usec, char *buf, size_t n)
{
        /* Python's datetime spans 0001-01-01 to 9999-12-31. */
        const int64_t lo = days_from_civil(1, 1, 1) * USEC_PER_DAY;
        const int64_t hi = days_from_civil(10000, 1, 1) * USEC_PER_DAY;
        int64_t days, rem, y;
        unsigned m, d, sod, us;
        int r;

        if (!buf)
                return -EINVAL;
        if (usec < lo || usec >= hi)
                return -ERANGE;
        /* Floor division: before 1970 the remainder must stay positive. */
        days = usec / USEC_PER_DAY;
        rem = usec % USEC_PER_DAY;
        if (rem < 0) {
                rem += USEC_PER_DAY;
                days--;
        }
        civil_from_days(days, &y, &m, &d);
        sod = (unsigned)(rem / USEC_PER_SEC);
        us = (unsigned)(rem % USEC_PER_SEC);
        if (us)
                r = xsnprintf(buf, n, "%04lld-%02u-%02uT%02u:%02u:%02u.%06uZ",
                              (long long)y, m, d, sod / 3600, sod / 60 % 60,
                              sod % 60, us);
        else
                r = xsnprintf(buf, n, "%04lld-%02u-%02uT%02u:%02u:%02uZ",
                              (long long)y, m, d, sod / 3600, sod / 60 % 60,
                              sod % 60);
        return r < 0 ? r : 0;
}

int64_t hd_now_usec(void)
{
        struct timespec ts;

        /* CLOCK_REALTIME: expiry is wall-clock by definition of the format. */
        if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return 0;
        return (int64_t)ts.tv_sec * USEC_PER_SEC + ts.tv_nsec / 1000;
}
