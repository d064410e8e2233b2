/* The decision for a file in handoff/ (src/handoffd/intake.c), called
 * directly on a temp spool opened as the daemon opens it, no event loop:
 * one test per decision, in DESIGN.md's order (name, safe open, parse,
 * authenticate, target, replay, claim), each checking the outcome and
 * where the file went (with the reason its .reason file gives); every
 * reject reason the daemon decides for a dropped file in a test of its
 * own; and the order: a file that fails two checks gets the earlier one's
 * decision. */
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
#include "lock.h"
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

/* A directory is no handoff, and never moved (in rejected/ it would be
 * its owner's to fill): left where it is, no error, whatever its name. */
START_TEST(test_intake_leaves_a_directory)
{
        struct fx f;

        fx_open(&f);
        ck_assert_int_eq(mkdirat(f.sp->fd[SD_HANDOFF], "d.json", 0777), 0);
        ck_assert_int_eq(mkdirat(f.sp->fd[SD_HANDOFF], "un\tsafe", 0700), 0);
        for (int i = 0; i < 2; i++) {
                ck_assert_int_eq(decide(&f, "d.json"), IO_IGNORED);
                ck_assert_int_eq(decide(&f, "un\tsafe"), IO_IGNORED);
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
        ck_assert_int_eq(decide(&f, "first.json"), IO_CLAIMED);
        ck_assert_int_eq(hd_bootstrap_name("held-1", b, sizeof(b)), 0);
        snprintf(p, sizeof(p), ".pending.%s", b);
        ck_assert_int_eq(renameat(f.alice->handoffs_fd, b, f.alice->handoffs_fd, p), 0);
        ck_assert_int_eq(fstatat(f.alice->handoffs_fd, p, &sp0, 0), 0);

        fx_put_doc(f.sp->fd[SD_HANDOFF], "again.json", fx_doc("held-1", "alice", 5, 600, f.k));
        assert_rejected(&f, "again.json", decide(&f, "again.json"), "duplicate_id");
        ck_assert_int_eq(fstatat(f.alice->handoffs_fd, p, &sp1, 0), 0);
        ck_assert_int_eq(fstatat(f.sp->fd[SD_CLAIMED], "held-1.json", &sr, 0), 0);
        ck_assert(sp1.st_ino == sp0.st_ino && sr.st_ino == sp0.st_ino);
        ck_assert(!fx_there(f.alice->handoffs_fd, "", b, ""));

        fx_put_doc(f.sp->fd[SD_HANDOFF], "kept.json", same);
        age(f.sp->fd[SD_HANDOFF], "kept.json", 60);
        ck_assert_int_eq(decide(&f, "kept.json"), IO_GONE);
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
        ck_assert_int_eq(decide(&f, "drop.json"), IO_CLAIMED);
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
        ck_assert_int_eq(decide(&f, "drop.json"), IO_GONE);
        fx_close(&f);
}
END_TEST

/* ---- every other reason the daemon rejects for, one test each ------------ */

/* A handoff from `from` to `to`, fresh, not signed. */
static json_t *doc_from(const char *id, const char *from, const char *to)
{
        json_t *d = fx_doc(id, to, 10, 600, NULL);

        json_object_set_new(d, "from_agent", json_string(from));
        return d;
}

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
        put_signed(f, doc_from("id-1", "bob", "alice"), NULL);
        ck_assert_int_eq(linkat(f->sp->fd[SD_HANDOFF], "x.json", f->sp->fd[SD_TMP], "x.json", 0), 0);
}

static void mk_too_large(struct fx *f)
{
        size_t n = HD_DEFAULT_MAX_SIZE + 2;
        char *junk = malloc(n);

        memset(junk, '{', n - 1);
        junk[n - 1] = '\0';
        fx_put(f->sp->fd[SD_HANDOFF], "", "x.json", "", junk);
        free(junk);
}

static void mk_duplicate_key(struct fx *f)
{
        fx_put(f->sp->fd[SD_HANDOFF], "", "x.json", "", "{\"a\": 1, \"a\": 2}");
        age(f->sp->fd[SD_HANDOFF], "x.json", 60);
}

static void mk_too_deep(struct fx *f)
{
        char buf[201];

        memset(buf, '[', 100);
        memset(buf + 100, ']', 100);
        buf[200] = '\0';
        fx_put(f->sp->fd[SD_HANDOFF], "", "x.json", "", buf);
        age(f->sp->fd[SD_HANDOFF], "x.json", 60);
}

static void mk_bad_version(struct fx *f)
{
        json_t *d = doc_from("id-1", "bob", "alice");

        json_object_set_new(d, "protocol_version", json_integer(2));
        put_signed(f, d, NULL);
}

static void mk_bad_id(struct fx *f)
{
        put_signed(f, doc_from("../id", "bob", "alice"), NULL);
}

static void mk_bad_agent(struct fx *f)
{
        put_signed(f, doc_from("id-1", "Bob!", "alice"), NULL);
}

static void mk_self_handoff(struct fx *f)
{
        put_signed(f, doc_from("id-1", "alice", "alice"), NULL);
}

static void mk_bad_mac_format(struct fx *f)
{
        json_t *d = doc_from("id-1", "bob", "alice");

        json_object_set_new(d, "hmac", json_string("not base64"));
        fx_put_doc(f->sp->fd[SD_HANDOFF], "x.json", d);
}

/* Signed by an Ed25519 key whose kid nobody configured. */
static void mk_unknown_key(struct fx *f)
{
        hd_key *k;

        ck_assert_int_eq(hd_key_generate("stranger-1", &k), 0);
        put_signed(f, doc_from("id-1", "bob", "alice"), k);
        hd_key_free(k);
}

static void mk_bad_timestamp(struct fx *f)
{
        json_t *d = doc_from("id-1", "bob", "alice");

        json_object_set_new(d, "initiated_at", json_string("yesterday"));
        put_signed(f, d, NULL);
}

static void mk_future_timestamp(struct fx *f)
{
        put_signed(f, fx_doc("id-1", "alice", -600, 1200, NULL), NULL);
}

static void mk_payload_invalid(struct fx *f)
{
        json_t *d = doc_from("id-1", "bob", "alice");

        json_object_set_new(d, "payload_type", json_string("vox/1.0"));
        json_object_set_new(d, "payload", json_object());
        put_signed(f, d, NULL);
}

static void mk_bad_signature(struct fx *f)
{
        json_t *d = doc_from("id-1", "carol", "alice");

        ck_assert_int_eq(hd_sign(d, f->carol), 0);
        json_object_set_new(d, "reason", json_string("changed after signing"));
        fx_put_doc(f->sp->fd[SD_HANDOFF], "x.json", d);
}

/* carol's key under a document from bob */
static void mk_key_agent_mismatch(struct fx *f)
{
        put_signed(f, doc_from("id-1", "bob", "alice"), f->carol);
}

/* carol requires signatures: her hmac is refused */
static void mk_signature_required(struct fx *f)
{
        put_signed(f, doc_from("id-1", "carol", "alice"), NULL);
}

static const struct reject_case {
        const char *reason;
        void (*make)(struct fx *f);
} rejects[] = {
        { "not_regular", mk_fifo },
        { "hardlink", mk_hardlink },
        { "too_large", mk_too_large },
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
        assert_rejected(&f, "x.json", decide(&f, "x.json"), rejects[_i].reason);
        ck_assert_uint_eq(f.sp->st.claimed, 0);
        fx_close(&f);
}
END_TEST

/* A signed Ed25519 document of carol (require = sig) is claimed. */
START_TEST(test_intake_claims_a_signed_handoff)
{
        struct fx f;

        fx_open(&f);
        put_signed(&f, doc_from("id-1", "carol", "alice"), f.carol);
        ck_assert_int_eq(decide(&f, "x.json"), IO_CLAIMED);
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
        ck_assert_int_eq(decide(&f, "x.json"), IO_LEFT);
        ck_assert_int_eq(intake_batch(f.sp, names, 1, hd_now_usec() +
                                      (f.cfg->max_window + f.cfg->max_clock_skew + 60) * 1000000LL,
                                      &out), 0);
        assert_rejected(&f, "x.json", out, "expired_unclaimed");
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
        r = intake_batch(f.sp, names, 3, hd_now_usec(), out);
        tu_fail_calloc = 0;
        for (int i = 0; i < 3; i++) {
                ck_assert_msg(out[i] == -ENOMEM, "outcome of %s: %d", names[i], out[i]);
                ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", names[i], ""));
        }
        ck_assert_int_eq(r, 3);
        ck_assert_uint_eq(f.sp->st.errors, 1);
        ck_assert(strstr(f.sp->st.last_error, "Cannot allocate memory"));
        /* and decided once memory is there; a batch whose time ran out
         * (INTAKE_BATCH_MAX_USEC, a loaded machine) skips the rest: those
         * go in the next */
        ck_assert_int_eq(intake_batch(f.sp, names, 3, hd_now_usec(), out), 0);
        for (int i = 0; i < 3; i++) {
                while (out[i] == IO_SKIPPED)
                        ck_assert_int_eq(intake_batch(f.sp, &names[i], 1, hd_now_usec(), &out[i]), 0);
                ck_assert_int_eq(out[i], IO_CLAIMED);
        }
        fx_close(&f);
}
END_TEST

/* ---- the order: a file that fails two checks gets the earlier one's ---- */

/* Size before parse: a too large file is not read at all. */
START_TEST(test_intake_order_size_before_parse)
{
        struct fx f;

        fx_open(&f);
        mk_too_large(&f);       /* unparsable too */
        age(f.sp->fd[SD_HANDOFF], "x.json", 60);
        assert_rejected(&f, "x.json", decide(&f, "x.json"), "too_large");
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
        d = doc_from("id-1", "bob", "alice");
        ck_assert_int_eq(hd_sign(d, f.k), 0);
        json_object_del(d, "expires_at");
        fx_put_doc(f.sp->fd[SD_HANDOFF], "x.json", d);
        assert_rejected(&f, "x.json", decide(&f, "x.json"), "bad_mac");
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
        assert_rejected(&f, "x.json", decide(&f, "x.json"), "expired_unclaimed");
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
        assert_rejected(&f, "late.json", decide(&f, "late.json"), "expired");
        fx_put_doc(f.sp->fd[SD_HANDOFF], "ahead.json", fx_doc("ahead", "alice", -3600, 7200, f.other));
        assert_rejected(&f, "ahead.json", decide(&f, "ahead.json"), "future_timestamp");
        d = fx_doc("garbled", "alice", 900, -60, f.other);
        json_object_set_new(d, "expires_at", json_string("soon"));
        fx_put_doc(f.sp->fd[SD_HANDOFF], "garbled.json", d);
        assert_rejected(&f, "garbled.json", decide(&f, "garbled.json"), "bad_mac");
        /* expires_at not after initiated_at: not well-formed either */
        d = fx_doc("backwards", "alice", 900, -60, f.other);
        json_object_set(d, "expires_at", json_object_get(d, "initiated_at"));
        fx_put_doc(f.sp->fd[SD_HANDOFF], "backwards.json", d);
        assert_rejected(&f, "backwards.json", decide(&f, "backwards.json"), "bad_mac");
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
        assert_rejected(&f, "x.json", decide(&f, "x.json"), "expired_unclaimed");
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
        ck_assert_int_eq(spool_id_mark(f.sp, "id-1"), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "x.json", fx_doc("id-1", "gordon", 10, 600, f.k));
        ck_assert_int_eq(decide(&f, "x.json"), IO_LEFT);
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
        ck_assert_int_eq(spool_id_mark(f.sp, "id-1"), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "junk.json", fx_doc("id-1", "gordon", 10, 600, f.other));
        assert_rejected(&f, "junk.json", decide(&f, "junk.json"), "bad_mac");
        ck_assert_uint_eq(f.sp->st.left, 0);
        /* an id nobody verified: left as before */
        fx_put_doc(f.sp->fd[SD_HANDOFF], "junk2.json", fx_doc("id-2", "gordon", 10, 600, f.other));
        ck_assert_int_eq(decide(&f, "junk2.json"), IO_LEFT);
        ck_assert(!spool_id_seen(f.sp, "id-2"));
        fx_close(&f);
}
END_TEST

/* The relay's outcome hook (receipt.c in the daemon), recorded: how many
 * "rejected" were told, the last one's reason, and whether the item was
 * in rejected/ already when it was told. */
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

/* Issue 33: spool_reject_from() told "rejected" before its move, which
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
        ck_assert_int_eq(spool_reject(f.sp, "gone.json", NULL, HD_R_EXPIRED, "x", NULL, hd_now_usec()),
                         IO_GONE);
        ck_assert_int_eq(t.n, 0);
        ck_assert(!fx_there(f.sp->fd[SD_REJECTED], "", "gone.json", ".reason"));
        fx_put_doc(f.sp->fd[SD_HANDOFF], "late.json", fx_doc("late", "alice", 900, -60, f.k));
        assert_rejected(&f, "late.json", decide(&f, "late.json"), "expired");
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
        ck_assert_int_eq(decide(&f, "late.json"), IO_BUSY);
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", "late.json", ""));
        ck_assert(!fx_there(f.sp->fd[SD_REJECTED], "", "late.json", ""));
        ck_assert_int_eq(t.n, 0);
        lock_release(other, off);
        assert_rejected(&f, "late.json", decide(&f, "late.json"), "expired");
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
        ck_assert_int_eq(decide(&f, "late.json"), IO_GONE);
        ck_assert(!fx_there(f.sp->fd[SD_HANDOFF], "", "late.json", ""));
        ck_assert_int_eq(t.n, 1);
        ck_assert_str_eq(t.reason, "expired");
        ck_assert_str_eq(t.name, "late.json");
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
        tcase_add_test(tc, test_intake_keeps_an_unpublished_claim_from_its_replay);
        tcase_add_test(tc, test_intake_rejects_what_is_not_a_regular_file);
        tcase_add_test(tc, test_intake_leaves_a_directory);
        tcase_add_test(tc, test_intake_defers_a_fresh_unparsable_file_then_rejects_an_old_one);
        tcase_add_test(tc, test_intake_rejects_what_does_not_verify_for_an_agent_served_here);
        tcase_add_test(tc, test_intake_leaves_an_item_for_an_agent_not_served_here);
        tcase_add_test(tc, test_intake_rejects_a_replay);
        tcase_add_test(tc, test_intake_claims_and_delivers);
        tcase_add_loop_test(tc, test_intake_rejects_for_each_reason, 0,
                            (int)(sizeof(rejects) / sizeof(rejects[0])));
        tcase_add_test(tc, test_intake_claims_a_signed_handoff);
        tcase_add_test(tc, test_intake_rejects_an_unauthenticated_leftover_past_max_window);
        tcase_add_test(tc, test_intake_batch_out_of_memory_is_an_error_for_every_name);
        tcase_add_test(tc, test_intake_order_size_before_parse);
        tcase_add_test(tc, test_intake_order_auth_before_validate);
        tcase_add_test(tc, test_intake_order_fresh_before_target);
        tcase_add_test(tc, test_intake_order_expiry_before_auth_for_an_agent_served_here);
        tcase_add_test(tc, test_intake_order_auth_before_expiry_for_another_agent);
        tcase_add_test(tc, test_intake_order_target_before_replay);
        tcase_add_test(tc, test_intake_rejects_an_unverified_file_for_an_id_held_here);
        tcase_add_test(tc, test_intake_rejection_told_only_once_moved);
        tcase_add_test(tc, test_intake_rejection_waits_for_a_claim_in_flight);
        tcase_add_test(tc, test_intake_rejection_cut_short_is_told_at_the_next_look);
        suite_add_tcase(s, tc);
        return s;
}
