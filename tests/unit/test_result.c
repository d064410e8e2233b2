/* Results (hd_result_build(), hd_result_check(), hd_complete()): the
 * document an agent writes of what came of a handoff it consumed, the
 * rules the daemon checks it by, and the file hd_complete() leaves for
 * the daemon in the agent's handoffs/. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "testutil.h"

#define ID "1700000000-bob-alice-00ff"

static hd_key *hmac_key(char c)
{
        unsigned char b[32];
        hd_key *k = NULL;

        memset(b, c, sizeof(b));
        ck_assert_int_eq(hd_key_from_bytes(b, sizeof(b), &k), 0);
        return k;
}

static const hd_key *one_key(void *k, const char *kid, const char *from)
{
        (void)kid, (void)from;
        return k;
}

/* The verdict of checking doc with k: its reason, HD_OK when it passes. */
static hd_reason check_with(const json_t *doc, const hd_key *k)
{
        hd_verdict v;
        int r = hd_result_check(doc, ID, "alice", one_key, (void *)k, &v);

        ck_assert(r == 0 || r == -EBADMSG);
        return r == 0 ? HD_OK : v.reason;
}

START_TEST(test_result_round_trip_and_tamper)
{
        hd_key *k = hmac_key('k'), *other = hmac_key('o');
        json_t *data = json_pack("{s:[i, s], s:n}", "files", 1, "two", "none");
        hd_result res = { .text = "all green", .data = data };
        json_t *doc = NULL;
        hd_verdict v;

        ck_assert_int_eq(hd_result_build(ID, "alice", &res, k, 1700000000000000LL, &doc, &v), 0);
        ck_assert_str_eq(json_string_value(json_object_get(doc, "type")), "handoff-result");
        ck_assert_str_eq(json_string_value(json_object_get(doc, "status")), "completed");
        ck_assert_str_eq(json_string_value(json_object_get(doc, "completed_at")), "2023-11-14T22:13:20Z");
        ck_assert(json_equal(json_object_get(doc, "data"), data));
        ck_assert_ptr_null(json_object_get(doc, "reason"));
        ck_assert_int_eq(check_with(doc, k), HD_OK);
        ck_assert_int_eq(check_with(doc, other), HD_R_BAD_MAC);
        /* the words are covered by the MAC */
        json_object_set_new(doc, "text", json_string("all red"));
        ck_assert_int_eq(check_with(doc, k), HD_R_BAD_MAC);
        /* the result of one id under another's name, or another agent's */
        ck_assert_int_eq(hd_result_check(doc, "other-id", NULL, NULL, NULL, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_ID);
        ck_assert_int_eq(hd_result_check(doc, ID, "carol", NULL, NULL, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_AGENT);
        json_decref(doc);
        json_decref(data);
        hd_key_free(k);
        hd_key_free(other);
}
END_TEST

START_TEST(test_result_failed_needs_its_reason)
{
        hd_key *k = hmac_key('k');
        hd_result res = { .failed = "the database is down", .text = "3 of 5" };
        char longer[HD_RESULT_REASON_MAX + 2];
        json_t *doc = NULL;
        hd_verdict v;

        ck_assert_int_eq(hd_result_build(ID, "alice", &res, k, hd_now_usec(), &doc, &v), 0);
        ck_assert_str_eq(json_string_value(json_object_get(doc, "status")), "failed");
        ck_assert_str_eq(json_string_value(json_object_get(doc, "reason")), "the database is down");
        ck_assert_int_eq(check_with(doc, k), HD_OK);
        /* a reason without the failure, a failure without a reason */
        json_object_set_new(doc, "status", json_string("completed"));
        hd_sign(doc, k);
        ck_assert_int_eq(check_with(doc, k), HD_R_BAD_TYPE);
        json_object_set_new(doc, "status", json_string("failed"));
        json_object_del(doc, "reason");
        hd_sign(doc, k);
        ck_assert_int_eq(check_with(doc, k), HD_R_MISSING_FIELD);
        json_decref(doc);
        doc = NULL;
        res.failed = "  ";
        ck_assert_int_eq(hd_result_build(ID, "alice", &res, k, hd_now_usec(), &doc, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_MISSING_FIELD);
        memset(longer, 'r', sizeof(longer) - 1);
        longer[sizeof(longer) - 1] = '\0';
        res.failed = longer;
        ck_assert_int_eq(hd_result_build(ID, "alice", &res, k, hd_now_usec(), &doc, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_TOO_LARGE);
        ck_assert_ptr_null(doc);
        hd_key_free(k);
}
END_TEST

START_TEST(test_result_input_required_asks_its_question)
{
        hd_key *k = hmac_key('k');
        hd_result res = { .input_required = "for how many people?" };
        json_t *doc = NULL;
        hd_verdict v;

        ck_assert_int_eq(hd_result_build(ID, "alice", &res, k, hd_now_usec(), &doc, &v), 0);
        ck_assert_str_eq(json_string_value(json_object_get(doc, "status")), "input_required");
        ck_assert_str_eq(json_string_value(json_object_get(doc, "text")), "for how many people?");
        ck_assert_int_eq(check_with(doc, k), HD_OK);
        /* the question is the text: without one there is nothing asked */
        json_object_del(doc, "text");
        ck_assert_int_eq(hd_result_check(doc, ID, "alice", NULL, NULL, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_MISSING_FIELD);
        json_object_set_new(doc, "text", json_string("  "));
        ck_assert_int_eq(hd_result_check(doc, ID, "alice", NULL, NULL, &v), -EBADMSG);
        /* a reason belongs to a failure */
        json_object_set_new(doc, "text", json_string("which day?"));
        json_object_set_new(doc, "reason", json_string("no"));
        ck_assert_int_eq(hd_result_check(doc, ID, "alice", NULL, NULL, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_TYPE);
        json_decref(doc);
        doc = NULL;
        /* a question with a text of its own, or with a failure: refused */
        res.text = "half done";
        ck_assert_int_eq(hd_result_build(ID, "alice", &res, k, hd_now_usec(), &doc, &v), -EBADMSG);
        res.text = NULL;
        res.failed = "down";
        ck_assert_int_eq(hd_result_build(ID, "alice", &res, k, hd_now_usec(), &doc, &v), -EBADMSG);
        ck_assert_ptr_null(doc);
        hd_key_free(k);
}
END_TEST

START_TEST(test_result_refuses_what_it_does_not_know)
{
        hd_key *k = hmac_key('k');
        hd_result res = { 0 };
        json_t *doc = NULL;
        hd_verdict v;

        ck_assert_int_eq(hd_result_build(ID, "alice", &res, k, hd_now_usec(), &doc, &v), 0);
        json_object_set_new(doc, "extra", json_true());
        hd_sign(doc, k);
        ck_assert_int_eq(check_with(doc, k), HD_R_BAD_TYPE);
        json_object_del(doc, "extra");
        json_object_set_new(doc, "status", json_string("done"));
        hd_sign(doc, k);
        ck_assert_int_eq(check_with(doc, k), HD_R_BAD_TYPE);
        json_object_set_new(doc, "status", json_string("completed"));
        json_object_set_new(doc, "text", json_integer(5));
        hd_sign(doc, k);
        ck_assert_int_eq(check_with(doc, k), HD_R_BAD_TYPE);
        json_object_del(doc, "text");
        json_object_set_new(doc, "protocol_version", json_integer(2));
        hd_sign(doc, k);
        ck_assert_int_eq(check_with(doc, k), HD_R_BAD_VERSION);
        json_decref(doc);
        /* not an id, not an agent */
        ck_assert_int_eq(hd_result_build("../x", "alice", &res, k, 0, &doc, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_ID);
        ck_assert_int_eq(hd_result_build(ID, "Alice", &res, k, 0, &doc, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_AGENT);
        hd_key_free(k);
}
END_TEST

START_TEST(test_result_bounded)
{
        hd_key *k = hmac_key('k');
        size_t n = HD_RESULT_MAX_SIZE;
        char *text = malloc(n + 1);
        hd_result res = { .text = text };
        json_t *doc = NULL;
        hd_verdict v;

        ck_assert_ptr_nonnull(text);
        memset(text, 't', n);
        text[n] = '\0';
        ck_assert_int_eq(hd_result_build(ID, "alice", &res, k, hd_now_usec(), &doc, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_TOO_LARGE);
        ck_assert_ptr_null(doc);
        /* what fits with its signature is taken */
        text[n - 400] = '\0';
        ck_assert_int_eq(hd_result_build(ID, "alice", &res, k, hd_now_usec(), &doc, &v), 0);
        json_decref(doc);
        free(text);
        hd_key_free(k);
}
END_TEST

START_TEST(test_result_signed_with_ed25519)
{
        hd_key *sk = NULL, *pk = NULL;
        char line[HD_KEY_LINE_MAX], err[128];
        hd_result res = { .text = "signed" };
        json_t *doc = NULL;
        hd_verdict v;

        ck_assert_int_eq(hd_key_generate(NULL, &sk), 0);
        ck_assert_int_eq(hd_key_format(sk, false, line, sizeof(line)), 0);
        ck_assert_int_eq(hd_key_parse(line, strlen(line), &pk, err, sizeof(err)), 0);
        ck_assert_int_eq(hd_result_build(ID, "alice", &res, sk, hd_now_usec(), &doc, &v), 0);
        ck_assert_str_eq(json_string_value(json_object_get(doc, "kid")), hd_key_kid(sk));
        ck_assert_ptr_nonnull(json_object_get(doc, "sig"));
        ck_assert_int_eq(check_with(doc, pk), HD_OK);
        json_object_set_new(doc, "text", json_string("forged"));
        ck_assert_int_eq(check_with(doc, pk), HD_R_BAD_SIGNATURE);
        json_decref(doc);
        hd_key_free(sk);
        hd_key_free(pk);
}
END_TEST

START_TEST(test_complete_writes_the_named_file)
{
        char *dir = tu_tmpdir(), name[NAME_MAX + 1], path[PATH_MAX];
        hd_key *k = hmac_key('k');
        hd_result res = { .text = "first" };
        hd_limits lim = { 0 };
        json_t *doc = NULL;
        struct stat st;
        hd_verdict v;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(dfd, 0);
        ck_assert_int_eq(hd_result_name(ID, name, sizeof(name)), 0);
        ck_assert_str_eq(name, ".result." ID);
        ck_assert_int_eq(hd_result_name("a/b", name, sizeof(name)), -EINVAL);
        ck_assert_int_eq(hd_result_name(ID, name, sizeof(name)), 0);
        ck_assert_int_eq(hd_complete(dfd, ID, "alice", &res, k, hd_now_usec(), false, &v), 0);
        /* one not taken yet is replaced */
        res.text = "second";
        ck_assert_int_eq(hd_complete(dfd, ID, "alice", &res, k, hd_now_usec(), false, &v), 0);
        ck_assert_int_eq(fstatat(dfd, name, &st, 0), 0);
        /* the daemon reads it as others; its directory keeps them out */
        ck_assert_int_eq(st.st_mode & 07777, 0644);
        ck_assert_int_eq(hd_load_at(dfd, name, &lim, &doc, &v), 0);
        ck_assert_str_eq(json_string_value(json_object_get(doc, "text")), "second");
        ck_assert_int_eq(check_with(doc, k), HD_OK);
        json_decref(doc);
        /* refused before anything is written */
        ck_assert_int_eq(unlinkat(dfd, name, 0), 0);
        res.failed = "";
        ck_assert_int_eq(hd_complete(dfd, ID, "alice", &res, k, hd_now_usec(), false, &v), -EBADMSG);
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        ck_assert_int_eq(access(path, F_OK), -1);
        close(dfd);
        hd_key_free(k);
        tu_rm_rf(dir);
        free(dir);
}
END_TEST

Suite *suite_result(void);
Suite *suite_result(void)
{
        Suite *s = suite_create("result");
        TCase *tc = tcase_create("result");

        tcase_add_test(tc, test_result_round_trip_and_tamper);
        tcase_add_test(tc, test_result_failed_needs_its_reason);
        tcase_add_test(tc, test_result_input_required_asks_its_question);
        tcase_add_test(tc, test_result_refuses_what_it_does_not_know);
        tcase_add_test(tc, test_result_bounded);
        tcase_add_test(tc, test_result_signed_with_ed25519);
        tcase_add_test(tc, test_complete_writes_the_named_file);
        suite_add_tcase(s, tc);
        return s;
}
