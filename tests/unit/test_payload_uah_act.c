/* Payload formats with a parser of their own: U.AgentHandoff/0.1.0
 * (JSON and YAML seeds, one negative case per rule, the YAML hardening:
 * duplicate keys, aliases, tags, streams, scalars) and act/1.0 (XML and
 * markdown seeds, one negative case per rule, the XML hardening: entities,
 * doctype, depth and size). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff.h"
#include "testutil.h"

/* ---- U.AgentHandoff/0.1.0 --------------------------------------------- */

START_TEST(test_uah_seed_json_validates)
{
        json_t *p = NULL;
        hd_verdict v;

        ck_assert_msg(tu_pl_load("U.AgentHandoff/0.1.0", "seeds/uah-schema.json",
                                 &p, &v) == 0, "%s", v.detail);
        tu_pl_expect_ok("U.AgentHandoff/0.1.0", p);
        ck_assert_ptr_null(hd_payload_target("U.AgentHandoff/0.1.0", p));
        json_decref(p);
}
END_TEST

START_TEST(test_uah_seed_yaml_validates)
{
        json_t *p = NULL;
        hd_verdict v;

        ck_assert_msg(tu_pl_load("U.AgentHandoff/0.1.0", "seeds/uah-example.yaml",
                                 &p, &v) == 0, "%s", v.detail);
        /* Plain YAML scalars that look like versions and times stay text. */
        ck_assert_str_eq(json_string_value(json_object_get(p, "issued_at")),
                         "2026-01-18T10:15:00Z");
        ck_assert_str_eq(json_string_value(json_object_get(p, "version")), "0.1.0");
        ck_assert_str_eq(json_string_value(json_object_get(p, "x-release")), "draft");
        ck_assert_int_eq(json_array_size(json_object_get(p, "instructions")), 2);
        tu_pl_expect_ok("U.AgentHandoff/0.1.0", p);
        json_decref(p);
}
END_TEST

static void uah_mutate(const char *key, json_t *val, const char *want)
{
        json_t *p = tu_pl_json("seeds/uah-schema.json");

        if (val)
                json_object_set_new(p, key, val);
        else
                json_object_del(p, key);
        tu_pl_expect_reject("U.AgentHandoff/0.1.0", p, want);
        json_decref(p);
}

static const char *const uah_required[] = {
        "schema_version", "type", "version", "context", "session_id",
        "handoff_id", "from_agent_type", "to_agent_type", "issued_at",
        "instructions", "acceptance_criteria", "constraints", "artifacts",
};

START_TEST(test_uah_reject_missing_required)
{
        char want[80];

        snprintf(want, sizeof(want), "missing field '%s'", uah_required[_i]);
        uah_mutate(uah_required[_i], NULL, want);
}
END_TEST

START_TEST(test_uah_reject_each_rule)
{
        uah_mutate("schema_version", json_string("0.2.0"),
                   "field 'schema_version' must be \"0.1.0\"");
        uah_mutate("type", json_string("AgentHandoff"),
                   "field 'type' must be \"U.AgentHandoff\"");
        uah_mutate("version", json_string("1"), "field 'version' must be \"0.1.0\"");
        uah_mutate("context", json_string(""), "field 'context' must be 1 to");
        uah_mutate("from_agent_type", json_string("intern"),
                   "field 'from_agent_type' 'intern' is not in the role set");
        uah_mutate("to_agent_type", json_string("root"),
                   "field 'to_agent_type' 'root' is not in the role set");
        uah_mutate("issued_at", json_string("2026-01-18 10:15"),
                   "field 'issued_at'");
        uah_mutate("instructions", json_string("do it"),
                   "field 'instructions' is not an array");
        uah_mutate("prohibited_actions", json_string("none"),
                   "field 'prohibited_actions' is not an array");
        uah_mutate("notes", json_pack("[s]", "n"), "field 'notes' is not a string");
        uah_mutate("priority", json_string("high"), "unknown field 'priority'");
}
END_TEST

START_TEST(test_uah_optional_and_extensions_accepted)
{
        json_t *p = tu_pl_json("seeds/uah-schema.json");

        json_object_del(p, "prohibited_actions");
        json_object_del(p, "notes");
        json_object_set_new(p, "instructions", json_array());
        json_object_set_new(p, "x-anything", json_pack("{s:i}", "n", 1));
        tu_pl_expect_ok("U.AgentHandoff/0.1.0", p);
        json_decref(p);
}
END_TEST

START_TEST(test_uah_role_set_configurable)
{
        static const char *const roles[] = { "planner", "coder", NULL };
        hd_payload_opts o = { .roles = roles };
        json_t *p = tu_pl_json("seeds/uah-schema.json");
        json_t *d;
        hd_verdict v;

        /* The default roles are not in a configured set... */
        d = tu_pl_envelope("U.AgentHandoff/0.1.0", p);
        tu_pl_expect_reject_doc(d, &o, "field 'from_agent_type' 'strategist'");
        json_decref(d);
        /* ...and the configured ones are. */
        json_object_set_new(p, "from_agent_type", json_string("planner"));
        json_object_set_new(p, "to_agent_type", json_string("coder"));
        d = tu_pl_envelope("U.AgentHandoff/0.1.0", p);
        ck_assert_int_eq(hd_payload_validate(d, &o, &v), 0);
        json_decref(d);
        json_decref(p);
}
END_TEST

static int yaml_load_text(const char *text, hd_verdict *v)
{
        char *dir = tu_tmpdir(), *path;
        int r;

        ck_assert_int_ge(asprintf(&path, "%s/p.yaml", dir), 0);
        tu_write_file(path, text, strlen(text));
        json_t *j = NULL;
        r = hd_payload_load("U.AgentHandoff/0.1.0", path, &j, v);
        json_decref(j);
        free(path);
        free(dir);
        return r;
}

START_TEST(test_uah_yaml_reject_duplicate_key)
{
        char *y = tu_pl_read("seeds/uah-example.yaml");
        char *dup;
        hd_verdict v;

        ck_assert_int_ge(asprintf(&dup, "%snotes: again\n", y), 0);
        ck_assert_int_eq(yaml_load_text(dup, &v), -EBADMSG);
        ck_assert_str_eq(hd_reason_name(v.reason), "duplicate_key");
        ck_assert_ptr_nonnull(strstr(v.detail, "'notes'"));
        free(dup);
        free(y);
}
END_TEST

START_TEST(test_uah_yaml_reject_aliases_tags_and_streams)
{
        hd_verdict v;

        ck_assert_int_eq(yaml_load_text("a: &x [1]\nb: *x\n", &v), -EBADMSG);
        ck_assert_ptr_nonnull(strstr(v.detail, "YAML"));
        ck_assert_int_eq(yaml_load_text("a: !!python/object x\n", &v), -EBADMSG);
        ck_assert_ptr_nonnull(strstr(v.detail, "tag"));
        ck_assert_int_eq(yaml_load_text("a: 1\n---\nb: 2\n", &v), -EBADMSG);
        ck_assert_ptr_nonnull(strstr(v.detail, "more than one document"));
        ck_assert_int_eq(yaml_load_text("- a\n- b\n", &v), -EBADMSG);
        ck_assert_ptr_nonnull(strstr(v.detail, "not a mapping"));
        ck_assert_int_eq(yaml_load_text("a: [1, 2\n", &v), -EBADMSG);
        ck_assert_str_eq(hd_reason_name(v.reason), "parse_error");
}
END_TEST

START_TEST(test_uah_yaml_scalars_mapped)
{
        char *y = tu_pl_read("seeds/uah-example.yaml");
        char *doc;
        hd_verdict v;

        /* A plain number where a string is required is a number. */
        ck_assert_int_ge(asprintf(&doc, "%s", y), 0);
        char *at = strstr(doc, "schema_version: \"0.1.0\"");
        ck_assert_ptr_nonnull(at);
        memcpy(at, "schema_version: 0.10   ", 23);
        ck_assert_int_eq(yaml_load_text(doc, &v), -EBADMSG);
        ck_assert_str_eq(v.detail,
                         "U.AgentHandoff/0.1.0: field 'schema_version' is not a string");
        free(doc);
        free(y);
}
END_TEST

/* ---- act/1.0 ---------------------------------------------------------- */

START_TEST(test_act_seed_context_exhaustion_validates)
{
        json_t *p = NULL;
        hd_verdict v;

        ck_assert_msg(tu_pl_load("act/1.0", "seeds/act-context-exhaustion.xml", &p,
                                 &v) == 0, "%s", v.detail);
        ck_assert(json_is_string(p));
        tu_pl_expect_ok("act/1.0", p);
        ck_assert_ptr_null(hd_payload_target("act/1.0", p));
        json_decref(p);
}
END_TEST

START_TEST(test_act_seed_delegation_misses_required)
{
        hd_verdict v;

        /* The seed's own delegation example leaves out work_completed,
         * work_remaining and current_state. */
        ck_assert_int_eq(tu_pl_load("act/1.0", "seeds/act-agent-delegation.xml",
                                    NULL, &v), -EBADMSG);
        ck_assert_str_eq(v.detail, "act/1.0: missing element work_completed");
}
END_TEST

START_TEST(test_act_seed_session_end_misses_required)
{
        hd_verdict v;

        ck_assert_int_eq(tu_pl_load("act/1.0", "seeds/act-session-end.xml", NULL,
                                    &v), -EBADMSG);
        ck_assert_str_eq(v.detail, "act/1.0: missing element work_completed");
}
END_TEST

START_TEST(test_act_seed_templates_rejected)
{
        hd_verdict v;

        /* The XML template holds only comments where text is required. */
        ck_assert_int_eq(tu_pl_load("act/1.0", "seeds/act-template.xml", NULL, &v),
                         -EBADMSG);
        ck_assert_str_eq(v.detail, "act/1.0: element original_task is empty");
        ck_assert_int_eq(tu_pl_load("act/1.0", "seeds/act-template.md", NULL, &v),
                         -EBADMSG);
        ck_assert_ptr_nonnull(strstr(v.detail, "metadata/timestamp '{{TIMESTAMP}}'"));
}
END_TEST

START_TEST(test_act_markdown_and_complete_validate)
{
        json_t *p = NULL;
        hd_verdict v;

        ck_assert_msg(tu_pl_load("act/1.0", "act-valid.md", &p, &v) == 0, "%s",
                      v.detail);
        ck_assert_str_eq(hd_payload_target("act/1.0", p), "code-review-agent");
        json_decref(p);
        ck_assert_msg(tu_pl_load("act/1.0", "act-complete.xml", &p, &v) == 0, "%s",
                      v.detail);
        ck_assert_str_eq(hd_payload_target("act/1.0", p), "release-agent");
        json_decref(p);
}
END_TEST

/* The valid seed with one substitution; expect a detail naming want. */
static void act_mutate(const char *from, const char *to, const char *want)
{
        char *s = tu_pl_read("seeds/act-context-exhaustion.xml");
        char *at = strstr(s, from), *n;
        json_t *p;

        ck_assert_msg(at != NULL, "'%s' not in the seed", from);
        ck_assert_int_ge(asprintf(&n, "%.*s%s%s", (int)(at - s), s, to,
                                  at + strlen(from)), 0);
        p = json_string(n);
        tu_pl_expect_reject("act/1.0", p, want);
        json_decref(p);
        free(n);
        free(s);
}

static const char *const act_required[][2] = {
        { "<project>ACT v2.5</project>", "metadata/project" },
        { "<timestamp>2026-02-02T10:30:00Z</timestamp>", "metadata/timestamp" },
        { "<from_session>main-session-abc</from_session>", "metadata/from_session" },
        { "<original_task>", "original_task" },
        { "<work_completed>", "work_completed" },
        { "<work_remaining>", "work_remaining" },
        { "<current_state>", "current_state" },
};

START_TEST(test_act_reject_missing_required)
{
        const char *tag = act_required[_i][0];
        char want[80], *s = tu_pl_read("seeds/act-context-exhaustion.xml"), *n;
        json_t *p;

        /* Cut the element out whole, from its start tag to its end tag. */
        char *b = strstr(s, tag), *e;
        ck_assert_ptr_nonnull(b);
        if (strchr(tag + 1, '<')) {
                e = b + strlen(tag);
        } else {
                char end[64];
                snprintf(end, sizeof(end), "</%s", tag + 1);
                e = strstr(b, end);
                ck_assert_ptr_nonnull(e);
                e += strlen(end);
        }
        ck_assert_int_ge(asprintf(&n, "%.*s%s", (int)(b - s), s, e), 0);
        p = json_string(n);
        snprintf(want, sizeof(want), "act/1.0: missing element %s",
                 act_required[_i][1]);
        tu_pl_expect_reject("act/1.0", p, want);
        json_decref(p);
        free(n);
        free(s);
}
END_TEST

START_TEST(test_act_reject_each_rule)
{
        act_mutate("2026-02-02T10:30:00Z", "yesterday",
                   "element metadata/timestamp 'yesterday'");
        act_mutate("2026-02-02T10:30:00Z", "2026-02-02T10:30:00",
                   "element metadata/timestamp");
        act_mutate("<project>ACT v2.5</project>", "<project>  </project>",
                   "element metadata/project is empty");
        act_mutate("Implement Phase 4 of ACT v2.5 framework", "",
                   "element original_task is empty");
        act_mutate("    - Create commands/act/handoff.md\n"
                   "    - Update skills/session-recovery/SKILL.md\n"
                   "    - Create tag v2.5.0-beta.4\n", "",
                   "element work_remaining has no item");
        act_mutate("Phase: 4/6", "Phase: 7/6", "current_state Phase '7/6'");
        act_mutate("Phase: 4/6", "Phase: X/Y", "current_state Phase 'X/Y'");
        act_mutate("Progress: 60%", "Progress: 120%",
                   "current_state Progress '120%'");
        act_mutate("Progress: 60%", "Progress: X%", "current_state Progress 'X%'");
        act_mutate("</metadata>", "<format_version>2.0</format_version></metadata>",
                   "element metadata/format_version '2.0'");
        act_mutate("<original_task>", "<notes>x</notes><original_task>",
                   "unknown element 'notes'");
        act_mutate("</metadata>", "<project>B</project></metadata>",
                   "duplicate element metadata/project");
        act_mutate("<context_handoff>", "<handoff>",
                   "root element is 'handoff', not context_handoff");
        act_mutate("Implement Phase 4", "Implement <b>Phase</b> 4",
                   "element 'b' inside an element that holds text");
}
END_TEST

START_TEST(test_act_reject_entities_and_doctype)
{
        static const char xxe[] =
                "<?xml version=\"1.0\"?>\n"
                "<!DOCTYPE context_handoff [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n"
                "<context_handoff><metadata><project>&x;</project></metadata>"
                "</context_handoff>\n";
        static const char laughs[] =
                "<!DOCTYPE d [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]>"
                "<context_handoff/>";
        static const char undeclared[] =
                "<context_handoff><metadata><project>&x;</project></metadata>"
                "</context_handoff>";
        json_t *p;

        p = json_string(xxe);
        tu_pl_expect_reject("act/1.0", p, "DOCTYPE is not accepted");
        json_decref(p);
        p = json_string(laughs);
        tu_pl_expect_reject("act/1.0", p, "DOCTYPE is not accepted");
        json_decref(p);
        p = json_string(undeclared);
        tu_pl_expect_reject("act/1.0", p, "act/1.0: XML");
        json_decref(p);
}
END_TEST

START_TEST(test_act_reject_deep_and_large)
{
        char *deep = NULL, *big;
        size_t n = 0;
        FILE *f = open_memstream(&deep, &n);
        json_t *p;

        fputs("<context_handoff>", f);
        for (int i = 0; i < 20; i++)
                fputs("<metadata>", f);
        fclose(f);
        p = json_string(deep);
        tu_pl_expect_reject("act/1.0", p, "act/1.0:");
        json_decref(p);
        free(deep);

        big = malloc(300 * 1024 + 1);
        memset(big, ' ', 300 * 1024);
        memcpy(big, "<context_handoff>", 17);
        big[300 * 1024] = '\0';
        p = json_string(big);
        tu_pl_expect_reject("act/1.0", p, "larger than");
        json_decref(p);
        free(big);

        p = json_integer(1);
        tu_pl_expect_reject("act/1.0", p, "payload is not a string");
        json_decref(p);
}
END_TEST

START_TEST(test_act_markdown_rules)
{
        char *s = tu_pl_read("act-valid.md"), *n;
        json_t *p;

        /* Missing section in the Markdown layout names the element too. */
        char *at = strstr(s, "## Work Completed");
        ck_assert_ptr_nonnull(at);
        memcpy(at, "## Work Done     ", 17);
        p = json_string(s);
        tu_pl_expect_reject("act/1.0", p, "unknown section 'Work Done'");
        json_decref(p);
        free(s);

        s = tu_pl_read("act-valid.md");
        at = strstr(s, "## Current State");
        ck_assert_ptr_nonnull(at);
        ck_assert_int_ge(asprintf(&n, "%.*s", (int)(at - s), s), 0);
        p = json_string(n);
        tu_pl_expect_reject("act/1.0", p, "missing element current_state");
        json_decref(p);
        free(n);

        at = strstr(s, "**Phase:** 4/6");
        memcpy(at, "**Phase:** 9/6", 14);
        p = json_string(s);
        tu_pl_expect_reject("act/1.0", p, "current_state Phase '9/6'");
        json_decref(p);
        free(s);
}
END_TEST

Suite *suite_payload_uah_act(void);
Suite *suite_payload_uah_act(void)
{
        Suite *s = suite_create("payload_uah_act");
        TCase *tc;

        tc = tcase_create("uah");
        tcase_add_test(tc, test_uah_seed_json_validates);
        tcase_add_test(tc, test_uah_seed_yaml_validates);
        tcase_add_loop_test(tc, test_uah_reject_missing_required, 0,
                            (int)(sizeof(uah_required) / sizeof(uah_required[0])));
        tcase_add_test(tc, test_uah_reject_each_rule);
        tcase_add_test(tc, test_uah_optional_and_extensions_accepted);
        tcase_add_test(tc, test_uah_role_set_configurable);
        tcase_add_test(tc, test_uah_yaml_reject_duplicate_key);
        tcase_add_test(tc, test_uah_yaml_reject_aliases_tags_and_streams);
        tcase_add_test(tc, test_uah_yaml_scalars_mapped);
        suite_add_tcase(s, tc);

        tc = tcase_create("act");
        tcase_add_test(tc, test_act_seed_context_exhaustion_validates);
        tcase_add_test(tc, test_act_seed_delegation_misses_required);
        tcase_add_test(tc, test_act_seed_session_end_misses_required);
        tcase_add_test(tc, test_act_seed_templates_rejected);
        tcase_add_test(tc, test_act_markdown_and_complete_validate);
        tcase_add_loop_test(tc, test_act_reject_missing_required, 0,
                            (int)(sizeof(act_required) / sizeof(act_required[0])));
        tcase_add_test(tc, test_act_reject_each_rule);
        tcase_add_test(tc, test_act_reject_entities_and_doctype);
        tcase_add_test(tc, test_act_reject_deep_and_large);
        tcase_add_test(tc, test_act_markdown_rules);
        suite_add_tcase(s, tc);
        return s;
}
