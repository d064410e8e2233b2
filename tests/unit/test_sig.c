/* Sender signatures (sig + kid, Ed25519): signing and checking, and the
 * rules that hold a key to its agent.  Key lines and key files, the
 * daemon's key lookup and config: test_sig_keys.c; the vectors of
 * tests/vectors/sig/ and openssl as the second implementation:
 * test_sig_vectors.c. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "handoff.h"
#include "testutil.h"
#include "util.h"

/* "2026-04-21T10:15:00Z" */
#define T0 INT64_C(1776766500000000)

static const char hmac_bytes[] = "test key for test_sig.c, not a secret at all";

static int verify_with(json_t *d, struct tu_ring *r, hd_verdict *v)
{
        return hd_verify(d, tu_ring_lookup, r, NULL, NULL, T0, v);
}

/* ---- signing and checking ------------------------------------------- */

START_TEST(test_sig_sign_verify_round_trip)
{
        hd_key *sk = tu_sig_gen(NULL), *pk = tu_sig_public_of(sk);
        struct tu_ring r = { .keys = { pk }, .n = 1 };
        json_t *d = tu_sig_doc("alice");
        const char *sig;
        hd_verdict v;

        ck_assert_int_eq(hd_key_set_agent(pk, "alice"), 0);
        json_object_set_new(d, "hmac", json_string("left over"));
        ck_assert_int_eq(hd_sign(d, sk), 0);
        /* the scheme follows the key: sig and kid, no hmac */
        ck_assert_ptr_null(json_object_get(d, "hmac"));
        ck_assert_str_eq(json_string_value(json_object_get(d, "kid")), hd_key_kid(sk));
        sig = json_string_value(json_object_get(d, "sig"));
        ck_assert_ptr_nonnull(sig);
        ck_assert_uint_eq(strlen(sig), HD_SIG_B64_LEN);
        ck_assert_str_eq(sig + HD_SIG_B64_LEN - 2, "==");
        ck_assert_int_eq(verify_with(d, &r, &v), 0);
        ck_assert_int_eq(v.reason, HD_OK);
        /* the secret key verifies too */
        r.keys[0] = sk;
        ck_assert_int_eq(verify_with(d, &r, &v), 0);

        /* one changed value: bad_signature */
        json_object_set_new(d, "reason", json_string("transfeR"));
        ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_SIGNATURE);
        json_decref(d);
        hd_key_free(pk);
        hd_key_free(sk);
}
END_TEST

START_TEST(test_sig_public_key_cannot_sign)
{
        hd_key *sk = tu_sig_gen("k1"), *pk = tu_sig_public_of(sk);
        json_t *d = tu_sig_doc("alice");

        ck_assert_int_eq(hd_sign(d, pk), -EINVAL);
        ck_assert_ptr_null(json_object_get(d, "sig"));
        ck_assert_str_eq(hd_key_kid(pk), "k1");
        json_decref(d);
        hd_key_free(pk);
        hd_key_free(sk);
}
END_TEST

START_TEST(test_sig_hmac_sign_drops_sig)
{
        hd_key *h = NULL;
        json_t *d = tu_sig_doc("alice");
        hd_verdict v;

        ck_assert_int_eq(hd_key_from_bytes(hmac_bytes, strlen(hmac_bytes), &h), 0);
        json_object_set_new(d, "sig", json_string("x"));
        ck_assert_int_eq(hd_sign(d, h), 0);
        ck_assert_ptr_null(json_object_get(d, "sig"));
        ck_assert_int_eq(hd_mac_check(d, h, &v), 0);
        ck_assert_ptr_null(hd_key_kid(h));
        json_decref(d);
        hd_key_free(h);
}
END_TEST

START_TEST(test_sig_both_hmac_and_sig_refused)
{
        hd_key *sk = tu_sig_gen(NULL), *h = NULL;
        struct tu_ring r = { .keys = { sk }, .n = 1 };
        json_t *d = tu_sig_doc("alice");
        char mac[HD_MAC_B64_LEN + 1];
        hd_verdict v;

        ck_assert_int_eq(hd_key_from_bytes(hmac_bytes, strlen(hmac_bytes), &h), 0);
        r.def = h;
        ck_assert_int_eq(hd_sign(d, sk), 0);
        ck_assert_int_eq(hd_mac_compute(d, h, mac), 0);
        json_object_set_new(d, "hmac", json_string(mac));
        ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_MAC_FORMAT);
        ck_assert_ptr_nonnull(strstr(v.detail, "both"));
        /* the same at each entry point */
        ck_assert_int_eq(hd_sig_check(d, sk, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_MAC_FORMAT);
        ck_assert_int_eq(hd_mac_check(d, h, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_MAC_FORMAT);
        json_decref(d);
        hd_key_free(h);
        hd_key_free(sk);
}
END_TEST

START_TEST(test_sig_format_strict)
{
        static const struct { const char *sig; hd_reason want; } cases[] = {
                { "", HD_R_BAD_MAC_FORMAT },
                { "AAAA", HD_R_BAD_MAC_FORMAT },
                /* 64 zero bytes: 86 chars and "==", well formed, wrong */
                { "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
                  HD_R_BAD_SIGNATURE },
                /* no padding */
                { "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                  HD_R_BAD_MAC_FORMAT },
                /* stray low bits in the last char */
                { "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB==",
                  HD_R_BAD_MAC_FORMAT },
                /* url-safe alphabet */
                { "____AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
                  HD_R_BAD_MAC_FORMAT },
        };
        hd_key *sk = tu_sig_gen(NULL);
        struct tu_ring r = { .keys = { sk }, .n = 1 };
        hd_verdict v;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_t *d = tu_sig_doc("alice");

                ck_assert_int_eq(hd_sign(d, sk), 0);
                json_object_set_new(d, "sig", json_string(cases[i].sig));
                ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
                ck_assert_msg(v.reason == cases[i].want, "case %zu: %s (%s)", i,
                              hd_reason_name(v.reason), v.detail);
                json_decref(d);
        }
        hd_key_free(sk);
}
END_TEST

START_TEST(test_sig_kid_rules)
{
        hd_key *sk = tu_sig_gen("alice-1"), *pk = tu_sig_public_of(sk), *h = NULL;
        struct tu_ring r = { .keys = { pk }, .n = 1 };
        json_t *d;
        hd_verdict v;

        ck_assert_int_eq(hd_key_from_bytes(hmac_bytes, strlen(hmac_bytes), &h), 0);
        /* missing kid */
        d = tu_sig_doc("alice");
        ck_assert_int_eq(hd_sign(d, sk), 0);
        json_object_del(d, "kid");
        ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_MISSING_FIELD);
        /* kid not a string */
        json_object_set_new(d, "kid", json_integer(7));
        ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_BAD_TYPE);
        /* a kid no key answers for */
        json_object_set_new(d, "kid", json_string("nobody"));
        ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_UNKNOWN_KEY);
        ck_assert_ptr_nonnull(strstr(v.detail, "\"nobody\""));
        /* a kid naming an HMAC key */
        r.def = h;
        json_object_set_new(d, "kid", json_string("ops"));
        ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_UNKNOWN_KEY);
        ck_assert_ptr_nonnull(strstr(v.detail, "HMAC"));
        /* a lookup that hands out one key for any kid: the key's own kid
         * must still be the document's */
        json_decref(d);
        d = tu_sig_doc("alice");
        json_object_set_new(d, "kid", json_string("alice-2"));
        ck_assert_int_eq(hd_sign(d, sk), 0);
        ck_assert_str_eq(json_string_value(json_object_get(d, "kid")), "alice-1");
        json_object_set_new(d, "kid", json_string("alice-2"));
        ck_assert_int_eq(hd_sig_check(d, pk, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_UNKNOWN_KEY);
        json_decref(d);
        hd_key_free(h);
        hd_key_free(pk);
        hd_key_free(sk);
}
END_TEST

/* ---- a key speaks for its own agent only ----------------------------- */

START_TEST(test_sig_key_of_another_agent_refused)
{
        hd_key *bob = tu_sig_gen("bob-1"), *bob_pub = tu_sig_public_of(bob);
        struct tu_ring r = { .keys = { bob_pub }, .n = 1 };
        json_t *d = tu_sig_doc("alice");
        hd_verdict v;

        ck_assert_int_eq(hd_key_set_agent(bob_pub, "bob"), 0);
        ck_assert_str_eq(hd_key_agent(bob_pub), "bob");
        ck_assert_int_eq(hd_sign(d, bob), 0);
        ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_KEY_AGENT_MISMATCH);
        ck_assert_ptr_nonnull(strstr(v.detail, "\"bob\""));
        ck_assert_ptr_nonnull(strstr(v.detail, "\"alice\""));
        /* the same key for bob himself is fine */
        json_object_set_new(d, "from_agent", json_string("bob"));
        ck_assert_int_eq(hd_sign(d, bob), 0);
        ck_assert_int_eq(verify_with(d, &r, &v), 0);
        /* unbound, it answers for anyone (a tool given one key) */
        ck_assert_int_eq(hd_key_set_agent(bob_pub, NULL), 0);
        ck_assert_ptr_null(hd_key_agent(bob_pub));
        json_object_set_new(d, "from_agent", json_string("alice"));
        ck_assert_int_eq(hd_sign(d, bob), 0);
        ck_assert_int_eq(verify_with(d, &r, &v), 0);
        ck_assert_int_eq(hd_key_set_agent(bob_pub, "Bob"), -EINVAL);
        json_decref(d);
        hd_key_free(bob_pub);
        hd_key_free(bob);
}
END_TEST

START_TEST(test_sig_hmac_key_bound_to_agent)
{
        hd_key *h = NULL;
        struct tu_ring r = { 0 };
        json_t *d = tu_sig_doc("bob");
        hd_verdict v;

        ck_assert_int_eq(hd_key_from_bytes(hmac_bytes, strlen(hmac_bytes), &h), 0);
        ck_assert_int_eq(hd_key_set_agent(h, "alice"), 0);
        r.def = h;
        ck_assert_int_eq(hd_sign(d, h), 0);
        ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_KEY_AGENT_MISMATCH);
        json_decref(d);
        hd_key_free(h);
}
END_TEST

/* Issues 18.4 and 19.2: a shared key named by kid never signs for an agent
 * that has a key of its own. */
START_TEST(test_sig_shared_kid_key_cannot_sign_for_agent_with_own_key)
{
        hd_key *ops = NULL, *own = NULL;
        struct tu_ring r = { .own_agent = "alice" };
        json_t *d = tu_sig_doc("alice");
        hd_verdict v;

        ck_assert_int_eq(hd_key_from_bytes(hmac_bytes, strlen(hmac_bytes), &ops), 0);
        ck_assert_int_eq(hd_key_from_bytes("alice's own key, also at least 32 bytes", 39,
                                           &own), 0);
        ck_assert_int_eq(hd_key_set_agent(own, "alice"), 0);
        r.def = ops;            /* "ops" names the shared key */
        r.own = own;
        json_object_set_new(d, "kid", json_string("ops"));
        ck_assert_int_eq(hd_sign(d, ops), 0);
        ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_KEY_AGENT_MISMATCH);
        ck_assert_ptr_nonnull(strstr(v.detail, "\"ops\""));
        /* for an agent without a key of its own the shared key is fine */
        json_object_set_new(d, "from_agent", json_string("erin"));
        ck_assert_int_eq(hd_sign(d, ops), 0);
        ck_assert_int_eq(verify_with(d, &r, &v), 0);
        /* and alice signs with her own key */
        json_object_set_new(d, "from_agent", json_string("alice"));
        json_object_del(d, "kid");
        ck_assert_int_eq(hd_sign(d, own), 0);
        ck_assert_int_eq(verify_with(d, &r, &v), 0);
        json_decref(d);
        hd_key_free(own);
        hd_key_free(ops);
}
END_TEST

START_TEST(test_sig_signature_required)
{
        hd_key *sk = tu_sig_gen(NULL), *pk = tu_sig_public_of(sk), *h = NULL;
        struct tu_ring r = { .own_agent = "carol" };
        json_t *d = tu_sig_doc("carol");
        hd_verdict v;

        ck_assert_int_eq(hd_key_from_bytes(hmac_bytes, strlen(hmac_bytes), &h), 0);
        ck_assert_int_eq(hd_key_set_agent(pk, "carol"), 0);
        r.keys[0] = pk;
        r.n = 1;
        r.own = pk;             /* carol's key for an hmac document: hers */
        r.def = h;
        ck_assert_int_eq(hd_sign(d, h), 0);
        ck_assert_int_eq(verify_with(d, &r, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_SIGNATURE_REQUIRED);
        ck_assert_int_eq(hd_sign(d, sk), 0);
        ck_assert_int_eq(verify_with(d, &r, &v), 0);
        json_decref(d);
        hd_key_free(h);
        hd_key_free(pk);
        hd_key_free(sk);
}
END_TEST

Suite *suite_sig(void);
Suite *suite_sig(void)
{
        Suite *s = suite_create("sig");
        TCase *tc;

        tc = tcase_create("sign");
        tcase_add_test(tc, test_sig_sign_verify_round_trip);
        tcase_add_test(tc, test_sig_public_key_cannot_sign);
        tcase_add_test(tc, test_sig_hmac_sign_drops_sig);
        tcase_add_test(tc, test_sig_both_hmac_and_sig_refused);
        tcase_add_test(tc, test_sig_format_strict);
        tcase_add_test(tc, test_sig_kid_rules);
        suite_add_tcase(s, tc);

        tc = tcase_create("owner");
        tcase_add_test(tc, test_sig_key_of_another_agent_refused);
        tcase_add_test(tc, test_sig_hmac_key_bound_to_agent);
        tcase_add_test(tc, test_sig_shared_kid_key_cannot_sign_for_agent_with_own_key);
        tcase_add_test(tc, test_sig_signature_required);
        suite_add_tcase(s, tc);
        return s;
}
