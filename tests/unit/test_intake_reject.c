/* The decision for a file in handoff/ (src/handoffd/intake.c), called
 * directly on a temp spool, no event loop: every reject reason the daemon
 * decides for a dropped file in a test of its own, a signed handoff
 * claimed, a batch out of memory, and when a rejection is told to the
 * relay's outcome hook (only once the item is in rejected/). */
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
#include "log.h"
#include "lock.h"
#include "testutil.h"

/* ---- every other reason the daemon rejects for, one test each ------------ */

/* Signed with k (the spool's key when NULL), into handoff/x.json. */
static void put_signed(struct fx *f, json_t *d, const hd_key *k)
{
        ck_assert_int_eq(hd_sign(d, k ? k : f->k), 0);
        fx_put_doc(f->sp->fd[SD_HANDOFF], "x.json", d);
}

static void mk_fifo(struct fx *f)
{
        ck_assert_int_eq(mkfifoat(f->sp->fd[SD_HANDOFF], "x.json", 0600), 0);
}

static void mk_hardlink(struct fx *f)
{
        put_signed(f, fx_doc_from("id-1", "bob", "alice"), NULL);
        ck_assert_int_eq(linkat(f->sp->fd[SD_HANDOFF], "x.json", f->sp->fd[SD_TMP], "x.json", 0), 0);
}

static void mk_duplicate_key(struct fx *f)
{
        fx_put(f->sp->fd[SD_HANDOFF], "", "x.json", "", "{\"a\": 1, \"a\": 2}");
        fx_age(f->sp->fd[SD_HANDOFF], "x.json", 60);
}

static void mk_too_deep(struct fx *f)
{
        char buf[201];

        memset(buf, '[', 100);
        memset(buf + 100, ']', 100);
        buf[200] = '\0';
        fx_put(f->sp->fd[SD_HANDOFF], "", "x.json", "", buf);
        fx_age(f->sp->fd[SD_HANDOFF], "x.json", 60);
}

static void mk_bad_version(struct fx *f)
{
        json_t *d = fx_doc_from("id-1", "bob", "alice");

        json_object_set_new(d, "protocol_version", json_integer(2));
        put_signed(f, d, NULL);
}

static void mk_bad_id(struct fx *f)
{
        put_signed(f, fx_doc_from("../id", "bob", "alice"), NULL);
}

static void mk_bad_agent(struct fx *f)
{
        put_signed(f, fx_doc_from("id-1", "Bob!", "alice"), NULL);
}

static void mk_self_handoff(struct fx *f)
{
        put_signed(f, fx_doc_from("id-1", "alice", "alice"), NULL);
}

static void mk_bad_mac_format(struct fx *f)
{
        json_t *d = fx_doc_from("id-1", "bob", "alice");

        json_object_set_new(d, "hmac", json_string("not base64"));
        fx_put_doc(f->sp->fd[SD_HANDOFF], "x.json", d);
}

/* Signed by an Ed25519 key whose kid nobody configured. */
static void mk_unknown_key(struct fx *f)
{
        hd_key *k;

        ck_assert_int_eq(hd_key_generate("stranger-1", &k), 0);
        put_signed(f, fx_doc_from("id-1", "bob", "alice"), k);
        hd_key_free(k);
}

static void mk_bad_timestamp(struct fx *f)
{
        json_t *d = fx_doc_from("id-1", "bob", "alice");

        json_object_set_new(d, "initiated_at", json_string("yesterday"));
        put_signed(f, d, NULL);
}

static void mk_future_timestamp(struct fx *f)
{
        put_signed(f, fx_doc("id-1", "alice", -600, 1200, NULL), NULL);
}

static void mk_payload_invalid(struct fx *f)
{
        json_t *d = fx_doc_from("id-1", "bob", "alice");

        json_object_set_new(d, "payload_type", json_string("vox/1.0"));
        json_object_set_new(d, "payload", json_object());
        put_signed(f, d, NULL);
}

static void mk_bad_signature(struct fx *f)
{
        json_t *d = fx_doc_from("id-1", "carol", "alice");

        ck_assert_int_eq(hd_sign(d, f->carol), 0);
        json_object_set_new(d, "reason", json_string("changed after signing"));
        fx_put_doc(f->sp->fd[SD_HANDOFF], "x.json", d);
}

/* carol's key under a document from bob */
static void mk_key_agent_mismatch(struct fx *f)
{
        put_signed(f, fx_doc_from("id-1", "bob", "alice"), f->carol);
}

/* carol requires signatures: her hmac is refused */
static void mk_signature_required(struct fx *f)
{
        put_signed(f, fx_doc_from("id-1", "carol", "alice"), NULL);
}

static const struct reject_case {
        const char *reason;
        void (*make)(struct fx *f);
} rejects[] = {
        { "not_regular", mk_fifo },
        { "hardlink", mk_hardlink },
        { "too_large", fx_put_too_large },
        { "duplicate_key", mk_duplicate_key },
        { "too_deep", mk_too_deep },
        { "bad_version", mk_bad_version },
        { "bad_id", mk_bad_id },
        { "bad_agent", mk_bad_agent },
        { "self_handoff", mk_self_handoff },
        { "bad_mac_format", mk_bad_mac_format },
        { "unknown_key", mk_unknown_key },
        { "bad_timestamp", mk_bad_timestamp },
        { "future_timestamp", mk_future_timestamp },
        { "payload_invalid", mk_payload_invalid },
        { "bad_signature", mk_bad_signature },
        { "key_agent_mismatch", mk_key_agent_mismatch },
        { "signature_required", mk_signature_required },
};

START_TEST(test_intake_rejects_for_each_reason)
{
        struct fx f;

        fx_open(&f);
        rejects[_i].make(&f);
        fx_assert_rejected(&f, "x.json", fx_decide(&f, "x.json"), rejects[_i].reason);
        ck_assert_uint_eq(f.sp->st.claimed, 0);
        fx_close(&f);
}
END_TEST

/* A signed Ed25519 document of carol (require = sig) is claimed. */
START_TEST(test_intake_claims_a_signed_handoff)
{
        struct fx f;

        fx_open(&f);
        put_signed(&f, fx_doc_from("id-1", "carol", "alice"), f.carol);
        ck_assert_int_eq(fx_decide(&f, "x.json"), IO_CLAIMED);
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "id-1", ".json"));
        fx_close(&f);
}
END_TEST

/* Not served here and not authenticated either: its own times may be
 * forged, so it expires max_window after it arrived at the latest. */
START_TEST(test_intake_rejects_an_unauthenticated_leftover_past_max_window)
{
        struct fx f;
        char *names[1] = { "x.json" };
        int out = -1;

        fx_open(&f);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "x.json", fx_doc("id-1", "gordon", 10, 600, f.other));
        ck_assert_int_eq(fx_decide(&f, "x.json"), IO_LEFT);
        ck_assert_int_eq(intake_batch(&f.p, names, 1, hd_now_usec() +
                                      (f.cfg->max_window + f.cfg->max_clock_skew + 60) * 1000000LL,
                                      &out), 0);
        fx_assert_rejected(&f, "x.json", out, "expired_unclaimed");
        fx_close(&f);
}
END_TEST

/* A batch that cannot be set up (its items' memory) still gives every
 * name an outcome, a system error: drain() (watch.c) has taken the names
 * from the pending set and routes each by its outcome (a negative one
 * to the retry timer); it read outcomes[] that nothing had written. */
START_TEST(test_intake_batch_out_of_memory_is_an_error_for_every_name)
{
        struct fx f;
        char *names[3] = { "a.json", "b.json", "c.json" };
        const char *ids[3] = { "id-a", "id-b", "id-c" };
        int out[3] = { 12345, 12345, 12345 }, r;

        fx_open(&f);
        for (int i = 0; i < 3; i++)
                fx_put_doc(f.sp->fd[SD_HANDOFF], names[i], fx_doc(ids[i], "alice", 10, 600, f.k));
        tu_fail_calloc = 1;
        log_set_expected("an injected ENOMEM");
        r = intake_batch(&f.p, names, 3, hd_now_usec(), out);
        log_set_expected(NULL);
        tu_fail_calloc = 0;
        for (int i = 0; i < 3; i++) {
                ck_assert_msg(out[i] == -ENOMEM, "outcome of %s: %d", names[i], out[i]);
                ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", names[i], ""));
        }
        ck_assert_int_eq(r, 3);
        ck_assert_uint_eq(f.sp->st.errors, 1);
        ck_assert(strstr(f.sp->st.last_error, "Cannot allocate memory"));
        /* and decided once memory is there: a name at a time, as a
         * batch may leave names for the next turn when its time is up
         * (a loaded machine), the first name of a batch never */
        for (int i = 0; i < 3; i++) {
                ck_assert_int_eq(intake_batch(&f.p, &names[i], 1, hd_now_usec(), &out[i]), 0);
                ck_assert_int_eq(out[i], IO_CLAIMED);
        }
        fx_close(&f);
}
END_TEST

struct told {
        struct spool *sp;
        int n;
        char reason[64], name[64];
        bool moved;
};

static void tell(void *ctx, const char *id, const char *name, const char *outcome,
                 const char *reason, const char *detail, int64_t now)
{
        struct told *t = ctx;

        (void)id, (void)detail, (void)now;
        ck_assert_str_eq(outcome, "rejected");
        t->n++;
        snprintf(t->reason, sizeof(t->reason), "%s", reason ? reason : "");
        snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
        t->moved = name && fx_there(t->sp->fd[SD_REJECTED], "", name, "");
}

static void listen_outcomes(struct fx *f, struct told *t)
{
        *t = (struct told){ .sp = f->sp };
        f->sp->relay.ctx = t;
        f->sp->relay.outcome = tell;
}

/* Issue 33: store_reject_from() told "rejected" before its move, which
 * then found the file gone when another daemon had claimed it: the origin
 * heard "rejected" for a delivered handoff.  Told only once the item is
 * in rejected/. */
START_TEST(test_intake_rejection_told_only_once_moved)
{
        struct told t;
        struct fx f;

        fx_open(&f);
        listen_outcomes(&f, &t);
        /* gone before the move (another daemon claimed it) */
        enum item_outcome o = IO_REJECTED;
        ck_assert_int_eq(store_reject(f.sp, "gone.json", NULL, HD_R_EXPIRED, "x", NULL, hd_now_usec(),
                                      &o), 0);
        ck_assert_int_eq(o, IO_GONE);
        ck_assert_int_eq(t.n, 0);
        ck_assert(!fx_there(f.sp->fd[SD_REJECTED], "", "gone.json", ".reason"));
        fx_put_doc(f.sp->fd[SD_HANDOFF], "late.json", fx_doc("late", "alice", 900, -60, f.k));
        fx_assert_rejected(&f, "late.json", fx_decide(&f, "late.json"), "expired");
        ck_assert_int_eq(t.n, 1);
        ck_assert_str_eq(t.reason, "expired");
        ck_assert_msg(t.moved, "told before the move");
        fx_close(&f);
}
END_TEST

/* A rejection and a claim of one handoff exclude each other: while
 * another daemon holds the id's lock (claiming it: its verdict may be
 * the other one), the rejection waits for a later look. */
START_TEST(test_intake_rejection_waits_for_a_claim_in_flight)
{
        struct told t;
        struct fx f;
        int other;
        uint64_t off = lock_off_id("late");

        fx_open(&f);
        listen_outcomes(&f, &t);
        ck_assert_int_eq(lock_open(f.sp->root_fd, &other), 0);
        ck_assert_int_eq(lock_try(other, off, true), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "late.json", fx_doc("late", "alice", 900, -60, f.k));
        ck_assert_int_eq(fx_decide(&f, "late.json"), IO_BUSY);
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", "late.json", ""));
        ck_assert(!fx_there(f.sp->fd[SD_REJECTED], "", "late.json", ""));
        ck_assert_int_eq(t.n, 0);
        lock_release(other, off);
        fx_assert_rejected(&f, "late.json", fx_decide(&f, "late.json"), "expired");
        ck_assert_int_eq(t.n, 1);
        close(other);
        fx_close(&f);
}
END_TEST

/* A crash between a rejection's move (a link, with the relay) and its
 * outcome leaves the file beside its rejection: the next look tells the
 * outcome, from the reason, and removes the handoff/ name. */
START_TEST(test_intake_rejection_cut_short_is_told_at_the_next_look)
{
        struct told t;
        struct fx f;

        fx_open(&f);
        listen_outcomes(&f, &t);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "late.json", fx_doc("late", "alice", 900, -60, f.k));
        ck_assert_int_eq(linkat(f.sp->fd[SD_HANDOFF], "late.json", f.sp->fd[SD_REJECTED],
                                "late.json", 0), 0);
        fx_put(f.sp->fd[SD_REJECTED], "", "late.json", ".reason",
               "{\"reason\":\"expired\",\"detail\":\"x\",\"name\":\"late.json\"}");
        ck_assert_int_eq(fx_decide(&f, "late.json"), IO_GONE);
        ck_assert(!fx_there(f.sp->fd[SD_HANDOFF], "", "late.json", ""));
        ck_assert_int_eq(t.n, 1);
        ck_assert_str_eq(t.reason, "expired");
        ck_assert_str_eq(t.name, "late.json");
        fx_close(&f);
}
END_TEST

Suite *suite_intake_reject(void);
Suite *suite_intake_reject(void)
{
        Suite *s = suite_create("intake_reject");
        TCase *tc = tcase_create("rejects");
        tcase_add_loop_test(tc, test_intake_rejects_for_each_reason, 0,
                            (int)(sizeof(rejects) / sizeof(rejects[0])));
        tcase_add_test(tc, test_intake_claims_a_signed_handoff);
        tcase_add_test(tc, test_intake_rejects_an_unauthenticated_leftover_past_max_window);
        tcase_add_test(tc, test_intake_batch_out_of_memory_is_an_error_for_every_name);
        tcase_add_test(tc, test_intake_rejection_told_only_once_moved);
        tcase_add_test(tc, test_intake_rejection_waits_for_a_claim_in_flight);
        tcase_add_test(tc, test_intake_rejection_cut_short_is_told_at_the_next_look);
        suite_add_tcase(s, tc);
        return s;
}
