/* The names waiting for a decision (src/handoffd/pending.c): a queue per
 * owner, the owners in turns, a newcomer first, names put back first
 * again, and an owner's queue bounded; names queued with their file open
 * (a look), the descriptors bounded and never leaked. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "pending.h"

/* Take up to max names; their names joined by ' ' into buf, each done. */
static const char *take(struct pending *p, size_t max, char *buf, size_t n)
{
        struct pending_name *t[64];
        size_t k = pending_take(p, t, max);

        buf[0] = '\0';
        for (size_t i = 0; i < k; i++) {
                snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", i ? " " : "", t[i]->name);
                pending_done(p, t[i]);
        }
        return buf;
}

START_TEST(test_pending_owners_take_turns)
{
        struct pending *p;
        char buf[256], name[16];

        ck_assert_int_eq(pending_new(&p), 0);
        for (int i = 0; i < 4; i++) {
                snprintf(name, sizeof(name), "m%d", i);
                ck_assert_int_eq(pending_add(p, name, 1001, ""), 0);
        }
        ck_assert_int_eq(pending_add(p, "b0", 1002, ""), 0);
        ck_assert_int_eq(pending_add(p, "b1", 1002, ""), 0);
        /* queued twice: once */
        ck_assert_int_eq(pending_add(p, "m0", 1001, ""), 0);
        ck_assert_uint_eq(pending_size(p), 6);
        /* bob came last, with nothing waiting: his turn is next */
        ck_assert_str_eq(take(p, 64, buf, sizeof(buf)), "b0 m0 b1 m1 m2 m3");
        ck_assert_uint_eq(pending_size(p), 0);
        pending_free(p);
}
END_TEST

/* A flood of one owner: a name of another waits for one of the flood's. */
START_TEST(test_pending_a_newcomer_waits_for_one_name)
{
        struct pending *p;
        char buf[256], name[16];

        ck_assert_int_eq(pending_new(&p), 0);
        for (int i = 0; i < 100; i++) {
                snprintf(name, sizeof(name), "m%d", i);
                ck_assert_int_eq(pending_add(p, name, 1001, ""), 0);
        }
        ck_assert_str_eq(take(p, 1, buf, sizeof(buf)), "m0");
        ck_assert_int_eq(pending_add(p, "b0", 1002, ""), 0);
        ck_assert_str_eq(take(p, 2, buf, sizeof(buf)), "b0 m1");
        pending_free(p);
}
END_TEST

/* Names taken but not decided (a batch's time was up), put back last
 * first: the next take begins with them, in their order. */
START_TEST(test_pending_put_back_keeps_order_and_turn)
{
        struct pending *p;
        struct pending_name *t[8];
        char buf[256];
        size_t k;

        ck_assert_int_eq(pending_new(&p), 0);
        ck_assert_int_eq(pending_add(p, "m0", 1001, ""), 0);
        ck_assert_int_eq(pending_add(p, "m1", 1001, ""), 0);
        ck_assert_int_eq(pending_add(p, "m2", 1001, ""), 0);
        ck_assert_int_eq(pending_add(p, "b0", 1002, ""), 0);
        k = pending_take(p, t, 3);
        ck_assert_uint_eq(k, 3);
        ck_assert_str_eq(t[0]->name, "b0");
        ck_assert_str_eq(t[1]->name, "m0");
        ck_assert_str_eq(t[2]->name, "m1");
        /* b0 decided; m0 and m1 not */
        pending_done(p, t[0]);
        pending_put_back(p, t[2]);
        pending_put_back(p, t[1]);
        ck_assert_uint_eq(pending_size(p), 3);
        /* taken ones are still known: not queued twice meanwhile */
        ck_assert_int_eq(pending_add(p, "m0", 1001, ""), 0);
        ck_assert_int_eq(pending_add(p, "c0", 1003, ""), 0);
        ck_assert_str_eq(take(p, 64, buf, sizeof(buf)), "c0 m0 m1 m2");
        pending_free(p);
}
END_TEST

/* The hub's files: one owner, a turn per sender (the hub's tokens). */
START_TEST(test_pending_hub_senders_take_turns)
{
        struct pending *p;
        char buf[256], name[16];

        ck_assert_int_eq(pending_new(&p), 0);
        for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof(name), "m%d", i);
                ck_assert_int_eq(pending_add(p, name, 1005, "mallory"), 0);
        }
        ck_assert_int_eq(pending_add(p, "a0", 1005, "alice"), 0);
        ck_assert_int_eq(pending_add(p, "x0", 1001, ""), 0);
        ck_assert_str_eq(take(p, 64, buf, sizeof(buf)), "x0 a0 m0 m1 m2");
        pending_free(p);
}
END_TEST

/* The sender is read for the hub's user's files only (the owner of its
 * state_dir), and only a plain name of at most PENDING_SENDER_MAX. */
START_TEST(test_pending_sender_trusted_for_the_hub_only)
{
        char dir[] = "/tmp/pending.XXXXXX", state[64], s[PENDING_SENDER_MAX + 1];
        struct pending *p;
        int dfd, fd;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(state, sizeof(state), "%s/state", dir);
        ck_assert_int_eq(mkdir(state, 0700), 0);
        dfd = open(dir, O_RDONLY | O_DIRECTORY);
        fd = openat(dfd, "f.json", O_WRONLY | O_CREAT, 0640);
        ck_assert_int_ge(fd, 0);
        if (fsetxattr(fd, PENDING_SENDER_XATTR, "bob", 3, 0) < 0) {
                close(fd);
                unlinkat(dfd, "f.json", 0);
                rmdir(state);
                rmdir(dir);
                close(dfd);
                return; /* no user xattrs here: nothing to read */
        }
        close(fd);
        ck_assert_int_eq(pending_new(&p), 0);
        pending_hub_user(p, "/nonexistent/state");
        pending_sender(p, dfd, "f.json", getuid(), s);
        ck_assert_str_eq(s, "");        /* no hub: no sender */
        pending_hub_user(p, state);
        pending_sender(p, dfd, "f.json", getuid(), s);
        ck_assert_str_eq(s, "bob");
        pending_sender(p, dfd, "f.json", getuid() + 1, s);
        ck_assert_str_eq(s, "");        /* another owner's file */
        pending_free(p);
        unlinkat(dfd, "f.json", 0);
        rmdir(state);
        rmdir(dir);
        close(dfd);
}
END_TEST

/* An owner holds at most PENDING_OWNER_MAX names: the next is left out
 * (a rescan finds it), another owner's is not. */
START_TEST(test_pending_an_owner_is_bounded)
{
        struct pending *p;
        struct pending_name *t[1];
        char name[16];

        ck_assert_int_eq(pending_new(&p), 0);
        for (int i = 0; i < PENDING_OWNER_MAX; i++) {
                snprintf(name, sizeof(name), "m%d", i);
                ck_assert_int_eq(pending_add(p, name, 1001, ""), 0);
        }
        ck_assert(!pending_left_out(p));
        ck_assert_int_eq(pending_add(p, "one-more", 1001, ""), -ENOBUFS);
        ck_assert(pending_left_out(p));
        ck_assert_int_eq(pending_add(p, "b0", 1002, ""), 0);
        ck_assert_uint_eq(pending_size(p), PENDING_OWNER_MAX + 1);
        pending_rescan(p);
        ck_assert(!pending_left_out(p));
        /* room for one again */
        ck_assert_uint_eq(pending_take(p, t, 1), 1);
        ck_assert_str_eq(t[0]->name, "b0");
        pending_done(p, t[0]);
        ck_assert_uint_eq(pending_take(p, t, 1), 1);
        pending_done(p, t[0]);
        ck_assert_int_eq(pending_add(p, "one-more", 1001, ""), 0);
        pending_free(p);
}
END_TEST

/* A descriptor for a look: /dev/null, its fstat alongside. */
static struct pending_look look_open(void)
{
        struct pending_look l = { .fd = open("/dev/null", O_RDONLY | O_CLOEXEC) };

        ck_assert_int_ge(l.fd, 0);
        ck_assert_int_eq(fstat(l.fd, &l.st), 0);
        return l;
}

static bool fd_open(int fd)
{
        return fcntl(fd, F_GETFD) >= 0;
}

/* A look is the queue's: handed to its taker, closed when its name is done
 * unused, and a name queued again loses it (its decision opens anew). */
START_TEST(test_pending_looks_are_held_and_dropped)
{
        struct pending *p;
        struct pending_name *t[4];
        struct pending_look a, b, c;

        ck_assert_int_eq(pending_new(&p), 0);
        pending_hold_max(p, 2);
        ck_assert(pending_may_hold(p));
        a = look_open();
        b = look_open();
        ck_assert_int_eq(pending_add_look(p, "a", 1001, "", &a), 0);
        ck_assert_int_eq(pending_add_look(p, "b", 1001, "", &b), 0);
        /* two held: the bound */
        ck_assert(!pending_may_hold(p));
        /* a rescan meets b: its look stays */
        ck_assert(pending_queued(p, "b"));
        ck_assert(fd_open(b.fd));
        ck_assert(!pending_queued(p, "c"));
        /* an event names b again: its look goes, the name stays queued */
        ck_assert(pending_again(p, "b"));
        ck_assert(!fd_open(b.fd));
        ck_assert(pending_may_hold(p));
        ck_assert(!pending_again(p, "c"));
        /* queued again with a look of its own: that one goes too */
        c = look_open();
        ck_assert_int_eq(pending_add_look(p, "a", 1001, "", &c), 0);
        ck_assert(!fd_open(c.fd));
        ck_assert(!fd_open(a.fd));
        ck_assert_uint_eq(pending_size(p), 2);
        ck_assert_uint_eq(pending_take(p, t, 4), 2);
        ck_assert_int_eq(t[0]->look.fd, -1);
        ck_assert_int_eq(t[1]->look.fd, -1);
        pending_done(p, t[0]);
        pending_done(p, t[1]);
        /* taken and used (the taker closes it), or done unused (closed) */
        a = look_open();
        b = look_open();
        ck_assert_int_eq(pending_add_look(p, "a", 1001, "", &a), 0);
        ck_assert_int_eq(pending_add_look(p, "b", 1002, "", &b), 0);
        ck_assert_uint_eq(pending_take(p, t, 4), 2);
        for (int i = 0; i < 2; i++) {
                if (!strcmp(t[i]->name, "a")) {
                        int fd = t[i]->look.fd;
                        ck_assert_int_eq(fd, a.fd);
                        t[i]->look.fd = -1;
                        close(fd);
                } else {
                        ck_assert_int_eq(t[i]->look.fd, b.fd);
                        ck_assert(t[i]->look.st.st_rdev == b.st.st_rdev);
                }
                pending_done(p, t[i]);
        }
        ck_assert(!fd_open(b.fd));
        ck_assert(pending_may_hold(p));
        pending_free(p);
}
END_TEST

/* Left out (its owner's queue full) or freed with the queue: closed. */
START_TEST(test_pending_looks_closed_when_left_out_or_freed)
{
        struct pending *p;
        struct pending_look l, m;
        char name[16];

        ck_assert_int_eq(pending_new(&p), 0);
        pending_hold_max(p, PENDING_LOOKS_MAX);
        for (int i = 0; i < PENDING_OWNER_MAX; i++) {
                snprintf(name, sizeof(name), "m%d", i);
                ck_assert_int_eq(pending_add(p, name, 1001, ""), 0);
        }
        l = look_open();
        ck_assert_int_eq(pending_add_look(p, "over", 1001, "", &l), -ENOBUFS);
        ck_assert(!fd_open(l.fd));
        m = look_open();
        ck_assert_int_eq(pending_add_look(p, "other", 1002, "", &m), 0);
        ck_assert(fd_open(m.fd));
        pending_free(p);
        ck_assert(!fd_open(m.fd));
}
END_TEST

/* Written and closed in place (IN_CLOSE_WRITE): a queued name keeps its
 * look, the stat read anew from its descriptor (what its decision sees is
 * the file as it is now); a name not queued is not queued by it. */
START_TEST(test_pending_rewritten_keeps_the_look)
{
        char path[] = "/tmp/hdtest.pending.XXXXXX";
        struct pending *p;
        struct pending_name *t[2];
        struct pending_look l;
        int wfd = mkstemp(path);

        ck_assert_int_ge(wfd, 0);
        ck_assert_int_eq(pending_new(&p), 0);
        pending_hold_max(p, 2);
        l.fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(l.fd, 0);
        ck_assert_int_eq(fstat(l.fd, &l.st), 0);
        ck_assert_int_eq(l.st.st_size, 0);
        ck_assert_int_eq(pending_add_look(p, "a", 1001, "", &l), 0);
        ck_assert_int_eq(write(wfd, "{}\n", 3), 3);
        ck_assert_int_eq(close(wfd), 0);
        ck_assert(pending_rewritten(p, "a"));
        ck_assert(!pending_rewritten(p, "b"));
        ck_assert(!pending_queued(p, "b"));
        ck_assert(fd_open(l.fd));
        ck_assert_uint_eq(pending_take(p, t, 2), 1);
        ck_assert_int_eq(t[0]->look.fd, l.fd);
        ck_assert_int_eq(t[0]->look.st.st_size, 3);
        pending_done(p, t[0]);
        ck_assert(!fd_open(l.fd));
        /* a move onto the name still drops it (pending_again()) */
        l = look_open();
        ck_assert_int_eq(pending_add_look(p, "c", 1001, "", &l), 0);
        ck_assert(pending_again(p, "c"));
        ck_assert(!fd_open(l.fd));
        ck_assert(pending_rewritten(p, "c"));
        pending_free(p);
        unlink(path);
}
END_TEST

Suite *suite_pending(void);
Suite *suite_pending(void)
{
        Suite *s = suite_create("pending");
        TCase *tc = tcase_create("turns");
        tcase_add_test(tc, test_pending_owners_take_turns);
        tcase_add_test(tc, test_pending_a_newcomer_waits_for_one_name);
        tcase_add_test(tc, test_pending_put_back_keeps_order_and_turn);
        tcase_add_test(tc, test_pending_an_owner_is_bounded);
        tcase_add_test(tc, test_pending_hub_senders_take_turns);
        tcase_add_test(tc, test_pending_sender_trusted_for_the_hub_only);
        tcase_add_test(tc, test_pending_looks_are_held_and_dropped);
        tcase_add_test(tc, test_pending_looks_closed_when_left_out_or_freed);
        tcase_add_test(tc, test_pending_rewritten_keeps_the_look);
        suite_add_tcase(s, tc);
        return s;
}
