/* Key files: the permission rules (as ssh's for private keys), file types
 * that must be refused without blocking, length limits, and the exact
 * bytes kept (one trailing newline removed, no more). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "key.h"
#include "testutil.h"

#define KEY32 "0123456789abcdef0123456789abcdef"
static const char key32[] = KEY32;

static int load_mode(mode_t mode, char *err, size_t errlen)
{
        char *d = tu_tmpdir();
        char *p = tu_file_in(d, "k", key32, 32, mode);
        hd_key *k = NULL;
        int r = hd_key_load(p, &k, err, errlen);

        if (r == 0)
                ck_assert_ptr_nonnull(k);
        else
                ck_assert_ptr_null(k);
        hd_key_free(k);
        free(p);
        free(d);
        return r;
}

START_TEST(test_key_mode_0600_and_0640_accepted)
{
        char err[256] = "untouched";

        ck_assert_int_eq(load_mode(0600, err, sizeof(err)), 0);
        ck_assert_int_eq(load_mode(0640, err, sizeof(err)), 0);
        ck_assert_int_eq(load_mode(0400, err, sizeof(err)), 0);
        ck_assert_int_eq(load_mode(0440, NULL, 0), 0);
}
END_TEST

START_TEST(test_key_mode_too_open_refused)
{
        static const mode_t modes[] = { 0644, 0620, 0602, 0604, 0666, 0660, 0601, 0622 };
        char err[512];

        for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
                char want[32];
                err[0] = '\0';
                ck_assert_int_eq(load_mode(modes[i], err, sizeof(err)), -EPERM);
                snprintf(want, sizeof(want), "has mode %04o", (unsigned)modes[i]);
                ck_assert_msg(strstr(err, want), "mode %o: '%s'", modes[i], err);
                ck_assert_msg(strstr(err, "chmod 600 or 640"), "'%s'", err);
                ck_assert_ptr_null(strchr(err, '\n'));
        }
}
END_TEST

START_TEST(test_key_message_names_file)
{
        char *d = tu_tmpdir();
        char *p = tu_file_in(d, "wide.key", key32, 32, 0644);
        char err[512], want[600];
        hd_key *k = NULL;

        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EPERM);
        snprintf(want, sizeof(want),
                 "key file '%s' has mode 0644: it must not be accessible by others "
                 "or writable by group (chmod 600 or 640)", p);
        ck_assert_str_eq(err, want);
        free(p);
        free(d);
}
END_TEST

START_TEST(test_key_symlink_refused)
{
        char *d = tu_tmpdir();
        char *p = tu_file_in(d, "real", key32, 32, 0600);
        char *l, err[512];
        hd_key *k = NULL;

        ck_assert_int_ge(asprintf(&l, "%s/link", d), 0);
        ck_assert_int_eq(symlink(p, l), 0);
        ck_assert_int_eq(hd_key_load(l, &k, err, sizeof(err)), -ELOOP);
        ck_assert_ptr_null(k);
        ck_assert_ptr_nonnull(strstr(err, "symbolic link"));
        ck_assert_ptr_nonnull(strstr(err, l));
        free(l);
        free(p);
        free(d);
}
END_TEST

START_TEST(test_key_directory_refused)
{
        char *d = tu_tmpdir();
        char err[512];
        hd_key *k = NULL;

        ck_assert_int_eq(chmod(d, 0700), 0);
        ck_assert_int_lt(hd_key_load(d, &k, err, sizeof(err)), 0);
        ck_assert_ptr_null(k);
        ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
        free(d);
}
END_TEST

START_TEST(test_key_fifo_refused_without_blocking)
{
        char *d = tu_tmpdir();
        char *p, err[512];
        hd_key *k = NULL;

        /* No writer ever opens it: a blocking open would hang until the
         * test's timeout kills it. */
        ck_assert_int_ge(asprintf(&p, "%s/fifo", d), 0);
        ck_assert_int_eq(mkfifo(p, 0600), 0);
        alarm(5);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EINVAL);
        alarm(0);
        ck_assert_ptr_null(k);
        ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
        free(p);
        free(d);
}
END_TEST

START_TEST(test_key_missing_file)
{
        char err[512];
        hd_key *k = NULL;

        ck_assert_int_eq(hd_key_load("/nonexistent/handoffd.key", &k, err, sizeof(err)),
                         -ENOENT);
        ck_assert_ptr_nonnull(strstr(err, "/nonexistent/handoffd.key"));
}
END_TEST

START_TEST(test_key_short_refused)
{
        char *d = tu_tmpdir();
        char *p = tu_file_in(d, "short", "01234567890123456789\n", 21, 0600);
        char err[512], want[600];
        hd_key *k = NULL;

        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_null(k);
        snprintf(want, sizeof(want), "key file '%s' holds 20 bytes; at least 32 are needed", p);
        ck_assert_str_eq(err, want);
        free(p);
        /* 31 bytes and a newline: the newline does not count. */
        p = tu_file_in(d, "k31", "0123456789abcdef0123456789abcde\n", 32, 0600);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EINVAL);
        free(p);
        p = tu_file_in(d, "empty", "", 0, 0600);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EINVAL);
        free(p);
        free(d);
}
END_TEST

START_TEST(test_key_long_refused)
{
        char *d = tu_tmpdir();
        char buf[HD_KEY_MAX_LEN + 2];
        char *p, err[512];
        hd_key *k = NULL;

        memset(buf, 'k', sizeof(buf));
        p = tu_file_in(d, "max", buf, HD_KEY_MAX_LEN, 0600);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), 0);
        ck_assert_uint_eq(k->len, HD_KEY_MAX_LEN);
        hd_key_free(k);
        k = NULL;
        free(p);
        buf[HD_KEY_MAX_LEN] = '\n';
        p = tu_file_in(d, "maxnl", buf, HD_KEY_MAX_LEN + 1, 0600);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), 0);
        ck_assert_uint_eq(k->len, HD_KEY_MAX_LEN);
        hd_key_free(k);
        k = NULL;
        free(p);
        buf[HD_KEY_MAX_LEN] = 'k';
        p = tu_file_in(d, "over", buf, HD_KEY_MAX_LEN + 1, 0600);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_null(k);
        free(p);
        p = tu_file_in(d, "way-over", buf, sizeof(buf), 0600);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EINVAL);
        free(p);
        free(d);
}
END_TEST

static void expect_bytes(const char *content, size_t len, const char *want, size_t wlen)
{
        char *d = tu_tmpdir();
        char *p = tu_file_in(d, "k", content, len, 0600);
        char err[512];
        hd_key *k = NULL;

        ck_assert_msg(hd_key_load(p, &k, err, sizeof(err)) == 0, "%s", err);
        ck_assert_uint_eq(k->len, wlen);
        ck_assert(memcmp(k->bytes, want, wlen) == 0);
        hd_key_free(k);
        free(p);
        free(d);
}

START_TEST(test_key_trailing_newline_stripped_once)
{
        expect_bytes(KEY32, 32, KEY32, 32);
        expect_bytes(KEY32 "\n", 33, KEY32, 32);
        expect_bytes(KEY32 "\n\n", 34, KEY32 "\n", 33);
        /* Only "\n" is a line end here; a CR stays part of the key. */
        expect_bytes(KEY32 "\r\n", 34, KEY32 "\r", 33);
        expect_bytes(KEY32 " ", 33, KEY32 " ", 33);
        /* Binary keys are fine, NUL bytes included. */
        expect_bytes("\0\1\2\3\4\5\6\7\0\1\2\3\4\5\6\7\0\1\2\3\4\5\6\7\0\1\2\3\4\5\6\7", 32,
                     "\0\1\2\3\4\5\6\7\0\1\2\3\4\5\6\7\0\1\2\3\4\5\6\7\0\1\2\3\4\5\6\7", 32);
}
END_TEST

START_TEST(test_key_from_bytes)
{
        hd_key *k = NULL;

        ck_assert_int_eq(hd_key_from_bytes(key32, 31, &k), -EINVAL);
        ck_assert_ptr_null(k);
        ck_assert_int_eq(hd_key_from_bytes(key32, 32, &k), 0);
        ck_assert_uint_eq(k->len, 32);
        ck_assert(memcmp(k->bytes, key32, 32) == 0);
        /* A copy: the caller may wipe its buffer. */
        ck_assert_ptr_ne(k->bytes, key32);
        hd_key_free(k);
        hd_key_free(NULL);
}
END_TEST

Suite *suite_key(void);
Suite *suite_key(void)
{
        Suite *s = suite_create("key");
        TCase *tc = tcase_create("load");

        tcase_set_timeout(tc, 20);
        tcase_add_test(tc, test_key_mode_0600_and_0640_accepted);
        tcase_add_test(tc, test_key_mode_too_open_refused);
        tcase_add_test(tc, test_key_message_names_file);
        tcase_add_test(tc, test_key_symlink_refused);
        tcase_add_test(tc, test_key_directory_refused);
        tcase_add_test(tc, test_key_fifo_refused_without_blocking);
        tcase_add_test(tc, test_key_missing_file);
        tcase_add_test(tc, test_key_short_refused);
        tcase_add_test(tc, test_key_long_refused);
        tcase_add_test(tc, test_key_trailing_newline_stripped_once);
        tcase_add_test(tc, test_key_from_bytes);
        suite_add_tcase(s, tc);
        return s;
}
