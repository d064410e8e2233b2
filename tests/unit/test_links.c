/* A file in handoff/ with more than one link (spool.c
 * store_drop_claim_leftover(), issue 34.7), and what may not leave
 * handoff/ or stay in spent/ (issue 34.2), decided on a temp spool opened
 * as the daemon opens it: the other link is looked for only where the
 * daemon itself would have put it; the further names of a file rejected
 * already go without a rejection each; a directory is never moved; the
 * reaper of spent/ goes past what it cannot remove. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "daemonfx.h"
#include "intake.h"
#include "testutil.h"

static int decide(struct fx *f, const char *name, int want_errors)
{
        char *names[1] = { (char *)name };
        int out = -1;

        ck_assert_int_eq(intake_batch(&f->p, names, 1, hd_now_usec(), &out), want_errors);
        return out;
}

static void link_in(struct fx *f, enum spool_dir from, const char *a, enum spool_dir to,
                    const char *b)
{
        ck_assert_int_eq(linkat(f->sp->fd[from], a, f->sp->fd[to], b, 0), 0);
}

static bool there(struct fx *f, enum spool_dir d, const char *name)
{
        return fx_there(f->sp->fd[d], "", name, "");
}

/* Beside its rejection under the name store_reject_from() gave it (the
 * first free of NAME, NAME~1 ...): a power cut's leftover, removed. */
START_TEST(test_links_leftover_beside_its_rejection_goes)
{
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_REJECTED], "", "x.json", "", "an earlier x.json");
        fx_put(f.sp->fd[SD_HANDOFF], "", "x.json", "", "{}");
        link_in(&f, SD_HANDOFF, "x.json", SD_REJECTED, "x.json~1");
        ck_assert_int_eq(decide(&f, "x.json", 0), IO_GONE);
        ck_assert(!there(&f, SD_HANDOFF, "x.json"));
        ck_assert(there(&f, SD_REJECTED, "x.json~1"));
        ck_assert(!there(&f, SD_REJECTED, "x.json~2"));
        fx_close(&f);
}
END_TEST

/* A link anywhere else (another name in rejected/) is no move of the
 * daemon's: a hardlink, rejected; not found by listing rejected/. */
START_TEST(test_links_a_link_the_daemon_did_not_make_is_a_hardlink)
{
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_HANDOFF], "", "y.json", "", "{}");
        link_in(&f, SD_HANDOFF, "y.json", SD_REJECTED, "elsewhere.json");
        ck_assert_int_eq(decide(&f, "y.json", 0), IO_REJECTED);
        ck_assert(!there(&f, SD_HANDOFF, "y.json"));
        ck_assert(there(&f, SD_REJECTED, "y.json.reason"));
        fx_close(&f);
}
END_TEST

/* One file, many names in handoff/: one rejection, the other names go as
 * that file's. */
START_TEST(test_links_further_names_of_a_rejected_file_go)
{
        char name[32];
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_HANDOFF], "", ".orig", "", "{\"flood\":true}");
        for (int i = 0; i < 20; i++) {
                snprintf(name, sizeof(name), "f%02d.json", i);
                link_in(&f, SD_HANDOFF, ".orig", SD_HANDOFF, name);
        }
        ck_assert_int_eq(decide(&f, "f07.json", 0), IO_REJECTED);
        for (int i = 0; i < 20; i++) {
                snprintf(name, sizeof(name), "f%02d.json", i);
                if (i != 7)
                        ck_assert_int_eq(decide(&f, name, 0), IO_GONE);
                ck_assert(!there(&f, SD_HANDOFF, name));
                ck_assert(there(&f, SD_REJECTED, name) == (i == 7));
        }
        ck_assert_uint_eq(f.sp->st.rejected[HD_R_HARDLINK], 1);
        fx_close(&f);
}
END_TEST

/* Beside a claim's move to spent/ (named by its inode): removed. */
START_TEST(test_links_leftover_beside_spent_goes)
{
        char ino[32];
        struct stat st;
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_HANDOFF], "", "z.json", "", "{}");
        ck_assert_int_eq(fstatat(f.sp->fd[SD_HANDOFF], "z.json", &st, 0), 0);
        snprintf(ino, sizeof(ino), "%llu", (unsigned long long)st.st_ino);
        link_in(&f, SD_HANDOFF, "z.json", SD_SPENT, ino);
        ck_assert_int_eq(decide(&f, "z.json", 0), IO_GONE);
        ck_assert(!there(&f, SD_HANDOFF, "z.json"));
        ck_assert(there(&f, SD_SPENT, ino));
        fx_close(&f);
}
END_TEST

/* A directory in handoff/ stays its owner's: not moved to rejected/,
 * where retention would never remove it; no error, looked at again it is
 * left again. */
START_TEST(test_links_a_directory_is_not_moved)
{
        struct fx f;

        fx_open(&f);
        ck_assert_int_eq(mkdirat(f.sp->fd[SD_HANDOFF], "d.json", 0777), 0);
        ck_assert_int_eq(decide(&f, "d.json", 0), IO_IGNORED);
        ck_assert_int_eq(decide(&f, "d.json", 0), IO_IGNORED);
        ck_assert(there(&f, SD_HANDOFF, "d.json"));
        ck_assert(!there(&f, SD_REJECTED, "d.json"));
        ck_assert(!there(&f, SD_REJECTED, "d.json.reason"));
        fx_close(&f);
}
END_TEST

/* The move takes only the inode decided on. */
START_TEST(test_links_a_move_takes_only_the_file_decided_on)
{
        struct spool_ino was;
        struct stat st;
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_HANDOFF], "", "m.json", "", "{}");
        ck_assert_int_eq(fstatat(f.sp->fd[SD_HANDOFF], "m.json", &st, 0), 0);
        was = (struct spool_ino) { .dev = st.st_dev, .ino = st.st_ino };
        /* swapped: kept elsewhere by its owner, another under its name */
        ck_assert_int_eq(renameat(f.sp->fd[SD_HANDOFF], "m.json", f.sp->fd[SD_TMP], "m.json"), 0);
        fx_put(f.sp->fd[SD_HANDOFF], "", "m.json", "", "{\"another\":1}");
        ck_assert_int_eq(store_take(f.sp, "m.json", &was, SD_REJECTED, "m.json"), -ENOENT);
        ck_assert(there(&f, SD_HANDOFF, "m.json"));
        ck_assert(!there(&f, SD_REJECTED, "m.json"));
        fx_close(&f);
}
END_TEST

/* The reaper frees everything but what it cannot remove. */
START_TEST(test_links_the_reaper_goes_past_a_directory)
{
        bool more = true;
        char name[32];
        struct fx f;
        int dfd;

        fx_open(&f);
        ck_assert_int_eq(mkdirat(f.sp->fd[SD_SPENT], "1", 0700), 0);
        dfd = openat(f.sp->fd[SD_SPENT], "1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dfd, 0);
        fx_put(dfd, "", "kept", "", "hers");
        close(dfd);
        for (int i = 0; i < 50; i++) {
                snprintf(name, sizeof(name), "%d", 1000 + i);
                fx_put(f.sp->fd[SD_SPENT], "", name, "", "{}");
        }
        f.sp->spent.waiting = true;
        ck_assert_int_eq(store_reap_spent(f.sp, 10 * 1000000LL, &more), 0);
        ck_assert(!more);
        ck_assert(!f.sp->spent.waiting);
        for (int i = 0; i < 50; i++) {
                snprintf(name, sizeof(name), "%d", 1000 + i);
                ck_assert(!there(&f, SD_SPENT, name));
        }
        ck_assert(there(&f, SD_SPENT, "1"));
        ck_assert_uint_eq(dict_count(&f.sp->spent.skipped), 1);
        /* again: said once */
        ck_assert_int_eq(store_reap_spent(f.sp, 10 * 1000000LL, &more), 0);
        ck_assert(!more);
        ck_assert_uint_eq(dict_count(&f.sp->spent.skipped), 1);
        fx_close(&f);
}
END_TEST

Suite *suite_links(void);
Suite *suite_links(void)
{
        Suite *s = suite_create("links");
        TCase *tc = tcase_create("links");
        tcase_add_test(tc, test_links_leftover_beside_its_rejection_goes);
        tcase_add_test(tc, test_links_a_link_the_daemon_did_not_make_is_a_hardlink);
        tcase_add_test(tc, test_links_further_names_of_a_rejected_file_go);
        tcase_add_test(tc, test_links_leftover_beside_spent_goes);
        tcase_add_test(tc, test_links_a_directory_is_not_moved);
        tcase_add_test(tc, test_links_a_move_takes_only_the_file_decided_on);
        tcase_add_test(tc, test_links_the_reaper_goes_past_a_directory);
        suite_add_tcase(s, tc);
        return s;
}
