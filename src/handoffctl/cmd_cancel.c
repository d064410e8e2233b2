/* handoffctl cancel: a sender takes back a handoff its agent has not
 * taken yet.  The request (cancelreq.h) is signed with the key the daemon
 * checks the sender's handoffs with, dropped into the spool's cancel/
 * via tmp/, and the daemon's answer waited for (inotify, no polling).
 *
 * Exit: 0 canceled (by this request or one before it); 1 not canceled
 * (its agent took it first, it has ended otherwise, the daemon refused
 * the request, knows no such handoff, or has too many waiting);
 * 2 usage, config or key; 3 no answer within --timeout (the request
 * stands: the daemon acts on it when it comes); 4 a system error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cancelreq.h"
#include "config.h"
#include "handoffctl.h"
#include "items.h"
#include "key.h"
#include "util.h"

#define CANCEL_EXIT_NO_ANSWER 3
#define CANCEL_DEFAULT_TIMEOUT 10

static void cancel_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl cancel [-c CONF] --from AGENT HANDOFF_ID [--timeout SECONDS]\n"
                "       handoffctl cancel --spool DIR --key FILE --from AGENT HANDOFF_ID [...]\n"
                "\n"
                "Take back a handoff that AGENT sent and whose recipient has not taken it\n"
                "yet: its bootstrap is withdrawn and it is archived as canceled.  The\n"
                "request is signed with the key the daemon checks AGENT's handoffs with,\n"
                "dropped into the spool's cancel/, and the daemon's answer is waited for.\n"
                "\n"
                "  -c, --config FILE      daemon configuration: its [spool] dir, and the key\n"
                "                         of --from ([agent] key, else [keys] default)\n"
                "  -s, --spool DIR        the spool, instead of the configuration's\n"
                "  -k, --key FILE         the signing key, instead of the configuration's\n"
                "  -f, --from AGENT       the handoff's sender (required)\n"
                "  -t, --timeout SECONDS  wait this long for the answer (5m: a duration;\n"
                "                         default %d, at most 1d; 0: drop the request,\n"
                "                         do not wait)\n"
                "  -j, --json             one JSON object\n"
                "  -h, --help             this text\n"
                "      --version          the version\n"
                "\n"
                "Exit: 0 canceled, 1 not canceled (taken by its agent first, ended already,\n"
                "request refused, no such handoff, busy), 2 usage, 3 no answer yet (the request\n"
                "stands), 4 error.\n",
                CANCEL_DEFAULT_TIMEOUT);
}

static void config_freep(struct config **c)
{
        config_free(*c);
}

static int print_answer(const char *spool, const char *id, enum cancelreq_answer a, bool as_json)
{
        _cleanup_json_ json_t *it = NULL;
        const char *word = a == CA_NONE ? "requested" : cancelreq_answer_name(a);
        const char *st = NULL;

        /* What became of it instead, where this user may read it. */
        if (a == CA_NOT_CANCELABLE && items_find(spool, id, &it) >= 0)
                st = items_status(it);
        if (as_json) {
                _cleanup_free_ char *s = NULL;
                _cleanup_json_ json_t *o = json_pack("{s:s, s:s}", "handoff_id", id, "cancel", word);
                if (o && st)
                        json_object_set_new(o, "status", json_string(st));
                s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                printf("%s\n", s ? s : "{}");
        } else if (a == CA_NONE) {
                printf("%s cancel requested: no answer from handoffd yet (the request stands)\n", id);
        } else if (a == CA_REFUSED) {
                printf("%s not canceled: handoffd refused the request (its log says why)\n", id);
        } else if (a == CA_UNKNOWN) {
                printf("%s not canceled: handoffd knows no such handoff\n", id);
        } else if (a == CA_BUSY) {
                printf("%s not canceled: too many cancel requests wait at handoffd; try "
                       "again later\n", id);
        } else if (a == CA_NOT_CANCELABLE && st && !strcmp(st, "canceled")) {
                printf("%s canceled already\n", id);
        } else if (a == CA_NOT_CANCELABLE) {
                printf("%s not canceled: %s\n", id, st ? st : "its agent took it first, or it has ended");
        } else {
                printf("%s canceled\n", id);
        }
        /* Canceled already (a retry, another request first): what was
         * asked for holds. */
        if (a == CA_CANCELED || (st && !strcmp(st, "canceled")))
                return CTL_EXIT_OK;
        return a == CA_NONE ? CANCEL_EXIT_NO_ANSWER : CTL_EXIT_NEGATIVE;
}

static int open_sub(const char *spool, const char *sub, int *ret)
{
        char path[PATH_MAX];
        int fd;

        if (xsnprintf(path, sizeof(path), "%s/%s", spool, sub) < 0)
                return -ENAMETOOLONG;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret = fd;
        return 0;
}

int cmd_cancel(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "spool", required_argument, NULL, 's' },
                { "key", required_argument, NULL, 'k' },
                { "from", required_argument, NULL, 'f' },
                { "timeout", required_argument, NULL, 't' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *conf = NULL, *spool = NULL, *keyp = NULL, *from = NULL, *id;
        _cleanup_(config_freep) struct config *cfg = NULL;
        _cleanup_(hd_key_freep) hd_key *key = NULL;
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int tmp_fd = -1, cancel_fd = -1;
        char err[512], name[NAME_MAX + 1], tmp[NAME_MAX + 1];
        enum cancelreq_answer ans = CA_NONE;
        struct cancelreq_ticket ticket;
        int64_t timeout = CANCEL_DEFAULT_TIMEOUT, ttl = HD_DEFAULT_MAX_WINDOW;
        bool as_json = false, sync = true;
        size_t len;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:s:k:f:t:jh", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': conf = optarg; break;
                case 's': spool = optarg; break;
                case 'k': keyp = optarg; break;
                case 'f': from = optarg; break;
                case 't':
                        if (config_parse_duration(optarg, &timeout) < 0)
                                return ctl_fail(CTL_EXIT_USAGE, "cancel: --timeout '%s' is not a duration", optarg);
                        /* A request is answered unknown once it expires
                         * (max_window); a longer wait only hangs. */
                        if (timeout > CANCELREQ_WAIT_MAX_MS / 1000)
                                return ctl_fail(CTL_EXIT_USAGE, "cancel: --timeout '%s' is over the "
                                                "maximum, 1d (%lld seconds)", optarg,
                                                (long long)(CANCELREQ_WAIT_MAX_MS / 1000));
                        break;
                case 'j': as_json = true; break;
                case 'h': cancel_usage(stdout); return CTL_EXIT_OK;
                case 'V': printf("handoffctl %s\n", HD_VERSION_STRING); return CTL_EXIT_OK;
                default: cancel_usage(stderr); return CTL_EXIT_USAGE;
                }
        }
        if (optind != argc - 1)
                return ctl_fail(CTL_EXIT_USAGE, "cancel: one HANDOFF_ID is needed (try --help)");
        id = argv[optind];
        if (!hd_id_valid(id))
                return ctl_fail(CTL_EXIT_USAGE, "cancel: '%s' is not a handoff_id", id);
        if (!from)
                return ctl_fail(CTL_EXIT_USAGE, "cancel: --from is required (try --help)");
        if (!hd_agent_valid(from))
                return ctl_fail(CTL_EXIT_USAGE, "cancel: --from '%s' is not an agent name", from);
        if (conf || !spool || !keyp) {
                r = ctl_config(conf, &cfg);
                if (r) {
                        if (!conf)
                                ctl_fail(CTL_EXIT_USAGE, "cancel: give -c CONF, or --spool DIR "
                                         "and --key FILE");
                        return r;
                }
                if (!spool)
                        spool = cfg->spool_dir;
                if (!keyp) {
                        const struct config_agent *ag = config_agent(cfg, from);
                        keyp = ag && ag->key_path ? ag->key_path : cfg->default_key_path;
                        if (!keyp)
                                return ctl_fail(CTL_EXIT_USAGE, "cancel: %s has no [keys] default "
                                                "for %s: give --key FILE", cfg->path, from);
                        if (!strncmp(keyp, "credential:", 11))
                                return ctl_fail(CTL_EXIT_USAGE, "cancel: the key in %s is a "
                                                "systemd credential (%s): give --key FILE",
                                                cfg->path, keyp);
                }
                /* Good as long as the daemon takes a handoff to be. */
                ttl = cfg->max_window;
                sync = cfg->fsync;
        }
        r = hd_key_load(keyp, &key, err, sizeof(err));
        if (r < 0)
                return ctl_fail(CTL_EXIT_USAGE, "cancel: %s", err[0] ? err : strerror(-r));
        if (hd_key_kind_of(key) == HD_KEY_ED25519_PUBLIC)
                return ctl_fail(CTL_EXIT_USAGE, "cancel: %s is a public key: sign with the "
                                "secret key", keyp);
        if ((r = open_sub(spool, "tmp", &tmp_fd)) < 0 ||
            (r = open_sub(spool, CANCELREQ_DIR, &cancel_fd)) < 0)
                return ctl_fail(r == -ENOENT ? CTL_EXIT_USAGE : CTL_EXIT_ERROR,
                                "cancel: %s: no tmp/ or cancel/ to write (%s): not a spool, or "
                                "its handoffd cannot cancel", spool, strerror(-r));
        r = cancelreq_build(id, from, key, hd_now_usec(), ttl, &buf, &len);
        if (r == 0)
                r = cancelreq_name(id, name, sizeof(name));
        if (r == 0)
                r = xsnprintf(tmp, sizeof(tmp), "cancel.%s", name) < 0 ? -ENAMETOOLONG : 0;
        if (r == 0)
                r = cancelreq_drop(tmp_fd, tmp, cancel_fd, name, buf, len, sync, &ticket);
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "cancel: %s/%s: %s", spool, CANCELREQ_DIR,
                                strerror(-r));
        if (timeout > 0) {
                r = cancelreq_await(cancel_fd, &ticket, timeout * 1000, &ans);
                if (r < 0)
                        return ctl_fail(CTL_EXIT_ERROR, "cancel: waiting for the answer: %s",
                                        strerror(-r));
        }
        return print_answer(spool, id, ans, as_json);
}
