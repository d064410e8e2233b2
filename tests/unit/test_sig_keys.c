/* Sender signatures (Ed25519): key lines and key files (modes, pubkeys
 * lists), and the daemon's config of keys and its key lookup, down to the
 * attack of issue 19.2 through that lookup. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "handoff.h"
#include "testutil.h"
#include "util.h"

/* "2026-04-21T10:15:00Z" */
#define T0 INT64_C(1776766500000000)

/* ---- keys and key files ---------------------------------------------- */

START_TEST(test_sig_key_lines_round_trip)
{
        hd_key *sk = tu_sig_gen(NULL), *back = NULL;
        char line[HD_KEY_LINE_MAX], again[HD_KEY_LINE_MAX], err[200];
        const char *kid = hd_key_kid(sk);

        /* default kid: 16 lowercase hex chars */
        ck_assert_uint_eq(strlen(kid), 16);
        ck_assert_uint_eq(strspn(kid, "0123456789abcdef"), 16);
        ck_assert_int_eq(hd_key_format(sk, true, line, sizeof(line)), 0);
        ck_assert(!strncmp(line, "ed25519-secret ", 15));
        ck_assert_int_eq(hd_key_parse(line, strlen(line), &back, err, sizeof(err)), 0);
        ck_assert_int_eq(hd_key_kind_of(back), HD_KEY_ED25519_SECRET);
        ck_assert_int_eq(hd_key_format(back, true, again, sizeof(again)), 0);
        ck_assert_str_eq(line, again);
        ck_assert_int_eq(hd_key_format(sk, false, line, sizeof(line)), 0);
        ck_assert_int_eq(hd_key_format(back, false, again, sizeof(again)), 0);
        ck_assert_str_eq(line, again);
        ck_assert(!strncmp(line, "ed25519 ", 8));
        ck_assert_int_eq(hd_key_format(sk, true, line, 100), -EINVAL);
        hd_key_free(back);
        back = tu_sig_public_of(sk);
        ck_assert_int_eq(hd_key_format(back, true, line, sizeof(line)), -EINVAL);
        hd_key_free(back);
        hd_key_free(sk);
        ck_assert_int_eq(hd_key_generate("Not-Valid", &back), -EINVAL);
}
END_TEST

START_TEST(test_sig_key_line_parse_refusals)
{
        static const char *const bad[] = {
                "",
                "ed25519",
                "ed25519 AAAA kid",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= ",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= Kid",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid extra",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB= kid",
                "ed25519  AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid\r",
                "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid\nsecond",
                "rsa AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid",
        };
        char err[200];
        hd_key *k = NULL;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                err[0] = '\0';
                ck_assert_msg(hd_key_parse(bad[i], strlen(bad[i]), &k, err, sizeof(err)) == -EINVAL,
                              "accepted '%s'", bad[i]);
                ck_assert_ptr_null(k);
                ck_assert_msg(err[0], "no message for '%s'", bad[i]);
        }
        static const char good[] = "ed25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= kid\n";
        ck_assert_msg(hd_key_parse(good, strlen(good), &k, err, sizeof(err)) == 0, "%s", err);
        ck_assert_str_eq(hd_key_kid(k), "kid");
        hd_key_free(k);
}
END_TEST

START_TEST(test_sig_key_file_modes)
{
        char *d = tu_tmpdir(), *p, line[HD_KEY_LINE_MAX], err[300];
        hd_key *sk = tu_sig_gen(NULL), *k = NULL;

        /* a public key may be read by anyone, written by its owner only */
        ck_assert_int_eq(hd_key_format(sk, false, line, sizeof(line)), 0);
        p = tu_file_text(d, "a.pub", line, 0644);
        ck_assert_msg(hd_key_load(p, &k, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_ED25519_PUBLIC);
        hd_key_free(k);
        k = NULL;
        ck_assert_int_eq(chmod(p, 0664), 0);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EPERM);
        ck_assert_ptr_nonnull(strstr(err, "writable by group or others"));
        free(p);
        /* a secret key follows the HMAC key's rule */
        ck_assert_int_eq(hd_key_format(sk, true, line, sizeof(line)), 0);
        p = tu_file_text(d, "a.key", line, 0644);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EPERM);
        ck_assert_ptr_nonnull(strstr(err, "chmod 600 or 640"));
        ck_assert_int_eq(chmod(p, 0640), 0);
        ck_assert_msg(hd_key_load(p, &k, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_ED25519_SECRET);
        ck_assert_str_eq(hd_key_kid(k), hd_key_kid(sk));
        hd_key_free(k);
        k = NULL;
        free(p);
        /* a malformed Ed25519 line is an error, never an HMAC key */
        p = tu_file_text(d, "broken.key", "ed25519-secret not-base64-at-all-but-long-enough kid\n", 0600);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_null(k);
        free(p);
        hd_key_free(sk);
        free(d);
}
END_TEST

START_TEST(test_sig_pubkeys_file)
{
        char *d = tu_tmpdir(), *p, *text, err[300];
        char l1[HD_KEY_LINE_MAX], l2[HD_KEY_LINE_MAX], s1[HD_KEY_LINE_MAX];
        hd_key *a = tu_sig_gen("a-1"), *b = tu_sig_gen("a-2"), *keys[HD_PUBKEYS_MAX], *k = NULL;
        size_t n = 0;

        ck_assert_int_eq(hd_key_format(a, false, l1, sizeof(l1)), 0);
        ck_assert_int_eq(hd_key_format(b, false, l2, sizeof(l2)), 0);
        ck_assert_int_eq(hd_key_format(a, true, s1, sizeof(s1)), 0);
        ck_assert_int_ge(asprintf(&text, "# alice, rotated 2026-04\n%s\n%s", l1, l2), 0);
        p = tu_file_text(d, "alice.pub", text, 0644);
        ck_assert_msg(hd_pubkeys_load_at(AT_FDCWD, p, keys, HD_PUBKEYS_MAX, &n, err,
                                         sizeof(err)) == 0, "%s", err);
        ck_assert_uint_eq(n, 2);
        ck_assert_str_eq(hd_key_kid(keys[0]), "a-1");
        ck_assert_str_eq(hd_key_kid(keys[1]), "a-2");
        hd_key_free(keys[0]);
        hd_key_free(keys[1]);
        /* more than max */
        ck_assert_int_eq(hd_pubkeys_load_at(AT_FDCWD, p, keys, 1, &n, err, sizeof(err)), -E2BIG);
        free(p);
        free(text);
        /* one key per file for hd_key_load */
        ck_assert_int_ge(asprintf(&text, "%s%s", l1, l2), 0);
        p = tu_file_text(d, "two.pub", text, 0644);
        ck_assert_int_eq(hd_key_load(p, &k, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "more than one line"));
        free(p);
        free(text);
        /* a secret key among public ones */
        ck_assert_int_ge(asprintf(&text, "%s%s", l1, s1), 0);
        p = tu_file_text(d, "mixed.pub", text, 0644);
        ck_assert_int_eq(hd_pubkeys_load_at(AT_FDCWD, p, keys, HD_PUBKEYS_MAX, &n, err,
                                            sizeof(err)), -EKEYREJECTED);
        ck_assert_ptr_nonnull(strstr(err, "line 2 is a secret key"));
        free(p);
        free(text);
        /* an empty list and a group-writable one */
        p = tu_file_text(d, "empty.pub", "# nothing yet\n", 0644);
        ck_assert_int_eq(hd_pubkeys_load_at(AT_FDCWD, p, keys, HD_PUBKEYS_MAX, &n, err,
                                            sizeof(err)), -EINVAL);
        free(p);
        p = tu_file_text(d, "open.pub", l1, 0666);
        ck_assert_int_eq(hd_pubkeys_load_at(AT_FDCWD, p, keys, HD_PUBKEYS_MAX, &n, err,
                                            sizeof(err)), -EPERM);
        free(p);
        hd_key_free(a);
        hd_key_free(b);
        free(d);
}
END_TEST

/* ---- the daemon's config and key lookup -------------------------------- */

struct cfg_env {
        char *dir;
        char line_a[HD_KEY_LINE_MAX], line_b[HD_KEY_LINE_MAX], secret_a[HD_KEY_LINE_MAX];
        hd_key *a, *b;
};

static void cfg_env_init(struct cfg_env *e)
{
        char *p;

        e->dir = tu_tmpdir();
        ck_assert_int_eq(chmod(e->dir, 0755), 0);
        e->a = tu_sig_gen("alice-1");
        e->b = tu_sig_gen("bob-1");
        ck_assert_int_eq(hd_key_format(e->a, false, e->line_a, sizeof(e->line_a)), 0);
        ck_assert_int_eq(hd_key_format(e->b, false, e->line_b, sizeof(e->line_b)), 0);
        ck_assert_int_eq(hd_key_format(e->a, true, e->secret_a, sizeof(e->secret_a)), 0);
        free(tu_file_text(e->dir, "default.key", "0123456789abcdef0123456789abcdef-default\n", 0600));
        free(tu_file_text(e->dir, "ops.key", "0123456789abcdef0123456789abcdef-ops\n", 0600));
        free(tu_file_text(e->dir, "dave.key", "0123456789abcdef0123456789abcdef-dave\n", 0600));
        free(tu_file_text(e->dir, "alice.pub", e->line_a, 0644));
        free(tu_file_text(e->dir, "alice.key", e->secret_a, 0600));
        ck_assert_int_ge(asprintf(&p, "%s/pubkeys", e->dir), 0);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        free(p);
        free(tu_file_text(e->dir, "pubkeys/bob.pub", e->line_b, 0644));
}

static void cfg_env_done(struct cfg_env *e)
{
        hd_key_free(e->a);
        hd_key_free(e->b);
        free(e->dir);
}

/* Load a config: body after "[spool]" and "[agent zoe]"; @ stands for the
 * env's directory. */
static int cfg_load(struct cfg_env *e, const char *body, struct config **ret, char **err)
{
        char *text, *conf, *p;
        size_t n = 0;
        int r;

        text = malloc(strlen(body) * 4 + 4096);
        ck_assert_ptr_nonnull(text);
        n = (size_t)sprintf(text, "[spool]\ndir = %s/spool\n\n[agent zoe]\nstate_dir = %s/zoe\n\n",
                            e->dir, e->dir);
        for (p = (char *)body; *p; p++) {
                if (*p == '@')
                        n += (size_t)sprintf(text + n, "%s", e->dir);
                else
                        text[n++] = *p;
        }
        text[n] = '\0';
        ck_assert_int_ge(asprintf(&conf, "%s/handoffd.conf", e->dir), 0);
        unlink(conf);
        tu_write_file(conf, text, n);
        r = config_load(conf, true, ret, err);
        free(conf);
        free(text);
        return r;
}

static const char full_conf[] =
        "[keys]\n"
        "default = @/default.key\n"
        "ops = @/ops.key\n"
        "pubkey_dir = @/pubkeys\n"
        "[agent alice]\n"
        "state_dir = @/alice\n"
        "pubkeys = @/alice.pub\n"
        "require = sig\n"
        "[agent dave]\n"
        "state_dir = @/dave\n"
        "key = @/dave.key\n";

START_TEST(test_sig_config_lookup)
{
        struct cfg_env e;
        struct config *c = NULL;
        char *err = NULL;
        const hd_key *k;

        cfg_env_init(&e);
        ck_assert_msg(cfg_load(&e, full_conf, &c, &err) == 0, "%s", err);
        ck_assert_uint_eq(c->n_pubkeys, 2);
        /* a kid naming a public key: that key, bound to its agent */
        k = config_key_lookup(c, "alice-1", "bob");
        ck_assert_ptr_nonnull(k);
        ck_assert_str_eq(hd_key_agent(k), "alice");
        k = config_key_lookup(c, "bob-1", "alice");
        ck_assert_str_eq(hd_key_agent(k), "bob");   /* pubkey_dir/bob.pub */
        /* alice requires sig: an hmac query gets her public key */
        k = config_key_lookup(c, NULL, "alice");
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_ED25519_PUBLIC);
        k = config_key_lookup(c, "ops", "alice");
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_ED25519_PUBLIC);
        /* dave has his own key: bound to him; ops stays shared */
        k = config_key_lookup(c, NULL, "dave");
        ck_assert_str_eq(hd_key_agent(k), "dave");
        k = config_key_lookup(c, "ops", "dave");
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_HMAC);
        ck_assert_ptr_null(hd_key_agent(k));
        /* no key of its own: the default */
        ck_assert_ptr_eq(config_key_lookup(c, NULL, "erin"), c->default_key);
        ck_assert_ptr_null(config_key_lookup(c, "retired", "erin"));
        config_free(c);
        cfg_env_done(&e);
}
END_TEST

START_TEST(test_sig_config_refusals)
{
        static const struct { const char *body, *want; } cases[] = {
                { "[keys]\ndefault = @/alice.key\n", "the daemon needs only public keys" },
                { "[keys]\ndefault = @/default.key\n[agent alice]\nstate_dir = @/a\nkey = @/alice.key\n",
                  "the daemon needs only public keys" },
                { "[keys]\ndefault = @/alice.pub\n", "is an Ed25519 public key" },
                { "[agent alice]\nstate_dir = @/a\npubkeys = @/alice.key\n",
                  "the daemon needs only public keys" },
                { "[keys]\npubkey_dir = @/pubkeys\n[agent alice]\nstate_dir = @/a\nrequire = sig\n",
                  "no public key of alice was found" },
                { "[keys]\ndefault = @/default.key\n[agent alice]\nstate_dir = @/a\nrequire = sig\n",
                  "no public key is configured" },
                { "[agent alice]\nstate_dir = @/a\nrequire = hmac\n", "is not sig or any" },
                { "[agent alice]\nstate_dir = @/a\npubkeys = alice.pub\n", "not an absolute path" },
                { "[keys]\npubkey_dir = @/pubkeys\n[agent bob]\nstate_dir = @/b\npubkeys = @/pubkeys/bob.pub\n",
                  "kid 'bob-1' names two public keys" },
                { "[keys]\nalice-1 = @/ops.key\n[agent alice]\nstate_dir = @/a\npubkeys = @/alice.pub\n",
                  "is also a [keys] name" },
                { "[keys]\npubkey_dir = @/missing\n", "pubkey_dir" },
        };
        struct cfg_env e;

        cfg_env_init(&e);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct config *c = NULL;
                char *err = NULL;

                ck_assert_msg(cfg_load(&e, cases[i].body, &c, &err) < 0, "case %zu loaded", i);
                ck_assert_ptr_null(c);
                ck_assert_msg(err && strstr(err, cases[i].want), "case %zu: '%s', want '%s'",
                              i, err ? err : "(null)", cases[i].want);
                free(err);
        }
        cfg_env_done(&e);
}
END_TEST

START_TEST(test_sig_config_pubkey_dir_rules)
{
        struct cfg_env e;
        struct config *c = NULL;
        char *err = NULL, *p;

        cfg_env_init(&e);
        /* whoever may add a file there may sign as anyone */
        ck_assert_int_ge(asprintf(&p, "%s/pubkeys", e.dir), 0);
        ck_assert_int_eq(chmod(p, 0775), 0);
        ck_assert_int_lt(cfg_load(&e, "[keys]\npubkey_dir = @/pubkeys\n", &c, &err), 0);
        ck_assert_msg(strstr(err, "must not be writable by group or others"), "%s", err);
        free(err);
        err = NULL;
        ck_assert_int_eq(chmod(p, 0755), 0);
        /* names: <agent>.pub; other files are not keys */
        free(tu_file_text(e.dir, "pubkeys/README", "not a key\n", 0644));
        ck_assert_msg(cfg_load(&e, "[keys]\npubkey_dir = @/pubkeys\n", &c, &err) == 0, "%s", err);
        ck_assert_uint_eq(c->n_pubkeys, 1);
        config_free(c);
        c = NULL;
        free(tu_file_text(e.dir, "pubkeys/Bad.pub", e.line_a, 0644));
        ck_assert_int_lt(cfg_load(&e, "[keys]\npubkey_dir = @/pubkeys\n", &c, &err), 0);
        ck_assert_msg(strstr(err, "'Bad.pub' is not named <agent>.pub"), "%s", err);
        free(err);
        free(p);
        cfg_env_done(&e);
}
END_TEST

/* End to end through the daemon's lookup: the attack of issue 19.2. */
START_TEST(test_sig_config_kid_key_cannot_sign_as_dave)
{
        struct cfg_env e;
        struct config *c = NULL;
        char *err = NULL;
        hd_key *ops = NULL;
        json_t *d = tu_sig_doc("dave");
        hd_verdict v;
        static const char ops_bytes[] = "0123456789abcdef0123456789abcdef-ops";

        cfg_env_init(&e);
        ck_assert_msg(cfg_load(&e, full_conf, &c, &err) == 0, "%s", err);
        ck_assert_int_eq(hd_key_from_bytes(ops_bytes, strlen(ops_bytes), &ops), 0);
        json_object_set_new(d, "kid", json_string("ops"));
        ck_assert_int_eq(hd_sign(d, ops), 0);
        ck_assert_int_eq(hd_verify(d, config_key_lookup, c, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_KEY_AGENT_MISMATCH);
        /* the same key signs for erin, who has none of her own */
        json_object_set_new(d, "from_agent", json_string("erin"));
        ck_assert_int_eq(hd_sign(d, ops), 0);
        ck_assert_int_eq(hd_verify(d, config_key_lookup, c, NULL, NULL, T0, &v), 0);
        /* alice's key signs for alice, bob's does not */
        json_object_set_new(d, "from_agent", json_string("alice"));
        ck_assert_int_eq(hd_sign(d, e.a), 0);
        ck_assert_int_eq(hd_verify(d, config_key_lookup, c, NULL, NULL, T0, &v), 0);
        ck_assert_int_eq(hd_sign(d, e.b), 0);
        ck_assert_int_eq(hd_verify(d, config_key_lookup, c, NULL, NULL, T0, &v), -EBADMSG);
        ck_assert_int_eq(v.reason, HD_R_KEY_AGENT_MISMATCH);
        json_decref(d);
        hd_key_free(ops);
        config_free(c);
        cfg_env_done(&e);
}
END_TEST

Suite *suite_sig_keys(void);
Suite *suite_sig_keys(void)
{
        Suite *s = suite_create("sig_keys");
        TCase *tc;

        tc = tcase_create("keys");
        tcase_add_test(tc, test_sig_key_lines_round_trip);
        tcase_add_test(tc, test_sig_key_line_parse_refusals);
        tcase_add_test(tc, test_sig_key_file_modes);
        tcase_add_test(tc, test_sig_pubkeys_file);
        suite_add_tcase(s, tc);

        tc = tcase_create("config");
        tcase_add_test(tc, test_sig_config_lookup);
        tcase_add_test(tc, test_sig_config_refusals);
        tcase_add_test(tc, test_sig_config_pubkey_dir_rules);
        tcase_add_test(tc, test_sig_config_kid_key_cannot_sign_as_dave);
        suite_add_tcase(s, tc);
        return s;
}
