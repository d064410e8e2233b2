/* Reading and parsing untrusted files: hd_parse() limits and reasons,
 * hd_read_at() refusing FIFOs, links, directories and oversized files. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "testutil.h"

/* hd_parse on n bytes; returns the reason (HD_OK on success). */
static hd_reason parse_reason_n(const char *buf, size_t n, const hd_limits *lim)
{
        hd_verdict v = { .reason = _HD_R_MAX };
        json_t *doc = NULL;
        int r;

        r = hd_parse(buf, n, lim, &doc, &v);
        if (r == 0) {
                ck_assert_ptr_nonnull(doc);
                ck_assert_int_eq(v.reason, HD_OK);
                json_decref(doc);
                return HD_OK;
        }
        ck_assert_int_eq(r, -EBADMSG);
        ck_assert_ptr_null(doc);
        ck_assert_msg(v.detail[0] != '\0', "reason %s without detail",
                      hd_reason_name(v.reason));
        return v.reason;
}

static hd_reason parse_reason(const char *s, const hd_limits *lim)
{
        return parse_reason_n(s, strlen(s), lim);
}

/* "[[[...]]]" n deep inside {"a": ...} (depth n + 1), malloc'ed. */
static char *nested(size_t n)
{
        char *s = malloc(2 * n + 16), *p = s;

        ck_assert_ptr_nonnull(s);
        p += sprintf(p, "{\"a\":");
        memset(p, '[', n);
        p += n;
        memset(p, ']', n);
        p += n;
        strcpy(p, "}");
        return s;
}

START_TEST(test_parse_accepts_object)
{
        hd_verdict v;
        json_t *doc = NULL;
        const char *s = "{\"a\":[1,2.5,\"x\"],\"b\":{\"c\":null}}";

        ck_assert_int_eq(hd_parse(s, strlen(s), NULL, &doc, &v), 0);
        ck_assert_int_eq(v.reason, HD_OK);
        ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(doc, "a"), 0)), 1);
        json_decref(doc);
        /* not NUL-terminated: only len bytes count */
        ck_assert_int_eq(parse_reason_n("{\"a\":1}garbage", 7, NULL), HD_OK);
}
END_TEST

START_TEST(test_reject_duplicate_key)
{
        ck_assert_int_eq(parse_reason("{\"a\":1,\"a\":2}", NULL), HD_R_DUPLICATE_KEY);
        ck_assert_int_eq(parse_reason("{\"x\":{\"a\":1,\"b\":0,\"a\":1}}", NULL),
                         HD_R_DUPLICATE_KEY);
        /* the same key spelled two ways is still the same key */
        ck_assert_int_eq(parse_reason("{\"a\":1,\"\\u0061\":2}", NULL),
                         HD_R_DUPLICATE_KEY);
}
END_TEST

START_TEST(test_reject_too_deep)
{
        hd_limits lim = { .max_depth = 3 };
        char *s;

        ck_assert_int_eq(parse_reason("{\"a\":[{}]}", &lim), HD_OK);
        ck_assert_int_eq(parse_reason("{\"a\":[{\"b\":[]}]}", &lim), HD_R_TOO_DEEP);
        /* brackets inside strings, even after escaped quotes, are text */
        ck_assert_int_eq(parse_reason("{\"a\":\"\\\"[[[[{{{{\\\\\",\"b\":[[1]]}", &lim),
                         HD_OK);
        ck_assert_int_eq(parse_reason("{\"[[[[\":\"]]]]\"}", &lim), HD_OK);

        /* default 64: {"a": 63 arrays} is 64 deep, one more is too deep */
        s = nested(HD_DEFAULT_MAX_DEPTH - 1);
        ck_assert_int_eq(parse_reason(s, NULL), HD_OK);
        free(s);
        s = nested(HD_DEFAULT_MAX_DEPTH);
        ck_assert_int_eq(parse_reason(s, NULL), HD_R_TOO_DEEP);
        free(s);
}
END_TEST

START_TEST(test_reject_100000_deep_without_crash)
{
        size_t n = 100000;
        char *s = malloc(n + 1);

        ck_assert_ptr_nonnull(s);
        memset(s, '[', n);
        s[n] = '\0';
        ck_assert_int_eq(parse_reason(s, NULL), HD_R_TOO_DEEP);
        /* also under a limit above jansson's own 2048 */
        hd_limits lim = { .max_depth = 1000000, .max_values = 1000000 };
        hd_reason r = parse_reason(s, &lim);
        ck_assert_msg(r == HD_R_TOO_DEEP || r == HD_R_PARSE_ERROR,
                      "got %s", hd_reason_name(r));
        free(s);
        s = nested(n);
        ck_assert_int_eq(parse_reason(s, NULL), HD_R_TOO_DEEP);
        free(s);
}
END_TEST

START_TEST(test_reject_nul_byte)
{
        static const char s[] = "{\"a\":\"x\0y\"}";
        hd_verdict v;
        json_t *doc = NULL;

        ck_assert_int_eq(hd_parse(s, sizeof(s) - 1, NULL, &doc, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_PARSE_ERROR);
        ck_assert_msg(strstr(v.detail, "offset 7") != NULL, "%s", v.detail);
        /* escaped NUL is refused too (jansson without JSON_ALLOW_NUL) */
        ck_assert_int_eq(parse_reason("{\"a\":\"\\u0000\"}", NULL), HD_R_PARSE_ERROR);
}
END_TEST

START_TEST(test_reject_invalid_utf8)
{
        ck_assert_int_eq(parse_reason("{\"a\":\"\xff\"}", NULL), HD_R_PARSE_ERROR);
        ck_assert_int_eq(parse_reason("{\"a\":\"\xc0\xaf\"}", NULL), HD_R_PARSE_ERROR);
        /* CESU-style encoded surrogate */
        ck_assert_int_eq(parse_reason("{\"a\":\"\xed\xa0\x80\"}", NULL), HD_R_PARSE_ERROR);
        /* lone escaped surrogate */
        ck_assert_int_eq(parse_reason("{\"a\":\"\\ud800\"}", NULL), HD_R_PARSE_ERROR);
        ck_assert_int_eq(parse_reason("{\"\xfe\":1}", NULL), HD_R_PARSE_ERROR);
}
END_TEST

START_TEST(test_reject_syntax_with_position)
{
        hd_verdict v;
        json_t *doc = NULL;
        const char *s = "{\"a\":1,\n\"b\":}";

        ck_assert_int_eq(hd_parse(s, strlen(s), NULL, &doc, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_PARSE_ERROR);
        ck_assert_msg(strstr(v.detail, "line 2") != NULL, "%s", v.detail);
        ck_assert_int_eq(parse_reason("", NULL), HD_R_PARSE_ERROR);
        ck_assert_int_eq(parse_reason("{\"a\":1} {}", NULL), HD_R_PARSE_ERROR);
        ck_assert_int_eq(parse_reason("{\"a\":NaN}", NULL), HD_R_PARSE_ERROR);
        ck_assert_int_eq(parse_reason("{\"a\":Infinity}", NULL), HD_R_PARSE_ERROR);
}
END_TEST

START_TEST(test_reject_number_out_of_range)
{
        ck_assert_int_eq(parse_reason("{\"a\":9223372036854775807}", NULL), HD_OK);
        ck_assert_int_eq(parse_reason("{\"a\":-9223372036854775808}", NULL), HD_OK);
        ck_assert_int_eq(parse_reason("{\"a\":18446744073709551616}", NULL),
                         HD_R_NUMBER_OUT_OF_RANGE);
        ck_assert_int_eq(parse_reason("{\"a\":9223372036854775808}", NULL),
                         HD_R_NUMBER_OUT_OF_RANGE);
        ck_assert_int_eq(parse_reason("{\"a\":-9223372036854775809}", NULL),
                         HD_R_NUMBER_OUT_OF_RANGE);
        ck_assert_int_eq(parse_reason("{\"a\":1e400}", NULL), HD_R_NUMBER_OUT_OF_RANGE);
        ck_assert_int_eq(parse_reason("{\"a\":[-1e400]}", NULL), HD_R_NUMBER_OUT_OF_RANGE);
}
END_TEST

START_TEST(test_reject_top_level_not_object)
{
        ck_assert_int_eq(parse_reason("[1,2]", NULL), HD_R_BAD_TYPE);
        ck_assert_int_eq(parse_reason("[]", NULL), HD_R_BAD_TYPE);
        ck_assert_int_eq(parse_reason("\"str\"", NULL), HD_R_BAD_TYPE);
        ck_assert_int_eq(parse_reason("42", NULL), HD_R_BAD_TYPE);
        ck_assert_int_eq(parse_reason("null", NULL), HD_R_BAD_TYPE);
}
END_TEST

START_TEST(test_reject_too_many_values)
{
        hd_limits lim = { .max_values = 6 };
        /* 6 values: the object, key "a", the array, 1, "x" (a string with
         * brackets and commas inside counts once), true */
        ck_assert_int_eq(parse_reason("{\"a\":[1, \"x,[{]\" ,true]}", &lim), HD_OK);
        ck_assert_int_eq(parse_reason("{\"a\":[1,\"x\",true,null]}", &lim), HD_R_TOO_MANY_VALUES);
        ck_assert_int_eq(parse_reason("{\"a\":[{},{},{},{}]}", &lim), HD_R_TOO_MANY_VALUES);
        ck_assert_int_eq(parse_reason("{\"a\":-1.5e+3,\"b\":2}", &lim), HD_OK);
}
END_TEST

/* Issue 19.4: a 1 MiB file of empty objects (about 350,000 of them, some
 * 80 MB once parsed) is refused by the default cap before jansson sees it. */
START_TEST(test_reject_mib_of_empty_objects)
{
        size_t n = 1024 * 1024;
        char *b = malloc(n + 1);
        hd_verdict v;
        json_t *doc = NULL;
        size_t o;

        ck_assert_ptr_nonnull(b);
        o = (size_t)sprintf(b, "{\"x\":[");
        while (o + 5 < n) {
                memcpy(b + o, "{},", 3);
                o += 3;
        }
        memcpy(b + o - 1, "]}", 3);
        o += 1;
        ck_assert_int_eq(hd_parse(b, o, NULL, &doc, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_TOO_MANY_VALUES);
        ck_assert_ptr_null(doc);
        free(b);
}
END_TEST

START_TEST(test_reject_too_large)
{
        hd_limits lim = { .max_size = 10 };

        ck_assert_int_eq(parse_reason("{\"a\":1234}", &lim), HD_OK);   /* 10 */
        ck_assert_int_eq(parse_reason("{\"a\":12345}", &lim), HD_R_TOO_LARGE);
}
END_TEST

/* ---- hd_read_at ------------------------------------------------------- */

static int open_dir(const char *d)
{
        int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        return fd;
}

static int read_reason(int dfd, const char *name, size_t max, hd_reason *ret)
{
        hd_verdict v = { .reason = _HD_R_MAX };
        char *buf = NULL;
        size_t len = 12345;
        int r;

        r = hd_read_at(dfd, name, max, &buf, &len, &v);
        if (r == 0)
                free(buf);
        else {
                ck_assert_ptr_null(buf);
                ck_assert_uint_eq(len, 12345);
        }
        *ret = v.reason;
        return r;
}

START_TEST(test_read_regular_file)
{
        char *d = tu_tmpdir(), path[4096];
        int dfd = open_dir(d);
        hd_verdict v;
        char *buf = NULL;
        size_t len;
        json_t *doc = NULL;

        snprintf(path, sizeof(path), "%s/f.json", d);
        tu_write_file(path, "{\"a\":1}", 7);
        ck_assert_int_eq(hd_read_at(dfd, "f.json", 0, &buf, &len, &v), 0);
        ck_assert_uint_eq(len, 7);
        ck_assert_str_eq(buf, "{\"a\":1}");
        free(buf);
        /* exactly the limit is fine */
        ck_assert_int_eq(hd_read_at(dfd, "f.json", 7, &buf, &len, &v), 0);
        free(buf);

        ck_assert_int_eq(hd_load_at(dfd, "f.json", NULL, &doc, &v), 0);
        ck_assert_int_eq(json_integer_value(json_object_get(doc, "a")), 1);
        json_decref(doc);
        close(dfd);
        free(d);
}
END_TEST

START_TEST(test_read_fifo_not_regular_without_blocking)
{
        char *d = tu_tmpdir(), path[4096];
        int dfd = open_dir(d);
        hd_reason why;

        snprintf(path, sizeof(path), "%s/fifo.json", d);
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        /* a blocking open would wait for a writer forever */
        alarm(5);
        ck_assert_int_eq(read_reason(dfd, "fifo.json", 0, &why), -EBADMSG);
        alarm(0);
        ck_assert_int_eq(why, HD_R_NOT_REGULAR);
        close(dfd);
        free(d);
}
END_TEST

START_TEST(test_read_symlink_not_regular)
{
        char *d = tu_tmpdir(), path[4096], target[4096];
        int dfd = open_dir(d);
        hd_reason why;

        snprintf(target, sizeof(target), "%s/real.json", d);
        tu_write_file(target, "{}", 2);
        snprintf(path, sizeof(path), "%s/link.json", d);
        ck_assert_int_eq(symlink(target, path), 0);
        ck_assert_int_eq(read_reason(dfd, "link.json", 0, &why), -EBADMSG);
        ck_assert_int_eq(why, HD_R_NOT_REGULAR);
        /* dangling too */
        snprintf(path, sizeof(path), "%s/dangling.json", d);
        ck_assert_int_eq(symlink("/nonexistent/x", path), 0);
        ck_assert_int_eq(read_reason(dfd, "dangling.json", 0, &why), -EBADMSG);
        ck_assert_int_eq(why, HD_R_NOT_REGULAR);
        close(dfd);
        free(d);
}
END_TEST

START_TEST(test_read_hardlink_refused)
{
        char *d = tu_tmpdir(), a[4096], b[4096];
        int dfd = open_dir(d);
        hd_reason why;

        snprintf(a, sizeof(a), "%s/a.json", d);
        snprintf(b, sizeof(b), "%s/b.json", d);
        tu_write_file(a, "{}", 2);
        ck_assert_int_eq(read_reason(dfd, "a.json", 0, &why), 0);
        ck_assert_int_eq(link(a, b), 0);
        ck_assert_int_eq(read_reason(dfd, "a.json", 0, &why), -EBADMSG);
        ck_assert_int_eq(why, HD_R_HARDLINK);
        ck_assert_int_eq(read_reason(dfd, "b.json", 0, &why), -EBADMSG);
        ck_assert_int_eq(why, HD_R_HARDLINK);
        close(dfd);
        free(d);
}
END_TEST

START_TEST(test_read_directory_not_regular)
{
        char *d = tu_tmpdir(), path[4096];
        int dfd = open_dir(d);
        hd_reason why;

        snprintf(path, sizeof(path), "%s/sub.json", d);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        ck_assert_int_eq(read_reason(dfd, "sub.json", 0, &why), -EBADMSG);
        ck_assert_int_eq(why, HD_R_NOT_REGULAR);
        close(dfd);
        free(d);
}
END_TEST

START_TEST(test_read_too_large)
{
        char *d = tu_tmpdir(), path[4096];
        int dfd = open_dir(d);
        hd_reason why;
        hd_limits lim = { .max_size = 100 };
        hd_verdict v;
        json_t *doc = NULL;
        char big[101];

        memset(big, ' ', sizeof(big));
        big[0] = '{';
        big[100] = '}';
        snprintf(path, sizeof(path), "%s/big.json", d);
        tu_write_file(path, big, sizeof(big));
        ck_assert_int_eq(read_reason(dfd, "big.json", 100, &why), -EBADMSG);
        ck_assert_int_eq(why, HD_R_TOO_LARGE);
        ck_assert_int_eq(hd_load_at(dfd, "big.json", &lim, &doc, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_TOO_LARGE);
        ck_assert_int_eq(read_reason(dfd, "big.json", 101, &why), 0);
        close(dfd);
        free(d);
}
END_TEST

START_TEST(test_read_size_lies_still_capped)
{
        /* procfs files claim size 0 and hold more: the cap must come from
         * what is read, not from st_size. */
        int dfd = open_dir("/proc/self");
        hd_reason why;
        struct stat st;

        ck_assert_int_eq(fstatat(dfd, "status", &st, 0), 0);
        ck_assert_int_eq(st.st_size, 0);
        ck_assert_int_eq(read_reason(dfd, "status", 16, &why), -EBADMSG);
        ck_assert_int_eq(why, HD_R_TOO_LARGE);
        ck_assert_int_eq(read_reason(dfd, "status", 1 << 20, &why), 0);
        close(dfd);
}
END_TEST

START_TEST(test_read_missing_enoent)
{
        char *d = tu_tmpdir();
        int dfd = open_dir(d);
        hd_reason why;
        json_t *doc = NULL;

        ck_assert_int_eq(read_reason(dfd, "gone.json", 0, &why), -ENOENT);
        ck_assert_int_eq(hd_load_at(dfd, "gone.json", NULL, &doc, NULL), -ENOENT);
        ck_assert_ptr_null(doc);
        close(dfd);
        free(d);
}
END_TEST

Suite *suite_parse(void);
Suite *suite_parse(void)
{
        Suite *s = suite_create("parse");
        TCase *tp = tcase_create("parse");
        TCase *tr = tcase_create("read");

        tcase_add_test(tp, test_parse_accepts_object);
        tcase_add_test(tp, test_reject_duplicate_key);
        tcase_add_test(tp, test_reject_too_deep);
        tcase_add_test(tp, test_reject_100000_deep_without_crash);
        tcase_add_test(tp, test_reject_nul_byte);
        tcase_add_test(tp, test_reject_invalid_utf8);
        tcase_add_test(tp, test_reject_syntax_with_position);
        tcase_add_test(tp, test_reject_number_out_of_range);
        tcase_add_test(tp, test_reject_top_level_not_object);
        tcase_add_test(tp, test_reject_too_large);
        tcase_add_test(tp, test_reject_too_many_values);
        tcase_add_test(tp, test_reject_mib_of_empty_objects);
        suite_add_tcase(s, tp);

        tcase_add_test(tr, test_read_regular_file);
        tcase_add_test(tr, test_read_fifo_not_regular_without_blocking);
        tcase_add_test(tr, test_read_symlink_not_regular);
        tcase_add_test(tr, test_read_hardlink_refused);
        tcase_add_test(tr, test_read_directory_not_regular);
        tcase_add_test(tr, test_read_too_large);
        tcase_add_test(tr, test_read_size_lies_still_capped);
        tcase_add_test(tr, test_read_missing_enoent);
        suite_add_tcase(s, tr);
        return s;
}
