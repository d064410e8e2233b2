/* handoffctl baton: the Baton sessions of a spool (SPOOL/baton/<id>.json).
 *   baton list [-c CONF | --spool DIR] [--json]: every session, its stage
 *   count and last stage;
 *   baton show [-c CONF | --spool DIR] SESSION [--history] [--json]: one, as
 *   the Markdown block agents get (and the history of its stages) or JSON.
 * Without -c or --spool, the default configuration names the spool.
 *
 * Exit: 0 shown or listed; 1 no such session; 2 bad usage or configuration;
 * 4 a system error. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "files.h"
#include "payload_baton.h"
#include "handoff.h"
#include "handoffctl.h"
#include "util.h"

static void baton_usage(FILE *f)
{
        fprintf(f, "Usage: handoffctl baton show [-c CONF | --spool DIR] SESSION [--history] [--json]\n"
                   "       handoffctl baton list [-c CONF | --spool DIR] [--json]\n\n"
                   "show: the baton of a Baton session.  --history adds every stage\n"
                   "(stage_id, time, patch, resulting baton); --json prints\n"
                   "{\"baton\": {...}, \"history\": [...]}.\n"
                   "list: every session of the spool, its stages and the last one.\n"
                   "\n"
                   "  -c, --config FILE  daemon configuration (default %s)\n"
                   "  -s, --spool DIR    the spool, instead of the configuration's\n"
                   "  -H, --history      show: every stage too\n"
                   "  -j, --json         JSON\n"
                   "  -h, --help         this text\n"
                   "      --version      the version\n"
                   "\n"
                   "Exit: 0 shown or listed, 1 no such session, 2 usage or configuration,\n"
                   "4 error.\n",
                   CONFIG_DEFAULT_PATH);
}

/* The spool's baton/ directory: -1 with the exit code in *code when there
 * is none (ENOENT: *code 0, an empty store) or it cannot be opened. */
static int baton_dir(const char *conf, const char *spool, int *code)
{
        _cleanup_close_ int sfd = -1;
        struct config *cfg = NULL;
        int fd;

        *code = 0;
        if (!spool) {
                int r = ctl_config(conf, &cfg);
                if (r) {
                        *code = r;
                        return -1;
                }
                spool = cfg->spool_dir;
        }
        sfd = open(spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sfd < 0) {
                *code = ctl_fail(errno == ENOENT ? CTL_EXIT_USAGE : CTL_EXIT_ERROR,
                                 "baton: %s: %s", spool, strerror(errno));
                config_free(cfg);
                return -1;
        }
        fd = openat(sfd, "baton", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT)
                *code = ctl_fail(CTL_EXIT_ERROR, "baton: %s/baton: %s", spool, strerror(errno));
        config_free(cfg);
        return fd;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int baton_list(int bfd, bool as_json)
{
        _cleanup_json_ json_t *all = json_array();
        _cleanup_free_ char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *d;

        if (!all)
                return ctl_fail(CTL_EXIT_ERROR, "baton: out of memory");
        if (bfd >= 0) {
                d = opendir_at(bfd);
                if (!d)
                        return ctl_fail(CTL_EXIT_ERROR, "baton: baton/: %s", strerror(errno));
                while ((de = readdir(d))) {
                        size_t l = strlen(de->d_name);
                        char **grown;
                        if (de->d_name[0] == '.' || l <= 5 || strcmp(de->d_name + l - 5, ".json"))
                                continue;
                        if (n == cap) {
                                cap = cap ? 2 * cap : 16;
                                grown = realloc(names, cap * sizeof(*names));
                                if (!grown)
                                        break;
                                names = grown;
                        }
                        names[n] = strndup(de->d_name, l - 5);
                        if (names[n])
                                n++;
                }
                closedir(d);
        }
        if (n)
                qsort(names, n, sizeof(*names), cmp_str);
        for (size_t i = 0; i < n; i++) {
                _cleanup_json_ json_t *doc = NULL;
                /* a key: CREATOR.SESSION_ID, or a bare id (older ones) */
                if (payload_baton_key_valid(names[i]) && hd_baton_load(bfd, names[i], &doc) == 0) {
                        json_t *hist = json_object_get(doc, "history");
                        json_t *last = json_array_get(hist, json_array_size(hist) - 1);
                        json_array_append_new(all, json_pack("{s:s, s:I, s:o, s:o}",
                                "session_id", names[i],
                                "stages", (json_int_t)json_array_size(hist),
                                "last_stage", json_incref(json_object_get(last, "stage_id")) ?: json_null(),
                                "last_at", json_incref(json_object_get(last, "at")) ?: json_null()));
                }
                free(names[i]);
        }
        if (as_json) {
                _cleanup_free_ char *s = json_dumps(all, JSON_INDENT(2));
                printf("%s\n", s ? s : "[]");
        } else if (json_array_size(all) == 0) {
                printf("no sessions\n");
        } else {
                json_t *it;
                size_t i, w = strlen("SESSION");
                json_array_foreach(all, i, it)
                        { size_t l = strlen(json_string_value(json_object_get(it, "session_id"))); w = l > w ? l : w; }
                printf("%-*s  STAGES  LAST\n", (int)w, "SESSION");
                json_array_foreach(all, i, it)
                        printf("%-*s  %6lld  %s %s\n", (int)w,
                               json_string_value(json_object_get(it, "session_id")),
                               (long long)json_integer_value(json_object_get(it, "stages")),
                               esc_line(json_string_value(json_object_get(it, "last_at"))) ?: "-",
                               esc_line(json_string_value(json_object_get(it, "last_stage"))) ?: "-");
                printf("%zu session%s\n", json_array_size(all), json_array_size(all) == 1 ? "" : "s");
        }
        return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
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
                       esc_line(json_string_value(json_object_get(e, "at"))) ?: "?",
                       esc_line(json_string_value(json_object_get(e, "stage_id"))) ?: "?");
                json_object_foreach((json_t *)patch, key, val) {
                        printf("%s %s%s", sep, esc_line(key), json_is_null(val) ? " (reset)" : "");
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
                { "version", no_argument, NULL, 'V' },
                {}
        };
        _cleanup_close_ int bfd = -1;
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_free_ char *md = NULL;
        const char *conf = NULL, *spool = NULL, *session, *sub;
        bool history = false, as_json = false, list;
        int c, r, code;

        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                baton_usage(stdout);
                return CTL_EXIT_OK;
        }
        if (argc >= 2 && !strcmp(argv[1], "--version")) {
                printf("handoffctl %s\n", HD_VERSION_STRING);
                return CTL_EXIT_OK;
        }
        sub = argc >= 2 ? argv[1] : NULL;
        if (!sub || (strcmp(sub, "show") && strcmp(sub, "list")))
                return ctl_fail(CTL_EXIT_USAGE, "baton: %s%s%s (try --help)",
                                sub ? "unknown command '" : "show or list?",
                                sub ? sub : "", sub ? "'; show or list" : "");
        list = !strcmp(sub, "list");
        argc--, argv++;
        optind = 1;
        while ((c = getopt_long(argc, argv, "c:s:Hjh", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': conf = optarg; break;
                case 's': spool = optarg; break;
                case 'H': history = true; break;
                case 'j': as_json = true; break;
                case 'h':
                        baton_usage(stdout);
                        return CTL_EXIT_OK;
                case 'V':
                        printf("handoffctl %s\n", HD_VERSION_STRING);
                        return CTL_EXIT_OK;
                default:
                        baton_usage(stderr);
                        return CTL_EXIT_USAGE;
                }
        }
        if (conf && spool)
                return ctl_fail(CTL_EXIT_USAGE, "baton: -c and --spool exclude each other");
        if (list) {
                if (optind != argc)
                        return ctl_fail(CTL_EXIT_USAGE, "baton list: unexpected argument '%s'",
                                        argv[optind]);
                bfd = baton_dir(conf, spool, &code);
                return code ? code : baton_list(bfd, as_json);
        }
        if (optind + 1 != argc)
                return ctl_fail(CTL_EXIT_USAGE, "baton show: one SESSION is needed (try --help)");
        session = argv[optind];
        /* The session names a file: only ids or keys, never paths. */
        if (!payload_baton_key_valid(session))
                return ctl_fail(CTL_EXIT_USAGE, "baton: '%s' is not a valid session id",
                                session);
        bfd = baton_dir(conf, spool, &code);
        if (code)
                return code;
        if (bfd < 0)
                return ctl_fail(CTL_EXIT_NEGATIVE, "baton: no session '%s'", session);
        r = hd_baton_load(bfd, session, &doc);
        if (r == -ENOENT || r == -EINVAL)
                return ctl_fail(CTL_EXIT_NEGATIVE, "baton: no session '%s'", session);
        if (r == -ENOTUNIQ)
                return ctl_fail(CTL_EXIT_NEGATIVE, "baton: several sessions are named '%s': "
                                "name one by its key, CREATOR.%s (see handoffctl baton list)",
                                session, session);
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "baton: session '%s': %s", session,
                                strerror(-r));

        if (as_json) {
                _cleanup_free_ char *s = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
                if (!s)
                        return ctl_fail(CTL_EXIT_ERROR, "baton: out of memory");
                printf("%s\n", s);
        } else {
                r = hd_payload_render(PT_BATON, json_object_get(doc, "baton"), &md);
                if (r < 0)
                        return ctl_fail(CTL_EXIT_ERROR, "baton: cannot render: %s",
                                        strerror(-r));
                fputs(esc_text(md), stdout);
                if (history)
                        baton_print_history(json_object_get(doc, "history"));
        }
        if (fflush(stdout) != 0)
                return ctl_fail(CTL_EXIT_ERROR, "baton: writing output: %s", strerror(errno));
        return CTL_EXIT_OK;
}
