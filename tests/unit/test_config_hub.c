/* handoffd.conf [hub] (read by handoff-hubd): values parsed, bad ones
 * reported on their line, the daemon's reader takes the section too. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "testutil.h"

static int load(const char *text, struct config **ret, char **err, char **path_ret)
{
        char *dir = tu_tmpdir(), *path;
        int r;

        ck_assert_int_ge(asprintf(&path, "%s/h.conf", dir), 0);
        tu_write_file(path, text, strlen(text));
        r = config_load(path, false, ret, err);
        free(dir);
        *path_ret = path;
        return r;
}

#define BASE "[spool]\ndir = /tmp/x\n\n[keys]\ndefault = /tmp/x.key\n\n[hub]\n"

START_TEST(test_config_hub_values)
{
        struct config *c = NULL;
        char *err = NULL, *path;

        int r = load(BASE "listen = [::1]:8443\ntls_cert = /etc/h.crt\n"
                     "tls_key = credential:hub.key\ntoken_dir = credential:\n"
                     "state_dir = /var/lib/h\ntimeout = 1m\nmax_connections = 100\n"
                     "max_per_address = 7\nrequest_timeout = 45s\nrate_per_token = 0\n"
                     "burst_per_token = 9\nmax_requests_per_token = 3\n"
                     "max_waits_per_token = 11\n"
                     "mcp_origins = https://a.example, https://b.example\n"
                     "mcp_sessions_per_token = 5\nmcp_session_idle = 2m\n", &c, &err, &path);

        ck_assert_msg(r == 0, "config_load: %d: %s", r, err ? err : "");
        ck_assert_str_eq(c->hub.listen, "[::1]:8443");
        ck_assert_str_eq(c->hub.tls_cert, "/etc/h.crt");
        ck_assert_str_eq(c->hub.tls_key, "credential:hub.key");
        ck_assert_str_eq(c->hub.token_dir, "credential:");
        ck_assert_str_eq(c->hub.state_dir, "/var/lib/h");
        ck_assert_int_eq(c->hub.timeout, 60);
        ck_assert_int_eq(c->hub.max_connections, 100);
        ck_assert_int_eq(c->hub.max_per_address, 7);
        ck_assert_int_eq(c->hub.request_timeout, 45);
        ck_assert_int_eq(c->hub.rate_per_token, 0);
        ck_assert_int_eq(c->hub.burst_per_token, 9);
        ck_assert_int_eq(c->hub.max_requests_per_token, 3);
        ck_assert_int_eq(c->hub.max_waits_per_token, 11);
        ck_assert_str_eq(c->hub.mcp_origins, "https://a.example, https://b.example");
        ck_assert_int_eq(c->hub.mcp_sessions_per_token, 5);
        ck_assert_int_eq(c->hub.mcp_session_idle, 120);
        config_free(c);
        free(path);
}
END_TEST

START_TEST(test_config_hub_bad_values_each_reported)
{
        struct config *c = NULL;
        char *err = NULL, *path, *want;
        static const char *const msgs[] = {
                "[hub] listen: 'unix:rel': unix: needs an absolute path",
                "[hub] tls_key: 'key.pem' is neither an absolute path nor credential:NAME",
                "[hub] token_dir must be an absolute path or credential:",
                "[hub] timeout: '0' is not a duration from 1s to 1h",
                "[hub] max_per_address: '0' is not a number from 1 to 65536",
                "unknown key 'port' in [hub]",
                "[hub] request_timeout: '2h' is not a duration from 1s to 1h",
                "[hub] rate_per_token: '-1' is not a number from 0 to 65536",
                "[hub] max_waits_per_token: '0' is not a number from 1 to 65536",
                "[hub] mcp_sessions_per_token: '0' is not a number from 1 to 1024",
                "[hub] mcp_session_idle: '0' is not a duration of 1s to 24h",
        };

        ck_assert_int_lt(load(BASE "listen = unix:rel\ntls_key = key.pem\ntoken_dir = tokens\n"
                              "timeout = 0\nmax_per_address = 0\nport = 1\n"
                              "request_timeout = 2h\nrate_per_token = -1\n"
                              "max_waits_per_token = 0\nmcp_sessions_per_token = 0\n"
                              "mcp_session_idle = 0\n", &c, &err, &path), 0);
        ck_assert_ptr_null(c);
        for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
                ck_assert_int_ge(asprintf(&want, "%s:%zu: %s", path, i + 8, msgs[i]), 0);
                ck_assert_msg(strstr(err, want), "no '%s' in:\n%s", want, err);
                free(want);
        }
        free(err);
        free(path);
}
END_TEST

Suite *suite_config_hub(void);
Suite *suite_config_hub(void)
{
        Suite *s = suite_create("config_hub");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_config_hub_values);
        tcase_add_test(tc, test_config_hub_bad_values_each_reported);
        suite_add_tcase(s, tc);
        return s;
}
