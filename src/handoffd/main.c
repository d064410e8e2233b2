/* handoffd: options, configuration check (-n), then the loop.
 *
 * Exit codes (handoffd(8)): 0 stopped by SIGTERM/SIGINT or -n found no
 * problem, 1 a fatal runtime error, 2 bad usage or a bad configuration (or,
 * with --strict, one the daemon would warn about), 3 (-n only) the daemon
 * would start with an agent out of service. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents.h"
#include "config.h"
#include "daemon.h"
#include "log.h"
#include "spool.h"

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffd [OPTIONS]\n"
                "Watch a handoff spool: verify, claim and deliver signed handoffs.\n\n"
                "  -c, --config FILE     configuration (default %s)\n"
                "  -f, --foreground      stay in the foreground (always: handoffd never forks)\n"
                "  -n, --check-config    check the configuration and keys, print what the\n"
                "                        daemon would warn about at start, then exit\n"
                "      --strict          a warning about the configuration is an error\n"
                "  -v, --verbose         log debug messages too\n"
                "  -h, --help            show this help\n"
                "  -V, --version         show the version\n\n"
                "Exit codes: 0 clean stop (or -n: a good configuration), 1 fatal error,\n"
                "2 usage or configuration error (with --strict, also a warning),\n"
                "3 (-n) an agent would be out of service.\n"
                "See handoffd(8) and handoffd.conf(5).\n",
                CONFIG_DEFAULT_PATH);
}

/* As the start logs it (service.c): -n prints the start's lines. */
static void print_warning(void *userdata, const char *msg)
{
        (void)userdata;
        log_warning("%s", msg);
}

/* [hub] is handoff-hubd's (handoff-hubd -n checks it whole); -n says
 * what it can see cheaply from here: a path that does not exist.  One
 * this user may not look into is the hub's business.  How many. */
static int hub_warnings(const struct config *c)
{
        const struct config_hub *h = &c->hub;
        const struct { const char *key, *path; int line; } paths[] = {
                { "token_dir", h->token_dir, h->line_token_dir },
                { "tls_cert", h->tls_cert, h->line_tls_cert },
                { "tls_key", h->tls_key, h->line_tls_key },
        };
        struct stat st;
        int n = 0;

        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                if (!paths[i].path || paths[i].path[0] != '/' || stat(paths[i].path, &st) == 0 ||
                    (errno != ENOENT && errno != ENOTDIR))
                        continue;
                log_warning("%s:%d: [hub] %s %s does not exist: handoff-hubd would not start "
                            "(handoff-hubd -n checks [hub])", c->path, paths[i].line,
                            paths[i].key, paths[i].path);
                n++;
        }
        return n;
}

/* A set-up refused at start (a spool lock file not ours) is the
 * operator's to fix, like an unsafe key: 2, which the unit does not
 * restart into the same refusal.  An agent's unsafe directory is not
 * one: only that agent is out of service (agents.c). */
static int start_exit(int r)
{
        return r == -EPERM ? 2 : r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
        enum { OPT_STRICT = 0x100 };
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "foreground", no_argument, NULL, 'f' },
                { "check-config", no_argument, NULL, 'n' },
                { "strict", no_argument, NULL, OPT_STRICT },
                { "verbose", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *path = CONFIG_DEFAULT_PATH;
        bool check_only = false, verbose = false, strict = false;
        struct config *cfg = NULL;
        char *err = NULL;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:fnvhV", opts, NULL)) != -1) {
                switch (c) {
                case 'c': path = optarg; break;
                case 'f': break;
                case 'n': check_only = true; break;
                case OPT_STRICT: strict = true; break;
                case 'v': verbose = true; break;
                case 'h': usage(stdout); return 0;
                case 'V': printf("handoffd %s\n", HD_VERSION_STRING); return 0;
                default: usage(stderr); return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "handoffd: unexpected argument '%s'\n", argv[optind]);
                return 2;
        }
        log_setup(verbose ? LOG_DEBUG : LOG_INFO);
        signal(SIGPIPE, SIG_IGN);

        /* -n and the start check the same, the relay's keys included. */
        r = daemon_config_load(path, &cfg, &err);
        if (r < 0) {
                fprintf(stderr, "%s\n", err ? err : strerror(-r));
                free(err);
                return 2;
        }
        /* The daemon warns at start; -n and --strict look now. */
        int warnings = check_only || strict ? config_warnings(cfg, print_warning, NULL) : 0;
        /* -n also makes the start's checks of the agents' directories
         * (spool_check(): the same code as the start), and prints each
         * line the start would log of them, once. */
        struct agents_count ac = { 0 };
        if (check_only) {
                r = spool_check(cfg, &ac);
                if (r < 0) {
                        log_flush();
                        fprintf(stderr, "%s: the daemon would not start: %s\n", path, strerror(-r));
                        config_free(cfg);
                        return start_exit(r);
                }
                warnings += (int)ac.warnings + hub_warnings(cfg);
        }
        if (strict && warnings > 0) {
                log_flush();
                fprintf(stderr, "%s: %d warning(s), an error with --strict\n", path, warnings);
                config_free(cfg);
                return 2;
        }
        if (check_only) {
                log_flush();
                if (ac.unserved > 0) {
                        fprintf(stderr, "%s: %zu of %zu agent(s) would be out of service (above); "
                                "the daemon would start and serve %zu\n",
                                path, ac.unserved, cfg->n_agents, ac.served);
                } else {
                        printf("%s: ok (%zu agent(s), spool %s", path, cfg->n_agents,
                               cfg->spool_dir);
                        if (warnings > 0)
                                printf(", %d warning(s)", warnings);
                        printf(")\n");
                }
                for (size_t i = 0; i < cfg->n_remotes; i++)
                        if (cfg->remotes[i].a2a)
                                printf("a2a: [remote %s] sent to %s (token_file readable)\n",
                                       cfg->remotes[i].name, cfg->remotes[i].a2a);
                if (config_relay_on(cfg))
                        printf("relay: host %s; receipts: %s, %s\n", cfg->relay.host,
                               cfg->relay.host_key ? "sent (host_key)"
                                                   : "not sent ([relay] host_key not set)",
                               cfg->relay.host_pubkey_dir
                               ? "accepted (host_pubkey_dir)"
                               : "not accepted ([relay] host_pubkey_dir not set: wait stops at relayed)");
                config_free(cfg);
                return ac.unserved > 0 ? 3 : 0;
        }
        /* Nothing we create is for others; explicit modes add the group. */
        umask(0027);
        return start_exit(daemon_run(path, cfg));
}
