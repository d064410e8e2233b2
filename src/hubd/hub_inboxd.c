/* /mcp's inbox tools as handoffd does them (mcp.h, struct mcp_inbox_ops):
 * the hub's user reads no agent's state_dir (each handoffs/ is 2770, the
 * daemon's and the agent's), so handoff_inbox, handoff_take,
 * handoff_complete, the resources and the stream's look at the inbox are
 * each one request on the daemon's control socket for the token's agent
 * (src/handoffd/control_agent.c; the daemon lets [control] hub_user ask).
 * A request is made on the thread that needs it (a pool thread, or the
 * watcher for a stream's look) and waits at most HUB_CTL_TIMEOUT_MS
 * (a look of the watcher's HUB_CTL_LOOK_TIMEOUT_MS: it is tried again at
 * the next event or tick). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "complete.h"
#include "hub.h"
#include "hub_mcp.h"
#include "mcp.h"
#include "util.h"

#define HUB_CTL_TIMEOUT_MS 5000
#define HUB_CTL_LOOK_TIMEOUT_MS 500
/* An answer at most: a bootstrap is at most max_file_size, escaped. */
#define HUB_CTL_ANSWER_MAX (32u << 20)

/* req (taken) to the daemon, its answer into *ret: 0, or -EPROTO with err
 * saying what went wrong. */
static int ctl_call(const struct hub *h, json_t *req, int64_t timeout_ms, json_t **ret,
                    char *err, size_t errlen)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = h->cfg->control_socket;
        _cleanup_free_ char *out = NULL, *in = NULL;
        _cleanup_close_ int fd = -1;
        size_t len = 0, cap = 0, off = 0, n;
        int64_t deadline = mono_usec() + timeout_ms * 1000LL;
        json_error_t je;
        int r = 0;

        out = req ? json_dumps(req, JSON_COMPACT) : NULL;
        json_decref(req);
        if (!out) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        n = strlen(out);
        out[n++] = '\n';        /* json_dumps() leaves room for its NUL */
        if (xsnprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path) < 0)
                r = -ENAMETOOLONG;
        if (r == 0 && (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
                r = -errno;
        if (r == 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                r = -errno;
        /* the request, then the answer until the daemon closes */
        while (r == 0) {
                struct pollfd p = { .fd = fd, .events = off < n ? POLLOUT : POLLIN };
                int64_t left = (deadline - mono_usec()) / 1000;
                ssize_t k;

                if (left <= 0) {
                        r = -ETIMEDOUT;
                        break;
                }
                if (poll(&p, 1, (int)left) < 0) {
                        if (errno != EINTR)
                                r = -errno;
                        continue;
                }
                if (off < n) {
                        k = send(fd, out + off, n - off, MSG_NOSIGNAL);
                        if (k < 0 && errno != EAGAIN && errno != EINTR)
                                r = -errno;
                        else if (k > 0)
                                off += (size_t)k;
                        continue;
                }
                if (len == cap) {
                        char *x;
                        if (cap >= HUB_CTL_ANSWER_MAX) {
                                r = -EMSGSIZE;
                                break;
                        }
                        x = realloc(in, cap = cap ? 2 * cap : 4096);
                        if (!x) {
                                r = -ENOMEM;
                                break;
                        }
                        in = x;
                }
                k = recv(fd, in + len, cap - len, 0);
                if (k == 0)
                        break;
                if (k < 0 && errno != EAGAIN && errno != EINTR)
                        r = -errno;
                else if (k > 0)
                        len += (size_t)k;
        }
        if (r == 0 && !(*ret = json_loadb(in ? in : "", len, JSON_REJECT_DUPLICATES, &je)))
                r = -EBADMSG;
        /* the daemon closes on a peer it does not serve, without a word;
         * one code for all of it: a missing socket (ENOENT) is not a
         * missing handoff */
        if (r < 0) {
                snprintf(err, errlen, "handoffd's control socket %s: %s (is handoffd running, "
                         "with [control] hub_user this hub's user?)", path,
                         r == -EBADMSG ? "no answer" : strerror(-r));
                return -EPROTO;
        }
        return 0;
}

/* {command, agent: m's, ...} asked; 0 with *ret an answer that is ok, or
 * -errno with err (the daemon's errno, with the line it gave). */
static int ask(const struct mcp *m, const char *cmd, json_t *extra, json_t **ret, char *err,
               size_t errlen)
{
        /* a stream's look and a complete's are made on the watcher, under
         * its lock: every other wait waits for them, so they wait the least */
        int64_t timeout_ms = strcmp(cmd, "stamp") && strcmp(cmd, "complete_word")
                ? HUB_CTL_TIMEOUT_MS : HUB_CTL_LOOK_TIMEOUT_MS;
        json_t *req = json_pack("{s:s, s:s}", "command", cmd, "agent", m->agent);
        json_t *ans = NULL;
        int r, e;

        if (req && extra)
                json_object_update(req, extra);
        json_decref(extra);
        r = ctl_call(m->userdata, req, timeout_ms, &ans, err, errlen);
        if (r < 0)
                return r;
        if (json_is_true(json_object_get(ans, "ok"))) {
                *ret = ans;
                return 0;
        }
        e = (int)json_integer_value(json_object_get(ans, "errno"));
        snprintf(err, errlen, "%s: %s", m->ib.dir,
                 json_string_value(json_object_get(ans, "error")) ?: "refused by handoffd");
        *ret = ans;     /* the caller may read more of a refusal */
        return e > 0 ? -e : -EIO;
}

static int op_list(const struct mcp *m, json_t **ret, size_t *ret_more, char *err,
                   size_t errlen)
{
        _cleanup_json_ json_t *ans = NULL;
        json_t *list;
        int r;

        r = ask(m, "inbox", NULL, &ans, err, errlen);
        if (r < 0)
                return r;
        list = json_object_get(ans, "handoffs");
        if (!json_is_array(list)) {
                snprintf(err, errlen, "%s: handoffd's answer has no list", m->ib.dir);
                return -EBADMSG;
        }
        *ret = json_incref(list);
        *ret_more = (size_t)json_integer_value(json_object_get(ans, "not_shown"));
        return 0;
}

/* The bootstrap of an answer to take or peek. */
static int bootstrap_of(const struct mcp *m, json_t *ans, json_t **ret, char *err,
                        size_t errlen)
{
        json_t *b = json_object_get(ans, "bootstrap");

        if (!json_is_object(b)) {
                snprintf(err, errlen, "%s: handoffd's answer has no bootstrap", m->ib.dir);
                return -EBADMSG;
        }
        *ret = json_incref(b);
        return 0;
}

static int op_take(const struct mcp *m, const char *id, json_t **ret, hd_verdict *v,
                   char *err, size_t errlen)
{
        _cleanup_json_ json_t *ans = NULL;
        int r;

        r = ask(m, "take", id ? json_pack("{s:s}", "id", id) : NULL, &ans, err, errlen);
        if (r == -EBADMSG && ans) {
                /* the reason by its name, as hd_consume_with() gives it */
                const char *why = json_string_value(json_object_get(ans, "reason"));
                for (int i = 1; why && i < _HD_R_MAX; i++)
                        if (!strcmp(hd_reason_name((hd_reason)i), why))
                                v->reason = (hd_reason)i;
                snprintf(v->detail, sizeof(v->detail), "%s",
                         json_string_value(json_object_get(ans, "detail")) ?: "");
        }
        if (r < 0)
                return r;
        return bootstrap_of(m, ans, ret, err, errlen);
}

static int op_peek(const struct mcp *m, const char *id, json_t **ret, char *err, size_t errlen)
{
        _cleanup_json_ json_t *ans = NULL;
        int r;

        r = ask(m, "peek", json_pack("{s:s}", "id", id), &ans, err, errlen);
        if (r < 0)
                return r;
        return bootstrap_of(m, ans, ret, err, errlen);
}

static int op_complete(const struct mcp *m, const char *id, const hd_result *res,
                       struct complete_out *out)
{
        _cleanup_json_ json_t *ans = NULL;
        json_t *rj = json_object();
        int r;

        if (rj && res->text)
                json_object_set_new(rj, "text", json_string(res->text));
        if (rj && res->data)
                json_object_set(rj, "data", (json_t *)res->data);
        if (rj && res->failed)
                json_object_set_new(rj, "failed", json_string(res->failed));
        if (rj && res->input_required)
                json_object_set_new(rj, "input_required", json_string(res->input_required));
        r = ask(m, "complete", json_pack("{s:s, s:o}", "id", id, "result", rj), &ans,
                out->msg, sizeof(out->msg));
        if (r == -ENOTDIR) {
                snprintf(out->msg, sizeof(out->msg), "%.600s does not exist: this agent consumed "
                         "nothing", m->ib.dir);
                return out->code = AG_ERROR;
        }
        if (r < 0)
                return out->code = r == -EPERM ? AG_NEGATIVE : AG_ERROR;
        snprintf(out->msg, sizeof(out->msg), "%s",
                 json_string_value(json_object_get(ans, "msg")) ?: "");
        out->code = (int)json_integer_value(json_object_get(ans, "code"));
        return out->code;
}

static bool op_word(const struct mcp *m, const char *id, const char *status, int *ret_code,
                    char *msg, size_t msglen)
{
        _cleanup_json_ json_t *ans = NULL;

        if (ask(m, "complete_word", json_pack("{s:s, s:s}", "id", id, "status", status),
                &ans, msg, msglen) < 0)
                return false;   /* looked at again at the next tick */
        if (!json_is_true(json_object_get(ans, "taken")))
                return false;
        *ret_code = (int)json_integer_value(json_object_get(ans, "code"));
        snprintf(msg, msglen, "%s", json_string_value(json_object_get(ans, "msg")) ?: "");
        return true;
}

const struct mcp_inbox_ops hub_inboxd_ops = {
        .list = op_list, .take = op_take, .peek = op_peek, .complete = op_complete,
        .word = op_word,
};

int hub_inboxd_stamp(const struct hub *h, const char *agent, struct timespec *ret)
{
        _cleanup_json_ json_t *ans = NULL;
        struct mcp m = { .agent = agent, .userdata = (void *)h };
        long long sec;
        long nsec;
        char err[512];
        int r;

        r = ask(&m, "stamp", NULL, &ans, err, sizeof(err));
        if (r < 0)
                return r;
        if (sscanf(json_string_value(json_object_get(ans, "stamp")) ?: "", "%lld.%ld", &sec,
                   &nsec) != 2)
                return -ENOENT;         /* no handoffs/ yet */
        *ret = (struct timespec){ .tv_sec = (time_t)sec, .tv_nsec = nsec };
        return 0;
}
