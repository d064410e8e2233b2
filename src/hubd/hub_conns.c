/* The hub's table of connections, kept beside libmicrohttpd's: a deadline
 * for a request to arrive whole, and room made when the table is full.
 *
 * libmicrohttpd counts only silence (its timeout starts again at every
 * byte) and, at its limits, refuses the new connection: clients sending a
 * header byte every few seconds held every slot for as long as they
 * liked.  Here, as the daemon's control socket does (control.c), a new
 * connection is always taken and the oldest one that has not sent its
 * headers makes room: one of its own address's when that address has its
 * share, else one of all when the table is full; when every connection in
 * the way is past its headers (a token was checked, a body is coming or
 * an answer is being made), the new one is refused.  A request that has
 * not arrived whole, headers and body, request_timeout after its
 * connection (or the end of the previous request on it) is cut.
 *
 * A connection is closed from outside by shutting its socket down:
 * libmicrohttpd reads the end and closes it itself.  Its descriptor is
 * open while its entry is here, since libmicrohttpd says it closed
 * (hub_conns_close, under the lock) before it closes the descriptor. */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "hub.h"

#define CONNS_LOG_EVERY_USEC (10 * 1000000LL)
#define CONNS_LINE_MAX 384
#define CONNS_TRIM_AFTER 32     /* closed, at least, for a malloc_trim() */

struct hub_conn {
        struct hub_conn *prev, *next;   /* by when its request began */
        int fd;
        bool has_addr;                  /* not on a unix socket */
        unsigned char addr[16];         /* IPv4 as ::ffff:a.b.c.d */
        enum hub_conn_phase phase;
        int64_t deadline;               /* HEAD, BODY: cut at (monotonic usec) */
        bool cut;                       /* shut down here, not yet closed */
};

struct hub_conns {
        pthread_mutex_t lock;
        struct hub_conn *oldest, *newest;
        unsigned n;                     /* open, not cut */
        unsigned max, max_per_address;  /* max_per_address 0: no share */
        int64_t limit;                  /* request_timeout, usec */
        /* a line for drops and one for deadlines, each at most once per
         * CONNS_LOG_EVERY_USEC: whoever can connect must not fill the
         * journal */
        int64_t drop_logged, deadline_logged;
        unsigned quiet_dropped, quiet_refused, quiet_deadline;
        /* open (cut too), the most of them and how many closed since the
         * last malloc_trim() */
        unsigned open, peak, closed;
};

int hub_conns_new(unsigned max, unsigned max_per_address, int64_t limit_usec,
                  struct hub_conns **ret)
{
        struct hub_conns *t = calloc(1, sizeof(*t));

        if (!t)
                return -ENOMEM;
        pthread_mutex_init(&t->lock, NULL);
        t->max = max;
        t->max_per_address = max_per_address;
        t->limit = limit_usec;
        *ret = t;
        return 0;
}

void hub_conns_free(struct hub_conns *t)
{
        if (!t)
                return;
        while (t->oldest) {
                struct hub_conn *c = t->oldest;
                t->oldest = c->next;
                free(c);
        }
        pthread_mutex_destroy(&t->lock);
        free(t);
}

static void addr_key(const struct sockaddr *sa, struct hub_conn *c)
{
        c->has_addr = false;
        if (sa && sa->sa_family == AF_INET) {
                memset(c->addr, 0, 10);
                c->addr[10] = c->addr[11] = 0xff;
                memcpy(c->addr + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
                c->has_addr = true;
        } else if (sa && sa->sa_family == AF_INET6) {
                memcpy(c->addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
                c->has_addr = true;
        }
}

static const char *addr_text(const struct hub_conn *c, char *buf, size_t n)
{
        static const unsigned char mapped[12] = { [10] = 0xff, [11] = 0xff };

        if (!c->has_addr)
                return "unix";
        if (!memcmp(c->addr, mapped, sizeof(mapped)))
                return inet_ntop(AF_INET, c->addr + 12, buf, (socklen_t)n);
        return inet_ntop(AF_INET6, c->addr, buf, (socklen_t)n);
}

static bool same_addr(const struct hub_conn *a, const struct hub_conn *b)
{
        return a->has_addr && b->has_addr && !memcmp(a->addr, b->addr, 16);
}

static void unlink_conn(struct hub_conns *t, struct hub_conn *c)
{
        if (c->prev)
                c->prev->next = c->next;
        else
                t->oldest = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                t->newest = c->prev;
        c->prev = c->next = NULL;
}

static void append_conn(struct hub_conns *t, struct hub_conn *c)
{
        c->prev = t->newest;
        c->next = NULL;
        if (t->newest)
                t->newest->next = c;
        else
                t->oldest = c;
        t->newest = c;
}

static void cut(struct hub_conns *t, struct hub_conn *c)
{
        /* the peer reads the end; libmicrohttpd reads it too and closes */
        shutdown(c->fd, SHUT_RDWR);
        c->cut = true;
        t->n--;
}

/* What was dropped or refused to make room counted; the line for it into
 * line (else "") at most once per CONNS_LOG_EVERY_USEC, with the counts
 * since the last one, to be logged once the lock is let go. */
static void log_drop(struct hub_conns *t, const struct hub_conn *c, bool refused,
                     unsigned mine, int64_t now, char *line, size_t n)
{
        char a[INET6_ADDRSTRLEN];

        if (refused) {
                t->quiet_refused++;
                hub_stats_dropped(HUB_DROP_REFUSED);
        } else {
                t->quiet_dropped++;
                hub_stats_dropped(HUB_DROP_FULL);
        }
        if (t->drop_logged && now - t->drop_logged < CONNS_LOG_EVERY_USEC)
                return;
        t->drop_logged = now;
        snprintf(line, n, "connections: %u oldest connection(s) without their headers dropped to "
                 "make room, %u new one(s) refused (all in the way past their headers), since "
                 "the last such line; the last for %s (%u open, %u from it; max_connections %u, "
                 "max_per_address %u)", t->quiet_dropped, t->quiet_refused,
                 addr_text(c, a, sizeof(a)), t->n, mine, t->max, t->max_per_address);
        t->quiet_dropped = t->quiet_refused = 0;
}

/* Room for c (not in the table yet): true when there is or was made.
 * line as log_drop() fills it. */
static bool make_room(struct hub_conns *t, struct hub_conn *c, int64_t now, char *line,
                      size_t n)
{
        struct hub_conn *p, *victim = NULL;
        unsigned mine = 0;
        bool share;

        if (c->has_addr && t->max_per_address)
                for (p = t->oldest; p; p = p->next)
                        if (!p->cut && same_addr(p, c))
                                mine++;
        share = c->has_addr && t->max_per_address && mine >= t->max_per_address;
        if (!share && t->n < t->max)
                return true;
        for (p = t->oldest; p && !victim; p = p->next)
                if (!p->cut && p->phase == HUB_CONN_HEAD && (!share || same_addr(p, c)))
                        victim = p;
        if (victim)
                cut(t, victim);
        log_drop(t, c, !victim, mine, now, line, n);
        return victim != NULL;
}

int hub_conns_open(struct hub_conns *t, int fd, const struct sockaddr *sa, int64_t now,
                   struct hub_conn **ret)
{
        struct hub_conn *c = calloc(1, sizeof(*c));
        char line[CONNS_LINE_MAX] = "";
        bool room;

        if (!c) {
                shutdown(fd, SHUT_RDWR);
                return -ENOMEM;
        }
        c->fd = fd;
        addr_key(sa, c);
        c->phase = HUB_CONN_HEAD;
        c->deadline = now + t->limit;
        pthread_mutex_lock(&t->lock);
        room = make_room(t, c, now, line, sizeof(line));
        append_conn(t, c);
        t->n++;
        if (++t->open > t->peak)
                t->peak = t->open;
        /* refused: kept all the same until libmicrohttpd has closed it */
        if (!room)
                cut(t, c);
        pthread_mutex_unlock(&t->lock);
        /* not under the lock: a slow log must not hold the other threads */
        if (line[0])
                hub_log("%s", line);
        *ret = c;
        return 0;
}

void hub_conns_phase(struct hub_conns *t, struct hub_conn *c, enum hub_conn_phase phase,
                     int64_t now)
{
        if (!c)
                return;
        pthread_mutex_lock(&t->lock);
        /* a new request on the connection: its own deadline, and the
         * newest of those waiting for headers */
        if (phase == HUB_CONN_HEAD && c->phase != HUB_CONN_HEAD) {
                c->deadline = now + t->limit;
                unlink_conn(t, c);
                append_conn(t, c);
        }
        c->phase = phase;
        pthread_mutex_unlock(&t->lock);
}

void hub_conns_close(struct hub_conns *t, struct hub_conn *c)
{
        bool trim;

        if (!c)
                return;
        pthread_mutex_lock(&t->lock);
        unlink_conn(t, c);
        if (!c->cut)
                t->n--;
        t->open--;
        t->closed++;
        /* Many closed, and half of those open or more: malloc keeps what
         * they freed (the heap in pieces between what stays), so 1,000
         * streams closed left the hub at 34 MB, not the 14 it had before
         * them.  Not while the number holds: a trim walks the heap. */
        trim = t->closed >= CONNS_TRIM_AFTER && t->open <= t->peak / 2;
        if (trim) {
                t->peak = t->open;
                t->closed = 0;
        }
        pthread_mutex_unlock(&t->lock);
        free(c);
        if (trim)
                malloc_trim(0);
}

int64_t hub_conns_tick(struct hub_conns *t, int64_t now)
{
        int64_t next = INT64_MAX;
        struct hub_conn *last = NULL;
        char a[INET6_ADDRSTRLEN], line[CONNS_LINE_MAX] = "";
        unsigned n = 0;

        pthread_mutex_lock(&t->lock);
        for (struct hub_conn *c = t->oldest; c; c = c->next) {
                if (c->cut || c->phase == HUB_CONN_ANSWER)
                        continue;
                if (c->deadline > now) {
                        if (c->deadline < next)
                                next = c->deadline;
                        continue;
                }
                cut(t, c);
                hub_stats_dropped(HUB_DROP_DEADLINE);
                last = c;
                n++;
        }
        t->quiet_deadline += n;
        if (n && (!t->deadline_logged || now - t->deadline_logged >= CONNS_LOG_EVERY_USEC)) {
                t->deadline_logged = now;
                snprintf(line, sizeof(line), "connections: %u closed whose request had not "
                         "arrived whole within request_timeout (%llds) since the last such "
                         "line; the last from %s", t->quiet_deadline,
                         (long long)(t->limit / 1000000), addr_text(last, a, sizeof(a)));
                t->quiet_deadline = 0;
        }
        pthread_mutex_unlock(&t->lock);
        if (line[0])
                hub_log("%s", line);
        return next;
}

unsigned hub_conns_count(struct hub_conns *t)
{
        unsigned n;

        pthread_mutex_lock(&t->lock);
        n = t->n;
        pthread_mutex_unlock(&t->lock);
        return n;
}
