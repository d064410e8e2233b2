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

#include "agents.h"
#include "daemon.h"
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

/* quota_take() for alice of id from s: 0 and counted, or its error; v's
 * detail into detail (may be NULL). */
static int take_as(struct spool *sp, const char *id, const struct quota_sender *s, char *detail,
                   size_t n)
{
        hd_verdict v = { 0 };
        bool taken = false;
        int r = quota_take(sp, "alice", id, s, &v, &taken);

        if (r == 0)
                ck_assert_msg(taken, "%s not counted", id);
        if (r == -EBADMSG)
                ck_assert_int_eq(v.reason, HD_R_INBOX_FULL);
        if (detail)
                snprintf(detail, n, "%s", v.detail);
        return r;
}

/* ... from a sender with a key of her own, dropped by the daemon's user:
 * counted by name and in all only. */
static int take(struct spool *sp, const char *id, const char *from, char *detail, size_t n)
{
        const struct quota_sender s = { .from = from, .own_key = true };

        return take_as(sp, id, &s, detail, n);
}

static void open_two(struct fx *f, struct spool **sp2)
{
        fx_open(f);
        f->cfg->max_waiting_per_sender = 2;
        f->cfg->max_waiting = 3;
        struct dict unserved;

        dict_init(&unserved, sizeof(struct unserved_entry));
        ck_assert_int_eq(spool_open(f->cfg, &unserved, sp2), 0);
        dict_clear(&unserved);
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
        const struct quota_sender bob = { .from = "bob", .own_key = true };
        ck_assert_int_eq(quota_take(sp2, "alice", "id-1", &bob, &v, &taken), 0);
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

/* One producer (a user of the group: the files' owner) under made-up
 * names fills no more than a sender may (issue 43.7); another producer,
 * and the same names from her, still get in. */
START_TEST(test_quota_counts_per_producer)
{
        struct fx f;
        char d[300], from[16];

        fx_open(&f);
        f.cfg->max_waiting_per_sender = 2;
        f.cfg->max_waiting = 100;
        for (int i = 0; i < 2; i++) {
                snprintf(from, sizeof(from), "made-up%d", i);
                const struct quota_sender s = { .from = from, .producer = "u1000" };
                char id[16];
                snprintf(id, sizeof(id), "id-%d", i);
                ck_assert_int_eq(take_as(f.sp, id, &s, NULL, 0), 0);
        }
        const struct quota_sender third = { .from = "made-up9", .producer = "u1000" };
        ck_assert_int_eq(take_as(f.sp, "id-9", &third, d, sizeof(d)), -EBADMSG);
        ck_assert_str_eq(d, "2 handoffs dropped by uid 1000 already wait for alice, under any "
                            "names (max_waiting_per_sender)");
        const struct quota_sender other = { .from = "made-up9", .producer = "u1001" };
        ck_assert_int_eq(take_as(f.sp, "id-9", &other, NULL, 0), 0);
        ck_assert_int_eq(count(f.sp, "producers/u1000"), 2);
        ck_assert_int_eq(count(f.sp, "producers/u1001"), 1);
        /* released with its item: room again */
        quota_release(f.sp, "alice", "id-0");
        ck_assert_int_eq(count(f.sp, "producers/u1000"), 1);
        ck_assert_int_eq(take_as(f.sp, "id-8", &third, NULL, 0), 0);
        /* the daemon's own files (relayed in) count by name alone */
        char buf[32];
        ck_assert_ptr_null(quota_producer(&f.p.quota, geteuid(), buf, sizeof(buf)));
        ck_assert_str_eq(quota_producer(&f.p.quota, 1000 + (geteuid() == 1000), buf, sizeof(buf)),
                         geteuid() == 1000 ? "u1001" : "u1000");
        fx_close(&f);
}
END_TEST

/* Where a sender has a key of her own (carol's public key in the
 * fixture), what shared keys sign fills max_waiting less a reserve: a
 * flood under the default key from any number of producers leaves room
 * for her. */
START_TEST(test_quota_reserve_for_own_keys)
{
        struct fx f;
        char d[300], from[16], id[16], prod[16];

        fx_open(&f);
        f.cfg->max_waiting_per_sender = 100;
        f.cfg->max_waiting = 20;        /* 2 kept */
        int in = 0;
        for (int i = 0; i < 25; i++) {
                snprintf(from, sizeof(from), "x%d", i);
                snprintf(id, sizeof(id), "id-%d", i);
                snprintf(prod, sizeof(prod), "u%d", 2000 + i);
                const struct quota_sender s = { .from = from, .producer = prod };
                int r = take_as(f.sp, id, &s, d, sizeof(d));
                ck_assert(r == 0 || r == -EBADMSG);
                in += r == 0;
        }
        ck_assert_int_eq(in, 18);
        ck_assert_str_eq(d, "18 handoffs signed with a shared key already wait for alice "
                            "(max_waiting, less 2 kept for senders with keys of their own)");
        ck_assert_int_eq(count(f.sp, "shared"), 18);
        const struct quota_sender carol = { .from = "carol", .producer = "u3000", .own_key = true };
        ck_assert_int_eq(take_as(f.sp, "c-1", &carol, NULL, 0), 0);
        ck_assert_int_eq(take_as(f.sp, "c-2", &carol, NULL, 0), 0);
        ck_assert_int_eq(take_as(f.sp, "c-3", &carol, d, sizeof(d)), -EBADMSG);
        ck_assert_str_eq(d, "20 handoffs already wait for alice (max_waiting)");
        ck_assert_int_eq(count(f.sp, "shared"), 18);
        fx_close(&f);
}
END_TEST

/* A kill between an item's two links (its id's, then its sender's) left
 * the sender's count one low for as long as the item waited: a later
 * count of the same id (the claim's retry, the sweep's recount) found the
 * id counted and stopped there (issue 43.13, quota.c count_in). */
START_TEST(test_quota_count_in_completes_a_cut_count)
{
        struct fx f;
        bool taken = true;

        fx_open(&f);
        f.cfg->max_waiting_per_sender = 2;
        f.cfg->max_waiting = 10;
        ck_assert_int_eq(take(f.sp, "id-1", "bob", NULL, 0), 0);
        ck_assert_int_eq(count(f.sp, "senders/bob"), 1);
        /* what a kill after the first link leaves */
        ck_assert_int_eq(unlinkat(f.sp->fd[SD_QUOTA], "alice/by-sender/id-1", 0), 0);
        ck_assert_int_eq(count(f.sp, "senders/bob"), 0);
        /* the sweep's recount of the claimed item */
        const struct quota_sender bob = { .from = "bob", .own_key = true };
        f.p.quota.counting = true;
        quota_note(f.sp, &f.p.quota, "alice", "id-1", &bob);
        ck_assert_int_eq(count(f.sp, "senders/bob"), 1);
        ck_assert_int_eq(count(f.sp, "count"), 1);
        /* and a claim's retry of the same id */
        ck_assert_int_eq(unlinkat(f.sp->fd[SD_QUOTA], "alice/by-sender/id-1", 0), 0);
        hd_verdict v = { 0 };
        ck_assert_int_eq(quota_take(f.sp, "alice", "id-1", &bob, &v, &taken), 0);
        ck_assert(!taken);
        ck_assert_int_eq(count(f.sp, "senders/bob"), 1);
        ck_assert_int_eq(take(f.sp, "id-2", "bob", NULL, 0), 0);
        ck_assert_int_eq(take(f.sp, "id-3", "bob", NULL, 0), -EBADMSG);
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
        ck_assert_int_eq(intake_batch(&f->p, names, 1, hd_now_usec(), &out), 0);
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
        daemon_parts_close(&f.p);
        ck_assert_int_eq(daemon_parts_open(f.cfg, &f.p), 0);
        f.sp = f.p.sp;
        ck_assert_int_eq(lifecycle_sweep(&f.p, hd_now_usec(), true), 0);
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
        tcase_add_test(tc, test_quota_counts_per_producer);
        tcase_add_test(tc, test_quota_reserve_for_own_keys);
        tcase_add_test(tc, test_quota_count_in_completes_a_cut_count);
        suite_add_tcase(s, tc);
        return s;
}
