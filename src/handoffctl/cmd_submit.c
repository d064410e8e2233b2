/* handoffctl submit: build a protocol_version 1 handoff the way the real
 * producer does, check it locally, sign it and publish it into a spool:
 * written atomically into tmp/, then moved (no replace) into handoff/.
 * With --output the signed file is written there instead (or to stdout),
 * for a spool elsewhere: what a client posts to handoff-hubd.
 *
 * The spool and the key come from the daemon's configuration unless --spool
 * and --key name them; a spool is never created by accident (a typo would
 * make one nothing watches) unless --create-spool says so.
 *
 * Exit: 0 submitted (handoff_id on stdout); 1 refused locally (the reason
 * as the daemon would name it) or the handoff_id is already in handoff/;
 * 2 bad usage or configuration, no such spool, unreadable key, transcript
 * or payload file; 4 I/O error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "handoff.h"
#include "handoffctl.h"
#include "key.h"
#include "submit.h"
#include "util.h"


static void submit_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl submit [-c CONF] --from AGENT --to AGENT [OPTIONS]\n"
                "       handoffctl submit --spool DIR --key FILE --from AGENT --to AGENT [OPTIONS]\n"
                "       handoffctl submit --key FILE --from AGENT --to AGENT --output FILE|- [OPTIONS]\n"
                "\n"
                "Sign a protocol_version 1 handoff and drop it into the spool's handoff/\n"
                "(via tmp/).  Prints the handoff_id.  The spool and the key come from the\n"
                "daemon configuration (-c, default %s)\n"
                "unless --spool and --key are given.  With --output, the signed file is\n"
                "written to FILE (or - for stdout) instead of into a spool.\n"
                "\n"
                "  -c, --config FILE      daemon configuration: its [spool] dir, and the key\n"
                "                         it checks AGENT's handoffs with\n"
                "  -s, --spool DIR        the spool (it must exist, with its handoff/)\n"
                "      --create-spool     create the spool and its directories when missing\n"
                "  -o, --output FILE|-    write the signed file to FILE (replaced whole,\n"
                "                         mode 0600) or stdout, not into a spool; the\n"
                "                         handoff_id is printed for FILE only\n"
                "  -k, --key FILE         the signing key (0600, or 0640 for a group): an\n"
                "                         HMAC key, or an Ed25519 secret key (sig + kid)\n"
                "  -f, --from AGENT       from_agent\n"
                "  -t, --to AGENT         to_agent (default: the payload's target agent)\n"
                "  -r, --reason TEXT      reason (default \"handoff\")\n"
                "      --transcript FILE  JSON array of {\"role\", \"text\"} (default [])\n"
                "      --context TEXT     context_summary\n"
                "      --ttl DURATION     expires_at = now + DURATION (90, 5m, 1h, 2d;\n"
                "                         default %d, at most 366d)\n"
                "      --id ID            handoff_id (default UNIXTIME-FROM-TO-16HEX)\n"
                "      --kid NAME         kid: the name of the HMAC key the receiver uses\n"
                "                         (an Ed25519 key sets its own kid)\n"
                "      --type TYPE        payload_type (" CTL_PAYLOAD_TYPES ");\n"
                "                         needs --payload\n"
                "      --payload FILE|-   the payload for --type\n"
                "      --caller-hash HEX  caller_hash (16 lowercase hex chars)\n"
                "  -h, --help             this text\n"
                "      --version          the version\n"
                "\n"
                "With a configuration and no --output, a warning on stderr when no\n"
                "[agent TO] is in it (the handoff is still written: another daemon may\n"
                "serve TO).\n"
                "\n"
                "Exit: 0 submitted, 1 refused (\"submit: REASON: detail\") or the id is\n"
                "already pending, 2 bad usage or configuration, no such spool, unreadable\n"
                "key or input file, 4 I/O error.\n",
                CONFIG_DEFAULT_PATH, SUBMIT_DEFAULT_TTL);
}

struct submit_args {
        const char *conf, *spool, *key, *from, *to, *reason, *transcript, *context;
        const char *id, *kid, *type, *payload, *caller_hash;
        const char *output;     /* --output FILE, "-": stdout; NULL: the spool */
        int64_t ttl;
        bool create_spool;
};

static void config_freep(struct config **c)
{
        config_free(*c);
}

/* --from/--to before anything else: a bad name is the user's typo, not a
 * handoff_id the daemon would refuse. */
static int check_agent_arg(const char *opt, const char *name)
{
        if (hd_agent_valid(name))
                return 0;
        return ctl_fail(CTL_EXIT_USAGE,
                        "submit: %s '%s': not a valid agent name (lowercase letters, digits, '-', '_')",
                        opt, name);
}

/* The spool and the key of the configuration, for what the command line
 * does not give.  The key is the one the daemon checks from's handoffs
 * with: the agent's own, else the default. */
static int submit_from_config(struct submit_args *a, struct config **cfg)
{
        const struct config_agent *ag;
        int r;

        r = ctl_config(a->conf, cfg);
        if (r) {
                if (!a->conf)
                        ctl_fail(CTL_EXIT_USAGE, a->output
                                 ? "submit: give --key FILE, or -c CONF"
                                 : "submit: give -c CONF, or --spool DIR and --key FILE");
                return r;
        }
        if (!a->spool)
                a->spool = (*cfg)->spool_dir;
        if (!a->key) {
                ag = config_agent(*cfg, a->from);
                a->key = ag && ag->key_path ? ag->key_path : (*cfg)->default_key_path;
                if (!a->key)
                        return ctl_fail(CTL_EXIT_USAGE,
                                        "submit: %s has no [keys] default for %s: give --key FILE",
                                        (*cfg)->path, a->from);
                if (!strncmp(a->key, "credential:", 11))
                        return ctl_fail(CTL_EXIT_USAGE,
                                        "submit: the key in %s is a systemd credential (%s): give --key FILE",
                                        (*cfg)->path, a->key);
        }
        return 0;
}

/* Without --create-spool the spool must be one: a typo is refused, never
 * made into a spool that nothing watches. */
static int check_spool(const char *spool)
{
        _cleanup_close_ int fd = open(spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0 && errno == ENOENT)
                return ctl_fail(CTL_EXIT_USAGE,
                                "submit: %s: no such spool (--create-spool makes one)", spool);
        if (fd < 0)
                return ctl_fail(CTL_EXIT_ERROR, "submit: %s: %s", spool, strerror(errno));
        if (faccessat(fd, "handoff", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return ctl_fail(errno == ENOENT ? CTL_EXIT_USAGE : CTL_EXIT_ERROR,
                                "submit: %s: not a spool, it has no handoff/ (--create-spool makes one)",
                                spool);
        return 0;
}

static bool caller_hash_valid(const char *s)
{
        if (strlen(s) != 16)
                return false;
        for (; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
                        return false;
        return true;
}

/* The transcript file: any JSON value is taken, hd_validate judges it. */
static int load_transcript(const char *path, json_t **ret)
{
        json_error_t err;
        json_t *t;

        /* the same rules as hd_parse(): no duplicate keys, no NUL */
        t = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
        if (!t) {
                /* err.text already names the file: "unable to open PATH: ..." */
                if (json_error_code(&err) == json_error_cannot_open_file)
                        return ctl_fail(CTL_EXIT_USAGE, "submit: %s",
                                        err.text);
                return ctl_fail(CTL_EXIT_NEGATIVE,
                                "submit: parse_error: %s: line %d: %s", path,
                                err.line, err.text);
        }
        *ret = t;
        return 0;
}

int cmd_submit(int argc, char **argv)
{
        enum { OPT_TRANSCRIPT = 0x100, OPT_TTL, OPT_ID, OPT_KID, OPT_TYPE, OPT_PAYLOAD,
               OPT_CALLER_HASH, OPT_VERSION, OPT_CONTEXT, OPT_CREATE_SPOOL };
        static const struct option opts[] = {
                { "config",      required_argument, NULL, 'c' },
                { "spool",       required_argument, NULL, 's' },
                { "create-spool", no_argument,      NULL, OPT_CREATE_SPOOL },
                { "output",      required_argument, NULL, 'o' },
                { "key",         required_argument, NULL, 'k' },
                { "from",        required_argument, NULL, 'f' },
                { "to",          required_argument, NULL, 't' },
                { "reason",      required_argument, NULL, 'r' },
                { "context",     required_argument, NULL, OPT_CONTEXT },
                { "transcript",  required_argument, NULL, OPT_TRANSCRIPT },
                { "ttl",         required_argument, NULL, OPT_TTL },
                { "id",          required_argument, NULL, OPT_ID },
                { "kid",         required_argument, NULL, OPT_KID },
                { "type",        required_argument, NULL, OPT_TYPE },
                { "payload",     required_argument, NULL, OPT_PAYLOAD },
                { "caller-hash", required_argument, NULL, OPT_CALLER_HASH },
                { "help",        no_argument,       NULL, 'h' },
                { "version",     no_argument,       NULL, OPT_VERSION },
                {}
        };
        struct submit_args a = { .reason = "handoff",
                                 .ttl = SUBMIT_DEFAULT_TTL };
        _cleanup_json_ json_t *transcript = NULL, *payload = NULL;
        _cleanup_(hd_key_freep) hd_key *key = NULL;
        _cleanup_(config_freep) struct config *cfg = NULL;
        _cleanup_free_ char *buf = NULL;
        char err[512], id[SUBMIT_ID_MAX];
        struct submit_err e;
        hd_verdict v;
        size_t len;
        int c, r;

        while ((c = getopt_long(argc, argv, "s:k:f:t:r:c:o:h", opts, NULL)) >= 0) {
                switch (c) {
                case 's': a.spool = optarg; break;
                case 'k': a.key = optarg; break;
                case 'f': a.from = optarg; break;
                case 't': a.to = optarg; break;
                case 'r': a.reason = optarg; break;
                case 'c': a.conf = optarg; break;
                case 'o': a.output = optarg; break;
                case OPT_CONTEXT: a.context = optarg; break;
                case OPT_CREATE_SPOOL: a.create_spool = true; break;
                case OPT_TRANSCRIPT: a.transcript = optarg; break;
                case OPT_ID: a.id = optarg; break;
                case OPT_KID: a.kid = optarg; break;
                case OPT_TYPE: a.type = optarg; break;
                case OPT_PAYLOAD: a.payload = optarg; break;
                case OPT_CALLER_HASH: a.caller_hash = optarg; break;
                case OPT_TTL:
                        /* the duration every other option and key takes */
                        if (config_parse_duration(optarg, &a.ttl) < 0 || a.ttl < 1 ||
                            a.ttl > SUBMIT_MAX_TTL)
                                return ctl_fail(CTL_EXIT_USAGE,
                                                "submit: --ttl '%s': not a duration from 1s to 366d "
                                                "(like 90, 5m, 1h)", optarg);
                        break;
                case 'h':
                        submit_usage(stdout);
                        return CTL_EXIT_OK;
                case OPT_VERSION:
                        printf("handoffctl %s\n", HD_VERSION_STRING);
                        return CTL_EXIT_OK;
                default:
                        submit_usage(stderr);
                        return CTL_EXIT_USAGE;
                }
        }
        if (optind < argc)
                return ctl_fail(CTL_EXIT_USAGE,
                                "submit: unexpected argument '%s' (try --help)",
                                argv[optind]);
        if (!a.from)
                return ctl_fail(CTL_EXIT_USAGE, "submit: --from is required (try --help)");
        r = check_agent_arg("--from", a.from);
        if (r == 0 && a.to)
                r = check_agent_arg("--to", a.to);
        if (r != 0)
                return r;
        if (a.payload && !a.type)
                return ctl_fail(CTL_EXIT_USAGE,
                                "submit: --payload needs --type TYPE (" CTL_PAYLOAD_TYPES ")");
        if (a.type && !a.payload)
                return ctl_fail(CTL_EXIT_USAGE, "submit: --type needs --payload FILE");
        if (a.type && (r = ctl_check_type("submit", a.type)) != 0)
                return r;
        if (a.caller_hash && !caller_hash_valid(a.caller_hash))
                return ctl_fail(CTL_EXIT_USAGE,
                                "submit: --caller-hash '%s': not 16 lowercase hex chars",
                                a.caller_hash);
        /* refuse a bad --id before reading anything: nothing is signed */
        if (a.id && !hd_id_valid(a.id))
                return ctl_fail(CTL_EXIT_NEGATIVE,
                                "submit: bad_id: handoff_id '%s' is not [A-Za-z0-9][A-Za-z0-9_-]{0,127}",
                                a.id);

        if (a.output && (a.spool || a.create_spool))
                return ctl_fail(CTL_EXIT_USAGE, "submit: --output writes no spool: "
                                "give --output or --spool/--create-spool, not both");
        if (a.conf || (!a.spool && !a.output) || !a.key) {
                r = submit_from_config(&a, &cfg);
                if (r != 0)
                        return r;
        }
        if (!a.output && !a.create_spool && (r = check_spool(a.spool)) != 0)
                return r;
        r = hd_key_load(a.key, &key, err, sizeof(err));
        if (r < 0)
                return ctl_fail(CTL_EXIT_USAGE, "submit: %s",
                                err[0] ? err : strerror(-r));
        r = submit_key_check(key, a.key, a.kid, &e);
        if (r != 0)
                return ctl_fail(r, "submit: %s", e.msg);

        if (a.transcript) {
                r = load_transcript(a.transcript, &transcript);
                if (r != 0)
                        return r;
        }

        if (a.type) {
                verdict_clear(&v);
                r = hd_payload_load(a.type, a.payload, &payload, &v);
                if (r == -EBADMSG)
                        return ctl_fail(CTL_EXIT_NEGATIVE, "submit: %s: %s: %s", a.payload,
                                        hd_reason_name(v.reason), v.detail);
                if (r < 0)
                        return ctl_fail(CTL_EXIT_USAGE, "submit: %s: %s",
                                        a.payload, strerror(-r));
                if (!a.to) {
                        a.to = hd_payload_target(a.type, payload);
                        if (a.to && (r = check_agent_arg("--to (from the payload)", a.to)) != 0)
                                return r;
                }
        }
        if (!a.to)
                return ctl_fail(CTL_EXIT_USAGE,
                                "submit: --to is required (the payload names no target)");

        struct submit_req rq = {
                .from = a.from, .to = a.to, .reason = a.reason,
                .context = a.context, .id = a.id, .kid = a.kid,
                .caller_hash = a.caller_hash, .type = a.type,
                .payload = payload, .transcript = transcript, .ttl = a.ttl,
        };
        r = submit_build(&rq, key, &buf, &len, id, &e);
        /* a refusal about the transcript or the payload names its file */
        if (r == CTL_EXIT_NEGATIVE && a.transcript && strstr(e.msg, "transcript"))
                return ctl_fail(r, "submit: %s: %s", a.transcript, e.msg);
        if (r == CTL_EXIT_NEGATIVE && a.payload && strstr(e.msg, "payload"))
                return ctl_fail(r, "submit: %s: %s", a.payload, e.msg);
        if (r == 0 && a.output && !strcmp(a.output, "-")) {
                /* the file's bytes and nothing else: the id is inside */
                if (fwrite(buf, 1, len, stdout) != len || fflush(stdout) == EOF)
                        return ctl_fail(CTL_EXIT_ERROR, "submit: stdout: %s", strerror(errno));
                return CTL_EXIT_OK;
        }
        if (r == 0 && a.output)
                r = submit_write_file(a.output, buf, len, &e);
        else if (r == 0)
                r = submit_publish(a.spool, id, buf, len, a.create_spool, &e);
        if (r != 0)
                return ctl_fail(r, "submit: %s", e.msg);
        /* Written all the same: another daemon on this spool may serve it.
         * A file written elsewhere (--output) goes to another spool, which
         * this configuration does not describe: no warning. */
        if (a.output) {
                config_free(cfg);
                cfg = NULL;
        }
        const char *remote = cfg ? config_remote(cfg, a.to) : NULL;
        const struct config_remote *a2a = cfg ? config_remote_a2a(cfg, a.to) : NULL;
        char when[128] = "";
        /* A daemon leaves it in handoff/ until it expires: at its
         * expires_at, or max_window after initiated_at when that is
         * sooner (intake.c decide_left) */
        if (cfg && a.ttl > cfg->max_window)
                snprintf(when, sizeof(when), "in %llds ([spool] max_window, before its "
                         "expires_at)", (long long)cfg->max_window);
        else if (cfg)
                snprintf(when, sizeof(when), "in %llds (its expires_at, --ttl)",
                         (long long)a.ttl);
        if (a2a)
                fprintf(stderr, "handoffctl: submit: %s is behind an A2A server ([remote %s] a2a): "
                        "sent to %s\n", a.to, a.to, a2a->a2a);
        else if (remote && config_relay_on(cfg))
                fprintf(stderr, "handoffctl: submit: %s is an agent of host %s ([remote %s]): "
                        "relayed to %s\n", a.to, remote, a.to, remote);
        else if (remote)
                fprintf(stderr,
                        "handoffctl: submit: warning: %s names [remote %s] on host %s but has no "
                        "[relay] servers: nothing relays it; it is rejected as expired_unclaimed "
                        "when it expires, %s\n", cfg->path, a.to, remote, when);
        else if (cfg && !config_agent(cfg, a.to))
                fprintf(stderr,
                        "handoffctl: submit: warning: %s has no [agent %s]: no daemon with this "
                        "configuration claims it; unless another one serves %s, it is rejected as "
                        "expired_unclaimed when it expires, %s\n", cfg->path, a.to, a.to, when);
        printf("%s\n", id);
        if (fflush(stdout) == EOF)
                return ctl_fail(CTL_EXIT_ERROR, "submit: stdout: %s",
                                strerror(errno));
        return CTL_EXIT_OK;
}
