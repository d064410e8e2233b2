/* Verification end to end against an independent signer: documents signed
 * by python3 (tests/py/hdproto.py) verify, every single-field tamper reads
 * as bad_mac, each reason that validation and freshness can give has a
 * test, and the committed vectors in tests/vectors/ give their expected
 * reasons and match what their generator writes today. */
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

static const char test_key[] = "test key for test_verify.c, not a secret";

/* "2026-04-21T10:15:00Z" */
#define T0 INT64_C(1776766500000000)

static hd_key *mkkey(void)
{
        hd_key *k = NULL;

        ck_assert_int_eq(hd_key_from_bytes(test_key, strlen(test_key), &k), 0);
        return k;
}

/* A valid protocol_version 1 document issued at T0 for 5 minutes. */
static json_t *mkdoc(void)
{
        json_t *d = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:[{s:s, s:s}, {s:s, s:s}]}",
                              "protocol_version", 1,
                              "handoff_id", "t-0001",
                              "caller_hash", "602cd7fbbe41688e",
                              "from_agent", "alice",
                              "to_agent", "bob",
                              "reason", "transfer",
                              "initiated_at", "2026-04-21T10:15:00Z",
                              "expires_at", "2026-04-21T10:20:00Z",
                              "transcript",
                              "role", "user", "text", "hello",
                              "role", "assistant", "text", "let me transfer you");
        ck_assert_ptr_nonnull(d);
        return d;
}

struct lookup_log {
        const hd_key *key;
        const char *only_kid;   /* non-NULL: any other kid is unknown */
        int calls;
        char kid[64], from[64];
        bool kid_null, from_null;
        bool asked_kid;         /* the last call named a kid and got a key */
};

static const hd_key *lookup_cb(void *userdata, const char *kid, const char *from)
{
        struct lookup_log *l = userdata;

        l->calls++;
        /* After a key named by kid, hd_auth_check asks again without kid
         * for the sender's own key: not logged over the first call. */
        if (!kid && from && l->asked_kid) {
                l->asked_kid = false;
                return l->key;
        }
        l->kid_null = kid == NULL;
        l->from_null = from == NULL;
        snprintf(l->kid, sizeof(l->kid), "%s", kid ? kid : "");
        snprintf(l->from, sizeof(l->from), "%s", from ? from : "");
        if (kid && l->only_kid && strcmp(kid, l->only_kid) != 0)
                return NULL;
        l->asked_kid = kid != NULL;
        return l->key;
}

static const hd_key *lookup_none(void *userdata, const char *kid, const char *from)
{
        return NULL;
}

/* Sign (so the MAC is never the reason) and verify at now. */
static hd_reason verify_signed(json_t *d, int64_t now, const hd_policy *p, hd_verdict *v)
{
        hd_key *k = mkkey();
        struct lookup_log l = { .key = k };
        int r;

        ck_assert_int_eq(hd_sign(d, k), 0);
        r = hd_verify(d, lookup_cb, &l, p, NULL, now, v);
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
        json_t *d = mkdoc();

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
        json_t *d = mkdoc();
        hd_verdict v;

        ck_assert_int_eq(verify_signed(d, T0 + 60 * USEC, NULL, &v), HD_OK);
        ck_assert_str_eq(v.detail, "");
        json_decref(d);
        /* Optional fields may all be absent; extra fields are allowed. */
        d = mkdoc();
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
        hd_key *k = mkkey();
        json_t *d = mkdoc();
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
        json_t *d = mkdoc();
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
        json_t *d = mkdoc();

        ck_assert_int_eq(verify_signed(d, T0 + 301 * USEC, NULL, &v), HD_R_EXPIRED);
        ck_assert_int_eq(verify_signed(d, T0 - 31 * USEC, NULL, &v), HD_R_FUTURE_TIMESTAMP);
        ck_assert_int_eq(verify_signed(d, T0 - 29 * USEC, NULL, &v), HD_OK);
        json_decref(d);
}
END_TEST

/* ---- MAC and keys --------------------------------------------------- */

START_TEST(test_verify_unknown_key)
{
        hd_key *k = mkkey();
        struct lookup_log l = { .key = k, .only_kid = "k-2026" };
        json_t *d = mkdoc();
        hd_verdict v;

        ck_assert_int_eq(hd_sign(d, k), 0);
        /* No kid: the lookup gets the sender and no kid. */
        ck_assert_int_eq(hd_verify(d, lookup_cb, &l, NULL, NULL, T0, &v), 0);
        ck_assert(l.kid_null);
        ck_assert_str_eq(l.from, "alice");
        ck_assert_int_eq(hd_verify(d, lookup_none, NULL, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_UNKNOWN_KEY);
        ck_assert_ptr_nonnull(strstr(v.detail, "alice"));

        json_object_set_new(d, "kid", json_string("k-2026"));
        ck_assert_int_eq(hd_sign(d, k), 0);
        ck_assert_int_eq(hd_verify(d, lookup_cb, &l, NULL, NULL, T0, &v), 0);
        ck_assert_str_eq(l.kid, "k-2026");
        ck_assert_str_eq(l.from, "alice");

        json_object_set_new(d, "kid", json_string("retired"));
        ck_assert_int_eq(hd_sign(d, k), 0);
        ck_assert_int_eq(hd_verify(d, lookup_cb, &l, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_UNKNOWN_KEY);
        ck_assert_ptr_nonnull(strstr(v.detail, "\"retired\""));

        /* Neither kid nor sender: the lookup is asked for the default. */
        json_object_del(d, "kid");
        json_object_del(d, "from_agent");
        l.only_kid = NULL;
        ck_assert_int_eq(hd_verify(d, lookup_cb, &l, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert(l.kid_null && l.from_null);
        json_decref(d);
        hd_key_free(k);
}
END_TEST

START_TEST(test_verify_mac_before_fields)
{
        hd_key *k = mkkey(), *other = NULL;
        struct lookup_log l = { .key = k };
        json_t *d = with("handoff_id", json_string("../x"));
        hd_verdict v;

        ck_assert_int_eq(hd_key_from_bytes("another key that is at least 32 bytes long", 42,
                                           &other), 0);
        ck_assert_int_eq(hd_sign(d, other), 0);
        ck_assert_int_eq(hd_verify(d, lookup_cb, &l, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_MAC);
        json_decref(d);
        hd_key_free(other);
        hd_key_free(k);
}
END_TEST

START_TEST(test_mac_format_strict)
{
        static const char *const bad[] = {
                "", "AAAA",
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",     /* 43 */
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",   /* 45 */
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",    /* 44, 33 bytes */
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB==",    /* 31 bytes */
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=",    /* stray low bits */
                "-_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",    /* url-safe */
                " AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n",
        };
        hd_key *k = mkkey();
        json_t *d = mkdoc();
        hd_verdict v;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_object_set_new(d, "hmac", json_string(bad[i]));
                ck_assert_int_eq(hd_mac_check(d, k, &v), -EBADMSG);
                ck_assert_msg(v.reason == HD_R_BAD_MAC_FORMAT, "'%s' gave %s", bad[i],
                              hd_reason_name(v.reason));
        }
        json_object_set_new(d, "hmac", json_integer(1));
        ck_assert_int_eq(hd_mac_check(d, k, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_MAC_FORMAT);
        /* Well-formed but wrong. */
        json_object_set_new(d, "hmac", json_string("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="));
        ck_assert_int_eq(hd_mac_check(d, k, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_MAC);
        ck_assert_int_eq(hd_sign(d, k), 0);
        ck_assert_int_eq(hd_mac_check(d, k, &v), 0);
        ck_assert_int_eq(v.reason, HD_OK);
        json_decref(d);
        hd_key_free(k);
}
END_TEST

START_TEST(test_mac_long_key_any_length)
{
        /* Keys longer than the SHA-256 block are hashed first, as Python's
         * hmac does; the MAC must still match python3's. */
        char keyhex[201];
        hd_key *k = NULL;
        char mac[HD_MAC_B64_LEN + 1];
        json_t *d = mkdoc();
        char *canon = NULL, *prog = NULL, *out = NULL;
        size_t clen;

        memset(keyhex, 'q', 200);
        keyhex[200] = '\0';
        ck_assert_int_eq(hd_key_from_bytes(keyhex, 200, &k), 0);
        ck_assert_int_eq(hd_mac_compute(d, k, mac), 0);
        ck_assert_uint_eq(strlen(mac), HD_MAC_B64_LEN);
        ck_assert_int_eq(hd_canon_dump(d, "hmac", &canon, &clen), 0);
        ck_assert_int_ge(asprintf(&prog,
                "import hmac, hashlib, base64, sys\n"
                "print(base64.b64encode(hmac.new(b'q' * 200, sys.argv[1].encode(),"
                " hashlib.sha256).digest()).decode(), end='')\n"), 0);
        char *const argv[] = { "python3", "-B", "-c", prog, canon, NULL };
        ck_assert_int_eq(tu_run(argv, &out), 0);
        ck_assert_str_eq(out, mac);
        free(out);
        free(prog);
        free(canon);
        json_decref(d);
        hd_key_free(k);
}
END_TEST

/* ---- against python3 ------------------------------------------------ */

static char *py_path(const char *rel)
{
        return tu_path(tu_src_dir(), rel);
}

/* Write a hex key file as `handoffctl keygen` does, 0600, and load it the
 * way the daemon will. */
static hd_key *write_and_load_key(const char *dir, char **ret_path)
{
        static const char hexkey[] =
                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n";
        char *p, err[256];
        hd_key *k = NULL;

        ck_assert_int_ge(asprintf(&p, "%s/handoff.key", dir), 0);
        tu_write_file(p, hexkey, strlen(hexkey));
        ck_assert_msg(hd_key_load(p, &k, err, sizeof(err)) == 0, "%s", err);
        *ret_path = p;
        return k;
}

static json_t *load_doc(const char *dir, const char *name, hd_verdict *v)
{
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        json_t *doc = NULL;

        ck_assert_int_ge(dfd, 0);
        ck_assert_msg(hd_load_at(dfd, name, NULL, &doc, v) == 0, "%s: %s", name, v->detail);
        return doc;
}

START_TEST(test_python_signed_verifies)
{
        char *d = tu_tmpdir(), *keyp, *out = NULL, *docp;
        char *cli = py_path("tests/py/sign_cli.py");
        hd_key *k = write_and_load_key(d, &keyp);
        struct lookup_log l = { .key = k };
        hd_verdict v;

        ck_assert_int_ge(asprintf(&docp, "%s/doc.json", d), 0);
        char *const argv[] = { "python3", "-B", cli, "sign", keyp, docp,
                               "--extra", "{\"x_float\": 0.1, \"x_uni\": \"\\u00e9\\ud83d\\ude00\\u007f\","
                               " \"x_big\": 1e300, \"kid\": \"k1\"}", NULL };
        ck_assert_msg(tu_run(argv, &out) == 0, "%s", out);
        free(out);
        json_t *doc = load_doc(d, "doc.json", &v);
        ck_assert_int_eq(hd_verify(doc, lookup_cb, &l, NULL, NULL, hd_now_usec(), &v), 0);
        ck_assert_int_eq(v.reason, HD_OK);
        ck_assert_str_eq(l.kid, "k1");
        json_decref(doc);
        hd_key_free(k);
        free(docp);
        free(keyp);
        free(cli);
        free(d);
}
END_TEST

START_TEST(test_every_single_field_tamper_is_bad_mac)
{
        char *d = tu_tmpdir(), *keyp, *out = NULL, *docp, *tdir, *line, *save = NULL;
        char *cli = py_path("tests/py/sign_cli.py");
        hd_key *k = write_and_load_key(d, &keyp);
        struct lookup_log l = { .key = k };
        hd_verdict v;
        int n = 0;

        ck_assert_int_ge(asprintf(&docp, "%s/doc.json", d), 0);
        ck_assert_int_ge(asprintf(&tdir, "%s/t", d), 0);
        char *const sign[] = { "python3", "-B", cli, "sign", keyp, docp,
                               "--extra", "{\"kid\": \"k1\", \"x_n\": 1.5, \"x_obj\": {\"a\": 1}, "
                               "\"x_flag\": true, \"x_null\": null}", NULL };
        ck_assert_msg(tu_run(sign, &out) == 0, "%s", out);
        free(out);
        json_t *doc = load_doc(d, "doc.json", &v);
        ck_assert_int_eq(hd_verify(doc, lookup_cb, &l, NULL, NULL, hd_now_usec(), &v), 0);
        json_decref(doc);

        char *const tamper[] = { "python3", "-B", cli, "tamper", docp, tdir, NULL };
        ck_assert_msg(tu_run(tamper, &out) == 0, "%s", out);
        for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                doc = load_doc(tdir, line, &v);
                ck_assert_int_eq(hd_verify(doc, lookup_cb, &l, NULL, NULL, hd_now_usec(), &v),
                                 -EBADMSG);
                ck_assert_msg(v.reason == HD_R_BAD_MAC, "%s: %s (%s)", line,
                              hd_reason_name(v.reason), v.detail);
                json_decref(doc);
                n++;
        }
        /* Every top-level field (13 minus hmac), plus added, removed and
         * nested changes: the list must not silently shrink. */
        ck_assert_int_ge(n, 17);
        free(out);
        hd_key_free(k);
        free(tdir);
        free(docp);
        free(keyp);
        free(cli);
        free(d);
}
END_TEST

START_TEST(test_c_signed_verifies_in_python)
{
        char *d = tu_tmpdir(), *keyp, *docp, *out = NULL, *prog;
        hd_key *k = write_and_load_key(d, &keyp);
        json_t *doc = mkdoc();
        char *txt;

        json_object_set_new(doc, "x_text", json_string("\xc3\xa9\xf0\x9f\x98\x80 \x7f / \"q\""));
        json_object_set_new(doc, "x_reals", json_pack("[f,f,f,f]", 0.1, 1e20, 1e-5, 100000.0));
        ck_assert_int_eq(hd_sign(doc, k), 0);
        txt = json_dumps(doc, JSON_COMPACT);
        ck_assert_int_ge(asprintf(&docp, "%s/c.json", d), 0);
        tu_write_file(docp, txt, strlen(txt));
        ck_assert_int_ge(asprintf(&prog,
                "import sys, json\n"
                "sys.path.insert(0, '%s/tests/py')\n"
                "import hdproto\n"
                "doc = json.load(open(sys.argv[1]))\n"
                "key = hdproto.load_key(sys.argv[2])\n"
                "sys.exit(0 if hdproto.compute_hmac(doc, key) == doc['hmac'] else 3)\n",
                tu_src_dir()), 0);
        char *const argv[] = { "python3", "-B", "-c", prog, docp, keyp, NULL };
        ck_assert_msg(tu_run(argv, &out) == 0, "python3 says: %s", out);
        free(out);
        free(prog);
        free(txt);
        free(docp);
        free(keyp);
        json_decref(doc);
        hd_key_free(k);
        free(d);
}
END_TEST

START_TEST(test_verify_payload_only_with_opts)
{
        hd_key *k = mkkey();
        struct lookup_log l = { .key = k };
        hd_payload_opts opts = { 0 };
        json_t *d = mkdoc();
        hd_verdict v;

        json_object_set_new(d, "payload_type", json_string("no-such-type/9"));
        json_object_set_new(d, "payload", json_object());
        ck_assert_int_eq(hd_sign(d, k), 0);
        ck_assert_int_eq(hd_verify(d, lookup_cb, &l, NULL, NULL, T0, &v), 0);
        ck_assert_int_eq(hd_verify(d, lookup_cb, &l, NULL, &opts, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_PAYLOAD_INVALID);
        json_decref(d);
        hd_key_free(k);
}
END_TEST

/* ---- committed vectors ---------------------------------------------- */

static const hd_key *vector_lookup(void *userdata, const char *kid, const char *from)
{
        /* The vectors' README: the default key, and kid "test-2026". */
        if (kid && strcmp(kid, "test-2026") != 0)
                return NULL;
        return userdata;
}

START_TEST(test_vectors_all_expected)
{
        char *vdir = py_path("tests/vectors"), *kp;
        _cleanup_close_ int dfd = open(vdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        bool seen[_HD_R_MAX] = { false };
        struct tu_vec *vs = NULL;
        size_t n, keylen;
        char *keybuf;
        hd_key *k = NULL;

        ck_assert_int_ge(dfd, 0);
        ck_assert_int_ge(asprintf(&kp, "%s/TEST-ONLY.key", vdir), 0);
        keybuf = tu_read_file(kp, &keylen);
        ck_assert_ptr_nonnull(keybuf);
        ck_assert(keylen > 0 && keybuf[keylen - 1] == '\n');
        ck_assert_int_eq(hd_key_from_bytes(keybuf, keylen - 1, &k), 0);

        n = tu_read_vectors(vdir, &vs);
        ck_assert_uint_ge(n, 40);
        tu_check_vectors(dfd, vs, n, vector_lookup, k, seen);

        /* Every reason that file content can produce has a vector. */
        static const hd_reason content_reasons[] = {
                HD_OK, HD_R_TOO_LARGE, HD_R_PARSE_ERROR, HD_R_DUPLICATE_KEY, HD_R_TOO_DEEP,
                HD_R_BAD_VERSION, HD_R_MISSING_FIELD, HD_R_BAD_TYPE, HD_R_BAD_ID,
                HD_R_BAD_AGENT, HD_R_SELF_HANDOFF, HD_R_BAD_MAC_FORMAT, HD_R_BAD_MAC,
                HD_R_UNKNOWN_KEY, HD_R_BAD_TIMESTAMP, HD_R_EXPIRED, HD_R_FUTURE_TIMESTAMP,
                HD_R_NUMBER_OUT_OF_RANGE,
        };
        for (size_t i = 0; i < ELEMENTSOF(content_reasons); i++)
                ck_assert_msg(seen[content_reasons[i]], "no vector for %s",
                              hd_reason_name(content_reasons[i]));

        /* And every file in valid/ and invalid/ is listed. */
        static const char *const subs[] = { "valid", "invalid" };
        for (size_t s = 0; s < ELEMENTSOF(subs); s++) {
                char *sp;
                DIR *dir;
                struct dirent *de;

                ck_assert_int_ge(asprintf(&sp, "%s/%s", vdir, subs[s]), 0);
                dir = opendir(sp);
                ck_assert_ptr_nonnull(dir);
                while ((de = readdir(dir))) {
                        char rel[300];
                        bool found = false;

                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(rel, sizeof(rel), "%s/%s", subs[s], de->d_name);
                        for (size_t i = 0; i < n && !found; i++)
                                found = strcmp(vs[i].file, rel) == 0;
                        ck_assert_msg(found, "%s is not in expected.tsv", rel);
                }
                closedir(dir);
                free(sp);
        }
        free(vs);
        hd_key_free(k);
        free(keybuf);
        free(kp);
        free(vdir);
}
END_TEST

START_TEST(test_vectors_match_generator)
{
        char *vdir = py_path("tests/vectors"), *gen = py_path("tests/py/make_vectors.py");
        char *tmp = tu_tmpdir(), *out = NULL;
        struct tu_vec *vs = NULL, *fresh = NULL;
        size_t n, fn;

        char *const argv[] = { "python3", "-B", gen, tmp, NULL };
        ck_assert_msg(tu_run(argv, &out) == 0, "%s", out);
        free(out);
        n = tu_read_vectors(vdir, &vs);
        fn = tu_read_vectors(tmp, &fresh);
        ck_assert_uint_eq(n, fn);
        tu_assert_same_file(vdir, tmp, "expected.tsv", "make_vectors.py");
        tu_assert_same_file(vdir, tmp, "TEST-ONLY.key", "make_vectors.py");
        tu_assert_same_file(vdir, tmp, "README", "make_vectors.py");
        for (size_t i = 0; i < n; i++)
                tu_assert_same_file(vdir, tmp, vs[i].file, "make_vectors.py");
        free(vs);
        free(fresh);
        free(tmp);
        free(gen);
        free(vdir);
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

        tc = tcase_create("mac");
        tcase_add_test(tc, test_verify_unknown_key);
        tcase_add_test(tc, test_verify_mac_before_fields);
        tcase_add_test(tc, test_mac_format_strict);
        tcase_add_test(tc, test_mac_long_key_any_length);
        tcase_add_test(tc, test_verify_payload_only_with_opts);
        suite_add_tcase(s, tc);

        tc = tcase_create("python");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_python_signed_verifies);
        tcase_add_test(tc, test_every_single_field_tamper_is_bad_mac);
        tcase_add_test(tc, test_c_signed_verifies_in_python);
        suite_add_tcase(s, tc);

        tc = tcase_create("vectors");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_vectors_all_expected);
        tcase_add_test(tc, test_vectors_match_generator);
        suite_add_tcase(s, tc);
        return s;
}
