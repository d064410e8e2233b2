/* The control socket; see control.h.  Served by the loop with libuv pipes;
 * a request is at most CONTROL_REQUEST_MAX bytes (CONTROL_AGENT_REQUEST_MAX
 * from a peer that may act for agents, control_agent.c), ended by a newline
 * or the peer's shutdown.  Connections are bounded (CONTROL_MAX_CONNS in
 * all, CONTROL_MAX_PER_UID per peer uid, CONTROL_MAX_PER_HUB for [control]
 * hub_user's): a new one is always served and the oldest makes room, so
 * whoever holds connections open neither runs the daemon out of file
 * descriptors nor locks others out for long. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdlib.h>
#include <sodium.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agents.h"
#include "control.h"
#include "files.h"
#include "log.h"
#include "parts.h"

struct conn;

struct control {
        uv_loop_t *loop;
        uv_pipe_t server;
        struct config *cfg;
        const struct parts *p;
        char *path;
        struct conn *oldest, *newest;   /* open connections, by age */
        unsigned n_conns;
        /* Refusals and drops: a line each at most once per LOG_QUIET_USEC. */
        struct log_quiet refused_q, dropped_q;
        int64_t loaded_usec, reload_failed_usec;
        char reload_error[512];
};

/* A peer gets this long to send its request and read the answer. */
#define CONN_TIMEOUT_MS 5000

struct conn {
        struct conn *prev, *next;       /* in ctl's list while open */
        uid_t uid;
        bool agent_peer;        /* may act for agents (control_agent.c) */
        uv_pipe_t pipe;
        uv_timer_t timer;
        int handles;            /* open libuv handles; freed at 0 */
        bool closing;
        struct control *ctl;
        char *buf;              /* cap + 1 bytes */
        size_t len, cap;
        bool answered;
        uv_write_t wr;
        char *resp;
};

/* Status lists the left items' inodes up to this many (it tells them
 * from the items a served agent waits for); past it, only figures. */
#define CONTROL_LEFT_INODES_MAX 4096

/* The agents out of service (agents.c), agent -> why: built when status
 * is asked, never kept as JSON.  A why that is no UTF-8 (a path's bytes)
 * is left out.  NULL: out of memory. */
static json_t *unserved_status(const struct parts *p)
{
        json_t *o = json_object();

        for (const struct unserved_entry *u = dict_first(&p->unserved); o && u;
             u = dict_next(u))
                (void)json_object_set_new(o, dict_key(u), json_string(u->why));
        return o;
}

/* What the daemon left in handoff/ for agents not served here, from its
 * own memory (foreign.c), so that handoffctl status need not
 * parse a file: {count, by_agent, oldest_s_by_agent, inodes, inodes_complete}. */
static json_t *left_status(const struct parts *p, int64_t now)
{
        _cleanup_json_ json_t *by = json_object(), *old = json_object(), *inos = json_array();
        const struct foreign_entry *e;
        size_t n = 0;

        if (!by || !old || !inos)
                return NULL;
        for (e = dict_first(&p->foreign.names); e; e = dict_next(e)) {
                json_int_t age = e->ctime_ns > 0 ? (now - e->ctime_ns / 1000) / 1000000 : 0;

                if (e->again)
                        continue;       /* being looked at again */
                n++;
                json_object_set_new(by, e->to,
                                    json_integer(json_integer_value(json_object_get(by, e->to)) + 1));
                if (!json_object_get(old, e->to) ||
                    age > json_integer_value(json_object_get(old, e->to)))
                        json_object_set_new(old, e->to, json_integer(age < 0 ? 0 : age));
                if (json_array_size(inos) < CONTROL_LEFT_INODES_MAX)
                        json_array_append_new(inos, json_integer((json_int_t)e->ino));
        }
        return json_pack("{s:I, s:O, s:O, s:O, s:b}", "count", (json_int_t)n, "by_agent", by,
                         "oldest_s_by_agent", old, "inodes", inos,
                         "inodes_complete", n <= CONTROL_LEFT_INODES_MAX);
}

/* What status says of the configuration: its file, the digest of what
 * was loaded (handoffctl compares the file on disk with it), and a failed
 * reload, which leaves the daemon on its old configuration. */
static json_t *config_status(const struct control_config *cc, int64_t now)
{
        char hex[65];

        if (!cc)
                return json_null();
        sodium_bin2hex(hex, sizeof(hex), cc->digest, 32);
        return json_pack("{s:s, s:s, s:I, s:o}", "path", cc->path ? cc->path : "",
                         "sha256", hex, "loaded_age_s",
                         (json_int_t)((now - cc->loaded_usec) / 1000000),
                         "reload_failed", cc->reload_failed_usec
                         ? json_pack("{s:I, s:s}", "age_s",
                                     (json_int_t)((now - cc->reload_failed_usec) / 1000000),
                                     "error", cc->reload_error ? cc->reload_error : "")
                         : json_null());
}

json_t *control_status(const struct parts *p, const struct control_config *cc)
{
        const struct spool *sp = p->sp;
        const char *config_path = cc ? cc->path : NULL;
        const struct spool_stats *s = &sp->st;
        int64_t now = hd_now_usec();
        json_t *rej = json_object(), *o;

        if (!rej)
                return NULL;
        for (int i = 1; i < _HD_R_MAX; i++)
                if (s->rejected[i])
                        json_object_set_new(rej, hd_reason_name((hd_reason)i),
                                            json_integer((json_int_t)s->rejected[i]));
        /* no error yet: null, never a -1 a script would take for an age */
        o = json_pack("{s:{s:b, s:I, s:I, s:s, s:s, s:b, s:b, s:s}, "
                      "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}, "
                      "s:s?, s:o}",
                      "daemon", "running", 1, "pid", (json_int_t)getpid(),
                      "uptime_s", (json_int_t)((now - s->started_usec) / 1000000),
                      "version", HD_VERSION_STRING, "config", config_path ? config_path : "",
                      "fsync", sp->cfg->fsync, "watch_ok", s->watch_ok,
                      "spool", sp->cfg->spool_dir,
                      "counters", "claimed", (json_int_t)s->claimed,
                      "delivered", (json_int_t)s->delivered,
                      "recovered", (json_int_t)s->recovered,
                      "retried", (json_int_t)s->retried,
                      "consumed", (json_int_t)s->consumed,
                      "expired", (json_int_t)s->expired,
                      "canceled", (json_int_t)s->canceled,
                      "left", (json_int_t)s->left,
                      "deferred", (json_int_t)s->deferred,
                      "overflows", (json_int_t)s->overflows,
                      "rescans", (json_int_t)s->rescans,
                      "errors", (json_int_t)s->errors,
                      "pruned", (json_int_t)(s->archived_pruned + s->rejected_pruned),
                      "completed", (json_int_t)s->completed,
                      "failed", (json_int_t)s->failed,
                      "results_refused", (json_int_t)s->results_refused,
                      "rejected", rej,
                      "last_error", s->last_error[0] ? s->last_error : NULL,
                      "last_error_age_s", s->last_error_usec
                      ? json_integer((now - s->last_error_usec) / 1000000) : json_null());
        if (o)
                json_object_set_new(o, "config", config_status(cc, now));
        if (o)
                json_object_set_new(o, "left", left_status(p, now));
        /* agents taken out of service by their directory (spool.c) */
        if (o)
                json_object_set_new(o, "agents_out_of_service", unserved_status(p));
        if (o && sp->relay.status)
                json_object_set_new(o, "relay", sp->relay.status(sp->relay.ctx, now));
        if (o && sp->a2a.status)
                json_object_set_new(o, "a2a", sp->a2a.status(sp->a2a.ctx, now));
        return o;
}

int control_handle(const struct parts *p, const struct control_config *cc,
                   const char *req, size_t len, char **ret)
{
        return control_handle_peer(p, cc, req, len, false, ret);
}

int control_handle_peer(const struct parts *p, const struct control_config *cc,
                        const char *req, size_t len, bool agent_peer, char **ret)
{
        _cleanup_json_ json_t *doc = NULL, *resp = NULL;
        /* a result's data is any JSON: deeper than a command's own */
        hd_limits lim = { .max_size = agent_peer ? CONTROL_AGENT_REQUEST_MAX : CONTROL_REQUEST_MAX,
                          .max_depth = agent_peer ? 64 : 4 };
        hd_verdict v;
        const char *cmd;
        size_t n;

        while (len > 0 && (req[len - 1] == '\n' || req[len - 1] == '\r'))
                len--;
        if (hd_parse(req, len, &lim, &doc, &v) < 0)
                resp = json_pack("{s:b, s:s}", "ok", 0, "error", v.detail);
        else if (!(cmd = json_string_value(json_object_get(doc, "command"))))
                resp = json_pack("{s:b, s:s}", "ok", 0, "error", "no \"command\"");
        else if (!strcmp(cmd, "status")) {
                resp = control_status(p, cc);
                if (resp)
                        json_object_set_new(resp, "ok", json_true());
        } else if (!strcmp(cmd, "ping"))
                resp = json_pack("{s:b}", "ok", 1);
        else if (control_agent_command(p, cmd, doc, agent_peer, &resp))
                ;
        else
                resp = json_pack("{s:b, s:s}", "ok", 0, "error", "unknown command");
        if (!resp)
                return -ENOMEM;
        if (hd_canon_dump(resp, NULL, ret, &n) < 0)
                return -ENOMEM;
        return 0;
}

int control_peer_allowed(uid_t uid, const gid_t *gids, size_t n, const char *group)
{
        struct group *gr;

        if (uid == 0 || uid == geteuid())
                return 1;
        if (!group || !(gr = getgrnam(group)))
                return 0;
        for (size_t i = 0; i < n; i++)
                if (gids[i] == gr->gr_gid)
                        return 1;
        return 0;
}

static void conn_handle_closed(uv_handle_t *h)
{
        struct conn *c = h->data;

        if (--c->handles > 0)
                return;
        free(c->resp);
        free(c->buf);
        free(c);
}

static void conn_unlink(struct conn *c)
{
        struct control *ctl = c->ctl;

        if (!c->prev && ctl->oldest != c)
                return;         /* not in the list */
        if (c->prev)
                c->prev->next = c->next;
        else
                ctl->oldest = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                ctl->newest = c->prev;
        c->prev = c->next = NULL;
        ctl->n_conns--;
}

static void conn_close(struct conn *c)
{
        if (c->closing)
                return;
        c->closing = true;
        conn_unlink(c);
        uv_close((uv_handle_t *)&c->pipe, conn_handle_closed);
        uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
}

static void conn_timeout(uv_timer_t *t)
{
        conn_close(t->data);
}

static void conn_written(uv_write_t *w, int status)
{
        struct conn *c = w->data;
        (void)status;
        conn_close(c);
}

static void conn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
        struct conn *c = h->data;
        (void)hint;
        b->base = c->buf + c->len;
        b->len = c->cap - c->len;
}

static void conn_answer(struct conn *c)
{
        uv_buf_t b;

        c->answered = true;
        uv_read_stop((uv_stream_t *)&c->pipe);
        struct control *ctl = c->ctl;
        struct control_config cc = {
                .path = ctl->cfg->path, .digest = ctl->cfg->digest,
                .loaded_usec = ctl->loaded_usec, .reload_failed_usec = ctl->reload_failed_usec,
                .reload_error = ctl->reload_error,
        };
        if (control_handle_peer(ctl->p, &cc, c->buf, c->len, c->agent_peer, &c->resp) < 0) {
                conn_close(c);
                return;
        }
        size_t l = strlen(c->resp);
        char *nl = realloc(c->resp, l + 2);
        if (nl) {
                c->resp = nl;
                memcpy(c->resp + l, "\n", 2);
                l++;
        }
        b = uv_buf_init(c->resp, (unsigned)l);
        c->wr.data = c;
        if (uv_write(&c->wr, (uv_stream_t *)&c->pipe, &b, 1, conn_written) < 0)
                conn_close(c);
}

static void conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
        struct conn *c = s->data;
        (void)b;

        if (c->answered)
                return;
        if (n > 0) {
                c->len += (size_t)n;
                if (memchr(c->buf, '\n', c->len) || c->len >= c->cap)
                        conn_answer(c);
                return;
        }
        if (n == UV_EOF && c->len > 0) {
                conn_answer(c);
                return;
        }
        if (n < 0)
                conn_close(c);
}

/* A line for what was refused or dropped, at most once per
 * LOG_QUIET_USEC: whoever can connect must not fill the journal either. */
static void control_log_quietly(struct control *ctl, bool refused, uid_t uid)
{
        unsigned n;

        if (!log_quiet_due(refused ? &ctl->refused_q : &ctl->dropped_q,
                           (int64_t)uv_now(ctl->loop) * 1000, &n))
                return;
        if (refused)
                log_warning("Control socket: refused uid %u (not root, not us, not in group %s); "
                            "%u refusal(s) since the last such line", (unsigned)uid,
                            ctl->cfg->control_group ? ctl->cfg->control_group : "(none)", n);
        else
                log_warning("Control socket: dropped the oldest connection for uid %u, over the "
                            "limits (%u in all, %u per uid); %u drop(s) since the last such line",
                            (unsigned)uid, CONTROL_MAX_CONNS, CONTROL_MAX_PER_UID, n);
}

/* Room for one more connection of uid: its oldest goes when it has its
 * share, else the oldest of all when the total is reached. */
static void control_make_room(struct control *ctl, uid_t uid, bool hub)
{
        struct conn *c, *first = NULL;
        unsigned mine = 0;

        for (c = ctl->oldest; c; c = c->next)
                if (c->uid == uid && mine++ == 0)
                        first = c;
        if (mine >= (hub ? CONTROL_MAX_PER_HUB : CONTROL_MAX_PER_UID))
                c = first;
        else if (ctl->n_conns >= CONTROL_MAX_CONNS)
                c = ctl->oldest;
        else
                return;
        control_log_quietly(ctl, false, uid);
        conn_close(c);
}

static void on_connection(uv_stream_t *server, int status)
{
        struct control *ctl = server->data;
        struct conn *c;
        struct ucred cred;
        socklen_t sl = sizeof(cred);
        gid_t gids[NGROUPS_MAX > 256 ? 256 : NGROUPS_MAX];
        socklen_t gl = sizeof(gids);
        uv_os_fd_t fd;
        size_t ng = 0;

        if (status < 0)
                return;
        c = calloc(1, sizeof(*c));
        if (!c)
                return;
        c->ctl = ctl;
        uv_pipe_init(ctl->loop, &c->pipe, 0);
        uv_timer_init(ctl->loop, &c->timer);
        c->pipe.data = c->timer.data = c;
        c->handles = 2;
        if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
                conn_close(c);
                return;
        }
        if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &sl) < 0) {
                conn_close(c);
                return;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gids, &gl) == 0)
                ng = gl / sizeof(gid_t);
        else if (ng == 0) {
                gids[0] = cred.gid;
                ng = 1;
        }
        c->agent_peer = control_agent_peer(ctl->cfg, cred.uid);
        if (!c->agent_peer &&
            !control_peer_allowed(cred.uid, gids, ng, ctl->cfg->control_group)) {
                control_log_quietly(ctl, true, cred.uid);
                conn_close(c);
                return;
        }
        c->cap = c->agent_peer ? CONTROL_AGENT_REQUEST_MAX : CONTROL_REQUEST_MAX;
        c->buf = malloc(c->cap + 1);
        if (!c->buf) {
                conn_close(c);
                return;
        }
        control_make_room(ctl, cred.uid, control_hub_peer(ctl->cfg, cred.uid));
        c->uid = cred.uid;
        c->prev = ctl->newest;
        if (ctl->newest)
                ctl->newest->next = c;
        else
                ctl->oldest = c;
        ctl->newest = c;
        ctl->n_conns++;
        uv_timer_start(&c->timer, conn_timeout, CONN_TIMEOUT_MS, 0);
        uv_read_start((uv_stream_t *)&c->pipe, conn_alloc, conn_read);
}

/* A socket file nobody answers on is removed; one that answers is in use
 * (-EADDRINUSE, *ret_pid the pid that listens on it, 0 if unknown). */
static int clear_stale(const char *path, pid_t *ret_pid)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct ucred cred = { 0 };
        socklen_t cl = sizeof(cred);
        struct stat st;
        int fd, r;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (xsnprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path) < 0) {
                close(fd);
                return -ENAMETOOLONG;
        }
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        /* the peer of a connected socket is the process that listens */
        if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0)
                *ret_pid = cred.pid;
        close(fd);
        /* non-blocking: EAGAIN is a full backlog, so somebody listens (a
         * flooded daemon): never wait on it, never take the socket from it */
        if (r == 0 || r == -EAGAIN)
                return -EADDRINUSE;
        return unlink(path) < 0 ? -errno : 0;
}

/* "1234 (handoffd)" for a pid, from /proc; empty when unknown. */
static void control_peer_name(pid_t pid, char *buf, size_t n)
{
        char path[64], comm[32] = "";
        FILE *f;

        buf[0] = '\0';
        if (pid <= 0)
                return;
        snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
        f = fopen(path, "re");
        if (f) {
                if (fgets(comm, sizeof(comm), f))
                        comm[strcspn(comm, "\n")] = '\0';
                fclose(f);
        }
        if (comm[0])
                snprintf(buf, n, "%d (%s)", (int)pid, comm);
        else
                snprintf(buf, n, "%d", (int)pid);
}

int control_open(uv_loop_t *loop, struct config *cfg, const struct parts *p,
                 struct control **ret)
{
        struct control *c;
        char dir[PATH_MAX];
        struct group *gr;
        int r;

        if (strlen(cfg->control_socket) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                return log_error_errno(-ENAMETOOLONG, "Control socket path '%s'",
                                       cfg->control_socket);
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->loop = loop;
        c->cfg = cfg;
        c->p = p;
        c->loaded_usec = hd_now_usec();
        c->path = strdup(cfg->control_socket);
        snprintf(dir, sizeof(dir), "%s", cfg->control_socket);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = '\0';
                mkdir_p_at(AT_FDCWD, dir, 0750);
        }
        pid_t holder = 0;
        r = clear_stale(c->path, &holder);
        if (r == -EADDRINUSE) {
                char who[64] = "another process";
                if (holder > 0) {
                        char name[48];
                        control_peer_name(holder, name, sizeof(name));
                        snprintf(who, sizeof(who), "pid %s", name);
                }
                log_error("Control socket '%s' is in use: %s answers on it. Each handoffd "
                          "on a host needs its own [control] socket (see handoffd.conf(5)); "
                          "stop that one, or give this one another socket",
                          c->path, who);
                goto fail;
        }
        if (r < 0) {
                log_error_errno(r, "Control socket '%s' cannot be used", c->path);
                goto fail;
        }
        uv_pipe_init(loop, &c->server, 0);
        c->server.data = c;
        r = uv_pipe_bind(&c->server, c->path);
        if (r == 0)
                r = chmod(c->path, 0660) < 0 ? -errno : 0;
        if (r == 0 && cfg->control_group && (gr = getgrnam(cfg->control_group)) &&
            chown(c->path, (uid_t)-1, gr->gr_gid) < 0)
                log_warning_errno(errno, "Cannot give '%s' to group %s", c->path,
                                  cfg->control_group);
        if (r == 0)
                r = uv_listen((uv_stream_t *)&c->server, 16, on_connection);
        if (r < 0) {
                log_error_errno(r, "Cannot listen on '%s'", c->path);
                uv_close((uv_handle_t *)&c->server, NULL);
                goto fail;
        }
        *ret = c;
        return 0;
fail:
        free(c->path);
        free(c);
        return r;
}

void control_set_config(struct control *c, struct config *cfg)
{
        if (!c)
                return;
        c->cfg = cfg;
        c->loaded_usec = hd_now_usec();
        c->reload_failed_usec = 0;
        c->reload_error[0] = '\0';
}

void control_reload_failed(struct control *c, const char *why)
{
        if (!c)
                return;
        c->reload_failed_usec = hd_now_usec();
        snprintf(c->reload_error, sizeof(c->reload_error), "%s", why);
}

static void server_closed(uv_handle_t *h)
{
        struct control *c = h->data;
        free(c->path);
        free(c);
}

/* The memory goes when the loop has closed the handle. */
void control_close(struct control *c)
{
        if (!c)
                return;
        unlink(c->path);
        while (c->oldest)
                conn_close(c->oldest);
        uv_close((uv_handle_t *)&c->server, server_closed);
}
