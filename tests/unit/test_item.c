/* The claimed item's state table (src/handoffd/item.c), called directly on
 * a temp spool opened as the daemon opens it, no event loop: every
 * combination of the four files (the marker claimed/<id>.delivered, and in
 * the agent's handoffs/ .pending.<b>, the bootstrap <b>, .expire.<b>) gives
 * the state handoffd(8) "Durability and crash windows" names, and each
 * state's action leaves the files that page says.  The expected state is
 * written from the man page's table, not from item.c's array. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "item.h"
#include "spool.h"
#include "daemonfx.h"
#include "testutil.h"

enum { M_EXPIRE = 1, M_BOOT = 2, M_PENDING = 4, M_MARKER = 8 };

/* A handoff from bob to `to` as claimed/<id>.json; with tamper, changed
 * after signing. */
static void put_claimed(struct fx *f, const char *id, const char *to, bool tamper)
{
        json_t *h = fx_doc(id, to, 10, 600, f->k);
        char name[300];

        if (tamper)
                json_object_set_new(h, "reason", json_string("forged"));
        snprintf(name, sizeof(name), "%s.json", id);
        fx_put_doc(f->sp->fd[SD_CLAIMED], name, h);
}

/* The item id with the files of mask; accepted `age_s` seconds ago. */
static void put_item(struct fx *f, const char *id, unsigned mask, int64_t age_s)
{
        char b[300], at[HD_TIME_MAX], marker[200];

        put_claimed(f, id, "alice", false);
        ck_assert_int_eq(hd_bootstrap_name(id, b, sizeof(b)), 0);
        hd_time_format(hd_now_usec() - age_s * 1000000LL, at, sizeof(at));
        snprintf(marker, sizeof(marker), "{\"accepted_at\":\"%s\"}", at);
        if (mask & M_MARKER)
                fx_put(f->sp->fd[SD_CLAIMED], "", id, ".delivered", marker);
        if (mask & M_PENDING)
                fx_put(f->alice->handoffs_fd, ".pending.", b, "", marker);
        if (mask & M_BOOT)
                fx_put(f->alice->handoffs_fd, "", b, "", marker);
        if (mask & M_EXPIRE)
                fx_put(f->alice->handoffs_fd, ".expire.", b, "", marker);
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
        int fd = open_claimed(f, id), s;

        s = item_state_at(f->sp, id, fd);
        close(fd);
        return s;
}

static int check_item(struct fx *f, const char *id)
{
        int fd = open_claimed(f, id), r;

        r = item_check_locked(f->sp, id, fd, hd_now_usec());
        close(fd);
        return r;
}

/* handoffd(8)'s table: without the marker only the bootstrap counts; with
 * it, .expire. first, then the bootstrap, then .pending., else taken. */
static enum item_state expected(unsigned mask)
{
        if (!(mask & M_MARKER))
                return mask & M_BOOT ? IS_UNMARKED : IS_CLAIMED;
        if (mask & M_EXPIRE)
                return IS_EXPIRING;
        if (mask & M_BOOT)
                return IS_PUBLISHED;
        if (mask & M_PENDING)
                return IS_MARKED;
        return IS_TAKEN;
}

START_TEST(test_item_state_every_combination_of_files)
{
        struct fx f;

        fx_open(&f);
        for (unsigned mask = 0; mask < 16; mask++) {
                char id[32];
                snprintf(id, sizeof(id), "state-%u", mask);
                put_item(&f, id, mask, 1);
                ck_assert_msg(state_of(&f, id) == (int)expected(mask),
                              "files %s%s%s%s: state %d, want %d",
                              mask & M_MARKER ? "marker " : "", mask & M_PENDING ? "pending " : "",
                              mask & M_BOOT ? "boot " : "", mask & M_EXPIRE ? "expire" : "",
                              state_of(&f, id), expected(mask));
        }
        fx_close(&f);
}
END_TEST

START_TEST(test_item_state_content_first)
{
        struct fx f;
        int fd;

        fx_open(&f);
        /* changed after its claim, whatever files it has */
        put_claimed(&f, "tampered", "alice", true);
        fx_put(f.sp->fd[SD_CLAIMED], "", "tampered", ".delivered", "{}");
        ck_assert_int_eq(state_of(&f, "tampered"), IS_TAMPERED);
        /* for an agent not served here */
        put_claimed(&f, "gordons", "gordon", false);
        ck_assert_int_eq(state_of(&f, "gordons"), IS_NOT_OURS);
        /* gone since it was opened: another daemon archived it */
        put_item(&f, "gone", M_MARKER, 1);
        fd = open_claimed(&f, "gone");
        ck_assert_int_eq(unlinkat(f.sp->fd[SD_CLAIMED], "gone.json", 0), 0);
        ck_assert_int_eq(item_state_at(f.sp, "gone", fd), IS_GONE);
        close(fd);
        /* an empty marker (its bytes not synced before a power loss) is a marker */
        put_item(&f, "emptymarker", M_BOOT, 1);
        fx_put(f.sp->fd[SD_CLAIMED], "", "emptymarker", ".delivered", "");
        ck_assert_int_eq(state_of(&f, "emptymarker"), IS_PUBLISHED);
        fx_close(&f);
}
END_TEST

START_TEST(test_item_actions_of_each_state)
{
        struct fx f;
        char b[300];

        fx_open(&f);
        /* claimed: delivered (written, marked, published) */
        put_item(&f, "a-claimed", 0, 1);
        ck_assert_int_ge(check_item(&f, "a-claimed"), 0);
        ck_assert_int_eq(hd_bootstrap_name("a-claimed", b, sizeof(b)), 0);
        ck_assert(fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.alice->handoffs_fd, ".pending.", b, ""));
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "a-claimed", ".delivered"));
        ck_assert_int_eq(state_of(&f, "a-claimed"), IS_PUBLISHED);

        /* marked: published */
        put_item(&f, "a-marked", M_MARKER | M_PENDING, 1);
        ck_assert_int_ge(check_item(&f, "a-marked"), 0);
        ck_assert_int_eq(hd_bootstrap_name("a-marked", b, sizeof(b)), 0);
        ck_assert(fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.alice->handoffs_fd, ".pending.", b, ""));

        /* unmarked: the marker written, the bootstrap left as it is */
        put_item(&f, "a-unmarked", M_BOOT, 1);
        ck_assert_int_ge(check_item(&f, "a-unmarked"), 0);
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "a-unmarked", ".delivered"));
        ck_assert_int_eq(state_of(&f, "a-unmarked"), IS_PUBLISHED);

        /* published, within the window: nothing moves, a deadline is noted */
        deadline_reset(&f.sp->deadline);
        put_item(&f, "a-waits", M_MARKER | M_BOOT, 1);
        ck_assert_int_ge(check_item(&f, "a-waits"), 0);
        ck_assert_int_eq(state_of(&f, "a-waits"), IS_PUBLISHED);
        ck_assert_int_gt(f.sp->deadline.next, hd_now_usec());

        /* published, past the window: taken back and archived as expired */
        put_item(&f, "a-late", M_MARKER | M_BOOT, f.cfg->resume_window + 5);
        ck_assert_int_ge(check_item(&f, "a-late"), 0);
        ck_assert_int_eq(hd_bootstrap_name("a-late", b, sizeof(b)), 0);
        ck_assert(!fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.alice->handoffs_fd, ".expire.", b, ""));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-late", ".json"));

        /* expiring: the cut-short expiry finished */
        put_item(&f, "a-expiring", M_MARKER | M_EXPIRE, 1);
        ck_assert_int_ge(check_item(&f, "a-expiring"), 0);
        ck_assert_int_eq(hd_bootstrap_name("a-expiring", b, sizeof(b)), 0);
        ck_assert(!fx_there(f.alice->handoffs_fd, ".expire.", b, ""));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-expiring", ".json"));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-expiring", ".delivered"));

        /* taken, while a consumer still holds it under its private name: kept */
        put_item(&f, "a-held", M_MARKER, 1);
        ck_assert_int_eq(hd_bootstrap_name("a-held", b, sizeof(b)), 0);
        fx_put(f.alice->handoffs_fd, ".consume.1.abcdef01.", b, "", "{}");
        ck_assert_int_ge(check_item(&f, "a-held"), 0);
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "a-held", ".json"));

        /* taken: archived as consumed */
        put_item(&f, "a-taken", M_MARKER, 1);
        ck_assert_int_ge(check_item(&f, "a-taken"), 0);
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-taken", ".json"));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-taken", ".delivered"));
        ck_assert_uint_eq(f.sp->st.consumed, 1);
        ck_assert_uint_eq(f.sp->st.expired, 2);

        /* tampered: its bootstrap withdrawn, the item rejected */
        put_item(&f, "a-forged", M_MARKER | M_BOOT, 1);
        put_claimed(&f, "a-forged", "alice", true);
        ck_assert_int_ge(check_item(&f, "a-forged"), 0);
        ck_assert_int_eq(hd_bootstrap_name("a-forged", b, sizeof(b)), 0);
        ck_assert(!fx_there(f.alice->handoffs_fd, "", b, ""));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "a-forged", ".json"));
        ck_assert(fx_there(f.sp->fd[SD_REJECTED], "", "a-forged", ".json"));

        /* not ours: left alone */
        put_claimed(&f, "a-gordons", "gordon", false);
        ck_assert_int_ge(check_item(&f, "a-gordons"), 0);
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "a-gordons", ".json"));
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
        suite_add_tcase(s, tc);
        return s;
}
