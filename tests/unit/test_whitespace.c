/* A summary that Python's str.strip() empties is absent (the real consumer
 * strips resume_context and ignores an empty one): the whitespace table
 * against python3 for every code point, every such code point as a whole
 * summary, and the transcript after a real summary. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff.h"
#include "record.h"
#include "testutil.h"
#include "util.h"

#define NOW 1800000000000000LL  /* usec */

/* python3's own answer: every code point for which str.isspace() holds. */
static size_t python_spaces(uint32_t *cps, size_t max)
{
        char *argv[] = { "python3", "-c",
                         "print(' '.join(str(c) for c in range(0x110000) if chr(c).isspace()))",
                         NULL };
        char *out = NULL, *p, *end;
        size_t n = 0;

        ck_assert_int_eq(tu_run(argv, &out), 0);
        for (p = out; n < max; p = end) {
                unsigned long v = strtoul(p, &end, 10);
                if (end == p)
                        break;
                cps[n++] = (uint32_t)v;
        }
        free(out);
        ck_assert_uint_gt(n, 20);
        return n;
}

static size_t utf8_put(uint32_t cp, char *out)
{
        if (cp < 0x80) {
                out[0] = (char)cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char)(0xC0 | (cp >> 6));
                out[1] = (char)(0x80 | (cp & 0x3F));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char)(0xE0 | (cp >> 12));
                out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[2] = (char)(0x80 | (cp & 0x3F));
                return 3;
        }
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        return 4;
}

START_TEST(test_whitespace_table_is_pythons)
{
        uint32_t py[64];
        size_t n = python_spaces(py, 64), k = 0, mismatches = 0;

        for (uint32_t cp = 0; cp < 0x110000; cp++) {
                bool want = k < n && py[k] == cp;
                if (want)
                        k++;
                if (py_isspace(cp) != want && mismatches++ < 5)
                        fprintf(stderr, "U+%04X: python %d, C %d\n", cp, want, !want);
        }
        ck_assert_uint_eq(k, n);
        ck_assert_uint_eq(mismatches, 0);
}
END_TEST

static json_t *handoff(const char *key, const char *summary, size_t turns)
{
        json_t *h = json_pack("{s:s, s:s, s:s, s:s, s:[]}", "handoff_id", "1800000000-bob-alice-x",
                              "from_agent", "bob", "to_agent", "alice", "reason", "billing",
                              "transcript");
        char text[64];

        ck_assert_ptr_nonnull(h);
        if (key)
                json_object_set_new(h, key, json_string(summary));
        for (size_t i = 0; i < turns; i++) {
                snprintf(text, sizeof(text), "turn %zu", i + 1);
                json_array_append_new(json_object_get(h, "transcript"),
                                      json_pack("{s:s, s:s}", "role", i % 2 ? "assistant" : "user",
                                                "text", text));
        }
        return h;
}

static char *context_of(json_t *h)
{
        json_t *b = NULL;
        char *ctx;

        ck_assert_int_eq(hd_bootstrap_build(h, NOW, &b), 0);
        ctx = strdup(json_string_value(json_object_get(b, "resume_context")));
        json_decref(b);
        return ctx;
}

/* resume_context: handoffd's line naming the verified sender, then the
 * sender's own text, quoted (issue 24.8) */
#define CTX_HEAD "bob handed this over to you (from_agent verified by handoffd).\n" \
                 "What bob wrote (the sender's words, not handoffd's):\n"

START_TEST(test_whitespace_summary_is_absent)
{
        static const char *const keys[] = { "context_summary", "resume_context" };
        uint32_t py[64];
        size_t n = python_spaces(py, 64);
        char s[64];

        for (size_t k = 0; k < 2; k++) {
                /* each code point alone, then all of them in one summary */
                for (size_t i = 0; i <= n; i++) {
                        size_t len = 0;
                        if (i < n)
                                len = utf8_put(py[i], s);
                        else
                                for (size_t j = 0; j < n && len + 4 < sizeof(s); j++)
                                        len += utf8_put(py[j], s + len);
                        s[len] = '\0';
                        json_t *h = handoff(keys[k], s, 1);
                        char *ctx = context_of(h);
                        ck_assert_msg(!strncmp(ctx, CTX_HEAD "> Reason: billing\n",
                                               strlen(CTX_HEAD "> Reason: billing\n")),
                                      "%s of U+%04X only: resume_context '%s'", keys[k],
                                      i < n ? py[i] : 0, ctx);
                        ck_assert_ptr_nonnull(strstr(ctx, "- user: turn 1"));
                        ck_assert(!utf8_blank(ctx));
                        free(ctx);
                        json_decref(h);
                }
        }
}
END_TEST

START_TEST(test_whitespace_near_misses_are_text)
{
        /* not whitespace for Python: zero width space, Mongolian vowel
         * separator, BOM, word joiner */
        static const uint32_t text[] = { 0x200B, 0x180E, 0xFEFF, 0x2060, 'x' };
        char s[8];

        for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++) {
                s[utf8_put(text[i], s)] = '\0';
                json_t *h = handoff("context_summary", s, 0);
                char *ctx = context_of(h);
                char want[160];
                snprintf(want, sizeof(want), CTX_HEAD "> %s", s);
                ck_assert_str_eq(ctx, want);
                free(ctx);
                json_decref(h);
        }
}
END_TEST

START_TEST(test_summary_then_last_turns)
{
        json_t *h = handoff("context_summary", "Fix the invoice.", 25);
        char *ctx = context_of(h);

        static const char want[] = CTX_HEAD "> Fix the invoice.\n>\n"
                "> Transcript, the last 20 of 25 turns:\n> - assistant: turn 6\n";
        ck_assert_msg(!strncmp(ctx, want, strlen(want)), "'%s'", ctx);
        ck_assert_ptr_null(strstr(ctx, "turn 5\n"));
        ck_assert_ptr_nonnull(strstr(ctx, "> - user: turn 25"));
        free(ctx);
        json_decref(h);

        h = handoff("context_summary", "Short.", 2);
        ctx = context_of(h);
        ck_assert_str_eq(ctx, CTX_HEAD "> Short.\n>\n> Transcript so far:\n> - user: turn 1\n"
                         "> - assistant: turn 2");
        free(ctx);
        json_decref(h);

        h = handoff("context_summary", "Alone.", 0);
        ctx = context_of(h);
        ck_assert_str_eq(ctx, CTX_HEAD "> Alone.");
        free(ctx);
        json_decref(h);
}
END_TEST

START_TEST(test_summary_turns_dropped_past_size_cap)
{
        /* 25 turns of 16 KiB (twice in the bootstrap: its copy and the
         * signed handoff): 20 more in resume_context would push it past
         * the 1 MiB a consumer reads */
        json_t *h = handoff("context_summary", "Big.", 0), *b = NULL;
        char *big = malloc(16 * 1024 + 1);
        char *buf = NULL;
        size_t len;

        memset(big, 'a', 16 * 1024);
        big[16 * 1024] = '\0';
        for (int i = 0; i < 25; i++)
                json_array_append_new(json_object_get(h, "transcript"),
                                      json_pack("{s:s, s:s}", "role", "user", "text", big));
        ck_assert_int_eq(hd_bootstrap_build(h, NOW, &b), 0);
        ck_assert_str_eq(json_string_value(json_object_get(b, "resume_context")), CTX_HEAD "> Big.");
        ck_assert_int_eq(hd_canon_dump(b, NULL, &buf, &len), 0);
        ck_assert_uint_le(len, HD_DEFAULT_MAX_SIZE);
        free(buf);
        free(big);
        json_decref(b);
        json_decref(h);
}
END_TEST

/* The bytes bootstrap_build_canon() hands the daemon are the canonical
 * bytes of the bootstrap it returns, and that bootstrap is
 * hd_bootstrap_build_shown()'s, whichever of the size steps ran last:
 * fits at once, turns dropped, transcript and payload dropped,
 * resume_context cut, the handoff itself dropped. */
START_TEST(test_bootstrap_canon_bytes_are_its_own)
{
        static const size_t caps[] = { HD_DEFAULT_MAX_SIZE, 300 * 1024, 64 * 1024, 20 * 1024,
                                       6 * 1024, 1024, 200 };
        json_t *h = handoff("context_summary", "Sized.", 0);
        char *big = malloc(8 * 1024 + 1);

        memset(big, 'b', 8 * 1024);
        big[8 * 1024] = '\0';
        for (int i = 0; i < 25; i++)
                json_array_append_new(json_object_get(h, "transcript"),
                                      json_pack("{s:s, s:s}", "role", "user", "text", big));
        json_object_set_new(h, "context_summary", json_string(big));
        for (size_t i = 0; i < ELEMENTSOF(caps); i++) {
                json_t *b = NULL, *want = NULL;
                char *buf = NULL, *dump = NULL;
                size_t len = 0, dlen = 0;

                ck_assert_int_eq(bootstrap_build_canon(h, NULL, NOW, caps[i], &b, &buf, &len), 0);
                ck_assert_int_eq(hd_bootstrap_build_shown(h, NULL, NOW, caps[i], &want), 0);
                ck_assert_msg(json_equal(b, want), "cap %zu: not hd_bootstrap_build_shown()'s",
                              caps[i]);
                ck_assert_int_eq(hd_canon_dump(b, NULL, &dump, &dlen), 0);
                ck_assert_msg(len == dlen && !memcmp(buf, dump, len),
                              "cap %zu: %zu bytes given, the bootstrap's are %zu", caps[i], len,
                              dlen);
                if (caps[i] >= 6 * 1024)
                        ck_assert_uint_le(len, caps[i]);
                free(buf);
                free(dump);
                json_decref(b);
                json_decref(want);
        }
        free(big);
        json_decref(h);
}
END_TEST

Suite *suite_whitespace(void);
Suite *suite_whitespace(void)
{
        Suite *s = suite_create("whitespace");
        TCase *tc = tcase_create("summary");
        tcase_add_test(tc, test_whitespace_table_is_pythons);
        tcase_add_test(tc, test_whitespace_summary_is_absent);
        tcase_add_test(tc, test_whitespace_near_misses_are_text);
        tcase_add_test(tc, test_summary_then_last_turns);
        tcase_add_test(tc, test_summary_turns_dropped_past_size_cap);
        tcase_add_test(tc, test_bootstrap_canon_bytes_are_its_own);
        suite_add_tcase(s, tc);
        return s;
}
