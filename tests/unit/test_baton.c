/* The Baton store: a four-stage workflow from four agents ends with the
 * expected baton and a four-entry history; decision_log only grows; check
 * never writes; handoffctl baton show prints the session. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "testutil.h"

/* 2026-02-02T10:00:00Z */
#define T0 INT64_C(1770026400000000)

static json_t *bt_json(const char *rel)
{
        char *p;
        json_error_t e;
        json_t *j;

        ck_assert_int_ge(asprintf(&p, "%s/tests/payloads/%s", tu_src_dir(), rel), 0);
        j = json_load_file(p, JSON_REJECT_DUPLICATES, &e);
        ck_assert_msg(j != NULL, "%s: %s", p, e.text);
        free(p);
        return j;
}

static const char *const stages[] = {
        "baton/stage1.json", "baton/stage2.json", "baton/stage3.json",
        "baton/stage4.json",
};

/* A spool with baton/; returns the baton dir fd, the spool path in *spool. */
static int bt_spool(char **spool)
{
        char *dir = tu_tmpdir(), *b;
        int fd;

        ck_assert_int_ge(asprintf(&b, "%s/baton", dir), 0);
        ck_assert_int_eq(mkdir(b, 0750), 0);
        fd = open(b, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        free(b);
        if (spool)
                *spool = dir;
        else
                free(dir);
        return fd;
}

static void bt_apply(int fd, const char *rel, int64_t at)
{
        json_t *p = bt_json(rel);
        hd_verdict v;
        int r = hd_baton_apply(fd, p, at, false, &v);

        ck_assert_msg(r == 0, "%s: %d %s", rel, r, v.detail);
        json_decref(p);
}

static void bt_run_workflow(int fd)
{
        for (int i = 0; i < 4; i++)
                bt_apply(fd, stages[i], T0 + (int64_t)i * 60 * 1000000);
}

START_TEST(test_baton_four_stage_workflow)
{
        int fd = bt_spool(NULL);
        json_t *doc = NULL, *want = bt_json("baton/expected-baton.json"), *hist, *e;
        size_t i;

        bt_run_workflow(fd);
        ck_assert_int_eq(hd_baton_load(fd, "deenup-init", &doc), 0);
        ck_assert_msg(json_equal(json_object_get(doc, "baton"), want),
                      "baton: %s", json_dumps(json_object_get(doc, "baton"), 0));
        hist = json_object_get(doc, "history");
        ck_assert_int_eq(json_array_size(hist), 4);
        json_array_foreach(hist, i, e) {
                json_t *src = bt_json(stages[i]);
                json_t *patch = json_object_get(src, "baton_patch");
                char at[HD_TIME_MAX];

                if (!patch)
                        patch = json_object_get(src, "baton");
                ck_assert_str_eq(json_string_value(json_object_get(e, "stage_id")),
                                 json_string_value(json_object_get(src, "stage_id")));
                ck_assert(json_equal(json_object_get(e, "patch"), patch));
                ck_assert_int_eq(hd_time_format(T0 + (int64_t)i * 60 * 1000000, at,
                                                sizeof(at)), 0);
                ck_assert_str_eq(json_string_value(json_object_get(e, "at")), at);
                ck_assert(json_is_object(json_object_get(e, "baton")));
                json_decref(src);
        }
        /* Snapshots: lists replaced, resets gone, the last is the baton. */
        ck_assert_int_eq(json_array_size(json_object_get(json_object_get(
                json_array_get(hist, 1), "baton"), "current_state")), 3);
        ck_assert_ptr_null(json_object_get(json_object_get(json_array_get(hist, 1),
                                                           "baton"), "open_questions"));
        ck_assert(json_equal(json_object_get(json_array_get(hist, 3), "baton"), want));
        json_decref(doc);
        json_decref(want);
        close(fd);
}
END_TEST

START_TEST(test_baton_reject_dropped_decision)
{
        int fd = bt_spool(NULL);
        json_t *p = bt_json("baton/drop-decision.json"), *doc = NULL;
        hd_verdict v;

        bt_run_workflow(fd);
        ck_assert_int_eq(hd_baton_check(fd, p, &v), -EBADMSG);
        ck_assert_str_eq(hd_reason_name(v.reason), "decision_log_rewrite");
        ck_assert_int_eq(hd_baton_apply(fd, p, T0 + 3600 * INT64_C(1000000), false,
                                        &v), -EBADMSG);
        ck_assert_str_eq(hd_reason_name(v.reason), "decision_log_rewrite");
        ck_assert_ptr_nonnull(strstr(v.detail, "decision_log"));
        /* Nothing changed. */
        ck_assert_int_eq(hd_baton_load(fd, "deenup-init", &doc), 0);
        ck_assert_int_eq(json_array_size(json_object_get(doc, "history")), 4);
        ck_assert_int_eq(json_array_size(json_object_get(json_object_get(doc, "baton"),
                                                         "decision_log")), 5);
        json_decref(doc);

        /* Resetting the log, or changing one decision, is a rewrite too. */
        json_object_set_new(json_object_get(p, "baton_patch"), "decision_log",
                            json_null());
        ck_assert_int_eq(hd_baton_check(fd, p, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_DECISION_LOG_REWRITE);
        json_object_set_new(json_object_get(p, "baton_patch"), "decision_log",
                            json_pack("[s,s,s,s,s]", "Confirmed project is empty",
                                      "Chose Flutter", "Selected Supabase for zero-cost backend",
                                      "Indexed documentation for semantic search",
                                      "All verification checks passed"));
        ck_assert_int_eq(hd_baton_check(fd, p, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_DECISION_LOG_REWRITE);
        /* A full baton may not drop decisions either. */
        json_t *full = bt_json("baton/stage1.json");
        ck_assert_int_eq(hd_baton_check(fd, full, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_DECISION_LOG_REWRITE);
        json_decref(full);
        json_decref(p);
        close(fd);
}
END_TEST

START_TEST(test_baton_check_does_not_write)
{
        int fd = bt_spool(NULL);
        json_t *p = bt_json("baton/stage1.json"), *doc = NULL;
        hd_verdict v;

        ck_assert_int_eq(hd_baton_check(fd, p, &v), 0);
        ck_assert_int_eq(hd_baton_load(fd, "deenup-init", &doc), -ENOENT);
        json_decref(p);
        close(fd);
}
END_TEST

START_TEST(test_baton_first_patch_needs_goal)
{
        int fd = bt_spool(NULL);
        json_t *p = bt_json("baton/stage2.json");
        hd_verdict v;

        ck_assert_int_eq(hd_baton_apply(fd, p, T0, false, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_PAYLOAD_INVALID);
        ck_assert_ptr_nonnull(strstr(v.detail, "missing field 'goal'"));
        json_decref(p);
        close(fd);
}
END_TEST

START_TEST(test_baton_reject_invalid_payload_and_session)
{
        int fd = bt_spool(NULL);
        json_t *p = bt_json("baton/stage1.json"), *doc = NULL;
        hd_verdict v;

        json_object_set_new(p, "session_id", json_string("../escape"));
        ck_assert_int_eq(hd_baton_apply(fd, p, T0, false, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_PAYLOAD_INVALID);
        ck_assert_ptr_nonnull(strstr(v.detail, "session_id"));
        ck_assert_int_eq(hd_baton_load(fd, "../escape", &doc), -EINVAL);
        json_decref(p);
        close(fd);
}
END_TEST

START_TEST(test_baton_render_final)
{
        int fd = bt_spool(NULL);
        json_t *doc = NULL;
        char *md = NULL, *p, *want;

        bt_run_workflow(fd);
        ck_assert_int_eq(hd_baton_load(fd, "deenup-init", &doc), 0);
        ck_assert_int_eq(hd_payload_render("baton/1", json_object_get(doc, "baton"),
                                           &md), 0);
        ck_assert_int_ge(asprintf(&p, "%s/tests/payloads/expected/baton-final.md",
                                  tu_src_dir()), 0);
        want = tu_read_file(p, NULL);
        ck_assert_ptr_nonnull(want);
        ck_assert_msg(!strcmp(md, want), "rendering differs:\n%s", md);
        free(want);
        free(p);
        free(md);
        json_decref(doc);
        close(fd);
}
END_TEST

/* A handoff carrying a Baton payload from one agent to another. */
static json_t *bt_handoff(const char *from, const char *to, json_t *payload)
{
        json_t *h = json_pack("{s:s,s:s,s:s,s:o}", "from_agent", from, "to_agent", to,
                              "payload_type", "baton/1", "payload", payload);
        ck_assert_ptr_nonnull(h);
        return h;
}

/* Issues 18.5, 19.10: a session belongs to the agents it passed through;
 * anyone else's stage is refused with a reason that says so. */
START_TEST(test_baton_session_bound_to_its_agents)
{
        int fd = bt_spool(NULL);
        json_t *h;
        hd_verdict v;

        h = bt_handoff("alice", "bob", bt_json("baton/stage1.json"));
        ck_assert_int_eq(hd_baton_apply_handoff(fd, h, T0, false, &v), 0);
        json_decref(h);
        /* mallory took no part: refused, with the real reason */
        h = bt_handoff("mallory", "alice", bt_json("baton/stage2.json"));
        ck_assert_int_eq(hd_baton_check_handoff(fd, h, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_PAYLOAD_INVALID);
        ck_assert_ptr_nonnull(strstr(v.detail, "is not mallory's"));
        ck_assert_int_eq(hd_baton_apply_handoff(fd, h, T0 + 1, false, &v), -EBADMSG);
        ck_assert_ptr_nonnull(strstr(v.detail, "is not mallory's"));
        json_decref(h);
        /* bob got it, passes it on to carol, who may then send the next */
        h = bt_handoff("bob", "carol", bt_json("baton/stage2.json"));
        ck_assert_int_eq(hd_baton_apply_handoff(fd, h, T0 + 2, false, &v), 0);
        json_decref(h);
        h = bt_handoff("carol", "alice", bt_json("baton/stage3.json"));
        ck_assert_int_eq(hd_baton_apply_handoff(fd, h, T0 + 3, false, &v), 0);
        json_decref(h);
        json_t *doc = NULL;
        ck_assert_int_eq(hd_baton_load(fd, "deenup-init", &doc), 0);
        ck_assert_int_eq(json_array_size(json_object_get(doc, "agents")), 3);
        json_decref(doc);
        close(fd);
}
END_TEST

/* Issue 19.10: repeated valid patches once took a session to 8.6 MB, and
 * every later stage was refused as "ok" with no detail.  Now the history
 * gives way (the file stays within 1 MiB and the values cap) and stages
 * keep applying; a session file that cannot be read is refused with the
 * real cause. */
START_TEST(test_baton_session_size_capped)
{
        int fd = bt_spool(NULL);
        char big[4000];
        json_t *h, *doc = NULL;
        hd_verdict v;
        struct stat st;

        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        h = bt_handoff("alice", "bob", bt_json("baton/stage1.json"));
        ck_assert_int_eq(hd_baton_apply_handoff(fd, h, T0, false, &v), 0);
        json_decref(h);
        for (int i = 0; i < 400; i++) {
                json_t *p = json_pack("{s:s,s:s,s:{s:[s,s]}}", "session_id", "deenup-init",
                                      "stage_id", "grow", "baton_patch", "current_state",
                                      big, i % 2 ? "odd" : "even");
                h = bt_handoff(i % 2 ? "alice" : "bob", i % 2 ? "bob" : "alice", p);
                ck_assert_msg(hd_baton_apply_handoff(fd, h, T0 + i, false, &v) == 0,
                              "stage %d: %s: %s", i, hd_reason_name(v.reason), v.detail);
                json_decref(h);
        }
        /* begun by alice: her session, alice.deenup-init (issue 24.7) */
        ck_assert_int_eq(fstatat(fd, "alice.deenup-init.json", &st, 0), 0);
        ck_assert_int_le(st.st_size, 1024 * 1024);
        ck_assert_int_eq(hd_baton_load(fd, "deenup-init", &doc), 0);
        ck_assert_int_gt(json_integer_value(json_object_get(doc, "history_dropped")), 0);
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(doc, "history"),
                json_array_size(json_object_get(doc, "history")) - 1), "stage_id")), "grow");
        json_decref(doc);

        /* one that cannot be read (a file of an older version, 8.6 MB): the
         * stage is refused and the detail names the cause */
        int w = openat(fd, "alice.deenup-init.json", O_WRONLY | O_TRUNC | O_CLOEXEC);
        ck_assert_int_ge(w, 0);
        ck_assert_int_eq(ftruncate(w, 9 * 1024 * 1024), 0);
        close(w);
        h = bt_handoff("alice", "bob", bt_json("baton/stage2.json"));
        ck_assert_int_eq(hd_baton_check_handoff(fd, h, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_PAYLOAD_INVALID);
        ck_assert_msg(strstr(v.detail, "cannot be read: too_large"), "detail: %s", v.detail);
        json_decref(h);
        close(fd);
}
END_TEST

/* A stage whose baton alone exceeds the session cap is refused, saying
 * so; the session stays as it was. */
START_TEST(test_baton_stage_too_big_refused)
{
        int fd = bt_spool(NULL);
        size_t n = 60000;
        char *big = malloc(n + 1);
        json_t *h, *p, *list = json_array();
        hd_verdict v;

        ck_assert_ptr_nonnull(big);
        memset(big, 'y', n);
        big[n] = '\0';
        for (int i = 0; i < 20; i++)    /* 1.2 MB of constraints */
                json_array_append_new(list, json_string(big));
        h = bt_handoff("alice", "bob", bt_json("baton/stage1.json"));
        ck_assert_int_eq(hd_baton_apply_handoff(fd, h, T0, false, &v), 0);
        json_decref(h);
        p = json_pack("{s:s,s:s,s:{s:o}}", "session_id", "deenup-init", "stage_id", "huge",
                      "baton_patch", "constraints", list);
        h = bt_handoff("bob", "alice", p);
        ck_assert_int_eq(hd_baton_check_handoff(fd, h, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_PAYLOAD_INVALID);
        ck_assert_msg(strstr(v.detail, "limits"), "detail: %s", v.detail);
        json_decref(h);
        free(big);
        close(fd);
}
END_TEST

START_TEST(test_ctl_baton_show)
{
        char *spool = NULL, ctl[4096], *out = NULL;
        int fd = bt_spool(&spool);
        json_t *j, *want = bt_json("baton/expected-baton.json");
        int r;

        bt_run_workflow(fd);
        snprintf(ctl, sizeof(ctl), "%s/handoffctl", tu_build_dir());
        char *a1[] = { ctl, "baton", "show", "--spool", spool, "deenup-init",
                       "--json", NULL };
        r = tu_run(a1, &out);
        ck_assert_msg(r == 0, "exit %d: %s", r, out);
        j = json_loads(out, 0, NULL);
        ck_assert_ptr_nonnull(j);
        ck_assert(json_equal(json_object_get(j, "baton"), want));
        ck_assert_int_eq(json_array_size(json_object_get(j, "history")), 4);
        json_decref(j);
        free(out);

        char *a2[] = { ctl, "baton", "show", "--spool", spool, "deenup-init",
                       "--history", NULL };
        r = tu_run(a2, &out);
        ck_assert_msg(r == 0, "exit %d: %s", r, out);
        ck_assert_ptr_nonnull(strstr(out, "## Baton (Handoff Context)"));
        ck_assert_ptr_nonnull(strstr(out, "4. 2026-02-02T10:03:00Z verify-ready:"));
        free(out);

        /* The same through the daemon's config file. */
        char *conf, *cbuf;
        ck_assert_int_ge(asprintf(&conf, "%s/handoffd.conf", spool), 0);
        ck_assert_int_ge(asprintf(&cbuf, "[spool]\ndir = %s\n[keys]\ndefault = %s/key\n"
                                  "[agent alice]\nstate_dir = %s\n", spool, spool, spool), 0);
        tu_write_file(conf, cbuf, strlen(cbuf));
        char *a5[] = { ctl, "baton", "show", "-c", conf, "deenup-init", "--json", NULL };
        r = tu_run(a5, &out);
        ck_assert_msg(r == 0, "exit %d: %s", r, out);
        j = json_loads(out, 0, NULL);
        ck_assert_ptr_nonnull(j);
        ck_assert(json_equal(json_object_get(j, "baton"), want));
        json_decref(j);
        free(out);
        free(cbuf);
        free(conf);

        char *a3[] = { ctl, "baton", "show", "--spool", spool, "../x", NULL };
        ck_assert_int_eq(tu_run(a3, NULL), 2);
        char *a4[] = { ctl, "baton", "show", "--spool", spool, "nosuch", NULL };
        ck_assert_int_eq(tu_run(a4, NULL), 1);
        json_decref(want);
        free(spool);
        close(fd);
}
END_TEST

Suite *suite_baton(void);
Suite *suite_baton(void)
{
        Suite *s = suite_create("baton");
        TCase *tc = tcase_create("store");

        tcase_add_test(tc, test_baton_four_stage_workflow);
        tcase_add_test(tc, test_baton_reject_dropped_decision);
        tcase_add_test(tc, test_baton_check_does_not_write);
        tcase_add_test(tc, test_baton_first_patch_needs_goal);
        tcase_add_test(tc, test_baton_reject_invalid_payload_and_session);
        tcase_add_test(tc, test_baton_render_final);
        tcase_add_test(tc, test_baton_session_bound_to_its_agents);
        tcase_add_test(tc, test_baton_session_size_capped);
        tcase_add_test(tc, test_baton_stage_too_big_refused);
        suite_add_tcase(s, tc);
        tc = tcase_create("ctl");
        tcase_add_test(tc, test_ctl_baton_show);
        suite_add_tcase(s, tc);
        return s;
}
