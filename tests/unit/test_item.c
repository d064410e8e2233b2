/* The claimed item's state table (src/handoffd/item.c), called directly on
 * a temp spool opened as the daemon opens it, no event loop: every
 * combination of the agent's three names for a record (.pending.<b>, the
 * bootstrap <b>, .expire.<b>) gives the state handoffd(8) "Crash windows"
 * names, each state's action leaves the files that page says, and an
 * earlier version's item (the producer's file, the marker
 * claimed/<id>.delivered) is converted.  The expected state is
 * written from the man page's table, not from item.c's array. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents.h"
#include "cancel.h"
#include "cancelreq.h"
#include "config.h"
#include "item.h"
#include "layout.h"
#include "spool.h"
#include "daemonfx.h"
#include "testutil.h"

enum { M_EXPIRE = 1, M_BOOT = 2, M_PENDING = 4, M_MARKER = 8, M_CANCEL = 16 };

/* A handoff from bob to `to` as claimed/<id>.json, the producer's file an
 * earlier version kept there; with tamper, changed after signing. */
static void put_claimed(struct fx *f, const char *id, const char *to, bool tamper)
{
        json_t *h = fx_doc(id, to, 10, 600, f->k);
        char name[300];

        if (tamper)
                json_object_set_new(h, "reason", json_string("forged"));
        snprintf(name, sizeof(name), "%s.json", id);
        fx_put_doc(f->sp->fd[SD_CLAIMED], name, h);
}

/* The daemon's record of id, accepted age_s seconds ago: the bootstrap,
 * as claimed/<id>.json and, for each name of mask, a link of it in the
 * agent's handoffs/ (M_MARKER: none; records have no marker). */
static void put_record(struct fx *f, const char *id, const char *to, unsigned mask, int64_t age_s)
{
        json_t *h = fx_doc(id, to, 10, 600, f->k), *b = NULL;
        char name[300], bname[300], link[320];

        ck_assert_int_eq(hd_bootstrap_build(h, hd_now_usec() - age_s * 1000000LL, &b), 0);
        snprintf(name, sizeof(name), "%s.json", id);
        fx_put_doc(f->sp->fd[SD_CLAIMED], name, b);
        json_decref(h);
        ck_assert_int_eq(hd_bootstrap_name(id, bname, sizeof(bname)), 0);
        static const struct { unsigned m; const char *prefix; } names[] = {
                { M_PENDING, ".pending." }, { M_BOOT, "" }, { M_EXPIRE, ".expire." },
                { M_CANCEL, ".cancel." },
        };
        for (size_t i = 0; i < 4; i++) {
                if (!(mask & names[i].m))
                        continue;
                snprintf(link, sizeof(link), "%s%s", names[i].prefix, bname);
                ck_assert_int_eq(linkat(f->sp->fd[SD_CLAIMED], name, f->alice->handoffs_fd, link, 0), 0);
        }
}

/* An earlier version's item: the producer's file in claimed/ and the
 * files of mask (the marker claimed/<id>.delivered, the bootstrap's
 * names); accepted `age_s` seconds ago. */
static void put_item(struct fx *f, const char *id, unsigned mask, int64_t age_s)
{
        char b[300], at[HD_TIME_MAX], marker[200];
        json_t *h = fx_doc(id, "alice", 10, 600, f->k), *boot = NULL;
        char *bs;

        put_claimed(f, id, "alice", false);
        ck_assert_int_eq(hd_bootstrap_name(id, b, sizeof(b)), 0);
        hd_time_format(hd_now_usec() - age_s * 1000000LL, at, sizeof(at));
        snprintf(marker, sizeof(marker), "{\"accepted_at\":\"%s\"}", at);
        ck_assert_int_eq(hd_bootstrap_build(h, hd_now_usec() - age_s * 1000000LL, &boot), 0);
        bs = json_dumps(boot, JSON_COMPACT | JSON_SORT_KEYS);
        if (mask & M_MARKER)
                fx_put(f->sp->fd[SD_CLAIMED], "", id, ".delivered", marker);
        if (mask & M_PENDING)
                fx_put(f->alice->handoffs_fd, ".pending.", b, "", bs);
        if (mask & M_BOOT)
                fx_put(f->alice->handoffs_fd, "", b, "", bs);
        if (mask & M_EXPIRE)
                fx_put(f->alice->handoffs_fd, ".expire.", b, "", bs);
        free(bs);
        json_decref(boot);
        json_decref(h);
}

/* claimed/<id>.json, opened as the daemon opens it to look at the item. */
static int open_claimed(struct fx *f, const char *id)
{
        char name[300];
        int fd;

        snprintf(name, sizeof(name), "%s.json", id);
        fd = openat(f->sp->fd[SD_CLAIMED], name, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        return fd;
}

static int state_of(struct fx *f, const char *id)
{
        int fd = open_claimed(f, id), r;
        enum item_state s;

        r = item_state_at(&f->p, id, fd, &s);
        close(fd);
        return r < 0 ? r : (int)s;
}

static int check_item(struct fx *f, const char *id)
{
        int fd = open_claimed(f, id), r;
        bool archived = false;

        r = item_check_locked(&f->p, id, fd, hd_now_usec(), &archived);
        close(fd);
        return r < 0 ? r : archived;
}

/* handoffd(8)'s table: a record's state is which of the agent's names
 * for it are there: .expire. first, then .cancel., then the bootstrap,
 * then .pending., else taken. */
static enum item_state expected(unsigned mask)
{
        if (mask & M_EXPIRE)
                return IS_EXPIRING;
        if (mask & M_CANCEL)
                return IS_CANCELING;
        if (mask & M_BOOT)
                return IS_PUBLISHED;
        if (mask & M_PENDING)
                return IS_HIDDEN;
        return IS_TAKEN;
}

START_TEST(test_item_state_every_combination_of_files)
{
        struct fx f;

        fx_open(&f);
        for (unsigned m = 0; m < 16; m++) {
                unsigned mask = (m & 7) | (m & 8 ? M_CANCEL : 0);
                char id[32];
                snprintf(id, sizeof(id), "state-%u", mask);
                put_record(&f, id, "alice", mask, 1);
                ck_assert_msg(state_of(&f, id) == (int)expected(mask),
                              "files %s%s%s%s: state %d, want %d",
                              mask & M_CANCEL ? "cancel " : "",
                              mask & M_PENDING ? "pending " : "",
                              mask & M_BOOT ? "boot " : "", mask & M_EXPIRE ? "expire" : "",
                              state_of(&f, id), expected(mask));
        }
        /* An earlier version's item, whatever its files: converted first. */
        for (unsigned mask = 0; mask < 16; mask++) {
                char id[32];
                snprintf(id, sizeof(id), "legacy-%u", mask);
                put_item(&f, id, mask, 1);
                ck_assert_int_eq(state_of(&f, id), IS_LEGACY);
        }
        fx_close(&f);
}
END_TEST

START_TEST(test_item_state_content_first)
{
        enum item_state gs;
        struct fx f;
        int fd;

        fx_open(&f);
        /* an earlier version's item changed after its claim */
        put_claimed(&f, "tampered", "alice", true);
        fx_put(f.sp->fd[SD_CLAIMED], "", "tampered", ".delivered", "{}");
        ck_assert_int_eq(state_of(&f, "tampered"), IS_TAMPERED);
        /* for an agent not served here, an earlier version's or a record */
        put_claimed(&f, "gordons", "gordon", false);
        ck_assert_int_eq(state_of(&f, "gordons"), IS_NOT_OURS);
        put_record(&f, "gordons-rec", "gordon", 0, 1);
        ck_assert_int_eq(state_of(&f, "gordons-rec"), IS_NOT_OURS);
        /* gone since it was opened: another daemon archived it (taken:
         * the record its only link; the caller holds the id's lock, so
         * this is the one race left) */
        put_record(&f, "gone", "alice", 0, 1);
        fd = open_claimed(&f, "gone");
        ck_assert_int_eq(unlinkat(f.sp->fd[SD_CLAIMED], "gone.json", 0), 0);
        ck_assert_int_eq(item_state_at(&f.p, "gone", fd, &gs), 0);
        ck_assert_int_eq(gs, IS_GONE);
        close(fd);
        /* a record's shape in a file that is not the daemon's own is
         * verified as a handoff, and fails */
        put_record(&f, "not-mine", "alice", M_BOOT, 1);
        ck_assert_int_eq(fchownat(f.sp->fd[SD_CLAIMED], "not-mine.json", geteuid() + 1, -1, 0), 0);
        ck_assert_int_eq(state_of(&f, "not-mine"), IS_TAMPERED);
        fx_close(&f);
}
END_TEST

START_TEST(test_item_actions_of_each_state)
{
        struct fx f;
        char b[300];

        fx_open(&f);
        /* hidden: published */
        put_record(&f, "a-hidden", "alice", M_PENDING, 1);
        ck_assert_int_ge(check_item(&f, "a-hidden"), 0);
        ck_assert_int_eq(hd_bootstrap_name("a-hidden", b, sizeof(b)), 0);
        ck_assert(fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.alice->handoffs_fd, ".pending.", b, ""));
        ck_assert_int_eq(state_of(&f, "a-hidden"), IS_PUBLISHED);

        /* published, within the window: nothing moves, a deadline is noted */
        deadline_reset(&f.p.deadline);
        put_record(&f, "a-waits", "alice", M_BOOT, 1);
        ck_assert_int_ge(check_item(&f, "a-waits"), 0);
        ck_assert_int_eq(state_of(&f, "a-waits"), IS_PUBLISHED);
        ck_assert_int_gt(f.p.deadline.next, hd_now_usec());

        /* published, past the window: taken back and archived as expired */
        put_record(&f, "a-late", "alice", M_BOOT, f.cfg->resume_window + 5);
        ck_assert_int_ge(check_item(&f, "a-late"), 0);
        ck_assert_int_eq(hd_bootstrap_name("a-late", b, sizeof(b)), 0);
        ck_assert(!fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.alice->handoffs_fd, ".expire.", b, ""));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-late", ".json"));

        /* expiring: the cut-short expiry finished */
        put_record(&f, "a-expiring", "alice", M_EXPIRE, 1);
        ck_assert_int_ge(check_item(&f, "a-expiring"), 0);
        ck_assert_int_eq(hd_bootstrap_name("a-expiring", b, sizeof(b)), 0);
        ck_assert(!fx_there(f.alice->handoffs_fd, ".expire.", b, ""));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-expiring", ".json"));

        /* taken, while a consumer still holds it under its private name: kept */
        put_record(&f, "a-held", "alice", 0, 1);
        ck_assert_int_eq(hd_bootstrap_name("a-held", b, sizeof(b)), 0);
        fx_put(f.alice->handoffs_fd, ".consume.1.abcdef01.", b, "", "{}");
        ck_assert_int_ge(check_item(&f, "a-held"), 0);
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "a-held", ".json"));

        /* taken: archived as consumed */
        put_record(&f, "a-taken", "alice", 0, 1);
        ck_assert_int_ge(check_item(&f, "a-taken"), 0);
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-taken", ".json"));
        ck_assert_uint_eq(f.sp->st.consumed, 1);
        ck_assert_uint_eq(f.sp->st.expired, 2);

        /* not ours: left alone */
        put_record(&f, "a-gordons", "gordon", 0, 1);
        ck_assert_int_ge(check_item(&f, "a-gordons"), 0);
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "a-gordons", ".json"));
        fx_close(&f);
}
END_TEST

/* A .pending.<b> that is not the record's own file: a later look at the
 * same handoff (its producer's file left in handoff/ by a crash after the
 * publish) wrote its step 1 after the agent took the bootstrap, and a
 * second crash came before its record's link failed.  Published, the
 * agent would get the handoff twice (test_crash found it); it is removed
 * and the item archived as consumed.  The record's own .pending (one
 * inode), or a copy of it (same bytes, another mount), is still published. */
START_TEST(test_item_later_pending_not_published)
{
        struct fx f;
        json_t *h, *b2 = NULL;
        char b[300], name[320];

        fx_open(&f);
        put_record(&f, "a-again", "alice", 0, 5);
        h = fx_doc("a-again", "alice", 10, 600, f.k);
        ck_assert_int_eq(hd_bootstrap_build(h, hd_now_usec(), &b2), 0);
        ck_assert_int_eq(hd_bootstrap_name("a-again", b, sizeof(b)), 0);
        snprintf(name, sizeof(name), ".pending.%s", b);
        fx_put_doc(f.alice->handoffs_fd, name, b2);
        ck_assert_int_eq(state_of(&f, "a-again"), IS_TAKEN);
        ck_assert(!fx_there(f.alice->handoffs_fd, ".pending.", b, ""));
        ck_assert_int_ge(check_item(&f, "a-again"), 0);
        ck_assert(!fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-again", ".json"));
        ck_assert_uint_eq(f.sp->st.consumed, 1);
        ck_assert_uint_eq(f.sp->st.recovered, 0);
        json_decref(h);

        /* a copy of the record (not a link) with its bytes: published */
        put_record(&f, "a-copy", "alice", 0, 1);
        ck_assert_int_eq(hd_bootstrap_name("a-copy", b, sizeof(b)), 0);
        snprintf(name, sizeof(name), ".pending.%s", b);
        {
                int fd = open_claimed(&f, "a-copy");
                char buf[65536];
                ssize_t n = read(fd, buf, sizeof(buf));
                ck_assert_int_gt(n, 0);
                close(fd);
                int out = openat(f.alice->handoffs_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
                ck_assert_int_ge(out, 0);
                ck_assert_int_eq(write(out, buf, (size_t)n), n);
                close(out);
        }
        ck_assert_int_eq(state_of(&f, "a-copy"), IS_HIDDEN);
        ck_assert_int_ge(check_item(&f, "a-copy"), 0);
        ck_assert(fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert_uint_eq(f.sp->st.recovered, 1);
        fx_close(&f);
}
END_TEST

/* An earlier version's items (the producer's file, a .delivered marker)
 * are converted: the record is its bootstrap, one inode with the agent's
 * file, the marker gone; never visible: delivered as new; marked and
 * taken: archived as consumed; tampered: withdrawn and rejected. */
START_TEST(test_item_legacy_converted)
{
        struct fx f;
        char b[300];
        struct stat st, sb;

        fx_open(&f);
        static const unsigned converted[] = {
                M_MARKER | M_PENDING, M_MARKER | M_BOOT, M_MARKER | M_EXPIRE, M_BOOT,
        };
        static const enum item_state after[] = { IS_HIDDEN, IS_PUBLISHED, IS_EXPIRING, IS_PUBLISHED };
        for (size_t i = 0; i < 4; i++) {
                char id[32];
                snprintf(id, sizeof(id), "conv-%zu", i);
                put_item(&f, id, converted[i], 1);
                ck_assert_int_ge(check_item(&f, id), 0);
                ck_assert_msg(state_of(&f, id) == (int)after[i], "%s: state %d", id, state_of(&f, id));
                ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", id, ".delivered"));
                ck_assert_int_eq(hd_bootstrap_name(id, b, sizeof(b)), 0);
                const char *pre = converted[i] & M_EXPIRE ? ".expire." :
                                  converted[i] & M_BOOT ? "" : ".pending.";
                char an[320], cn[64];
                snprintf(an, sizeof(an), "%s%s", pre, b);
                snprintf(cn, sizeof(cn), "%s.json", id);
                ck_assert_int_eq(fstatat(f.alice->handoffs_fd, an, &sb, 0), 0);
                ck_assert_int_eq(fstatat(f.sp->fd[SD_CLAIMED], cn, &st, 0), 0);
                ck_assert(st.st_ino == sb.st_ino);
        }
        /* never visible (no marker, no bootstrap; a stale hidden one): delivered */
        put_item(&f, "conv-new", M_PENDING, 1);
        ck_assert_int_ge(check_item(&f, "conv-new"), 0);
        ck_assert_int_eq(hd_bootstrap_name("conv-new", b, sizeof(b)), 0);
        ck_assert(fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.alice->handoffs_fd, ".pending.", b, ""));
        ck_assert_int_eq(state_of(&f, "conv-new"), IS_PUBLISHED);
        ck_assert_int_eq(fstatat(f.alice->handoffs_fd, b, &sb, 0), 0);
        ck_assert_int_eq(fstatat(f.sp->fd[SD_CLAIMED], "conv-new.json", &st, 0), 0);
        ck_assert(st.st_ino == sb.st_ino);
        /* marked and taken: archived as consumed, marker gone */
        put_item(&f, "conv-taken", M_MARKER, 1);
        ck_assert_int_ge(check_item(&f, "conv-taken"), 0);
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "conv-taken", ".json"));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "conv-taken", ".delivered"));
        ck_assert_uint_eq(f.sp->st.consumed, 1);
        /* tampered: its bootstrap withdrawn, the item rejected */
        put_item(&f, "a-forged", M_MARKER | M_BOOT, 1);
        put_claimed(&f, "a-forged", "alice", true);
        ck_assert_int_ge(check_item(&f, "a-forged"), 0);
        ck_assert_int_eq(hd_bootstrap_name("a-forged", b, sizeof(b)), 0);
        ck_assert(!fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-forged", ".json"));
        ck_assert(fx_there(f.sp->fd[SD_REJECTED], "", "a-forged", ".json"));
        fx_close(&f);
}
END_TEST

/* A cancel request of from for id in cancel/ (signed with k), read as the
 * daemon reads them at start; its name into name. */
static void put_cancel(struct fx *f, const char *id, const char *from, const hd_key *k,
                       char *name, size_t n)
{
        char *buf = NULL;
        size_t len;

        ck_assert_int_eq(cancelreq_build(id, from, k, hd_now_usec(), 600, &buf, &len), 0);
        ck_assert_int_eq(cancelreq_name(id, name, n), 0);
        fx_put(f->sp->fd[SD_CANCEL], "", name, "", buf);
        free(buf);
        cancel_free(&f->p);
        ck_assert_int_eq(cancel_open(&f->p, hd_now_usec()), 0);
}

static bool answered(struct fx *f, const char *name, const char *word)
{
        char an[320];

        snprintf(an, sizeof(an), ".%s.", word);
        return fx_there(f->sp->fd[SD_CANCEL], an, name, "") &&
               !fx_there(f->sp->fd[SD_CANCEL], "", name, "");
}

/* The outcome archive/ says id ended with ("" when not archived). */
static const char *archived_as(struct fx *f, const char *id)
{
        static char outcome[32];
        struct dirent *de;
        DIR *d;
        int fd;

        outcome[0] = '\0';
        fd = dup(f->sp->fd[SD_ARCHIVE]);
        ck_assert_int_ge(fd, 0);
        d = fdopendir(fd);
        ck_assert_ptr_nonnull(d);
        rewinddir(d);
        while ((de = readdir(d))) {
                char side[320];
                json_t *o = NULL;
                hd_verdict v;
                if (de->d_name[0] == '.' || !layout_archive_is(de->d_name, id))
                        continue;
                snprintf(side, sizeof(side), "%s.outcome", de->d_name);
                ck_assert_int_eq(hd_load_at(f->sp->fd[SD_ARCHIVE], side, NULL, &o, &v), 0);
                snprintf(outcome, sizeof(outcome), "%s",
                         json_string_value(json_object_get(o, "outcome")));
                json_decref(o);
        }
        closedir(d);
        return outcome;
}

/* Its sender's request is the other event of the table: published or
 * not yet, the bootstrap is taken back and the item archived as
 * canceled, the request answered canceled; taken already: archived as
 * consumed, answered not_cancelable; another agent's request: refused,
 * and the item goes on as if there were none; a cancel a crash cut short
 * (.cancel.) is finished with or without a request. */
START_TEST(test_item_cancel_event)
{
        struct fx f;
        char b[300], req[300], req2[300];

        fx_open(&f);
        put_record(&f, "c-pub", "alice", M_BOOT, 1);
        put_cancel(&f, "c-pub", "bob", f.k, req, sizeof(req));
        ck_assert(cancel_wanted(&f.p, "c-pub", "bob"));
        ck_assert_int_gt(check_item(&f, "c-pub"), 0);
        ck_assert_int_eq(hd_bootstrap_name("c-pub", b, sizeof(b)), 0);
        ck_assert(!fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.alice->handoffs_fd, ".cancel.", b, ""));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "c-pub", ".json"));
        ck_assert_str_eq(archived_as(&f, "c-pub"), "canceled");
        ck_assert(answered(&f, req, "canceled"));
        ck_assert(!cancel_wanted(&f.p, "c-pub", NULL));
        ck_assert_uint_eq(f.sp->st.canceled, 1);

        /* not yet published: never shown */
        put_record(&f, "c-hidden", "alice", M_PENDING, 1);
        put_cancel(&f, "c-hidden", "bob", f.k, req, sizeof(req));
        ck_assert_int_gt(check_item(&f, "c-hidden"), 0);
        ck_assert_int_eq(hd_bootstrap_name("c-hidden", b, sizeof(b)), 0);
        ck_assert(!fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.alice->handoffs_fd, ".pending.", b, ""));
        ck_assert_str_eq(archived_as(&f, "c-hidden"), "canceled");
        ck_assert(answered(&f, req, "canceled"));
        ck_assert_uint_eq(f.sp->st.delivered, 0);

        /* taken already: the consumer won */
        put_record(&f, "c-taken", "alice", 0, 1);
        put_cancel(&f, "c-taken", "bob", f.k, req, sizeof(req));
        ck_assert_int_gt(check_item(&f, "c-taken"), 0);
        ck_assert_str_eq(archived_as(&f, "c-taken"), "consumed");
        ck_assert(answered(&f, req, "not_cancelable"));

        /* another agent's request (carol's, her own key): refused; the
         * sender's own, in the same look, cancels it */
        put_record(&f, "c-two", "alice", M_BOOT, 1);
        put_cancel(&f, "c-two", "carol", f.carol, req2, sizeof(req2));
        ck_assert(cancel_wanted(&f.p, "c-two", "carol"));
        ck_assert_int_eq(check_item(&f, "c-two"), 0);
        ck_assert(answered(&f, req2, "refused"));
        ck_assert_int_eq(state_of(&f, "c-two"), IS_PUBLISHED);
        put_cancel(&f, "c-two", "bob", f.k, req, sizeof(req));
        ck_assert_int_gt(check_item(&f, "c-two"), 0);
        ck_assert(answered(&f, req, "canceled"));

        /* a request that does not verify (a key the spool does not
         * know): refused as it is read */
        put_record(&f, "c-forged", "alice", M_BOOT, 1);
        put_cancel(&f, "c-forged", "bob", f.other, req, sizeof(req));
        ck_assert(answered(&f, req, "refused"));
        ck_assert(!cancel_wanted(&f.p, "c-forged", NULL));

        /* cut short by a crash: finished, request or not */
        put_record(&f, "c-crash", "alice", M_CANCEL, 1);
        ck_assert_int_gt(check_item(&f, "c-crash"), 0);
        ck_assert_int_eq(hd_bootstrap_name("c-crash", b, sizeof(b)), 0);
        ck_assert(!fx_there(f.alice->handoffs_fd, ".cancel.", b, ""));
        ck_assert_str_eq(archived_as(&f, "c-crash"), "canceled");
        cancel_free(&f.p);
        fx_close(&f);
}
END_TEST

/* Requests for ids not claimed wait; one sender fills at most
 * CANCEL_PENDING_PER_SENDER places (one more is answered busy), the
 * others keep theirs. */
START_TEST(test_cancel_pending_bounded_per_sender)
{
        struct fx f;
        char name[300], id[32];
        struct dirent *de;
        unsigned busy = 0;
        DIR *d;

        fx_open(&f);
        for (int i = 0; i <= CANCEL_PENDING_PER_SENDER; i++) {
                char *buf = NULL;
                size_t len;
                snprintf(id, sizeof(id), "none-%d", i);
                ck_assert_int_eq(cancelreq_build(id, "carol", f.carol, hd_now_usec(), 600,
                                                 &buf, &len), 0);
                ck_assert_int_eq(cancelreq_name(id, name, sizeof(name)), 0);
                fx_put(f.sp->fd[SD_CANCEL], "", name, "", buf);
                free(buf);
        }
        put_cancel(&f, "none-bob", "bob", f.k, name, sizeof(name));
        ck_assert(cancel_wanted(&f.p, "none-bob", "bob"));
        d = fdopendir(dup(f.sp->fd[SD_CANCEL]));
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                busy += !strncmp(de->d_name, ".busy.none-", 11);
        closedir(d);
        ck_assert_uint_eq(busy, 1);
        cancel_free(&f.p);
        fx_close(&f);
}
END_TEST

Suite *suite_item(void);
Suite *suite_item(void)
{
        Suite *s = suite_create("item");
        TCase *tc = tcase_create("states");
        tcase_add_test(tc, test_item_state_every_combination_of_files);
        tcase_add_test(tc, test_item_state_content_first);
        tcase_add_test(tc, test_item_actions_of_each_state);
        tcase_add_test(tc, test_item_later_pending_not_published);
        tcase_add_test(tc, test_item_legacy_converted);
        tcase_add_test(tc, test_item_cancel_event);
        tcase_add_test(tc, test_cancel_pending_bounded_per_sender);
        suite_add_tcase(s, tc);
        return s;
}
