/* handoffctl mcp: a Model Context Protocol server over stdio for one agent
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

#define MCP_MAX_LINE (1024 * 1024)
#define MCP_READ_CHUNK (64 * 1024)
#define MCP_URI_PREFIX "handoff://inbox/"

/* Newest first: the answer to a version we do not know is the first. */
static const char *const mcp_versions[] = { "2025-06-18", "2025-03-26", "2024-11-05" };

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

static int mcp_send(struct mcp *m, json_t *msg)
{
        _cleanup_free_ char *s = NULL;

        if (!msg)
                return -ENOMEM;
        /* compact: no raw newline can be inside; one message, one line */
        s = json_dumps(msg, JSON_COMPACT);
        json_decref(msg);
        if (!s)
                return -ENOMEM;
        if (fputs(s, m->out) == EOF || fputc('\n', m->out) == EOF || fflush(m->out) == EOF)
                return -errno;
        return 0;
}

static int mcp_reply(struct mcp *m, const json_t *id, json_t *result)
{
        if (!result)
                return -ENOMEM;
        return mcp_send(m, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

static int mcp_error(struct mcp *m, const json_t *id, int code, const char *msg,
                     json_t *data)
{
        char text[512];
        json_t *err;

        snprintf(text, sizeof(text), "%s", msg);
        utf8_fix(text);
        err = json_pack("{s:i, s:s}", "code", code, "message", text);
        if (err && data)
                json_object_set_new(err, "data", data);
        else
                json_decref(data);
        if (!err)
                return -ENOMEM;
        return mcp_send(m, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
                                     id ? id : json_null(), "error", err));
}

/* ---- lifecycle -------------------------------------------------------- */

static json_t *mcp_initialize(struct mcp *m, const json_t *params)
{
        const char *want = json_string_value(json_object_get(params, "protocolVersion"));
        const char *ver = mcp_versions[0];
        char instr[512];

        for (size_t i = 0; want && i < ELEMENTSOF(mcp_versions); i++)
                if (!strcmp(want, mcp_versions[i]))
                        ver = mcp_versions[i];
        snprintf(instr, sizeof(instr),
                 "Handoffs for agent %s. handoff_send hands work to another agent; "
                 "handoff_inbox lists what was handed to %s, handoff_take takes one over "
                 "(once); handoff_status follows a handoff. Each waiting handoff is also "
                 "a resource handoff://inbox/ID; the list changes when one arrives or is taken.",
                 m->agent, m->agent);
        return json_pack("{s:s, s:{s:{s:b}, s:{s:b, s:b}}, s:{s:s, s:s, s:s}, s:s}",
                         "protocolVersion", ver,
                         "capabilities", "tools", "listChanged", 0,
                         "resources", "listChanged", 1, "subscribe", 0,
                         "serverInfo", "name", "handoffctl", "title", "handoffd agent tools",
                         "version", HD_VERSION_STRING,
                         "instructions", instr);
}

/* ---- resources -------------------------------------------------------- */

static json_t *mcp_resources_list(struct mcp *m, struct mcp_err *e)
{
        _cleanup_json_ json_t *list = NULL;
        json_t *res = json_array(), *it;
        size_t i;
        int r;

        inbox_reopen(&m->ib);
        r = inbox_list(&m->ib, hd_now_usec(), &list, NULL);
        if (r < 0 || !res) {
                json_decref(res);
                e->code = RPC_INTERNAL_ERROR;
                snprintf(e->msg, sizeof(e->msg), "Internal error: %s: %s", m->ib.dir,
                         strerror(r < 0 ? -r : ENOMEM));
                return NULL;
        }
        json_array_foreach(list, i, it) {
                const char *id = json_string_value(json_object_get(it, "handoff_id"));
                char uri[256], title[512], desc[256];
                snprintf(uri, sizeof(uri), MCP_URI_PREFIX "%s", id);
                snprintf(title, sizeof(title), "Handoff from %s: %s",
                         json_string_value(json_object_get(it, "from_agent")) ?: "?",
                         json_string_value(json_object_get(it, "reason")) ?: "");
                utf8_fix(title);
                snprintf(desc, sizeof(desc),
                         "Delivered to %s %llds ago; %llds left to take it (handoff_take). "
                         "Reading it does not take it.", m->agent,
                         (long long)json_integer_value(json_object_get(it, "age_s")),
                         (long long)json_integer_value(json_object_get(it, "seconds_left")));
                json_array_append_new(res, json_pack("{s:s, s:s, s:s, s:s, s:s}", "uri", uri,
                                                     "name", id, "title", title,
                                                     "description", desc,
                                                     "mimeType", "application/json"));
        }
        return json_pack("{s:o}", "resources", res);
}

static json_t *mcp_resources_read(struct mcp *m, const json_t *params, struct mcp_err *e,
                                  json_t **ret_data)
{
        const char *uri = json_string_value(json_object_get(params, "uri"));
        _cleanup_json_ json_t *b = NULL;
        _cleanup_free_ char *text = NULL;
        const char *id;
        char name[NAME_MAX + 1];
        hd_verdict v;

        e->code = RPC_INVALID_PARAMS;
        if (!uri) {
                snprintf(e->msg, sizeof(e->msg), "Invalid params: 'uri' must be a string");
                return NULL;
        }
        id = strncmp(uri, MCP_URI_PREFIX, strlen(MCP_URI_PREFIX)) ? NULL
                                                                 : uri + strlen(MCP_URI_PREFIX);
        inbox_reopen(&m->ib);
        /* What handoff_take would give: a file that would be refused
         * (planted, copied from another agent, stale) is not found. */
        if (!id || !hd_id_valid(id) || hd_bootstrap_name(id, name, sizeof(name)) < 0 ||
            m->ib.fd < 0 || hd_consume_peek(m->ib.fd, name, &m->copts, hd_now_usec(), &b, &v) < 0 ||
            strcmp(json_string_value(json_object_get(b, "handoff_id")) ?: "", id)) {
                snprintf(e->msg, sizeof(e->msg), "Resource not found");
                *ret_data = json_pack("{s:s}", "uri", uri);
                return NULL;
        }
        text = json_dumps(b, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (!text) {
                e->code = RPC_INTERNAL_ERROR;
                snprintf(e->msg, sizeof(e->msg), "Internal error: out of memory");
                return NULL;
        }
        return json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri,
                         "mimeType", "application/json", "text", text);
}

static json_t *mcp_templates_list(void)
{
        return json_pack("{s:[{s:s, s:s, s:s, s:s, s:s}]}", "resourceTemplates",
                         "uriTemplate", MCP_URI_PREFIX "{handoff_id}", "name", "inbox",
                         "title", "A handoff waiting for this agent",
                         "description", "The bootstrap of a delivered handoff, as JSON; reading it does not take it",
                         "mimeType", "application/json");
}

/* ---- dispatch --------------------------------------------------------- */

static int mcp_request(struct mcp *m, const char *method, const json_t *id,
                       const json_t *params)
{
        struct mcp_err e = { .code = RPC_INTERNAL_ERROR, .msg = "Internal error" };
        json_t *result = NULL, *data = NULL;

        if (!strcmp(method, "initialize"))
                result = mcp_initialize(m, params);
        else if (!strcmp(method, "ping"))
                result = json_object();
        else if (!strcmp(method, "tools/list"))
                result = json_pack("{s:O}", "tools", m->tools);
        else if (!strcmp(method, "tools/call")) {
                if (mcp_tools_call(m, params, &result, &e) < 0)
                        result = NULL;
        } else if (!strcmp(method, "resources/list"))
                result = mcp_resources_list(m, &e);
        else if (!strcmp(method, "resources/read"))
                result = mcp_resources_read(m, params, &e, &data);
        else if (!strcmp(method, "resources/templates/list"))
                result = mcp_templates_list();
        else {
                e.code = RPC_METHOD_NOT_FOUND;
                snprintf(e.msg, sizeof(e.msg), "Method not found: %.128s", method);
        }
        if (result)
                return mcp_reply(m, id, result);
        return mcp_error(m, id, e.code, e.msg, data);
}

int mcp_message(struct mcp *m, const char *line, size_t len)
{
        _cleanup_json_ json_t *msg = NULL;
        const json_t *id, *params;
        const char *method;
        hd_limits lim = { .max_size = MCP_MAX_LINE };
        hd_verdict v;
        char text[400];
        int r;

        r = hd_parse(line, len, &lim, &msg, &v);
        if (r == -EBADMSG && v.reason == HD_R_BAD_TYPE)
                return mcp_error(m, NULL, RPC_INVALID_REQUEST,
                                 "Invalid Request: a message is one JSON object (no batches)", NULL);
        if (r < 0) {
                snprintf(text, sizeof(text), "Parse error: %s", r == -EBADMSG ? v.detail : strerror(-r));
                return mcp_error(m, NULL, RPC_PARSE_ERROR, text, NULL);
        }
        id = json_object_get(msg, "id");
        method = json_string_value(json_object_get(msg, "method"));
        params = json_object_get(msg, "params");
        if (id && !json_is_string(id) && !json_is_integer(id))
                return mcp_error(m, NULL, RPC_INVALID_REQUEST,
                                 "Invalid Request: id must be a string or an integer", NULL);
        if (!method) {
                if (!json_object_get(msg, "method") && id &&
                    (json_object_get(msg, "result") || json_object_get(msg, "error")))
                        return 0;       /* a response: we send no requests */
                return mcp_error(m, id, RPC_INVALID_REQUEST, "Invalid Request: no method", NULL);
        }
        if (!json_is_string(json_object_get(msg, "jsonrpc")) ||
            strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0"))
                return id ? mcp_error(m, id, RPC_INVALID_REQUEST,
                                      "Invalid Request: jsonrpc must be \"2.0\"", NULL) : 0;
        if (params && !json_is_object(params))
                return id ? mcp_error(m, id, RPC_INVALID_PARAMS,
                                      "Invalid params: params must be an object", NULL) : 0;
        if (!id) {
                /* notifications: nothing is answered */
                if (!strcmp(method, "notifications/initialized"))
                        m->initialized = true;
                return 0;
        }
        return mcp_request(m, method, id, params);
}

/* ---- the loop --------------------------------------------------------- */

struct mcp_input {
        char *buf;
        size_t len;
        bool skipping;          /* inside a line over the limit */
};

/* Hand each complete line to mcp_message(); a line over the limit is
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
                                r = mcp_error(m, NULL, RPC_INVALID_REQUEST,
                                              "Invalid Request: message over 1 MiB", NULL);
                        } else {
                                bool blank = true;
                                for (size_t i = 0; i < l && blank; i++)
                                        blank = strchr(" \t\r", in->buf[start + i]) != NULL;
                                r = blank ? 0 : mcp_message(m, in->buf + start, l);
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
                        r = mcp_error(m, NULL, RPC_INVALID_REQUEST,
                                      "Invalid Request: message over 1 MiB", NULL);
                        if (r < 0)
                                return r;
                }
                in->skipping = true;
                in->len = 0;
        }
        return 0;
}

static int mcp_inbox_events(struct mcp *m)
{
        char buf[16 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool changed = false;
        ssize_t n;

        n = read(m->ifd, buf, sizeof(buf));
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        for (char *p = buf; p < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)p;
                p += sizeof(*ev) + ev->len;
                if (inbox_event(&m->ib, m->ifd, ev))
                        changed = true;
        }
        if (!changed || !m->initialized)
                return 0;
        return mcp_send(m, json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
                                     "notifications/resources/list_changed"));
}

static int mcp_loop(struct mcp *m)
{
        struct mcp_input in = { .buf = malloc(MCP_MAX_LINE + 2 + MCP_READ_CHUNK) };
        int r = 0;

        if (!in.buf)
                return -ENOMEM;
        while (r >= 0) {
                struct pollfd p[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
                                       { .fd = m->ifd, .events = POLLIN } };
                if (poll(p, 2, -1) < 0) {
                        r = errno == EINTR ? 0 : -errno;
                        continue;
                }
                if (p[1].revents & POLLIN)
                        r = mcp_inbox_events(m);
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
        r = hd_key_load(path, &m->key, m->key_error, sizeof(m->key_error));
        if (r == 0) {
                struct submit_err e;
                if (submit_key_check(m->key, path, m->kid, &e) != 0) {
                        snprintf(m->key_error, sizeof(m->key_error), "%s", e.msg);
                        hd_key_free(TAKE_PTR(m->key));
                        r = -EINVAL;
                }
        }
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

        m->ifd = -1;
        m->ib.fd = -1;
        if (!m->out)
                m->out = stdout;
        r = ctl_config(conf, &m->cfg);
        if (r)
                return r;
        r = inbox_init(&m->ib, m->cfg, m->agent, NULL, 0, "mcp");
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
        if (r == 0 && mcp_tools_init(m) < 0)
                r = ctl_fail(CTL_EXIT_ERROR, "mcp: the tool table does not parse");
        return r;
}

void mcp_close(struct mcp *m)
{
        if (m->ifd >= 0)
                close(m->ifd);
        m->ifd = -1;
        inbox_done(&m->ib);
        json_decref(TAKE_PTR(m->tools));
        hd_key_free(TAKE_PTR(m->key));
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
        struct mcp m = { .ifd = -1, .ib = { .fd = -1 }, .out = stdout };
        int c, r;

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
                m.ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
                if (m.ifd < 0 || inbox_watch(&m.ib, m.ifd) < 0)
                        r = ctl_fail(CTL_EXIT_ERROR, "mcp: inotify on %s: %s", m.ib.dir,
                                     strerror(errno));
        }
        if (r == 0) {
                /* a client that is gone shows as EPIPE on the next write */
                signal(SIGPIPE, SIG_IGN);
                r = mcp_loop(&m);
                if (r == -EPIPE)
                        r = 0;
                r = r < 0 ? ctl_fail(CTL_EXIT_ERROR, "mcp: %s", strerror(-r)) : CTL_EXIT_OK;
        }
        mcp_close(&m);
        return r;
}
