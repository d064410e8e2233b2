/* The daemon's keyed table (src/handoffd/dict.c): an entry found by its
 * key, a put of a key there keeping its fields and its place, the order
 * of adding kept through removals during a walk and through growth, a
 * clear leaving the table usable, and the drop hook seeing each entry
 * once on its way out. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dict.h"

struct ent {
        int v;
};

/* The keys in order, joined by ' ' into buf. */
static const char *keys(const struct dict *d, char *buf, size_t n)
{
        buf[0] = '\0';
        for (void *e = dict_first(d); e; e = dict_next(e))
                snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", buf[0] ? " " : "",
                         dict_key(e));
        return buf;
}

START_TEST(test_dict_put_keeps_fields_and_place)
{
        struct dict d;
        struct ent *e;
        bool added;
        char buf[64];

        dict_init(&d, sizeof(struct ent));
        ck_assert_ptr_null(dict_get(&d, "a"));
        e = dict_put(&d, "a", &added);
        ck_assert(added);
        ck_assert_int_eq(e->v, 0);      /* a new entry is zeroed */
        e->v = 1;
        ((struct ent *)dict_put(&d, "b", NULL))->v = 2;
        e = dict_put(&d, "a", &added);
        ck_assert(!added);
        ck_assert_int_eq(e->v, 1);
        ck_assert_uint_eq(dict_count(&d), 2);
        ck_assert_str_eq(keys(&d, buf, sizeof(buf)), "a b");
        ck_assert_int_eq(((struct ent *)dict_get(&d, "b"))->v, 2);
        /* deleted and put again: last */
        dict_del(&d, "a");
        ck_assert_ptr_null(dict_get(&d, "a"));
        dict_put(&d, "a", NULL);
        ck_assert_str_eq(keys(&d, buf, sizeof(buf)), "b a");
        dict_clear(&d);
        ck_assert_uint_eq(dict_count(&d), 0);
        ck_assert_ptr_null(dict_first(&d));
        ck_assert_ptr_nonnull(dict_put(&d, "c", NULL));
        ck_assert_str_eq(keys(&d, buf, sizeof(buf)), "c");
        dict_clear(&d);
}
END_TEST

START_TEST(test_dict_order_survives_growth_and_removal_in_a_walk)
{
        struct dict d;
        struct ent *e, *nx;
        char k[16];
        int want = 0;

        dict_init(&d, sizeof(struct ent));
        for (int i = 0; i < 5000; i++) {
                snprintf(k, sizeof(k), "n%d", i);
                ((struct ent *)dict_put(&d, k, NULL))->v = i;
        }
        ck_assert_uint_eq(dict_count(&d), 5000);
        /* the odd ones go during the walk */
        DICT_FOREACH_SAFE(e, nx, &d)
                if (e->v % 2)
                        dict_remove(&d, e);
        ck_assert_uint_eq(dict_count(&d), 2500);
        for (e = dict_first(&d); e; e = dict_next(e), want += 2) {
                snprintf(k, sizeof(k), "n%d", want);
                ck_assert_int_eq(e->v, want);
                ck_assert_str_eq(dict_key(e), k);
                ck_assert_ptr_eq(dict_get(&d, k), e);
        }
        ck_assert_int_eq(want, 5000);
        ck_assert_ptr_null(dict_get(&d, "n1"));
        dict_clear(&d);
}
END_TEST

START_TEST(test_dict_a_set_has_no_entry_bytes)
{
        struct dict d;

        dict_init(&d, 0);
        ck_assert_ptr_nonnull(dict_put(&d, "x", NULL));
        ck_assert_ptr_nonnull(dict_get(&d, "x"));
        ck_assert_str_eq(dict_key(dict_get(&d, "x")), "x");
        ck_assert_ptr_null(dict_get(&d, "y"));
        dict_clear(&d);
}
END_TEST

/* An entry owning a heap copy; drop() counts the ones it freed. */
struct owning {
        char *s;
};
static int dropped;

static void owning_drop(void *e)
{
        struct owning *o = e;

        free(o->s);
        o->s = NULL;
        dropped++;
}

START_TEST(test_dict_drop_frees_what_an_entry_owns_on_every_way_out)
{
        struct dict d;
        struct owning *e, *nx;
        char k[16];

        dropped = 0;
        dict_init_drop(&d, sizeof(struct owning), owning_drop);
        for (int i = 0; i < 40; i++) {
                snprintf(k, sizeof(k), "k%d", i);
                e = dict_put(&d, k, NULL);
                ck_assert_ptr_nonnull(e->s = strdup(k));
        }
        /* a put of a key there drops nothing: the caller owns the fields */
        e = dict_put(&d, "k0", NULL);
        ck_assert_str_eq(e->s, "k0");
        ck_assert_int_eq(dropped, 0);
        dict_del(&d, "k0");
        ck_assert_int_eq(dropped, 1);
        dict_del(&d, "none");
        ck_assert_int_eq(dropped, 1);
        /* removed during a walk: dropped before the next is taken */
        DICT_FOREACH_SAFE(e, nx, &d)
                if (e->s[1] == '1')
                        dict_remove(&d, e);
        ck_assert_int_eq(dropped, 1 + 11);      /* k1, k10..k19 */
        ck_assert_uint_eq(dict_count(&d), 28);
        ck_assert_str_eq(((struct owning *)dict_get(&d, "k2"))->s, "k2");
        dict_clear(&d);
        ck_assert_int_eq(dropped, 40);
        /* the hook stays after a clear */
        ck_assert_ptr_nonnull(((struct owning *)dict_put(&d, "again", NULL))->s = strdup("x"));
        dict_clear(&d);
        ck_assert_int_eq(dropped, 41);
}
END_TEST

Suite *suite_dict(void);
Suite *suite_dict(void)
{
        Suite *s = suite_create("dict");
        TCase *tc = tcase_create("table");
        tcase_add_test(tc, test_dict_put_keeps_fields_and_place);
        tcase_add_test(tc, test_dict_order_survives_growth_and_removal_in_a_walk);
        tcase_add_test(tc, test_dict_a_set_has_no_entry_bytes);
        tcase_add_test(tc, test_dict_drop_frees_what_an_entry_owns_on_every_way_out);
        suite_add_tcase(s, tc);
        return s;
}
