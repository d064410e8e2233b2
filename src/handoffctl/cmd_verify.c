/* handoffctl verify: check handoff files the way the daemon does (safe
 * open, parse with limits, MAC, fields, payload, freshness) and print one
 * line per file: "FILE: ok" or "FILE: REASON: detail" on stdout.
 *
 * Keys: --key FILE is the default key.  With --kid NAME=FILE (repeatable) a
 * document naming a "kid" must name one of these; without any --kid the
 * default key serves every document.  Without either, the keys of the
 * daemon's configuration (-c, or the default) that this user can read,
 * chosen as the daemon chooses them (config_key_lookup: the sender's own
 * key, kids, public keys, require = sig), with its limits and window.
 *
 * Exit: 0 all ok; 1 any rejected; 2 bad usage, --now, key or configuration;
 * 4 a file could not be read (system error). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "handoff.h"
#include "handoffctl.h"
#include "key.h"
#include "util.h"

#define VERIFY_MAX_KIDS 64
#define VERIFY_MAX_SECONDS (10LL * 366 * 86400)

static void verify_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl verify [-c CONF] [OPTIONS] FILE...\n"
                "       handoffctl verify --key FILE [--kid NAME=FILE]... [OPTIONS] FILE...\n"
                "\n"
                "Check handoff files as the daemon would: safe open, parse limits, MAC,\n"
                "fields, payload, freshness.  Prints \"FILE: ok\" or\n"
                "\"FILE: REASON: detail\" per file.  Without --key or --kid, with the keys\n"
                "of the daemon configuration this user can read, its limits and window.\n"
                "\n"
                "  -c, --config FILE        daemon configuration (default %s)\n"
                "  -k, --key FILE           the default key\n"
                "      --kid NAME=FILE      a named key; once given, documents with a\n"
                "                           \"kid\" must name one of these (repeatable)\n"
                "      --now TIME           judge freshness at TIME (ISO-8601 with offset)\n"
                "      --max-window DURATION\n"
                "                           never fresh after initiated_at + DURATION\n"
                "                           (90, 5m, 1h; default %d s, or the configuration's)\n"
                "      --max-clock-skew DURATION\n"
                "                           initiated_at may be this far ahead (default %d s)\n"
                "      --max-size BYTES     file size limit (default %d)\n"
                "  -h, --help               this text\n"
                "      --version            the version\n"
                "\n"
                "Exit: 0 all ok, 1 any rejected, 2 bad usage/--now/key/configuration,\n"
                "4 a file could not be read.\n",
                CONFIG_DEFAULT_PATH, HD_DEFAULT_MAX_WINDOW, HD_DEFAULT_MAX_CLOCK_SKEW,
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

static void config_freep(struct config **c)
{
        config_free(*c);
}

/* No --key, no --kid: the daemon's keys (those this user can read, a
 * sender's own key it cannot read standing in as a random one, as for
 * consume), limits, window and payload roles. */
static int verify_from_config(const char *conf, struct config **cfg, hd_policy *pol,
                              hd_limits *lim, hd_payload_opts *popts)
{
        hd_consume_opts o = {};
        int r;

        r = ctl_config(conf, cfg);
        if (r) {
                if (!conf)
                        ctl_fail(CTL_EXIT_USAGE, "verify: give --key FILE, or -c CONF");
                return r;
        }
        r = consume_opts_from_config(*cfg, true, &o);
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "verify: %s", strerror(-r));
        if (r == 0)
                return ctl_fail(CTL_EXIT_USAGE,
                                "verify: this user can read none of the keys %s names "
                                "(give --key FILE)", (*cfg)->path);
        *pol = o.policy;
        lim->max_size = (*cfg)->max_file_size;
        popts->roles = (const char *const *)(*cfg)->roles;
        return 0;
}

/* One file: its verdict line; returns the exit code it stands for. */
static int verify_one(const char *path, hd_key_lookup_fn lookup, void *keys,
                      const hd_limits *lim, const hd_policy *pol,
                      const hd_payload_opts *popts, int64_t now)
{
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
                r = hd_verify(doc, lookup, keys, pol, popts, now, &v);
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
                { "config",         required_argument, NULL, 'c' },
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
        _cleanup_(config_freep) struct config *cfg = NULL;
        hd_policy pol = { .max_clock_skew_s = HD_DEFAULT_MAX_CLOCK_SKEW,
                          .max_window_s = HD_DEFAULT_MAX_WINDOW };
        hd_limits lim = { .max_size = HD_DEFAULT_MAX_SIZE,
                          .max_depth = HD_DEFAULT_MAX_DEPTH };
        hd_payload_opts popts = { .roles = NULL };
        hd_key_lookup_fn lookup = verify_lookup;
        void *lookup_data = &keys;
        const char *key_path = NULL, *now_arg = NULL, *conf = NULL;
        /* given on the command line: they outrank the configuration's */
        int64_t window = -1, skew = -1, size = -1;
        int64_t now;
        char err[512] = "";
        int c, r, ret = CTL_EXIT_OK;

        while ((c = getopt_long(argc, argv, "c:k:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c':
                        conf = optarg;
                        break;
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
                case OPT_MAX_SKEW: {
                        int64_t *dst = c == OPT_MAX_WINDOW ? &window : &skew;
                        if (config_parse_duration(optarg, dst) < 0 || *dst > VERIFY_MAX_SECONDS)
                                return ctl_fail(CTL_EXIT_USAGE,
                                                "verify: %s '%s': not a duration (like 90, 5m, 1h)",
                                                c == OPT_MAX_WINDOW ? "--max-window" : "--max-clock-skew",
                                                optarg);
                        break;
                }
                case OPT_MAX_SIZE:
                        if (parse_int64(optarg, 1, 1LL << 30, &size) < 0)
                                return ctl_fail(CTL_EXIT_USAGE,
                                                "verify: --max-size '%s': not a size in bytes",
                                                optarg);
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
        if (conf && (key_path || keys.n_kids))
                return ctl_fail(CTL_EXIT_USAGE,
                                "verify: -c verifies with the configuration's keys: give -c or "
                                "--key/--kid, not both");
        if (!key_path && keys.n_kids == 0) {
                r = verify_from_config(conf, &cfg, &pol, &lim, &popts);
                if (r != 0)
                        return r;
                lookup = config_key_lookup;
                lookup_data = cfg;
        }
        if (window >= 0)
                pol.max_window_s = window;
        if (skew >= 0)
                pol.max_clock_skew_s = skew;
        if (size > 0)
                lim.max_size = (size_t)size;
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
                r = verify_one(argv[i], lookup, lookup_data, &lim, &pol, &popts, now);
                /* a system error outranks a rejection */
                if (r > ret)
                        ret = r;
        }
        if (fflush(stdout) == EOF)
                return ctl_fail(CTL_EXIT_ERROR, "verify: stdout: %s",
                                strerror(errno));
        return ret;
}
