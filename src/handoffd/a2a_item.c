/* The A2A sender's items (a2a_out.c): the index of what waits in outbox/
 * for an A2A remote, each remote's last error, an item's task side file
 * outbox/.<id>.a2a-task (the task a server took it as, so a restart
 * follows it rather than sending again), an item's two ends (archive/
 * as relayed to "a2a:NAME", rejected/), and the status and metrics the
 * sender reports from them. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"
#include "a2a_item.h"
#include "outbox_dir.h"
#include "files.h"
#include "layout.h"
#include "log.h"
#include "util.h"

#define A2A_TASK_SUFFIX ".a2a-task"

struct a2a_item *a2a_item_find(struct a2a_out *a, const char *id)
{
        for (size_t i = 0; i < a->n_items; i++)
                if (!a->items[i].gone && !strcmp(a->items[i].id, id))
                        return &a->items[i];
        return NULL;
}

struct a2a_item *a2a_item_add(struct a2a_out *a)
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

struct a2a_remote_st *a2a_item_remote(struct a2a_out *a, const char *name)
{
        for (size_t i = 0; i < a->n_remotes; i++)
                if (!strcmp(a->remotes[i].name, name))
                        return &a->remotes[i];
        return NULL;
}

void a2a_item_remote_error(struct a2a_out *a, const char *remote, const char *err, int64_t now)
{
        struct a2a_remote_st *r = a2a_item_remote(a, remote);

        if (!r)
                return;
        snprintf(r->last_error, sizeof(r->last_error), "%s", err);
        r->last_error_usec = now;
}

const char *const a2a_end_names[A2A_END_MAX_] = {
        [A2A_END_COMPLETED] = "completed",
        [A2A_END_FAILED] = "failed",
        [A2A_END_CANCELED] = "canceled",
        [A2A_END_REJECTED] = "rejected",
        [A2A_END_INPUT_REQUIRED] = "input_required",
        [A2A_END_AUTH_REQUIRED] = "auth_required",
        [A2A_END_UNKNOWN] = "unknown",
        [A2A_END_EXPIRED_UNFINISHED] = "expired_unfinished",
};

int a2a_end_from_state(const char *s, enum a2a_end *ret)
{
        for (int e = 0; e <= A2A_END_AUTH_REQUIRED; e++)
                if (!strcmp(s, a2a_end_names[e])) {
                        *ret = (enum a2a_end)e;
                        return 0;
                }
        return -EINVAL;
}

int64_t a2a_item_follow_max(const struct a2a_out *a, const struct a2a_item *it)
{
        const struct config_remote *rm = config_remote_a2a(a->sp->cfg, it->remote);

        return (rm ? rm->a2a_follow_max : CONFIG_A2A_FOLLOW_MAX_DEFAULT) * 1000000LL;
}

int64_t a2a_item_backoff(unsigned tries, int64_t max)
{
        int64_t w = A2A_BACKOFF_MIN_USEC;

        for (unsigned i = 1; i < tries && w < max; i++)
                w *= 2;
        return w > max ? max : w;
}

int a2a_item_fill(struct a2a_item *it, const struct handoff *h, int64_t at)
{
        if (xsnprintf(it->id, sizeof(it->id), "%s", h->id) < 0 ||
            xsnprintf(it->remote, sizeof(it->remote), "%s", h->to) < 0 ||
            xsnprintf(it->from, sizeof(it->from), "%s", h->from) < 0)
                return -EINVAL;
        it->exp = h->expires_usec;
        it->at = at;
        it->st = AI_UNSENT;
        return 0;
}

static int task_name(const char *id, char *buf, size_t n)
{
        return xsnprintf(buf, n, ".%s" A2A_TASK_SUFFIX, id);
}

/* The task id is the server's, checked by a2a_reply(): printable, no
 * space; kept with a newline. */
int a2a_item_task_record(struct a2a_out *a, struct a2a_item *it)
{
        char name[NAME_MAX + 1], buf[A2A_TASK_MAX + 2];
        int q = task_name(it->id, name, sizeof(name));

        if (q < 0)
                return q;
        int n = snprintf(buf, sizeof(buf), "%s\n", it->task);
        return store_side_write(a->sp, SD_OUTBOX, name, buf, (size_t)n);
}

/* Before the first send: a crash after it leaves "-", and the next start
 * asks the server before sending again (a2a_out.c). */
int a2a_item_send_mark(struct a2a_out *a, struct a2a_item *it)
{
        char name[NAME_MAX + 1];
        int q = task_name(it->id, name, sizeof(name));

        if (q < 0)
                return q;
        q = store_side_write(a->sp, SD_OUTBOX, name, "-\n", 2);
        if (q == 0)
                it->began = true;
        return q;
}

void a2a_item_task_load(struct a2a_out *a, struct a2a_item *it)
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
        if (len == 2 && !memcmp(buf, "-\n", 2)) {
                it->began = true;
        } else if (len > 1 && buf[len - 1] == '\n' && len - 1 <= A2A_TASK_MAX) {
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

        if (task_name(id, name, sizeof(name)) == 0)
                (void) store_remove(a->sp, SD_OUTBOX, name);
}

/* archive/ as relayed to a2a:NAME, the task's end in its .outcome (as a
 * receipt puts it: handoffctl wait, show and the hub read it there). */
/* archive/NAME.result beside the item: the task's artifacts, in the
 * envelope a local agent's result has (completion.c), so handoffctl,
 * MCP and the hub read them alike.  Written before the item moves in
 * (a `handoffctl wait` reads the item as it appears), under the name
 * its archive will take. */
static int result_write(struct a2a_out *a, struct a2a_item *it, const char *aname,
                        const char *state, const char *host, int64_t at,
                        const json_t *result)
{
        _cleanup_json_ json_t *bare = NULL;
        _cleanup_free_ char *buf = NULL;
        char xname[NAME_MAX + 16];
        size_t len;
        int q;

        q = layout_suffixed(aname, LAYOUT_RESULT, xname, sizeof(xname));
        if (q < 0)
                return q;
        q = store_result_dump(it->id, host, state, at, result, &buf, &len);
        if (q == -ERANGE) {
                /* a number canonical JSON cannot carry: the text alone */
                bare = json_pack("{s:O?}", "text", json_object_get(result, "text"));
                if (!bare)
                        return -ENOMEM;
                q = store_result_dump(it->id, host, state, at, bare, &buf, &len);
        }
        if (q < 0)
                return q;
        return store_side_write(a->sp, SD_ARCHIVE, xname, buf, len);
}

static int archive_a2a_ended(struct a2a_out *a, struct a2a_item *it, const char *state,
                             const char *text, const json_t *result, int64_t now)
{
        struct spool *sp = a->sp;
        struct store_outcome o = { .outcome = "relayed", .archived_usec = now,
                                   .completes = -1, .remote_detail = text,
                                   .a2a_task = it->task };
        char name[NAME_MAX + 1];
        const char *host = o.relayed_to;
        int q;

        if (xsnprintf(o.id, sizeof(o.id), "%s", it->id) < 0 ||
            xsnprintf(o.from, sizeof(o.from), "%s", it->from) < 0 ||
            xsnprintf(o.to, sizeof(o.to), "%s", it->remote) < 0 ||
            xsnprintf(o.relayed_to, sizeof(o.relayed_to), "a2a:%s", it->remote) < 0 ||
            xsnprintf(o.remote_outcome, sizeof(o.remote_outcome), "%s", state) < 0)
                return -EINVAL;
        /* The name spool_archive_from() will take: the first free one. */
        char pname[NAME_MAX + 1], px[NAME_MAX + 16], nx[NAME_MAX + 16];
        bool kept = false;
        for (unsigned k = 0; result && k < LAYOUT_ARCHIVE_TRIES; k++) {
                if (layout_archive_name(it->at / 1000000, it->from, it->remote, it->id, k, pname,
                                        sizeof(pname)) < 0)
                        break;
                if (spool_exists_at(sp->fd[SD_ARCHIVE], pname))
                        continue;
                q = result_write(a, it, pname, state, host, now, result);
                if (q < 0)
                        log_warning_errno(q, "A2A: the artifacts of %s not kept in archive/",
                                          it->id);
                kept = q == 0 && layout_suffixed(pname, LAYOUT_RESULT, px, sizeof(px)) == 0;
                break;
        }
        q = outbox_dir_archive(sp, &o, it->at / 1000000, NULL, name, sizeof(name));
        if (q < 0) {
                if (kept)
                        (void)store_remove(sp, SD_ARCHIVE, px);
                return q;
        }
        if (kept && strcmp(name, pname) && layout_suffixed(name, LAYOUT_RESULT, nx, sizeof(nx)) == 0)
                (void)store_side_rename(sp, SD_ARCHIVE, px, nx);
        task_drop(a, it->id);
        return 0;
}

void a2a_item_archived(struct a2a_out *a, struct a2a_item *it, enum a2a_end end,
                       const char *text, const json_t *result, int64_t now)
{
        const char *state = a2a_end_names[end];
        int q = archive_a2a_ended(a, it, state, text, result, now);

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

void a2a_item_rejected(struct a2a_out *a, struct a2a_item *it, hd_reason reason,
                       const char *detail, int64_t now)
{
        char name[NAME_MAX + 1];
        int q = xsnprintf(name, sizeof(name), "%s.json", it->id);

        if (q >= 0)
                q = store_reject_from(a->sp, SD_OUTBOX, name, NULL, reason, detail, it->id, now,
                                      NULL);
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

json_t *a2a_item_status(void *ctx, int64_t now)
{
        struct a2a_out *a = ctx;
        json_t *rs = json_object();

        json_t *problems = json_array();
        if (!rs || !problems) {
                json_decref(rs);
                json_decref(problems);
                return NULL;
        }
        bool running = a->n_remotes > 0;
        for (size_t i = 0; i < a->n_remotes; i++) {
                struct a2a_remote_st *r = &a->remotes[i];
                running = running && r->running;
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
                json_t *e = json_pack("{s:s?, s:I, s:I, s:b, s:s?, s:o}", "url",
                                      rm ? rm->a2a : NULL, "waiting", waiting,
                                      "following", following, "helper_running", r->running,
                                      "last_error", r->last_error[0] ? r->last_error : NULL,
                                      "last_error_age_s", r->last_error_usec
                                      ? json_integer((now - r->last_error_usec) / 1000000)
                                      : json_null());
                /* list_tasks false: a send whose outcome a crash or a
                 * timeout left unknown is sent again, not asked for */
                if (e && (json_object_set_new(e, "list_tasks", r->list_tasks < 0 ? json_null()
                                                               : json_boolean(r->list_tasks)) < 0 ||
                          json_object_set_new(e, "adopted", json_integer((json_int_t)r->adopted)) < 0 ||
                          json_object_set_new(e, "resent_unchecked",
                                              json_integer((json_int_t)r->resent_unchecked)) < 0)) {
                        json_decref(e);
                        e = NULL;
                }
                /* A refused token is kept and retried, never final: said
                 * loudly here, handoffctl status counts it a problem. */
                if (e && json_object_set_new(e, "token_refused_s", r->token_refused_usec
                                             ? json_integer((now - r->token_refused_usec) / 1000000)
                                             : json_null()) < 0) {
                        json_decref(e);
                        e = NULL;
                }
                if (e && r->token_refused_usec)
                        json_array_append_new(problems, json_sprintf(
                                "A2A remote %s refuses the token of %s for %llds (%s); %lld "
                                "item(s) wait", r->name, rm ? rm->token_file : "?",
                                (long long)((now - r->token_refused_usec) / 1000000),
                                r->last_error, (long long)(waiting + following)));
                if (!e || json_object_set_new(rs, r->name, e) < 0) {
                        json_decref(rs);
                        json_decref(problems);
                        return NULL;
                }
        }
        return json_pack("{s:b, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                         "helper_running", running, "remotes", rs, "problems", problems,
                         "sent", (json_int_t)a->st.sent, "finished", (json_int_t)a->st.finished,
                         "rejected", (json_int_t)a->st.rejected,
                         "expired_unsent", (json_int_t)a->st.expired,
                         "retries", (json_int_t)a->st.retries,
                         "tasks_followed", (json_int_t)a->st.followed,
                         "helper_errors", (json_int_t)a->st.helper_errors);
}

void a2a_item_metrics(void *ctx, FILE *f, int64_t now)
{
        struct a2a_out *a = ctx;
        json_t *s = a2a_item_status(a, now), *r;
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

/* ---- a request to the helper -------------------------------------------- */

static void on_write(uv_write_t *w, int status)
{
        free(w->data);
        free(w);
        (void)status;   /* a broken pipe: the helper's exit says it */
}

int a2a_item_request(struct a2a_out *a, struct a2a_remote_st *r, struct a2a_item *it)
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
                /* The daemon's copy of what verified (outbox_dir.c). */
                _cleanup_close_ int fd = openat(a->sp->fd[SD_OUTBOX], name,
                                                O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                _cleanup_free_ char *buf = NULL;
                size_t len;
                json_error_t je;
                if (fd < 0)
                        return -errno;
                q = read_all(fd, OUTBOX_DIR_MAX(a->sp), 0, &buf, &len);
                if (q < 0)
                        return q;
                doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
                if (!doc)
                        return -EBADMSG;
                /* A send began before and its answer was never recorded:
                 * the server is asked first.  Else the record that this one
                 * begins goes to disk before the request goes out. */
                bool check = it->began;
                if (!check) {
                        q = a2a_item_send_mark(a, it);
                        if (q < 0)
                                return q;
                }
                req = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:O, s:b, s:b, s:s?}", "op", "send",
                                "id", it->id, "url", rm->a2a, "token_file", rm->token_file,
                                "ca_file", rm->ca_file, "doc", doc, "check", check,
                                "card_cross_origin", rm->a2a_card_cross_origin, "card_key",
                                rm->a2a_card_key);
        } else {
                req = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s, s:b, s:s?}", "op", "get", "id",
                                it->id, "url", rm->a2a, "token_file", rm->token_file, "ca_file",
                                rm->ca_file, "task", it->task, "card_cross_origin",
                                rm->a2a_card_cross_origin, "card_key", rm->a2a_card_key);
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
        q = uv_write(w, (uv_stream_t *)&r->to, &b, 1, on_write);
        if (q < 0) {
                free(s);
                free(w);
                return q;
        }
        it->st = it->st == AI_UNSENT ? AI_SENDING : AI_GETTING;
        r->inflight++;
        return 0;
}
