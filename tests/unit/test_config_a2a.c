/* handoffd.conf [agent NAME] description and skill (the A2A agent card of
 * handoff-hubd): values kept in order, a bad skill line reported; and
 * completes (its tasks wait for the agent's result). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "testutil.h"

static int load(const char *text, struct config **ret, char **err)
{
        char *dir = tu_tmpdir(), *path;
        int r;

        ck_assert_int_ge(asprintf(&path, "%s/a.conf", dir), 0);
        tu_write_file(path, text, strlen(text));
        r = config_load(path, false, ret, err);
        free(dir);
        free(path);
        return r;
}

#define BASE "[spool]\ndir = /tmp/x\n\n[keys]\ndefault = /tmp/x.key\n\n" \
        "[agent alice]\nstate_dir = /tmp/alice\n"

START_TEST(test_config_a2a_description_and_skills)
{
        struct config *c = NULL;
        char *err = NULL;
        int r = load(BASE "description = Takes over a call\n"
                     "skill = summarize :  Summarizes a call: briefly\nskill = t_2: Translates\n",
                     &c, &err);

        ck_assert_msg(r == 0, "config_load: %d: %s", r, err ? err : "");
        const struct config_agent *a = config_agent(c, "alice");
        ck_assert_str_eq(a->description, "Takes over a call");
        ck_assert_uint_eq(a->n_skills, 2);
        ck_assert_str_eq(a->skill_ids[0], "summarize");
        ck_assert_str_eq(a->skill_descs[0], "Summarizes a call: briefly");
        ck_assert_str_eq(a->skill_ids[1], "t_2");
        ck_assert_str_eq(a->skill_descs[1], "Translates");
        config_free(c);
}
END_TEST

START_TEST(test_config_a2a_bad_skill_reported)
{
        static const char *const bad[] = { "skill = no description\n", "skill = : text\n",
                                           "skill = a b: text\n", "skill = x:\n" };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct config *c = NULL;
                char *err = NULL, *text;
                ck_assert_int_ge(asprintf(&text, BASE "%s", bad[i]), 0);
                ck_assert_int_lt(load(text, &c, &err), 0);
                ck_assert_msg(err && strstr(err, "[agent alice] skill:"), "%s: %s", bad[i],
                              err ? err : "(none)");
                free(err);
                free(text);
        }
}
END_TEST

/* [agent NAME] completes: no unless said, yes or no, anything else
 * reported on its key. */
START_TEST(test_config_a2a_completes)
{
        struct config *c = NULL;
        char *err = NULL;
        int r = load(BASE "completes = yes\n[agent bob]\nstate_dir = /tmp/bob\n", &c, &err);

        ck_assert_msg(r == 0, "config_load: %d: %s", r, err ? err : "");
        ck_assert(config_agent(c, "alice")->completes);
        ck_assert(!config_agent(c, "bob")->completes);
        config_free(c);
        c = NULL;
        ck_assert_int_lt(load(BASE "completes = sometimes\n", &c, &err), 0);
        ck_assert_msg(err && strstr(err, "[agent alice] completes: 'sometimes' is not yes or no"),
                      "%s", err ? err : "(none)");
        free(err);
}
END_TEST

Suite *suite_config_a2a(void);
Suite *suite_config_a2a(void)
{
        Suite *s = suite_create("config_a2a");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_config_a2a_description_and_skills);
        tcase_add_test(tc, test_config_a2a_bad_skill_reported);
        tcase_add_test(tc, test_config_a2a_completes);
        suite_add_tcase(s, tc);
        return s;
}
