/* The receipts' journal (src/handoffd/receipt_journal.c): records read
 * back in order, a torn last record cut back, a short write (a full disk)
 * leaving no torn record behind it, a rewrite keeping only what it is
 * given. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "receipt_journal.h"
#include "testutil.h"

struct seen {
        char text[4096];
        int n;
};

/* Each record as "kind:f0,f1,...;" */
static int collect(void *ctx, const struct rj_rec *rec)
{
        static const unsigned arity[_RJ_MAX] = { 2, 4, 2, 2, 1, 2 };
        struct seen *s = ctx;

        snprintf(s->text + strlen(s->text), sizeof(s->text) - strlen(s->text), "%d:", rec->kind);
        for (unsigned i = 0; i < arity[rec->kind]; i++)
                snprintf(s->text + strlen(s->text), sizeof(s->text) - strlen(s->text), "%s%s",
                         i ? "," : "", rec->f[i]);
        snprintf(s->text + strlen(s->text), sizeof(s->text) - strlen(s->text), ";");
        s->n++;
        return 0;
}

static int open_dir(void)
{
        char *d = tu_tmpdir();
        int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        free(d);
        return fd;
}

static void reread(int dfd, struct seen *s)
{
        struct rjournal j;

        memset(s, 0, sizeof(*s));
        ck_assert_int_eq(rj_open(&j, dfd, true, collect, s), 0);
        rj_close(&j);
}

START_TEST(test_journal_records_read_back_in_order)
{
        int dfd = open_dir();
        struct rjournal j;
        struct seen s = { 0 };

        ck_assert_int_eq(rj_open(&j, dfd, true, collect, &s), 0);
        ck_assert_int_eq(s.n, 0);
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_OWE, { "id1", "a" } }), 0);
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_OUT, { "id1", "consumed", "a",
                                                                   "{\"detail\":\"with spaces in it\"}" } }), 0);
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_DONE, { "id2" } }), 0);
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_RES, { "id1", "a" } }), 0);
        /* a space in a field that is not the last, a newline anywhere: refused */
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_OWE, { "id 3", "a" } }), -EINVAL);
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_SENT, { "id3", "x\ny" } }), -EINVAL);
        ck_assert_int_eq(rj_sync(&j), 0);
        rj_close(&j);
        reread(dfd, &s);
        ck_assert_int_eq(s.n, 4);
        ck_assert_str_eq(s.text, "0:id1,a;1:id1,consumed,a,{\"detail\":\"with spaces in it\"};4:id2;"
                         "5:id1,a;");
        close(dfd);
}
END_TEST

START_TEST(test_journal_torn_last_record_is_cut_back)
{
        int dfd = open_dir();
        struct rjournal j;
        struct seen s = { 0 };
        struct stat st;

        ck_assert_int_eq(rj_open(&j, dfd, true, collect, &s), 0);
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_SENT, { "id1", "n1.json" } }), 0);
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_SENT, { "id2", "n2.json" } }), 0);
        rj_close(&j);
        ck_assert_int_eq(fstatat(dfd, RJ_NAME, &st, 0), 0);
        off_t whole = st.st_size;
        /* half a record, as a power cut in its append leaves it; then one
         * whose sum is wrong */
        int fd = openat(dfd, RJ_NAME, O_WRONLY | O_APPEND | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "sent id3 n3.json 0123", 21), 21);
        close(fd);
        log_set_expected("a torn record made by the test");
        reread(dfd, &s);
        ck_assert_str_eq(s.text, "3:id1,n1.json;3:id2,n2.json;");
        ck_assert_int_eq(fstatat(dfd, RJ_NAME, &st, 0), 0);
        ck_assert_int_eq(st.st_size, whole);
        fd = openat(dfd, RJ_NAME, O_WRONLY | O_APPEND | O_CLOEXEC);
        ck_assert_int_eq(write(fd, "done id1 0000000000000000\n", 26), 26);
        close(fd);
        reread(dfd, &s);
        log_set_expected(NULL);
        ck_assert_int_eq(s.n, 2);
        /* appends after the cut read back */
        ck_assert_int_eq(rj_open(&j, dfd, true, collect, &s), 0);
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_DONE, { "id2" } }), 0);
        rj_close(&j);
        reread(dfd, &s);
        ck_assert_str_eq(s.text, "3:id1,n1.json;3:id2,n2.json;4:id2;");
        close(dfd);
}
END_TEST

START_TEST(test_journal_short_write_leaves_no_torn_record)
{
        int dfd = open_dir();
        struct rjournal j;
        struct seen s = { 0 };
        struct rlimit rl;
        char big[2048];
        struct stat st;

        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        ck_assert_int_eq(rj_open(&j, dfd, true, collect, &s), 0);
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_OWE, { "id1", "a" } }), 0);
        ck_assert_int_eq(fstatat(dfd, RJ_NAME, &st, 0), 0);
        /* the file may grow 100 bytes more: the next record is written
         * short, as on a full disk */
        signal(SIGXFSZ, SIG_IGN);
        ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
        struct rlimit small = { .rlim_cur = (rlim_t)st.st_size + 100, .rlim_max = rl.rlim_max };
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
        int q = rj_append(&j, &(struct rj_rec){ RJ_OUT, { "id1", "delivered", "a", big } });
        ck_assert_int_lt(q, 0);
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
        ck_assert_int_eq(fstatat(dfd, RJ_NAME, &st, 0), 0);
        ck_assert_int_eq(st.st_size, j.size);
        /* the disk has room again: the next record follows the last
         * whole one */
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_PUB, { "id1", "delivered" } }), 0);
        rj_close(&j);
        reread(dfd, &s);
        ck_assert_str_eq(s.text, "0:id1,a;2:id1,delivered;");
        close(dfd);
}
END_TEST

static int emit_one(void *ctx, struct rjournal *nj)
{
        (void)ctx;
        return rj_append(nj, &(struct rj_rec){ RJ_OWE, { "kept", "b" } });
}

START_TEST(test_journal_rewrite_keeps_what_it_is_given)
{
        int dfd = open_dir();
        struct rjournal j;
        struct seen s = { 0 };

        ck_assert_int_eq(rj_open(&j, dfd, true, collect, &s), 0);
        for (int i = 0; i < 10; i++)
                ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_DONE, { "gone" } }), 0);
        ck_assert_int_eq(rj_rewrite(&j, emit_one, NULL), 0);
        ck_assert_uint_eq(j.n_rec, 1);
        ck_assert_int_eq(rj_append(&j, &(struct rj_rec){ RJ_DONE, { "after" } }), 0);
        rj_close(&j);
        reread(dfd, &s);
        ck_assert_str_eq(s.text, "0:kept,b;4:after;");
        close(dfd);
}
END_TEST

Suite *suite_receipt_journal(void);
Suite *suite_receipt_journal(void)
{
        Suite *s = suite_create("receipt_journal");
        TCase *tc = tcase_create("journal");
        tcase_add_test(tc, test_journal_records_read_back_in_order);
        tcase_add_test(tc, test_journal_torn_last_record_is_cut_back);
        tcase_add_test(tc, test_journal_short_write_leaves_no_torn_record);
        tcase_add_test(tc, test_journal_rewrite_keeps_what_it_is_given);
        suite_add_tcase(s, tc);
        return s;
}
