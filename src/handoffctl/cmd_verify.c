/* handoffctl verify: check handoff files the way the daemon does (safe
 * open, parse with limits, MAC, fields, payload, freshness) and print one
 * line per file: "FILE: ok" or "FILE: REASON: detail" on stdout.
 *
 * Keys: --key FILE is the default key.  With --kid NAME=FILE (repeatable) a
 * document naming a "kid" must name one of these; without any --kid the
 * default key serves every document.
 *
 * Exit: 0 all ok; 1 any rejected; 2 bad usage, --now or key; 4 a file could
 * not be read (system error). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "handoff.h"
#include "handoffctl.h"
#include "key.h"
#include "util.h"

#define VERIFY_MAX_KIDS 64
#define VERIFY_MAX_SECONDS (10LL * 366 * 86400)

static void verify_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl verify --key FILE [OPTIONS] FILE...\n"
                "\n"
                "Check handoff files as the daemon would: safe open, parse limits, MAC,\n"
                "fields, payload, freshness.  Prints \"FILE: ok\" or\n"
                "\"FILE: REASON: detail\" per file.\n"
                "\n"
                "  -k, --key FILE           the default key\n"
                "      --kid NAME=FILE      a named key; once given, documents with a\n"
                "                           \"kid\" must name one of these (repeatable)\n"
                "      --now TIME           judge freshness at TIME (ISO-8601 with offset)\n"
                "      --max-window S       never fresh after initiated_at + S (default %d)\n"
                "      --max-clock-skew S   initiated_at may be S ahead (default %d)\n"
                "      --max-size BYTES     file size limit (default %d)\n"
                "  -h, --help               this text\n"
                "      --version            the version\n"
                "\n"
                "Exit: 0 all ok, 1 any rejected, 2 bad usage/--now/key, 4 a file\n"
                "could not be read.\n",
                HD_DEFAULT_MAX_WINDOW, HD_DEFAULT_MAX_CLOCK_SKEW,
                HD_DEFAULT_MAX_SIZE);
}

struct verify_keys {
        const hd_key *def;
        size_t n_kids;
        char *kid_names[VERIFY_MAX_KIDS];
        hd_key *kid_keys[VERIFY_MAX_KIDS];
};

static const hd_key *verify_lookup(void *userdata, const char *kid,
                                   const char *from_agent)
{
        const struct verify_keys *k = userdata;

        if (k->n_kids == 0)
                return k->def;
        if (!kid)
                return k->def;
        for (size_t i = 0; i < k->n_kids; i++)
                if (strcmp(k->kid_names[i], kid) == 0)
                        return k->kid_keys[i];
        return NULL;
}

static void verify_keys_free(struct verify_keys *k)
{
        for (size_t i = 0; i < k->n_kids; i++) {
                free(k->kid_names[i]);
                hd_key_free(k->kid_keys[i]);
        }
        k->n_kids = 0;
}

static int add_kid(struct verify_keys *k, const char *arg)
{
        const char *eq = strchr(arg, '=');
        char err[512] = "";
        hd_key *key = NULL;
        int r;

        if (!eq || eq == arg || !eq[1])
                return ctl_fail(CTL_EXIT_USAGE,
                                "verify: --kid '%s': expected NAME=FILE", arg);
        if (k->n_kids >= VERIFY_MAX_KIDS)
                return ctl_fail(CTL_EXIT_USAGE,
                                "verify: more than %d --kid options",
                                VERIFY_MAX_KIDS);
        r = hd_key_load(eq + 1, &key, err, sizeof(err));
        if (r < 0)
                return ctl_fail(CTL_EXIT_USAGE, "verify: %s",
                                err[0] ? err : strerror(-r));
        k->kid_names[k->n_kids] = strndup(arg, (size_t)(eq - arg));
        if (!k->kid_names[k->n_kids]) {
                hd_key_free(key);
                return ctl_fail(CTL_EXIT_ERROR, "verify: out of memory");
        }
        k->kid_keys[k->n_kids++] = key;
        return 0;
}

/* One file: its verdict line; returns the exit code it stands for. */
static int verify_one(const char *path, struct verify_keys *keys,
                      const hd_limits *lim, const hd_policy *pol,
                      int64_t now)
{
        static const hd_payload_opts popts = { .roles = NULL };
        _cleanup_free_ char *d = NULL, *b = NULL;
        _cleanup_close_ int dirfd = -1;
        _cleanup_json_ json_t *doc = NULL;
        hd_verdict v;
        int r;

        d = strdup(path);
        b = strdup(path);
        if (!d || !b)
                return ctl_fail(CTL_EXIT_ERROR, "verify: out of memory");
        /* the parent is opened normally, the file itself as the daemon
         * opens it: no symlink, no FIFO, no second link */
        dirfd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
                return ctl_fail(CTL_EXIT_ERROR, "verify: %s: %s", path,
                                strerror(errno));
        verdict_clear(&v);
        r = hd_load_at(dirfd, basename(b), lim, &doc, &v);
        if (r == 0) {
                verdict_clear(&v);
                r = hd_verify(doc, verify_lookup, keys, pol, &popts, now, &v);
        }
        if (r == -EBADMSG) {
                printf("%s: %s: %s\n", path, hd_reason_name(v.reason),
                       v.detail);
                return CTL_EXIT_NEGATIVE;
        }
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "verify: %s: %s", path,
                                strerror(-r));
        printf("%s: ok\n", path);
        return CTL_EXIT_OK;
}

int cmd_verify(int argc, char **argv)
{
        enum { OPT_KID = 0x100, OPT_NOW, OPT_MAX_WINDOW, OPT_MAX_SKEW,
               OPT_MAX_SIZE, OPT_VERSION };
        static const struct option opts[] = {
                { "key",            required_argument, NULL, 'k' },
                { "kid",            required_argument, NULL, OPT_KID },
                { "now",            required_argument, NULL, OPT_NOW },
                { "max-window",     required_argument, NULL, OPT_MAX_WINDOW },
                { "max-clock-skew", required_argument, NULL, OPT_MAX_SKEW },
                { "max-size",       required_argument, NULL, OPT_MAX_SIZE },
                { "help",           no_argument,       NULL, 'h' },
                { "version",        no_argument,       NULL, OPT_VERSION },
                {}
        };
        _cleanup_(verify_keys_free) struct verify_keys keys = {};
        _cleanup_(hd_key_freep) hd_key *def = NULL;
        hd_policy pol = { .max_clock_skew_s = HD_DEFAULT_MAX_CLOCK_SKEW,
                          .max_window_s = HD_DEFAULT_MAX_WINDOW };
        hd_limits lim = { .max_size = HD_DEFAULT_MAX_SIZE,
                          .max_depth = HD_DEFAULT_MAX_DEPTH };
        const char *key_path = NULL, *now_arg = NULL;
        int64_t now, x;
        char err[512] = "";
        int c, r, ret = CTL_EXIT_OK;

        while ((c = getopt_long(argc, argv, "k:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'k':
                        key_path = optarg;
                        break;
                case OPT_KID:
                        r = add_kid(&keys, optarg);
                        if (r != 0)
                                return r;
                        break;
                case OPT_NOW:
                        now_arg = optarg;
                        break;
                case OPT_MAX_WINDOW:
                case OPT_MAX_SKEW:
                        if (parse_int64(optarg, 0, VERIFY_MAX_SECONDS, &x) < 0)
                                return ctl_fail(CTL_EXIT_USAGE,
                                                "verify: %s '%s': not a number of seconds",
                                                c == OPT_MAX_WINDOW ? "--max-window" : "--max-clock-skew",
                                                optarg);
                        if (c == OPT_MAX_WINDOW)
                                pol.max_window_s = x;
                        else
                                pol.max_clock_skew_s = x;
                        break;
                case OPT_MAX_SIZE:
                        if (parse_int64(optarg, 1, 1LL << 30, &x) < 0)
                                return ctl_fail(CTL_EXIT_USAGE,
                                                "verify: --max-size '%s': not a size in bytes",
                                                optarg);
                        lim.max_size = (size_t)x;
                        break;
                case 'h':
                        verify_usage(stdout);
                        return CTL_EXIT_OK;
                case OPT_VERSION:
                        printf("handoffctl %s\n", HD_VERSION_STRING);
                        return CTL_EXIT_OK;
                default:
                        verify_usage(stderr);
                        return CTL_EXIT_USAGE;
                }
        }
        if (optind >= argc)
                return ctl_fail(CTL_EXIT_USAGE,
                                "verify: no files given (try --help)");
        if (!key_path && keys.n_kids == 0)
                return ctl_fail(CTL_EXIT_USAGE,
                                "verify: --key is required (try --help)");
        if (now_arg) {
                if (hd_time_parse(now_arg, &now) < 0)
                        return ctl_fail(CTL_EXIT_USAGE,
                                        "verify: --now '%s': not an ISO-8601 time with offset",
                                        now_arg);
        } else {
                now = hd_now_usec();
        }
        if (key_path) {
                r = hd_key_load(key_path, &def, err, sizeof(err));
                if (r < 0)
                        return ctl_fail(CTL_EXIT_USAGE, "verify: %s",
                                        err[0] ? err : strerror(-r));
                keys.def = def;
        }

        for (int i = optind; i < argc; i++) {
                r = verify_one(argv[i], &keys, &lim, &pol, now);
                /* a system error outranks a rejection */
                if (r > ret)
                        ret = r;
        }
        if (fflush(stdout) == EOF)
                return ctl_fail(CTL_EXIT_ERROR, "verify: stdout: %s",
                                strerror(errno));
        return ret;
}
