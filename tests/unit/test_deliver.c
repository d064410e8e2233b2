/* Delivery profiles: vox and act write the expected files inside
 * state_dir and nothing outside it (the temp tree is walked before and
 * after), refuse symlinks planted in their path, and keep act_max_files. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "testutil.h"

/* 2026-02-02T10:30:00Z */
#define T1030 INT64_C(1770028200000000)
#define MINUTE INT64_C(60000000)

struct tree {
        char *root;
        char *state;            /* root/state */
        int sfd;
};

static void tree_make(struct tree *t)
{
        char *p;

        t->root = tu_tmpdir();
        ck_assert_int_ge(asprintf(&t->state, "%s/state", t->root), 0);
        ck_assert_int_eq(mkdir(t->state, 0750), 0);
        ck_assert_int_ge(asprintf(&p, "%s/outside", t->root), 0);
        ck_assert_int_eq(mkdir(p, 0750), 0);
        free(p);
        t->sfd = open(t->state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(t->sfd, 0);
}

static void tree_free(struct tree *t)
{
        close(t->sfd);
        free(t->state);
        free(t->root);
}

/* Every path under root with its size and mtime, one a line, sorted. */
static char *walk_buf;
static size_t walk_root_len;
static int walk_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
        char *line, *n;

        ck_assert_int_ge(asprintf(&line, "%s %c %lld %lld.%09ld\n", p + walk_root_len,
                                  S_ISDIR(st->st_mode) ? 'd' : S_ISLNK(st->st_mode) ? 'l' : 'f',
                                  (long long)(S_ISDIR(st->st_mode) ? 0 : st->st_size),
                                  (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec), 0);
        ck_assert_int_ge(asprintf(&n, "%s%s", walk_buf ? walk_buf : "", line), 0);
        free(walk_buf);
        free(line);
        walk_buf = n;
        return 0;
}

static char *walk(const char *root, const char *under)
{
        char *p;

        walk_buf = NULL;
        walk_root_len = strlen(root);
        ck_assert_int_ge(asprintf(&p, "%s%s", root, under), 0);
        ck_assert_int_eq(nftw(p, walk_cb, 16, FTW_PHYS), 0);
        free(p);
        return walk_buf ? walk_buf : strdup("");
}

/* Lines of after that are not in before. */
static void assert_changes_only_under(const char *before, const char *after,
                                      const char *prefix)
{
        const char *s = after;

        while (*s) {
                size_t n = strcspn(s, "\n");
                char *line = strndup(s, n);
                if (!strstr(before, line) && strcmp(line, "") != 0)
                        ck_assert_msg(!strncmp(line, prefix, strlen(prefix)) ||
                                      !strncmp(line, "/state d", 8),
                                      "changed outside %s: %s", prefix, line);
                free(line);
                s += n + (s[n] == '\n');
        }
}

static json_t *dl_doc(const char *type, const char *rel, bool as_text)
{
        char *p, *text;
        json_t *payload, *d;
        json_error_t e;

        ck_assert_int_ge(asprintf(&p, "%s/tests/payloads/%s", tu_src_dir(), rel), 0);
        if (as_text) {
                text = tu_read_file(p, NULL);
                ck_assert_ptr_nonnull(text);
                payload = json_string(text);
                free(text);
        } else {
                payload = json_load_file(p, 0, &e);
        }
        ck_assert_ptr_nonnull(payload);
        free(p);
        d = json_pack("{s:s,s:s,s:s,s:o}", "from_agent", "bob", "to_agent", "alice",
                      "payload_type", type, "payload", payload);
        ck_assert_ptr_nonnull(d);
        return d;
}

static char *st_read(struct tree *t, const char *rel)
{
        char *p, *s;

        ck_assert_int_ge(asprintf(&p, "%s/%s", t->state, rel), 0);
        s = tu_read_file(p, NULL);
        free(p);
        return s;
}

START_TEST(test_deliver_vox_writes_contract_and_voxignore)
{
        struct tree t;
        hd_deliver_opts o = { .profile = "vox" };
        json_t *d = dl_doc("vox/1.0", "vox.json", false), *got;
        char *before, *after, *s;

        tree_make(&t);
        s = NULL;
        ck_assert_int_ge(asprintf(&s, "%s/.voxignore", t.state), 0);
        tu_write_file(s, "node_modules/\n*.log", 19);
        free(s);
        before = walk(t.root, "");
        ck_assert_int_eq(hd_deliver_profile(t.sfd, d, &o, T1030), 0);
        after = walk(t.root, "");
        assert_changes_only_under(before, after, "/state/");

        s = st_read(&t, ".vox/handoffs/3f2c9a7e-5b1d-4e8a-9c0f-2d6b7a1e4c53.json");
        ck_assert_ptr_nonnull(s);
        got = json_loads(s, 0, NULL);
        ck_assert(json_equal(got, json_object_get(d, "payload")));
        json_decref(got);
        free(s);
        s = st_read(&t, ".voxignore");
        ck_assert_str_eq(s, "node_modules/\n*.log\n.vox/handoffs/\n");
        free(s);

        /* Twice: the line is not added again. */
        ck_assert_int_eq(hd_deliver_profile(t.sfd, d, &o, T1030), 0);
        s = st_read(&t, ".voxignore");
        ck_assert_str_eq(s, "node_modules/\n*.log\n.vox/handoffs/\n");
        free(s);
        free(before);
        free(after);
        json_decref(d);
        tree_free(&t);
}
END_TEST

START_TEST(test_deliver_act_xml_latest_and_retention)
{
        struct tree t;
        hd_deliver_opts o = { .profile = "act", .act_max_files = 3 };
        json_t *d = dl_doc("act/1.0", "seeds/act-context-exhaustion.xml", true);
        char *before, *after, *s, buf[64];
        ssize_t n;

        tree_make(&t);
        before = walk(t.root, "");
        ck_assert_int_eq(hd_deliver_profile(t.sfd, d, &o, T1030), 0);
        s = st_read(&t, ".act/handoffs/2026-02-02-1030.xml");
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s, json_string_value(json_object_get(d, "payload")));
        free(s);
        n = readlinkat(t.sfd, ".act/handoffs/latest.xml", buf, sizeof(buf) - 1);
        ck_assert_int_gt(n, 0);
        buf[n] = '\0';
        ck_assert_str_eq(buf, "2026-02-02-1030.xml");

        /* The same minute again keeps both; then three more minutes. */
        ck_assert_int_eq(hd_deliver_profile(t.sfd, d, &o, T1030 + 1000000), 0);
        n = readlinkat(t.sfd, ".act/handoffs/latest.xml", buf, sizeof(buf) - 1);
        buf[n] = '\0';
        ck_assert_str_eq(buf, "2026-02-02-1030-2.xml");
        for (int i = 1; i <= 3; i++)
                ck_assert_int_eq(hd_deliver_profile(t.sfd, d, &o, T1030 + i * MINUTE), 0);
        after = walk(t.root, "");
        assert_changes_only_under(before, after, "/state/");
        ck_assert_ptr_null(strstr(after, "2026-02-02-1030.xml"));
        ck_assert_ptr_null(strstr(after, "2026-02-02-1030-2.xml"));
        ck_assert_ptr_nonnull(strstr(after, "/state/.act/handoffs/2026-02-02-1031.xml f"));
        ck_assert_ptr_nonnull(strstr(after, "/state/.act/handoffs/2026-02-02-1032.xml f"));
        ck_assert_ptr_nonnull(strstr(after, "/state/.act/handoffs/2026-02-02-1033.xml f"));
        n = readlinkat(t.sfd, ".act/handoffs/latest.xml", buf, sizeof(buf) - 1);
        buf[n] = '\0';
        ck_assert_str_eq(buf, "2026-02-02-1033.xml");
        free(before);
        free(after);
        json_decref(d);
        tree_free(&t);
}
END_TEST

/* Issue 19.9: retention removes the lowest number of a minute, so the
 * number only grows: the 7th file of a minute with act_max_files 5 is
 * the newest one kept, and latest.xml points at it. */
START_TEST(test_deliver_act_seq_only_grows)
{
        struct tree t;
        hd_deliver_opts o = { .profile = "act", .act_max_files = 5 };
        json_t *d = dl_doc("act/1.0", "seeds/act-context-exhaustion.xml", true);
        char buf[64], name[64];
        struct stat st;
        ssize_t n;

        tree_make(&t);
        for (int i = 1; i <= 8; i++) {
                ck_assert_int_eq(hd_deliver_profile(t.sfd, d, &o, T1030 + i * 1000000), 0);
                if (i == 1)
                        snprintf(name, sizeof(name), "2026-02-02-1030.xml");
                else
                        snprintf(name, sizeof(name), "2026-02-02-1030-%d.xml", i);
                n = readlinkat(t.sfd, ".act/handoffs/latest.xml", buf, sizeof(buf) - 1);
                ck_assert_int_gt(n, 0);
                buf[n] = '\0';
                ck_assert_str_eq(buf, name);
                /* latest.xml is not dangling: the newest file exists */
                ck_assert_int_eq(fstatat(t.sfd, ".act/handoffs/latest.xml", &st, 0), 0);
        }
        /* the five newest: 4..8 */
        ck_assert_int_eq(fstatat(t.sfd, ".act/handoffs/2026-02-02-1030-3.xml", &st, 0), -1);
        for (int i = 4; i <= 8; i++) {
                snprintf(name, sizeof(name), ".act/handoffs/2026-02-02-1030-%d.xml", i);
                ck_assert_int_eq(fstatat(t.sfd, name, &st, 0), 0);
        }
        json_decref(d);
        tree_free(&t);
}
END_TEST

START_TEST(test_deliver_act_md_converts)
{
        struct tree t;
        hd_deliver_opts o = { .profile = "act", .act_format = "md" };
        json_t *d = dl_doc("act/1.0", "seeds/act-context-exhaustion.xml", true), *p;
        char *s;
        hd_verdict v;

        tree_make(&t);
        ck_assert_int_eq(hd_deliver_profile(t.sfd, d, &o, T1030), 0);
        s = st_read(&t, ".act/handoffs/2026-02-02-1030.md");
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(strncmp(s, "# Context Handoff\n", 18), 0);
        ck_assert_ptr_nonnull(strstr(s, "- **Project:** ACT v2.5\n"));
        /* What was written is itself a valid act/1.0 document. */
        p = json_pack("{s:s,s:s}", "payload_type", "act/1.0", "payload", s);
        ck_assert_int_eq(hd_payload_validate(p, NULL, &v), 0);
        json_decref(p);
        free(s);
        ck_assert_int_eq(faccessat(t.sfd, ".act/handoffs/latest.md", F_OK,
                                   AT_SYMLINK_NOFOLLOW), 0);
        o.act_format = "pdf";
        ck_assert_int_eq(hd_deliver_profile(t.sfd, d, &o, T1030), -EINVAL);
        json_decref(d);
        tree_free(&t);
}
END_TEST

START_TEST(test_deliver_refuses_symlinks_out)
{
        struct tree t;
        hd_deliver_opts vox = { .profile = "vox" }, act = { .profile = "act" };
        json_t *dv = dl_doc("vox/1.0", "vox.json", false);
        json_t *da = dl_doc("act/1.0", "seeds/act-context-exhaustion.xml", true);
        char *before, *after, *out;

        tree_make(&t);
        ck_assert_int_ge(asprintf(&out, "%s/outside", t.root), 0);
        ck_assert_int_eq(symlinkat(out, t.sfd, ".vox"), 0);
        ck_assert_int_eq(symlinkat(out, t.sfd, ".act"), 0);
        before = walk(t.root, "/outside");
        ck_assert_int_lt(hd_deliver_profile(t.sfd, dv, &vox, T1030), 0);
        ck_assert_int_lt(hd_deliver_profile(t.sfd, da, &act, T1030), 0);
        after = walk(t.root, "/outside");
        ck_assert_str_eq(before, after);
        free(before);
        free(after);

        /* A .voxignore symlink is not followed either. */
        unlinkat(t.sfd, ".vox", 0);
        char *target;
        ck_assert_int_ge(asprintf(&target, "%s/ignore", out), 0);
        tu_write_file(target, "x\n", 2);
        ck_assert_int_eq(symlinkat(target, t.sfd, ".voxignore"), 0);
        before = walk(t.root, "/outside");
        ck_assert_int_lt(hd_deliver_profile(t.sfd, dv, &vox, T1030), 0);
        after = walk(t.root, "/outside");
        ck_assert_str_eq(before, after);
        free(before);
        free(after);
        free(target);
        free(out);
        json_decref(dv);
        json_decref(da);
        tree_free(&t);
}
END_TEST

START_TEST(test_deliver_nothing_for_other_profiles_or_types)
{
        struct tree t;
        hd_deliver_opts boot = { .profile = "bootstrap" }, vox = { .profile = "vox" },
                        act = { .profile = "act" }, bad = { .profile = "email" };
        json_t *dv = dl_doc("vox/1.0", "vox.json", false);
        json_t *da = dl_doc("act/1.0", "seeds/act-context-exhaustion.xml", true);
        char *before, *after;

        tree_make(&t);
        before = walk(t.root, "");
        ck_assert_int_eq(hd_deliver_profile(t.sfd, dv, &boot, T1030), 0);
        ck_assert_int_eq(hd_deliver_profile(t.sfd, dv, NULL, T1030), 0);
        ck_assert_int_eq(hd_deliver_profile(t.sfd, da, &vox, T1030), 0);
        ck_assert_int_eq(hd_deliver_profile(t.sfd, dv, &act, T1030), 0);
        ck_assert_int_eq(hd_deliver_profile(t.sfd, dv, &bad, T1030), -EINVAL);
        after = walk(t.root, "");
        ck_assert_str_eq(before, after);
        free(before);
        free(after);
        json_decref(dv);
        json_decref(da);
        tree_free(&t);
}
END_TEST

Suite *suite_deliver(void);
Suite *suite_deliver(void)
{
        Suite *s = suite_create("deliver");
        TCase *tc = tcase_create("profiles");

        tcase_add_test(tc, test_deliver_vox_writes_contract_and_voxignore);
        tcase_add_test(tc, test_deliver_act_xml_latest_and_retention);
        tcase_add_test(tc, test_deliver_act_seq_only_grows);
        tcase_add_test(tc, test_deliver_act_md_converts);
        tcase_add_test(tc, test_deliver_refuses_symlinks_out);
        tcase_add_test(tc, test_deliver_nothing_for_other_profiles_or_types);
        suite_add_tcase(s, tc);
        return s;
}
