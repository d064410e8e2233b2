/* handoffctl complete: the agent that consumed a handoff says what came
 * of it (hd_complete()), and learns whether handoffd recorded it.
 *
 * Exit: 0 recorded (with --no-wait: written); 1 refused (by handoffd, or
 * here for what it would refuse: too large, not UTF-8); 2 usage, config
 * or key error; 3 written, not taken by handoffd within --timeout (it
 * stays for handoffd); 4 a system error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "complete.h"
#include "config.h"
#include "files.h"
#include "handoffctl.h"
#include "key.h"
#include "submit.h"
#include "util.h"

#define COMPLETE_DEFAULT_TIMEOUT 30

static void complete_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl complete [-c CONF] --agent NAME [--key FILE] HANDOFF_ID\n"
                "                           [--text TEXT | --data FILE]\n"
                "                           [--failed REASON | --input-required TEXT]\n"
                "                           [--timeout SECONDS | --no-wait]\n"
                "\n"
                "Report what came of a handoff agent NAME consumed: completed, or with\n"
                "--failed why it failed, with a text or a JSON document as its result.\n"
                "The result is signed with the agent's key and written into its\n"
                "handoffs/ directory; handoffd verifies it and keeps it with the archived\n"
                "item (handoffctl show, wait --until completed, the hub).  The first\n"
                "result of a handoff stands.\n"
                "\n"
                "  -c, --config FILE      daemon configuration (default %s)\n"
                "  -a, --agent NAME       the agent that consumed it\n"
                "  -k, --key FILE         the agent's signing key (default: its key in the\n"
                "                         configuration, else the default key)\n"
                "  -T, --text TEXT        the result as text\n"
                "  -D, --data FILE        the result as JSON, any value (- : stdin)\n"
                "  -F, --failed REASON    the work failed, and why\n"
                "  -I, --input-required TEXT\n"
                "                         the agent asks the sender TEXT first (A2A:\n"
                "                         the task is INPUT_REQUIRED; the answer comes\n"
                "                         as a new handoff of the same task)\n"
                "  -t, --timeout SECONDS  wait this long for handoffd's word (default %d)\n"
                "      --no-wait          write it and return\n"
                "  -h, --help             this text\n"
                "      --version          the version\n"
                "\n"
                "Exit: 0 recorded, 1 refused (the reason is printed), 2 usage,\n"
                "3 not taken by handoffd in time (it stays for it), 4 error.\n",
                CONFIG_DEFAULT_PATH, COMPLETE_DEFAULT_TIMEOUT);
}

/* --data: any JSON value, read no further than a result can hold. */
static int load_data(const char *path, json_t **ret)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = -1;
        json_error_t err;
        size_t len = 0;
        int r;

        fd = !strcmp(path, "-") ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)
                                : open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return ctl_fail(CTL_EXIT_USAGE, "complete: --data %s: %s", path, strerror(errno));
        r = read_all(fd, HD_RESULT_MAX_SIZE + 1, 0, &buf, &len);
        if (r < 0 && r != -EFBIG)
                return ctl_fail(CTL_EXIT_ERROR, "complete: --data %s: %s", path, strerror(-r));
        if (r == -EFBIG || len > HD_RESULT_MAX_SIZE)
                return ctl_fail(CTL_EXIT_NEGATIVE, "complete: too_large: --data %s is more than "
                                "%d bytes, the most a result holds", path, HD_RESULT_MAX_SIZE);
        /* the same rules as hd_parse(): no duplicate keys, no NUL */
        *ret = json_loadb(buf, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
        if (!*ret)
                return ctl_fail(CTL_EXIT_NEGATIVE, "complete: parse_error: --data %s: line %d: %s",
                                path, err.line, err.text);
        return 0;
}

int cmd_complete(int argc, char **argv)
{
        enum { OPT_NO_WAIT = 0x100, OPT_VERSION };
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "agent", required_argument, NULL, 'a' },
                { "key", required_argument, NULL, 'k' },
                { "text", required_argument, NULL, 'T' },
                { "data", required_argument, NULL, 'D' },
                { "failed", required_argument, NULL, 'F' },
                { "input-required", required_argument, NULL, 'I' },
                { "timeout", required_argument, NULL, 't' },
                { "no-wait", no_argument, NULL, OPT_NO_WAIT },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, OPT_VERSION },
                {}
        };
        const char *conf = NULL, *agent = NULL, *key = NULL, *data_path = NULL, *id;
        _cleanup_(hd_key_freep) hd_key *k = NULL;
        _cleanup_json_ json_t *data = NULL;
        _cleanup_close_ int fd = -1;
        hd_result res = { 0 };
        struct complete_out out;
        struct config *cfg = NULL;
        int64_t timeout = COMPLETE_DEFAULT_TIMEOUT;
        bool no_wait = false, do_fsync;
        struct submit_err se;
        char dir[PATH_MAX], msg[512] = "";
        int c, r;

        while ((c = getopt_long(argc, argv, "c:a:k:T:D:F:I:t:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': conf = optarg; break;
                case 'a': agent = optarg; break;
                case 'k': key = optarg; break;
                case 'T': res.text = optarg; break;
                case 'D': data_path = optarg; break;
                case 'F': res.failed = optarg; break;
                case 'I': res.input_required = optarg; break;
                case 't':
                        if (config_parse_duration(optarg, &timeout) < 0 || timeout < 1)
                                return ctl_fail(CTL_EXIT_USAGE, "complete: --timeout '%s' is not a duration", optarg);
                        break;
                case OPT_NO_WAIT: no_wait = true; break;
                case 'h': complete_usage(stdout); return CTL_EXIT_OK;
                case OPT_VERSION: printf("handoffctl %s\n", HD_VERSION_STRING); return CTL_EXIT_OK;
                default: complete_usage(stderr); return CTL_EXIT_USAGE;
                }
        }
        if (optind != argc - 1)
                return ctl_fail(CTL_EXIT_USAGE, "complete: one HANDOFF_ID is needed (try --help)");
        id = argv[optind];
        if (!hd_id_valid(id))
                return ctl_fail(CTL_EXIT_USAGE, "complete: '%s' is not a handoff_id", id);
        if (!agent)
                return ctl_fail(CTL_EXIT_USAGE, "complete: --agent NAME is required");
        if (!hd_agent_valid(agent))
                return ctl_fail(CTL_EXIT_USAGE, "complete: '%s' is not an agent name", agent);
        if (res.text && data_path)
                return ctl_fail(CTL_EXIT_USAGE, "complete: --text or --data, not both");
        if (res.failed && utf8_blank(res.failed))
                return ctl_fail(CTL_EXIT_USAGE, "complete: --failed needs a reason");
        if (res.input_required && (res.text || res.failed))
                return ctl_fail(CTL_EXIT_USAGE, "complete: --input-required is the result's "
                                "text: not with --text or --failed");
        if (res.input_required && utf8_blank(res.input_required))
                return ctl_fail(CTL_EXIT_USAGE, "complete: --input-required needs a question");
        if (data_path) {
                r = load_data(data_path, &data);
                if (r)
                        return r;
                res.data = data;
        }
        r = ctl_config(conf, &cfg);
        if (r)
                return r;
        const struct config_agent *a = config_agent(cfg, agent);
        /* the key handoffd checks the agent's documents with */
        if (a && !key)
                key = a->key_path ? a->key_path : cfg->default_key_path;
        if (!a)
                r = ctl_fail(CTL_EXIT_USAGE, "complete: agent '%s' is not in %s", agent,
                             conf ? conf : CONFIG_DEFAULT_PATH);
        else if (xsnprintf(dir, sizeof(dir), "%s/handoffs", a->state_dir) < 0)
                r = ctl_fail(CTL_EXIT_USAGE, "complete: %s/handoffs: path too long", a->state_dir);
        else if (!key)
                r = ctl_fail(CTL_EXIT_USAGE, "complete: no key for %s in the configuration: "
                             "give --key FILE", agent);
        else if (!strncmp(key, "credential:", 11))
                r = ctl_fail(CTL_EXIT_USAGE, "complete: the key of %s is a systemd credential "
                             "(%s): give --key FILE", agent, key);
        else if ((r = hd_key_load(key, &k, msg, sizeof(msg))) < 0)
                r = ctl_fail(CTL_EXIT_USAGE, "complete: %s", msg[0] ? msg : strerror(-r));
        else if (submit_key_check(k, key, NULL, &se) != 0)
                r = ctl_fail(se.code, "complete: %s", se.msg);
        else
                r = 0;
        do_fsync = cfg->fsync;
        config_free(cfg);
        if (r)
                return r;
        /* Never through a link: handoffs/ swapped for one is someone
         * else's directory. */
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return ctl_fail(errno == ENOENT ? CTL_EXIT_USAGE : CTL_EXIT_ERROR,
                                "complete: %s: %s", dir, strerror(errno));
        r = complete_run(dir, fd, id, agent, &res, k, do_fsync, no_wait ? 0 : timeout * 1000, &out);
        if (r != CTL_EXIT_OK)
                return ctl_fail(r, "complete: %s", out.msg);
        printf("%s\n", out.msg);
        return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}
