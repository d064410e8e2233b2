/* archive/'s names (layout_archive_name()): the real implementation's
 * name while it fits, bounded whatever the valid names in a handoff, the
 * id always whole and last so that readers find it, and each name one a
 * file system takes with its .outcome and that sidecar's temp name. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "layout.h"
#include "testutil.h"

static void fill(char *buf, char c, size_t n, const char *head)
{
        size_t h = strlen(head);

        memcpy(buf, head, h);
        memset(buf + h, c, n - h);
        buf[n] = '\0';
}

START_TEST(test_archive_name_whole_while_it_fits)
{
        char name[NAME_MAX + 1];

        ck_assert_int_eq(layout_archive_name(1700000000, "bob", "alice", "x-1", 0, name, sizeof(name)), 0);
        ck_assert_str_eq(name, "1700000000-bob-alice-x-1.json");
        ck_assert_int_eq(layout_archive_name(1700000000, "bob", "alice", "x-1", 3, name, sizeof(name)), 0);
        ck_assert_str_eq(name, "1700000000-bob-alice-x-1~3.json");
        /* the real writer's ids name both agents already */
        ck_assert_int_eq(layout_archive_name(1700000001, "bob", "alice", "1700000000-bob-alice-0f", 0,
                                             name, sizeof(name)), 0);
        ck_assert_str_eq(name, "1700000001-1700000000-bob-alice-0f.json");
        /* no agent name: "unknown", never a '/' or an empty part */
        ck_assert_int_eq(layout_archive_name(5, NULL, "a/b", "i", 0, name, sizeof(name)), 0);
        ck_assert_str_eq(name, "5-unknown-unknown-i.json");
}
END_TEST

/* Every length of valid name, every choice: at most
 * LAYOUT_ARCHIVE_NAME_MAX, the id whole at the end, and the name with its
 * .outcome written for real (write_atomic(): its temp name too). */
START_TEST(test_archive_name_bounded_for_every_valid_name)
{
        static const size_t lf[] = { 1, 30, 63, 64 }, lt[] = { 1, 43, 64 }, li[] = { 1, 100, 128 };
        static const unsigned ns[] = { 0, 1, 99 };
        static const int64_t ts[] = { 0, 1795731960, INT64_MAX, INT64_MIN };
        char from[65], to[65], id[129], name[NAME_MAX + 1], side[NAME_MAX + 16];
        char *dir = tu_tmpdir();
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        unsigned bounded = 0;

        ck_assert_int_ge(dfd, 0);
        for (size_t a = 0; a < sizeof(lf) / sizeof(lf[0]); a++)
                for (size_t b = 0; b < sizeof(lt) / sizeof(lt[0]); b++)
                        for (size_t c = 0; c < sizeof(li) / sizeof(li[0]); c++)
                                for (size_t d = 0; d < sizeof(ns) / sizeof(ns[0]); d++)
                                        for (size_t e = 0; e < sizeof(ts) / sizeof(ts[0]); e++) {
                size_t l;

                fill(from, 'f', lf[a], "f");
                fill(to, 't', lt[b], "t");
                fill(id, 'I', li[c], "I");
                ck_assert_int_eq(layout_archive_name(ts[e], from, to, id, ns[d], name, sizeof(name)), 0);
                l = strlen(name);
                ck_assert_uint_le(l, LAYOUT_ARCHIVE_NAME_MAX);
                ck_assert_msg(layout_archive_is(name, id), "%s is not found for its id", name);
                ck_assert_msg(strstr(name, id) && name[strstr(name, id) - name - 1] == '-', "%s", name);
                bounded += !strstr(name, from) || !strstr(name, to);
                ck_assert_int_eq(layout_suffixed(name, LAYOUT_OUTCOME, side, sizeof(side)), 0);
                ck_assert_int_eq(write_atomic(dfd, side, "{}", 2, 0600, 0), 0);
                ck_assert_int_eq(write_atomic(dfd, name, "{}", 2, 0600, 0), 0);
                ck_assert_int_eq(unlinkat(dfd, side, 0), 0);
                ck_assert_int_eq(unlinkat(dfd, name, 0), 0);
        }
        ck_assert_uint_gt(bounded, 0);  /* the cut form was made */
        close(dfd);
        free(dir);
}
END_TEST

/* Two long names that differ only where the cut falls stay two names. */
START_TEST(test_archive_name_cut_keeps_names_apart)
{
        char f1[65], f2[65], to[65], id[129], n1[NAME_MAX + 1], n2[NAME_MAX + 1];

        fill(f1, 's', 64, "sender-");
        memcpy(f2, f1, sizeof(f1));
        f2[63] = 'z';
        fill(to, 't', 64, "taker-");
        fill(id, 'x', 128, "id-");
        ck_assert_int_eq(layout_archive_name(1795731960, f1, to, id, 0, n1, sizeof(n1)), 0);
        ck_assert_int_eq(layout_archive_name(1795731960, f2, to, id, 0, n2, sizeof(n2)), 0);
        ck_assert_str_ne(n1, n2);
        /* and each is the same at every call (a retry after a crash) */
        ck_assert_int_eq(layout_archive_name(1795731960, f2, to, id, 0, n1, sizeof(n1)), 0);
        ck_assert_str_eq(n1, n2);
}
END_TEST

START_TEST(test_archive_name_refuses)
{
        char name[NAME_MAX + 1];

        ck_assert_int_eq(layout_archive_name(1, "a", "b", "../x", 0, name, sizeof(name)), -EINVAL);
        ck_assert_int_eq(layout_archive_name(1, "a", "b", "x", LAYOUT_ARCHIVE_TRIES, name, sizeof(name)),
                         -EINVAL);
        ck_assert_int_eq(layout_archive_name(1, "a", "b", "x", 0, name, 8), -ENAMETOOLONG);
        ck_assert(!layout_archive_is("1-a-b-xx.json", "x"));
        /* the form only: "b-xx" could be the id too; the item says */
        ck_assert(layout_archive_is("1-a-b-xx.json", "b-xx"));
        ck_assert(layout_archive_is("1-a-b-xx~12.json", "xx"));
        ck_assert(!layout_archive_is("1-a-b-xx.outcome", "xx"));
}
END_TEST

/* archive/'s two sidecars, .outcome and an agent's .result, are
 * sidecars only beside their item; the names an agent and the daemon
 * leave in handoffs/ for a result are their own kinds, never a temp the
 * start removes; the longest archive name takes its .result. */
START_TEST(test_archive_sidecars_and_result_names)
{
        char *dir = tu_tmpdir(), name[NAME_MAX + 1], side[NAME_MAX + 16], id[129];
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(dfd, 0);
        fill(id, 'i', 128, "");
        ck_assert_int_eq(layout_archive_name(INT64_MIN, "f", "t", id, 99, name, sizeof(name)), 0);
        ck_assert_int_eq(layout_suffixed(name, LAYOUT_RESULT, side, sizeof(side)), 0);
        ck_assert_int_eq(write_atomic(dfd, side, "{}", 2, 0640, 0), 0);
        /* no item beside it: an item of its own */
        ck_assert(!layout_is_sidecar_at(dfd, side, LAYOUT_OUTCOME));
        ck_assert_int_eq(write_atomic(dfd, name, "{}", 2, 0640, 0), 0);
        ck_assert(layout_is_sidecar_at(dfd, side, LAYOUT_OUTCOME));
        ck_assert(!layout_is_sidecar_at(dfd, name, LAYOUT_OUTCOME));
        ck_assert(!layout_archive_is(side, id));
        ck_assert_int_eq(layout_classify(side), LK_SIDECAR);
        ck_assert_int_eq(layout_classify(".result.x-1"), LK_RESULT);
        ck_assert_int_eq(layout_classify(".refused.x-1"), LK_REFUSED);
        ck_assert_int_eq(layout_classify("..result.x-1.a1b2c3"), LK_DOT);
        unlinkat(dfd, side, 0);
        unlinkat(dfd, name, 0);
        close(dfd);
        tu_rm_rf(dir);
        free(dir);
}
END_TEST

Suite *suite_layout(void);
Suite *suite_layout(void)
{
        Suite *s = suite_create("layout");
        TCase *tc = tcase_create("archive_names");

        tcase_add_test(tc, test_archive_name_whole_while_it_fits);
        tcase_add_test(tc, test_archive_name_bounded_for_every_valid_name);
        tcase_add_test(tc, test_archive_name_cut_keeps_names_apart);
        tcase_add_test(tc, test_archive_name_refuses);
        tcase_add_test(tc, test_archive_sidecars_and_result_names);
        suite_add_tcase(s, tc);
        return s;
}
