/* canon_src: the canonical bytes taken from the bytes a document was
 * parsed from.  What it takes must be, byte for byte, what the writer
 * (canon.c, checked against Python's json.dumps in test_canon.c) makes of
 * the document; what it is not sure of it leaves to the writer. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canon_src.h"
#include "handoff.h"
#include "testutil.h"

/* What canon_src_parse() takes from text, joined, without skip: NULL
 * when it takes nothing (the writer's then). */
static char *src_bytes(const char *text, const char *skip, json_t **ret_doc)
{
        struct canon_src src;
        const char *piece[2];
        size_t n[2];
        hd_verdict v;
        char *out;

        ck_assert_int_eq(canon_src_parse(text, strlen(text), NULL, ret_doc, &src, &v), 0);
        if (!canon_src_pieces(&src, skip, piece, n))
                return NULL;
        out = malloc(n[0] + n[1] + 1);
        ck_assert_ptr_nonnull(out);
        memcpy(out, piece[0], n[0]);
        if (n[1])
                memcpy(out + n[0], piece[1], n[1]);
        out[n[0] + n[1]] = '\0';
        return out;
}

/* Whatever canon_src takes from text is, byte for byte, what the writer
 * makes of the document without skip.  *ret_taken: it took something. */
static void assert_src_is_canon(const char *text, const char *skip, bool *ret_taken)
{
        json_t *doc = NULL;
        char *got = src_bytes(text, skip, &doc), *want = NULL;
        size_t len;

        ck_assert_int_eq(hd_canon_dump(doc, skip, &want, &len), 0);
        ck_assert_msg(!got || !strcmp(got, want), "%.200s without %s: taken %.200s, written %.200s",
                      text, skip ? skip : "-", got, want);
        if (ret_taken)
                *ret_taken = got != NULL;
        free(got);
        free(want);
        json_decref(doc);
}

/* The MAC's bytes from the source: the member cut with its comma
 * wherever it stands; anything the writer would spell otherwise is
 * left to the writer. */
START_TEST(test_canon_src_cuts_hmac_or_leaves_it)
{
        static const char *const taken[] = {
                "{\"a\":1,\"hmac\":\"x\",\"z\":[true,false,null,-5,\"\\u00e9\\n\"]}",
                "{\"hmac\":\"x\",\"z\":{\"b\":{},\"c\":[]}}",
                "{\"a\":\"\\ud83d\\ude00\\u007f\\u001f\",\"hmac\":\"x\"}",
                "{\"hmac\":\"x\"}",
                "{\"a\":0,\"sig\":\"x\"}\n",
        };
        static const char *const left[] = {
                "{\"a\": 1,\"hmac\":\"x\"}",             /* a space */
                "{\"hmac\":\"x\",\"a\":1}",              /* key order */
                "{\"a\":\"\\u00E9\",\"hmac\":\"x\"}",     /* upper-case hex */
                "{\"a\":\"\\u0041\",\"hmac\":\"x\"}",     /* printable escaped */
                "{\"a\":\"\\/\",\"hmac\":\"x\"}",         /* \/ */
                "{\"a\":\"\\u000a\",\"hmac\":\"x\"}",     /* \n spelt long */
                "{\"a\":1.0,\"hmac\":\"x\"}",            /* a real */
                "{\"a\":-0,\"hmac\":\"x\"}",             /* -0 */
                "{\"a\":\"\xc3\xa9\",\"hmac\":\"x\"}",    /* raw UTF-8 */
                "{\"\\u0061\":1,\"hmac\":\"x\"}",           /* an escaped key */
        };
        bool t;

        for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
                assert_src_is_canon(taken[i], "hmac", &t);
                ck_assert_msg(t, "not taken: %s", taken[i]);
                assert_src_is_canon(taken[i], "sig", &t);
                assert_src_is_canon(taken[i], NULL, &t);
        }
        for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
                assert_src_is_canon(left[i], "hmac", &t);
                ck_assert_msg(!t, "taken: %s", left[i]);
        }
}
END_TEST

/* The test vectors as the Python reference wrote them: each taken as it
 * is (but the one of reals) and its bytes the writer's. */
START_TEST(test_canon_src_vectors_taken)
{
        static const char *const dirs[] = { "valid", "invalid", "sig" };
        int taken = 0, seen = 0;

        for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
                char *path, *cmd, *names = NULL, *name, *save = NULL;
                ck_assert_int_ge(asprintf(&path, "%s/tests/vectors/%s", tu_src_dir(), dirs[d]), 0);
                ck_assert_int_ge(asprintf(&cmd, "ls %s", path), 0);
                char *argv[] = { "sh", "-c", cmd, NULL };
                ck_assert_int_eq(tu_run(argv, &names), 0);
                for (name = strtok_r(names, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
                        char *f, *text;
                        json_t *doc = NULL;
                        hd_verdict v;
                        bool t;

                        if (!strstr(name, ".json"))
                                continue;
                        ck_assert_int_ge(asprintf(&f, "%s/%s", path, name), 0);
                        text = tu_read_file(f, NULL);
                        ck_assert_ptr_nonnull(text);
                        if (hd_parse(text, strlen(text), NULL, &doc, &v) == 0 && json_is_object(doc)) {
                                seen++;
                                assert_src_is_canon(text, "hmac", &t);
                                assert_src_is_canon(text, "sig", NULL);
                                taken += t;
                        }
                        json_decref(doc);
                        free(text);
                        free(f);
                }
                free(names);
                free(cmd);
                free(path);
        }
        printf("canon_src: %d of %d vector documents taken as they are\n", taken, seen);
        ck_assert_int_ge(taken, seen / 2);
}
END_TEST

/* gen_docs.py's documents in both spellings, the writer's and another
 * (key order, whitespace, escapes, float spellings). */
START_TEST(test_canon_src_random_docs)
{
        char *script, *out = NULL, *p;
        char *argv[] = { "python3", "-B", NULL, "--seed", "7", "--count", "10000", NULL };
        long n = 0, taken = 0;

        ck_assert_int_ge(asprintf(&script, "%s/tests/py/gen_docs.py", tu_src_dir()), 0);
        argv[2] = script;
        ck_assert_int_eq(tu_run(argv, &out), 0);
        /* two lines a document: another spelling, then the writer's */
        for (p = out; p && *p; n++) {
                char *in = strsep(&p, "\n"), *want = strsep(&p, "\n");
                bool t;

                ck_assert_msg(want && p, "document %ld: not two whole lines", n);
                if (in[0] != '{')
                        continue;
                assert_src_is_canon(in, NULL, NULL);
                assert_src_is_canon(want, NULL, &t);
                taken += t;
        }
        printf("canon_src: %ld of %ld canonical documents taken as they are\n", taken, n);
        ck_assert_int_gt(taken, 0);
        free(out);
        free(script);
}
END_TEST

Suite *suite_canon_src(void);
Suite *suite_canon_src(void)
{
        Suite *s = suite_create("canon_src");
        TCase *tc = tcase_create("core");

        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_canon_src_cuts_hmac_or_leaves_it);
        tcase_add_test(tc, test_canon_src_vectors_taken);
        tcase_add_test(tc, test_canon_src_random_docs);
        suite_add_tcase(s, tc);
        return s;
}
