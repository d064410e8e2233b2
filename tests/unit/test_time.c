/* Timestamps: strict ISO-8601 parsing, Python-compatible formatting, the
 * calendar edge cases (leap years, month lengths, offsets, pre-1970) and a
 * cross-check of the formatter against python3's datetime.isoformat(). */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handoff.h"
#include "testutil.h"

/* Expected values computed with python3 datetime (not with this code). */
static const struct {
        const char *s;
        int64_t usec;
} good[] = {
        { "1970-01-01T00:00:00Z", 0 },
        { "2000-02-29T00:00:00Z", INT64_C(951782400000000) },
        { "2026-04-21T10:15:00Z", INT64_C(1776766500000000) },
        { "2026-04-21T12:15:00.123456+02:00", INT64_C(1776766500123456) },
        { "1969-12-31T23:59:59.999999Z", -1 },
        { "0001-01-01T00:00:00Z", INT64_C(-62135596800000000) },
        { "9999-12-31T23:59:59.999999Z", INT64_C(253402300799999999) },
        { "2024-02-29T23:59:59-05:30", INT64_C(1709270999000000) },
        { "2100-03-01T00:00:00Z", INT64_C(4107542400000000) },
        { "1900-03-01T00:00:00+00:00", INT64_C(-2203891200000000) },
        { "2026-04-21T10:15:00.5Z", INT64_C(1776766500500000) },
        { "2026-04-21T10:15:00.000001Z", INT64_C(1776766500000001) },
        /* Beyond six digits: truncated to microseconds, never rounded. */
        { "2026-04-21T10:15:00.1234569Z", INT64_C(1776766500123456) },
        { "2026-04-21T10:15:00.999999999Z", INT64_C(1776766500999999) },
        { "2026-04-21T10:15:00-00:00", INT64_C(1776766500000000) },
        /* Local midnight 10:15 before T, then 23:59 further back. */
        { "2026-04-21T00:00:00+23:59", INT64_C(1776643260000000) },
};

static const char *const bad[] = {
        "",
        "2026-04-21T10:15:00",           /* naive */
        "2026-04-21T10:15:00.123456",    /* naive with fraction */
        "2026-04-21T10:15:00z",          /* lowercase z */
        "2026-04-21t10:15:00Z",          /* lowercase t */
        "2026-04-21 10:15:00Z",          /* space for T */
        "2026-04-21T10:15Z",             /* no seconds */
        "2026-4-21T10:15:00Z",
        "26-04-21T10:15:00Z",
        " 2026-04-21T10:15:00Z",
        "2026-04-21T10:15:00Z ",
        "2026-04-21T10:15:00ZZ",
        "2026-04-21T10:15:00+0200",
        "2026-04-21T10:15:00+02",
        "2026-04-21T10:15:00+24:00",
        "2026-04-21T10:15:00+02:60",
        "2026-04-21T10:15:00+02:00:00",
        "2026-04-21T10:15:00.Z",
        "2026-04-21T10:15:00.1234567890Z",  /* 10 digits */
        "2026-04-21T10:15:00,5Z",
        "2026-00-21T10:15:00Z",
        "2026-13-21T10:15:00Z",
        "2026-04-00T10:15:00Z",
        "2026-04-31T10:15:00Z",
        "2026-02-29T10:15:00Z",          /* 2026 is not leap */
        "2100-02-29T10:15:00Z",          /* century, not leap */
        "1900-02-29T10:15:00Z",
        "2026-04-21T24:00:00Z",
        "2026-04-21T10:60:00Z",
        "2016-12-31T23:59:60Z",          /* leap second: Python refuses */
        "0000-01-01T00:00:00Z",          /* datetime.MINYEAR is 1 */
        "+026-04-21T10:15:00Z",
        "2026-04-2aT10:15:00Z",
        "2026-04-21T1 :15:00Z",
        "2026-04-21T10:15:00\xef\xbc\xbaZ",
};

START_TEST(test_time_parse_table)
{
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                int64_t u = 42;
                ck_assert_msg(hd_time_parse(good[i].s, &u) == 0, "refused %s", good[i].s);
                ck_assert_msg(u == good[i].usec, "%s: %" PRId64 " != %" PRId64,
                              good[i].s, u, good[i].usec);
        }
}
END_TEST

START_TEST(test_time_parse_rejects_malformed_and_naive)
{
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int64_t u = 42;
                ck_assert_msg(hd_time_parse(bad[i], &u) == -EINVAL, "accepted '%s'", bad[i]);
                ck_assert_msg(u == 42, "'%s' wrote the result on failure", bad[i]);
        }
        ck_assert_int_eq(hd_time_parse(NULL, &(int64_t){ 0 }), -EINVAL);
}
END_TEST

START_TEST(test_time_leap_years)
{
        static const struct { int y; bool leap; } years[] = {
                { 1600, true }, { 1700, false }, { 1900, false }, { 2000, true },
                { 2004, true }, { 2023, false }, { 2024, true }, { 2100, false },
                { 2400, true }, { 9996, true }, { 1, false }, { 4, true },
        };
        for (size_t i = 0; i < sizeof(years) / sizeof(years[0]); i++) {
                char s[40];
                int64_t feb29, mar1;
                snprintf(s, sizeof(s), "%04d-02-29T00:00:00Z", years[i].y);
                ck_assert_int_eq(hd_time_parse(s, &feb29) == 0, years[i].leap);
                snprintf(s, sizeof(s), "%04d-03-01T00:00:00Z", years[i].y);
                ck_assert_int_eq(hd_time_parse(s, &mar1), 0);
                if (years[i].leap)
                        ck_assert(mar1 - feb29 == INT64_C(86400000000));
        }
}
END_TEST

START_TEST(test_time_month_lengths)
{
        static const int dim[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        int64_t prev, cur;

        ck_assert_int_eq(hd_time_parse("2025-01-01T00:00:00Z", &prev), 0);
        for (int m = 1; m <= 12; m++) {
                char s[40];
                int64_t u;
                snprintf(s, sizeof(s), "2025-%02d-%02dT00:00:00Z", m, dim[m - 1]);
                ck_assert_msg(hd_time_parse(s, &u) == 0, "refused %s", s);
                snprintf(s, sizeof(s), "2025-%02d-%02dT00:00:00Z", m, dim[m - 1] + 1);
                ck_assert_msg(hd_time_parse(s, &u) == -EINVAL, "accepted %s", s);
        }
        ck_assert_int_eq(hd_time_parse("2026-01-01T00:00:00Z", &cur), 0);
        ck_assert(cur - prev == INT64_C(365) * 86400 * 1000000);
}
END_TEST

START_TEST(test_time_offsets_same_instant)
{
        int64_t a, b, c;

        ck_assert_int_eq(hd_time_parse("2026-04-21T10:15:00Z", &a), 0);
        ck_assert_int_eq(hd_time_parse("2026-04-21T15:45:00+05:30", &b), 0);
        ck_assert_int_eq(hd_time_parse("2026-04-20T23:15:00-11:00", &c), 0);
        ck_assert(a == b);
        ck_assert(a == c);
}
END_TEST

static const struct {
        int64_t usec;
        const char *s;
} formats[] = {
        { 0, "1970-01-01T00:00:00Z" },
        { INT64_C(1776766500000000), "2026-04-21T10:15:00Z" },
        { INT64_C(1776766500123456), "2026-04-21T10:15:00.123456Z" },
        { INT64_C(1776766500500000), "2026-04-21T10:15:00.500000Z" },
        { INT64_C(1776766500000001), "2026-04-21T10:15:00.000001Z" },
        { -1, "1969-12-31T23:59:59.999999Z" },
        { INT64_C(-1000000), "1969-12-31T23:59:59Z" },
        { INT64_C(951782400000000), "2000-02-29T00:00:00Z" },
        { INT64_C(-62135596800000000), "0001-01-01T00:00:00Z" },
        { INT64_C(253402300799999999), "9999-12-31T23:59:59.999999Z" },
};

START_TEST(test_time_format_table)
{
        for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
                char buf[HD_TIME_MAX];
                ck_assert_int_eq(hd_time_format(formats[i].usec, buf, sizeof(buf)), 0);
                ck_assert_str_eq(buf, formats[i].s);
        }
}
END_TEST

START_TEST(test_time_format_limits)
{
        char buf[HD_TIME_MAX];

        ck_assert_int_eq(hd_time_format(INT64_C(-62135596800000001), buf, sizeof(buf)), -ERANGE);
        ck_assert_int_eq(hd_time_format(INT64_C(253402300800000000), buf, sizeof(buf)), -ERANGE);
        ck_assert_int_eq(hd_time_format(INT64_MIN, buf, sizeof(buf)), -ERANGE);
        ck_assert_int_eq(hd_time_format(INT64_MAX, buf, sizeof(buf)), -ERANGE);
        /* 20 chars + NUL do not fit in 20 bytes. */
        ck_assert_int_lt(hd_time_format(0, buf, 20), 0);
        ck_assert_int_eq(hd_time_format(0, buf, 21), 0);
}
END_TEST

START_TEST(test_time_round_trip_microseconds)
{
        /* A fixed LCG walk over the whole 0001..9999 range plus the odd
         * microsecond: format then parse must give the value back. */
        const int64_t lo = INT64_C(-62135596800000000), hi = INT64_C(253402300799999999);
        uint64_t x = 0x9e3779b97f4a7c15u;

        for (int i = 0; i < 20000; i++) {
                char buf[HD_TIME_MAX];
                int64_t u, back;

                x = x * 6364136223846793005u + 1442695040888963407u;
                u = lo + (int64_t)(x % (uint64_t)(hi - lo));
                if (i % 3 == 0)
                        u -= u % 1000000;  /* whole seconds: no fraction */
                ck_assert_int_eq(hd_time_format(u, buf, sizeof(buf)), 0);
                ck_assert_msg(hd_time_parse(buf, &back) == 0, "refused own %s", buf);
                ck_assert_msg(back == u, "%s: %" PRId64 " != %" PRId64, buf, back, u);
                ck_assert_int_eq(strchr(buf, '.') != NULL, u % 1000000 != 0);
        }
}
END_TEST

START_TEST(test_time_format_matches_python)
{
        /* python3 writes "usec iso" pairs for a seeded sample; the C
         * formatter must print the same string for the same instant. */
        const char *prog =
                "import random\n"
                "from datetime import datetime, timedelta, timezone\n"
                "r = random.Random(7)\n"
                "e = datetime(1970, 1, 1, tzinfo=timezone.utc)\n"
                "lo, hi = -62135596800000000, 253402300799999999\n"
                "for i in range(500):\n"
                "    u = r.randrange(lo, hi)\n"
                "    if i % 2: u -= u % 1000000\n"
                "    d = e + timedelta(microseconds=u)\n"
                "    print(u, d.isoformat().replace('+00:00', 'Z'))\n";
        char *const argv[] = { "python3", "-B", "-c", (char *)prog, NULL };
        char *out = NULL, *line, *save = NULL;
        int n = 0;

        ck_assert_int_eq(tu_run(argv, &out), 0);
        for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char buf[HD_TIME_MAX], iso[64];
                long long u;
                int64_t back;

                ck_assert_int_eq(sscanf(line, "%lld %63s", &u, iso), 2);
                ck_assert_int_eq(hd_time_format(u, buf, sizeof(buf)), 0);
                ck_assert_str_eq(buf, iso);
                ck_assert_int_eq(hd_time_parse(iso, &back), 0);
                ck_assert(back == u);
                n++;
        }
        ck_assert_int_eq(n, 500);
        free(out);
}
END_TEST

/* The bounds come from clock_gettime(CLOCK_REALTIME), not time(): glibc's
 * time() reads the coarse clock, which lags the precise one by up to a
 * tick, so a read of time() just after a second turns can name the second
 * before it (CI saw n > b that way). */
static int64_t wall_usec(void)
{
        struct timespec ts;

        ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &ts), 0);
        return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

START_TEST(test_time_now_is_wall_clock)
{
        int64_t a = wall_usec();
        int64_t n = hd_now_usec();
        int64_t b = wall_usec();

        ck_assert_msg(n >= a && n <= b, "hd_now_usec() %lld outside [%lld, %lld]",
                      (long long)n, (long long)a, (long long)b);
}
END_TEST

Suite *suite_time(void);
Suite *suite_time(void)
{
        Suite *s = suite_create("time");
        TCase *tc = tcase_create("parse_format");

        tcase_add_test(tc, test_time_parse_table);
        tcase_add_test(tc, test_time_parse_rejects_malformed_and_naive);
        tcase_add_test(tc, test_time_leap_years);
        tcase_add_test(tc, test_time_month_lengths);
        tcase_add_test(tc, test_time_offsets_same_instant);
        tcase_add_test(tc, test_time_format_table);
        tcase_add_test(tc, test_time_format_limits);
        tcase_add_test(tc, test_time_round_trip_microseconds);
        tcase_add_test(tc, test_time_format_matches_python);
        tcase_add_test(tc, test_time_now_is_wall_clock);
        suite_add_tcase(s, tc);
        return s;
}
