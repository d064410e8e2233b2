/* The reason table: every code has a unique name that maps back to it. */
#include <check.h>
#include <string.h>

#include "handoff.h"

START_TEST(test_reason_names_round_trip)
{
        for (int r = 0; r < _HD_R_MAX; r++) {
                const char *n = hd_reason_name((hd_reason)r);
                ck_assert_msg(n != NULL, "reason %d has no name", r);
                ck_assert_int_eq(hd_reason_from_name(n), r);
                for (int q = 0; q < r; q++)
                        ck_assert_str_ne(n, hd_reason_name((hd_reason)q));
        }
        ck_assert_ptr_null(hd_reason_name(_HD_R_MAX));
        ck_assert_int_lt(hd_reason_from_name("no_such_reason"), 0);
        ck_assert_str_eq(hd_reason_name(HD_R_BAD_MAC), "bad_mac");
        ck_assert_str_eq(hd_reason_name(HD_R_EXPIRED_UNRELAYED), "expired_unrelayed");
        ck_assert_int_eq(hd_reason_from_name("expired_unrelayed"), HD_R_EXPIRED_UNRELAYED);
}
END_TEST

Suite *suite_reason(void);
Suite *suite_reason(void)
{
        Suite *s = suite_create("reason");
        TCase *tc = tcase_create("table");
        tcase_add_test(tc, test_reason_names_round_trip);
        suite_add_tcase(s, tc);
        return s;
}
