/* handoff-hubd: the HTTPS side of handoffd.  Reads the same handoffd.conf,
 * listens where [hub] says (or on the socket systemd passed), and drops
 * each handoff it accepts into the spool as any producer does; the daemon
 * does the rest.  The main thread only waits for signals: SIGTERM/SIGINT
 * stop, SIGHUP loads the TLS files and the tokens again; once a minute
 * it logs how many more requests failed to authenticate or were refused
 * (the first ones are logged at once: hub_ratelog.c); every second it
 * refreshes state_dir/status.json when the figures changed. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "files.h"
#include "handoff.h"
#include "hub.h"
#include "hub_records.h"
#include "hub_a2a.h"
#include "hub_jws.h"
#include "hub_push.h"
#include "push_wire.h"
#include "notify.h"
#include "util.h"

/* The hub's one-line error, logged; returns code. */
static int hub_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int hub_fail(int code, const char *fmt, ...)
{
        char buf[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        hub_log("%s", buf);
        return code;
}

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: handoff-hubd [OPTIONS]\n"
                "Take signed handoffs over HTTPS and drop them into the handoffd spool.\n\n"
                "  -c, --config FILE     configuration (default %s)\n"
                "  -f, --foreground      stay in the foreground (always: it never forks)\n"
                "  -n, --check-config    check [hub] as the start would (TLS pair, tokens,\n"
                "                        state_dir, listen, the spool), bind nothing, exit\n"
                "  -v, --verbose         also log libmicrohttpd's own messages\n"
                "  -h, --help            show this help\n"
                "  -V, --version         show the version\n\n"
                "Exit codes: 0 clean stop (-n: nothing wrong), 1 fatal runtime error\n"
                "(cannot listen, spool unusable), 2 usage or configuration error (config,\n"
                "keys, tokens, TLS; -n: anything it found wrong).\n"
                "See handoff-hubd(8) and handoffd.conf(5).\n",
                CONFIG_DEFAULT_PATH);
}


static int open_dir(const char *base, const char *sub, int *ret)
{
        int bfd, fd;

        bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (bfd < 0)
                return -errno;
        fd = openat(bfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                int r = -errno;
                close(bfd);
                return r;
        }
        close(bfd);
        *ret = fd;
        return 0;
}

int hub_setup(struct hub *h)
{
        struct config_hub *ch = &h->cfg->hub;
        const char *spool = h->cfg->spool_dir;
        char err[512] = "";
        int r;

        if (!ch->timeout)
                ch->timeout = HUB_DEFAULT_TIMEOUT;
        if (!ch->request_timeout)
                ch->request_timeout = HUB_DEFAULT_REQUEST_TIMEOUT;
        if (!ch->max_connections)
                ch->max_connections = HUB_DEFAULT_MAX_CONNECTIONS;
        if (!ch->max_per_address)
                ch->max_per_address = HUB_DEFAULT_MAX_PER_ADDRESS;
        if (!ch->a2a_kept_max_items)
                ch->a2a_kept_max_items = HUB_A2A_KEPT_MAX_ITEMS;
        if (!ch->a2a_kept_max_bytes)
                ch->a2a_kept_max_bytes = HUB_A2A_KEPT_MAX_BYTES;
        if (ch->rate_per_token < 0)
                ch->rate_per_token = HUB_DEFAULT_RATE_PER_TOKEN;
        if (!ch->burst_per_token)
                ch->burst_per_token = HUB_DEFAULT_BURST_PER_TOKEN;
        if (!ch->max_requests_per_token)
                ch->max_requests_per_token = HUB_DEFAULT_MAX_REQUESTS_PER_TOKEN;
        if (!ch->max_waits_per_token)
                ch->max_waits_per_token = HUB_DEFAULT_MAX_WAITS_PER_TOKEN;
        if (ch->a2a_block_max < 0)
                ch->a2a_block_max = HUB_DEFAULT_A2A_BLOCK_MAX;
        if (!ch->state_dir && !(ch->state_dir = strdup(HUB_DEFAULT_STATE_DIR)))
                return hub_fail(HUB_EXIT_RUNTIME, "out of memory");
        if (!spool)
                return hub_fail(HUB_EXIT_CONFIG, "%s: [spool] dir is not set", h->cfg->path);
        if (!ch->token_dir)
                return hub_fail(HUB_EXIT_CONFIG, "%s: [hub] token_dir is not set", h->cfg->path);
        if (!ch->tls_cert != !ch->tls_key)
                return hub_fail(HUB_EXIT_CONFIG, "%s: [hub] tls_cert and tls_key go together",
                            h->cfg->path);
        if (ch->default_agent && !a2a_agent_reachable(h->cfg, ch->default_agent))
                return hub_fail(HUB_EXIT_CONFIG, "%s:%d: [hub] default_agent %s is neither an "
                                "[agent] nor a [remote] of this file", h->cfg->path,
                                ch->line_default_agent, ch->default_agent);
        if (!strcmp(ch->token_dir, "credential:")) {
                /* LoadCredential=AGENT.token:FILE, one per sender */
                const char *cd = getenv("CREDENTIALS_DIRECTORY");
                if (!cd || cd[0] != '/')
                        return hub_fail(HUB_EXIT_CONFIG, "[hub] token_dir = credential: but "
                                    "$CREDENTIALS_DIRECTORY is not set");
                free(ch->token_dir);
                if (!(ch->token_dir = strdup(cd)))
                        return hub_fail(HUB_EXIT_RUNTIME, "out of memory");
        }
        r = hub_tokens_load(ch->token_dir, &h->tokens, err, sizeof(err));
        if (r < 0)
                return hub_fail(HUB_EXIT_CONFIG, "%s", err[0] ? err : strerror(-r));
        if (hub_tokens_count(h->tokens) == 0)
                hub_log("warning: no AGENT.token in %s: every request will be refused",
                        ch->token_dir);
        if (ch->tls_cert) {
                r = hub_tls_load(ch->tls_cert, ch->tls_key, &h->tls, err, sizeof(err));
                if (r < 0)
                        return hub_fail(HUB_EXIT_CONFIG, "TLS: %s", err[0] ? err : strerror(-r));
        }
        if (ch->signing_key) {
                char p[PATH_MAX];
                r = hub_path_resolve(ch->signing_key, p, sizeof(p));
                if (r < 0)
                        return hub_fail(HUB_EXIT_CONFIG, "%s:%d: [hub] signing_key %s: %s",
                                        h->cfg->path, ch->line_signing_key, ch->signing_key,
                                        strerror(-r));
                r = hub_signer_load(p, &h->signer, err, sizeof(err));
                if (r < 0)
                        return hub_fail(HUB_EXIT_CONFIG, "%s:%d: [hub] signing_key: %s",
                                        h->cfg->path, ch->line_signing_key,
                                        err[0] ? err : strerror(-r));
        }
        if ((r = open_dir(spool, "tmp", &h->tmp_fd)) < 0)
                return hub_fail(HUB_EXIT_RUNTIME, "%s/tmp: %s", spool, strerror(-r));
        if ((r = open_dir(spool, "handoff", &h->handoff_fd)) < 0)
                return hub_fail(HUB_EXIT_RUNTIME, "%s/handoff: %s", spool, strerror(-r));
        /* the daemon's replay memory and claims, when this user may look */
        if (open_dir(spool, "ids", &h->ids_fd) < 0)
                h->ids_fd = -1;
        if (open_dir(spool, "claimed", &h->claimed_fd) < 0)
                h->claimed_fd = -1;
        /* a daemon older than CancelTask made none: it is refused then */
        if (open_dir(spool, "cancel", &h->cancel_fd) < 0)
                h->cancel_fd = -1;
        r = mkdir_p_at(AT_FDCWD, ch->state_dir, 0700);
        if (r < 0)
                return hub_fail(HUB_EXIT_RUNTIME, "[hub] state_dir %s: %s", ch->state_dir,
                            strerror(-r));
        h->state_fd = open(ch->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (h->state_fd < 0)
                return hub_fail(HUB_EXIT_RUNTIME, "[hub] state_dir %s: %s", ch->state_dir,
                            strerror(errno));
        /* made 0700 if wider: the kept A2A messages are every sender's words */
        r = hub_a2a_load(h);
        if (r < 0)
                return hub_fail(HUB_EXIT_RUNTIME, "[hub] state_dir %s: %s (it must be the "
                                "hub's user's, mode 0700)", ch->state_dir, strerror(-r));
        r = hub_records_open(h, time(NULL));
        if (r < 0)
                return hub_fail(HUB_EXIT_RUNTIME, "[hub] state_dir %s/accepted.log: %s",
                                ch->state_dir, strerror(-r));
        r = hub_spool_clean_tmp(h);
        if (r > 0)
                hub_log("removed %d unfinished file(s) of an earlier run from %s/tmp", r,
                        spool);
        return 0;
}

/* ---- handoff-hubd -n ---------------------------------------------------- */

/* One thing -n found wrong: "FILE:LINE: what" (FILE: alone without a line). */
static void check_bad(const struct config *c, int line, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void check_bad(const struct config *c, int line, const char *fmt, ...)
{
        char buf[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (line > 0)
                fprintf(stderr, "%s:%d: %s\n", c->path, line, buf);
        else
                fprintf(stderr, "%s: %s\n", c->path, buf);
}

/* A directory the hub writes into: there, and this user may write and
 * search it.  0 or -errno. */
static int dir_writable(const char *path)
{
        struct stat st;

        if (stat(path, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        return faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) < 0 ? -errno : 0;
}

/* state_dir as hub_setup() makes and uses it: an existing one is a
 * directory of this user's (it makes it 0700) it may write; a missing
 * one can be made (the nearest existing parent is writable).  0, or
 * -errno with why. */
static int check_state_dir(const char *path, char *why, size_t n)
{
        char p[PATH_MAX];
        struct stat st;
        char *slash;
        int r;

        if (stat(path, &st) == 0) {
                r = S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
                if (r == 0 && st.st_uid != geteuid()) {
                        snprintf(why, n, "owned by uid %u, not by this user (uid %u): the hub "
                                 "makes it mode 0700", (unsigned)st.st_uid, (unsigned)geteuid());
                        return -EPERM;
                }
                if (r == 0)
                        r = dir_writable(path);
                if (r < 0)
                        snprintf(why, n, "%s", strerror(-r));
                return r;
        }
        r = errno == ENOENT ? xsnprintf(p, sizeof(p), "%s", path) : -errno;
        if (r < 0) {
                snprintf(why, n, "%s", strerror(-r));
                return r;
        }
        /* up to the nearest parent there: mkdir_p_at() makes the rest */
        while ((slash = strrchr(p, '/'))) {
                *(slash == p ? slash + 1 : slash) = '\0';
                if (stat(p, &st) < 0 && errno == ENOENT && slash != p)
                        continue;
                r = dir_writable(p);
                if (r < 0)
                        snprintf(why, n, "does not exist and cannot be made in %s: %s", p,
                                 strerror(-r));
                return r;
        }
        snprintf(why, n, "not an absolute path");
        return -EINVAL;
}

/* handoff-hubd -n: what hub_setup() and the start would refuse, every
 * one of them, without binding, writing or starting a thread.  The
 * number of problems (each printed, FILE:LINE first). */
static int hub_check(struct hub *h)
{
        struct config *c = h->cfg;
        struct config_hub *ch = &c->hub;
        const char *tokens = ch->token_dir, *state = ch->state_dir ?: HUB_DEFAULT_STATE_DIR;
        struct hub_tokens *t = NULL;
        char err[512] = "", why[PATH_MAX + 128];
        bool loopback = false, listen_ok = false;
        int bad = 0, r;

        if (!c->spool_dir) {
                check_bad(c, 0, "[spool] dir is not set"), bad++;
        } else {
                static const char *const subs[] = { "tmp", "handoff" };
                for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                        char p[PATH_MAX];
                        r = xsnprintf(p, sizeof(p), "%s/%s", c->spool_dir, subs[i]) < 0
                                    ? -ENAMETOOLONG : dir_writable(p);
                        if (r < 0)
                                check_bad(c, 0, "[spool] dir: %s: %s (the hub writes there)", p,
                                          strerror(-r)), bad++;
                }
        }
        if (tokens && !strcmp(tokens, "credential:")) {
                tokens = getenv("CREDENTIALS_DIRECTORY");
                if (!tokens || tokens[0] != '/')
                        check_bad(c, ch->line_token_dir, "[hub] token_dir = credential: but "
                                  "$CREDENTIALS_DIRECTORY is not set"), bad++;
        } else if (!tokens) {
                check_bad(c, 0, "[hub] token_dir is not set"), bad++;
        }
        if (tokens && tokens[0] == '/') {
                r = hub_tokens_load(tokens, &t, err, sizeof(err));
                if (r < 0)
                        check_bad(c, ch->line_token_dir, "%s%s",
                                  strncmp(err, "[hub]", 5) ? "[hub] token_dir: " : "",
                                  err[0] ? err : strerror(-r)), bad++;
                else if (hub_tokens_count(t) == 0)
                        fprintf(stderr, "%s:%d: warning: [hub] token_dir %s has no AGENT.token: "
                                "every request will be refused\n", c->path, ch->line_token_dir,
                                tokens);
        }
        if (!ch->tls_cert != !ch->tls_key) {
                check_bad(c, ch->tls_cert ? ch->line_tls_cert : ch->line_tls_key,
                          "[hub] tls_cert and tls_key go together"), bad++;
        } else if (ch->tls_cert) {
                err[0] = '\0';
                r = hub_tls_load(ch->tls_cert, ch->tls_key, &h->tls, err, sizeof(err));
                if (r < 0)
                        check_bad(c, strstr(err, ch->tls_key) == err ? ch->line_tls_key
                                                                      : ch->line_tls_cert,
                                  "[hub] TLS: %s", err[0] ? err : strerror(-r)), bad++;
        }
        if (ch->default_agent && !a2a_agent_reachable(c, ch->default_agent))
                check_bad(c, ch->line_default_agent, "[hub] default_agent %s is neither an "
                          "[agent] nor a [remote] of this file", ch->default_agent), bad++;
        if (ch->signing_key) {
                struct hub_signer *sg = NULL;
                char p[PATH_MAX];
                err[0] = '\0';
                r = hub_path_resolve(ch->signing_key, p, sizeof(p));
                if (r == 0)
                        r = hub_signer_load(p, &sg, err, sizeof(err));
                if (r < 0)
                        check_bad(c, ch->line_signing_key, "[hub] signing_key: %s",
                                  err[0] ? err : strerror(-r)), bad++;
                hub_signer_free(sg);
        }
        if (ch->push_allow) {
                struct push_allow pa;
                char word[160];
                if (push_allow_parse(ch->push_allow, &pa, word, sizeof(word)) < 0)
                        check_bad(c, ch->line_push_allow, "[hub] push_allow: %s", word), bad++;
        }
        r = check_state_dir(state, why, sizeof(why));
        if (r < 0)
                check_bad(c, ch->line_state_dir, "[hub] state_dir %s: %s", state, why), bad++;
        if (ch->listen) {
                err[0] = '\0';
                r = hub_listen_check(ch->listen, &loopback, err, sizeof(err));
                if (r < 0)
                        check_bad(c, ch->line_listen, "%s", err[0] ? err : strerror(-r)), bad++;
                listen_ok = r == 0;
        }
        if (listen_ok && !loopback && !ch->tls_cert)
                check_bad(c, ch->line_listen, "[hub] listen %s: plain HTTP on an address that is "
                          "not loopback is refused: set [hub] tls_cert and tls_key",
                          ch->listen), bad++;
        if (!bad)
                printf("%s: ok ([hub] listen %s, %s, %zu token(s), state_dir %s, spool %s)\n",
                       c->path, ch->listen ?: "not set: only a socket systemd passes",
                       ch->tls_cert ? "TLS" : "plain HTTP", hub_tokens_count(t), state,
                       c->spool_dir);
        hub_tokens_free(t);
        return bad;
}

static void hub_reload(struct hub *h)
{
        struct hub_tokens *t = NULL, *old;
        char err[512] = "";
        int r;

        r = hub_tokens_load(h->cfg->hub.token_dir, &t, err, sizeof(err));
        if (r < 0) {
                hub_log("reload: tokens kept: %s", err[0] ? err : strerror(-r));
        } else {
                pthread_rwlock_wrlock(&h->tokens_lock);
                old = h->tokens;
                h->tokens = t;
                pthread_rwlock_unlock(&h->tokens_lock);
                hub_tokens_free(old);
        }
        if (h->tls) {
                r = hub_tls_reload(h->tls, err, sizeof(err));
                if (r < 0)
                        hub_log("reload: TLS files kept: %s", err[0] ? err : strerror(-r));
        }
        hub_log("reloaded: %zu token(s)%s", hub_tokens_count(h->tokens),
                h->tls ? ", TLS certificate and key" : "");
        notify_send("READY=1");
}

static int hub_run(struct hub *h, sigset_t *set)
{
        time_t next = time(NULL) + HUB_AUTH_LOG_INTERVAL;
        time_t prune = time(NULL) + HUB_PRUNE_INTERVAL;

        for (;;) {
                /* at least once a second; at a request's deadline when
                 * one comes sooner (request_timeout is 1 s at least, so a
                 * connection accepted meanwhile has none sooner) */
                int64_t m = mono_usec();
                int64_t due = h->conns ? hub_conns_tick(h->conns, m) : INT64_MAX;
                int64_t wait = due - m < 1000000 ? (due - m > 0 ? due - m : 0) : 1000000;
                struct timespec ts = { .tv_sec = wait / 1000000,
                                       .tv_nsec = (wait % 1000000) * 1000 };
                int sig = sigtimedwait(set, NULL, &ts);
                time_t now = time(NULL);

                if (now >= next) {
                        hub_limited_tick(h);
                        next = now + HUB_AUTH_LOG_INTERVAL;
                }
                hub_stats_write(h, now);
                if (now >= prune) {
                        hub_records_prune(h, now);
                        hub_a2a_prune(h, now);
                        hub_push_prune(h, now);
                        prune = now + HUB_PRUNE_INTERVAL;
                }
                if (sig == SIGHUP)
                        hub_reload(h);
                else if (sig == SIGTERM || sig == SIGINT)
                        return 0;
        }
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                { "config", required_argument, NULL, 'c' },
                { "foreground", no_argument, NULL, 'f' },
                { "check-config", no_argument, NULL, 'n' },
                { "verbose", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { 0 },
        };
        const char *path = CONFIG_DEFAULT_PATH;
        struct hub h = { .tmp_fd = -1, .handoff_fd = -1, .state_fd = -1, .ids_fd = -1,
                       .claimed_fd = -1, .cancel_fd = -1, .wait_ms = HUB_WAIT_MS,
                       .now_usec = hd_now_usec };
        struct hub_http *http = NULL;
        bool loopback = false, is_unix = false, activated = false, check_only = false;
        char err[512] = "", *cerr = NULL;
        int c, r, fd = -1;
        sigset_t set;

        while ((c = getopt_long(argc, argv, "c:fnvhV", longopts, NULL)) != -1) {
                switch (c) {
                case 'c': path = optarg; break;
                case 'f': break;
                case 'n': check_only = true; break;
                case 'v': h.verbose = true; break;
                case 'h': usage(stdout); return HUB_EXIT_OK;
                case 'V': printf("handoff-hubd %s\n", HD_VERSION_STRING); return HUB_EXIT_OK;
                default: usage(stderr); return HUB_EXIT_CONFIG;
                }
        }
        if (optind < argc) {
                hub_log("unexpected argument '%s' (see --help)", argv[optind]);
                return HUB_EXIT_CONFIG;
        }
        if (sodium_init() < 0)
                return hub_fail(HUB_EXIT_RUNTIME, "libsodium did not initialize");
        r = config_load(path, true, &h.cfg, &cerr);
        if (r < 0) {
                hub_log("%s", cerr ? cerr : strerror(-r));
                free(cerr);
                return HUB_EXIT_CONFIG;
        }
        if (check_only) {
                r = hub_check(&h) ? HUB_EXIT_CONFIG : HUB_EXIT_OK;
                hub_tls_free(h.tls);
                config_free(h.cfg);
                return r;
        }
        pthread_rwlock_init(&h.tokens_lock, NULL);
        hub_ratelog_init(&h.auth_log, 1);
        hub_ratelog_init(&h.refusal_log, HUB_REFUSAL_LOG_BURST);
        r = hub_setup(&h);
        if (r != 0)
                goto out;
        r = hub_listen_open(h.cfg->hub.listen, &fd, &loopback, &is_unix, &activated,
                            err, sizeof(err));
        if (r < 0) {
                r = hub_fail(r == -EINVAL ? HUB_EXIT_CONFIG : HUB_EXIT_RUNTIME, "%s", err);
                goto out;
        }
        if (!loopback && !h.tls) {
                r = hub_fail(HUB_EXIT_CONFIG, "refusing to serve plain HTTP on %s: it is not a "
                         "loopback address; set [hub] tls_cert and tls_key",
                         activated ? "the passed socket" : h.cfg->hub.listen);
                goto out;
        }
        /* the request threads inherit this mask: signals come to sigtimedwait */
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);
        /* Two malloc arenas for libmicrohttpd's 8 threads, not one each:
         * with many streams open, the arenas' slack was a tenth of the
         * hub's memory. */
        mallopt(M_ARENA_MAX, 2);
        /* a file size limit is a write's EFBIG, answered and logged */
        signal(SIGXFSZ, SIG_IGN);
        /* before the first request: a task's configs are there for it */
        r = hub_push_start(&h);
        if (r != 0)
                goto out;
        r = hub_http_start(&h, fd, is_unix, &http, err, sizeof(err));
        if (r < 0) {
                r = hub_fail(HUB_EXIT_RUNTIME, "%s", err);
                goto out;
        }
        fd = -1;        /* libmicrohttpd's now: it closes it at stop */
        hub_log("listening on %s (%s), %zu token(s), spool %s",
                activated ? "the passed socket" : h.cfg->hub.listen,
                h.tls ? "TLS" : "plain HTTP, this host only",
                hub_tokens_count(h.tokens), h.cfg->spool_dir);
        h.started = time(NULL);
        h.listen_desc = activated ? "the passed socket" : h.cfg->hub.listen;
        hub_stats_write(&h, h.started);
        notify_send("READY=1");
        r = hub_run(&h, &set);
        notify_send("STOPPING=1");
        hub_http_stop(http);
        hub_push_stop(&h);
        hub_stats_remove(&h);
        hub_log("stopped");
out:
        if (fd >= 0)
                close(fd);
        hub_records_close(&h);
        hub_tokens_free(h.tokens);
        hub_tls_free(h.tls);
        hub_signer_free(h.signer);
        closep(&h.tmp_fd);
        closep(&h.handoff_fd);
        closep(&h.state_fd);
        closep(&h.ids_fd);
        closep(&h.claimed_fd);
        closep(&h.cancel_fd);
        config_free(h.cfg);
        hub_ratelog_destroy(&h.auth_log);
        hub_ratelog_destroy(&h.refusal_log);
        return r;
}
