/* handoffctl baton show (-c CONF | --spool DIR) SESSION [--history] [--json]:
 * a Baton session from SPOOL/baton/<session_id>.json, as the Markdown block
 * agents get (and the history of its stages) or as JSON. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "handoff.h"
#include "handoffctl.h"
#include "util.h"

static void baton_usage(FILE *f)
{
        fprintf(f, "Usage: handoffctl baton show (-c CONF | --spool DIR) SESSION [--history] [--json]\n\n"
                   "Show the baton of a Baton session.  --history adds every stage\n"
                   "(stage_id, time, patch, resulting baton); --json prints\n"
                   "{\"baton\": {...}, \"history\": [...]}.\n");
}

static void baton_print_history(const json_t *hist)
{
        const json_t *e;
        size_t i;

        printf("\n## History\n");
        json_array_foreach(hist, i, e) {
                const json_t *patch = json_object_get(e, "patch");
                const char *key, *sep = "";
                json_t *val;

                printf("%zu. %s %s:", i + 1,
                       json_string_value(json_object_get(e, "at")) ?: "?",
                       json_string_value(json_object_get(e, "stage_id")) ?: "?");
                json_object_foreach((json_t *)patch, key, val) {
                        printf("%s %s%s", sep, key, json_is_null(val) ? " (reset)" : "");
                        sep = ",";
                }
                printf("\n");
        }
}

int cmd_baton(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "spool", required_argument, NULL, 's' },
                { "history", no_argument, NULL, 'H' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        _cleanup_close_ int sfd = -1, bfd = -1;
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_free_ char *md = NULL, *err = NULL;
        const char *conf = NULL, *spool = NULL, *session;
        struct config *cfg = NULL;
        bool history = false, as_json = false;
        int c, r;

        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                baton_usage(stdout);
                return CTL_EXIT_OK;
        }
        if (argc < 2 || strcmp(argv[1], "show") != 0) {
                baton_usage(stderr);
                return CTL_EXIT_USAGE;
        }
        argc--, argv++;
        optind = 1;
        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': conf = optarg; break;
                case 's': spool = optarg; break;
                case 'H': history = true; break;
                case 'j': as_json = true; break;
                case 'h':
                        baton_usage(stdout);
                        return CTL_EXIT_OK;
                default:
                        baton_usage(stderr);
                        return CTL_EXIT_USAGE;
                }
        }
        if (optind + 1 != argc || (!conf == !spool)) {
                baton_usage(stderr);
                return CTL_EXIT_USAGE;
        }
        session = argv[optind];
        /* The session names a file: only ids, never paths. */
        if (!hd_id_valid(session))
                return ctl_fail(CTL_EXIT_USAGE, "baton: '%s' is not a valid session id",
                                session);
        if (conf) {
                r = config_load(conf, false, &cfg, &err);
                if (r < 0)
                        return ctl_fail(CTL_EXIT_USAGE, "%s", err ? err : strerror(-r));
                sfd = open(cfg->spool_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                r = -errno;
                if (sfd < 0) {
                        ctl_fail(CTL_EXIT_ERROR, "%s: %s", cfg->spool_dir, strerror(-r));
                        config_free(cfg);
                        return CTL_EXIT_ERROR;
                }
                config_free(cfg);
        } else {
                sfd = open(spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (sfd < 0)
                        return ctl_fail(CTL_EXIT_ERROR, "%s: %m", spool);
        }
        bfd = openat(sfd, "baton", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (bfd < 0 && errno == ENOENT)
                return ctl_fail(CTL_EXIT_NEGATIVE, "baton: no session '%s'", session);
        if (bfd < 0)
                return ctl_fail(CTL_EXIT_ERROR, "baton: spool baton/: %m");
        r = hd_baton_load(bfd, session, &doc);
        if (r == -ENOENT)
                return ctl_fail(CTL_EXIT_NEGATIVE, "baton: no session '%s'", session);
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "baton: session '%s': %s", session,
                                strerror(-r));

        if (as_json) {
                _cleanup_free_ char *s = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
                if (!s)
                        return ctl_fail(CTL_EXIT_ERROR, "baton: out of memory");
                printf("%s\n", s);
        } else {
                r = hd_payload_render("baton/1", json_object_get(doc, "baton"), &md);
                if (r < 0)
                        return ctl_fail(CTL_EXIT_ERROR, "baton: cannot render: %s",
                                        strerror(-r));
                fputs(md, stdout);
                if (history)
                        baton_print_history(json_object_get(doc, "history"));
        }
        if (fflush(stdout) != 0)
                return ctl_fail(CTL_EXIT_ERROR, "writing output: %m");
        return CTL_EXIT_OK;
}
