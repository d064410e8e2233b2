/* handoffctl mcp: the MCP server of src/lib/mcp/ for one agent over stdio
 * (see mcp.h).  JSON-RPC 2.0, one message per line on stdin/stdout, logs
 * on stderr only.  One thread: poll() on stdin and on an inotify watch of
 * the agent's handoffs/, whose changes become
 * notifications/resources/list_changed.
 *
 * Bad input never ends the server: a line that is no JSON gets a parse
 * error, one over MCP_MAX_LINE is skipped to its end and answered with an
 * invalid-request error, an unknown method gets method-not-found.
 *
 * Exit: 0 stdin closed; 2 usage, config or key error; 4 a system error. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "config.h"
#include "handoffctl.h"
#include "mcp.h"
#include "submit.h"
#include "util.h"

#define MCP_MAX_LINE MCP_MAX_MESSAGE
#define MCP_READ_CHUNK (64 * 1024)

static void mcp_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl mcp --agent NAME [-c CONF] [--key FILE] [--kid NAME]\n"
                "\n"
                "Serve agent NAME over the Model Context Protocol on stdin/stdout\n"
                "(JSON-RPC 2.0, one message per line; logs on stderr).  Tools:\n"
                "handoff_send, handoff_inbox, handoff_take, handoff_status.  Resources:\n"
                "handoff://inbox/HANDOFF_ID for each bootstrap waiting for NAME.\n"
                "\n"
                "  -a, --agent NAME   the agent this server speaks for\n"
                "  -c, --config FILE  daemon configuration (default %s)\n"
                "  -k, --key FILE     signing key for handoff_send (default: the agent's\n"
                "                     key in the configuration, else its default key)\n"
                "      --kid NAME     kid to put in sent handoffs (an Ed25519 key names its own)\n"
                "  -h, --help         this text\n"
                "      --version      the version\n"
                "\n"
                "Exit: 0 stdin closed, 2 usage, config or key error, 4 error.\n",
                CONFIG_DEFAULT_PATH);
}

/* ---- output ----------------------------------------------------------- */

static FILE *mcp_out = NULL;    /* where answers go, one per line: stdout */

static int mcp_send(json_t *msg)
{
        _cleanup_free_ char *s = NULL;
        FILE *out = mcp_out ? mcp_out : stdout;

        if (!msg)
                return -ENOMEM;
        /* compact: no raw newline can be inside; one message, one line */
        s = json_dumps(msg, JSON_COMPACT);
        json_decref(msg);
        if (!s)
                return -ENOMEM;
        if (fputs(s, out) == EOF || fputc('\n', out) == EOF || fflush(out) == EOF)
                return -errno;
        return 0;
}

/* One line: its answer, if it has one, written. */
static int mcp_line(struct mcp *m, const char *line, size_t len)
{
        json_t *ans = NULL;
        int r = mcp_message(m, line, len, &ans);

        if (r < 0)
                return r;
        return ans ? mcp_send(ans) : 0;
}

/* ---- the loop --------------------------------------------------------- */

struct mcp_input {
        char *buf;
        size_t len;
        bool skipping;          /* inside a line over the limit */
};

/* Hand each complete line to mcp_line(); a line over the limit is
 * answered once and dropped as it streams in. */
static int mcp_lines(struct mcp *m, struct mcp_input *in)
{
        size_t start = 0;
        int r;

        for (;;) {
                char *nl = memchr(in->buf + start, '\n', in->len - start);
                if (!nl)
                        break;
                size_t l = (size_t)(nl - (in->buf + start));
                if (in->skipping) {
                        in->skipping = false;
                } else {
                        if (l > 0 && in->buf[start + l - 1] == '\r')
                                l--;
                        if (l > MCP_MAX_LINE) {
                                r = mcp_send(mcp_error_new(NULL, RPC_INVALID_REQUEST,
                                                           "Invalid Request: message over 1 MiB", NULL));
                        } else {
                                bool blank = true;
                                for (size_t i = 0; i < l && blank; i++)
                                        blank = strchr(" \t\r", in->buf[start + i]) != NULL;
                                r = blank ? 0 : mcp_line(m, in->buf + start, l);
                        }
                        if (r < 0)
                                return r;
                }
                start += (size_t)(nl - (in->buf + start)) + 1;
        }
        memmove(in->buf, in->buf + start, in->len - start);
        in->len -= start;
        if (in->len > MCP_MAX_LINE + 1) {
                if (!in->skipping) {
                        r = mcp_send(mcp_error_new(NULL, RPC_INVALID_REQUEST,
                                                   "Invalid Request: message over 1 MiB", NULL));
                        if (r < 0)
                                return r;
                }
                in->skipping = true;
                in->len = 0;
        }
        return 0;
}

static int mcp_inbox_events(struct mcp *m, int ifd)
{
        char buf[16 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool changed = false;
        ssize_t n;

        n = read(ifd, buf, sizeof(buf));
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        for (char *p = buf; p < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)p;
                p += sizeof(*ev) + ev->len;
                if (inbox_event(&m->ib, ifd, ev))
                        changed = true;
        }
        if (!changed || !m->initialized)
                return 0;
        return mcp_send(mcp_notification_new("notifications/resources/list_changed"));
}

static int mcp_loop(struct mcp *m, int ifd)
{
        struct mcp_input in = { .buf = malloc(MCP_MAX_LINE + 2 + MCP_READ_CHUNK) };
        int r = 0;

        if (!in.buf)
                return -ENOMEM;
        while (r >= 0) {
                struct pollfd p[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
                                       { .fd = ifd, .events = POLLIN } };
                if (poll(p, 2, -1) < 0) {
                        r = errno == EINTR ? 0 : -errno;
                        continue;
                }
                if (p[1].revents & POLLIN)
                        r = mcp_inbox_events(m, ifd);
                if (r < 0 || !(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                ssize_t n = read(STDIN_FILENO, in.buf + in.len, MCP_READ_CHUNK);
                if (n < 0) {
                        r = errno == EINTR || errno == EAGAIN ? 0 : -errno;
                        continue;
                }
                if (n == 0) {
                        /* a last line without its newline still counts */
                        if (in.len > 0 && !in.skipping) {
                                in.buf[in.len++] = '\n';
                                r = mcp_lines(m, &in);
                        }
                        break;
                }
                in.len += (size_t)n;
                r = mcp_lines(m, &in);
        }
        free(in.buf);
        return r;
}

/* The signing key: --key, else the agent's own, else the default.  A key
 * that cannot be read disables handoff_send only (the reason is kept). */
static int mcp_key(struct mcp *m, const char *path, bool explicit)
{
        const struct config_agent *a = config_agent(m->cfg, m->agent);
        int r;

        if (!path)
                path = a->key_path ? a->key_path : m->cfg->default_key_path;
        if (!path) {
                snprintf(m->key_error, sizeof(m->key_error), "no key for %s in %s (use --key)",
                         m->agent, m->cfg->path);
                return 0;
        }
        if (!strncmp(path, "credential:", 11)) {
                snprintf(m->key_error, sizeof(m->key_error),
                         "%s is a systemd credential of handoffd (use --key)", path);
                return 0;
        }
        hd_key *k = NULL;
        r = hd_key_load(path, &k, m->key_error, sizeof(m->key_error));
        if (r == 0) {
                struct submit_err e;
                if (submit_key_check(k, path, m->kid, &e) != 0) {
                        snprintf(m->key_error, sizeof(m->key_error), "%s", e.msg);
                        hd_key_free(TAKE_PTR(k));
                        r = -EINVAL;
                }
        }
        m->key = k;     /* handoffctl's own: mcp_close() frees it */
        if (r < 0) {
                if (!m->key_error[0])
                        snprintf(m->key_error, sizeof(m->key_error), "%s: %s", path, strerror(-r));
                if (explicit)
                        return ctl_fail(CTL_EXIT_USAGE, "mcp: %s", m->key_error);
                fprintf(stderr, "handoffctl: mcp: %s: handoff_send is off\n", m->key_error);
        }
        return 0;
}

int mcp_open(struct mcp *m, const char *conf, const char *key)
{
        int r;

        char err[512];
        json_t *tools = NULL;

        m->ib.fd = -1;
        m->complete_wait_ms = MCP_COMPLETE_WAIT_MS;
        r = ctl_config(conf, &m->cfg);
        if (r)
                return r;
        r = inbox_init(&m->ib, m->cfg, m->agent, NULL, 0, err, sizeof(err));
        if (r)
                r = ctl_fail(r, "mcp: %s", err);
        if (r == 0) {
                /* handoff_take checks the proof of origin as consume does */
                int q = consume_opts_from_config(m->cfg, true, &m->copts);
                if (q < 0)
                        r = ctl_fail(CTL_EXIT_ERROR, "mcp: %s", strerror(-q));
                else if (q == 0)
                        fprintf(stderr, "handoffctl: mcp: no key to verify with: handoff_take does not check "
                                "the bootstrap's origin (only the directory's permissions protect it)\n");
                m->copts.agent = m->agent;
                m->ib.copts = &m->copts;  /* handoff_inbox and resources show what a take gets */
        }
        if (r == 0)
                r = mcp_key(m, key, key != NULL);
        if (r == 0 && mcp_tools_new(&tools) < 0)
                r = ctl_fail(CTL_EXIT_ERROR, "mcp: the tool table does not parse");
        m->tools = tools;
        return r;
}

void mcp_close(struct mcp *m)
{
        inbox_done(&m->ib);
        json_decref((json_t *)TAKE_PTR(m->tools));
        hd_key_free((hd_key *)TAKE_PTR(m->key));
        config_free(TAKE_PTR(m->cfg));
}

int cmd_mcp(int argc, char **argv)
{
        enum { OPT_KID = 0x100, OPT_VERSION };
        static const struct option opts[] = {
                { "agent", required_argument, NULL, 'a' },
                { "config", required_argument, NULL, 'c' },
                { "key", required_argument, NULL, 'k' },
                { "kid", required_argument, NULL, OPT_KID },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, OPT_VERSION },
                {}
        };
        const char *conf = NULL, *key = NULL;
        struct mcp m = { .ib = { .fd = -1 } };
        int c, r, ifd = -1;

        while ((c = getopt_long(argc, argv, "a:c:k:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'a': m.agent = optarg; break;
                case 'c': conf = optarg; break;
                case 'k': key = optarg; break;
                case OPT_KID: m.kid = optarg; break;
                case 'h': mcp_usage(stdout); return CTL_EXIT_OK;
                case OPT_VERSION: printf("handoffctl %s\n", HD_VERSION_STRING); return CTL_EXIT_OK;
                default: mcp_usage(stderr); return CTL_EXIT_USAGE;
                }
        }
        if (optind < argc)
                return ctl_fail(CTL_EXIT_USAGE, "mcp: unexpected argument '%s'", argv[optind]);
        if (!m.agent)
                return ctl_fail(CTL_EXIT_USAGE, "mcp: --agent NAME is required (try --help)");
        r = mcp_open(&m, conf, key);
        if (r == 0) {
                ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
                if (ifd < 0 || inbox_watch(&m.ib, ifd) < 0)
                        r = ctl_fail(CTL_EXIT_ERROR, "mcp: inotify on %s: %s", m.ib.dir,
                                     strerror(errno));
        }
        if (r == 0) {
                /* a client that is gone shows as EPIPE on the next write */
                signal(SIGPIPE, SIG_IGN);
                r = mcp_loop(&m, ifd);
                if (r == -EPIPE)
                        r = 0;
                r = r < 0 ? ctl_fail(CTL_EXIT_ERROR, "mcp: %s", strerror(-r)) : CTL_EXIT_OK;
        }
        if (ifd >= 0)
                close(ifd);
        mcp_close(&m);
        return r;
}
