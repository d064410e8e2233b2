/* handoffctl consume: an agent takes its bootstrap, once (hd_consume()).
 *
 * Exit: 0 one was consumed; 1 none is there; 2 usage or config error;
 * 3 the one asked for is stale or unusable (left for the sweeper); 4 a
 * system error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handoffctl.h"
#include "items.h"
#include "util.h"

static void consume_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl consume [-c CONF] --agent NAME [HANDOFF_ID] [--context]\n"
                "       handoffctl consume --state-dir DIR [--window SECONDS] [HANDOFF_ID] [--context]\n"
                "\n"
                "Take a bootstrap of agent NAME: the one of HANDOFF_ID, or the oldest\n"
                "fresh one.  Of two consumers exactly one gets it.  Prints the bootstrap\n"
                "JSON, or only its resume_context with --context, and deletes it.\n"
                "\n"
                "  -c, --config FILE      daemon configuration (default %s)\n"
                "  -a, --agent NAME       the agent whose bootstrap to take\n"
                "  -d, --state-dir DIR    the agent's state_dir, instead of -c/--agent\n"
                "  -w, --window SECONDS   resume window with --state-dir (default 300)\n"
                "  -x, --context          print only resume_context\n"
                "  -h, --help             this text\n"
                "      --version          the version\n"
                "\n"
                "Exit: 0 consumed, 1 none there, 2 usage, 3 stale or unusable, 4 error.\n",
                CONFIG_DEFAULT_PATH);
}

int cmd_consume(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "agent", required_argument, NULL, 'a' },
                { "state-dir", required_argument, NULL, 'd' },
                { "window", required_argument, NULL, 'w' },
                { "context", no_argument, NULL, 'x' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *conf = NULL, *agent = NULL, *state_dir = NULL, *id = NULL;
        int64_t window = 300;
        bool context = false;
        struct config *cfg = NULL;
        _cleanup_json_ json_t *b = NULL;
        _cleanup_close_ int fd = -1;
        char dir[PATH_MAX];
        int c, r;

        while ((c = getopt_long(argc, argv, "c:a:d:w:xh", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': conf = optarg; break;
                case 'a': agent = optarg; break;
                case 'd': state_dir = optarg; break;
                case 'w':
                        if (config_parse_duration(optarg, &window) < 0 || window < 1)
                                return ctl_fail(CTL_EXIT_USAGE, "consume: --window '%s' is not a duration", optarg);
                        break;
                case 'x': context = true; break;
                case 'h': consume_usage(stdout); return CTL_EXIT_OK;
                case 'V': printf("handoffctl %s\n", HD_VERSION_STRING); return CTL_EXIT_OK;
                default: consume_usage(stderr); return CTL_EXIT_USAGE;
                }
        }
        if (optind < argc)
                id = argv[optind++];
        if (optind < argc)
                return ctl_fail(CTL_EXIT_USAGE, "consume: unexpected argument '%s'", argv[optind]);
        if (id && !hd_id_valid(id))
                return ctl_fail(CTL_EXIT_USAGE, "consume: '%s' is not a handoff_id", id);
        if (!state_dir) {
                const struct config_agent *a;
                if (!agent)
                        return ctl_fail(CTL_EXIT_USAGE, "consume: --agent NAME (or --state-dir DIR) is required");
                r = ctl_config(conf, &cfg);
                if (r)
                        return r;
                a = config_agent(cfg, agent);
                if (!a) {
                        config_free(cfg);
                        return ctl_fail(CTL_EXIT_USAGE, "consume: agent '%s' is not in %s", agent,
                                        conf ? conf : CONFIG_DEFAULT_PATH);
                }
                window = cfg->resume_window;
                r = xsnprintf(dir, sizeof(dir), "%s/handoffs", a->state_dir);
                config_free(cfg);
        } else {
                r = xsnprintf(dir, sizeof(dir), "%s/handoffs", state_dir);
        }
        if (r < 0)
                return ctl_fail(CTL_EXIT_USAGE, "consume: path too long");
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: no handoffs directory", dir);
                return ctl_fail(CTL_EXIT_ERROR, "consume: %s: %s", dir, strerror(errno));
        }
        r = hd_consume(fd, id, window, hd_now_usec(), &b);
        if (r == -ENOENT)
                return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: no %s", dir,
                                id ? "such handoff" : "fresh handoff");
        if (r == -ESTALE)
                return ctl_fail(CTL_EXIT_STALE, "consume: %s: %s is older than the resume window (%llds); left for the sweeper",
                                dir, id, (long long)window);
        if (r == -EBADMSG)
                return ctl_fail(CTL_EXIT_STALE, "consume: %s: %s is not a usable bootstrap (no valid accepted_at, source or resume_context)",
                                dir, id);
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "consume: %s: %s", dir, strerror(-r));
        if (context) {
                printf("%s\n", json_string_value(json_object_get(b, "resume_context")));
        } else {
                _cleanup_free_ char *s = json_dumps(b, JSON_INDENT(2) | JSON_SORT_KEYS);
                if (!s)
                        return ctl_fail(CTL_EXIT_ERROR, "consume: out of memory");
                printf("%s\n", s);
        }
        return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}
