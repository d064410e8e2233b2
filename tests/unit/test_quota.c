/* The inbox quota (src/handoffd/quota.c), called directly on a temp spool
 * opened twice, as two daemons open it: each one's count is the spool's;
 * a count taken while another daemon counts for the agent waits for a
 * later look; what a killed claim left counted is removed, unless its
 * claim is in flight (the id's lock held); what a power cut took from the
 * count is counted again by the first sweep after the start. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemonfx.h"
#include "intake.h"
#include "lifecycle.h"
#include "lock.h"
#include "quota.h"
#include "testutil.h"

/* How many quota/alice/<anchor> counts (-1: none made). */
static long count(struct spool *sp, const char *anchor)
{
        char p[200];
        struct stat st;

        snprintf(p, sizeof(p), "alice/%s", anchor);
        if (fstatat(sp->fd[SD_QUOTA], p, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -1;
        return (long)st.st_nlink - 1;
}

/* quota_take() for alice: 0 and counted, or its error; v's detail into
 * detail (may be NULL). */
static int take(struct spool *sp, const char *id, const char *from, char *detail, size_t n)
{
        hd_verdict v = { 0 };
        bool taken = false;
        int r = quota_take(sp, "alice", id, from, &v, &taken);

        if (r == 0)
                ck_assert_msg(taken, "%s not counted", id);
        if (r == -EBADMSG)
                ck_assert_int_eq(v.reason, HD_R_INBOX_FULL);
        if (detail)
                snprintf(detail, n, "%s", v.detail);
        return r;
}

static void open_two(struct fx *f, struct spool **sp2)
{
        fx_open(f);
        f->cfg->max_waiting_per_sender = 2;
        f->cfg->max_waiting = 3;
        ck_assert_int_eq(spool_open(f->cfg, sp2), 0);
}

START_TEST(test_quota_is_the_spools_for_every_daemon)
{
        struct spool *sp2;
        struct fx f;
        char d[300];

        open_two(&f, &sp2);
        ck_assert_int_eq(take(f.sp, "id-1", "bob", NULL, 0), 0);
        ck_assert_int_eq(take(sp2, "id-2", "bob", NULL, 0), 0);
        /* bob's third, in either daemon */
        ck_assert_int_eq(take(f.sp, "id-3", "bob", d, sizeof(d)), -EBADMSG);
        ck_assert_str_eq(d, "2 handoffs from bob already wait for alice (max_waiting_per_sender)");
        ck_assert_int_eq(take(sp2, "id-3", "bob", NULL, 0), -EBADMSG);
        ck_assert_int_eq(take(sp2, "id-4", "carol", NULL, 0), 0);
        ck_assert_int_eq(take(f.sp, "id-5", "carol", d, sizeof(d)), -EBADMSG);
        ck_assert_str_eq(d, "3 handoffs already wait for alice (max_waiting)");
        ck_assert_int_eq(count(f.sp, "count"), 3);
        ck_assert_int_eq(count(f.sp, "senders/bob"), 2);
        /* one daemon archives what the other counted: room for both */
        quota_release(sp2, "alice", "id-1");
        ck_assert_int_eq(take(f.sp, "id-5", "carol", NULL, 0), 0);
        ck_assert_int_eq(take(sp2, "id-6", "bob", NULL, 0), -EBADMSG);
        ck_assert_int_eq(count(f.sp, "senders/carol"), 2);
        spool_close(sp2);
        fx_close(&f);
}
END_TEST

START_TEST(test_quota_id_counted_once)
{
        struct spool *sp2;
        hd_verdict v = { 0 };
        bool taken = true;
        struct fx f;

        open_two(&f, &sp2);
        ck_assert_int_eq(take(f.sp, "id-1", "bob", NULL, 0), 0);
        /* another file with its id (a replay, or the retry of a claim a
         * kill cut short): counted already, not twice */
        ck_assert_int_eq(quota_take(sp2, "alice", "id-1", "bob", &v, &taken), 0);
        ck_assert(!taken);
        ck_assert_int_eq(count(f.sp, "count"), 1);
        spool_close(sp2);
        fx_close(&f);
}
END_TEST

START_TEST(test_quota_busy_while_another_daemon_counts)
{
        struct spool *sp2;
        struct fx f;
        uint64_t off = lock_off_quota("alice");

        open_two(&f, &sp2);
        ck_assert_int_eq(lock_try(sp2->lock_fd, off, true), 0);
        ck_assert_int_eq(take(f.sp, "id-1", "bob", NULL, 0), -EAGAIN);
        ck_assert_int_eq(count(f.sp, "count"), -1);
        lock_release(sp2->lock_fd, off);
        ck_assert_int_eq(take(f.sp, "id-1", "bob", NULL, 0), 0);
        spool_close(sp2);
        fx_close(&f);
}
END_TEST

START_TEST(test_quota_repair_removes_what_a_killed_claim_left)
{
        struct spool *sp2;
        struct fx f;
        uint64_t off = lock_off_id("id-2");

        open_two(&f, &sp2);
        /* id-1 and id-2 counted, no record made (the claimer was killed),
         * id-3 claimed: its record in claimed/ */
        ck_assert_int_eq(take(f.sp, "id-1", "bob", NULL, 0), 0);
        ck_assert_int_eq(take(f.sp, "id-2", "carol", NULL, 0), 0);
        ck_assert_int_eq(take(f.sp, "id-3", "bob", NULL, 0), 0);
        fx_put(f.sp->fd[SD_CLAIMED], "", "id-3", ".json", "{}");
        /* id-2's claim in flight in the other daemon: its lock held */
        ck_assert_int_eq(lock_try(sp2->lock_fd, off, true), 0);
        quota_repair(f.sp);
        ck_assert_int_eq(count(f.sp, "count"), 2);
        ck_assert_int_eq(count(f.sp, "senders/bob"), 1);
        ck_assert_int_eq(count(f.sp, "senders/carol"), 1);
        ck_assert(fx_there(f.sp->fd[SD_QUOTA], "alice/ids/", "id-2", ""));
        ck_assert(!fx_there(f.sp->fd[SD_QUOTA], "alice/ids/", "id-1", ""));
        ck_assert(!fx_there(f.sp->fd[SD_QUOTA], "alice/by-sender/", "id-1", ""));
        lock_release(sp2->lock_fd, off);
        quota_repair(f.sp);
        ck_assert_int_eq(count(f.sp, "count"), 1);
        /* carol has nothing waiting: her count goes */
        ck_assert_int_eq(count(f.sp, "senders/carol"), -1);
        spool_close(sp2);
        fx_close(&f);
}
END_TEST

/* A claim through intake (a batch of one): its outcome. */
static int claim(struct fx *f, const char *id)
{
        char name[100];
        char *names[1] = { name };
        int out = -1;

        snprintf(name, sizeof(name), "%s.json", id);
        fx_put_doc(f->sp->fd[SD_HANDOFF], name, fx_doc(id, "alice", 1, 600, f->k));
        ck_assert_int_eq(intake_batch(f->sp, names, 1, hd_now_usec(), &out), 0);
        return out;
}

START_TEST(test_quota_counted_again_after_a_power_cut)
{
        struct fx f;
        char *p;

        fx_open(&f);
        f.cfg->max_waiting_per_sender = 2;
        ck_assert_int_eq(claim(&f, "id-1"), IO_CLAIMED);
        ck_assert_int_eq(claim(&f, "id-2"), IO_CLAIMED);
        ck_assert_int_eq(claim(&f, "id-3"), IO_REJECTED);
        ck_assert_int_eq(count(f.sp, "senders/bob"), 2);
        /* the links were never synced: a power cut took them */
        ck_assert_int_ge(asprintf(&p, "%s/spool/quota/alice", f.root), 0);
        tu_rm_rf(p);
        free(p);
        spool_close(f.sp);
        ck_assert_int_eq(spool_open(f.cfg, &f.sp), 0);
        ck_assert_int_eq(lifecycle_sweep(f.sp, hd_now_usec(), true), 0);
        ck_assert_int_eq(count(f.sp, "senders/bob"), 2);
        ck_assert_int_eq(count(f.sp, "count"), 2);
        ck_assert_int_eq(claim(&f, "id-4"), IO_REJECTED);
        fx_close(&f);
}
END_TEST

Suite *suite_quota(void);
Suite *suite_quota(void)
{
        Suite *s = suite_create("quota");
        TCase *tc = tcase_create("quota");
        tcase_add_test(tc, test_quota_is_the_spools_for_every_daemon);
        tcase_add_test(tc, test_quota_id_counted_once);
        tcase_add_test(tc, test_quota_busy_while_another_daemon_counts);
        tcase_add_test(tc, test_quota_repair_removes_what_a_killed_claim_left);
        tcase_add_test(tc, test_quota_counted_again_after_a_power_cut);
        suite_add_tcase(s, tc);
        return s;
}
