/* handoffctl consume: an agent takes its bootstrap, once (hd_consume()).
 *
 * Exit: 0 one was consumed; 1 none is there (for an id the spool knows, it
 * says where the item is: already consumed and archived, rejected, not yet
 * claimed); 2 usage or config error, a --state-dir that does not exist;
 * 3 the one asked for is stale or unusable (left for the sweeper); 4 a
 * system error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "handoffctl.h"
#include "key.h"
#include "items.h"
#include "util.h"

static void consume_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl consume [-c CONF] --agent NAME [--key FILE] [HANDOFF_ID] [--context]\n"
                "       handoffctl consume --state-dir DIR [--agent NAME --key FILE] [--window SECONDS]\n"
                "                          [HANDOFF_ID] [--context]\n"
                "\n"
                "Take a bootstrap of agent NAME: the one of HANDOFF_ID, or the oldest\n"
                "fresh one.  Of two consumers exactly one gets it.  Prints the bootstrap\n"
                "JSON, or only its resume_context with --context, and deletes it.\n"
                "With a key (--key, or the keys of CONF this user can read) the signed\n"
                "handoff the bootstrap carries must verify and be addressed to NAME.\n"
                "\n"
                "  -c, --config FILE      daemon configuration (default %s)\n"
                "  -a, --agent NAME       the agent whose bootstrap to take\n"
                "  -d, --state-dir DIR    the agent's state_dir, instead of -c/--agent\n"
                "  -k, --key FILE         verify with this key (needs --agent)\n"
                "      --no-verify        take it on the directory's word, no proof checked\n"
                "  -w, --window SECONDS   resume window with --state-dir (default 300)\n"
                "  -x, --context          print only resume_context\n"
                "  -h, --help             this text\n"
                "      --version          the version\n"
                "\n"
                "Exit: 0 consumed, 1 none there (or that id was already consumed),\n"
                "2 usage or configuration error, 3 stale, unusable or refused, 4 error.\n",
                CONFIG_DEFAULT_PATH);
}

static const hd_key *consume_one_key(void *k, const char *kid, const char *from_agent)
{
        (void)kid;
        (void)from_agent;
        return k;
}

/* No bootstrap of id: where the item is, when the spool says (-c). */
static int consume_none(const char *dir, const char *spool_dir, const char *id,
                        const char *agent)
{
        _cleanup_json_ json_t *it = NULL;
        const char *state, *path, *outcome, *reason, *at, *to;

        if (!id)
                return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: no fresh handoff", dir);
        if (!spool_dir || items_find(spool_dir, id, &it) <= 0)
                it = NULL;
        state = json_string_value(json_object_get(it, "state"));
        path = json_string_value(json_object_get(it, "path"));
        outcome = json_string_value(json_object_get(it, "outcome"));
        reason = json_string_value(json_object_get(it, "reason"));
        at = json_string_value(json_object_get(it, "archived_at")) ?:
             json_string_value(json_object_get(it, "at"));
        to = json_string_value(json_object_get(it, "to_agent"));
        /* Another agent's: that is the news, whatever its state. */
        if (state && agent && to && *to && strcmp(to, agent))
                return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: addressed to %s, not to %s (%s: %s)",
                                id, to, agent, state, path ? path : "?");
        if (state && !strcmp(state, "archive") && outcome && !strcmp(outcome, "consumed"))
                return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: already consumed, archived at %s (%s)",
                                id, at, path);
        if (state && !strcmp(state, "archive") && outcome && !strcmp(outcome, "relayed"))
                return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: relayed to another host, archived at %s (%s)",
                                id, at, path);
        if (state && !strcmp(state, "outbox"))
                return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: waiting in %s to be relayed to another host",
                                id, path);
        if (state && !strcmp(state, "archive"))
                return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: not consumed in time, archived as %s at %s (%s)",
                                id, outcome ? outcome : "?", at, path);
        if (state && !strcmp(state, "rejected"))
                return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: rejected (%s), never delivered (%s)",
                                id, reason ? reason : "?", path);
        if (state && !strcmp(state, "handoff"))
                return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: not claimed yet, pending in %s",
                                id, path);
        return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: no such handoff", dir);
}

int cmd_consume(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "agent", required_argument, NULL, 'a' },
                { "state-dir", required_argument, NULL, 'd' },
                { "key", required_argument, NULL, 'k' },
                { "no-verify", no_argument, NULL, 'N' },
                { "window", required_argument, NULL, 'w' },
                { "context", no_argument, NULL, 'x' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *conf = NULL, *agent = NULL, *state_dir = NULL, *id = NULL, *key = NULL;
        int64_t window = 300;
        bool context = false, no_verify = false;
        struct config *cfg = NULL;
        _cleanup_(hd_key_freep) hd_key *k = NULL;
        _cleanup_json_ json_t *b = NULL;
        _cleanup_close_ int fd = -1;
        hd_consume_opts o = { 0 };
        hd_verdict v = { 0 };
        _cleanup_free_ char *spool_dir = NULL;
        char dir[PATH_MAX], msg[512];
        struct stat st;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:a:d:k:w:xh", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': conf = optarg; break;
                case 'a': agent = optarg; break;
                case 'd': state_dir = optarg; break;
                case 'k': key = optarg; break;
                case 'N': no_verify = true; break;
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
        if (agent && !hd_agent_valid(agent))
                return ctl_fail(CTL_EXIT_USAGE, "consume: '%s' is not an agent name", agent);
        if (key && no_verify)
                return ctl_fail(CTL_EXIT_USAGE, "consume: --key and --no-verify exclude each other");
        if (key && !agent)
                return ctl_fail(CTL_EXIT_USAGE, "consume: --key needs --agent NAME (the agent the handoff must be addressed to)");
        if (key) {
                msg[0] = '\0';
                r = hd_key_load(key, &k, msg, sizeof(msg));
                if (r < 0)
                        return ctl_fail(CTL_EXIT_USAGE, "consume: %s", msg[0] ? msg : strerror(-r));
                o.lookup = consume_one_key;
                o.userdata = k;
        }
        o.agent = agent;
        o.resume_window_s = window;
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
                r = consume_opts_from_config(cfg, !key && !no_verify, &o);
                if (r < 0) {
                        config_free(cfg);
                        return ctl_fail(CTL_EXIT_ERROR, "consume: %s", strerror(-r));
                }
                window = o.resume_window_s;
                r = xsnprintf(dir, sizeof(dir), "%s/handoffs", a->state_dir);
                spool_dir = strdup(cfg->spool_dir);
                if (!spool_dir) {
                        config_free(cfg);
                        return ctl_fail(CTL_EXIT_ERROR, "consume: out of memory");
                }
        } else {
                /* a typo in the directory is not "none there" */
                if (stat(state_dir, &st) < 0)
                        return ctl_fail(CTL_EXIT_USAGE, "consume: --state-dir %s: %s",
                                        state_dir, strerror(errno));
                if (!S_ISDIR(st.st_mode))
                        return ctl_fail(CTL_EXIT_USAGE, "consume: --state-dir %s: not a directory",
                                        state_dir);
                r = xsnprintf(dir, sizeof(dir), "%s/handoffs", state_dir);
        }
        if (r < 0) {
                config_free(cfg);
                return ctl_fail(CTL_EXIT_USAGE, "consume: path too long");
        }
        if (!o.lookup && !no_verify)
                fprintf(stderr, "handoffctl: consume: no key to verify with: the bootstrap's origin is not checked "
                        "(only the directory's permissions protect it)\n");
        /* Never through a link: handoffs/ swapped for one is someone
         * else's directory. */
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                config_free(cfg);
                if (e == ENOENT)
                        return ctl_fail(CTL_EXIT_NEGATIVE, "consume: %s: no handoffs directory", dir);
                if (e == ELOOP || e == ENOTDIR)
                        return ctl_fail(CTL_EXIT_ERROR, "consume: %s: is a symbolic link or not a directory; refusing it", dir);
                return ctl_fail(CTL_EXIT_ERROR, "consume: %s: %s", dir, strerror(e));
        }
        r = hd_consume_with(fd, id, &o, hd_now_usec(), &b, &v);
        config_free(cfg);
        if (r == -ENOENT)
                return consume_none(dir, spool_dir, id, agent);
        if (r == -ESTALE)
                return ctl_fail(CTL_EXIT_STALE, "consume: %s: %s is older than the resume window (%llds); left for the sweeper",
                                dir, id, (long long)window);
        if (r == -EBADMSG)
                return ctl_fail(CTL_EXIT_STALE, "consume: %s: refused: %s: %s", dir,
                                hd_reason_name(v.reason), v.detail);
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "consume: %s: %s", dir, strerror(-r));
        if (context) {
                /* the agent reads it, and a person may: lines, no controls */
                printf("%s\n", esc_text(json_string_value(json_object_get(b, "resume_context"))));
        } else {
                _cleanup_free_ char *s = json_dumps(b, JSON_INDENT(2) | JSON_SORT_KEYS);
                if (!s)
                        return ctl_fail(CTL_EXIT_ERROR, "consume: out of memory");
                printf("%s\n", s);
        }
        return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}
