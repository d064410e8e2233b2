/* A2A outward: a handoff for a [remote NAME] a2a leaves
 * handoff/ only after the same checks as a local one, waits as
 * outbox/<handoff_id>.json (as a relayed one does, outbox.c), and is sent
 * to NAME's A2A server as SendMessage with messageId = handoff_id.
 *
 *   unreachable, 5xx       retried after 1 s, 2 s, ... 60 s until its
 *                          expires_at: then rejected/ as expired_unsent
 *   4xx, an A2A error      rejected/ as remote_rejected, the server's words
 *                          as the detail
 *   401, 403               the token refused: retried as unreachable, a
 *                          problem in status, never final
 *   a task                 its id kept in outbox/.<id>.a2a-task, its state
 *                          followed by GetTask (1 s ... 10 s) until an end
 *                          (completed, failed, canceled, rejected,
 *                          input_required, auth_required), "unknown" (the
 *                          server forgot it), or "expired_unfinished"
 *                          a2a_follow_max after it entered outbox/; then
 *                          archive/ as relayed to "a2a:NAME" with
 *                          remote_outcome = that end, remote_detail = the
 *                          task's text, its artifacts whole in
 *                          archive/NAME.result
 *
 * Where it runs: the HTTP calls and every byte of the server's answers
 * are handoff-a2a's (src/a2a/), a child process with no descriptor of the
 * spool, spoken to through two pipes; one per remote, so a server that
 * hangs holds only its own items.  A helper makes up to 8 calls at once
 * (src/a2a/main.c), A2A_INFLIGHT_MAX requests of its remote are in flight,
 * and each answer names its item, in whatever order the calls end.  What
 * it answers is one line of seven tab-separated fields, checked one by
 * one before anything moves
 * (a2a_reply.c); a line that does not check stops the helper, as does a helper
 * that exits: what it had in flight is sent again (the same messageId)
 * when a new one runs, 1 s later.  The daemon itself links no HTTP client
 * and parses no server's JSON.
 *
 * The directory is the truth: at start every outbox/ item for an A2A
 * remote is indexed again, with its task when the side file names one.
 * A server need not deduplicate (the SDK's makes a new task for a
 * messageId it has seen), so the side file says "-" before the first
 * send goes out; a send after that (a crash lost the answer, or a try
 * ended in an error or a timeout after the request may have gone out)
 * asks the server by ListTasks for a task of contextId = handoff_id and
 * adopts it, and only a server without ListTasks is sent the message
 * again (counted in status as resent_unchecked).
 *
 * This file owns the sender's loop: its timer, the helper process and its
 * pipes, the hooks into the spool and the index at start; the items'
 * records and ends are a2a_item.c's, what a line of the helper means
 * a2a_reply.c's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "a2a_reply.h"
#include "a2a_item.h"
#include "a2a_out.h"
#include "files.h"
#include "log.h"
#include "outbox_dir.h"
#include "spool.h"
#include "store.h"
#include "util.h"

static void on_timer(uv_timer_t *t);
static void helper_down(struct a2a_remote_st *r, const char *why);

static void kick(struct a2a_out *a)
{
        if (a->handles_open && !a->stopping)
                uv_timer_start(&a->timer, on_timer, 0, 0);
}

/* ---- the helper --------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
        static char b[64 * 1024];

        (void)h;
        (void)size;
        *buf = uv_buf_init(b, sizeof(b));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
        struct a2a_remote_st *r = s->data;
        struct a2a_out *a = r->a;
        int64_t now = hd_now_usec();
        bool moved = false;

        if (n < 0) {
                helper_down(r, n == UV_EOF ? "closed its output" : uv_strerror((int)n));
                return;
        }
        for (ssize_t i = 0; i < n; i++) {
                char c = buf->base[i];
                if (c != '\n') {
                        if (r->line_len == A2A_LINE_MAX) {
                                helper_down(r, "a line over its limit");
                                return;
                        }
                        r->line[r->line_len++] = c;
                        continue;
                }
                r->line[r->line_len] = '\0';
                r->line_len = 0;
                if (a2a_reply(a, r, r->line, now) < 0) {
                        helper_down(r, "a line that does not check");
                        return;
                }
                moved = true;
        }
        if (moved) {
                int q = store_flush(a->sp);
                if (q < 0)
                        spool_error(a->sp, q, "Cannot fsync the spool");
                kick(a);
        }
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
        struct a2a_remote_st *r = p->data;

        /* Exited unasked (an exit after its output closed is seen as that):
         * a helper error as a line that does not check is. */
        if (r->running) {
                r->a->st.helper_errors++;
                log_warning("A2A: handoff-a2a of remote %s exited (status %lld, signal %d)",
                            r->name, (long long)status, sig);
        }
        helper_down(r, NULL);
        r->proc_open = false;
        if (!uv_is_closing((uv_handle_t *)p))
                uv_close((uv_handle_t *)p, NULL);
}

/* A running helper sent sig, its pipes closed; on_exit_cb closes proc. */
static void helper_kill(struct a2a_remote_st *r, int sig)
{
        if (!r->running)
                return;
        r->running = false;
        uv_process_kill(&r->proc, sig);
        uv_read_stop((uv_stream_t *)&r->from);
        uv_close((uv_handle_t *)&r->to, NULL);
        uv_close((uv_handle_t *)&r->from, NULL);
}

/* Remote r's helper is gone or must go: what it had in flight waits for
 * the next one. */
static void helper_down(struct a2a_remote_st *r, const char *why)
{
        struct a2a_out *a = r->a;
        int64_t now = hd_now_usec();

        if (why) {
                a->st.helper_errors++;
                log_warning("A2A: stopping handoff-a2a of remote %s: %s", r->name, why);
        }
        helper_kill(r, SIGKILL);
        for (size_t i = 0; i < a->n_items; i++) {
                struct a2a_item *it = &a->items[i];
                if (!it->gone && !strcmp(it->remote, r->name))
                        a2a_item_event(a, it, AE_DOWN, now);
        }
        r->inflight = 0;
        r->line_len = 0;
        r->helper_at = now + A2A_BACKOFF_MIN_USEC;
        if (!a->stopping)
                kick(a);
}

static int helper_start(struct a2a_out *a, struct a2a_remote_st *r)
{
        char *args[] = { a->helper, NULL };
        uv_stdio_container_t io[3];
        uv_process_options_t o = { 0 };
        int q;

        uv_pipe_init(a->loop, &r->to, 0);
        uv_pipe_init(a->loop, &r->from, 0);
        r->to.data = r->from.data = r;
        io[0] = (uv_stdio_container_t) { .flags = UV_CREATE_PIPE | UV_READABLE_PIPE,
                                         .data.stream = (uv_stream_t *)&r->to };
        io[1] = (uv_stdio_container_t) { .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
                                         .data.stream = (uv_stream_t *)&r->from };
        io[2] = (uv_stdio_container_t) { .flags = UV_INHERIT_FD, .data.fd = 2 };
        o.file = a->helper;
        o.args = args;
        o.stdio = io;
        o.stdio_count = 3;
        o.exit_cb = on_exit_cb;
        r->proc.data = r;
        q = uv_spawn(a->loop, &r->proc, &o);
        if (q < 0) {
                uv_close((uv_handle_t *)&r->to, NULL);
                uv_close((uv_handle_t *)&r->from, NULL);
                uv_close((uv_handle_t *)&r->proc, NULL);
                r->helper_at = hd_now_usec() + A2A_BACKOFF_MAX_USEC;
                return log_error_errno(q, "A2A: cannot start %s for remote %s", a->helper, r->name);
        }
        uv_read_start((uv_stream_t *)&r->from, on_alloc, on_read);
        r->running = r->proc_open = true;
        a->st.helper_starts++;
        return 0;
}

/* ---- the timer ---------------------------------------------------------- */

static void on_timer(uv_timer_t *t)
{
        struct a2a_out *a = t->data;
        int64_t now = hd_now_usec(), due = now + A2A_BACKOFF_MAX_USEC;
        bool flush = false;

        if (a->stopping)
                return;
        for (size_t i = 0; i < a->n_remotes; i++) {
                struct a2a_remote_st *r = &a->remotes[i];
                bool want = config_remote_a2a(a->sp->cfg, r->name) != NULL;
                /* A remote gone in a reload: its helper ends once the
                 * calls it has are answered (a2a_item_request() makes no more). */
                if (r->running && !want && r->inflight == 0)
                        helper_kill(r, SIGTERM);
                if (!r->running && !r->proc_open && now >= r->helper_at && want)
                        helper_start(a, r);
        }
        for (size_t i = 0; i < a->n_items; i++) {
                struct a2a_item *it = &a->items[i];
                if (it->gone || it->st == AI_SENDING || it->st == AI_GETTING)
                        continue;
                int64_t end = it->st == AI_UNSENT ? it->exp : it->at + a2a_item_follow_max(a, it);
                if (now > end) {
                        a2a_item_event(a, it, AE_EXPIRED, now);
                        flush = true;
                        continue;
                }
                if (end + 1 < due)
                        due = end + 1;
                if (it->next > now) {
                        if (it->next < due)
                                due = it->next;
                        continue;
                }
                /* Each remote its own helper and its own room in flight:
                 * one that hangs fills its own, never another's. */
                struct a2a_remote_st *r = a2a_item_remote(a, it->remote);
                if (r && r->running && r->inflight < A2A_INFLIGHT_MAX)
                        a2a_item_event(a, it, AE_DUE, now);
        }
        if (flush && store_flush(a->sp) < 0)
                spool_error(a->sp, -EIO, "Cannot fsync the spool");
        for (size_t i = 0; i < a->n_remotes; i++)
                if (!a->remotes[i].running && a->remotes[i].helper_at < due &&
                    config_remote_a2a(a->sp->cfg, a->remotes[i].name))
                        due = a->remotes[i].helper_at;
        int64_t ms = (due - now + 999) / 1000;
        uv_timer_start(&a->timer, on_timer, ms < 0 ? 0 : (uint64_t)ms, 0);
}

/* ---- hooks -------------------------------------------------------------- */

static int take_hook(void *ctx, const char *name, const struct stat *was,
                     const struct handoff *h, int64_t now)
{
        struct a2a_out *a = ctx;
        struct spool *sp = a->sp;
        struct a2a_item tmp = { 0 }, *it;
        char dst[NAME_MAX + 1];
        int q;

        if (a2a_item_fill(&tmp, h, now) < 0)
                return -EINVAL;         /* hd_verify passed: cannot happen */
        q = xsnprintf(dst, sizeof(dst), "%s.json", tmp.id);
        if (q < 0)
                return q;
        /* A file of ours (outbox_dir.c): what is sent is what verified.
         * An id indexed already is -EEXIST, or -ENOENT for what its take
         * left in handoff/ (a crash): never a second item. */
        q = outbox_dir_take(sp, name, was, h, dst);
        if (q < 0)
                return q;
        if (a2a_item_find(a, tmp.id))
                return 0;       /* its file removed by hand, now again: indexed */
        it = a2a_item_add(a);
        if (!it)
                return -ENOMEM; /* in outbox/: indexed at the next start */
        *it = tmp;
        log_decision(LOG_INFO, it->id, it->remote, "outbox", NULL,
                     "Queued %s for A2A remote %s", it->id, it->remote);
        kick(a);
        return 0;
}

/* ---- start and stop ----------------------------------------------------- */

/* One item of outbox/ at start (outbox_dir_each()): an A2A remote's
 * is indexed, with its task when the side file names one. */
static int scan_one(void *ctx, const char *k, const char *id, int64_t now)
{
        struct a2a_out *a = ctx;
        struct spool *sp = a->sp;
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_handoff_ struct handoff h = { 0 };
        struct a2a_item tmp = { 0 }, *it;
        hd_verdict vd;
        int64_t at;

        if (k[0] == '.')
                return 0;
        /* Ours, written from a handoff that verified; one that no longer
         * reads is the relay's scan's to reject. */
        if (outbox_dir_load(sp, k, now, &doc, &vd, &at) < 0 || handoff_parse(doc, &h) < 0)
                return 0;
        if (!config_remote_a2a(sp->cfg, h.to))
                return 0;       /* the relay's */
        if (a2a_item_fill(&tmp, &h, at) < 0 || strcmp(tmp.id, id) || a2a_item_find(a, tmp.id))
                return 0;
        a2a_item_task_load(a, &tmp);
        /* A send of the last run may still be reaching the server: asked
         * for a second later, not at once. */
        if (tmp.began && tmp.st == AI_UNSENT)
                tmp.next = now + A2A_BACKOFF_MIN_USEC;
        it = a2a_item_add(a);
        if (!it)
                return -ENOMEM;
        *it = tmp;
        return 0;
}

int a2a_out_start(uv_loop_t *loop, struct spool *sp, struct a2a_out **ret)
{
        const struct config *c = sp->cfg;
        struct a2a_out *a;
        char self[PATH_MAX];
        ssize_t n;
        int q;

        *ret = NULL;
        if (!config_a2a_on(c))
                return 0;
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->loop = loop;
        a->sp = sp;
        /* handoff-a2a is installed beside handoffd (HD_A2A_HELPER: a test's) */
        const char *env = getenv("HD_A2A_HELPER");
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (env && *env) {
                snprintf(a->helper, sizeof(a->helper), "%s", env);
        } else if (n > 0) {
                self[n] = '\0';
                char *slash = strrchr(self, '/');
                if (slash)
                        *slash = '\0';
                if (xsnprintf(a->helper, sizeof(a->helper), "%s/handoff-a2a", self) < 0) {
                        free(a);
                        return -ENAMETOOLONG;
                }
        } else {
                free(a);
                return log_error_errno(errno, "A2A: cannot find handoffd's own directory");
        }
        /* Room for as many as a config may name: a reload adds one in
         * place, since the helpers' handles must not move. */
        a->remotes = calloc(CONFIG_A2A_REMOTES_MAX, sizeof(*a->remotes));
        if (!a->remotes) {
                free(a);
                return -ENOMEM;
        }
        for (size_t i = 0; i < c->n_remotes; i++)
                if (c->remotes[i].a2a) {
                        struct a2a_remote_st *r = &a->remotes[a->n_remotes++];
                        snprintf(r->name, sizeof(r->name), "%s", c->remotes[i].name);
                        r->a = a;
                        r->list_tasks = -1;
                }
        uv_timer_init(loop, &a->timer);
        a->timer.data = a;
        a->handles_open = true;
        q = outbox_dir_each(sp, hd_now_usec(), scan_one, a);
        if (q < 0)
                log_warning_errno(q, "A2A: cannot list outbox/");
        sp->a2a = (struct spool_relay) { .ctx = a, .take = take_hook,
                                         .status = a2a_item_status,
                                         .metrics = a2a_item_metrics };
        size_t waiting = 0;
        for (size_t i = 0; i < a->n_items; i++)
                waiting += !a->items[i].gone;
        log_info("A2A: %zu remote(s), %zu item(s) in outbox/, sender %s", a->n_remotes, waiting,
                 a->helper);
        for (size_t i = 0; i < a->n_remotes; i++)
                helper_start(a, &a->remotes[i]);
        kick(a);
        *ret = a;
        return 0;
}

/* SIGHUP: sp->cfg is the new config.  A URL, token_file or ca_file
 * changed counts at the next call (a2a_item_request() reads them there).  A
 * remote added gets its helper (the sender itself when it is the first);
 * one removed loses its helper once the calls in flight are answered (no
 * call is cut off: it would be sent again), and what waits for it stays
 * in outbox/
 * until it expires (or the remote comes back: on_timer starts its helper
 * again). */
int a2a_out_reload(uv_loop_t *loop, struct spool *sp, struct a2a_out **ap)
{
        struct a2a_out *a = *ap;
        const struct config *c = sp->cfg;
        size_t added = 0, removed = 0;

        if (!a)
                return config_a2a_on(c) ? a2a_out_start(loop, sp, ap) : 0;
        /* on_timer stops the helper of a remote the config lacks, once
         * idle, and starts none for it */
        for (size_t i = 0; i < a->n_remotes; i++)
                removed += a->remotes[i].running && !config_remote_a2a(c, a->remotes[i].name);
        for (size_t i = 0; i < c->n_remotes; i++) {
                if (!c->remotes[i].a2a || a2a_item_remote(a, c->remotes[i].name))
                        continue;
                if (a->n_remotes == CONFIG_A2A_REMOTES_MAX)
                        return -E2BIG;  /* config_load() refuses more */
                struct a2a_remote_st *r = &a->remotes[a->n_remotes++];
                *r = (struct a2a_remote_st) { .a = a };
                snprintf(r->name, sizeof(r->name), "%s", c->remotes[i].name);
                added++;
        }
        if (added || removed)
                log_info("A2A: reload: %zu remote(s) added, %zu removed", added, removed);
        kick(a);
        return 0;
}

void a2a_out_stop(struct a2a_out *a)
{
        if (!a)
                return;
        a->stopping = true;
        for (size_t i = 0; i < a->n_remotes; i++)
                helper_kill(&a->remotes[i], SIGTERM);
        if (a->handles_open) {
                uv_close((uv_handle_t *)&a->timer, NULL);
                a->handles_open = false;
        }
        store_flush(a->sp);
        memset(&a->sp->a2a, 0, sizeof(a->sp->a2a));
}

void a2a_out_free(struct a2a_out *a)
{
        if (!a)
                return;
        free(a->items);
        free(a->remotes);
        free(a);
}
