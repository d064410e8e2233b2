/* Canonical bytes: hd_canon_dump() against Python's json.dumps(...,
 * sort_keys=True, separators=(",", ":"), ensure_ascii=True) on random
 * documents (tests/py/gen_docs.py), and the corner cases one by one. */
#include <check.h>
#include <errno.h>
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handoff.h"
#include "testutil.h"

/* Parse text with hd_parse and return its canonical bytes (malloc'ed). */
static char *canon_of(const char *text)
{
        hd_verdict v;
        json_t *doc = NULL;
        char *out = NULL;
        size_t len;
        int r;

        r = hd_parse(text, strlen(text), NULL, &doc, &v);
        ck_assert_msg(r == 0, "parse of %s: %d %s", text, r, v.detail);
        ck_assert_int_eq(hd_canon_dump(doc, NULL, &out, &len), 0);
        ck_assert_uint_eq(strlen(out), len);
        json_decref(doc);
        return out;
}

static void assert_canon(const char *text, const char *want)
{
        char *got = canon_of(text);

        ck_assert_msg(strcmp(got, want) == 0, "%s: got %s want %s",
                      text, got, want);
        free(got);
}

/* Run gen_docs.py with extra arguments; every document it prints must
 * canonicalize to the bytes python3 gave.  Returns the count. */
static long canon_compare_python(const char *const *extra, double *ret_secs)
{
        char *script, *out = NULL, *p;
        char *argv[16] = { "python3", "-B", NULL };
        struct timespec t0, t1;
        size_t k = 3;
        long n = 0;
        int rc;

        ck_assert_int_ge(asprintf(&script, "%s/tests/py/gen_docs.py", tu_src_dir()), 0);
        argv[2] = script;
        for (; *extra && k < sizeof(argv) / sizeof(argv[0]) - 1; extra++)
                argv[k++] = (char *)*extra;
        argv[k] = NULL;

        rc = tu_run(argv, &out);
        ck_assert_msg(rc == 0, "gen_docs.py exited %d: %.500s", rc,
                      out ? out : "");

        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (p = out; *p; n++) {
                char *in = p, *want, *nl, *got = NULL;
                json_t *doc = NULL;
                hd_verdict v;
                size_t len;
                int r;

                nl = strchr(in, '\n');
                ck_assert_ptr_nonnull(nl);
                *nl = '\0';
                want = nl + 1;
                nl = strchr(want, '\n');
                ck_assert_ptr_nonnull(nl);
                *nl = '\0';
                p = nl + 1;

                r = hd_parse(in, strlen(in), NULL, &doc, &v);
                ck_assert_msg(r == 0, "doc %ld: parse failed (%s: %s): %.300s",
                              n, hd_reason_name(v.reason), v.detail, in);
                r = hd_canon_dump(doc, NULL, &got, &len);
                ck_assert_msg(r == 0, "doc %ld: dump failed %d", n, r);
                if (len != strlen(want) || memcmp(got, want, len)) {
                        /* name the first value that differs */
                        size_t i = 0;
                        while (i < len && got[i] == want[i])
                                i++;
                        ck_abort_msg("doc %ld differs at byte %zu:\n got  %.60s\n want %.60s",
                                     n, i, got + (i > 20 ? i - 20 : 0), want + (i > 20 ? i - 20 : 0));
                }
                free(got);
                json_decref(doc);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        *ret_secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        free(out);
        free(script);
        return n;
}

START_TEST(test_canon_matches_python_10000_docs)
{
        const char *s_seed = getenv("HD_CANON_SEED");
        const char *s_count = getenv("HD_CANON_COUNT");
        long seed = s_seed ? atol(s_seed) : 20240611;
        long count = s_count ? atol(s_count) : 10000;
        char seed_arg[32], count_arg[32];
        const char *extra[] = { "--seed", seed_arg, "--count", count_arg, NULL };
        double secs;
        long n;

        ck_assert_int_gt(count, 0);
        snprintf(seed_arg, sizeof(seed_arg), "%ld", seed);
        snprintf(count_arg, sizeof(count_arg), "%ld", count);
        n = canon_compare_python(extra, &secs);
        ck_assert_int_eq(n, count);
        printf("canon: %ld documents match python3 json.dumps (seed %ld) in %.2fs\n",
               n, seed, secs);
        fflush(stdout);
}
END_TEST

/* Issue 19.5: the fast float path (15, 16, then 17 digits) against
 * Python's repr on the doubles where shortcuts go wrong: every power of
 * two and its neighbours, subnormals, 17-digit values, random bits. */
START_TEST(test_canon_hard_doubles_match_python)
{
        const char *s_seed = getenv("HD_CANON_SEED");
        const char *s_count = getenv("HD_CANON_FLOATS");
        long count = s_count ? atol(s_count) : 40000;
        char count_arg[32];
        const char *extra[] = { "--hard-floats", "--seed", s_seed ? s_seed : "7",
                                "--count", count_arg, NULL };
        double secs;
        long n;

        ck_assert_int_ge(count, 1000);
        snprintf(count_arg, sizeof(count_arg), "%ld", count);
        n = canon_compare_python(extra, &secs);
        ck_assert_int_eq(n, (count + 999) / 1000);
        printf("canon: %ld hard doubles match python3 repr in %.3fs\n", count, secs);
        fflush(stdout);
}
END_TEST

/* Python's repr of every double tests/py/repr_doubles.py lists (the hard
 * classes first: powers of two and of ten and their neighbours, exponent
 * boundaries, subnormals, the repr's switch points; then random ones)
 * against hd_canon_dump(), streamed: HD_CANON_REPR_COUNT doubles, 200,000
 * by default, 10 million in make stress.  Every difference is counted and
 * the first ten shown. */
START_TEST(test_canon_repr_doubles_match_python)
{
        const char *s_seed = getenv("HD_CANON_SEED");
        const char *s_count = getenv("HD_CANON_REPR_COUNT");
        long seed = s_seed ? atol(s_seed) : 1;
        long count = s_count ? atol(s_count) : 200000;
        long n = 0, diffs = 0;
        struct timespec t0, t1;
        char *cmd = NULL, *line = NULL;
        size_t cap = 0;
        ssize_t got;
        FILE *f;
        int rc;

        ck_assert_int_gt(count, 0);
        ck_assert_int_ge(asprintf(&cmd, "exec python3 -B '%s/tests/py/repr_doubles.py' "
                                  "--seed %ld --count %ld", tu_src_dir(), seed, count), 0);
        f = popen(cmd, "r");
        ck_assert_ptr_nonnull(f);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while ((got = getline(&line, &cap, f)) > 0) {
                char *end, *out = NULL;
                unsigned long long bits;
                json_t *v;
                size_t len;
                double x;

                if (line[got - 1] == '\n')
                        line[--got] = '\0';
                bits = strtoull(line, &end, 16);
                ck_assert_msg(end == line + 16 && *end == ' ', "line %ld: %s", n + 1, line);
                memcpy(&x, &(uint64_t){ bits }, sizeof(x));
                v = json_real(x);
                ck_assert_msg(v, "line %ld: json_real(%a)", n + 1, x);
                ck_assert_int_eq(hd_canon_dump(v, NULL, &out, &len), 0);
                if (strcmp(out, end + 1) != 0 && ++diffs <= 10)
                        printf("canon: %016llx: got %s, python3 repr %s\n", bits, out, end + 1);
                free(out);
                json_decref(v);
                n++;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        rc = pclose(f);
        free(line);
        free(cmd);
        ck_assert_msg(rc == 0, "repr_doubles.py: exit status %d", rc);
        ck_assert_int_eq(n, count);
        printf("canon: %ld doubles (seed %ld) against python3 repr: %ld differences (%.1fs)\n",
               n, seed, diffs, (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        fflush(stdout);
        ck_assert_int_eq(diffs, 0);
}
END_TEST

static const hd_key *cost_key;

static const hd_key *cost_lookup(void *ud, const char *kid, const char *from)
{
        return cost_key;
}

static double cpu_now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Issue 39: a file of junk reals with a wrong MAC must not cost the
 * daemon more to refuse than to read.  65,400 reals of 11 to 15 digits in
 * about 1 MiB (as bench/verify_cost.c): hd_verify(), the canonical bytes
 * and the MAC, at most twice the CPU of hd_parse(), the cheapest of five
 * of each against the other. */
START_TEST(test_canon_reals_verify_within_twice_parse)
{
        static const char secret[] = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        json_t *d, *a = json_array();
        hd_key *key = NULL;
        uint64_t s = 0x9e3779b97f4a7c15u;
        double parse = 1e9, verify = 1e9;
        char *text = NULL, num[40];
        size_t len;
        int64_t now;
        hd_verdict v;

        ck_assert_int_eq(hd_key_from_bytes(secret, strlen(secret), &key), 0);
        ck_assert_int_eq(hd_time_parse("2026-04-21T10:16:00Z", &now), 0);
        d = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:[]}",
                      "protocol_version", 1,
                      "handoff_id", "1776766500-alice-bob-0123456789abcdef",
                      "caller_hash", "602cd7fbbe41688e", "from_agent", "alice",
                      "to_agent", "bob", "reason", "transfer",
                      "initiated_at", "2026-04-21T10:15:00Z",
                      "expires_at", "2026-04-21T10:20:00Z", "transcript");
        ck_assert_ptr_nonnull(d);
        for (int i = 0; i < 65400; i++) {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                snprintf(num, sizeof(num), "%.*fe%d", 10 + (int)(s % 5),
                         1.0 + (double)(s >> 11) * 0x1p-53 * 9.0, (int)((s >> 3) % 6) - 3);
                json_array_append_new(a, json_real(strtod(num, NULL)));
        }
        json_object_set_new(d, "x_reals", a);
        ck_assert_int_eq(hd_sign(d, key), 0);
        ck_assert_int_eq(hd_canon_dump(d, NULL, &text, &len), 0);
        ck_assert_uint_le(len, HD_DEFAULT_MAX_SIZE);
        json_decref(d);

        cost_key = key;
        for (int i = 0; i < 5; i++) {
                json_t *p = NULL;
                double t0 = cpu_now(), t1, t2;

                ck_assert_int_eq(hd_parse(text, len, NULL, &p, &v), 0);
                t1 = cpu_now();
                ck_assert_msg(hd_verify(p, cost_lookup, NULL, NULL, NULL, now, &v) == 0,
                              "verify: %s", v.detail);
                t2 = cpu_now();
                json_decref(p);
                parse = t1 - t0 < parse ? t1 - t0 : parse;
                verify = t2 - t1 < verify ? t2 - t1 : verify;
        }
        printf("canon: %zu bytes of 65400 reals: parse %.1f ms, hd_verify %.1f ms "
               "(verify/parse %.2f)\n", len, parse * 1e3, verify * 1e3, verify / parse);
        fflush(stdout);
        free(text);
        hd_key_free(key);
        ck_assert_msg(verify <= 2 * parse, "hd_verify %.1f ms, more than twice the parse's %.1f ms",
                      verify * 1e3, parse * 1e3);
}
END_TEST

START_TEST(test_canon_escapes_lowercase)
{
        assert_canon("{\"k\":\"\\u00E9\\u00e9\\u00FF\"}",
                     "{\"k\":\"\\u00e9\\u00e9\\u00ff\"}");
        assert_canon("{\"k\":\"\\uABCD\"}", "{\"k\":\"\\uabcd\"}");
        /* raw UTF-8 in, escapes out */
        assert_canon("{\"k\":\"\xc3\xa9\xe2\x80\xa8\xef\xbf\xbf\"}",
                     "{\"k\":\"\\u00e9\\u2028\\uffff\"}");
}
END_TEST

START_TEST(test_canon_short_escapes_and_controls)
{
        assert_canon("{\"k\":\"\\\" \\\\ \\/ \\n \\r \\t \\b \\f\"}",
                     "{\"k\":\"\\\" \\\\ / \\n \\r \\t \\b \\f\"}");
        assert_canon("{\"k\":\"\\u0001\\u001F\\u000B\\u000a\"}",
                     "{\"k\":\"\\u0001\\u001f\\u000b\\n\"}");
        assert_canon("{\"k\":\"a/b\"}", "{\"k\":\"a/b\"}");
}
END_TEST

START_TEST(test_canon_del_escaped)
{
        assert_canon("{\"k\":\"\x7f\"}", "{\"k\":\"\\u007f\"}");
        assert_canon("{\"\x7f\":\"~\"}", "{\"\\u007f\":\"~\"}");
}
END_TEST

START_TEST(test_canon_astral_surrogate_pair)
{
        /* U+1F600 raw and as an escaped pair both come out as the pair */
        assert_canon("{\"k\":\"\xf0\x9f\x98\x80\"}",
                     "{\"k\":\"\\ud83d\\ude00\"}");
        assert_canon("{\"k\":\"\\uD83D\\uDE00\"}",
                     "{\"k\":\"\\ud83d\\ude00\"}");
        assert_canon("{\"k\":\"\xf4\x8f\xbf\xbf\xf0\x90\x80\x80\"}",
                     "{\"k\":\"\\udbff\\udfff\\ud800\\udc00\"}");
}
END_TEST

START_TEST(test_canon_keys_sorted_by_code_point)
{
        /* By UTF-16 unit U+1F600 (d83d) would sort before U+E000; Python
         * sorts by code point. */
        assert_canon("{\"\xf0\x9f\x98\x80\":1,\"\xee\x80\x80\":2,\"b\":3,"
                     "\"a\":4,\"ab\":5,\"A\":6,\"\":7,\"\xc3\xa9\":8}",
                     "{\"\":7,\"A\":6,\"a\":4,\"ab\":5,\"b\":3,\"\\u00e9\":8,"
                     "\"\\ue000\":2,\"\\ud83d\\ude00\":1}");
        assert_canon("{\"z\":{\"b\":[{\"d\":1,\"c\":2}],\"a\":null}}",
                     "{\"z\":{\"a\":null,\"b\":[{\"c\":2,\"d\":1}]}}");
}
END_TEST

static const struct {
        double x;
        const char *repr;
} float_table[] = {
        { 100000.0, "100000.0" },
        { 1e16, "1e+16" },
        { 1e15, "1000000000000000.0" },
        { 9999999999999998.0, "9999999999999998.0" },
        { 1e-05, "1e-05" },
        { 1.5e-05, "1.5e-05" },
        { 0.0001, "0.0001" },
        { 0.00012345, "0.00012345" },
        { -0.0, "-0.0" },
        { 0.0, "0.0" },
        { 1e+20, "1e+20" },
        { 1e22, "1e+22" },
        { 1e100, "1e+100" },
        { 123456789012345.6, "123456789012345.6" },
        { 0.1, "0.1" },
        { 0.3, "0.3" },
        { 0.1 + 0.2, "0.30000000000000004" },
        { 1.0 / 3.0, "0.3333333333333333" },
        { 2.5, "2.5" },
        { -1.0, "-1.0" },
        { 5e-324, "5e-324" },
        { 2.2250738585072014e-308, "2.2250738585072014e-308" },
        { 1.7976931348623157e308, "1.7976931348623157e+308" },
        { 9007199254740993.0, "9007199254740992.0" },
        { 1.2345678901234567e-7, "1.2345678901234566e-07" },
        { 8.589973e9, "8589973000.0" },
        /* powers of two whose shortest repr is not the correctly rounded
         * 16-digit value but its neighbour (lopsided interval) */
        { 7.120236347223045e-307, "7.120236347223045e-307" },
        { 7.291122019556398e-304, "7.291122019556398e-304" },
};

START_TEST(test_canon_float_repr_table)
{
        for (size_t i = 0; i < sizeof(float_table) / sizeof(float_table[0]); i++) {
                json_t *v = json_real(float_table[i].x);
                char *out = NULL;
                size_t len;

                ck_assert_ptr_nonnull(v);
                ck_assert_int_eq(hd_canon_dump(v, NULL, &out, &len), 0);
                ck_assert_msg(strcmp(out, float_table[i].repr) == 0,
                              "%.17g: got %s want %s", float_table[i].x, out,
                              float_table[i].repr);
                free(out);
                json_decref(v);
        }
}
END_TEST

START_TEST(test_canon_integers_and_literals)
{
        assert_canon("{\"a\":9223372036854775807,\"b\":-9223372036854775808,"
                     "\"c\":-0,\"d\":1.0,\"e\":1E2,\"f\":[true,false,null]}",
                     "{\"a\":9223372036854775807,\"b\":-9223372036854775808,"
                     "\"c\":0,\"d\":1.0,\"e\":100.0,\"f\":[true,false,null]}");
}
END_TEST

START_TEST(test_canon_skip_key_top_level_only)
{
        json_t *doc = NULL;
        char *out = NULL;
        size_t len;
        const char *in = "{\"hmac\":\"x\",\"a\":{\"hmac\":1},\"b\":2}";

        ck_assert_int_eq(hd_parse(in, strlen(in), NULL, &doc, NULL), 0);
        ck_assert_int_eq(hd_canon_dump(doc, "hmac", &out, &len), 0);
        ck_assert_str_eq(out, "{\"a\":{\"hmac\":1},\"b\":2}");
        ck_assert_uint_eq(len, strlen(out));
        free(out);
        ck_assert_int_eq(hd_canon_dump(doc, "nope", &out, &len), 0);
        ck_assert_str_eq(out, "{\"a\":{\"hmac\":1},\"b\":2,\"hmac\":\"x\"}");
        free(out);
        json_decref(doc);
}
END_TEST

START_TEST(test_canon_rejects_invalid_utf8_built_in_code)
{
        /* jansson's parser never yields this, but json_stringn_nocheck can */
        json_t *doc = json_pack("{s:o}", "k", json_stringn_nocheck("\xff", 1));
        char *out = NULL;
        size_t len;

        ck_assert_ptr_nonnull(doc);
        ck_assert_int_lt(hd_canon_dump(doc, NULL, &out, &len), 0);
        ck_assert_ptr_null(out);
        json_decref(doc);
}
END_TEST

START_TEST(test_canon_too_deep_refused)
{
        /* A value built in code can nest deeper than any parser allows
         * (5000 levels: jansson frees recursively too); the writer must
         * refuse, not recurse without bound. */
        json_t *root = json_array(), *cur = root;
        char *out = NULL;
        size_t len;

        for (int i = 0; i < 5000; i++) {
                json_t *n = json_array();
                json_array_append_new(cur, n);
                cur = n;
        }
        ck_assert_int_eq(hd_canon_dump(root, NULL, &out, &len), -ELOOP);
        ck_assert_ptr_null(out);
        json_decref(root);
}
END_TEST

Suite *suite_canon(void);
Suite *suite_canon(void)
{
        Suite *s = suite_create("canon");
        TCase *tc = tcase_create("python");
        TCase *tc2 = tcase_create("cases");
        TCase *tc_repr = tcase_create("repr");
        TCase *tc_cost = tcase_create("cost");

        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, test_canon_matches_python_10000_docs);
        tcase_add_test(tc, test_canon_hard_doubles_match_python);
        suite_add_tcase(s, tc);

        /* make stress runs this case alone with 10 million doubles:
         * about a minute of python3 writing them. */
        tcase_set_timeout(tc_repr, 1800);
        tcase_add_test(tc_repr, test_canon_repr_doubles_match_python);
        suite_add_tcase(s, tc_repr);

        tcase_add_test(tc_cost, test_canon_reals_verify_within_twice_parse);
        suite_add_tcase(s, tc_cost);

        tcase_add_test(tc2, test_canon_escapes_lowercase);
        tcase_add_test(tc2, test_canon_short_escapes_and_controls);
        tcase_add_test(tc2, test_canon_del_escaped);
        tcase_add_test(tc2, test_canon_astral_surrogate_pair);
        tcase_add_test(tc2, test_canon_keys_sorted_by_code_point);
        tcase_add_test(tc2, test_canon_float_repr_table);
        tcase_add_test(tc2, test_canon_integers_and_literals);
        tcase_add_test(tc2, test_canon_skip_key_top_level_only);
        tcase_add_test(tc2, test_canon_rejects_invalid_utf8_built_in_code);
        tcase_add_test(tc2, test_canon_too_deep_refused);
        suite_add_tcase(s, tc2);
        return s;
}
