/* handoffctl submit: build a protocol_version 1 handoff the way the real
 * producer does, check it locally, sign it and publish it into a spool:
 * written atomically into tmp/, then moved (no replace) into handoff/.
 *
 * Exit: 0 submitted (handoff_id on stdout); 1 refused locally (the reason
 * as the daemon would name it) or the handoff_id is already in handoff/;
 * 2 bad usage, unreadable key, transcript or payload file; 4 I/O error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "handoffctl.h"
#include "submit.h"
#include "util.h"


static void submit_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl submit --spool DIR --key FILE --from AGENT --to AGENT\n"
                "                         [OPTIONS]\n"
                "\n"
                "Sign a protocol_version 1 handoff and drop it into DIR/handoff/ (via\n"
                "DIR/tmp/).  Prints the handoff_id.\n"
                "\n"
                "  -s, --spool DIR        the spool (missing state directories are created)\n"
                "  -k, --key FILE         the signing key (0600, or 0640 for a group): an\n"
                "                         HMAC key, or an Ed25519 secret key (sig + kid)\n"
                "  -f, --from AGENT       from_agent\n"
                "  -t, --to AGENT         to_agent (default: the payload's target agent)\n"
                "  -r, --reason TEXT      reason (default \"handoff\")\n"
                "      --transcript FILE  JSON array of {\"role\", \"text\"} (default [])\n"
                "  -c, --context TEXT     context_summary\n"
                "      --ttl SECONDS      expires_at = now + SECONDS (default %d)\n"
                "      --id ID            handoff_id (default UNIXTIME-FROM-TO-16HEX)\n"
                "      --kid NAME         kid: the name of the HMAC key the receiver uses\n"
                "                         (an Ed25519 key sets its own kid)\n"
                "      --type TYPE        payload_type (vox/1.0, baton/1,\n"
                "                         U.AgentHandoff/0.1.0, act/1.0); needs --payload\n"
                "      --payload FILE|-   the payload for --type\n"
                "      --caller-hash HEX  caller_hash (16 lowercase hex chars)\n"
                "  -h, --help             this text\n"
                "      --version          the version\n"
                "\n"
                "Exit: 0 submitted, 1 refused (\"submit: REASON: detail\") or the id is\n"
                "already pending, 2 bad usage or unreadable key/input file, 4 I/O error.\n",
                SUBMIT_DEFAULT_TTL);
}

struct submit_args {
        const char *spool, *key, *from, *to, *reason, *transcript, *context;
        const char *id, *kid, *type, *payload, *caller_hash;
        int64_t ttl;
};

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
               OPT_CALLER_HASH, OPT_VERSION };
        static const struct option opts[] = {
                { "spool",       required_argument, NULL, 's' },
                { "key",         required_argument, NULL, 'k' },
                { "from",        required_argument, NULL, 'f' },
                { "to",          required_argument, NULL, 't' },
                { "reason",      required_argument, NULL, 'r' },
                { "context",     required_argument, NULL, 'c' },
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
        _cleanup_free_ char *buf = NULL;
        char err[512], id[SUBMIT_ID_MAX];
        struct submit_err e;
        hd_verdict v;
        size_t len;
        int c, r;

        while ((c = getopt_long(argc, argv, "s:k:f:t:r:c:h", opts, NULL)) >= 0) {
                switch (c) {
                case 's': a.spool = optarg; break;
                case 'k': a.key = optarg; break;
                case 'f': a.from = optarg; break;
                case 't': a.to = optarg; break;
                case 'r': a.reason = optarg; break;
                case 'c': a.context = optarg; break;
                case OPT_TRANSCRIPT: a.transcript = optarg; break;
                case OPT_ID: a.id = optarg; break;
                case OPT_KID: a.kid = optarg; break;
                case OPT_TYPE: a.type = optarg; break;
                case OPT_PAYLOAD: a.payload = optarg; break;
                case OPT_CALLER_HASH: a.caller_hash = optarg; break;
                case OPT_TTL:
                        if (parse_int64(optarg, 1, SUBMIT_MAX_TTL, &a.ttl) < 0)
                                return ctl_fail(CTL_EXIT_USAGE,
                                                "submit: --ttl '%s': not a number of seconds in 1..%lld",
                                                optarg, SUBMIT_MAX_TTL);
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
        if (!a.spool || !a.key || !a.from)
                return ctl_fail(CTL_EXIT_USAGE,
                                "submit: --spool, --key and --from are required (try --help)");
        if (!!a.type != !!a.payload)
                return ctl_fail(CTL_EXIT_USAGE,
                                "submit: --type and --payload go together");
        if (a.caller_hash && !caller_hash_valid(a.caller_hash))
                return ctl_fail(CTL_EXIT_USAGE,
                                "submit: --caller-hash '%s': not 16 lowercase hex chars",
                                a.caller_hash);
        /* refuse a bad --id before reading anything: nothing is signed */
        if (a.id && !hd_id_valid(a.id))
                return ctl_fail(CTL_EXIT_NEGATIVE,
                                "submit: bad_id: handoff_id '%s' is not [A-Za-z0-9][A-Za-z0-9_-]{0,127}",
                                a.id);

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
                        return ctl_fail(CTL_EXIT_NEGATIVE, "submit: %s: %s",
                                        hd_reason_name(v.reason), v.detail);
                if (r < 0)
                        return ctl_fail(CTL_EXIT_USAGE, "submit: %s: %s",
                                        a.payload, strerror(-r));
                if (!a.to)
                        a.to = hd_payload_target(a.type, payload);
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
        if (r == 0)
                r = submit_publish(a.spool, id, buf, len, true, &e);
        if (r != 0)
                return ctl_fail(r, "submit: %s", e.msg);
        printf("%s\n", id);
        if (fflush(stdout) == EOF)
                return ctl_fail(CTL_EXIT_ERROR, "submit: stdout: %s",
                                strerror(errno));
        return CTL_EXIT_OK;
}
