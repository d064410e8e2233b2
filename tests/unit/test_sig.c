/* Sender signatures (sig + kid, Ed25519): signing and checking, key kinds
 * and key files, the rules that hold a key to its agent, the daemon's key
 * lookup and config, the vectors of tests/vectors/sig/ (signed by openssl),
 * and 1,000 documents signed here checked by openssl. */
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

static json_t *mkdoc(const char *from)
{
        json_t *d = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:[{s:s, s:s}]}",
                              "protocol_version", 1,
                              "handoff_id", "s-0001",
                              "from_agent", from,
                              "to_agent", "zoe",
                              "reason", "transfer",
                              "initiated_at", "2026-04-21T10:15:00Z",
                              "expires_at", "2026-04-21T10:20:00Z",
                              "transcript", "role", "user", "text", "hello");
        ck_assert_ptr_nonnull(d);
        return d;
}

static hd_key *gen(const char *kid)
{
        hd_key *k = NULL;

        ck_assert_int_eq(hd_key_generate(kid, &k), 0);
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_ED25519_SECRET);
        return k;
}

/* The public half of a secret key, through its key line. */
static hd_key *public_of(const hd_key *sk)
{
        char line[HD_KEY_LINE_MAX], err[200];
        hd_key *pk = NULL;

        ck_assert_int_eq(hd_key_format(sk, false, line, sizeof(line)), 0);
        ck_assert_msg(hd_key_parse(line, strlen(line), &pk, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(hd_key_kind_of(pk), HD_KEY_ED25519_PUBLIC);
        return pk;
}

/* A small keyring: keys[i] answers for its kid; own[] gives a sender's
 * own key when asked without kid; def the default. */
struct ring {
        const hd_key *keys[8];
        size_t n;
        const char *own_agent;
        const hd_key *own;
        const hd_key *def;
};

static const hd_key *ring_lookup(void *ud, const char *kid, const char *from)
{
        const struct ring *r = ud;

        if (kid) {
                for (size_t i = 0; i < r->n; i++) {
                        const char *k = hd_key_kid(r->keys[i]);
                        if (k && !strcmp(k, kid))
                                return r->keys[i];
                }
                if (!strcmp(kid, "ops"))
                        return r->def;
                return NULL;
        }
        if (from && r->own_agent && !strcmp(from, r->own_agent))
                return r->own;
        return r->def;
}

static int verify_with(json_t *d, struct ring *r, hd_verdict *v)
{
        return hd_verify(d, ring_lookup, r, NULL, NULL, T0, v);
}

/* ---- signing and checking ------------------------------------------- */

START_TEST(test_sig_sign_verify_round_trip)
{
        hd_key *sk = gen(NULL), *pk = public_of(sk);
        struct ring r = { .keys = { pk }, .n = 1 };
        json_t *d = mkdoc("alice");
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
        hd_key *sk = gen("k1"), *pk = public_of(sk);
        json_t *d = mkdoc("alice");

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
        json_t *d = mkdoc("alice");
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
        hd_key *sk = gen(NULL), *h = NULL;
        struct ring r = { .keys = { sk }, .n = 1 };
        json_t *d = mkdoc("alice");
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
        hd_key *sk = gen(NULL);
        struct ring r = { .keys = { sk }, .n = 1 };
        hd_verdict v;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_t *d = mkdoc("alice");

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
        hd_key *sk = gen("alice-1"), *pk = public_of(sk), *h = NULL;
        struct ring r = { .keys = { pk }, .n = 1 };
        json_t *d;
        hd_verdict v;

        ck_assert_int_eq(hd_key_from_bytes(hmac_bytes, strlen(hmac_bytes), &h), 0);
        /* missing kid */
        d = mkdoc("alice");
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
        d = mkdoc("alice");
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
        hd_key *bob = gen("bob-1"), *bob_pub = public_of(bob);
        struct ring r = { .keys = { bob_pub }, .n = 1 };
        json_t *d = mkdoc("alice");
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
        struct ring r = { 0 };
        json_t *d = mkdoc("bob");
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
        struct ring r = { .own_agent = "alice" };
        json_t *d = mkdoc("alice");
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
        hd_key *sk = gen(NULL), *pk = public_of(sk), *h = NULL;
        struct ring r = { .own_agent = "carol" };
        json_t *d = mkdoc("carol");
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

/* ---- keys and key files ---------------------------------------------- */

static char *file_in(const char *dir, const char *name, const char *text, mode_t mode)
{
        return tu_file_in(dir, name, text, strlen(text), mode);
}

START_TEST(test_sig_key_lines_round_trip)
{
        hd_key *sk = gen(NULL), *back = NULL;
        char line[HD_KEY_LINE_MAX], again[HD_KEY_LINE_MAX], err[200];
        const char *kid = hd_key_kid(sk);

        /* default kid: 16 lowercase hex chars */
        ck_assert_uint_eq(strlen(kid), 16);
        ck_assert_uint_eq(strspn(kid, "0123456789abcdef"), 16);
        ck_assert_int_eq(hd_key_format(sk, true, line, sizeof(line)), 0);
        ck_assert(!strncmp(line, "ed25519-secret ", 15));
        ck_assert_int_eq(hd_key_parse(line, strlen(line), &back, err, sizeof(err)), 0);
        ck_assert_int_eq(hd_key_kind_of(back), HD_KEY_ED25519_SECRET);
        ck_assert_int_eq(hd_key_format(back, true, again, sizeof(again)), 0);
        ck_assert_str_eq(line, again);
        ck_assert_int_eq(hd_key_format(sk, false, line, sizeof(line)), 0);
        ck_assert_int_eq(hd_key_format(back, false, again, sizeof(again)), 0);
        ck_assert_str_eq(line, again);
        ck_assert(!strncmp(line, "ed25519 ", 8));
        ck_assert_int_eq(hd_key_format(sk, true, line, 100), -EINVAL);
        hd_key_free(back);
        back = public_of(sk);
        ck_assert_int_eq(hd_key_format(back, true, line, sizeof(line)), -EINVAL);
        hd_key_free(back);
        hd_key_free(sk);
        ck_assert_int_eq(hd_key_generate("Not-Valid", &back), -EINVAL);
}
END_TEST

START_TEST(test_sig_key_line_parse_refusals)
{
        static const char *const bad[] = {
                "",
                "ed25519",
                "ed25519 AAAA kid",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= ",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= Kid",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid extra",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB= kid",
                "ed25519  AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid\r",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid\nsecond",
                "rsa AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid",
        };
        char err[200];
        hd_key *k = NULL;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                err[0] = '\0';
                ck_assert_msg(hd_key_parse(bad[i], strlen(bad[i]), &k, err, sizeof(err)) == -EINVAL,
                              "accepted '%s'", bad[i]);
                ck_assert_ptr_null(k);
                ck_assert_msg(err[0], "no message for '%s'", bad[i]);
        }
        static const char good[] = "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid\n";
        ck_assert_msg(hd_key_parse(good, strlen(good), &k, err, sizeof(err)) == 0, "%s", err);
        ck_assert_str_eq(hd_key_kid(k), "kid");
        hd_key_free(k);
}
END_TEST

START_TEST(test_sig_key_file_modes)
{
        char *d = tu_tmpdir(), *p, line[HD_KEY_LINE_MAX], err[300];
        hd_key *sk = gen(NULL), *k = NULL;

        /* a public key may be read by anyone, written by its owner only */
        ck_assert_int_eq(hd_key_format(sk, false, line, sizeof(line)), 0);
        p = file_in(d, "a.pub", line, 0644);
        ck_assert_msg(hd_key_load(p, &k, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_ED25519_PUBLIC);
        hd_key_free(k);
        k = NULL;
        ck_assert_int_eq(chmod(p, 0664), 0);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EPERM);
        ck_assert_ptr_nonnull(strstr(err, "writable by group or others"));
        free(p);
        /* a secret key follows the HMAC key's rule */
        ck_assert_int_eq(hd_key_format(sk, true, line, sizeof(line)), 0);
        p = file_in(d, "a.key", line, 0644);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EPERM);
        ck_assert_ptr_nonnull(strstr(err, "chmod 600 or 640"));
        ck_assert_int_eq(chmod(p, 0640), 0);
        ck_assert_msg(hd_key_load(p, &k, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_ED25519_SECRET);
        ck_assert_str_eq(hd_key_kid(k), hd_key_kid(sk));
        hd_key_free(k);
        k = NULL;
        free(p);
        /* a malformed Ed25519 line is an error, never an HMAC key */
        p = file_in(d, "broken.key", "ed25519-secret not-base64-at-all-but-long-enough kid\n", 0600);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_null(k);
        free(p);
        hd_key_free(sk);
        free(d);
}
END_TEST

START_TEST(test_sig_pubkeys_file)
{
        char *d = tu_tmpdir(), *p, *text, err[300];
        char l1[HD_KEY_LINE_MAX], l2[HD_KEY_LINE_MAX], s1[HD_KEY_LINE_MAX];
        hd_key *a = gen("a-1"), *b = gen("a-2"), *keys[HD_PUBKEYS_MAX], *k = NULL;
        size_t n = 0;

        ck_assert_int_eq(hd_key_format(a, false, l1, sizeof(l1)), 0);
        ck_assert_int_eq(hd_key_format(b, false, l2, sizeof(l2)), 0);
        ck_assert_int_eq(hd_key_format(a, true, s1, sizeof(s1)), 0);
        ck_assert_int_ge(asprintf(&text, "# alice, rotated 2026-04\n%s\n%s", l1, l2), 0);
        p = file_in(d, "alice.pub", text, 0644);
        ck_assert_msg(hd_pubkeys_load_at(AT_FDCWD, p, keys, HD_PUBKEYS_MAX, &n, err,
                                         sizeof(err)) == 0, "%s", err);
        ck_assert_uint_eq(n, 2);
        ck_assert_str_eq(hd_key_kid(keys[0]), "a-1");
        ck_assert_str_eq(hd_key_kid(keys[1]), "a-2");
        hd_key_free(keys[0]);
        hd_key_free(keys[1]);
        /* more than max */
        ck_assert_int_eq(hd_pubkeys_load_at(AT_FDCWD, p, keys, 1, &n, err, sizeof(err)), -E2BIG);
        free(p);
        free(text);
        /* one key per file for hd_key_load */
        ck_assert_int_ge(asprintf(&text, "%s%s", l1, l2), 0);
        p = file_in(d, "two.pub", text, 0644);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "more than one line"));
        free(p);
        free(text);
        /* a secret key among public ones */
        ck_assert_int_ge(asprintf(&text, "%s%s", l1, s1), 0);
        p = file_in(d, "mixed.pub", text, 0644);
        ck_assert_int_eq(hd_pubkeys_load_at(AT_FDCWD, p, keys, HD_PUBKEYS_MAX, &n, err,
                                            sizeof(err)), -EKEYREJECTED);
        ck_assert_ptr_nonnull(strstr(err, "line 2 is a secret key"));
        free(p);
        free(text);
        /* an empty list and a group-writable one */
        p = file_in(d, "empty.pub", "# nothing yet\n", 0644);
        ck_assert_int_eq(hd_pubkeys_load_at(AT_FDCWD, p, keys, HD_PUBKEYS_MAX, &n, err,
                                            sizeof(err)), -EINVAL);
        free(p);
        p = file_in(d, "open.pub", l1, 0666);
        ck_assert_int_eq(hd_pubkeys_load_at(AT_FDCWD, p, keys, HD_PUBKEYS_MAX, &n, err,
                                            sizeof(err)), -EPERM);
        free(p);
        hd_key_free(a);
        hd_key_free(b);
        free(d);
}
END_TEST

/* ---- the daemon's config and key lookup -------------------------------- */

struct cfg_env {
        char *dir;
        char line_a[HD_KEY_LINE_MAX], line_b[HD_KEY_LINE_MAX], secret_a[HD_KEY_LINE_MAX];
        hd_key *a, *b;
};

static void cfg_env_init(struct cfg_env *e)
{
        char *p;

        e->dir = tu_tmpdir();
        ck_assert_int_eq(chmod(e->dir, 0755), 0);
        e->a = gen("alice-1");
        e->b = gen("bob-1");
        ck_assert_int_eq(hd_key_format(e->a, false, e->line_a, sizeof(e->line_a)), 0);
        ck_assert_int_eq(hd_key_format(e->b, false, e->line_b, sizeof(e->line_b)), 0);
        ck_assert_int_eq(hd_key_format(e->a, true, e->secret_a, sizeof(e->secret_a)), 0);
        free(file_in(e->dir, "default.key", "0123456789abcdef0123456789abcdef-default\n", 0600));
        free(file_in(e->dir, "ops.key", "0123456789abcdef0123456789abcdef-ops\n", 0600));
        free(file_in(e->dir, "dave.key", "0123456789abcdef0123456789abcdef-dave\n", 0600));
        free(file_in(e->dir, "alice.pub", e->line_a, 0644));
        free(file_in(e->dir, "alice.key", e->secret_a, 0600));
        ck_assert_int_ge(asprintf(&p, "%s/pubkeys", e->dir), 0);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        free(p);
        free(file_in(e->dir, "pubkeys/bob.pub", e->line_b, 0644));
}

static void cfg_env_done(struct cfg_env *e)
{
        hd_key_free(e->a);
        hd_key_free(e->b);
        free(e->dir);
}

/* Load a config: body after "[spool]" and "[agent zoe]"; @ stands for the
 * env's directory. */
static int cfg_load(struct cfg_env *e, const char *body, struct config **ret, char **err)
{
        char *text, *conf, *p;
        size_t n = 0;
        int r;

        text = malloc(strlen(body) * 4 + 4096);
        ck_assert_ptr_nonnull(text);
        n = (size_t)sprintf(text, "[spool]\ndir = %s/spool\n\n[agent zoe]\nstate_dir = %s/zoe\n\n",
                            e->dir, e->dir);
        for (p = (char *)body; *p; p++) {
                if (*p == '@')
                        n += (size_t)sprintf(text + n, "%s", e->dir);
                else
                        text[n++] = *p;
        }
        text[n] = '\0';
        ck_assert_int_ge(asprintf(&conf, "%s/handoffd.conf", e->dir), 0);
        unlink(conf);
        tu_write_file(conf, text, n);
        r = config_load(conf, true, ret, err);
        free(conf);
        free(text);
        return r;
}

static const char full_conf[] =
        "[keys]\n"
        "default = @/default.key\n"
        "ops = @/ops.key\n"
        "pubkey_dir = @/pubkeys\n"
        "[agent alice]\n"
        "state_dir = @/alice\n"
        "pubkeys = @/alice.pub\n"
        "require = sig\n"
        "[agent dave]\n"
        "state_dir = @/dave\n"
        "key = @/dave.key\n";

START_TEST(test_sig_config_lookup)
{
        struct cfg_env e;
        struct config *c = NULL;
        char *err = NULL;
        const hd_key *k;

        cfg_env_init(&e);
        ck_assert_msg(cfg_load(&e, full_conf, &c, &err) == 0, "%s", err);
        ck_assert_uint_eq(c->n_pubkeys, 2);
        /* a kid naming a public key: that key, bound to its agent */
        k = config_key_lookup(c, "alice-1", "bob");
        ck_assert_ptr_nonnull(k);
        ck_assert_str_eq(hd_key_agent(k), "alice");
        k = config_key_lookup(c, "bob-1", "alice");
        ck_assert_str_eq(hd_key_agent(k), "bob");   /* pubkey_dir/bob.pub */
        /* alice requires sig: an hmac query gets her public key */
        k = config_key_lookup(c, NULL, "alice");
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_ED25519_PUBLIC);
        k = config_key_lookup(c, "ops", "alice");
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_ED25519_PUBLIC);
        /* dave has his own key: bound to him; ops stays shared */
        k = config_key_lookup(c, NULL, "dave");
        ck_assert_str_eq(hd_key_agent(k), "dave");
        k = config_key_lookup(c, "ops", "dave");
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_HMAC);
        ck_assert_ptr_null(hd_key_agent(k));
        /* no key of its own: the default */
        ck_assert_ptr_eq(config_key_lookup(c, NULL, "erin"), c->default_key);
        ck_assert_ptr_null(config_key_lookup(c, "retired", "erin"));
        config_free(c);
        cfg_env_done(&e);
}
END_TEST

START_TEST(test_sig_config_refusals)
{
        static const struct { const char *body, *want; } cases[] = {
                { "[keys]\ndefault = @/alice.key\n", "the daemon needs only public keys" },
                { "[keys]\ndefault = @/default.key\n[agent alice]\nstate_dir = @/a\nkey = @/alice.key\n",
                  "the daemon needs only public keys" },
                { "[keys]\ndefault = @/alice.pub\n", "is an Ed25519 public key" },
                { "[agent alice]\nstate_dir = @/a\npubkeys = @/alice.key\n",
                  "the daemon needs only public keys" },
                { "[keys]\npubkey_dir = @/pubkeys\n[agent alice]\nstate_dir = @/a\nrequire = sig\n",
                  "no public key of alice was found" },
                { "[keys]\ndefault = @/default.key\n[agent alice]\nstate_dir = @/a\nrequire = sig\n",
                  "no public key is configured" },
                { "[agent alice]\nstate_dir = @/a\nrequire = hmac\n", "is not sig or any" },
                { "[agent alice]\nstate_dir = @/a\npubkeys = alice.pub\n", "not an absolute path" },
                { "[keys]\npubkey_dir = @/pubkeys\n[agent bob]\nstate_dir = @/b\npubkeys = @/pubkeys/bob.pub\n",
                  "kid 'bob-1' names two public keys" },
                { "[keys]\nalice-1 = @/ops.key\n[agent alice]\nstate_dir = @/a\npubkeys = @/alice.pub\n",
                  "is also a [keys] name" },
                { "[keys]\npubkey_dir = @/missing\n", "pubkey_dir" },
        };
        struct cfg_env e;

        cfg_env_init(&e);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct config *c = NULL;
                char *err = NULL;

                ck_assert_msg(cfg_load(&e, cases[i].body, &c, &err) < 0, "case %zu loaded", i);
                ck_assert_ptr_null(c);
                ck_assert_msg(err && strstr(err, cases[i].want), "case %zu: '%s', want '%s'",
                              i, err ? err : "(null)", cases[i].want);
                free(err);
        }
        cfg_env_done(&e);
}
END_TEST

START_TEST(test_sig_config_pubkey_dir_rules)
{
        struct cfg_env e;
        struct config *c = NULL;
        char *err = NULL, *p;

        cfg_env_init(&e);
        /* whoever may add a file there may sign as anyone */
        ck_assert_int_ge(asprintf(&p, "%s/pubkeys", e.dir), 0);
        ck_assert_int_eq(chmod(p, 0775), 0);
        ck_assert_int_lt(cfg_load(&e, "[keys]\npubkey_dir = @/pubkeys\n", &c, &err), 0);
        ck_assert_msg(strstr(err, "must not be writable by group or others"), "%s", err);
        free(err);
        err = NULL;
        ck_assert_int_eq(chmod(p, 0755), 0);
        /* names: <agent>.pub; other files are not keys */
        free(file_in(e.dir, "pubkeys/README", "not a key\n", 0644));
        ck_assert_msg(cfg_load(&e, "[keys]\npubkey_dir = @/pubkeys\n", &c, &err) == 0, "%s", err);
        ck_assert_uint_eq(c->n_pubkeys, 1);
        config_free(c);
        c = NULL;
        free(file_in(e.dir, "pubkeys/Bad.pub", e.line_a, 0644));
        ck_assert_int_lt(cfg_load(&e, "[keys]\npubkey_dir = @/pubkeys\n", &c, &err), 0);
        ck_assert_msg(strstr(err, "'Bad.pub' is not named <agent>.pub"), "%s", err);
        free(err);
        free(p);
        cfg_env_done(&e);
}
END_TEST

/* End to end through the daemon's lookup: the attack of issue 19.2. */
START_TEST(test_sig_config_kid_key_cannot_sign_as_dave)
{
        struct cfg_env e;
        struct config *c = NULL;
        char *err = NULL;
        hd_key *ops = NULL;
        json_t *d = mkdoc("dave");
        hd_verdict v;
        static const char ops_bytes[] = "0123456789abcdef0123456789abcdef-ops";

        cfg_env_init(&e);
        ck_assert_msg(cfg_load(&e, full_conf, &c, &err) == 0, "%s", err);
        ck_assert_int_eq(hd_key_from_bytes(ops_bytes, strlen(ops_bytes), &ops), 0);
        json_object_set_new(d, "kid", json_string("ops"));
        ck_assert_int_eq(hd_sign(d, ops), 0);
        ck_assert_int_eq(hd_verify(d, config_key_lookup, c, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_KEY_AGENT_MISMATCH);
        /* the same key signs for erin, who has none of her own */
        json_object_set_new(d, "from_agent", json_string("erin"));
        ck_assert_int_eq(hd_sign(d, ops), 0);
        ck_assert_int_eq(hd_verify(d, config_key_lookup, c, NULL, NULL, T0, &v), 0);
        /* alice's key signs for alice, bob's does not */
        json_object_set_new(d, "from_agent", json_string("alice"));
        ck_assert_int_eq(hd_sign(d, e.a), 0);
        ck_assert_int_eq(hd_verify(d, config_key_lookup, c, NULL, NULL, T0, &v), 0);
        ck_assert_int_eq(hd_sign(d, e.b), 0);
        ck_assert_int_eq(hd_verify(d, config_key_lookup, c, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_KEY_AGENT_MISMATCH);
        json_decref(d);
        hd_key_free(ops);
        config_free(c);
        cfg_env_done(&e);
}
END_TEST

/* ---- vectors and the second implementation ----------------------------- */

static char *src_path(const char *rel)
{
        return tu_path(tu_src_dir(), rel);
}

static void copy_file(const char *from_dir, const char *from, const char *to_dir,
                      const char *to, mode_t mode)
{
        char *a = tu_path(from_dir, from), *buf;
        size_t len;

        buf = tu_read_file(a, &len);
        ck_assert_msg(buf != NULL, "no %s", a);
        free(tu_file_in(to_dir, to, buf, len, mode));
        free(buf);
        free(a);
}

START_TEST(test_sig_vectors_all_expected)
{
        static const char *const keyfiles[] = {
                "TEST-ONLY-alice.pub", "TEST-ONLY-bob.pub", "TEST-ONLY-carol.pub",
                "TEST-ONLY-ops.key", "TEST-ONLY-dave.key",
        };
        char *vdir = src_path("tests/vectors/sig"), *top = src_path("tests/vectors");
        char *tmp = tu_tmpdir(), *conf_in, *text, *conf, *err = NULL;
        bool seen[_HD_R_MAX] = { false };
        struct config *c = NULL;
        struct tu_vec *vs = NULL;
        size_t n, len;

        /* the key setup of the vectors' README, in a private copy (git
         * does not keep a key file's mode) */
        ck_assert_int_eq(chmod(tmp, 0755), 0);
        for (size_t i = 0; i < ELEMENTSOF(keyfiles); i++)
                copy_file(vdir, keyfiles[i], tmp, keyfiles[i],
                          strstr(keyfiles[i], ".pub") ? 0644 : 0600);
        copy_file(top, "TEST-ONLY.key", tmp, "TEST-ONLY.key", 0600);
        ck_assert_int_ge(asprintf(&conf_in, "%s/handoffd.conf.in", vdir), 0);
        text = tu_read_file(conf_in, &len);
        ck_assert_ptr_nonnull(text);
        ck_assert_int_ge(asprintf(&conf, "%s/handoffd.conf", tmp), 0);
        {
                FILE *f = fopen(conf, "w");
                ck_assert_ptr_nonnull(f);
                for (char *p = text; *p; p++) {
                        if (!strncmp(p, "@DIR@", 5)) {
                                fputs(tmp, f);
                                p += 4;
                        } else {
                                fputc(*p, f);
                        }
                }
                fclose(f);
        }
        ck_assert_msg(config_load(conf, true, &c, &err) == 0, "%s", err);

        _cleanup_close_ int dfd = open(vdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dfd, 0);
        n = tu_read_vectors(vdir, &vs);
        ck_assert_uint_ge(n, 20);
        tu_check_vectors(dfd, vs, n, config_key_lookup, c, seen);
        static const hd_reason sig_reasons[] = {
                HD_OK, HD_R_BAD_SIGNATURE, HD_R_BAD_MAC_FORMAT, HD_R_UNKNOWN_KEY,
                HD_R_KEY_AGENT_MISMATCH, HD_R_SIGNATURE_REQUIRED, HD_R_MISSING_FIELD,
        };
        for (size_t i = 0; i < ELEMENTSOF(sig_reasons); i++)
                ck_assert_msg(seen[sig_reasons[i]], "no vector for %s",
                              hd_reason_name(sig_reasons[i]));
        free(vs);
        config_free(c);
        free(text);
        free(conf);
        free(conf_in);
        free(tmp);
        free(top);
        free(vdir);
}
END_TEST

START_TEST(test_sig_vectors_match_generator)
{
        static const char *const extra[] = {
                "expected.tsv", "README", "handoffd.conf.in", "TEST-ONLY-alice.pub",
                "TEST-ONLY-bob.pub", "TEST-ONLY-carol.pub", "TEST-ONLY-alice.key",
                "TEST-ONLY-bob.key", "TEST-ONLY-ops.key", "TEST-ONLY-dave.key",
        };
        char *vdir = src_path("tests/vectors/sig"), *gen = src_path("tests/py/make_sig_vectors.py");
        char *tmp = tu_tmpdir(), *out = NULL;
        struct tu_vec *vs = NULL;
        size_t n;

        char *const argv[] = { "python3", "-B", gen, tmp, NULL };
        ck_assert_msg(tu_run(argv, &out) == 0, "%s", out);
        free(out);
        n = tu_read_vectors(vdir, &vs);
        for (size_t i = 0; i < n + ELEMENTSOF(extra); i++) {
                const char *rel = i < n ? vs[i].file : extra[i - n];

                tu_assert_same_file(vdir, tmp, rel, "make_sig_vectors.py");
        }
        free(vs);
        free(tmp);
        free(gen);
        free(vdir);
}
END_TEST

/* 1,000 random documents (gen_docs.py) signed here with libsodium; openssl
 * verifies each over Python's own canonical bytes, and rejects a tampered
 * copy of one in ten. */
START_TEST(test_sig_openssl_verifies_1000_docs)
{
        char *genp = src_path("tests/py/gen_docs.py"), *chk = src_path("tests/py/sig_openssl.py");
        char *tmp = tu_tmpdir(), *docs, *pubp, *out = NULL, *p;
        char line[HD_KEY_LINE_MAX];
        hd_key *sk = gen(NULL);
        struct timespec t0, t1;
        long n = 0;

        ck_assert_int_ge(asprintf(&docs, "%s/docs", tmp), 0);
        ck_assert_int_eq(mkdir(docs, 0700), 0);
        ck_assert_int_eq(hd_key_format(sk, false, line, sizeof(line)), 0);
        pubp = file_in(tmp, "k.pub", line, 0644);

        char *const gargv[] = { "python3", "-B", genp, "--seed", "1414", "--count", "1000", NULL };
        ck_assert_msg(tu_run(gargv, &out) == 0, "gen_docs.py: %.500s", out);
        for (p = out; *p; n++) {
                char *in = p, *nl = strchr(p, '\n'), *canon = NULL, name[32];
                json_t *doc = NULL;
                hd_verdict v;
                size_t len;

                ck_assert_ptr_nonnull(nl);
                *nl = '\0';
                nl = strchr(nl + 1, '\n');     /* skip the canonical line */
                ck_assert_ptr_nonnull(nl);
                p = nl + 1;
                ck_assert_int_eq(hd_parse(in, strlen(in), NULL, &doc, &v), 0);
                ck_assert_int_eq(hd_sign(doc, sk), 0);
                ck_assert_int_eq(hd_canon_dump(doc, NULL, &canon, &len), 0);
                snprintf(name, sizeof(name), "%04ld.json", n);
                {
                        char *fp;
                        ck_assert_int_ge(asprintf(&fp, "%s/%s", docs, name), 0);
                        tu_write_file(fp, canon, len);
                        free(fp);
                }
                free(canon);
                json_decref(doc);
        }
        free(out);
        out = NULL;
        ck_assert_int_eq(n, 1000);

        clock_gettime(CLOCK_MONOTONIC, &t0);
        char *const vargv[] = { "python3", "-B", chk, "verify", pubp, docs, NULL };
        int rc = tu_run(vargv, &out);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ck_assert_msg(rc == 0, "sig_openssl.py verify exited %d: %.2000s", rc, out);
        ck_assert_msg(strstr(out, "verified 1000 tampered-rejected 100"), "%s", out);
        printf("sig: openssl verified 1000 libsodium signatures, rejected 100 tampered, %.1fs\n",
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        fflush(stdout);
        free(out);
        hd_key_free(sk);
        free(pubp);
        free(docs);
        free(tmp);
        free(chk);
        free(genp);
}
END_TEST

/* The reverse: documents signed by openssl verify here. */
START_TEST(test_sig_openssl_signed_verify_here)
{
        char *chk = src_path("tests/py/sig_openssl.py");
        char *tmp = tu_tmpdir(), *docs, *secp, *out = NULL;
        char line[HD_KEY_LINE_MAX];
        hd_key *sk = gen("openssl-1"), *pk = public_of(sk);
        struct ring r = { .keys = { pk }, .n = 1 };
        _cleanup_close_ int dfd = -1;
        int count = 0;

        ck_assert_int_eq(hd_key_format(sk, true, line, sizeof(line)), 0);
        secp = file_in(tmp, "k.key", line, 0600);
        ck_assert_int_ge(asprintf(&docs, "%s/docs", tmp), 0);
        char *const argv[] = { "python3", "-B", chk, "sign", secp, docs, "--count", "50",
                               "--seed", "77", NULL };
        ck_assert_msg(tu_run(argv, &out) == 0, "%s", out);
        free(out);
        dfd = open(docs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dfd, 0);
        for (int i = 0; i < 50; i++) {
                char name[32];
                json_t *doc = NULL;
                hd_verdict v;

                snprintf(name, sizeof(name), "%04d.json", i);
                ck_assert_int_eq(hd_load_at(dfd, name, NULL, &doc, &v), 0);
                /* random documents are no handoffs: authentication only */
                ck_assert_msg(hd_auth_check(doc, ring_lookup, &r, &v) == 0, "%s: %s: %s",
                              name, hd_reason_name(v.reason), v.detail);
                json_object_set_new(doc, "x_tampered", json_true());
                ck_assert_int_eq(hd_auth_check(doc, ring_lookup, &r, &v), -EBADMSG);
                ck_assert_int_eq(v.reason, HD_R_BAD_SIGNATURE);
                json_decref(doc);
                count++;
        }
        ck_assert_int_eq(count, 50);
        hd_key_free(pk);
        hd_key_free(sk);
        free(secp);
        free(docs);
        free(tmp);
        free(chk);
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

        tc = tcase_create("keys");
        tcase_add_test(tc, test_sig_key_lines_round_trip);
        tcase_add_test(tc, test_sig_key_line_parse_refusals);
        tcase_add_test(tc, test_sig_key_file_modes);
        tcase_add_test(tc, test_sig_pubkeys_file);
        suite_add_tcase(s, tc);

        tc = tcase_create("config");
        tcase_add_test(tc, test_sig_config_lookup);
        tcase_add_test(tc, test_sig_config_refusals);
        tcase_add_test(tc, test_sig_config_pubkey_dir_rules);
        tcase_add_test(tc, test_sig_config_kid_key_cannot_sign_as_dave);
        suite_add_tcase(s, tc);

        tc = tcase_create("vectors");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_sig_vectors_all_expected);
        tcase_add_test(tc, test_sig_vectors_match_generator);
        suite_add_tcase(s, tc);

        tc = tcase_create("openssl");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_sig_openssl_verifies_1000_docs);
        tcase_add_test(tc, test_sig_openssl_signed_verify_here);
        suite_add_tcase(s, tc);
        return s;
}
