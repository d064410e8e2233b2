/* handoffctl wait: block until a handoff has an outcome.  inotify on the
 * spool's state directories (watch first, then look, so nothing falls in
 * between); each name that arrives is matched against the id
 * (items_match()), an overflow looks at everything again.  No polling.
 *
 * Exit: 0 consumed (with --until claimed: claimed, or past the claim);
 * 1 rejected, expired or canceled (withdrawn by its sender: it never
 * reached its agent, so not even --until claimed counts it); 2 usage or
 * config error; 3 timeout; 4 a system error; 5 relayed to another host
 * (the outcome is decided there).  With receipts on ([relay]
 * host_pubkey_dir), a relayed item is waited for through to the outcome
 * its receiving host's signed receipt reports (receipt.c): consumed 0,
 * expired, canceled or rejected 1; --until relayed stops at the relay as
 * before.  Sent to an A2A remote ([remote NAME] a2a): its task's end,
 * completed 0, failed, canceled, rejected or unknown 1, input_required or
 * auth_required 7; not sent before its expires_at (expired_unsent) or
 * refused by the server (remote_rejected): 1.  --until completed waits
 * past the consume for the result its agent reports (archive/NAME.result,
 * completion.c of handoffd): 0 completed, 6 failed, 7 input_required (the
 * agent's question: neither an end nor a failure, and its answer is the
 * next handoff, so this one has no later result to wait for); for a
 * relayed item the result its receiving host sends back in a receipt
 * (receipt.c), with receipts on, else 5. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "handoffctl.h"
#include "items.h"
#include "layout.h"
#include "util.h"

#define WAIT_EXIT_TIMEOUT 3
#define WAIT_EXIT_RELAYED 5
#define WAIT_EXIT_FAILED 6      /* --until completed: the agent reported failure */
#define WAIT_EXIT_INPUT 7       /* an A2A remote's task, or the agent's result, asks for input */

static void wait_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl wait [-c CONF | --spool DIR] HANDOFF_ID [--timeout SECONDS]\n"
                "                       [--until claimed|relayed|completed] [--json]\n"
                "\n"
                "Block until the handoff is consumed, expired, canceled, rejected or\n"
                "relayed (or claimed, with --until claimed) and print what became of\n"
                "it.  An id not in the spool yet is waited for.\n"
                "\n"
                "  -c, --config FILE      daemon configuration (default %s)\n"
                "  -s, --spool DIR        the spool, instead of the configuration's\n"
                "  -t, --timeout SECONDS  give up after this long (5m, 1h: a duration;\n"
                "                         0 looks once); default: wait for ever\n"
                "  -u, --until claimed    return at the claim already\n"
                "      --until relayed    return when relayed to another host (5), not\n"
                "                         at the outcome that host's receipt reports\n"
                "      --until completed  past the consume, until the agent reports its\n"
                "                         result (handoffctl complete): 0 completed,\n"
                "                         6 failed, 7 input required (its question)\n"
                "  -j, --json             one JSON object\n"
                "  -h, --help             this text\n"
                "      --version          the version\n"
                "\n"
                "Exit: 0 consumed (--until claimed: claimed; --until completed: its\n"
                "result says completed), 1 rejected, expired or canceled (also with\n"
                "--until claimed), 2 usage, 3 timeout, 4 error, 5 relayed to another\n"
                "host (receipts off, or --until relayed), 6 its result\n"
                "says failed (--until completed), 7 an A2A remote's task asks for\n"
                "input, or (--until completed) its result does.  A relayed item's outcome on the other host counts when\n"
                "receipts are on ([relay] host_pubkey_dir); an A2A remote's task's\n"
                "end always does.\n",
                CONFIG_DEFAULT_PATH);
}

enum wait_relayed {
        WAIT_RELAYED_STOP,      /* receipts off: relayed is the end (5) */
        WAIT_RELAYED_RECEIPT,   /* through to the receipt's outcome */
        WAIT_RELAYED_UNTIL,     /* --until relayed */
};

static enum wait_relayed relayed_mode;
/* --until completed: a consumed item waits for its agent's result. */
static bool until_completed;

/* A relayed item: its outcome on the other host, or the relay's 5. */
static bool wait_relayed(const json_t *it, bool until_claimed, int *ret_code)
{
        const char *ro = json_string_value(json_object_get(it, "remote_outcome"));

        if (relayed_mode == WAIT_RELAYED_UNTIL) {
                *ret_code = WAIT_EXIT_RELAYED;
                return true;
        }
        /* Sent to an A2A remote (a2a_out.c): archived with its task's end. */
        const char *rh = json_string_value(json_object_get(it, "remote_host"));
        if (ro && rh && !strncmp(rh, "a2a:", 4)) {
                if (!strcmp(ro, "completed"))
                        *ret_code = CTL_EXIT_OK;
                else if (!strcmp(ro, "input_required") || !strcmp(ro, "auth_required"))
                        *ret_code = WAIT_EXIT_INPUT;
                else
                        *ret_code = CTL_EXIT_NEGATIVE;
                return true;
        }
        if (ro && !strcmp(ro, "consumed")) {
                *ret_code = CTL_EXIT_OK;
                return true;
        }
        if (ro && (!strcmp(ro, "expired") || !strcmp(ro, "rejected") ||
                   !strcmp(ro, "canceled"))) {
                *ret_code = until_claimed && !strcmp(ro, "expired") ? CTL_EXIT_OK : CTL_EXIT_NEGATIVE;
                return true;
        }
        if (ro && !strcmp(ro, "delivered") && until_claimed) {
                *ret_code = CTL_EXIT_OK;
                return true;
        }
        if (relayed_mode == WAIT_RELAYED_RECEIPT)
                return false;
        *ret_code = WAIT_EXIT_RELAYED;
        return true;
}

/* --until completed: the exit of a result's status.  input_required is
 * the exit an A2A remote's question has: the agent asks, and is answered
 * in a next handoff, not in a later result of this one. */
static int result_code(const char *status)
{
        if (!strcmp(status, "completed"))
                return CTL_EXIT_OK;
        if (!strcmp(status, "input_required"))
                return WAIT_EXIT_INPUT;
        return WAIT_EXIT_FAILED;
}

/* --until completed, a relayed item: the result its host sent back (a
 * receipt, archive/NAME.result here), or an end without one there.  An
 * A2A remote's task (a2a_out.c) ends with 5, as before. */
static bool wait_relayed_result(const json_t *it, int *ret_code)
{
        const char *rs = json_string_value(json_object_get(json_object_get(it, "result"), "status"));
        const char *ro = json_string_value(json_object_get(it, "remote_outcome"));
        const char *rh = json_string_value(json_object_get(it, "remote_host"));

        bool a2a = rh && !strncmp(rh, "a2a:", 4);

        if (rs && !a2a) {
                *ret_code = result_code(rs);
                return true;
        }
        if (relayed_mode == WAIT_RELAYED_RECEIPT && !a2a) {
                if (ro && (!strcmp(ro, "expired") || !strcmp(ro, "rejected") ||
                           !strcmp(ro, "canceled"))) {
                        *ret_code = CTL_EXIT_NEGATIVE;
                        return true;
                }
                return false;   /* consumed there: its result comes */
        }
        *ret_code = WAIT_EXIT_RELAYED;
        return true;
}

/* Is the item (of this rank) an end to the wait, and with what code? */
static bool wait_done(const json_t *it, int rank, bool until_claimed, int *ret_code)
{
        const char *st = items_status(it);

        if (rank == ITEMS_REJECTED || rank == ITEMS_REJECTED_BY_NAME) {
                *ret_code = CTL_EXIT_NEGATIVE;
                return true;
        }
        if (rank == ITEMS_ARCHIVED) {
                if (until_completed && !strcmp(st, "relayed"))
                        return wait_relayed_result(it, ret_code);
                if (until_completed && !strcmp(st, "consumed")) {
                        const char *rs = json_string_value(json_object_get(json_object_get(it, "result"),
                                                                           "status"));
                        if (!rs)
                                return false;
                        *ret_code = result_code(rs);
                        return true;
                }
                if (!strcmp(st, "relayed"))
                        return wait_relayed(it, until_claimed, ret_code);
                else if (!strcmp(st, "consumed") || (until_claimed && strcmp(st, "canceled")))
                        *ret_code = CTL_EXIT_OK;   /* expired: it was claimed */
                else
                        *ret_code = CTL_EXIT_NEGATIVE;
                return true;
        }
        if (rank == ITEMS_CLAIMED && until_claimed) {
                *ret_code = CTL_EXIT_OK;
                return true;
        }
        return false;
}

static void wait_print(const char *id, const json_t *it, const char *status, bool as_json)
{
        if (as_json) {
                _cleanup_json_ json_t *o = it ? json_deep_copy(it) : json_object();
                _cleanup_free_ char *s = NULL;
                if (o) {
                        json_object_set_new(o, "handoff_id", json_string(id));
                        json_object_set_new(o, "status", json_string(status));
                        if (until_completed && !strcmp(status, "relayed"))
                                json_object_set_new(o, "result_on", json_string(
                                        json_string_value(json_object_get(it, "remote_host")) ?: ""));
                        s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
                }
                printf("%s\n", s ? s : "{}");
                return;
        }
        const char *reason = json_string_value(json_object_get(it, "reason"));
        const char *detail = json_string_value(json_object_get(it, "detail"));
        const char *ro = json_string_value(json_object_get(it, "remote_outcome"));
        if (ro && !strcmp(status, "relayed")) {
                /* "ID relayed to b: consumed", or with b's reason */
                status = "relayed to";
                reason = json_string_value(json_object_get(it, "remote_reason"));
                detail = json_string_value(json_object_get(it, "remote_detail"));
                printf("%s %s %s: %s", id, status,
                       json_string_value(json_object_get(it, "remote_host")) ?: "?", ro);
                if (reason && *reason)
                        printf(": %s", reason);
                if (detail && *detail)
                        printf(": %s", detail);
                /* Receipts off here: a result stays where the agent
                 * consumed it. */
                if (until_completed)
                        printf(" (its result, if its agent reports one, is on %s: "
                               "handoffctl wait --until completed %s there)",
                               json_string_value(json_object_get(it, "remote_host")) ?: "the other host",
                               id);
                printf("\n");
                return;
        }
        /* --until completed: the agent's reason for a failure, its question */
        if (json_object_get(it, "result") && (!strcmp(status, "completed") || !strcmp(status, "failed"))) {
                reason = json_string_value(json_object_get(json_object_get(it, "result"), "reason"));
                detail = NULL;
        } else if (json_object_get(it, "result") && !strcmp(status, "input_required")) {
                reason = json_string_value(json_object_get(json_object_get(it, "result"), "text"));
                detail = NULL;
        }
        printf("%s %s", id, status);
        if (reason && *reason)
                printf(": %s", esc_line(reason));
        if (detail && *detail)
                printf(": %s", esc_line(detail));
        printf("\n");
}

static int64_t mono_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct waiter {
        const char *spool, *id;
        int wd[ELEMENTSOF(items_find_states)];
        json_t *it;             /* the best item so far, or NULL */
        int rank;
};

static int wait_rescan(struct waiter *w)
{
        json_t *it = NULL;
        int r = items_find(w->spool, w->id, &it);

        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        json_decref(w->it);
        w->it = it;
        w->rank = r;
        return 0;
}

/* Read a batch of events and look at the names they bring. */
static int wait_events(struct waiter *w, int ifd)
{
        char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool rescan = false;
        ssize_t n;

        n = read(ifd, buf, sizeof(buf));
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        for (char *p = buf; p < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)p;
                p += sizeof(*ev) + ev->len;
                if (ev->mask & IN_Q_OVERFLOW) {
                        rescan = true;
                        continue;
                }
                if (!ev->len)
                        continue;
                /* A pending name gone: with fsync = yes a move out of
                 * handoff/ is a link, its handoff/ name removed after; a
                 * rejection by name ranks below the pending name until then. */
                if (ev->mask & IN_DELETE) {
                        if (w->rank == ITEMS_PENDING)
                                rescan = true;
                        continue;
                }
                for (size_t i = 0; i < ELEMENTSOF(w->wd); i++) {
                        json_t *it = NULL;
                        int r;
                        char iname[256];
                        const char *name = ev->name;
                        if (w->wd[i] != ev->wd)
                                continue;
                        /* An archived item's .outcome rewritten: a receipt; its
                         * .result written: its agent's result. */
                        bool side = !strcmp(items_find_states[i], "archive") &&
                                    ((layout_has_suffix(name, LAYOUT_OUTCOME) &&
                                      layout_strip(name, LAYOUT_OUTCOME, iname, sizeof(iname)) == 0) ||
                                     (layout_has_suffix(name, LAYOUT_RESULT) &&
                                      layout_strip(name, LAYOUT_RESULT, iname, sizeof(iname)) == 0));
                        if (side)
                                name = iname;
                        r = items_match(w->spool, items_find_states[i], name, w->id, &it);
                        if (r == ITEMS_REJECTED_BY_NAME)
                                rescan = true;  /* counts only when nothing else does */
                        else if (r > w->rank || (side && r == w->rank && r > 0)) {
                                json_decref(w->it);
                                w->it = TAKE_PTR(it);
                                w->rank = r;
                        }
                        json_decref(it);
                }
        }
        return rescan ? wait_rescan(w) : 0;
}

int cmd_wait(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "spool", required_argument, NULL, 's' },
                { "timeout", required_argument, NULL, 't' },
                { "until", required_argument, NULL, 'u' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *conf = NULL, *spool = NULL;
        struct waiter w = { .rank = ITEMS_NONE };
        bool as_json = false, until_claimed = false, until_relayed = false;
        int64_t timeout = -1, deadline = 0;
        struct config *cfg = NULL;
        _cleanup_close_ int ifd = -1;
        int c, r, code;

        while ((c = getopt_long(argc, argv, "c:s:t:u:jh", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': conf = optarg; break;
                case 's': spool = optarg; break;
                case 't':
                        if (config_parse_duration(optarg, &timeout) < 0)
                                return ctl_fail(CTL_EXIT_USAGE, "wait: --timeout '%s' is not a duration", optarg);
                        break;
                case 'u':
                        if (!strcmp(optarg, "relayed")) {
                                until_relayed = true;
                                break;
                        }
                        if (!strcmp(optarg, "completed")) {
                                until_completed = true;
                                break;
                        }
                        if (strcmp(optarg, "claimed"))
                                return ctl_fail(CTL_EXIT_USAGE, "wait: --until '%s': 'claimed', 'relayed' "
                                                "or 'completed'", optarg);
                        until_claimed = true;
                        break;
                case 'j': as_json = true; break;
                case 'h': wait_usage(stdout); return CTL_EXIT_OK;
                case 'V': printf("handoffctl %s\n", HD_VERSION_STRING); return CTL_EXIT_OK;
                default: wait_usage(stderr); return CTL_EXIT_USAGE;
                }
        }
        if (optind != argc - 1)
                return ctl_fail(CTL_EXIT_USAGE, "wait: one HANDOFF_ID is needed (try --help)");
        w.id = argv[optind];
        if (!hd_id_valid(w.id))
                return ctl_fail(CTL_EXIT_USAGE, "wait: '%s' is not a handoff_id", w.id);
        if (conf && spool)
                return ctl_fail(CTL_EXIT_USAGE, "wait: --config or --spool, not both");
        if (!spool) {
                r = ctl_config(conf, &cfg);
                if (r)
                        return r;
                spool = cfg->spool_dir;
        }
        w.spool = spool;
        relayed_mode = until_relayed ? WAIT_RELAYED_UNTIL
                       : cfg && cfg->relay.host_pubkey_dir ? WAIT_RELAYED_RECEIPT : WAIT_RELAYED_STOP;

        /* Watch first, then look: what happens in between is in the queue. */
        ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (ifd < 0) {
                code = ctl_fail(CTL_EXIT_ERROR, "wait: inotify: %s", strerror(errno));
                goto out;
        }
        for (size_t i = 0; i < ELEMENTSOF(w.wd); i++) {
                char dir[PATH_MAX];
                if (xsnprintf(dir, sizeof(dir), "%s/%s", spool, items_find_states[i]) < 0) {
                        code = ctl_fail(CTL_EXIT_ERROR, "wait: %s: %s", spool, strerror(ENAMETOOLONG));
                        goto out;
                }
                w.wd[i] = inotify_add_watch(ifd, dir, IN_MOVED_TO | IN_CREATE | IN_ONLYDIR |
                                            (!strcmp(items_find_states[i], "handoff") ||
                                             !strcmp(items_find_states[i], "outbox") ? IN_DELETE : 0));
                /* outbox/ exists only where a relay is set up */
                if (w.wd[i] < 0 && (errno != ENOENT || !strcmp(items_find_states[i], "claimed") ||
                                    !strcmp(items_find_states[i], "archive"))) {
                        code = ctl_fail(errno == ENOENT ? CTL_EXIT_USAGE : CTL_EXIT_ERROR,
                                        "wait: %s: %s", dir, strerror(errno));
                        goto out;
                }
        }
        r = wait_rescan(&w);
        /* A mistyped id waits as long as a right one: say at once that
         * it is not there (yet), so the wait is not taken for a hang. */
        if (r >= 0 && !w.it) {
                char span[32] = "";
                if (timeout >= 0)
                        snprintf(span, sizeof(span), " up to %llds", (long long)timeout);
                fprintf(stderr, "handoffctl: wait: %s is not in %s (yet); waiting%s for it "
                        "to arrive%s\n", esc_line(w.id), spool, span,
                        timeout >= 0 ? "" : " (no --timeout: until interrupted)");
        }
        if (timeout >= 0)
                deadline = mono_ms() + timeout * 1000;
        while (r >= 0 && !wait_done(w.it, w.rank, until_claimed, &code)) {
                struct pollfd p = { .fd = ifd, .events = POLLIN };
                int ms = -1;
                if (timeout >= 0) {
                        int64_t left = deadline - mono_ms();
                        if (left <= 0)
                                break;
                        ms = left > 3600000 ? 3600000 : (int)left;
                }
                r = poll(&p, 1, ms);
                if (r < 0 && errno == EINTR)
                        r = 0;
                else if (r < 0)
                        r = -errno;
                else if (r > 0)
                        r = wait_events(&w, ifd);
        }
        if (r < 0) {
                code = ctl_fail(CTL_EXIT_ERROR, "wait: %s: %s", spool, strerror(-r));
                goto out;
        }
        if (!wait_done(w.it, w.rank, until_claimed, &code)) {
                code = WAIT_EXIT_TIMEOUT;
                if (as_json) {
                        _cleanup_json_ json_t *o = json_pack("{s:s, s:s, s:s}", "handoff_id", w.id,
                                                             "status", "timeout", "last_status",
                                                             w.it ? items_status(w.it) : "unknown");
                        _cleanup_free_ char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                        printf("%s\n", s ? s : "{}");
                } else {
                        printf("%s timeout (%s)\n", w.id, w.it ? items_status(w.it) : "not in the spool");
                }
        } else {
                const json_t *res = json_object_get(w.it, "result");
                wait_print(w.id, w.it, until_completed && res
                           ? json_string_value(json_object_get(res, "status")) ?: "completed"
                           : items_status(w.it), as_json);
        }
        if (fflush(stdout) == EOF)
                code = CTL_EXIT_ERROR;
out:
        json_decref(w.it);
        config_free(cfg);
        return code;
}
