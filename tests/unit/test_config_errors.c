/* handoffd.conf errors: every mistake of a file reported, each as
 * "FILE:LINE: message", an unknown section at its header's line with the
 * known name it is closest to. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "testutil.h"

/* config_load() of text; returns its error text (malloc'ed) or NULL. */
static char *load_err(const char *text, char **path_ret)
{
        char *dir = tu_tmpdir(), *path, *err = NULL;
        struct config *c = NULL;
        int r;

        ck_assert_int_ge(asprintf(&path, "%s/h.conf", dir), 0);
        tu_write_file(path, text, strlen(text));
        r = config_load(path, false, &c, &err);
        if (r == 0) {
                config_free(c);
                ck_assert_ptr_null(err);
        } else {
                ck_assert_ptr_null(c);
                ck_assert_ptr_nonnull(err);
        }
        free(dir);
        if (path_ret)
                *path_ret = path;
        else
                free(path);
        return err;
}

static void assert_line(const char *err, const char *path, int line, const char *msg)
{
        char *want;

        ck_assert_int_ge(asprintf(&want, "%s:%d: %s", path, line, msg), 0);
        for (const char *p = err; p && *p;) {
                size_t n = strcspn(p, "\n");
                if (n == strlen(want) && !strncmp(p, want, n)) {
                        free(want);
                        return;
                }
                p += n + (p[n] == '\n');
        }
        ck_abort_msg("no line '%s' in:\n%s", want, err);
}

static int count_lines(const char *s)
{
        int n = 1;
        for (; *s; s++)
                n += *s == '\n';
        return n;
}

#define GOOD "[spool]\ndir = /srv/spool\n[keys]\ndefault = /k/default.key\n"

START_TEST(test_config_good_has_no_error)
{
        ck_assert_ptr_null(load_err(GOOD, NULL));
}
END_TEST

START_TEST(test_config_reports_every_mistake)
{
        char *path, *err = load_err("[spool]\n"               /* 1 */
                                    "dir = /srv/spool\n"      /* 2 */
                                    "fsync = maybe\n"         /* 3 */
                                    "max_window = soon\n"     /* 4 */
                                    "[keys]\n"                /* 5 */
                                    "default = relative.key\n" /* 6 */
                                    "[control]\n"             /* 7 */
                                    "socket = /run/x.sock\n"  /* 8 */
                                    "sokcet = /run/y.sock\n", /* 9 */
                                    &path);

        assert_line(err, path, 3, "[spool] fsync: 'maybe' is not yes or no");
        assert_line(err, path, 4, "[spool] max_window: 'soon' is not a duration (like 300, 5m, 1h)");
        assert_line(err, path, 6, "[keys] default: 'relative.key' is neither an absolute path nor credential:NAME");
        assert_line(err, path, 9, "unknown key 'sokcet' in [control] (did you mean socket?)");
        ck_assert_int_eq(count_lines(err), 4);
        free(err);
        free(path);
}
END_TEST

START_TEST(test_config_unknown_section_at_header_with_suggestion)
{
        char *path, *err = load_err(GOOD
                                    "\n"                      /* 5 */
                                    "[key]\n"                 /* 6 */
                                    "alice = /k/alice.key\n"  /* 7 */
                                    "bob = /k/bob.key\n",     /* 8 */
                                    &path);

        /* once, at the header, not at each key */
        assert_line(err, path, 6, "unknown section [key] (did you mean [keys]?)");
        ck_assert_int_eq(count_lines(err), 1);
        free(err);
        free(path);
}
END_TEST

START_TEST(test_config_unknown_section_suggestions)
{
        static const struct { const char *section, *msg; } cases[] = {
                { "Spool", "unknown section [Spool] (did you mean [spool]?)" },
                { "retension", "unknown section [retension] (did you mean [retention]?)" },
                { "agents alice", "unknown section [agents alice] (did you mean [agent alice]?)" },
                { "agent", "[agent]: this section names its agent: [agent NAME]" },
                { "remote", "[remote]: this section names its remote: [remote NAME]" },
                { "remotes bob", "unknown section [remotes bob] (did you mean [remote bob]?)" },
                { "relais", "unknown section [relais] (did you mean [relay]?)" },
                { "frobnicate", "unknown section [frobnicate]" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char text[256], *path, *err;
                snprintf(text, sizeof(text), GOOD "[%s]\nx = 1\n", cases[i].section);
                err = load_err(text, &path);
                assert_line(err, path, 5, cases[i].msg);
                ck_assert_int_eq(count_lines(err), 1);
                free(err);
                free(path);
        }
}
END_TEST

START_TEST(test_config_syntax_errors_each_with_line)
{
        char *path, *err = load_err(GOOD
                                    "this is no setting\n"    /* 5 */
                                    "[control\n"              /* 6 */
                                    "[agent Al ice]\n"        /* 7 */
                                    "state_dir = /a\n"        /* 8 */
                                    "delivery = bootstrap\n"  /* 9 */
                                    "neither\n",              /* 10 */
                                    &path);

        assert_line(err, path, 5, "expected KEY = VALUE or [SECTION]");
        assert_line(err, path, 6, "'[' without ']'");
        assert_line(err, path, 7, "[agent Al ice]: 'Al ice' is not a valid agent name");
        assert_line(err, path, 10, "expected KEY = VALUE or [SECTION]");
        ck_assert_int_eq(count_lines(err), 4);
        free(err);
        free(path);
}
END_TEST

START_TEST(test_config_long_line_keeps_numbering)
{
        char text[1024], *path, *err;

        snprintf(text, sizeof(text), GOOD "[control]\nsocket = /%0600d\nsokcet = x\n", 0);
        err = load_err(text, &path);
        assert_line(err, path, 6, "line longer than 197 characters");
        assert_line(err, path, 7, "unknown key 'sokcet' in [control] (did you mean socket?)");
        ck_assert_int_eq(count_lines(err), 2);
        free(err);
        free(path);
}
END_TEST

/* The handler takes the section from the reader, whole (inih's own copy
 * is cut at 49 bytes): the reader must read headers as inih does.  An
 * indented line after a key continues its value even when it starts
 * with '[' (line 7: [agent a]'s state_dir, no section [agent b]); a ';'
 * after a space inside the brackets starts a comment, and the line is no
 * header (line 8; its key goes on to [agent a]). */
START_TEST(test_config_headers_read_as_inih_reads_them)
{
        char *path, *err = load_err(GOOD
                                    "[agent a]\n"             /* 5 */
                                    "state_dir = /a\n"        /* 6 */
                                    "  [agent b]\n"           /* 7 */
                                    "[agent c ;x]\n"          /* 8 */
                                    "delivery = nonsense\n",  /* 9 */
                                    &path);

        assert_line(err, path, 7, "[agent a] state_dir must be an absolute path");
        assert_line(err, path, 8, "'[' without ']'");
        assert_line(err, path, 9, "[agent a] delivery: 'nonsense' is not bootstrap, vox or act");
        ck_assert_int_eq(count_lines(err), 3);
        free(err);
        free(path);
}
END_TEST

/* [agent NAME] and [remote NAME] of 64 characters are those names, not
 * their first 43 (42); 65 is refused at its header. */
START_TEST(test_config_section_names_whole)
{
        char n64[65], n65[66], r64[65], text[1024], *dir = tu_tmpdir(), *path, *err = NULL;
        struct config *c = NULL;

        memset(n64, 'a', 64);
        n64[64] = '\0';
        memset(n65, 'c', 65);
        n65[65] = '\0';
        memcpy(r64, n64, 65);
        r64[0] = 'r';
        snprintf(text, sizeof(text), GOOD "[agent %s]\nstate_dir = /a\n"
                 "[relay]\nservers = nats://127.0.0.1:4222\nhost = h1\n[remote %s]\nhost = h2\n",
                 n64, r64);
        ck_assert_int_ge(asprintf(&path, "%s/h.conf", dir), 0);
        tu_write_file(path, text, strlen(text));
        ck_assert_int_eq(config_load(path, false, &c, &err), 0);
        ck_assert_uint_eq(c->n_agents, 1);
        ck_assert_str_eq(c->agents[0].name, n64);
        ck_assert_uint_eq(c->n_remotes, 1);
        ck_assert_str_eq(c->remotes[0].name, r64);
        config_free(c);
        free(path);
        free(dir);

        snprintf(text, sizeof(text), GOOD "[agent %s]\nstate_dir = /a\n", n65);
        err = load_err(text, &path);
        char want[256];
        snprintf(want, sizeof(want), "[agent %s]: '%s' is not a valid agent name", n65, n65);
        assert_line(err, path, 5, want);
        free(err);
        free(path);
}
END_TEST

START_TEST(test_config_missing_settings_all_reported)
{
        char *path, *err = load_err("[agent a]\ndelivery = vox\n[agent b]\ndelivery = act\n",
                                    &path);
        char *want;

        ck_assert_int_ge(asprintf(&want, "%s: [spool] dir is not set\n"
                                         "%s: [agent a] state_dir is not set\n"
                                         "%s: [agent b] state_dir is not set\n"
                                         "%s: no key configured ([keys] default or pubkey_dir, "
                                         "[agent NAME] key or pubkeys)",
                                  path, path, path, path), 0);
        ck_assert_str_eq(err, want);
        free(want);
        free(err);
        free(path);
}
END_TEST

/* The relay's checks of the section as a whole: each problem, not the first. */
START_TEST(test_config_relay_problems_all_reported)
{
        char *path, *err = load_err(GOOD "[agent a]\nstate_dir = /srv/a\n"
                                    "[relay]\nservers = nats://127.0.0.1:4222\nhost = h1\n"
                                    "user = u\ntls_cert = /c.pem\n"
                                    "[remote a]\nhost = h2\n[remote b]\nhost = h1\n", &path);
        char *want;

        ck_assert_int_ge(asprintf(&want, "%s: [remote a]: the agent is also an [agent a] of this host\n"
                                         "%s: [relay] tls_cert and tls_key go together\n"
                                         "%s: [relay] user and password go together\n"
                                         "%s: [remote b] host is this host (h1)",
                                  path, path, path, path), 0);
        ck_assert_str_eq(err, want);
        free(want);
        free(err);
        free(path);
}
END_TEST

START_TEST(test_config_errors_bounded)
{
        size_t cap = 100 * 8 + sizeof(GOOD);
        char *text = malloc(cap), *err;
        size_t n = (size_t)snprintf(text, cap, GOOD);

        for (int i = 0; i < 100; i++)
                n += (size_t)snprintf(text + n, cap - n, "garbage\n");
        err = load_err(text, NULL);
        ck_assert_int_eq(count_lines(err), 21);
        ck_assert_ptr_nonnull(strstr(err, "\n... and 80 more"));
        free(err);
        free(text);
}
END_TEST

/* Every error a single line can have, each at its line: the section's
 * header is line 5 (after GOOD), the key line 6, a second key line 7. */
static const struct { const char *text, *msg; int line; } line_errors[] = {
        { "[spool]\ndir = srv\n", "[spool] dir must be an absolute path", 6 },
        { "[spool]\nfsync = maybe\n", "[spool] fsync: 'maybe' is not yes or no", 6 },
        { "[spool]\nmax_file_size = 10\n",
          "[spool] max_file_size: '10' is not a size between 1K and 64M", 6 },
        { "[spool]\nmax_file_size = 65M\n",
          "[spool] max_file_size: '65M' is not a size between 1K and 64M", 6 },
        { "[spool]\nresume_window = 0\n",
          "[spool] resume_window: '0' is not a duration (like 300, 5m, 1h)", 6 },
        { "[spool]\nmax_clock_skew = 5y\n",
          "[spool] max_clock_skew: '5y' is not a duration (like 300, 5m, 1h)", 6 },
        { "[spool]\nmax_window = 1h30\n",
          "[spool] max_window: '1h30' is not a duration (like 300, 5m, 1h)", 6 },
        { "[spool]\nrescan_interval = -1\n",
          "[spool] rescan_interval: '-1' is not a duration (like 300, 5m, 1h)", 6 },
        { "[spool]\nmax_waiting = -1\n", "[spool] max_waiting: '-1' is not a count", 6 },
        { "[spool]\nmax_waiting_per_sender = lots\n",
          "[spool] max_waiting_per_sender: 'lots' is not a count", 6 },
        { "[spool]\nfrob = 1\n", "unknown key 'frob' in [spool]", 6 },
        { "[keys]\npubkey_dir = pub\n", "[keys] pubkey_dir must be an absolute path", 6 },
        { "[keys]\nk1 = k1.key\n",
          "[keys] k1: 'k1.key' is neither an absolute path nor credential:NAME", 6 },
        { "[keys]\nK 1 = /k/k1.key\n", "[keys] 'K 1' is not a valid key name", 6 },
        { "[keys]\nk1 = /k/a.key\nk1 = /k/b.key\n", "[keys] 'k1' given twice", 7 },
        { "[agent a]\nstate_dir = a\n", "[agent a] state_dir must be an absolute path", 6 },
        { "[agent a]\nkey = a.key\n",
          "[agent a] key: 'a.key' is neither an absolute path nor credential:NAME", 6 },
        { "[agent a]\npubkeys = a.pub\n", "[agent a] pubkeys: 'a.pub' is not an absolute path", 6 },
        { "[agent a]\nrequire = maybe\n", "[agent a] require: 'maybe' is not sig or any", 6 },
        { "[agent a]\ndelivery = fax\n",
          "[agent a] delivery: 'fax' is not bootstrap, vox or act", 6 },
        { "[agent a]\nact_format = pdf\n", "[agent a] act_format: 'pdf' is not xml or md", 6 },
        { "[agent a]\nact_max_files = 0\n",
          "[agent a] act_max_files: '0' is not a number from 1 to 1000", 6 },
        { "[agent a]\nfrob = 1\n", "unknown key 'frob' in [agent a]", 6 },
        { "[agent A]\nstate_dir = /a\n", "[agent A]: 'A' is not a valid agent name", 5 },
        { "[retention]\narchive_max_items = many\n",
          "[retention] archive_max_items: 'many' is not a count", 6 },
        { "[retention]\nrejected_max_items = -1\n",
          "[retention] rejected_max_items: '-1' is not a count", 6 },
        { "[retention]\narchive_max_bytes = lots\n",
          "[retention] archive_max_bytes: 'lots' is not a size (like 10M)", 6 },
        { "[retention]\nrejected_max_bytes = lots\n",
          "[retention] rejected_max_bytes: 'lots' is not a size (like 10M)", 6 },
        { "[retention]\nunclaimed_max_bytes = 1Q\n",
          "[retention] unclaimed_max_bytes: '1Q' is not a size (like 10M)", 6 },
        { "[retention]\nunclaimed_max_items = few\n",
          "[retention] unclaimed_max_items: 'few' is not a count", 6 },
        { "[retention]\narchive_max_age = old\n",
          "[retention] archive_max_age: 'old' is not a duration (like 7d)", 6 },
        { "[retention]\nrejected_max_age = 1x\n",
          "[retention] rejected_max_age: '1x' is not a duration (like 7d)", 6 },
        { "[retention]\nfrob = 1\n", "unknown key 'frob' in [retention]", 6 },
        { "[relay]\nservers = nats://a\x01\n", "[relay] servers: control character in 'nats://a\x01'", 6 },
        { "[relay]\nservers = http://127.0.0.1:4222\n",
          "[relay] servers: 'http://127.0.0.1:4222' is not a NATS server URL "
          "(nats://HOST:PORT, or tls://HOST:PORT)", 6 },
        { "[relay]\nservers = nats://a:1, 127.0.0.1:4222\n",
          "[relay] servers: '127.0.0.1:4222' is not a NATS server URL "
          "(nats://HOST:PORT, or tls://HOST:PORT)", 6 },
        { "[relay]\nservers = nats://\n",
          "[relay] servers: 'nats://' is not a NATS server URL "
          "(nats://HOST:PORT, or tls://HOST:PORT)", 6 },
        { "[relay]\nhost = Host\n",
          "[relay] host: 'Host' is not a valid host name (lowercase letters, digits, '-', '_')", 6 },
        { "[relay]\nstream = a.b\n",
          "[relay] stream: 'a.b' is not a valid stream name (letters, digits, '-', '_')", 6 },
        { "[relay]\nreplicas = 7\n", "[relay] replicas: '7' is not a number from 1 to 5", 6 },
        { "[relay]\ncredentials = c.creds\n", "[relay] credentials must be an absolute path", 6 },
        { "[relay]\nnkey_seed = seed\n", "[relay] nkey_seed must be an absolute path", 6 },
        { "[relay]\ntls_ca = ca.pem\n", "[relay] tls_ca must be an absolute path", 6 },
        { "[relay]\ntls_cert = c.pem\n", "[relay] tls_cert must be an absolute path", 6 },
        { "[relay]\ntls_key = k.pem\n", "[relay] tls_key must be an absolute path", 6 },
        { "[relay]\nfrob = 1\n", "unknown key 'frob' in [relay]", 6 },
        { "[remote B]\nhost = b\n", "[remote B]: 'B' is not a valid agent name", 6 },
        { "[remote b]\nport = 1\n", "unknown key 'port' in [remote b] (did you mean host?)", 6 },
        { "[remote b]\nhost = Host\n", "[remote b] host: 'Host' is not a valid host name", 6 },
        { "[control]\nsocket = c.sock\n", "[control] socket must be an absolute path", 6 },
        { "[metrics]\ntextfile = m.prom\n", "[metrics] textfile must be an absolute path", 6 },
        { "[metrics]\nfrob = 1\n", "unknown key 'frob' in [metrics]", 6 },
        { "[payload]\nroles = ,\n", "[payload] roles: empty list", 6 },
        { "[payload]\nfrob = 1\n", "unknown key 'frob' in [payload]", 6 },
};

START_TEST(test_config_line_error)
{
        char text[512], *path, *err;

        snprintf(text, sizeof(text), GOOD "%s", line_errors[_i].text);
        err = load_err(text, &path);
        ck_assert_msg(err != NULL, "case %d: no error for %s", _i, line_errors[_i].text);
        assert_line(err, path, line_errors[_i].line, line_errors[_i].msg);
        ck_assert_int_eq(count_lines(err), 1);
        free(err);
        free(path);
}
END_TEST

START_TEST(test_config_key_outside_section)
{
        char *path, *err = load_err("dir = /srv\n" GOOD, &path);

        assert_line(err, path, 1, "key 'dir' outside of any section");
        ck_assert_int_eq(count_lines(err), 1);
        free(err);
        free(path);
}
END_TEST

/* What no single line shows: "FILE: message", no line. */
static const struct { const char *text, *msg; } file_errors[] = {
        { "[spool]\nmax_window = 10\nmax_clock_skew = 20\n",
          "[spool] max_window is shorter than max_clock_skew" },
        { "[agent a]\nstate_dir = /a\nrequire = sig\n",
          "[agent a] require = sig, but no public key is configured "
          "(pubkeys = or [keys] pubkey_dir)" },
        { "[agent a]\nstate_dir = /a\n[remote a]\nhost = b\n",
          "[remote a]: the agent is also an [agent a] of this host" },
        { "[relay]\nservers = nats://127.0.0.1:4222\nhost = a\ntls_cert = /c.pem\n",
          "[relay] tls_cert and tls_key go together" },
        { "[relay]\nservers = nats://127.0.0.1:4222\nhost = a\nuser = u\n",
          "[relay] user and password go together" },
        { "[relay]\nservers = nats://127.0.0.1:4222\nhost = a\nnkey = U\n",
          "[relay] nkey and nkey_seed go together" },
        { "[relay]\nservers = nats://127.0.0.1:4222\nhost = a\n[remote b]\nhost = a\n",
          "[remote b] host is this host (a)" },
};

START_TEST(test_config_file_error)
{
        char text[512], *path, *err, *want;

        snprintf(text, sizeof(text), GOOD "%s", file_errors[_i].text);
        err = load_err(text, &path);
        ck_assert_int_ge(asprintf(&want, "%s: %s", path, file_errors[_i].msg), 0);
        ck_assert_msg(err && !strcmp(err, want), "case %d: got '%s', want '%s'", _i,
                      err ? err : "(none)", want);
        free(want);
        free(err);
        free(path);
}
END_TEST

Suite *suite_config_errors(void);
Suite *suite_config_errors(void)
{
        Suite *s = suite_create("config_errors");
        TCase *tc = tcase_create("errors");
        tcase_add_test(tc, test_config_good_has_no_error);
        tcase_add_test(tc, test_config_reports_every_mistake);
        tcase_add_test(tc, test_config_unknown_section_at_header_with_suggestion);
        tcase_add_test(tc, test_config_unknown_section_suggestions);
        tcase_add_test(tc, test_config_syntax_errors_each_with_line);
        tcase_add_test(tc, test_config_long_line_keeps_numbering);
        tcase_add_test(tc, test_config_headers_read_as_inih_reads_them);
        tcase_add_test(tc, test_config_section_names_whole);
        tcase_add_test(tc, test_config_missing_settings_all_reported);
        tcase_add_test(tc, test_config_relay_problems_all_reported);
        tcase_add_test(tc, test_config_errors_bounded);
        tcase_add_loop_test(tc, test_config_line_error, 0,
                            (int)(sizeof(line_errors) / sizeof(line_errors[0])));
        tcase_add_test(tc, test_config_key_outside_section);
        tcase_add_loop_test(tc, test_config_file_error, 0,
                            (int)(sizeof(file_errors) / sizeof(file_errors[0])));
        suite_add_tcase(s, tc);
        return s;
}
