/* The decision for a file in handoff/ (src/handoffd/intake.c), called
 * directly on a temp spool opened as the daemon opens it, no event loop:
 * one test per decision, in handoffd(8) OPERATION's order (name, safe open, parse,
 * authenticate, target, replay, claim), each checking the outcome and
 * where the file went (with the reason its .reason file gives); and the
 * order: a file that fails two checks gets the earlier one's decision.
 * Every other reject reason, and when a rejection is told to the relay:
 * test_intake_reject.c. */
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

#include "store.h"
#include "agents.h"
#include "daemonfx.h"
#include "intake.h"
#include "files.h"
#include "lock.h"
#include "testutil.h"
#include "verified.h"

START_TEST(test_intake_ignores_temp_names)
{
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_HANDOFF], "", ".x.json.tmp", "", "{");
        fx_put(f.sp->fd[SD_HANDOFF], "", "y.json", "~", "{");
        ck_assert_int_eq(fx_decide(&f, ".x.json.tmp"), IO_IGNORED);
        ck_assert_int_eq(fx_decide(&f, "y.json~"), IO_IGNORED);
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", ".x.json.tmp", ""));
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_rejects_an_unsafe_name)
{
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_HANDOFF], "", "a\tb.json", "", "{}");
        fx_assert_rejected_as(&f, "a\tb.json", "a_b.json", fx_decide(&f, "a\tb.json"), "bad_name");
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_rejects_what_is_not_a_regular_file)
{
        struct fx f;

        fx_open(&f);
        ck_assert_int_eq(symlinkat("/etc/passwd", f.sp->fd[SD_HANDOFF], "link.json"), 0);
        fx_assert_rejected(&f, "link.json", fx_decide(&f, "link.json"), "not_regular");
        fx_close(&f);
}
END_TEST

/* A directory is no handoff, and never moved (in rejected/ it would be
 * its owner's to fill): left where it is, no error, whatever its name. */
START_TEST(test_intake_leaves_a_directory)
{
        struct fx f;

        fx_open(&f);
        ck_assert_int_eq(mkdirat(f.sp->fd[SD_HANDOFF], "d.json", 0777), 0);
        ck_assert_int_eq(mkdirat(f.sp->fd[SD_HANDOFF], "un\tsafe", 0700), 0);
        for (int i = 0; i < 2; i++) {
                ck_assert_int_eq(fx_decide(&f, "d.json"), IO_IGNORED);
                ck_assert_int_eq(fx_decide(&f, "un\tsafe"), IO_IGNORED);
        }
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", "d.json", ""));
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", "un\tsafe", ""));
        ck_assert(!fx_there(f.sp->fd[SD_REJECTED], "", "d.json", ""));
        ck_assert_uint_eq(f.sp->st.errors, 0);
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_defers_a_fresh_unparsable_file_then_rejects_an_old_one)
{
        struct fx f;

        fx_open(&f);
        fx_put(f.sp->fd[SD_HANDOFF], "", "half.json", "", "{\"protocol_version\": 1, ");
        ck_assert_int_eq(fx_decide(&f, "half.json"), IO_DEFERRED);
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", "half.json", ""));
        ck_assert_uint_eq(f.sp->st.deferred, 1);
        fx_put(f.sp->fd[SD_HANDOFF], "", "old.json", "", "{\"protocol_version\": 1, ");
        fx_age(f.sp->fd[SD_HANDOFF], "old.json", 60);
        fx_assert_rejected(&f, "old.json", fx_decide(&f, "old.json"), "parse_error");
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_rejects_what_does_not_verify_for_an_agent_served_here)
{
        struct fx f;
        json_t *d;

        fx_open(&f);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "forged.json", fx_doc("forged", "alice", 10, 600, f.other));
        fx_assert_rejected(&f, "forged.json", fx_decide(&f, "forged.json"), "bad_mac");
        fx_put_doc(f.sp->fd[SD_HANDOFF], "nomac.json", fx_doc("nomac", "alice", 10, 600, NULL));
        fx_assert_rejected(&f, "nomac.json", fx_decide(&f, "nomac.json"), "missing_field");
        fx_put_doc(f.sp->fd[SD_HANDOFF], "late.json", fx_doc("late", "alice", 900, -60, f.k));
        fx_assert_rejected(&f, "late.json", fx_decide(&f, "late.json"), "expired");
        d = fx_doc("badtype", "alice", 10, 600, NULL);
        json_object_set_new(d, "transcript", json_string("not a list"));
        ck_assert_int_eq(hd_sign(d, f.k), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "badtype.json", d);
        fx_assert_rejected(&f, "badtype.json", fx_decide(&f, "badtype.json"), "bad_type");
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
        ck_assert_int_eq(fx_decide(&f, "g1.json"), IO_LEFT);
        ck_assert_int_eq(fx_decide(&f, "g2.json"), IO_LEFT);
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", "g1.json", ""));
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", "g2.json", ""));
        ck_assert_int_gt(f.p.deadline.next, hd_now_usec());
        /* looked at again before its expiry: still left, not decided again */
        ck_assert_int_eq(fx_decide(&f, "g1.json"), IO_LEFT);
        ck_assert_uint_eq(f.sp->st.left, 2);
        /* expired before any daemon claimed it */
        fx_put_doc(f.sp->fd[SD_HANDOFF], "g3.json", fx_doc("g3", "gordon", 900, -60, f.k));
        fx_assert_rejected(&f, "g3.json", fx_decide(&f, "g3.json"), "expired_unclaimed");
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_rejects_a_replay)
{
        struct fx f;

        fx_open(&f);
        ck_assert_int_eq(store_id_mark(f.sp, "seen-1"), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "r1.json", fx_doc("seen-1", "alice", 10, 600, f.k));
        fx_assert_rejected(&f, "r1.json", fx_decide(&f, "r1.json"), "duplicate_id");
        /* the same id twice in handoff/: the first is claimed, the second not */
        fx_put_doc(f.sp->fd[SD_HANDOFF], "twice-a.json", fx_doc("twice", "alice", 10, 600, f.k));
        fx_put_doc(f.sp->fd[SD_HANDOFF], "twice-b.json", fx_doc("twice", "alice", 10, 600, f.k));
        ck_assert_int_eq(fx_decide(&f, "twice-a.json"), IO_CLAIMED);
        fx_assert_rejected(&f, "twice-b.json", fx_decide(&f, "twice-b.json"), "duplicate_id");
        fx_close(&f);
}
END_TEST

/* A replay of an item claimed and not yet published (its record and its
 * .pending.NAME: a crash or a failed rename between them).  For a plain
 * bootstrap the daemon does not look in claimed/ before delivering: the
 * record's link tells (issue 25).  The .pending.NAME there is the claim's:
 * the replay is rejected, the claim's bootstrap kept, to be published;
 * and the producer's own file that a power cut kept beside the record
 * (older than it, the same document) goes without a rejection. */
START_TEST(test_intake_keeps_an_unpublished_claim_from_its_replay)
{
        struct fx f;
        char b[300], p[320];
        struct stat sr, sp0, sp1;

        fx_open(&f);
        json_t *d = fx_doc("held-1", "alice", 10, 600, f.k);
        json_t *same = json_deep_copy(d);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "first.json", d);
        ck_assert_int_eq(fx_decide(&f, "first.json"), IO_CLAIMED);
        ck_assert_int_eq(hd_bootstrap_name("held-1", b, sizeof(b)), 0);
        snprintf(p, sizeof(p), ".pending.%s", b);
        ck_assert_int_eq(renameat(f.alice->handoffs_fd, b, f.alice->handoffs_fd, p), 0);
        ck_assert_int_eq(fstatat(f.alice->handoffs_fd, p, &sp0, 0), 0);

        fx_put_doc(f.sp->fd[SD_HANDOFF], "again.json", fx_doc("held-1", "alice", 5, 600, f.k));
        fx_assert_rejected(&f, "again.json", fx_decide(&f, "again.json"), "duplicate_id");
        ck_assert_int_eq(fstatat(f.alice->handoffs_fd, p, &sp1, 0), 0);
        ck_assert_int_eq(fstatat(f.sp->fd[SD_CLAIMED], "held-1.json", &sr, 0), 0);
        ck_assert(sp1.st_ino == sp0.st_ino && sr.st_ino == sp0.st_ino);
        ck_assert(!fx_there(f.alice->handoffs_fd, "", b, ""));

        fx_put_doc(f.sp->fd[SD_HANDOFF], "kept.json", same);
        fx_age(f.sp->fd[SD_HANDOFF], "kept.json", 60);
        ck_assert_int_eq(fx_decide(&f, "kept.json"), IO_GONE);
        ck_assert(!fx_there(f.sp->fd[SD_HANDOFF], "", "kept.json", ""));
        ck_assert(!fx_there(f.sp->fd[SD_REJECTED], "", "kept.json", ""));
        ck_assert_int_eq(fstatat(f.alice->handoffs_fd, p, &sp1, 0), 0);
        ck_assert(sp1.st_ino == sp0.st_ino);
        fx_close(&f);
}
END_TEST

START_TEST(test_intake_claims_and_delivers)
{
        struct fx f;
        char b[300];

        fx_open(&f);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "drop.json", fx_doc("good-1", "alice", 10, 600, f.k));
        ck_assert_int_eq(fx_decide(&f, "drop.json"), IO_CLAIMED);
        ck_assert(!fx_there(f.sp->fd[SD_HANDOFF], "", "drop.json", ""));
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "good-1", ".json"));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "good-1", ".delivered"));
        ck_assert_int_eq(hd_bootstrap_name("good-1", b, sizeof(b)), 0);
        ck_assert(fx_there(f.alice->handoffs_fd, "", b, ""));
        /* the record is the agent's bootstrap, one file of the daemon's */
        struct stat sr, sb;
        ck_assert_int_eq(fstatat(f.sp->fd[SD_CLAIMED], "good-1.json", &sr, 0), 0);
        ck_assert_int_eq(fstatat(f.alice->handoffs_fd, b, &sb, 0), 0);
        ck_assert(sr.st_ino == sb.st_ino && sr.st_nlink == 2);
        ck_assert(!fx_there(f.alice->handoffs_fd, ".pending.", b, ""));
        ck_assert_uint_eq(f.sp->st.claimed, 1);
        ck_assert_uint_eq(f.sp->st.delivered, 1);
        /* gone between the listing and the decision */
        ck_assert_int_eq(fx_decide(&f, "drop.json"), IO_GONE);
        fx_close(&f);
}
END_TEST

/* A big record is remembered at its claim (verified.c): the sweep's first
 * look, and a consumer's rename, read none of it again.  A small one is
 * not remembered (read again, it costs about what an entry saves). */
START_TEST(test_intake_remembers_a_big_claim)
{
        struct fx f;
        struct handoff h;
        struct stat st;
        int64_t acc = 0;
        size_t n = 100 * 1024;
        char *big = malloc(n + 1);

        ck_assert_ptr_nonnull(big);
        memset(big, 'x', n);
        big[n] = '\0';
        fx_open(&f);
        json_t *d = fx_doc("big-1", "alice", 10, 600, NULL);
        json_object_set_new(d, "x", json_string(big));
        ck_assert_int_eq(hd_sign(d, f.k), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "big.json", d);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "small.json", fx_doc("small-1", "alice", 10, 600, f.k));
        ck_assert_int_eq(fx_decide(&f, "big.json"), IO_CLAIMED);
        ck_assert_int_eq(fx_decide(&f, "small.json"), IO_CLAIMED);

        ck_assert_int_eq(fstatat(f.sp->fd[SD_CLAIMED], "big-1.json", &st, 0), 0);
        ck_assert(st.st_size > (off_t)n);
        ck_assert(verified_lookup(&f.p.verified, "big-1", &st, &h, &acc));
        ck_assert_str_eq(h.id, "big-1");
        ck_assert_str_eq(h.from, "bob");
        ck_assert_str_eq(h.to, "alice");
        /* the accepted time the record says, as a read of it gives */
        char *buf = NULL;
        size_t len;
        int fd = openat(f.sp->fd[SD_CLAIMED], "big-1.json", O_RDONLY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(read_all(fd, (size_t)st.st_size + 1, 0, &buf, &len), 0);
        close(fd);
        json_t *rec = json_loadb(buf, len, 0, NULL);
        ck_assert_ptr_nonnull(rec);
        int64_t want;
        ck_assert_int_eq(hd_time_parse(json_string_value(json_object_get(rec, "accepted_at")),
                                       &want), 0);
        ck_assert_int_eq(acc, want);
        json_decref(rec);
        free(buf);
        /* another inode under the name is read again */
        st.st_ino++;
        ck_assert(!verified_lookup(&f.p.verified, "big-1", &st, &h, &acc));

        ck_assert_int_eq(fstatat(f.sp->fd[SD_CLAIMED], "small-1.json", &st, 0), 0);
        ck_assert(!verified_lookup(&f.p.verified, "small-1", &st, &h, &acc));
        free(big);
        fx_close(&f);
}
END_TEST

/* ---- the order: a file that fails two checks gets the earlier one's ---- */

/* Size before parse: a too large file is not read at all. */
START_TEST(test_intake_order_size_before_parse)
{
        struct fx f;

        fx_open(&f);
        fx_put_too_large(&f);   /* unparsable too */
        fx_age(f.sp->fd[SD_HANDOFF], "x.json", 60);
        fx_assert_rejected(&f, "x.json", fx_decide(&f, "x.json"), "too_large");
        fx_close(&f);
}
END_TEST

/* Authentication before validation: a bad MAC on an invalid document is
 * bad_mac (an unauthenticated sender learns nothing of the rules). */
START_TEST(test_intake_order_auth_before_validate)
{
        struct fx f;
        json_t *d;

        fx_open(&f);
        d = fx_doc_from("id-1", "bob", "alice");
        ck_assert_int_eq(hd_sign(d, f.k), 0);
        json_object_del(d, "expires_at");
        fx_put_doc(f.sp->fd[SD_HANDOFF], "x.json", d);
        fx_assert_rejected(&f, "x.json", fx_decide(&f, "x.json"), "bad_mac");
        fx_close(&f);
}
END_TEST

/* Freshness before target: an expired document for another agent that
 * verifies here is expired_unclaimed at once, not left. */
START_TEST(test_intake_order_fresh_before_target)
{
        struct fx f;

        fx_open(&f);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "x.json", fx_doc("id-1", "gordon", 900, -60, f.k));
        fx_assert_rejected(&f, "x.json", fx_decide(&f, "x.json"), "expired_unclaimed");
        ck_assert_uint_eq(f.sp->st.left, 0);
        fx_close(&f);
}
END_TEST

/* For an agent served here, its own expiry before authentication: an
 * expired (or future) document with a MAC that does not match is
 * expired (future_timestamp), its MAC never computed; one whose times are
 * not well-formed is still bad_mac (nothing of the rules before the MAC). */
START_TEST(test_intake_order_expiry_before_auth_for_an_agent_served_here)
{
        struct fx f;
        json_t *d;

        fx_open(&f);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "late.json", fx_doc("late", "alice", 900, -60, f.other));
        fx_assert_rejected(&f, "late.json", fx_decide(&f, "late.json"), "expired");
        fx_put_doc(f.sp->fd[SD_HANDOFF], "ahead.json", fx_doc("ahead", "alice", -3600, 7200, f.other));
        fx_assert_rejected(&f, "ahead.json", fx_decide(&f, "ahead.json"), "future_timestamp");
        d = fx_doc("garbled", "alice", 900, -60, f.other);
        json_object_set_new(d, "expires_at", json_string("soon"));
        fx_put_doc(f.sp->fd[SD_HANDOFF], "garbled.json", d);
        fx_assert_rejected(&f, "garbled.json", fx_decide(&f, "garbled.json"), "bad_mac");
        /* expires_at not after initiated_at: not well-formed either */
        d = fx_doc("backwards", "alice", 900, -60, f.other);
        json_object_set(d, "expires_at", json_object_get(d, "initiated_at"));
        fx_put_doc(f.sp->fd[SD_HANDOFF], "backwards.json", d);
        fx_assert_rejected(&f, "backwards.json", fx_decide(&f, "backwards.json"), "bad_mac");
        /* not authenticated: its id is not remembered */
        ck_assert(!spool_id_seen(f.sp, "late"));
        fx_close(&f);
}
END_TEST

/* For an agent not served here the MAC still comes first: an expired
 * document that does not verify here is left to its recipient's daemon
 * until it expires here too (at once: expired_unclaimed, unauthenticated). */
START_TEST(test_intake_order_auth_before_expiry_for_another_agent)
{
        struct fx f;

        fx_open(&f);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "x.json", fx_doc("id-1", "gordon", 900, -60, f.other));
        fx_assert_rejected(&f, "x.json", fx_decide(&f, "x.json"), "expired_unclaimed");
        ck_assert(!spool_id_seen(f.sp, "id-1"));
        fx_close(&f);
}
END_TEST

/* Target before replay: a known id for another agent is left, not
 * rejected as a duplicate (its recipient decides). */
START_TEST(test_intake_order_target_before_replay)
{
        struct fx f;

        fx_open(&f);
        ck_assert_int_eq(store_id_mark(f.sp, "id-1"), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "x.json", fx_doc("id-1", "gordon", 10, 600, f.k));
        ck_assert_int_eq(fx_decide(&f, "x.json"), IO_LEFT);
        fx_close(&f);
}
END_TEST

/* An unverified file reserves no id: for another agent, with an id a
 * verified document holds here, it is rejected for what it is (bad_mac),
 * not left, and its id is not remembered as authenticated. */
START_TEST(test_intake_rejects_an_unverified_file_for_an_id_held_here)
{
        struct fx f;

        fx_open(&f);
        ck_assert_int_eq(store_id_mark(f.sp, "id-1"), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "junk.json", fx_doc("id-1", "gordon", 10, 600, f.other));
        fx_assert_rejected(&f, "junk.json", fx_decide(&f, "junk.json"), "bad_mac");
        ck_assert_uint_eq(f.sp->st.left, 0);
        /* an id nobody verified: left as before */
        fx_put_doc(f.sp->fd[SD_HANDOFF], "junk2.json", fx_doc("id-2", "gordon", 10, 600, f.other));
        ck_assert_int_eq(fx_decide(&f, "junk2.json"), IO_LEFT);
        ck_assert(!spool_id_seen(f.sp, "id-2"));
        fx_close(&f);
}
END_TEST

/* The relay's outcome hook (receipt.c in the daemon), recorded: how many
 * "rejected" were told, the last one's reason, and whether the item was
 * in rejected/ already when it was told. */
Suite *suite_intake(void);
Suite *suite_intake(void)
{
        Suite *s = suite_create("intake");
        TCase *tc = tcase_create("decisions");
        tcase_add_test(tc, test_intake_ignores_temp_names);
        tcase_add_test(tc, test_intake_rejects_an_unsafe_name);
        tcase_add_test(tc, test_intake_keeps_an_unpublished_claim_from_its_replay);
        tcase_add_test(tc, test_intake_rejects_what_is_not_a_regular_file);
        tcase_add_test(tc, test_intake_leaves_a_directory);
        tcase_add_test(tc, test_intake_defers_a_fresh_unparsable_file_then_rejects_an_old_one);
        tcase_add_test(tc, test_intake_rejects_what_does_not_verify_for_an_agent_served_here);
        tcase_add_test(tc, test_intake_leaves_an_item_for_an_agent_not_served_here);
        tcase_add_test(tc, test_intake_rejects_a_replay);
        tcase_add_test(tc, test_intake_claims_and_delivers);
        tcase_add_test(tc, test_intake_remembers_a_big_claim);
        tcase_add_test(tc, test_intake_order_size_before_parse);
        tcase_add_test(tc, test_intake_order_auth_before_validate);
        tcase_add_test(tc, test_intake_order_fresh_before_target);
        tcase_add_test(tc, test_intake_order_expiry_before_auth_for_an_agent_served_here);
        tcase_add_test(tc, test_intake_order_auth_before_expiry_for_another_agent);
        tcase_add_test(tc, test_intake_order_target_before_replay);
        tcase_add_test(tc, test_intake_rejects_an_unverified_file_for_an_id_held_here);
        suite_add_tcase(s, tc);
        return s;
}
