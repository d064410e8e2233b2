/* handoffd: options, configuration check (-n), then the loop.
 *
 * Exit codes (handoffd(8)): 0 stopped by SIGTERM/SIGINT or -n found no
 * problem, 1 a fatal runtime error, 2 bad usage or a bad configuration. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "daemon.h"
#include "log.h"

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffd [OPTIONS]\n"
                "Watch a handoff spool: verify, claim and deliver signed handoffs.\n\n"
                "  -c, --config FILE     configuration (default %s)\n"
                "  -f, --foreground      stay in the foreground (always: handoffd never forks)\n"
                "  -n, --check-config    check the configuration and keys, then exit\n"
                "  -v, --verbose         log debug messages too\n"
                "  -h, --help            show this help\n"
                "  -V, --version         show the version\n\n"
                "Exit codes: 0 clean stop, 1 fatal error, 2 usage or configuration error.\n"
                "See handoffd(8) and handoffd.conf(5).\n",
                CONFIG_DEFAULT_PATH);
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "foreground", no_argument, NULL, 'f' },
                { "check-config", no_argument, NULL, 'n' },
                { "verbose", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *path = CONFIG_DEFAULT_PATH;
        bool check_only = false, verbose = false;
        struct config *cfg = NULL;
        char *err = NULL;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:fnvhV", opts, NULL)) != -1) {
                switch (c) {
                case 'c': path = optarg; break;
                case 'f': break;
                case 'n': check_only = true; break;
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

        r = config_load(path, true, &cfg, &err);
        if (r < 0) {
                fprintf(stderr, "%s\n", err ? err : strerror(-r));
                free(err);
                return 2;
        }
        if (check_only) {
                printf("%s: ok (%zu agent(s), spool %s)\n", path, cfg->n_agents, cfg->spool_dir);
                config_free(cfg);
                return 0;
        }
        /* Nothing we create is for others; explicit modes add the group. */
        umask(0027);
        r = daemon_run(path, cfg);
        return r < 0 ? 1 : 0;
}
