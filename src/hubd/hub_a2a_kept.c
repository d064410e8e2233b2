/* The documents the A2A side sent, kept: state_dir/a2a.d/AGENT/ID.json,
 * one per task, written before the drop into the spool so that a retry
 * of the same messageId is the same task and the same bytes; removed
 * when the spool refused or rejected it, pruned after HUB_A2A_KEEP.
 *
 * Beside them, in memory, the index the methods answer from: per
 * sending agent its tasks (id, target, contextId, when, size), oldest
 * first, and the later turns of a task of several (a document whose
 * payload names the task, taskId, that it continues).  It is built once at start (one parse of each document) and
 * changed with every write and removal, so GetTask and ListTasks read
 * no document, and each token's count and bytes are known at once.
 *
 * The directory's name has a '.', which no handoff_id has
 * (hd_id_valid()): the hub's records, named by id, beside it cannot
 * take its place.  Only the hub's user may enter it (0700, files 0600):
 * every sender's words are in it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "hub.h"
#include "hub_a2a.h"
#include "layout.h"
#include "util.h"

static pthread_mutex_t a2a_locks[A2A_LOCKS] = {
        [0 ... A2A_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER
};

pthread_mutex_t *a2a_lock(const char *id)
{
        return &a2a_locks[fnv1a(id, strlen(id), FNV_BASIS) % A2A_LOCKS];
}

/* ---- the index ---------------------------------------------------------- */

struct kept_sender {
        char agent[A2A_AGENT_MAX + 1];
        struct a2a_kept *v;     /* oldest first */
        size_t n, cap;
        size_t files;           /* of them, with their document on disk */
        uint64_t bytes;         /* of those documents */
};

static struct {
        pthread_mutex_t lock;
        struct kept_sender *s;
        size_t n, cap;
        int64_t swept_usec;     /* the last look into rejected/ */
} kept = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int ts_cmp(const struct timespec *a, const struct timespec *b)
{
        if (a->tv_sec != b->tv_sec)
                return a->tv_sec < b->tv_sec ? -1 : 1;
        if (a->tv_nsec != b->tv_nsec)
                return a->tv_nsec < b->tv_nsec ? -1 : 1;
        return 0;
}

/* Oldest first; the same instant by id, so pages do not shift. */
static int task_cmp(const void *x, const void *y)
{
        const struct a2a_kept *a = x, *b = y;
        int c = ts_cmp(&a->mtime, &b->mtime);

        return c ? c : strcmp(a->id, b->id);
}

static struct kept_sender *sender_get(const char *agent, bool create)
{
        for (size_t i = 0; i < kept.n; i++)
                if (!strcmp(kept.s[i].agent, agent))
                        return &kept.s[i];
        if (!create)
                return NULL;
        if (kept.n == kept.cap) {
                size_t cap = kept.cap ? 2 * kept.cap : 16;
                struct kept_sender *s = realloc(kept.s, cap * sizeof(*s));
                if (!s)
                        return NULL;
                kept.s = s;
                kept.cap = cap;
        }
        memset(&kept.s[kept.n], 0, sizeof(kept.s[0]));
        snprintf(kept.s[kept.n].agent, sizeof(kept.s[0].agent), "%s", agent);
        return &kept.s[kept.n++];
}

static ssize_t task_find(const struct kept_sender *s, const char *id)
{
        for (size_t i = s->n; i-- > 0;)
                if (!strcmp(s->v[i].id, id))
                        return (ssize_t)i;
        return -1;
}

/* The turns of task first counted again, and its latest named. */
static void turns_count(struct kept_sender *s, const char *first)
{
        ssize_t f = task_find(s, first);
        struct a2a_kept *t;

        if (f < 0)
                return;
        t = &s->v[f];
        t->turns = 1;
        snprintf(t->last, sizeof(t->last), "%s", t->id);
        for (size_t i = (size_t)f + 1; i < s->n; i++)
                if (!strcmp(s->v[i].task, first)) {
                        t->turns++;
                        snprintf(t->last, sizeof(t->last), "%s", s->v[i].id);
                }
}

/* Into s at its place (new ones are the newest: at the end). */
static int task_add(struct kept_sender *s, const struct a2a_kept *t)
{
        size_t i;

        if (s->n == s->cap) {
                size_t cap = s->cap ? 2 * s->cap : 64;
                struct a2a_kept *v = realloc(s->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        for (i = s->n; i > 0 && task_cmp(&s->v[i - 1], t) > 0; i--)
                ;
        memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(*t));
        s->v[i] = *t;
        s->n++;
        if (t->on_disk) {
                s->files++;
                s->bytes += t->size;
        }
        if (t->task[0])
                turns_count(s, t->task);
        return 0;
}

static void task_del(struct kept_sender *s, size_t i)
{
        char first[A2A_ID_MAX + 1];

        snprintf(first, sizeof(first), "%s", s->v[i].task);
        if (s->v[i].on_disk) {
                s->files--;
                s->bytes -= s->v[i].size;
        }
        memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(s->v[0]));
        s->n--;
        if (first[0])
                turns_count(s, first);
}

/* What of doc the index keeps: its target, contextId, and the task it
 * continues (payload.taskId), if any. */
static int task_of_doc(const json_t *doc, const char *id, const struct stat *st,
                       struct a2a_kept *ret)
{
        const char *to = a2a_str(doc, "to_agent");
        const char *ctx = a2a_str(json_object_get(doc, "payload"), "contextId") ?: "";
        const char *task = a2a_str(json_object_get(doc, "payload"), "taskId") ?: "";

        if (!to || !hd_agent_valid(to) || !hd_id_valid(id) || strlen(ctx) >= sizeof(ret->ctx) ||
            (*task && (!hd_id_valid(task) || !strcmp(task, id))))
                return -EINVAL;
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->id, sizeof(ret->id), "%s", id);
        snprintf(ret->task, sizeof(ret->task), "%s", task);
        snprintf(ret->last, sizeof(ret->last), "%s", id);
        ret->turns = 1;
        snprintf(ret->to, sizeof(ret->to), "%s", to);
        snprintf(ret->ctx, sizeof(ret->ctx), "%s", ctx);
        ret->mtime = st->st_mtim;
        ret->size = (uint64_t)st->st_size;
        ret->on_disk = true;
        return 0;
}

/* ---- the directories ------------------------------------------------------ */

/* Tightened to mode when the group or others may reach it. */
static int mode_tighten(int fd, mode_t mode, const char *what)
{
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!(st.st_mode & 077 & ~mode))
                return 0;
        /* A shared directory (sticky, like /tmp) or another user's is
         * not ours to close: refused, never chmod'ed under its users. */
        if ((st.st_mode & S_ISVTX) || st.st_uid != geteuid()) {
                hub_log("%s is mode %04o, owned by uid %u: a shared directory, or not the "
                        "hub's user's; give the hub a directory of its own (mode 0700)", what,
                        (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
                return -EPERM;
        }
        if (fchmod(fd, mode) < 0) {
                int r = -errno;
                hub_log("%s is mode %04o and cannot be made %04o: %s", what,
                        (unsigned)(st.st_mode & 07777), (unsigned)mode, strerror(-r));
                return r;
        }
        hub_log("%s was mode %04o: made %04o (only the hub's user reads the A2A documents)",
                what, (unsigned)(st.st_mode & 07777), (unsigned)mode);
        return 0;
}

/* The directory of agent's documents; with create, made if missing. */
int a2a_kept_dir(struct hub *h, const char *agent, bool create, int *ret)
{
        _cleanup_close_ int top = -1;
        int fd;

        if (create && mkdirat(h->state_fd, A2A_DIR, 0700) < 0 && errno != EEXIST)
                return -errno;
        top = openat(h->state_fd, A2A_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return -errno;
        if (create && mkdirat(top, agent, 0700) == 0 && h->cfg->fsync) {
                int r = fsync_dir(top);
                if (r == 0)
                        r = fsync_dir(h->state_fd);
                if (r < 0)
                        return r;
        }
        fd = openat(top, agent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret = fd;
        return 0;
}

/* One agent's documents into the index, each made 0600. */
static int load_agent(struct hub *h, int top, const char *agent, size_t *ret_n)
{
        const hd_limits lim = { .max_size = h->cfg->max_file_size };
        struct kept_sender *s;
        struct dirent *de;
        struct stat st;
        DIR *d;
        int afd, r = 0;

        afd = openat(top, agent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (afd < 0)
                return errno == ENOTDIR ? 0 : -errno;
        (void)mode_tighten(afd, 0700, "a2a.d/AGENT");
        d = fdopendir(afd);
        if (!d) {
                close(afd);
                return -errno;
        }
        s = sender_get(agent, true);
        if (!s)
                r = -ENOMEM;
        while (r == 0 && (de = readdir(d))) {
                _cleanup_json_ json_t *doc = NULL;
                _cleanup_close_ int fd = -1;
                struct a2a_kept t;
                char id[NAME_MAX + 1];
                size_t l = strlen(de->d_name);
                hd_verdict v;

                if (de->d_name[0] == '.' || l <= 5 || l - 5 >= sizeof(t.id) ||
                    strcmp(de->d_name + l - 5, ".json"))
                        continue;
                memcpy(id, de->d_name, l - 5);
                id[l - 5] = '\0';
                fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (st.st_mode & 077)
                        (void)fchmod(fd, 0600);
                if (hd_load_at(dirfd(d), de->d_name, &lim, &doc, &v) < 0 ||
                    task_of_doc(doc, id, &st, &t) < 0)
                        continue;
                r = task_add(s, &t);
                if (r == 0)
                        (*ret_n)++;
        }
        closedir(d);
        /* a later turn read before its first */
        for (size_t i = 0; r == 0 && s && i < s->n; i++)
                if (!s->v[i].task[0])
                        turns_count(s, s->v[i].id);
        return r;
}

int hub_a2a_load(struct hub *h)
{
        _cleanup_close_ int top = -1;
        struct dirent *de;
        struct stat st;
        size_t n = 0;
        DIR *d;
        int r = 0;

        /* state_dir itself: the records name who sent to whom */
        r = mode_tighten(h->state_fd, 0700, "[hub] state_dir");
        if (r < 0)
                return r;
        /* The directory's old name, "a2a", is a name a handoff_id can
         * take: a directory there is ours, moved to its new name. */
        if (fstatat(h->state_fd, A2A_DIR_OLD, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode) && renameat(h->state_fd, A2A_DIR_OLD, h->state_fd, A2A_DIR) == 0)
                hub_log("moved %s to %s in [hub] state_dir", A2A_DIR_OLD, A2A_DIR);
        top = openat(h->state_fd, A2A_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return errno == ENOENT ? 0 : -errno;
        r = mode_tighten(top, 0700, "[hub] state_dir/" A2A_DIR);
        if (r < 0)
                return r;
        d = opendir_at(top);
        if (!d)
                return -errno;
        pthread_mutex_lock(&kept.lock);
        while (r == 0 && (de = readdir(d)))
                if (de->d_name[0] != '.' && hd_agent_valid(de->d_name))
                        r = load_agent(h, top, de->d_name, &n);
        pthread_mutex_unlock(&kept.lock);
        closedir(d);
        if (r < 0)
                return r;
        if (n)
                hub_log("a2a: %zu kept task(s) indexed", n);
        return 0;
}

/* ---- the documents ---------------------------------------------------------- */

/* agent's document of id: 0 with *ret_doc (and the bytes when asked),
 * -ENOENT, or -errno. */
int a2a_kept_read(struct hub *h, const char *agent, const char *id, json_t **ret_doc,
                  char **ret_body, size_t *ret_len)
{
        const hd_limits lim = { .max_size = h->cfg->max_file_size };
        _cleanup_close_ int dfd = -1;
        _cleanup_free_ char *buf = NULL;
        char name[NAME_MAX + 1];
        size_t len;
        hd_verdict v;
        int r;

        if (!hd_id_valid(id) || xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                return -ENOENT;
        r = a2a_kept_dir(h, agent, false, &dfd);
        if (r < 0)
                return r;
        r = hd_read_at(dfd, name, lim.max_size, &buf, &len, &v);
        if (r < 0)
                return r == -EBADMSG ? -EIO : r;
        r = hd_parse(buf, len, &lim, ret_doc, &v);
        if (r < 0)
                return r == -EBADMSG ? -EIO : r;
        if (ret_body) {
                *ret_body = TAKE_PTR(buf);
                *ret_len = len;
        }
        return 0;
}

int a2a_kept_get(const char *agent, const char *id, struct a2a_kept *ret)
{
        struct kept_sender *s;
        ssize_t i;
        int r = -ENOENT;

        pthread_mutex_lock(&kept.lock);
        s = sender_get(agent, false);
        if (s && (i = task_find(s, id)) >= 0) {
                *ret = s->v[i];
                r = 0;
        }
        pthread_mutex_unlock(&kept.lock);
        return r;
}

int a2a_kept_task(const char *agent, const char *id, struct a2a_kept *ret)
{
        int r = a2a_kept_get(agent, id, ret);

        return r == 0 && ret->task[0] ? -ENOENT : r;
}

int a2a_kept_turns(const char *agent, const char *id, struct a2a_kept **ret, size_t *ret_n)
{
        _cleanup_free_ struct a2a_kept *v = NULL;
        struct kept_sender *s;
        ssize_t f = -1;
        size_t n = 0;
        int r = 0;

        pthread_mutex_lock(&kept.lock);
        s = sender_get(agent, false);
        if (s)
                f = task_find(s, id);
        if (f < 0)
                r = -ENOENT;
        else if (!(v = malloc(s->v[f].turns * sizeof(*v))))
                r = -ENOMEM;
        for (size_t i = r == 0 ? (size_t)f : 0; r == 0 && i < s->n && n < s->v[f].turns; i++)
                if (i == (size_t)f || !strcmp(s->v[i].task, id))
                        v[n++] = s->v[i];
        pthread_mutex_unlock(&kept.lock);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

/* Whether agent may keep one more document of len bytes. */
static bool within_caps(struct hub *h, const char *agent, size_t len)
{
        const struct config_hub *ch = &h->cfg->hub;
        struct kept_sender *s = sender_get(agent, false);

        return !s || ((!ch->a2a_kept_max_items || s->files < ch->a2a_kept_max_items) &&
                      (!ch->a2a_kept_max_bytes || s->bytes + len <= ch->a2a_kept_max_bytes));
}

int a2a_kept_write(struct hub *h, const char *agent, const char *id, const json_t *doc,
                   const char *body, size_t len)
{
        _cleanup_close_ int dfd = -1;
        char name[NAME_MAX + 1];
        struct kept_sender *s;
        struct a2a_kept t;
        struct stat st;
        bool room;
        int r;

        pthread_mutex_lock(&kept.lock);
        room = within_caps(h, agent, len);
        pthread_mutex_unlock(&kept.lock);
        if (!room) {
                /* what the daemon rejected since is no longer counted */
                a2a_kept_sweep(h, true);
                pthread_mutex_lock(&kept.lock);
                room = within_caps(h, agent, len);
                pthread_mutex_unlock(&kept.lock);
                if (!room)
                        return -EDQUOT;
        }
        r = xsnprintf(name, sizeof(name), "%s.json", id);
        if (r >= 0)
                r = a2a_kept_dir(h, agent, true, &dfd);
        if (r >= 0)
                r = hd_write_atomic(dfd, name, body, len, 0600, h->cfg->fsync);
        if (r >= 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                r = -errno;
        if (r >= 0)
                r = task_of_doc(doc, id, &st, &t);
        if (r < 0)
                return r;
        pthread_mutex_lock(&kept.lock);
        s = sender_get(agent, true);
        if (!s)
                r = -ENOMEM;
        else if (task_find(s, id) < 0)
                r = task_add(s, &t);
        pthread_mutex_unlock(&kept.lock);
        if (r < 0)
                unlinkat(dfd, name, 0);
        return r;
}

/* The document's file removed; with forget, its entry too (else it
 * stays to answer GetTask, and counts no more bytes). */
static void kept_unlink(struct hub *h, const char *agent, const char *id, bool forget)
{
        _cleanup_close_ int dfd = -1;
        char name[NAME_MAX + 1];
        struct kept_sender *s;
        ssize_t i;

        if (xsnprintf(name, sizeof(name), "%s.json", id) >= 0 &&
            a2a_kept_dir(h, agent, false, &dfd) == 0)
                unlinkat(dfd, name, 0);
        pthread_mutex_lock(&kept.lock);
        s = sender_get(agent, false);
        if (s && (i = task_find(s, id)) >= 0) {
                if (forget) {
                        task_del(s, (size_t)i);
                } else if (s->v[i].on_disk) {
                        s->files--;
                        s->bytes -= s->v[i].size;
                        s->v[i].on_disk = false;
                }
        }
        pthread_mutex_unlock(&kept.lock);
}

void a2a_kept_remove(struct hub *h, const char *agent, const char *id)
{
        kept_unlink(h, agent, id, true);
}

void a2a_kept_rejected(struct hub *h, const char *agent, const char *id)
{
        kept_unlink(h, agent, id, false);
}

int a2a_kept_list(const char *agent, const char *to, const char *ctx, struct a2a_kept **ret,
                  size_t *ret_n)
{
        _cleanup_free_ struct a2a_kept *v = NULL;
        struct kept_sender *s;
        size_t n = 0;
        int r = 0;

        pthread_mutex_lock(&kept.lock);
        s = sender_get(agent, false);
        if (s && s->n && !(v = malloc(s->n * sizeof(*v))))
                r = -ENOMEM;
        for (size_t i = s && v ? s->n : 0; i-- > 0;)
                if (!s->v[i].task[0] && !strcmp(s->v[i].to, to) &&
                    (!ctx || !strcmp(s->v[i].ctx, ctx)))
                        v[n++] = s->v[i];
        pthread_mutex_unlock(&kept.lock);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

bool a2a_kept_ctx_foreign(const char *agent, const char *ctx)
{
        bool foreign = false;

        pthread_mutex_lock(&kept.lock);
        for (size_t i = 0; i < kept.n && !foreign; i++)
                if (strcmp(kept.s[i].agent, agent))
                        for (size_t j = 0; j < kept.s[i].n && !foreign; j++)
                                foreign = !strcmp(kept.s[i].v[j].ctx, ctx);
        pthread_mutex_unlock(&kept.lock);
        return foreign;
}

/* ---- what the spool rejected, and age ------------------------------------------ */

/* Whether rejected/name is the authenticated rejection of id: its
 * .reason names it (a file rejected unauthenticated names no id, and
 * may be anyone's under any name). */
static bool rejected_is(int dfd, const char *name, const char *id)
{
        const hd_limits lim = { .max_size = 64 * 1024 };
        _cleanup_json_ json_t *why = NULL;
        char sname[NAME_MAX + 1];
        hd_verdict v;

        return xsnprintf(sname, sizeof(sname), "%s%s", name, LAYOUT_REASON) >= 0 &&
               hd_load_at(dfd, sname, &lim, &why, &v) == 0 &&
               !strcmp(a2a_str(why, "handoff_id") ?: "", id);
}

void a2a_kept_sweep(struct hub *h, bool soon)
{
        char path[PATH_MAX], id[NAME_MAX + 1];
        int64_t now = mono_usec();
        struct dirent *de;
        DIR *d;

        /* at most once a second, however many senders are at their cap */
        pthread_mutex_lock(&kept.lock);
        if (soon && now - kept.swept_usec < 1000000) {
                pthread_mutex_unlock(&kept.lock);
                return;
        }
        kept.swept_usec = now;
        pthread_mutex_unlock(&kept.lock);
        if (xsnprintf(path, sizeof(path), "%s/rejected", h->cfg->spool_dir) < 0 ||
            !(d = opendir(path)))
                return;
        while ((de = readdir(d))) {
                size_t l = layout_base_len(de->d_name);
                char agent[A2A_AGENT_MAX + 1] = "";

                if (strncmp(de->d_name, A2A_TASK_ID_PREFIX, strlen(A2A_TASK_ID_PREFIX)) ||
                    l <= 5 || l - 5 >= sizeof(id) || strncmp(de->d_name + l - 5, ".json", 5))
                        continue;
                memcpy(id, de->d_name, l - 5);
                id[l - 5] = '\0';
                /* whose: the index knows, no document is read */
                pthread_mutex_lock(&kept.lock);
                for (size_t i = 0; i < kept.n && !agent[0]; i++) {
                        ssize_t j = task_find(&kept.s[i], id);
                        if (j >= 0 && kept.s[i].v[j].on_disk)
                                snprintf(agent, sizeof(agent), "%s", kept.s[i].agent);
                }
                pthread_mutex_unlock(&kept.lock);
                if (agent[0] && rejected_is(dirfd(d), de->d_name, id))
                        a2a_kept_rejected(h, agent, id);
        }
        closedir(d);
}

int hub_a2a_prune(struct hub *h, int64_t now_s)
{
        int n = 0;

        a2a_kept_sweep(h, false);
        for (;;) {
                char agent[A2A_AGENT_MAX + 1] = "", id[A2A_ID_MAX + 1] = "";

                /* the oldest of any sender past the age, one at a time */
                pthread_mutex_lock(&kept.lock);
                for (size_t i = 0; i < kept.n && !id[0]; i++)
                        if (kept.s[i].n && kept.s[i].v[0].mtime.tv_sec < now_s - HUB_A2A_KEEP) {
                                snprintf(agent, sizeof(agent), "%s", kept.s[i].agent);
                                snprintf(id, sizeof(id), "%s", kept.s[i].v[0].id);
                        }
                pthread_mutex_unlock(&kept.lock);
                if (!id[0])
                        return n;
                a2a_kept_remove(h, agent, id);
                n++;
        }
}
