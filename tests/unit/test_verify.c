/* Verification, the part that needs no second implementation: the name
 * rules, each reason that validation and freshness can give, and a
 * detail that quotes untrusted strings safely.  The MAC, keys, documents
 * signed by python3 and the committed vectors: test_verify_mac.c. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "testutil.h"
#include "util.h"

#define USEC INT64_C(1000000)

/* "2026-04-21T10:15:00Z" */
#define T0 INT64_C(1776766500000000)

/* Sign (so the MAC is never the reason) and verify at now. */
static hd_reason verify_signed(json_t *d, int64_t now, const hd_policy *p, hd_verdict *v)
{
        hd_key *k = tu_hmac_key();
        struct tu_lookup_log l = { .key = k };
        int r;

        ck_assert_int_eq(hd_sign(d, k), 0);
        r = hd_verify(d, tu_lookup_log_cb, &l, p, NULL, now, v);
        hd_key_free(k);
        if (r == 0)
                ck_assert_int_eq(v->reason, HD_OK);
        else
                ck_assert_int_eq(r, -EBADMSG);
        return v->reason;
}

/* The detail is one printable line: no control bytes, bounded. */
static void assert_clean_detail(const hd_verdict *v)
{
        size_t n = strnlen(v->detail, sizeof(v->detail));

        ck_assert_uint_lt(n, sizeof(v->detail));
        for (size_t i = 0; i < n; i++)
                ck_assert_msg((unsigned char)v->detail[i] >= 0x20 &&
                              (unsigned char)v->detail[i] < 0x7f,
                              "byte %zu of detail '%s'", i, v->detail);
}

static void expect(json_t *d, hd_reason want, const char *detail_part)
{
        hd_verdict v;
        hd_reason got = verify_signed(d, T0 + 60 * USEC, NULL, &v);

        ck_assert_msg(got == want, "got %s (%s), want %s", hd_reason_name(got),
                      v.detail, hd_reason_name(want));
        if (detail_part)
                ck_assert_msg(strstr(v.detail, detail_part), "detail '%s' lacks '%s'",
                              v.detail, detail_part);
        assert_clean_detail(&v);
        json_decref(d);
}

static json_t *with(const char *field, json_t *val)
{
        json_t *d = tu_hmac_doc();

        if (val)
                ck_assert_int_eq(json_object_set_new(d, field, val), 0);
        else
                ck_assert_int_eq(json_object_del(d, field), 0);
        return d;
}

/* ---- names ---------------------------------------------------------- */

START_TEST(test_id_valid_table)
{
        char s[200];

        ck_assert(hd_id_valid("a"));
        ck_assert(hd_id_valid("1776766500-alice-bob-60418ef2dee2547a"));
        ck_assert(hd_id_valid("A_b-C"));
        ck_assert(!hd_id_valid(""));
        ck_assert(!hd_id_valid(NULL));
        ck_assert(!hd_id_valid("-a"));
        ck_assert(!hd_id_valid("_a"));
        ck_assert(!hd_id_valid("a.b"));
        ck_assert(!hd_id_valid("a/b"));
        ck_assert(!hd_id_valid("a b"));
        ck_assert(!hd_id_valid("caf\xc3\xa9"));
        memset(s, 'a', 128);
        s[128] = '\0';
        ck_assert(hd_id_valid(s));
        s[128] = 'a';
        s[129] = '\0';
        ck_assert(!hd_id_valid(s));
}
END_TEST

START_TEST(test_agent_valid_table)
{
        char s[100];

        ck_assert(hd_agent_valid("bob"));
        ck_assert(hd_agent_valid("0"));
        ck_assert(hd_agent_valid("agent_1-x"));
        ck_assert(!hd_agent_valid("Bob"));
        ck_assert(!hd_agent_valid(""));
        ck_assert(!hd_agent_valid(NULL));
        ck_assert(!hd_agent_valid("-bob"));
        ck_assert(!hd_agent_valid("_bob"));
        ck_assert(!hd_agent_valid("bob.x"));
        ck_assert(!hd_agent_valid("bob/.."));
        memset(s, 'b', 64);
        s[64] = '\0';
        ck_assert(hd_agent_valid(s));
        s[64] = 'b';
        s[65] = '\0';
        ck_assert(!hd_agent_valid(s));
}
END_TEST

START_TEST(test_name_safe_table)
{
        char s[300];

        ck_assert(hd_name_safe("x.json"));
        ck_assert(hd_name_safe("1776766500-alice-bob-id.json"));
        ck_assert(hd_name_safe("caf\xc3\xa9.json"));
        ck_assert(!hd_name_safe(NULL));
        ck_assert(!hd_name_safe(""));
        ck_assert(!hd_name_safe("."));
        ck_assert(!hd_name_safe(".."));
        ck_assert(!hd_name_safe(".x.json.tmp"));
        ck_assert(!hd_name_safe("a/b"));
        ck_assert(!hd_name_safe("../x"));
        ck_assert(!hd_name_safe("a\nb"));
        ck_assert(!hd_name_safe("a\tb"));
        ck_assert(!hd_name_safe("a\x7f"));
        memset(s, 'n', 255);
        s[255] = '\0';
        ck_assert(hd_name_safe(s));
        s[255] = 'n';
        s[256] = '\0';
        ck_assert(!hd_name_safe(s));
}
END_TEST

/* ---- fields --------------------------------------------------------- */

START_TEST(test_verify_valid_doc)
{
        json_t *d = tu_hmac_doc();
        hd_verdict v;

        ck_assert_int_eq(verify_signed(d, T0 + 60 * USEC, NULL, &v), HD_OK);
        ck_assert_str_eq(v.detail, "");
        json_decref(d);
        /* Optional fields may all be absent; extra fields are allowed. */
        d = tu_hmac_doc();
        json_object_del(d, "reason");
        json_object_del(d, "caller_hash");
        json_object_del(d, "transcript");
        json_object_set_new(d, "x_extra", json_pack("{s:[i,f,n]}", "a", 1, 0.5));
        expect(d, HD_OK, NULL);
}
END_TEST

START_TEST(test_reject_bad_version)
{
        expect(with("protocol_version", json_integer(2)), HD_R_BAD_VERSION, "protocol_version");
        expect(with("protocol_version", json_integer(0)), HD_R_BAD_VERSION, NULL);
        expect(with("protocol_version", json_real(1.0)), HD_R_BAD_VERSION, NULL);
        expect(with("protocol_version", json_string("1")), HD_R_BAD_VERSION, NULL);
        expect(with("protocol_version", json_true()), HD_R_BAD_VERSION, NULL);
        expect(with("protocol_version", json_null()), HD_R_BAD_VERSION, NULL);
}
END_TEST

START_TEST(test_reject_missing_field)
{
        static const char *const fields[] = {
                "protocol_version", "handoff_id", "from_agent", "to_agent",
                "initiated_at", "expires_at",
        };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                expect(with(fields[i], NULL), HD_R_MISSING_FIELD, fields[i]);
}
END_TEST

START_TEST(test_reject_missing_hmac)
{
        hd_key *k = tu_hmac_key();
        json_t *d = tu_hmac_doc();
        hd_verdict v;

        ck_assert_int_eq(hd_mac_check(d, k, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_MISSING_FIELD);
        ck_assert_ptr_nonnull(strstr(v.detail, "hmac"));
        json_decref(d);
        hd_key_free(k);
}
END_TEST

START_TEST(test_reject_bad_type)
{
        expect(with("handoff_id", json_integer(7)), HD_R_BAD_TYPE, "handoff_id");
        expect(with("from_agent", json_null()), HD_R_BAD_TYPE, "from_agent");
        expect(with("to_agent", json_pack("[s]", "bob")), HD_R_BAD_TYPE, "to_agent");
        expect(with("initiated_at", json_integer(1776766500)), HD_R_BAD_TYPE, "initiated_at");
        expect(with("expires_at", json_real(1.5)), HD_R_BAD_TYPE, "expires_at");
        expect(with("reason", json_integer(5)), HD_R_BAD_TYPE, "reason");
        expect(with("reason", json_null()), HD_R_BAD_TYPE, "reason");
        expect(with("kid", json_integer(5)), HD_R_BAD_TYPE, "kid");
        expect(with("caller_hash", json_integer(5)), HD_R_BAD_TYPE, "caller_hash");
        expect(with("caller_hash", json_string("602CD7FBBE41688E")), HD_R_BAD_TYPE, "caller_hash");
        expect(with("caller_hash", json_string("602cd7fbbe41688")), HD_R_BAD_TYPE, "caller_hash");
        expect(with("caller_hash", json_string("602cd7fbbe41688e0")), HD_R_BAD_TYPE, "caller_hash");
        expect(with("caller_hash", json_string("602cd7fbbe41688g")), HD_R_BAD_TYPE, "caller_hash");
        expect(with("transcript", json_string("hi")), HD_R_BAD_TYPE, "transcript");
        expect(with("transcript", json_object()), HD_R_BAD_TYPE, "transcript");
        expect(with("transcript", json_pack("[{s:s,s:s},i]", "role", "user", "text", "x", 3)),
               HD_R_BAD_TYPE, "transcript[1]");
        expect(with("transcript", json_pack("[{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s}]",
                                            "role", "user", "text", "a",
                                            "role", "assistant", "text", "b",
                                            "role", "system", "text", "c",
                                            "role", "robot", "text", "d")),
               HD_R_BAD_TYPE, "transcript[3].role");
        expect(with("transcript", json_pack("[{s:s}]", "text", "x")),
               HD_R_BAD_TYPE, "transcript[0].role");
        expect(with("transcript", json_pack("[{s:i,s:s}]", "role", 1, "text", "x")),
               HD_R_BAD_TYPE, "transcript[0].role");
        expect(with("transcript", json_pack("[{s:s}]", "role", "user")),
               HD_R_BAD_TYPE, "transcript[0].text");
        expect(with("transcript", json_pack("[{s:s,s:b}]", "role", "user", "text", 1)),
               HD_R_BAD_TYPE, "transcript[0].text");
        /* Other keys in a transcript entry are allowed; an empty one too. */
        expect(with("transcript", json_pack("[{s:s,s:s,s:i}]", "role", "system", "text", "",
                                            "ts", 5)), HD_OK, NULL);
        expect(with("transcript", json_array()), HD_OK, NULL);
}
END_TEST

START_TEST(test_reject_bad_id)
{
        expect(with("handoff_id", json_string("../../etc/passwd")), HD_R_BAD_ID, "handoff_id");
        expect(with("handoff_id", json_string("")), HD_R_BAD_ID, NULL);
        expect(with("handoff_id", json_string("-rf")), HD_R_BAD_ID, NULL);
        expect(with("handoff_id", json_string("a b")), HD_R_BAD_ID, NULL);
        /* An embedded NUL must not cut the id short into a valid one. */
        expect(with("handoff_id", json_stringn("ok\0/../x", 8)), HD_R_BAD_ID, NULL);
}
END_TEST

START_TEST(test_reject_bad_agent)
{
        expect(with("from_agent", json_string("Alice")), HD_R_BAD_AGENT, "from_agent");
        expect(with("to_agent", json_string("bob/../x")), HD_R_BAD_AGENT, "to_agent");
        expect(with("to_agent", json_string("")), HD_R_BAD_AGENT, "to_agent");
        expect(with("to_agent", json_stringn("bob\0x", 5)), HD_R_BAD_AGENT, "to_agent");
}
END_TEST

START_TEST(test_reject_self_handoff)
{
        expect(with("to_agent", json_string("alice")), HD_R_SELF_HANDOFF, "alice");
}
END_TEST

START_TEST(test_reject_bad_timestamp)
{
        expect(with("initiated_at", json_string("2026-04-21T10:15:00")), HD_R_BAD_TIMESTAMP,
               "initiated_at");
        expect(with("expires_at", json_string("tomorrow")), HD_R_BAD_TIMESTAMP, "expires_at");
        expect(with("expires_at", json_string("2026-02-29T10:15:00Z")), HD_R_BAD_TIMESTAMP, NULL);
        expect(with("expires_at", json_string("2026-04-21T10:15:00Z")), HD_R_BAD_TIMESTAMP,
               "expires_at is not after initiated_at");
        expect(with("expires_at", json_string("2026-04-21T10:14:59.999999Z")),
               HD_R_BAD_TIMESTAMP, NULL);
}
END_TEST

START_TEST(test_detail_quotes_untrusted_strings)
{
        char id[400];
        hd_verdict v;
        json_t *d;

        expect(with("handoff_id", json_string("evil\n\x1b[31mred\"")), HD_R_BAD_ID,
               "\"evil\\x0a\\x1b[31mred\\\"\"");
        memset(id, 'x', sizeof(id) - 1);
        id[0] = '!';
        id[sizeof(id) - 1] = '\0';
        d = with("handoff_id", json_string(id));
        ck_assert_int_eq(verify_signed(d, T0, NULL, &v), HD_R_BAD_ID);
        ck_assert_ptr_nonnull(strstr(v.detail, "..."));
        ck_assert_uint_lt(strlen(v.detail), 120);
        json_decref(d);
        expect(with("to_agent", json_string("b\xc3\xa9")), HD_R_BAD_AGENT, "\"b\\xc3\\xa9\"");
}
END_TEST

/* ---- freshness ------------------------------------------------------ */

static hd_reason fresh_at(int64_t now, const hd_policy *p, hd_verdict *v)
{
        json_t *d = tu_hmac_doc();
        int r = hd_check_fresh(d, p, now, v);

        json_decref(d);
        ck_assert_int_eq(r == 0, v->reason == HD_OK);
        return v->reason;
}

START_TEST(test_fresh_window_edges)
{
        const int64_t exp = T0 + 300 * USEC;
        hd_verdict v;

        ck_assert_int_eq(fresh_at(T0, NULL, &v), HD_OK);
        ck_assert_int_eq(fresh_at(exp, NULL, &v), HD_OK);
        ck_assert_int_eq(fresh_at(exp + 1, NULL, &v), HD_R_EXPIRED);
        ck_assert_ptr_nonnull(strstr(v.detail, "2026-04-21T10:20:00Z"));
        ck_assert_int_eq(fresh_at(T0 - 30 * USEC, NULL, &v), HD_OK);
        ck_assert_int_eq(fresh_at(T0 - 30 * USEC - 1, NULL, &v), HD_R_FUTURE_TIMESTAMP);
        ck_assert_int_eq(fresh_at(T0 - 3600 * USEC, NULL, &v), HD_R_FUTURE_TIMESTAMP);
}
END_TEST

START_TEST(test_fresh_policy)
{
        hd_policy p = { .max_clock_skew_s = 0, .max_window_s = 60 };
        hd_verdict v;

        ck_assert_int_eq(fresh_at(T0 - 1, &p, &v), HD_R_FUTURE_TIMESTAMP);
        ck_assert_int_eq(fresh_at(T0 + 60 * USEC, &p, &v), HD_OK);
        /* Before expires_at but past the window: the producer does not get
         * to choose how long a signed handoff stays good. */
        ck_assert_int_eq(fresh_at(T0 + 60 * USEC + 1, &p, &v), HD_R_EXPIRED);
        p.max_clock_skew_s = 600;
        ck_assert_int_eq(fresh_at(T0 - 600 * USEC, &p, &v), HD_OK);
}
END_TEST

START_TEST(test_fresh_long_ttl_capped_by_window)
{
        json_t *d = with("expires_at", json_string("2026-04-23T10:15:00Z"));
        hd_verdict v;

        ck_assert_int_eq(hd_check_fresh(d, NULL, T0 + 3600 * USEC, &v), 0);
        ck_assert_int_eq(hd_check_fresh(d, NULL, T0 + 3600 * USEC + 1, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_EXPIRED);
        json_decref(d);
        /* The same through hd_verify. */
        d = with("expires_at", json_string("2026-04-23T10:15:00Z"));
        ck_assert_int_eq(verify_signed(d, T0 + 7200 * USEC, NULL, &v), HD_R_EXPIRED);
        json_decref(d);
}
END_TEST

START_TEST(test_fresh_no_usable_time)
{
        hd_verdict v;
        json_t *d = with("initiated_at", NULL);

        ck_assert_int_eq(hd_check_fresh(d, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_TIMESTAMP);
        json_decref(d);
        d = with("expires_at", json_string("2026-04-21T10:20:00"));
        ck_assert_int_eq(hd_check_fresh(d, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_TIMESTAMP);
        json_decref(d);
}
END_TEST

START_TEST(test_verify_expired_and_future)
{
        hd_verdict v;
        json_t *d = tu_hmac_doc();

        ck_assert_int_eq(verify_signed(d, T0 + 301 * USEC, NULL, &v), HD_R_EXPIRED);
        ck_assert_int_eq(verify_signed(d, T0 - 31 * USEC, NULL, &v), HD_R_FUTURE_TIMESTAMP);
        ck_assert_int_eq(verify_signed(d, T0 - 29 * USEC, NULL, &v), HD_OK);
        json_decref(d);
}
END_TEST

Suite *suite_verify(void);
Suite *suite_verify(void)
{
        Suite *s = suite_create("verify");
        TCase *tc;

        tc = tcase_create("names");
        tcase_add_test(tc, test_id_valid_table);
        tcase_add_test(tc, test_agent_valid_table);
        tcase_add_test(tc, test_name_safe_table);
        suite_add_tcase(s, tc);

        tc = tcase_create("fields");
        tcase_add_test(tc, test_verify_valid_doc);
        tcase_add_test(tc, test_reject_bad_version);
        tcase_add_test(tc, test_reject_missing_field);
        tcase_add_test(tc, test_reject_missing_hmac);
        tcase_add_test(tc, test_reject_bad_type);
        tcase_add_test(tc, test_reject_bad_id);
        tcase_add_test(tc, test_reject_bad_agent);
        tcase_add_test(tc, test_reject_self_handoff);
        tcase_add_test(tc, test_reject_bad_timestamp);
        tcase_add_test(tc, test_detail_quotes_untrusted_strings);
        suite_add_tcase(s, tc);

        tc = tcase_create("fresh");
        tcase_add_test(tc, test_fresh_window_edges);
        tcase_add_test(tc, test_fresh_policy);
        tcase_add_test(tc, test_fresh_long_ttl_capped_by_window);
        tcase_add_test(tc, test_fresh_no_usable_time);
        tcase_add_test(tc, test_verify_expired_and_future);
        suite_add_tcase(s, tc);
        return s;
}
