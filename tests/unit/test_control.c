/* control_handle() (src/handoffd/control.c), the daemon's answer to one
 * control-socket request, called directly on a temp spool opened as the
 * daemon opens it: status with figures that match the spool, ping, and
 * every kind of bad request answered with ok false and a reason. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control.h"
#include "daemonfx.h"
#include "intake.h"
#include "testutil.h"

/* The answer to req, parsed. */
static json_t *ask(struct fx *f, const char *req, size_t len)
{
        char *out = NULL;
        json_t *o;

        static const unsigned char digest[32];
        struct control_config cc = { .path = "/x/h.conf", .digest = digest };
        ck_assert_int_eq(control_handle(&f->p, &cc, req, len, &out), 0);
        ck_assert_ptr_nonnull(out);
        o = json_loads(out, 0, NULL);
        ck_assert_msg(o != NULL, "not JSON: %s", out);
        free(out);
        return o;
}

static void assert_refused(struct fx *f, const char *req, size_t len, const char *error_part)
{
        json_t *o = ask(f, req, len);

        ck_assert(json_is_false(json_object_get(o, "ok")));
        ck_assert_msg(strstr(json_string_value(json_object_get(o, "error")) ?: "", error_part),
                      "error %s, want %s", json_string_value(json_object_get(o, "error")), error_part);
        json_decref(o);
}

START_TEST(test_control_status_counts_what_happened)
{
        struct fx f;
        char *names[1] = { "drop.json" };
        json_t *o, *c;

        fx_open(&f);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "drop.json", fx_doc("c-1", "alice", 10, 600, f.k));
        ck_assert_int_eq(intake_batch(&f.p, names, 1, hd_now_usec(), NULL), 0);
        o = ask(&f, "{\"command\":\"status\"}\n", 21);
        ck_assert(json_is_true(json_object_get(o, "ok")));
        c = json_object_get(o, "counters");
        ck_assert_int_eq(json_integer_value(json_object_get(c, "claimed")), 1);
        ck_assert_int_eq(json_integer_value(json_object_get(c, "delivered")), 1);
        ck_assert(json_is_null(json_object_get(o, "last_error_age_s")));
        json_decref(o);
        o = ask(&f, "{\"command\":\"ping\"}", 18);
        ck_assert(json_is_true(json_object_get(o, "ok")));
        json_decref(o);
        fx_close(&f);
}
END_TEST

START_TEST(test_control_refuses_bad_requests)
{
        struct fx f;
        char *big = malloc(CONTROL_REQUEST_MAX + 64);

        fx_open(&f);
        assert_refused(&f, "{\"command\":\"reboot\"}", 20, "unknown command");
        assert_refused(&f, "{\"cmd\":\"status\"}", 16, "no \"command\"");
        assert_refused(&f, "{\"command\":7}", 13, "no \"command\"");
        assert_refused(&f, "{\"command\":", 11, "");
        assert_refused(&f, "", 0, "");
        assert_refused(&f, "{\"command\":\"status\",\"command\":\"ping\"}", 37, "");
        /* over the request limit: refused, not read further */
        memset(big, ' ', CONTROL_REQUEST_MAX + 63);
        memcpy(big, "{\"command\":\"status\"", 19);
        big[CONTROL_REQUEST_MAX + 62] = '}';
        assert_refused(&f, big, CONTROL_REQUEST_MAX + 63, "");
        free(big);
        fx_close(&f);
}
END_TEST

/* The limit itself: a request of exactly CONTROL_REQUEST_MAX bytes is
 * answered, one byte more is refused. */
START_TEST(test_control_request_at_the_limit)
{
        struct fx f;
        size_t n = CONTROL_REQUEST_MAX;
        char *req = malloc(n + 1);
        json_t *o;

        fx_open(&f);
        memset(req, ' ', n + 1);
        memcpy(req, "{\"command\":\"ping\"", 17);
        req[n - 1] = '}';
        o = ask(&f, req, n);
        ck_assert(json_is_true(json_object_get(o, "ok")));
        json_decref(o);
        req[n - 1] = ' ';
        req[n] = '}';
        assert_refused(&f, req, n + 1, "");
        free(req);
        fx_close(&f);
}
END_TEST

/* Root and the daemon's own user may talk to it; another uid only as a
 * member of [control] group. */
START_TEST(test_control_peer_allowed)
{
        gid_t none[] = { 12345 };
        uid_t stranger = geteuid() == 0 ? 4242 : geteuid() + 1;

        ck_assert_int_eq(control_peer_allowed(0, NULL, 0, NULL), 1);
        ck_assert_int_eq(control_peer_allowed(geteuid(), NULL, 0, NULL), 1);
        ck_assert_int_eq(control_peer_allowed(stranger, none, 1, NULL), 0);
        ck_assert_int_eq(control_peer_allowed(stranger, none, 1, "no-such-group-hd"), 0);
}
END_TEST

/* The agent commands (control_agent.c) are done only for a peer that may
 * act for agents: root, the daemon's user, [control] hub_user. */
START_TEST(test_control_agent_commands_need_the_hub_user)
{
        static const unsigned char digest[32];
        struct control_config cc = { .path = "/x/h.conf", .digest = digest };
        uid_t stranger = geteuid() == 0 ? 4242 : geteuid() + 1;
        char *names[1] = { "drop.json" }, *out = NULL, uid[32];
        const char *take = "{\"command\":\"take\",\"agent\":\"alice\"}";
        struct config *cfg;
        struct fx f;
        json_t *o;

        fx_open(&f);
        cfg = f.p.sp->cfg;
        fx_put_doc(f.sp->fd[SD_HANDOFF], "drop.json", fx_doc("c-1", "alice", 10, 600, f.k));
        ck_assert_int_eq(intake_batch(&f.p, names, 1, hd_now_usec(), NULL), 0);
        assert_refused(&f, take, strlen(take), "hub_user");
        assert_refused(&f, "{\"command\":\"inbox\",\"agent\":\"alice\"}", 35, "hub_user");

        ck_assert(!control_agent_peer(cfg, stranger));
        snprintf(uid, sizeof(uid), "%u", (unsigned)stranger);
        cfg->control_hub_user = strdup(uid);
        ck_assert(control_agent_peer(cfg, stranger));
        ck_assert(!control_agent_peer(cfg, stranger + 1));

        ck_assert_int_eq(control_handle_peer(&f.p, &cc, "{\"command\":\"inbox\",\"agent\":\"alice\"}",
                                             35, true, &out), 0);
        o = json_loads(out, 0, NULL);
        free(out);
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(
                json_object_get(o, "handoffs"), 0), "handoff_id")), "c-1");
        json_decref(o);
        ck_assert_int_eq(control_handle_peer(&f.p, &cc, "{\"command\":\"take\",\"agent\":\"zed\"}",
                                             32, true, &out), 0);
        ck_assert_ptr_nonnull(strstr(out, "not an agent of this daemon"));
        free(out);
        ck_assert_int_eq(control_handle_peer(&f.p, &cc, take, strlen(take), true, &out), 0);
        o = json_loads(out, 0, NULL);
        free(out);
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "bootstrap"),
                                                           "handoff_id")), "c-1");
        json_decref(o);
        fx_close(&f);
}
END_TEST

Suite *suite_control(void);
Suite *suite_control(void)
{
        Suite *s = suite_create("control");
        TCase *tc = tcase_create("handle");
        tcase_add_test(tc, test_control_status_counts_what_happened);
        tcase_add_test(tc, test_control_refuses_bad_requests);
        tcase_add_test(tc, test_control_request_at_the_limit);
        tcase_add_test(tc, test_control_peer_allowed);
        tcase_add_test(tc, test_control_agent_commands_need_the_hub_user);
        suite_add_tcase(s, tc);
        return s;
}
