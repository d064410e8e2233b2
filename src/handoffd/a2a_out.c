/* A2A outward (issue 38): a handoff for a [remote NAME] a2a leaves
 * handoff/ only after the same checks as a local one, waits as
 * outbox/<handoff_id>.json (as a relayed one does, outbox.c), and is sent
 * to NAME's A2A server as SendMessage with messageId = handoff_id.
 *
 *   unreachable, 5xx       retried after 1 s, 2 s, ... 60 s until its
 *                          expires_at: then rejected/ as expired_unsent
 *   4xx, an A2A error      rejected/ as remote_rejected, the server's words
 *                          as the detail
 *   a task                 its id kept in outbox/.<id>.a2a-task, its state
 *                          followed by GetTask (1 s ... 60 s) until an end
 *                          (completed, failed, canceled, rejected,
 *                          input_required, auth_required); then archive/
 *                          as relayed to "a2a:NAME" with remote_outcome =
 *                          that end, remote_detail = the task's text
 *
 * Where it runs: the HTTP calls and every byte of the server's answers
 * are handoff-a2a's (src/a2a/), a child process with no descriptor of the
 * spool, spoken to through two pipes.  What it answers is one line of six
 * tab-separated fields that this file checks one by one before anything
 * moves; a line that does not check stops the helper, as does a helper
 * that exits: what it had in flight is sent again (the same messageId)
 * when a new one runs, 1 s later.  The daemon itself links no HTTP client
 * and parses no server's JSON.
 *
 * The directory is the truth: at start every outbox/ item for an A2A
 * remote is indexed again, with its task when the side file names one.
 * A crash between the server's answer and the side file sends the message
 * again: the same messageId, which an A2A server takes as the same
 * message. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "a2a_out.h"
#include "files.h"
#include "log.h"
#include "spool.h"
#include "util.h"

#define A2A_BACKOFF_MIN_USEC 1000000LL
#define A2A_BACKOFF_MAX_USEC 60000000LL
#define A2A_INFLIGHT_MAX 32
#define A2A_LINE_MAX 1024               /* six fields, the largest 300 bytes */
#define A2A_TASK_MAX 256
#define A2A_TASK_SUFFIX ".a2a-task"

enum a2a_item_state {
        AI_UNSENT,      /* waits for its next try */
        AI_SENDING,     /* a SendMessage with the helper */
        AI_FOLLOW,      /* its task known: waits for the next GetTask */
        AI_GETTING,     /* a GetTask with the helper */
};

struct a2a_item {
        char id[NAME_MAX + 1];
        char remote[NAME_MAX + 1];
        char from[NAME_MAX + 1];
        char task[A2A_TASK_MAX + 1];
        enum a2a_item_state st;
        int64_t at, exp, next;  /* usec: entered outbox/, expires_at, next try */
        unsigned tries;
        bool gone;              /* left outbox/: the slot is free */
};

struct a2a_remote_st {
        char name[NAME_MAX + 1];
        char last_error[256];
        int64_t last_error_usec;
};

struct a2a_out {
        uv_loop_t *loop;
        struct spool *sp;
        uv_timer_t timer;
        uv_process_t proc;
        uv_pipe_t to, from;
        bool handles_open, running, stopping;
        bool proc_open;         /* proc not closed yet: no new helper */
        char helper[PATH_MAX];
        char line[A2A_LINE_MAX + 1];
        size_t line_len;
        struct a2a_item *items;
        size_t n_items, cap_items;
        struct a2a_remote_st *remotes;
        size_t n_remotes;
        size_t inflight;
        int64_t helper_at;      /* the next start of the helper */
        struct {
                uint64_t sent, finished, rejected, expired, retries, followed,
                         helper_starts, helper_errors;
        } st;
};

static void on_timer(uv_timer_t *t);
static void helper_down(struct a2a_out *a, const char *why);

static struct a2a_item *item_find(struct a2a_out *a, const char *id)
{
        for (size_t i = 0; i < a->n_items; i++)
                if (!a->items[i].gone && !strcmp(a->items[i].id, id))
                        return &a->items[i];
        return NULL;
}

static struct a2a_item *item_add(struct a2a_out *a)
{
        for (size_t i = 0; i < a->n_items; i++)
                if (a->items[i].gone) {
                        memset(&a->items[i], 0, sizeof(a->items[i]));
                        return &a->items[i];
                }
        if (a->n_items == a->cap_items) {
                size_t n = a->cap_items ? a->cap_items * 2 : 64;
                struct a2a_item *p = realloc(a->items, n * sizeof(*p));
                if (!p)
                        return NULL;
                a->items = p;
                a->cap_items = n;
        }
        memset(&a->items[a->n_items], 0, sizeof(a->items[0]));
        return &a->items[a->n_items++];
}

static struct a2a_remote_st *remote_st(struct a2a_out *a, const char *name)
{
        for (size_t i = 0; i < a->n_remotes; i++)
                if (!strcmp(a->remotes[i].name, name))
                        return &a->remotes[i];
        return NULL;
}

static void remote_error(struct a2a_out *a, const char *remote, const char *err, int64_t now)
{
        struct a2a_remote_st *r = remote_st(a, remote);

        if (!r)
                return;
        snprintf(r->last_error, sizeof(r->last_error), "%s", err);
        r->last_error_usec = now;
}

static void kick(struct a2a_out *a)
{
        if (a->handles_open && !a->stopping)
                uv_timer_start(&a->timer, on_timer, 0, 0);
}

static int64_t backoff(unsigned tries)
{
        int64_t w = A2A_BACKOFF_MIN_USEC;

        for (unsigned i = 1; i < tries && w < A2A_BACKOFF_MAX_USEC; i++)
                w *= 2;
        return w > A2A_BACKOFF_MAX_USEC ? A2A_BACKOFF_MAX_USEC : w;
}

/* ---- the item from doc -------------------------------------------------- */

static int item_fill(struct a2a_item *it, const json_t *doc, int64_t at)
{
        const char *id = json_string_value(json_object_get(doc, "handoff_id"));
        const char *to = json_string_value(json_object_get(doc, "to_agent"));
        const char *from = json_string_value(json_object_get(doc, "from_agent"));
        const char *exp = json_string_value(json_object_get(doc, "expires_at"));

        if (!id || !to || !from || !exp || hd_time_parse(exp, &it->exp) < 0 ||
            xsnprintf(it->id, sizeof(it->id), "%s", id) < 0 ||
            xsnprintf(it->remote, sizeof(it->remote), "%s", to) < 0 ||
            xsnprintf(it->from, sizeof(it->from), "%s", from) < 0)
                return -EINVAL;
        it->at = at;
        it->st = AI_UNSENT;
        return 0;
}

static int task_name(const char *id, char *buf, size_t n)
{
        return xsnprintf(buf, n, ".%s" A2A_TASK_SUFFIX, id);
}

/* The task id is the server's, checked by parse_line(): printable, no
 * space; kept with a newline. */
static int task_record(struct a2a_out *a, struct a2a_item *it)
{
        char name[NAME_MAX + 1], buf[A2A_TASK_MAX + 2];
        int q = task_name(it->id, name, sizeof(name));

        if (q < 0)
                return q;
        int n = snprintf(buf, sizeof(buf), "%s\n", it->task);
        return write_atomic(a->sp->fd[SD_OUTBOX], name, buf, (size_t)n, 0640,
                            a->sp->cfg->fsync ? WRITE_SYNC_FILE : 0);
}

static void task_load(struct a2a_out *a, struct a2a_item *it)
{
        char name[NAME_MAX + 1];
        _cleanup_close_ int fd = -1;
        char *buf = NULL;
        size_t len;

        if (task_name(it->id, name, sizeof(name)) < 0)
                return;
        fd = openat(a->sp->fd[SD_OUTBOX], name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0 || read_all(fd, A2A_TASK_MAX + 1, 0, &buf, &len) < 0)
                return;
        if (len > 1 && buf[len - 1] == '\n' && len - 1 <= A2A_TASK_MAX) {
                memcpy(it->task, buf, len - 1);
                it->task[len - 1] = '\0';
                if (!strchr(it->task, '\n') && !strchr(it->task, '\t') && !strchr(it->task, ' '))
                        it->st = AI_FOLLOW;
                else
                        it->task[0] = '\0';
        }
        free(buf);
}

static void task_drop(struct a2a_out *a, const char *id)
{
        char name[NAME_MAX + 1];

        if (task_name(id, name, sizeof(name)) == 0 &&
            unlinkat(a->sp->fd[SD_OUTBOX], name, 0) == 0)
                a->sp->dirty[SD_OUTBOX] = true;
}

/* ---- the ends ----------------------------------------------------------- */

/* archive/ as relayed to a2a:NAME, the task's end in its .outcome (as a
 * receipt puts it: handoffctl wait, show and the hub read it there). */
static int archive(struct a2a_out *a, struct a2a_item *it, const char *state, const char *text,
                   int64_t now)
{
        struct spool *sp = a->sp;
        char name[NAME_MAX + 1], src[NAME_MAX + 1], at[HD_TIME_MAX],
             host[NAME_MAX + 8];
        _cleanup_free_ char *buf = NULL;
        size_t len;
        json_t *o;
        int q;

        hd_time_format(now, at, sizeof(at));
        snprintf(host, sizeof(host), "a2a:%s", it->remote);
        q = xsnprintf(src, sizeof(src), "%s.json", it->id);
        if (q < 0)
                return q;
        o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:s, s:s, s:s}",
                      "handoff_id", it->id, "outcome", "relayed", "relayed_to", host,
                      "from_agent", it->from, "to_agent", it->remote, "archived_at", at,
                      "accepted_at", "", "duplicate", 0, "remote_outcome", state,
                      "remote_host", host, "remote_at", at, "remote_detail", text,
                      "a2a_task", it->task);
        if (!o)
                return -ENOMEM;
        q = hd_canon_dump(o, NULL, &buf, &len);
        json_decref(o);
        if (q < 0)
                return q;
        q = spool_id_mark(sp, it->id);
        if (q < 0)
                return q;
        q = spool_archive_from(sp, SD_OUTBOX, src, it->at / 1000000, it->from, it->remote,
                               it->id, buf, len, name, sizeof(name));
        if (q < 0)
                return q;
        task_drop(a, it->id);
        return 0;
}

static void end_archived(struct a2a_out *a, struct a2a_item *it, const char *state,
                         const char *text, int64_t now)
{
        int q = archive(a, it, state, text, now);

        if (q < 0) {
                /* Kept: asked again later, the same answer then. */
                spool_error(a->sp, q, "Cannot archive %s, sent to A2A remote %s", it->id, it->remote);
                it->st = it->task[0] ? AI_FOLLOW : AI_UNSENT;
                it->next = now + A2A_BACKOFF_MAX_USEC;
                return;
        }
        a->st.finished++;
        log_decision(LOG_INFO, it->id, it->remote, "relayed", NULL,
                     "Sent %s to A2A remote %s: task %s %s", it->id, it->remote,
                     it->task[0] ? it->task : "(none)", state);
        it->gone = true;
}

static void end_rejected(struct a2a_out *a, struct a2a_item *it, hd_reason reason,
                         const char *detail, int64_t now)
{
        char name[NAME_MAX + 1];
        int q = xsnprintf(name, sizeof(name), "%s.json", it->id);

        if (q >= 0)
                q = spool_reject_from(a->sp, SD_OUTBOX, name, NULL, reason, detail, it->id, now);
        if (q < 0) {
                spool_error(a->sp, q, "Cannot reject %s from outbox/", it->id);
                it->next = now + A2A_BACKOFF_MAX_USEC;
                it->exp = now + A2A_BACKOFF_MAX_USEC;
                return;
        }
        task_drop(a, it->id);
        if (reason == HD_R_EXPIRED_UNSENT)
                a->st.expired++;
        else
                a->st.rejected++;
        it->gone = true;
}

/* ---- the helper --------------------------------------------------------- */

static void on_write(uv_write_t *w, int status)
{
        free(w->data);
        free(w);
        (void)status;   /* a broken pipe: the helper's exit says it */
}

static int request(struct a2a_out *a, struct a2a_item *it)
{
        const struct config_remote *rm = config_remote_a2a(a->sp->cfg, it->remote);
        _cleanup_json_ json_t *doc = NULL, *req = NULL;
        char name[NAME_MAX + 1];
        char *s;
        int q;

        if (!rm)
                return -ENXIO;  /* gone in a reload: it waits, then expires */
        if (it->st == AI_UNSENT) {
                q = xsnprintf(name, sizeof(name), "%s.json", it->id);
                if (q < 0)
                        return q;
                /* Read as the relay reads it (outbox.c's submit()): a take
                 * has two links until spool_flush(). */
                _cleanup_close_ int fd = openat(a->sp->fd[SD_OUTBOX], name,
                                                O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                _cleanup_free_ char *buf = NULL;
                size_t len;
                json_error_t je;
                if (fd < 0)
                        return -errno;
                q = read_all(fd, a->sp->cfg->max_file_size, 0, &buf, &len);
                if (q < 0)
                        return q;
                doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
                if (!doc)
                        return -EBADMSG;
                req = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:O}", "op", "send", "id", it->id,
                                "url", rm->a2a, "token_file", rm->token_file, "ca_file",
                                rm->ca_file, "doc", doc);
        } else {
                req = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s}", "op", "get", "id", it->id,
                                "url", rm->a2a, "token_file", rm->token_file, "ca_file",
                                rm->ca_file, "task", it->task);
        }
        if (!req || !(s = json_dumps(req, JSON_COMPACT)))
                return -ENOMEM;
        size_t l = strlen(s);
        s[l] = '\n';    /* json_dumps' NUL: the line's end, the length counts it */
        uv_write_t *w = malloc(sizeof(*w));
        uv_buf_t b = uv_buf_init(s, (unsigned)(l + 1));
        if (!w) {
                free(s);
                return -ENOMEM;
        }
        w->data = s;
        q = uv_write(w, (uv_stream_t *)&a->to, &b, 1, on_write);
        if (q < 0) {
                free(s);
                free(w);
                return q;
        }
        it->st = it->st == AI_UNSENT ? AI_SENDING : AI_GETTING;
        a->inflight++;
        return 0;
}

static bool field_ok(const char *s, size_t max, bool spaces)
{
        size_t n = 0;

        for (; s[n]; n++)
                if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] >= 0x7f ||
                    (!spaces && s[n] == ' '))
                        return false;
        return n > 0 && n <= max;
}

static const char *const end_states[] = {
        "completed", "failed", "canceled", "rejected", "input_required", "auth_required",
};
static const char *const run_states[] = { "submitted", "working", "unknown" };

static const char *state_of(const char *s, bool *final)
{
        for (size_t i = 0; i < ELEMENTSOF(end_states); i++)
                if (!strcmp(s, end_states[i])) {
                        *final = true;
                        return end_states[i];
                }
        for (size_t i = 0; i < ELEMENTSOF(run_states); i++)
                if (!strcmp(s, run_states[i])) {
                        *final = false;
                        return run_states[i];
                }
        return NULL;
}

/* One line from the helper: -EPROTO when any field does not check. */
static int answer(struct a2a_out *a, char *line, int64_t now)
{
        char *f[6], *p = line;
        struct a2a_item *it;
        bool final = false;
        const char *state = NULL;

        for (size_t i = 0; i < 6; i++) {
                f[i] = p;
                p = i < 5 ? strchr(p, '\t') : NULL;
                if (i < 5 && !p)
                        return -EPROTO;
                if (p)
                        *p++ = '\0';
        }
        if (strchr(f[5], '\t') || !field_ok(f[0], NAME_MAX, false) ||
            !field_ok(f[3], A2A_TASK_MAX, false) || !field_ok(f[5], 300, true))
                return -EPROTO;
        it = item_find(a, f[0]);
        bool send = !strcmp(f[1], "send");
        if (!it || (send ? it->st != AI_SENDING : strcmp(f[1], "get") || it->st != AI_GETTING))
                return -EPROTO; /* answers come in the order of the requests */
        if (strcmp(f[4], "-") && !(state = state_of(f[4], &final)))
                return -EPROTO;
        const char *text = strcmp(f[5], "-") ? f[5] : "";
        a->inflight--;
        if (!strcmp(f[2], "ok") && state) {
                if (send) {
                        a->st.sent++;
                        /* The server is back: what waits for it goes now. */
                        for (size_t i = 0; i < a->n_items; i++)
                                if (!a->items[i].gone && a->items[i].st == AI_UNSENT &&
                                    !strcmp(a->items[i].remote, it->remote))
                                        a->items[i].next = 0;
                        if (strcmp(f[3], "-"))
                                snprintf(it->task, sizeof(it->task), "%s", f[3]);
                }
                if (final || !it->task[0]) {
                        end_archived(a, it, final ? state : "completed", text, now);
                        return 0;
                }
                if (send) {
                        int q = task_record(a, it);
                        if (q < 0)
                                spool_error(a->sp, q, "Cannot record the A2A task of %s", it->id);
                        a->st.followed++;
                        log_info("A2A remote %s took %s as task %s (%s); following it",
                                 it->remote, it->id, it->task, state);
                        it->tries = 0;
                }
                it->st = AI_FOLLOW;
                it->next = now + backoff(++it->tries);
                return 0;
        }
        if (!strcmp(f[2], "final") && !state) {
                if (!send) {
                        /* The server no longer knows its task: an end too. */
                        end_archived(a, it, "unknown", text, now);
                        return 0;
                }
                char detail[400];
                snprintf(detail, sizeof(detail), "A2A remote %.64s refused it: %.300s", it->remote, text);
                remote_error(a, it->remote, text, now);
                end_rejected(a, it, HD_R_REMOTE_REJECTED, detail, now);
                return 0;
        }
        if (!strcmp(f[2], "retry") && !state) {
                struct a2a_remote_st *r = remote_st(a, it->remote);
                if (r && strcmp(r->last_error, text))
                        log_warning("A2A remote %s: %s %s: %s; retrying", it->remote,
                                    send ? "SendMessage of" : "GetTask of", it->id, text);
                remote_error(a, it->remote, text, now);
                a->st.retries++;
                it->st = send ? AI_UNSENT : AI_FOLLOW;
                it->next = now + backoff(++it->tries);
                return 0;
        }
        return -EPROTO;
}

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
        static char b[64 * 1024];

        (void)h;
        (void)size;
        *buf = uv_buf_init(b, sizeof(b));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
        struct a2a_out *a = s->data;
        int64_t now = hd_now_usec();
        bool moved = false;

        if (n < 0) {
                helper_down(a, n == UV_EOF ? "closed its output" : uv_strerror((int)n));
                return;
        }
        for (ssize_t i = 0; i < n; i++) {
                char c = buf->base[i];
                if (c != '\n') {
                        if (a->line_len == A2A_LINE_MAX) {
                                helper_down(a, "a line over its limit");
                                return;
                        }
                        a->line[a->line_len++] = c;
                        continue;
                }
                a->line[a->line_len] = '\0';
                a->line_len = 0;
                if (answer(a, a->line, now) < 0) {
                        helper_down(a, "a line that does not check");
                        return;
                }
                moved = true;
        }
        if (moved) {
                int q = spool_flush(a->sp);
                if (q < 0)
                        spool_error(a->sp, q, "Cannot fsync the spool");
                kick(a);
        }
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
        struct a2a_out *a = p->data;

        if (a->running)
                log_warning("A2A: handoff-a2a exited (status %lld, signal %d)", (long long)status, sig);
        helper_down(a, NULL);
        a->proc_open = false;
        if (!uv_is_closing((uv_handle_t *)p))
                uv_close((uv_handle_t *)p, NULL);
}

/* The helper is gone or must go: what it had in flight waits for the
 * next one. */
static void helper_down(struct a2a_out *a, const char *why)
{
        int64_t now = hd_now_usec();

        if (why) {
                a->st.helper_errors++;
                log_warning("A2A: stopping handoff-a2a: %s", why);
        }
        if (a->running) {
                a->running = false;
                uv_process_kill(&a->proc, SIGKILL);
                uv_read_stop((uv_stream_t *)&a->from);
                uv_close((uv_handle_t *)&a->to, NULL);
                uv_close((uv_handle_t *)&a->from, NULL);
        }
        for (size_t i = 0; i < a->n_items; i++) {
                struct a2a_item *it = &a->items[i];
                if (it->gone)
                        continue;
                if (it->st == AI_SENDING)
                        it->st = AI_UNSENT;
                else if (it->st == AI_GETTING)
                        it->st = AI_FOLLOW;
        }
        a->inflight = 0;
        a->line_len = 0;
        a->helper_at = now + A2A_BACKOFF_MIN_USEC;
        if (!a->stopping)
                kick(a);
}

static int helper_start(struct a2a_out *a)
{
        char *args[] = { a->helper, NULL };
        uv_stdio_container_t io[3];
        uv_process_options_t o = { 0 };
        int q;

        uv_pipe_init(a->loop, &a->to, 0);
        uv_pipe_init(a->loop, &a->from, 0);
        a->to.data = a->from.data = a;
        io[0] = (uv_stdio_container_t) { .flags = UV_CREATE_PIPE | UV_READABLE_PIPE,
                                         .data.stream = (uv_stream_t *)&a->to };
        io[1] = (uv_stdio_container_t) { .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
                                         .data.stream = (uv_stream_t *)&a->from };
        io[2] = (uv_stdio_container_t) { .flags = UV_INHERIT_FD, .data.fd = 2 };
        o.file = a->helper;
        o.args = args;
        o.stdio = io;
        o.stdio_count = 3;
        o.exit_cb = on_exit_cb;
        a->proc.data = a;
        q = uv_spawn(a->loop, &a->proc, &o);
        if (q < 0) {
                uv_close((uv_handle_t *)&a->to, NULL);
                uv_close((uv_handle_t *)&a->from, NULL);
                uv_close((uv_handle_t *)&a->proc, NULL);
                a->helper_at = hd_now_usec() + A2A_BACKOFF_MAX_USEC;
                return log_error_errno(q, "A2A: cannot start %s", a->helper);
        }
        uv_read_start((uv_stream_t *)&a->from, on_alloc, on_read);
        a->running = a->proc_open = true;
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
        if (!a->running && !a->proc_open && now >= a->helper_at)
                helper_start(a);
        for (size_t i = 0; i < a->n_items; i++) {
                struct a2a_item *it = &a->items[i];
                if (it->gone || it->st == AI_SENDING || it->st == AI_GETTING)
                        continue;
                /* expires_at bounds the sending only: a task the server
                 * has is followed to its end. */
                if (it->st == AI_UNSENT && now > it->exp) {
                        char detail[400];
                        struct a2a_remote_st *r = remote_st(a, it->remote);
                        snprintf(detail, sizeof(detail), "expired in outbox/ before A2A remote %.64s "
                                 "took it%s%.250s", it->remote, r && r->last_error[0] ? "; last error: " : "",
                                 r ? r->last_error : "");
                        end_rejected(a, it, HD_R_EXPIRED_UNSENT, detail, now);
                        flush = true;
                        continue;
                }
                if (it->st == AI_UNSENT && it->exp + 1 < due)
                        due = it->exp + 1;
                if (it->next > now) {
                        if (it->next < due)
                                due = it->next;
                        continue;
                }
                if (!a->running || a->inflight >= A2A_INFLIGHT_MAX)
                        continue;
                int q = request(a, it);
                if (q == -ENOENT) {     /* removed by hand */
                        it->gone = true;
                } else if (q < 0) {
                        remote_error(a, it->remote, strerror(-q), now);
                        it->next = now + A2A_BACKOFF_MAX_USEC;
                }
        }
        if (flush && spool_flush(a->sp) < 0)
                spool_error(a->sp, -EIO, "Cannot fsync the spool");
        if (!a->running && a->helper_at < due)
                due = a->helper_at;
        int64_t ms = (due - now + 999) / 1000;
        uv_timer_start(&a->timer, on_timer, ms < 0 ? 0 : (uint64_t)ms, 0);
}

/* ---- hooks -------------------------------------------------------------- */

static int take_hook(void *ctx, const char *name, const struct spool_ino *was,
                     const json_t *doc, int64_t now)
{
        struct a2a_out *a = ctx;
        struct spool *sp = a->sp;
        struct a2a_item tmp = { 0 }, *it;
        char dst[NAME_MAX + 1];
        int q;

        if (item_fill(&tmp, doc, now) < 0)
                return -EINVAL;         /* hd_verify passed: cannot happen */
        if (item_find(a, tmp.id))
                return -EEXIST;
        q = xsnprintf(dst, sizeof(dst), "%s.json", tmp.id);
        if (q < 0)
                return q;
        /* On disk before outbox/ names it (outbox_take()'s reason). */
        if (sp->cfg->fsync) {
                const char *names[] = { name };
                int ret;
                q = fsync_many_at(&sp->fd[SD_HANDOFF], names, 1, &ret);
                if (q < 0)
                        return q;
        }
        q = spool_move_out(sp, name, was, SD_OUTBOX, dst);
        if (q < 0)
                return q;
        it = item_add(a);
        if (!it)
                return -ENOMEM; /* in outbox/: indexed at the next start */
        *it = tmp;
        log_decision(LOG_INFO, it->id, it->remote, "outbox", NULL,
                     "Queued %s for A2A remote %s", it->id, it->remote);
        kick(a);
        return 0;
}

static json_t *status_hook(void *ctx, int64_t now)
{
        struct a2a_out *a = ctx;
        json_t *rs = json_object();

        for (size_t i = 0; i < a->n_remotes; i++) {
                struct a2a_remote_st *r = &a->remotes[i];
                const struct config_remote *rm = config_remote_a2a(a->sp->cfg, r->name);
                json_int_t waiting = 0, following = 0;
                for (size_t k = 0; k < a->n_items; k++) {
                        const struct a2a_item *it = &a->items[k];
                        if (it->gone || strcmp(it->remote, r->name))
                                continue;
                        if (it->st == AI_UNSENT || it->st == AI_SENDING)
                                waiting++;
                        else
                                following++;
                }
                json_object_set_new(rs, r->name,
                        json_pack("{s:s?, s:I, s:I, s:s?, s:o}", "url", rm ? rm->a2a : NULL,
                                  "waiting", waiting, "following", following,
                                  "last_error", r->last_error[0] ? r->last_error : NULL,
                                  "last_error_age_s", r->last_error_usec
                                  ? json_integer((now - r->last_error_usec) / 1000000) : json_null()));
        }
        return json_pack("{s:b, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                         "helper_running", a->running, "remotes", rs,
                         "sent", (json_int_t)a->st.sent, "finished", (json_int_t)a->st.finished,
                         "rejected", (json_int_t)a->st.rejected,
                         "expired_unsent", (json_int_t)a->st.expired,
                         "retries", (json_int_t)a->st.retries,
                         "tasks_followed", (json_int_t)a->st.followed,
                         "helper_errors", (json_int_t)a->st.helper_errors);
}

static void metrics_hook(void *ctx, FILE *f, int64_t now)
{
        struct a2a_out *a = ctx;
        json_t *s = status_hook(a, now), *r;
        const char *k;

        fprintf(f, "# HELP handoffd_a2a_items Items in outbox/ for each A2A remote: waiting to be "
                   "sent, or sent and their task followed.\n"
                   "# TYPE handoffd_a2a_items gauge\n");
        json_object_foreach(json_object_get(s, "remotes"), k, r) {
                fprintf(f, "handoffd_a2a_items{remote=\"%s\",state=\"waiting\"} %lld\n", k,
                        (long long)json_integer_value(json_object_get(r, "waiting")));
                fprintf(f, "handoffd_a2a_items{remote=\"%s\",state=\"following\"} %lld\n", k,
                        (long long)json_integer_value(json_object_get(r, "following")));
        }
        static const char *const ev[] = { "sent", "finished", "rejected", "expired_unsent",
                                          "retries", "tasks_followed", "helper_errors" };
        fprintf(f, "# HELP handoffd_a2a_total A2A sender events since start.\n"
                   "# TYPE handoffd_a2a_total counter\n");
        for (size_t i = 0; i < ELEMENTSOF(ev); i++)
                fprintf(f, "handoffd_a2a_total{event=\"%s\"} %lld\n", ev[i],
                        (long long)json_integer_value(json_object_get(s, ev[i])));
        json_decref(s);
}

/* ---- start and stop ----------------------------------------------------- */

static int scan(struct a2a_out *a, int64_t now)
{
        struct spool *sp = a->sp;
        json_t *set = json_object(), *v;
        const char *k;
        int q;

        if (!set)
                return -ENOMEM;
        q = spool_list(sp, SD_OUTBOX, set);
        json_object_foreach(set, k, v) {
                size_t l = strlen(k);
                _cleanup_json_ json_t *doc = NULL;
                hd_limits lim = { .max_size = sp->cfg->max_file_size,
                                  .max_depth = HD_DEFAULT_MAX_DEPTH };
                hd_verdict vd;
                struct stat st;
                struct a2a_item tmp = { 0 }, *it;
                if (l < 6 || strcmp(k + l - 5, ".json") || k[0] == '.')
                        continue;
                if (hd_load_at(sp->fd[SD_OUTBOX], k, &lim, &doc, &vd) < 0)
                        continue;       /* the relay's scan rejects it */
                if (!config_remote_a2a(sp->cfg, json_string_value(json_object_get(doc, "to_agent"))))
                        continue;       /* the relay's */
                int64_t at = fstatat(sp->fd[SD_OUTBOX], k, &st, AT_SYMLINK_NOFOLLOW) == 0
                        ? (int64_t)st.st_ctim.tv_sec * 1000000LL + st.st_ctim.tv_nsec / 1000 : now;
                if (item_fill(&tmp, doc, at) < 0 || strncmp(k, tmp.id, l - 5) || tmp.id[l - 5] ||
                    item_find(a, tmp.id))
                        continue;
                task_load(a, &tmp);
                if (!(it = item_add(a))) {
                        q = -ENOMEM;
                        break;
                }
                *it = tmp;
        }
        json_decref(set);
        return q;
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
        a->remotes = calloc(c->n_remotes, sizeof(*a->remotes));
        if (!a->remotes) {
                free(a);
                return -ENOMEM;
        }
        for (size_t i = 0; i < c->n_remotes; i++)
                if (c->remotes[i].a2a)
                        snprintf(a->remotes[a->n_remotes++].name, sizeof(a->remotes[0].name), "%s",
                                 c->remotes[i].name);
        uv_timer_init(loop, &a->timer);
        a->timer.data = a;
        a->handles_open = true;
        q = scan(a, hd_now_usec());
        if (q < 0)
                log_warning_errno(q, "A2A: cannot list outbox/");
        sp->a2a = (struct spool_relay) { .ctx = a, .take = take_hook, .status = status_hook,
                                         .metrics = metrics_hook };
        size_t waiting = 0;
        for (size_t i = 0; i < a->n_items; i++)
                waiting += !a->items[i].gone;
        log_info("A2A: %zu remote(s), %zu item(s) in outbox/, sender %s", a->n_remotes, waiting,
                 a->helper);
        helper_start(a);
        kick(a);
        *ret = a;
        return 0;
}

void a2a_out_stop(struct a2a_out *a)
{
        if (!a)
                return;
        a->stopping = true;
        if (a->running) {
                a->running = false;
                uv_process_kill(&a->proc, SIGTERM);
                uv_read_stop((uv_stream_t *)&a->from);
                uv_close((uv_handle_t *)&a->to, NULL);
                uv_close((uv_handle_t *)&a->from, NULL);
                /* on_exit_cb closes proc */
        }
        if (a->handles_open) {
                uv_close((uv_handle_t *)&a->timer, NULL);
                a->handles_open = false;
        }
        spool_flush(a->sp);
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
