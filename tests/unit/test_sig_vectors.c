/* Sender signatures (Ed25519) against a second implementation: the
 * vectors of tests/vectors/sig/ (signed by openssl) and their generator,
 * and 1,000 documents signed here checked by openssl, and the reverse. */
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
        hd_key *sk = tu_sig_gen(NULL);
        struct timespec t0, t1;
        long n = 0;

        ck_assert_int_ge(asprintf(&docs, "%s/docs", tmp), 0);
        ck_assert_int_eq(mkdir(docs, 0700), 0);
        ck_assert_int_eq(hd_key_format(sk, false, line, sizeof(line)), 0);
        pubp = tu_file_text(tmp, "k.pub", line, 0644);

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
        hd_key *sk = tu_sig_gen("openssl-1"), *pk = tu_sig_public_of(sk);
        struct tu_ring r = { .keys = { pk }, .n = 1 };
        _cleanup_close_ int dfd = -1;
        int count = 0;

        ck_assert_int_eq(hd_key_format(sk, true, line, sizeof(line)), 0);
        secp = tu_file_text(tmp, "k.key", line, 0600);
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
                ck_assert_msg(hd_auth_check(doc, tu_ring_lookup, &r, &v) == 0, "%s: %s: %s",
                              name, hd_reason_name(v.reason), v.detail);
                json_object_set_new(doc, "x_tampered", json_true());
                ck_assert_int_eq(hd_auth_check(doc, tu_ring_lookup, &r, &v), -EBADMSG);
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

Suite *suite_sig_vectors(void);
Suite *suite_sig_vectors(void)
{
        Suite *s = suite_create("sig_vectors");
        TCase *tc;

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
