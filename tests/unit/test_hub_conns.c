/* hub_conns.c, handoff-hubd's table of connections, called directly with
 * socketpairs for connections (a cut one reads the end on its peer): the
 * oldest without headers makes room, first from the new one's address
 * when that address has its share; past their headers nothing gives way
 * and the new one is refused; a request not whole by its deadline is
 * cut, an answer being made never; a new request on a connection starts
 * its own deadline and queues behind the others. */
#include <check.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hub.h"

/* what hub_conns.c calls of the rest of the hub */
static unsigned drops[_HUB_DROP_MAX], lines;

void hub_log(const char *fmt, ...)
{
        (void)fmt;
        lines++;
}

void hub_stats_dropped(enum hub_drop why)
{
        drops[why]++;
}

struct peer {
        int ours, theirs;       /* the hub's end, the client's */
        struct hub_conn *c;
};

static void conn_open(struct hub_conns *t, struct peer *p, const char *ip, int64_t now)
{
        struct sockaddr_in sa = { .sin_family = AF_INET };
        int sv[2];

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        p->ours = sv[0];
        p->theirs = sv[1];
        ck_assert_int_eq(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
        ck_assert_int_eq(hub_conns_open(t, p->ours, (struct sockaddr *)&sa, now, &p->c), 0);
        ck_assert_ptr_nonnull(p->c);
}

/* The hub shut it down: its client reads the end. */
static bool is_cut(const struct peer *p)
{
        char b;

        return recv(p->theirs, &b, 1, MSG_DONTWAIT) == 0;
}

static void conn_close(struct hub_conns *t, struct peer *p)
{
        hub_conns_close(t, p->c);
        close(p->ours);
        close(p->theirs);
}

static void reset(void)
{
        for (size_t i = 0; i < _HUB_DROP_MAX; i++)
                drops[i] = 0;
        lines = 0;
}

START_TEST(test_hub_conns_full_table_oldest_without_headers_goes)
{
        struct hub_conns *t;
        struct peer p[6];

        reset();
        ck_assert_int_eq(hub_conns_new(3, 0, 1000000, &t), 0);
        conn_open(t, &p[0], "10.0.0.1", 0);
        conn_open(t, &p[1], "10.0.0.2", 1);
        conn_open(t, &p[2], "10.0.0.3", 2);
        ck_assert_uint_eq(hub_conns_count(t), 3);
        /* full: the oldest goes */
        conn_open(t, &p[3], "10.0.0.4", 3);
        ck_assert(is_cut(&p[0]) && !is_cut(&p[1]) && !is_cut(&p[2]) && !is_cut(&p[3]));
        ck_assert_uint_eq(hub_conns_count(t), 3);
        /* past its headers, the oldest stays: the next oldest goes */
        hub_conns_phase(t, p[1].c, HUB_CONN_BODY, 4);
        conn_open(t, &p[4], "10.0.0.5", 5);
        ck_assert(!is_cut(&p[1]) && is_cut(&p[2]) && !is_cut(&p[3]) && !is_cut(&p[4]));
        /* every one past its headers: the new one is refused */
        hub_conns_phase(t, p[3].c, HUB_CONN_ANSWER, 6);
        hub_conns_phase(t, p[4].c, HUB_CONN_BODY, 6);
        conn_open(t, &p[5], "10.0.0.6", 7);
        ck_assert(is_cut(&p[5]) && !is_cut(&p[1]) && !is_cut(&p[3]) && !is_cut(&p[4]));
        ck_assert_uint_eq(hub_conns_count(t), 3);
        ck_assert_uint_eq(drops[HUB_DROP_FULL], 2);
        ck_assert_uint_eq(drops[HUB_DROP_REFUSED], 1);
        /* one line for the lot (the next only after 10 s) */
        ck_assert_uint_eq(lines, 1);
        /* closed, the cut ones do not count again */
        for (size_t i = 0; i < 6; i++)
                conn_close(t, &p[i]);
        ck_assert_uint_eq(hub_conns_count(t), 0);
        hub_conns_free(t);
}
END_TEST

START_TEST(test_hub_conns_address_share_its_own_oldest_goes)
{
        struct hub_conns *t;
        struct peer p[5];

        reset();
        ck_assert_int_eq(hub_conns_new(10, 2, 1000000, &t), 0);
        conn_open(t, &p[0], "10.0.0.9", 0);
        conn_open(t, &p[1], "10.0.0.1", 1);
        conn_open(t, &p[2], "10.0.0.1", 2);
        /* 10.0.0.1 has its share: its oldest goes, not the oldest of all */
        conn_open(t, &p[3], "10.0.0.1", 3);
        ck_assert(!is_cut(&p[0]) && is_cut(&p[1]) && !is_cut(&p[2]) && !is_cut(&p[3]));
        /* its others past their headers: refused, though the table has room */
        hub_conns_phase(t, p[2].c, HUB_CONN_BODY, 4);
        hub_conns_phase(t, p[3].c, HUB_CONN_BODY, 4);
        conn_open(t, &p[4], "10.0.0.1", 5);
        ck_assert(is_cut(&p[4]) && !is_cut(&p[0]) && !is_cut(&p[2]) && !is_cut(&p[3]));
        ck_assert_uint_eq(drops[HUB_DROP_FULL], 1);
        ck_assert_uint_eq(drops[HUB_DROP_REFUSED], 1);
        ck_assert_uint_eq(hub_conns_count(t), 3);
        for (size_t i = 0; i < 5; i++)
                conn_close(t, &p[i]);
        hub_conns_free(t);
}
END_TEST

START_TEST(test_hub_conns_deadline_headers_and_body_not_answer)
{
        struct hub_conns *t;
        struct peer p[3];

        reset();
        ck_assert_int_eq(hub_conns_new(10, 0, 1000, &t), 0);
        conn_open(t, &p[0], "10.0.0.1", 0);         /* headers never end */
        conn_open(t, &p[1], "10.0.0.2", 100);       /* its body never ends */
        conn_open(t, &p[2], "10.0.0.3", 100);       /* answered slowly */
        hub_conns_phase(t, p[1].c, HUB_CONN_BODY, 200);
        hub_conns_phase(t, p[2].c, HUB_CONN_BODY, 200);
        hub_conns_phase(t, p[2].c, HUB_CONN_ANSWER, 300);
        ck_assert_int_eq(hub_conns_tick(t, 999), 1000);
        ck_assert(!is_cut(&p[0]) && !is_cut(&p[1]));
        ck_assert_int_eq(hub_conns_tick(t, 1000), 1100);
        ck_assert(is_cut(&p[0]) && !is_cut(&p[1]));
        ck_assert_int_eq(hub_conns_tick(t, 5000), INT64_MAX);
        ck_assert(is_cut(&p[1]) && !is_cut(&p[2]));
        ck_assert_uint_eq(drops[HUB_DROP_DEADLINE], 2);
        ck_assert_uint_eq(hub_conns_count(t), 1);
        /* answered: a next request on it has its own deadline */
        hub_conns_phase(t, p[2].c, HUB_CONN_HEAD, 6000);
        ck_assert_int_eq(hub_conns_tick(t, 6999), 7000);
        ck_assert(!is_cut(&p[2]));
        ck_assert_int_eq(hub_conns_tick(t, 7000), INT64_MAX);
        ck_assert(is_cut(&p[2]));
        for (size_t i = 0; i < 3; i++)
                conn_close(t, &p[i]);
        hub_conns_free(t);
}
END_TEST

START_TEST(test_hub_conns_next_request_queues_behind)
{
        struct hub_conns *t;
        struct peer p[4];

        reset();
        ck_assert_int_eq(hub_conns_new(3, 0, 1000000, &t), 0);
        conn_open(t, &p[0], "10.0.0.1", 0);
        conn_open(t, &p[1], "10.0.0.2", 1);
        conn_open(t, &p[2], "10.0.0.3", 2);
        /* the oldest connection answered one request and waits for the
         * next: it waits for headers since 3, the newest of them */
        hub_conns_phase(t, p[0].c, HUB_CONN_BODY, 3);
        hub_conns_phase(t, p[0].c, HUB_CONN_ANSWER, 3);
        hub_conns_phase(t, p[0].c, HUB_CONN_HEAD, 3);
        conn_open(t, &p[3], "10.0.0.4", 4);
        ck_assert(!is_cut(&p[0]) && is_cut(&p[1]) && !is_cut(&p[2]) && !is_cut(&p[3]));
        for (size_t i = 0; i < 4; i++)
                conn_close(t, &p[i]);
        hub_conns_free(t);
}
END_TEST

Suite *suite_hub_conns(void);
Suite *suite_hub_conns(void)
{
        Suite *s = suite_create("hub_conns");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_hub_conns_full_table_oldest_without_headers_goes);
        tcase_add_test(tc, test_hub_conns_address_share_its_own_oldest_goes);
        tcase_add_test(tc, test_hub_conns_deadline_headers_and_body_not_answer);
        tcase_add_test(tc, test_hub_conns_next_request_queues_behind);
        suite_add_tcase(s, tc);
        return s;
}
