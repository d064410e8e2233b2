/* A file of handoff/ that one daemon is rejecting, as another daemon
 * sees it (store_reject(), decide.c's decide_links()): the rejection is a
 * link into rejected/ made before the name leaves handoff/, and the
 * kernel counts a link before its name shows in rejected/.  The other
 * daemon is a second lock fd on the same spool, holding the inode's byte
 * as a rejection in progress does; the link it is making, counted but not
 * yet named, is a link under a dotfile name of rejected/ that no look
 * searches.  Neither may judge the file a hard link, write its reason
 * over the first one's, or reject it a second time as NAME~1. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "daemonfx.h"
#include "intake.h"
#include "lock.h"
#include "testutil.h"

#define NAME "x1.json"
#define HALF ".x1.json.linking"
#define FULL "{\"reason\":\"inbox_full\",\"detail\":\"x\",\"name\":\"" NAME "\"}"

/* The one decision of NAME (a batch of one). */
static int decide_one(struct fx *f)
{
        char *names[1] = { NAME };
        int out = -1;

        ck_assert_int_eq(intake_batch(&f->p, names, 1, hd_now_usec(), &out), 0);
        return out;
}

/* rejected/NAME.reason holds the other daemon's reason, FULL, as written. */
static void assert_reason_kept(struct fx *f)
{
        char path[64];
        char *text;

        snprintf(path, sizeof(path), "/proc/self/fd/%d/%s.reason", f->sp->fd[SD_REJECTED], NAME);
        text = tu_read_file(path, NULL);
        ck_assert_msg(text, "no %s", path);
        ck_assert_str_eq(text, FULL);
        free(text);
}

/* A spool with handoff/NAME, a handoff for alice (its inode in *was),
 * whose rejection the other daemon (its lock fd returned) has begun. */
static int put_one(struct fx *f, struct spool_ino *was)
{
        struct stat st;
        int other;

        fx_open(f);
        fx_put_doc(f->sp->fd[SD_HANDOFF], NAME, fx_doc("x1", "alice", 10, 600, f->k));
        ck_assert_int_eq(fstatat(f->sp->fd[SD_HANDOFF], NAME, &st, AT_SYMLINK_NOFOLLOW), 0);
        *was = (struct spool_ino){ .dev = st.st_dev, .ino = st.st_ino };
        ck_assert_int_eq(lock_open(f->sp->root_fd, &other), 0);
        ck_assert_int_eq(lock_try(other, lock_off_inode(was->dev, was->ino), true), 0);
        return other;
}

/* The other daemon's rejection, done: its reason, its link, its lock let
 * go (the name in handoff/ still there: it leaves at that one's flush). */
static void other_links(struct fx *f, int other, const struct spool_ino *was)
{
        fx_put(f->sp->fd[SD_REJECTED], "", NAME, ".reason", FULL);
        ck_assert_int_eq(linkat(f->sp->fd[SD_HANDOFF], NAME, f->sp->fd[SD_REJECTED], NAME, 0), 0);
        unlinkat(f->sp->fd[SD_REJECTED], HALF, 0);
        lock_release(other, lock_off_inode(was->dev, was->ino));
}

/* The one rejection, the other's: rejected/NAME with its reason, no
 * NAME~1, handoff/NAME gone. */
static void assert_rejected_once(struct fx *f)
{
        ck_assert(!fx_there(f->sp->fd[SD_HANDOFF], "", NAME, ""));
        ck_assert(fx_there(f->sp->fd[SD_REJECTED], "", NAME, ""));
        assert_reason_kept(f);
        ck_assert(!fx_there(f->sp->fd[SD_REJECTED], "", NAME, "~1"));
        ck_assert(!fx_there(f->sp->fd[SD_REJECTED], "", NAME, "~1.reason"));
}

/* Two links seen while the other daemon's link is being made: looked at
 * again once it is whole, then gone as that rejection's, its reason
 * kept (not "hardlink" over it). */
START_TEST(test_reject_links_a_link_being_made_is_no_hard_link)
{
        struct spool_ino was;
        struct fx f;
        int other;

        other = put_one(&f, &was);
        ck_assert_int_eq(linkat(f.sp->fd[SD_HANDOFF], NAME, f.sp->fd[SD_REJECTED], HALF, 0), 0);
        ck_assert_int_eq(decide_one(&f), IO_BUSY);
        ck_assert(fx_there(f.sp->fd[SD_HANDOFF], "", NAME, ""));
        ck_assert(!fx_there(f.sp->fd[SD_REJECTED], "", NAME, ""));
        ck_assert(!fx_there(f.sp->fd[SD_REJECTED], "", NAME, ".reason"));
        other_links(&f, other, &was);
        ck_assert_int_eq(decide_one(&f), IO_GONE);
        assert_rejected_once(&f);
        close(other);
        fx_close(&f);
}
END_TEST

/* A rejection decided on the file with one link, while the other
 * daemon's rejection of it is under way: it waits for that one, then
 * finds the file in rejected/ and lets the name in handoff/ go, rather
 * than rejecting it again as NAME~1. */
START_TEST(test_reject_links_a_second_rejection_finds_the_first)
{
        enum item_outcome o = IO_REJECTED;
        struct spool_ino was;
        struct fx f;
        int other;

        other = put_one(&f, &was);
        ck_assert_int_eq(store_reject(f.sp, NAME, &was, HD_R_EXPIRED, "x", NULL, hd_now_usec(), &o),
                         0);
        ck_assert_int_eq(o, IO_BUSY);
        ck_assert(!fx_there(f.sp->fd[SD_REJECTED], "", NAME, ".reason"));
        other_links(&f, other, &was);
        o = IO_REJECTED;
        ck_assert_int_eq(store_reject(f.sp, NAME, &was, HD_R_EXPIRED, "x", NULL, hd_now_usec(), &o),
                         0);
        ck_assert_int_eq(o, IO_GONE);
        assert_rejected_once(&f);
        close(other);
        fx_close(&f);
}
END_TEST

Suite *suite_reject_links(void);
Suite *suite_reject_links(void)
{
        Suite *s = suite_create("reject_links");
        TCase *tc = tcase_create("races");
        tcase_add_test(tc, test_reject_links_a_link_being_made_is_no_hard_link);
        tcase_add_test(tc, test_reject_links_a_second_rejection_finds_the_first);
        suite_add_tcase(s, tc);
        return s;
}
