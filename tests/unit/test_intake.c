/* The decision for a file in handoff/ (src/handoffd/intake.c), called
 * directly on a temp spool opened as the daemon opens it, no event loop:
 * one test per decision, in DESIGN.md's order (name, safe open, parse,
 * authenticate, target, replay, claim), each checking the outcome and
 * where the file went (with the reason its .reason file gives). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "daemonfx.h"
#include "intake.h"
#include "testutil.h"

/* Decide one name (one batch of one: a batch always decides its first). */
static int decide(struct fx *f, const char *name)
{
        char *names[1] = { (char *)name };
        int out = -1;

        ck_assert_int_eq(intake_batch(f->sp, names, 1, hd_now_usec(), &out), 0);
        return out;
}

/* The reason rejected/<name>.reason gives, or "" (static). */
static const char *reason_of(struct fx *f, const char *name)
{
        static char r[64];
        char side[400];
        json_t *o = NULL;
        hd_verdict v;

        r[0] = '\0';
        snprintf(side, sizeof(side), "%s.reason", name);
        if (hd_load_at(f->sp->fd[SD_REJECTED], side, NULL, &o, &v) == 0)
                snprintf(r, sizeof(r), "%s", json_string_value(json_object_get(o, "reason")) ?: "");
        json_decref(o);
        return r;
}

/* name decided as rejected: in rejected/ as as (its name made printable). */
static void assert_rejected_as(struct fx *f, const char *name, const char *as, int out,
                               const char *reason)
{
        ck_assert_int_eq(out, IO_REJECTED);
        ck_assert_msg(!fx_there(f->sp->fd[SD_HANDOFF], "", name, ""), "%s still in handoff/", name);
        ck_assert_msg(fx_there(f->sp->fd[SD_REJECTED], "", as, ""), "%s not in rejected/", as);
        ck_assert_str_eq(reason_of(f, as), reason);
}

static void assert_rejected(struct fx *f, const char *name, int out, const char *reason)
{
        assert_rejected_as(f, name, name, out, reason);
}

/* Make dirfd/name look written `age_s` seconds ago. */
static void age(int dirfd, const char *name, int64_t age_s)
{
        struct timespec ts[2];

        clock_gettime(CLOCK_REALTIME, &ts[0]);
        ts[0].tv_sec -= age_s;
        ts[1] = ts[0];
        ck_assert_int_eq(utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW), 0);
}

START_TEST(test_intake_ignores_temp_names)
{
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_HANDOFF], "", ".x.json.tmp", "", "{");
        fx_put(f.sp->fd[SD_HANDOFF], "", "y.json", "~", "{");
        ck_assert_int_eq(decide(&f, ".x.json.tmp"), IO_IGNORED);
        ck_assert_int_eq(decide(&f, "y.json~"), IO_IGNORED);
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", ".x.json.tmp", ""));
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_rejects_an_unsafe_name)
{
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_HANDOFF], "", "a\tb.json", "", "{}");
        assert_rejected_as(&f, "a\tb.json", "a_b.json", decide(&f, "a\tb.json"), "bad_name");
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_rejects_what_is_not_a_regular_file)
{
        struct fx f;

        fx_open(&f);
        ck_assert_int_eq(symlinkat("/etc/passwd", f.sp->fd[SD_HANDOFF], "link.json"), 0);
        assert_rejected(&f, "link.json", decide(&f, "link.json"), "not_regular");
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_defers_a_fresh_unparsable_file_then_rejects_an_old_one)
{
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_HANDOFF], "", "half.json", "", "{\"protocol_version\": 1, ");
        ck_assert_int_eq(decide(&f, "half.json"), IO_DEFERRED);
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", "half.json", ""));
        ck_assert_uint_eq(f.sp->st.deferred, 1);
        fx_put(f.sp->fd[SD_HANDOFF], "", "old.json", "", "{\"protocol_version\": 1, ");
        age(f.sp->fd[SD_HANDOFF], "old.json", 60);
        assert_rejected(&f, "old.json", decide(&f, "old.json"), "parse_error");
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_rejects_what_does_not_verify_for_an_agent_served_here)
{
        struct fx f;
        json_t *d;

        fx_open(&f);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "forged.json", fx_doc("forged", "alice", 10, 600, f.other));
        assert_rejected(&f, "forged.json", decide(&f, "forged.json"), "bad_mac");
        fx_put_doc(f.sp->fd[SD_HANDOFF], "nomac.json", fx_doc("nomac", "alice", 10, 600, NULL));
        assert_rejected(&f, "nomac.json", decide(&f, "nomac.json"), "missing_field");
        fx_put_doc(f.sp->fd[SD_HANDOFF], "late.json", fx_doc("late", "alice", 900, -60, f.k));
        assert_rejected(&f, "late.json", decide(&f, "late.json"), "expired");
        d = fx_doc("badtype", "alice", 10, 600, NULL);
        json_object_set_new(d, "transcript", json_string("not a list"));
        ck_assert_int_eq(hd_sign(d, f.k), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "badtype.json", d);
        assert_rejected(&f, "badtype.json", decide(&f, "badtype.json"), "bad_type");
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_leaves_an_item_for_an_agent_not_served_here)
{
        struct fx f;

        fx_open(&f);
        /* verified here, or signed with a key another daemon may hold */
        fx_put_doc(f.sp->fd[SD_HANDOFF], "g1.json", fx_doc("g1", "gordon", 10, 600, f.k));
        fx_put_doc(f.sp->fd[SD_HANDOFF], "g2.json", fx_doc("g2", "gordon", 10, 600, f.other));
        ck_assert_int_eq(decide(&f, "g1.json"), IO_LEFT);
        ck_assert_int_eq(decide(&f, "g2.json"), IO_LEFT);
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", "g1.json", ""));
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", "g2.json", ""));
        ck_assert_int_gt(f.sp->deadline.next, hd_now_usec());
        /* looked at again before its expiry: still left, not decided again */
        ck_assert_int_eq(decide(&f, "g1.json"), IO_LEFT);
        ck_assert_uint_eq(f.sp->st.left, 2);
        /* expired before any daemon claimed it */
        fx_put_doc(f.sp->fd[SD_HANDOFF], "g3.json", fx_doc("g3", "gordon", 900, -60, f.k));
        assert_rejected(&f, "g3.json", decide(&f, "g3.json"), "expired_unclaimed");
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_rejects_a_replay)
{
        struct fx f;

        fx_open(&f);
        ck_assert_int_eq(spool_id_mark(f.sp, "seen-1"), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "r1.json", fx_doc("seen-1", "alice", 10, 600, f.k));
        assert_rejected(&f, "r1.json", decide(&f, "r1.json"), "duplicate_id");
        /* the same id twice in handoff/: the first is claimed, the second not */
        fx_put_doc(f.sp->fd[SD_HANDOFF], "twice-a.json", fx_doc("twice", "alice", 10, 600, f.k));
        fx_put_doc(f.sp->fd[SD_HANDOFF], "twice-b.json", fx_doc("twice", "alice", 10, 600, f.k));
        ck_assert_int_eq(decide(&f, "twice-a.json"), IO_CLAIMED);
        assert_rejected(&f, "twice-b.json", decide(&f, "twice-b.json"), "duplicate_id");
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_claims_and_delivers)
{
        struct fx f;
        char b[300];

        fx_open(&f);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "drop.json", fx_doc("good-1", "alice", 10, 600, f.k));
        ck_assert_int_eq(decide(&f, "drop.json"), IO_CLAIMED);
        ck_assert(!fx_there(f.sp->fd[SD_HANDOFF], "", "drop.json", ""));
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "good-1", ".json"));
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "good-1", ".delivered"));
        ck_assert_int_eq(hd_bootstrap_name("good-1", b, sizeof(b)), 0);
        ck_assert(fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.alice->handoffs_fd, ".pending.", b, ""));
        ck_assert_uint_eq(f.sp->st.claimed, 1);
        ck_assert_uint_eq(f.sp->st.delivered, 1);
        /* gone between the listing and the decision */
        ck_assert_int_eq(decide(&f, "drop.json"), IO_GONE);
        fx_close(&f);
}
END_TEST

Suite *suite_intake(void);
Suite *suite_intake(void)
{
        Suite *s = suite_create("intake");
        TCase *tc = tcase_create("decisions");
        tcase_add_test(tc, test_intake_ignores_temp_names);
        tcase_add_test(tc, test_intake_rejects_an_unsafe_name);
        tcase_add_test(tc, test_intake_rejects_what_is_not_a_regular_file);
        tcase_add_test(tc, test_intake_defers_a_fresh_unparsable_file_then_rejects_an_old_one);
        tcase_add_test(tc, test_intake_rejects_what_does_not_verify_for_an_agent_served_here);
        tcase_add_test(tc, test_intake_leaves_an_item_for_an_agent_not_served_here);
        tcase_add_test(tc, test_intake_rejects_a_replay);
        tcase_add_test(tc, test_intake_claims_and_delivers);
        suite_add_tcase(s, tc);
        return s;
}
