/* handoffctl status: the daemon (over its control socket) and the spool
 * (read directly, so it works when the daemon is down).
 *
 * Exit: 0 running and healthy; 1 running but degraded (watch lost, a recent
 * error, a backlog older than its window, a claimed item past its resume
 * window, an A2A remote failing with handoffs waiting); 2 usage or config error; 3 not running; 4 the control socket
 * refused us (whether the daemon runs is unknown). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "handoffctl.h"
#include "items.h"
#include "util.h"

/* An error this recent makes the daemon "degraded". */
#define RECENT_ERROR_S 300
/* How long status waits for the daemon: connect, request and answer each. */
#define STATUS_TIMEOUT_S 5

static void status_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl status [-c CONF] [--json]\n"
                "\n"
                "Whether handoffd runs and what its spool holds: counts per state,\n"
                "pending per target agent, the oldest pending and claimed items,\n"
                "the daemon's counters since start and its last error.\n"
                "\n"
                CTL_USAGE_CONFIG_JSON
                "\n"
                "Exit: 0 running and healthy, 1 running but degraded, 2 usage,\n"
                "3 not running, 4 the control socket refused this user.\n",
                CONFIG_DEFAULT_PATH);
}

/* connect() to the control socket within STATUS_TIMEOUT_S.  A blocking
 * connect to a Unix socket whose listen backlog is full waits for room up
 * to SO_SNDTIMEO, then fails EAGAIN; under a connection flood the daemon
 * still accepts (the oldest connection makes room), so the operator's
 * status tries again until the deadline rather than report "not running". */
static int status_connect(int fd, const struct sockaddr_un *sa)
{
        struct timespec end, now;

        clock_gettime(CLOCK_MONOTONIC, &end);
        end.tv_sec += STATUS_TIMEOUT_S;
        for (;;) {
                if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
                        return 0;
                if (errno != EAGAIN && errno != EINTR)
                        return -1;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec > end.tv_sec ||
                    (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec)) {
                        errno = EAGAIN;
                        return -1;
                }
                long left_ns = (end.tv_sec - now.tv_sec) * 1000000000L + (end.tv_nsec - now.tv_nsec);
                struct timeval tv = { .tv_sec = left_ns / 1000000000L,
                                      .tv_usec = left_ns % 1000000000L / 1000 };
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        }
}

/* The daemon's answer, or NULL: *refused then says whether a daemon
 * is there but would not answer us (the socket's mode denied the connect,
 * or the daemon closed it unanswered: not root, not its user, not in
 * [control] group) rather than nobody listening. */
static json_t *ask_daemon(const char *path, bool *refused)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = STATUS_TIMEOUT_S };
        static const char req[] = "{\"command\":\"status\"}\n";
        size_t cap = 1 << 20, len = 0;
        _cleanup_free_ char *buf = malloc(cap);
        json_t *j;
        int fd;

        if (!buf || strlen(path) >= sizeof(sa.sun_path))
                return NULL;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return NULL;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (status_connect(fd, &sa) < 0) {
                *refused = errno == EACCES || errno == EPERM;
                close(fd);
                return NULL;
        }
        /* no SIGPIPE from a daemon that closed on us: that is a refusal */
        if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) - 1)) {
                *refused = true;
                close(fd);
                return NULL;
        }
        for (;;) {
                ssize_t n = read(fd, buf + len, cap - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
                if (len == cap - 1)
                        break;
        }
        close(fd);
        if (len == 0)
                *refused = true;        /* accepted, then closed unanswered */
        j = json_loadb(buf, len, 0, NULL);
        if (j && !json_is_true(json_object_get(j, "ok"))) {
                json_decref(j);
                return NULL;
        }
        return j;
}

/* The relay's part of the daemon's answer (relay.c), when it has one. */
static void print_relay(json_t *rl)
{
#define I(k) ((long long)json_integer_value(json_object_get(rl, k)))
#define S(k) json_string_value(json_object_get(rl, k))
        if (!rl)
                return;
        if (json_is_true(json_object_get(rl, "connected")))
                printf("relay: connected to %s, host %s, stream %s%s\n", S("server"), S("host"),
                       S("stream"), json_is_true(json_object_get(rl, "ready")) ? "" : " (setting up)");
        else
                printf("relay: NOT connected, host %s, stream %s\n", S("host"), S("stream"));
        printf("  outbox %lld", I("outbox"));
        if (json_is_integer(json_object_get(rl, "outbox_oldest_s")))
                printf(" (oldest %llds)", I("outbox_oldest_s"));
        printf(", relayed %lld, received %lld, duplicates %lld, publish errors %lld\n",
               I("relayed"), I("received"), I("duplicates"), I("publish_errors"));
        json_t *rc = json_object_get(rl, "receipts");
#define R(k) ((long long)json_integer_value(json_object_get(rc, k)))
        /* the sending half (this host owes them) and the accepting half */
        if (rc)
                printf("  receipts: sending %s: owed %lld, queued %lld, sent %lld; accepting %s: "
                       "awaited %lld, applied %lld, duplicates %lld, dropped %lld\n",
                       json_is_true(json_object_get(rc, "sending")) ? "on" : "off", R("owed"),
                       R("queued"), R("sent"),
                       json_is_true(json_object_get(rc, "accepting")) ? "on" : "off", R("awaited"),
                       R("applied"), R("duplicate"), R("dropped"));
#undef R
        if (S("last_error"))
                printf("  last relay error (%llds ago): %s\n", I("last_error_age_s"), esc_line(S("last_error")));
#undef I
#undef S
}

static const char *fmt_span(json_int_t s, char *buf, size_t n);

/* The A2A sender retries an item at least each 60 s (a2a_item.h): a
 * remote still failing has an error newer than twice that. */
#define A2A_FAILING_S 120

/* Whether A2A remote r of the daemon's "a2a" (a2a_out.c) is failing:
 * items wait for it and its helper is down or its last error is fresh.
 * An error with nothing waiting is history, not a problem. */
static bool a2a_failing(const json_t *r)
{
        const json_t *age = json_object_get(r, "last_error_age_s");

        /* one removed in a reload has no helper on purpose */
        if (json_integer_value(json_object_get(r, "waiting")) <= 0 ||
            !json_string_value(json_object_get(r, "url")))
                return false;
        if (!json_is_true(json_object_get(r, "helper_running")))
                return true;
        return json_string_value(json_object_get(r, "last_error")) && json_is_integer(age) &&
               json_integer_value(age) <= A2A_FAILING_S;
}

/* The A2A remotes' part of the daemon's answer, one line each. */
static void print_a2a(json_t *a2a)
{
        json_t *r;
        const char *name;
        char span[64];

        if (!a2a)
                return;
        printf("a2a: sent %lld, finished %lld, rejected %lld, expired_unsent %lld, retries %lld\n",
               (long long)json_integer_value(json_object_get(a2a, "sent")),
               (long long)json_integer_value(json_object_get(a2a, "finished")),
               (long long)json_integer_value(json_object_get(a2a, "rejected")),
               (long long)json_integer_value(json_object_get(a2a, "expired_unsent")),
               (long long)json_integer_value(json_object_get(a2a, "retries")));
        json_object_foreach(json_object_get(a2a, "remotes"), name, r) {
                const char *url = json_string_value(json_object_get(r, "url"));
                const char *err = json_string_value(json_object_get(r, "last_error"));
                bool failing = a2a_failing(r);

                printf("  a2a remote %s (%s): %s, waiting %lld, in flight %lld (sent, task followed)",
                       esc_line(name), url ? esc_line(url) : "removed in a reload",
                       failing ? "NOT reachable"
                       : !url ? "no helper"
                       : json_is_true(json_object_get(r, "helper_running")) ? "reachable"
                                                                            : "helper restarting",
                       (long long)json_integer_value(json_object_get(r, "waiting")),
                       (long long)json_integer_value(json_object_get(r, "following")));
                if (err)
                        printf(", last error %s ago: %s",
                               fmt_span(json_integer_value(json_object_get(r, "last_error_age_s")),
                                        span, sizeof(span)), esc_line(err));
                printf("\n");
        }
}

/* The hub's figures (handoff-hubd writes them to its state_dir while it
 * runs, removes them at a clean stop), when [hub] is set; NULL when not
 * (or out of memory).
 * Only the known figures are taken from the file, none of its text but
 * the listening address, which is printed escaped. */
#define HUB_FIGURES_STALE_S 60
static json_t *hub_status(const struct config *cfg, json_t *problems)
{
        const char *dir = cfg->hub.state_dir ?: CONFIG_HUB_STATE_DIR_DEFAULT;
        static const char *const ints[] = { "pid", "tokens", "requests_total", "accepted",
                                            "repeated", "auth_failed" };
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *f = NULL;
        char path[PATH_MAX];
        size_t len;
        hd_verdict v;
        json_t *o;
        int r;

        if (!cfg->hub.listen && !cfg->hub.token_dir && !cfg->hub.state_dir)
                return NULL;
        if (xsnprintf(path, sizeof(path), "%s/%s", dir, CONFIG_HUB_STATUS_FILE) < 0)
                return NULL;
        o = json_pack("{s:s}", "figures", path);
        if (!o)
                return NULL;
        r = hd_read_at(AT_FDCWD, path, 64 * 1024, &buf, &len, &v);
        if (r == -ENOENT) {
                json_object_set_new(o, "running", json_false());
                return o;
        }
        f = r < 0 ? NULL : json_loadb(buf, len, 0, NULL);
        pid_t pid = (pid_t)json_integer_value(json_object_get(f, "pid"));
        if (!json_is_object(f) || pid <= 0) {
                /* whether it runs is not known: said, not guessed */
                json_object_set_new(o, "running", json_null());
                json_object_set_new(o, "error", r < 0 ? json_sprintf("cannot read %s: %s", path,
                                                                     strerror(-r))
                                                      : json_sprintf("%s is not the hub's figures", path));
                /* not this user's to read (not in the hub's group): no
                 * problem of the hub's */
                if (r != -EACCES && r != -EPERM)
                        json_array_append_new(problems, json_sprintf("the hub's figures: %s",
                                              json_string_value(json_object_get(o, "error"))));
                return o;
        }
        /* its pid gone: SIGKILLed, or stopped without removing them */
        if (kill(pid, 0) < 0 && errno == ESRCH) {
                json_object_set_new(o, "running", json_false());
                return o;
        }
        int64_t now = time(NULL);
        json_object_set_new(o, "running", json_true());
        for (size_t i = 0; i < ELEMENTSOF(ints); i++)
                json_object_set_new(o, ints[i], json_integer(json_integer_value(json_object_get(f, ints[i]))));
        json_object_set_new(o, "listen", json_string(json_string_value(json_object_get(f, "listen")) ?: ""));
        json_object_set_new(o, "tls", json_boolean(json_is_true(json_object_get(f, "tls"))));
        json_t *req = json_object(), *n;
        const char *code;
        if (!req) {
                json_decref(o);
                return NULL;
        }
        json_object_foreach(json_object_get(f, "requests"), code, n)
                if (json_is_integer(n) && strlen(code) <= 5)
                        json_object_set_new(req, code, json_integer(json_integer_value(n)));
        json_object_set_new(o, "requests", req);
        json_int_t started = json_integer_value(json_object_get(f, "started"));
        json_int_t updated = json_integer_value(json_object_get(f, "updated"));
        json_object_set_new(o, "uptime_s", json_integer(now > started ? now - started : 0));
        json_object_set_new(o, "figures_age_s", json_integer(now > updated ? now - updated : 0));
        if (now - updated > HUB_FIGURES_STALE_S)
                json_array_append_new(problems, json_sprintf("the hub (pid %lld) has not written its "
                                      "figures for %llds", (long long)pid, (long long)(now - updated)));
        return o;
}

static void print_hub(json_t *hb)
{
        char span[64];
        json_int_t c2 = 0, c4 = 0, c5 = 0;
        const char *code;
        json_t *n;

        if (!hb)
                return;
        if (json_is_null(json_object_get(hb, "running"))) {
                printf("hub: unknown: %s\n", esc_line(json_string_value(json_object_get(hb, "error"))));
                return;
        }
        if (!json_is_true(json_object_get(hb, "running"))) {
                printf("hub: not running (no figures in %s)\n",
                       esc_line(json_string_value(json_object_get(hb, "figures"))));
                return;
        }
        json_object_foreach(json_object_get(hb, "requests"), code, n) {
                if (code[0] == '2')
                        c2 += json_integer_value(n);
                else if (code[0] == '4')
                        c4 += json_integer_value(n);
                else if (code[0] == '5')
                        c5 += json_integer_value(n);
        }
#define I(k) ((long long)json_integer_value(json_object_get(hb, k)))
        printf("hub: running, pid %lld, up %s, listening on %s (%s), %lld token(s)\n", I("pid"),
               fmt_span(json_integer_value(json_object_get(hb, "uptime_s")), span, sizeof(span)),
               esc_line(json_string_value(json_object_get(hb, "listen"))),
               json_is_true(json_object_get(hb, "tls")) ? "TLS" : "plain HTTP",
               I("tokens"));
        printf("  requests %lld (2xx %lld, 4xx %lld, 5xx %lld), accepted %lld, repeated %lld, "
               "failed authentication %lld\n", I("requests_total"), (long long)c2, (long long)c4,
               (long long)c5, I("accepted"), I("repeated"), I("auth_failed"));
#undef I
}

/* "5min 38s", "2h 0min 5s", "3d 4h 0min 0s", "0s": systemd's units. */
static const char *fmt_span(json_int_t s, char *buf, size_t n)
{
        static const struct { const char *unit; json_int_t secs; } units[] = {
                { "d", 86400 }, { "h", 3600 }, { "min", 60 }, { "s", 1 },
        };
        size_t len = 0;
        bool started = false;

        buf[0] = '\0';
        if (s < 0)
                s = 0;
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                json_int_t q = s / units[i].secs;
                s %= units[i].secs;
                if (!q && !started && units[i].secs > 1)
                        continue;
                started = true;
                len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%lld%s",
                                        len ? " " : "", (long long)q, units[i].unit);
        }
        return buf;
}

/* The counters "since start" in the order of an item's life, then the
 * rest as the daemon sends them. */
static void print_counters(json_t *k)
{
        static const char *const life[] = {
                "claimed", "delivered", "consumed", "expired", "canceled", "rejected", "left",
                "deferred", "recovered", "retried", "pruned", "errors", "overflows",
                "rescans",
        };
        json_t *rej = json_object_get(k, "rejected"), *v;
        json_int_t nrej = 0;
        const char *key;

        json_object_foreach(rej, key, v)
                nrej += json_integer_value(v);
        printf("since start:");
        for (size_t i = 0; i < ELEMENTSOF(life); i++) {
                if (!strcmp(life[i], "rejected"))
                        printf(" rejected %lld", (long long)nrej);
                else if (json_is_integer(json_object_get(k, life[i])))
                        printf(" %s %lld", life[i],
                               (long long)json_integer_value(json_object_get(k, life[i])));
        }
        json_object_foreach(k, key, v) {
                bool known = false;
                for (size_t i = 0; i < ELEMENTSOF(life) && !known; i++)
                        known = !strcmp(key, life[i]);
                if (!known && json_is_integer(v))
                        printf(" %s %lld", key, (long long)json_integer_value(v));
        }
        printf("\n");
        json_object_foreach(rej, key, v)
                printf("  rejected %s: %lld\n", key, (long long)json_integer_value(v));
}

static void print_text(json_t *st)
{
        json_t *d = json_object_get(st, "daemon"), *c = json_object_get(st, "counts");
        json_t *pa = json_object_get(st, "pending_by_agent"), *k = json_object_get(st, "counters");
        json_t *v, *probs = json_object_get(st, "problems");
        const char *key;
        size_t i;

        json_t *op = json_object_get(st, "oldest_pending_by_agent");
        char span[64];

        if (json_is_true(json_object_get(d, "running")))
                printf("handoffd %s: running, pid %lld, up %s, %s, fsync %s, watch %s\n",
                       json_string_value(json_object_get(d, "version")),
                       (long long)json_integer_value(json_object_get(d, "pid")),
                       fmt_span(json_integer_value(json_object_get(d, "uptime_s")), span, sizeof(span)),
                       json_string_value(json_object_get(d, "config")),
                       json_is_true(json_object_get(d, "fsync")) ? "on" : "off",
                       json_is_true(json_object_get(d, "watch_ok")) ? "ok" : "LOST");
        else if (json_is_true(json_object_get(d, "refused")))
                printf("handoffd: the control socket %s refused this user (only root, the "
                       "daemon's user and the members of [control] group %s may ask); "
                       "whether it runs is unknown, the spool is read directly\n",
                       json_string_value(json_object_get(d, "socket")),
                       json_string_value(json_object_get(d, "group")) ?: "(none set)");
        else
                printf("handoffd: not running (spool read directly)\n");
        printf("health: %s\n", json_string_value(json_object_get(st, "health")));
        json_array_foreach(probs, i, v)
                printf("  problem: %s\n", esc_line(json_string_value(v)));
        if (!json_object_size(c)) {
                printf("spool %s: not counted (see the problem above)\n",
                       json_string_value(json_object_get(st, "spool")));
                goto counted;
        }
        /* the bytes are rejected/'s (what retention bounds), said so */
        printf("spool %s: handoff %lld, claimed %lld, archive %lld, rejected %lld (%lld bytes in rejected/)\n",
               json_string_value(json_object_get(st, "spool")),
               (long long)json_integer_value(json_object_get(c, "handoff")),
               (long long)json_integer_value(json_object_get(c, "claimed")),
               (long long)json_integer_value(json_object_get(c, "archive")),
               (long long)json_integer_value(json_object_get(c, "rejected")),
               (long long)json_integer_value(json_object_get(json_object_get(st, "bytes"), "rejected")));
        json_object_foreach(pa, key, v)
                if (json_is_integer(json_object_get(op, key)))
                        printf("  pending for %s: %lld, the oldest waiting %s\n", esc_line(key),
                               (long long)json_integer_value(v),
                               fmt_span(json_integer_value(json_object_get(op, key)), span, sizeof(span)));
                else
                        printf("  pending %s: %lld\n", esc_line(key), (long long)json_integer_value(v));
counted:
        if (json_is_null(pa))
                printf("  pending per agent: not known (%s; status reads no file)\n",
                       json_is_true(json_object_get(d, "refused")) ? "the daemon was not asked"
                                                                   : "the daemon is not running");
        if (json_is_integer(json_object_get(st, "oldest_pending_s")))
                printf("oldest pending (for an agent served here): %s\n",
                       fmt_span(json_integer_value(json_object_get(st, "oldest_pending_s")),
                                span, sizeof(span)));
        if (json_is_integer(json_object_get(st, "oldest_claimed_s")))
                printf("oldest claimed: %s\n",
                       fmt_span(json_integer_value(json_object_get(st, "oldest_claimed_s")),
                                span, sizeof(span)));
        if (k)
                print_counters(k);
        print_relay(json_object_get(st, "relay"));
        print_a2a(json_object_get(st, "a2a"));
        print_hub(json_object_get(st, "hub"));
        if (json_string_value(json_object_get(st, "last_error")))
                printf("last error (%s ago): %s\n",
                       fmt_span(json_integer_value(json_object_get(st, "last_error_age_s")),
                                span, sizeof(span)),
                       esc_line(json_string_value(json_object_get(st, "last_error"))));
}

/* The file against the configuration the daemon runs on (control.c):
 * one it could not load, one changed since it loaded it, a reload that
 * failed. */
static void config_problems(const struct config *cfg, bool broken, const json_t *dc,
                            json_t *problems)
{
        const char *dpath = json_string_value(json_object_get(dc, "path"));
        const char *dsha = json_string_value(json_object_get(dc, "sha256"));
        const json_t *rf = json_object_get(dc, "reload_failed");
        char a[PATH_MAX], b[PATH_MAX], hex[65], span[64];
        bool same = dpath && realpath(dpath, a) && realpath(cfg->path, b) && !strcmp(a, b);

        fmt_span(json_integer_value(json_object_get(dc, "loaded_age_s")), span, sizeof(span));
        if (json_is_object(rf)) {
                char fspan[64];
                json_array_append_new(problems, json_sprintf(
                        "the last reload failed %s ago, handoffd runs on the configuration it "
                        "loaded %s ago: %s",
                        fmt_span(json_integer_value(json_object_get(rf, "age_s")), fspan,
                                 sizeof(fspan)),
                        span, json_string_value(json_object_get(rf, "error")) ?: ""));
        }
        if (broken) {
                json_array_append_new(problems, json_sprintf(
                        "%s does not load (its errors above); handoffd runs on the "
                        "configuration it loaded %s ago", cfg->path, span));
                return;
        }
        sodium_bin2hex(hex, sizeof(hex), cfg->digest, sizeof(cfg->digest));
        if (same && dsha && strcmp(dsha, hex) && !json_is_object(rf))
                json_array_append_new(problems, json_sprintf(
                        "%s has changed since handoffd loaded it %s ago: reload it "
                        "(systemctl reload handoffd, or SIGHUP) to run on it", cfg->path, span));
}

int cmd_status(int argc, char **argv)
{
        const char *conf = NULL;
        bool as_json = false;
        struct config *cfg = NULL;
        json_t *st, *daemon, *counts, *bytes, *pending, *pending_oldest, *problems, *ages;
        _cleanup_json_ json_t *lset = NULL;
        int64_t oldest_pending = -1, oldest_claimed = -1;
        int ex, r, code;
        size_t i;

        if (ctl_opts_config_json(argc, argv, status_usage, &conf, &as_json, &ex))
                return ex;
        if (optind < argc)
                return ctl_fail(CTL_EXIT_USAGE, "status: unexpected argument '%s'", argv[optind]);
        /* A file with mistakes still says where the daemon listens: a
         * reload that failed on it leaves the daemon running on the old
         * configuration, and status is how an operator sees that. */
        char *cerr = NULL;
        r = config_load_partial(conf ? conf : CONFIG_DEFAULT_PATH, &cfg, &cerr);
        if (r < 0) {
                char *save = NULL;
                if (!cerr)
                        ctl_fail(CTL_EXIT_USAGE, "%s", strerror(-r));
                for (char *l = cerr ? strtok_r(cerr, "\n", &save) : NULL; l;
                     l = strtok_r(NULL, "\n", &save))
                        ctl_fail(CTL_EXIT_USAGE, "%s", l);
                free(cerr);
                if (!cfg)
                        return CTL_EXIT_USAGE;
        }
        bool conf_broken = r < 0;

        st = json_object();
        counts = json_object();
        bytes = json_object();
        pending = json_object();
        pending_oldest = json_object();
        problems = json_array();
        ages = json_array();
        lset = json_object();   /* the left items' inodes as a set */
        if (!st || !counts || !bytes || !pending || !pending_oldest || !problems || !ages ||
            !lset) {
                json_decref(st);
                json_decref(counts);
                json_decref(bytes);
                json_decref(pending);
                json_decref(pending_oldest);
                json_decref(problems);
                json_decref(ages);
                config_free(cfg);
                return ctl_fail(CTL_EXIT_ERROR, "status: out of memory");
        }
        bool refused = false;
        daemon = ask_daemon(cfg->control_socket, &refused);
        /* Names and stat only: a file's content is the producer's, and
         * reading every one makes status as slow as the spool is large.
         * Who a pending item is for comes from the daemon (what it left
         * in handoff/ for agents not served here); without it, unknown. */
        json_t *left = json_object_get(daemon, "left"), *lin, *e;
        json_array_foreach(json_object_get(left, "inodes"), i, lin) {
                char k[32];
                snprintf(k, sizeof(k), "%lld", (long long)json_integer_value(lin));
                json_object_set_new(lset, k, json_true());
        }
        /* No spool directory: nothing to count, and not "all is well". */
        struct stat sst;
        bool spool_ok = stat(cfg->spool_dir, &sst) == 0 && S_ISDIR(sst.st_mode);
        if (!spool_ok)
                json_array_append_new(problems, json_sprintf("the spool directory %s %s",
                                      cfg->spool_dir, errno == ENOENT ? "does not exist"
                                      : errno == EACCES ? "cannot be read" : "is not a directory"));
        for (i = 0; spool_ok && i < 4; i++) {
                uint64_t nb = 0;
                size_t n = 0, j;
                r = items_count(cfg->spool_dir, items_states[i], &n, &nb, i < 2 ? ages : NULL);
                if (r < 0) {
                        json_array_append_new(problems, json_sprintf("cannot read %s/%s: %s",
                                              cfg->spool_dir, items_states[i], strerror(-r)));
                        continue;
                }
                json_object_set_new(counts, items_states[i], json_integer((json_int_t)n));
                json_object_set_new(bytes, items_states[i], json_integer((json_int_t)nb));
                json_array_foreach(ages, j, e) {
                        json_int_t ino = json_integer_value(json_array_get(e, 0));
                        int64_t age = json_integer_value(json_array_get(e, 1));
                        char k[32];
                        if (i == 1) {
                                if (age > oldest_claimed)
                                        oldest_claimed = age;
                                continue;
                        }
                        snprintf(k, sizeof(k), "%lld", (long long)ino);
                        bool was_left = json_object_get(lset, k) != NULL;
                        /* not left by the daemon: for an agent served here
                         * (or not read yet) */
                        if (daemon && !was_left && age > oldest_pending)
                                oldest_pending = age;
                }
                json_array_clear(ages);
        }
        json_decref(ages);
        if (daemon) {
                json_t *by = json_object_get(left, "by_agent"), *old = json_object_get(left, "oldest_s_by_agent");
                json_int_t unread = json_integer_value(json_object_get(counts, "handoff")) -
                                    json_integer_value(json_object_get(left, "count"));
                json_object_update(pending, by);
                json_object_update(pending_oldest, old);
                if (unread > 0)
                        json_object_set_new(pending, "(not read yet)", json_integer(unread));
                if (!json_is_true(json_object_get(left, "inodes_complete")))
                        oldest_pending = -1;    /* cannot tell them apart */
        }
        json_object_set_new(st, "spool", json_string(cfg->spool_dir));
        json_object_set_new(st, "counts", counts);
        json_object_set_new(st, "bytes", bytes);
        /* not running: who they are for is not known without reading them */
        json_object_set_new(st, "pending_by_agent", daemon ? pending : json_null());
        json_object_set_new(st, "oldest_pending_by_agent", daemon ? pending_oldest : json_null());
        if (!daemon) {
                json_decref(pending);
                json_decref(pending_oldest);
        }
        /* none: null, never a -1 a script would take for an age */
        json_object_set_new(st, "oldest_pending_s",
                            oldest_pending >= 0 ? json_integer(oldest_pending) : json_null());
        json_object_set_new(st, "oldest_claimed_s",
                            oldest_claimed >= 0 ? json_integer(oldest_claimed) : json_null());

        if (daemon) {
                json_object_set(st, "config", json_object_get(daemon, "config"));
                config_problems(cfg, conf_broken, json_object_get(daemon, "config"), problems);
        } else if (conf_broken) {
                /* nobody runs on it: the file's mistakes are the answer */
                config_free(cfg);
                json_decref(st);
                json_decref(problems);
                return CTL_EXIT_USAGE;
        }
        if (daemon) {
                json_t *d = json_object_get(daemon, "daemon");
                json_object_set(st, "daemon", d);
                json_object_set(st, "counters", json_object_get(daemon, "counters"));
                /* as the daemon says them: null when there is none */
                json_object_set_new(st, "last_error",
                                    json_incref(json_object_get(daemon, "last_error")) ?: json_null());
                json_object_set_new(st, "last_error_age_s",
                                    json_incref(json_object_get(daemon, "last_error_age_s")) ?: json_null());
                json_t *rl = json_object_get(daemon, "relay");
                if (rl) {
                        json_object_set(st, "relay", rl);
                        if (!json_is_true(json_object_get(rl, "ready")))
                                json_array_append_new(problems, json_sprintf("the relay is not connected%s%s",
                                        json_string_value(json_object_get(rl, "last_error")) ? ": " : "",
                                        json_string_value(json_object_get(rl, "last_error")) ?: ""));
                        /* a key the receipts of a [remote] host are checked
                         * with is unusable now: they are dropped */
                        const char *rp = json_string_value(json_object_get(json_object_get(rl, "receipts"),
                                                                           "problem"));
                        if (rp)
                                json_array_append_new(problems, json_string(rp));
                }
                /* A2A remotes (a2a_out.c): as the daemon says them */
                json_t *a2a = json_object_get(daemon, "a2a"), *ar;
                const char *arn;
                if (a2a)
                        json_object_set(st, "a2a", a2a);
                json_object_foreach(json_object_get(a2a, "remotes"), arn, ar)
                        if (a2a_failing(ar))
                                json_array_append_new(problems, json_sprintf(
                                        "A2A remote %s is failing, %lld handoff(s) waiting: %s", arn,
                                        (long long)json_integer_value(json_object_get(ar, "waiting")),
                                        json_is_true(json_object_get(ar, "helper_running"))
                                        ? json_string_value(json_object_get(ar, "last_error"))
                                        : "its handoff-a2a is not running"));
                /* a remote that refuses the token: its items wait */
                {
                        size_t pi;
                        json_t *pv;
                        json_array_foreach(json_object_get(a2a, "problems"), pi, pv)
                                if (json_is_string(pv))
                                        json_array_append(problems, pv);
                }
                json_t *oos = json_object_get(daemon, "agents_out_of_service");
                const char *an;
                json_t *why;
                json_object_set_new(st, "agents_out_of_service",
                                    json_is_object(oos) ? json_incref(oos) : json_object());
                json_object_foreach(oos, an, why)
                        json_array_append_new(problems, json_sprintf("agent %s is out of service: %s", an,
                                              json_string_value(why) ?: "(no reason given)"));
                if (!json_is_true(json_object_get(d, "watch_ok")))
                        json_array_append_new(problems, json_string("the watch on handoff/ is lost"));
                const json_t *eage = json_object_get(daemon, "last_error_age_s");
                json_int_t ea = json_integer_value(eage);
                if (json_string_value(json_object_get(daemon, "last_error")) && json_is_integer(eage) &&
                    ea < RECENT_ERROR_S)
                        json_array_append_new(problems, json_sprintf("error %llds ago: %s", (long long)ea,
                                              json_string_value(json_object_get(daemon, "last_error"))));
                /* A served item waiting longer than two rescans was missed. */
                if (oldest_pending > 2 * cfg->rescan_interval + 5)
                        json_array_append_new(problems, json_sprintf("a handoff for a served agent has waited %llds",
                                              (long long)oldest_pending));
                if (oldest_claimed > cfg->resume_window + 60)
                        json_array_append_new(problems, json_sprintf("a claimed item is %llds old, past its resume window of %llds",
                                              (long long)oldest_claimed, (long long)cfg->resume_window));
                code = json_array_size(problems) ? CTL_EXIT_NEGATIVE : CTL_EXIT_OK;
                json_object_set_new(st, "health", json_string(code ? "degraded" : "healthy"));
                json_decref(daemon);
        } else if (refused) {
                /* A daemon may well run: not "not running" (3). */
                json_object_set_new(st, "daemon", json_pack("{s:n, s:b, s:s, s:s?}", "running",
                                                             "refused", 1,
                                                             "socket", cfg->control_socket,
                                                             "group", cfg->control_group));
                json_object_set_new(st, "health", json_string("unknown"));
                json_array_append_new(problems, json_sprintf("the control socket %s refused this user",
                                                             cfg->control_socket));
                code = CTL_EXIT_ERROR;
        } else {
                json_object_set_new(st, "daemon", json_pack("{s:b, s:s}", "running", 0,
                                                             "socket", cfg->control_socket));
                json_object_set_new(st, "health", json_string("not running"));
                code = CTL_EXIT_STALE;
        }
        json_t *hb = hub_status(cfg, problems);
        if (hb)
                json_object_set_new(st, "hub", hb);
        /* a problem of the hub's makes a running daemon degraded */
        if (code == CTL_EXIT_OK && json_array_size(problems)) {
                code = CTL_EXIT_NEGATIVE;
                json_object_set_new(st, "health", json_string("degraded"));
        }
        json_object_set_new(st, "problems", problems);
        config_free(cfg);

        if (as_json) {
                ctl_print_json(st, "{}");
        } else {
                print_text(st);
        }
        json_decref(st);
        return code;
}
