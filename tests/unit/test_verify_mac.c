/* Verification of the MAC against an independent signer: unknown keys
 * and the lookup's arguments, the MAC checked before the fields, its
 * strict format, documents signed by python3 (tests/py/hdproto.py) verify
 * and every single-field tamper reads as bad_mac, and the committed
 * vectors in tests/vectors/ give their expected reasons and match what
 * their generator writes today. */
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

/* "2026-04-21T10:15:00Z" */
#define T0 INT64_C(1776766500000000)

static const hd_key *lookup_none(void *userdata, const char *kid, const char *from)
{
        return NULL;
}

/* ---- MAC and keys --------------------------------------------------- */

START_TEST(test_verify_unknown_key)
{
        hd_key *k = tu_hmac_key();
        struct tu_lookup_log l = { .key = k, .only_kid = "k-2026" };
        json_t *d = tu_hmac_doc();
        hd_verdict v;

        ck_assert_int_eq(hd_sign(d, k), 0);
        /* No kid: the lookup gets the sender and no kid. */
        ck_assert_int_eq(hd_verify(d, tu_lookup_log_cb, &l, NULL, NULL, T0, &v), 0);
        ck_assert(l.kid_null);
        ck_assert_str_eq(l.from, "alice");
        ck_assert_int_eq(hd_verify(d, lookup_none, NULL, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_UNKNOWN_KEY);
        ck_assert_ptr_nonnull(strstr(v.detail, "alice"));

        json_object_set_new(d, "kid", json_string("k-2026"));
        ck_assert_int_eq(hd_sign(d, k), 0);
        ck_assert_int_eq(hd_verify(d, tu_lookup_log_cb, &l, NULL, NULL, T0, &v), 0);
        ck_assert_str_eq(l.kid, "k-2026");
        ck_assert_str_eq(l.from, "alice");

        json_object_set_new(d, "kid", json_string("retired"));
        ck_assert_int_eq(hd_sign(d, k), 0);
        ck_assert_int_eq(hd_verify(d, tu_lookup_log_cb, &l, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_UNKNOWN_KEY);
        ck_assert_ptr_nonnull(strstr(v.detail, "\"retired\""));

        /* Neither kid nor sender: the lookup is asked for the default. */
        json_object_del(d, "kid");
        json_object_del(d, "from_agent");
        l.only_kid = NULL;
        ck_assert_int_eq(hd_verify(d, tu_lookup_log_cb, &l, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert(l.kid_null && l.from_null);
        json_decref(d);
        hd_key_free(k);
}
END_TEST

START_TEST(test_verify_mac_before_fields)
{
        hd_key *k = tu_hmac_key(), *other = NULL;
        struct tu_lookup_log l = { .key = k };
        json_t *d = tu_hmac_doc();
        hd_verdict v;

        ck_assert_int_eq(json_object_set_new(d, "handoff_id", json_string("../x")), 0);
        ck_assert_int_eq(hd_key_from_bytes("another key that is at least 32 bytes long", 42,
                                           &other), 0);
        ck_assert_int_eq(hd_sign(d, other), 0);
        ck_assert_int_eq(hd_verify(d, tu_lookup_log_cb, &l, NULL, NULL, T0, &v), -EBADMSG);
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
        hd_key *k = tu_hmac_key();
        json_t *d = tu_hmac_doc();
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
        json_t *d = tu_hmac_doc();
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

START_TEST(test_verify_payload_only_with_opts)
{
        hd_key *k = tu_hmac_key();
        struct tu_lookup_log l = { .key = k };
        hd_payload_opts opts = { 0 };
        json_t *d = tu_hmac_doc();
        hd_verdict v;

        json_object_set_new(d, "payload_type", json_string("no-such-type/9"));
        json_object_set_new(d, "payload", json_object());
        ck_assert_int_eq(hd_sign(d, k), 0);
        ck_assert_int_eq(hd_verify(d, tu_lookup_log_cb, &l, NULL, NULL, T0, &v), 0);
        ck_assert_int_eq(hd_verify(d, tu_lookup_log_cb, &l, NULL, &opts, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_PAYLOAD_INVALID);
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
        struct tu_lookup_log l = { .key = k };
        hd_verdict v;

        ck_assert_int_ge(asprintf(&docp, "%s/doc.json", d), 0);
        char *const argv[] = { "python3", "-B", cli, "sign", keyp, docp,
                               "--extra", "{\"x_float\": 0.1, \"x_uni\": \"\\u00e9\\ud83d\\ude00\\u007f\","
                               " \"x_big\": 1e300, \"kid\": \"k1\"}", NULL };
        ck_assert_msg(tu_run(argv, &out) == 0, "%s", out);
        free(out);
        json_t *doc = load_doc(d, "doc.json", &v);
        ck_assert_int_eq(hd_verify(doc, tu_lookup_log_cb, &l, NULL, NULL, hd_now_usec(), &v), 0);
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
        struct tu_lookup_log l = { .key = k };
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
        ck_assert_int_eq(hd_verify(doc, tu_lookup_log_cb, &l, NULL, NULL, hd_now_usec(), &v), 0);
        json_decref(doc);

        char *const tamper[] = { "python3", "-B", cli, "tamper", docp, tdir, NULL };
        ck_assert_msg(tu_run(tamper, &out) == 0, "%s", out);
        for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                doc = load_doc(tdir, line, &v);
                ck_assert_int_eq(hd_verify(doc, tu_lookup_log_cb, &l, NULL, NULL, hd_now_usec(), &v),
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
        json_t *doc = tu_hmac_doc();
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
Suite *suite_verify_mac(void);
Suite *suite_verify_mac(void)
{
        Suite *s = suite_create("verify_mac");
        TCase *tc;

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
