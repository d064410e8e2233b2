/* handoffctl inbox: the bootstraps waiting for an agent; with --follow,
 * each one as it arrives (inotify on its handoffs/), once.
 *
 * Exit: 0 listed (or --follow ended by a signal or a closed stdout);
 * 2 usage or config error; 4 a system error. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "config.h"
#include "handoffctl.h"
#include "inbox.h"
#include "util.h"

static void inbox_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl inbox [-c CONF] --agent NAME [--follow] [--json]\n"
                "       handoffctl inbox --state-dir DIR [--window SECONDS] [--follow] [--json]\n"
                "\n"
                "The bootstraps waiting for agent NAME (fresh ones, that consume would\n"
                "take), oldest first: handoff_id, from_agent, age, seconds left in the\n"
                "resume window, reason.  At most the oldest 100 (or 4 MiB of files) are\n"
                "read and shown; how many more wait is said after them.  Nothing is\n"
                "consumed.  With --follow, then each one that arrives, once, until\n"
                "interrupted.\n"
                "\n"
                "  -c, --config FILE      daemon configuration (default %s)\n"
                "  -a, --agent NAME       the agent\n"
                "  -d, --state-dir DIR    the agent's state_dir, instead of -c/--agent\n"
                "  -w, --window SECONDS   resume window with --state-dir (default 300)\n"
                "  -f, --follow           keep printing arrivals\n"
                "  -j, --json             one JSON object per line\n"
                "  -h, --help             this text\n"
                "      --version          the version\n"
                "\n"
                "Exit: 0 done, 2 usage, 4 error.\n",
                CONFIG_DEFAULT_PATH);
}

/* Print the entries not printed yet; seen: name -> true for those still
 * there (a name that left and comes back is a new arrival).  say_more:
 * how many were not looked at (the bound of inbox_list()), after them. */
static int inbox_show(const struct inbox *ib, json_t *seen, bool as_json, bool say_more)
{
        _cleanup_json_ json_t *list = NULL, *now_there = json_object();
        json_t *e;
        size_t i, more = 0;
        int r;

        if (!now_there)
                return -ENOMEM;
        r = inbox_list(ib, hd_now_usec(), &list, &more);
        if (r < 0)
                return r;
        json_array_foreach(list, i, e) {
                const char *name = json_string_value(json_object_get(e, "name"));
                if (!json_object_get(seen, name))
                        inbox_print(stdout, e, as_json);
                json_object_set_new(now_there, name, json_true());
        }
        json_object_clear(seen);
        json_object_update(seen, now_there);
        /* --json lines are entries only: the note goes to stderr there */
        if (say_more && more)
                fprintf(as_json ? stderr : stdout,
                        "%zu more waiting, not shown (the oldest %zu were looked at; consume takes the oldest first)\n",
                        more, json_array_size(list));
        return fflush(stdout) == EOF ? -errno : 0;
}

static int inbox_follow(struct inbox *ib, json_t *seen, bool as_json)
{
        char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
        _cleanup_close_ int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        int r;

        if (ifd < 0)
                return -errno;
        r = inbox_watch(ib, ifd);
        if (r < 0)
                return r;
        /* Watch first, then list: an arrival in between is in the queue. */
        r = inbox_show(ib, seen, as_json, true);
        for (;;) {
                struct pollfd p[2] = { { .fd = ifd, .events = POLLIN },
                                       { .fd = STDOUT_FILENO, .events = 0 } };
                bool changed = false;
                ssize_t n;

                if (r < 0)
                        return r;
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (p[1].revents & (POLLERR | POLLHUP))
                        return 0;       /* the reader is gone */
                n = read(ifd, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                continue;
                        return -errno;
                }
                for (char *q = buf; q < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)q;
                        q += sizeof(*ev) + ev->len;
                        if (inbox_event(ib, ifd, ev))
                                changed = true;
                }
                if (changed)
                        r = inbox_show(ib, seen, as_json, false);
        }
}

int cmd_inbox(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "agent", required_argument, NULL, 'a' },
                { "state-dir", required_argument, NULL, 'd' },
                { "window", required_argument, NULL, 'w' },
                { "follow", no_argument, NULL, 'f' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        char err[512];
        const char *conf = NULL, *agent = NULL, *state_dir = NULL;
        bool follow = false, as_json = false;
        struct inbox ib = { .fd = -1 };
        struct config *cfg = NULL;
        hd_consume_opts copts = { 0 };
        _cleanup_json_ json_t *seen = NULL;
        int64_t window = 300;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:a:d:w:fjh", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': conf = optarg; break;
                case 'a': agent = optarg; break;
                case 'd': state_dir = optarg; break;
                case 'w':
                        if (config_parse_duration(optarg, &window) < 0 || window < 1)
                                return ctl_fail(CTL_EXIT_USAGE, "inbox: --window '%s' is not a duration", optarg);
                        break;
                case 'f': follow = true; break;
                case 'j': as_json = true; break;
                case 'h': inbox_usage(stdout); return CTL_EXIT_OK;
                case 'V': printf("handoffctl %s\n", HD_VERSION_STRING); return CTL_EXIT_OK;
                default: inbox_usage(stderr); return CTL_EXIT_USAGE;
                }
        }
        if (optind < argc)
                return ctl_fail(CTL_EXIT_USAGE, "inbox: unexpected argument '%s'", argv[optind]);
        if (!!agent == !!state_dir)
                return ctl_fail(CTL_EXIT_USAGE, "inbox: --agent NAME or --state-dir DIR is required (one of them)");
        if (agent) {
                r = ctl_config(conf, &cfg);
                if (r)
                        return r;
        }
        r = inbox_init(&ib, cfg, agent, state_dir, window, err, sizeof(err));
        if (r)
                r = ctl_fail(r, "inbox: %s", err);
        /* What consume --agent would take: checked with the keys the
         * configuration lets this user read, as consume does. */
        if (r == 0 && cfg) {
                int q = consume_opts_from_config(cfg, true, &copts);
                if (q < 0)
                        r = ctl_fail(CTL_EXIT_ERROR, "inbox: %s", strerror(-q));
                copts.agent = agent;
                ib.copts = &copts;
        }
        if (r) {
                inbox_done(&ib);
                config_free(cfg);
                return r;
        }
        seen = json_object();
        if (!seen) {
                inbox_done(&ib);
                config_free(cfg);
                return ctl_fail(CTL_EXIT_ERROR, "inbox: out of memory");
        }
        /* a reader that goes away ends --follow, quietly */
        signal(SIGPIPE, SIG_IGN);
        if (follow)
                r = inbox_follow(&ib, seen, as_json);
        else
                r = inbox_show(&ib, seen, as_json, true);
        inbox_done(&ib);
        config_free(cfg);       /* after the last look: copts reads its keys */
        if (r == -EPIPE)
                return CTL_EXIT_OK;
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "inbox: %s: %s", ib.dir, strerror(-r));
        return CTL_EXIT_OK;
}
