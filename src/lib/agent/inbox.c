/* An agent's inbox; see inbox.h. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "agent.h"
#include "inbox.h"
#include "util.h"

#define INBOX_DIR_EVENTS (IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | \
                          IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
#define INBOX_PARENT_EVENTS (IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)

_printf_(4, 5) static int inbox_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        return code;
}

int inbox_init(struct inbox *ib, const struct config *cfg, const char *agent,
               const char *state_dir, int64_t window, char *err, size_t errlen)
{
        const struct config_agent *a;

        ib->fd = ib->wd = -1;
        ib->wd_parent = false;
        ib->copts = NULL;
        ib->window = window;
        if (agent) {
                a = config_agent(cfg, agent);
                if (!a)
                        return inbox_fail(err, errlen, AG_USAGE, "agent '%s' is not in %s",
                                          agent, cfg->path);
                state_dir = a->state_dir;
                ib->window = cfg->resume_window;
        }
        if (xsnprintf(ib->dir, sizeof(ib->dir), "%s/handoffs", state_dir) < 0)
                return inbox_fail(err, errlen, AG_USAGE, "%s: path too long", state_dir);
        if (inbox_reopen(ib) < 0 && errno != ENOENT)
                return inbox_fail(err, errlen, AG_ERROR, "%s: %s", ib->dir, strerror(errno));
        return 0;
}

void inbox_done(struct inbox *ib)
{
        if (ib->fd >= 0)
                close(ib->fd);
        ib->fd = -1;
}

int inbox_reopen(struct inbox *ib)
{
        if (ib->fd >= 0)
                return 0;
        /* never through a link: handoffs/ swapped for one is another dir */
        ib->fd = open(ib->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return ib->fd >= 0 ? 1 : -errno;
}

bool inbox_name(const char *name)
{
        size_t l = strlen(name);

        return name[0] != '.' && l > 5 && !strcmp(name + l - 5, ".json");
}

int inbox_entry(const struct inbox *ib, const char *name, int64_t now,
                json_t **ret)
{
        _cleanup_json_ json_t *b = NULL;
        static const char *const copy[] = { "handoff_id", "from_agent", "to_agent",
                                            "reason", "accepted_at", "payload_type" };
        hd_consume_opts keyless = { .resume_window_s = ib->window };
        hd_verdict v;
        int64_t at = 0;
        json_t *e;
        int r;

        if (ib->fd < 0)
                return -ENOENT;
        if (!inbox_name(name))
                return -EBADMSG;
        /* What a take would get, from the signed handoff when there are
         * keys: a file planted here is not shown for what it says. */
        r = hd_consume_peek(ib->fd, name, ib->copts ? ib->copts : &keyless, now, &b, &v);
        if (r < 0)
                return r;
        if (hd_time_parse(json_string_value(json_object_get(b, "accepted_at")) ?: "", &at) < 0)
                return -EBADMSG;
        e = json_object();
        if (!e)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(copy); i++) {
                json_t *x = json_object_get(b, copy[i]);
                if (json_is_string(x))
                        json_object_set(e, copy[i], x);
        }
        json_object_set_new(e, "name", json_string(name));
        json_object_set_new(e, "age_s", json_integer((now - at) / 1000000));
        json_object_set_new(e, "seconds_left",
                            json_integer((at + ib->window * 1000000LL - now) / 1000000));
        *ret = e;
        return 0;
}

static int64_t entry_at(const json_t *e)
{
        int64_t t = 0;

        hd_time_parse(json_string_value(json_object_get(e, "accepted_at")) ?: "", &t);
        return t;
}

/* Oldest first, as hd_consume() takes them; then by name. */
static int entry_cmp(const void *a, const void *b)
{
        const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
        int64_t tx = entry_at(x), ty = entry_at(y);

        if (tx != ty)
                return tx < ty ? -1 : 1;
        return strcmp(json_string_value(json_object_get(x, "name")),
                      json_string_value(json_object_get(y, "name")));
}

struct cand {
        char *name;
        int64_t mtime;
        off_t size;
};

/* By mtime (the daemon writes each bootstrap at its accepted_at), as
 * hd_consume_with() picks them; then by name. */
static int cand_cmp(const void *a, const void *b)
{
        const struct cand *x = a, *y = b;

        if (x->mtime != y->mtime)
                return x->mtime < y->mtime ? -1 : 1;
        return strcmp(x->name, y->name);
}

/* The names that may be bootstraps, with their mtimes and sizes: a
 * listing and a stat each, no file read. */
static int inbox_cands(const struct inbox *ib, struct cand **ret, size_t *ret_n)
{
        struct cand *c = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *d;

        d = opendir_at(ib->fd);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                struct stat st;
                if (!inbox_name(de->d_name) ||
                    fstatat(ib->fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                if (n == cap) {
                        struct cand *t = realloc(c, (cap = cap ? cap * 2 : 16) * sizeof(*c));
                        if (!t)
                                goto nomem;
                        c = t;
                }
                c[n].name = strdup(de->d_name);
                if (!c[n].name)
                        goto nomem;
                c[n].mtime = (int64_t)st.st_mtim.tv_sec * 1000000LL + st.st_mtim.tv_nsec / 1000;
                c[n].size = st.st_size;
                n++;
        }
        closedir(d);
        if (n > 1)
                qsort(c, n, sizeof(*c), cand_cmp);
        *ret = c;
        *ret_n = n;
        return 0;
nomem:
        closedir(d);
        for (size_t i = 0; i < n; i++)
                free(c[i].name);
        free(c);
        return -ENOMEM;
}

int inbox_list(const struct inbox *ib, int64_t now, json_t **ret, size_t *ret_more)
{
        _cleanup_json_ json_t *arr = json_array();
        struct cand *c = NULL;
        json_t **v = NULL, *e;
        size_t n = 0, i, k = 0;
        uint64_t read = 0;
        int r;

        if (!arr)
                return -ENOMEM;
        if (ib->fd >= 0) {
                r = inbox_cands(ib, &c, &n);
                if (r < 0)
                        return r;
        }
        /* Each one shown is read and checked as a take would: the oldest
         * first, up to a bound, so a flooded inbox costs that bound, not
         * every file in it (issue 24.9); the rest is counted. */
        for (k = 0; k < n; k++) {
                if (json_array_size(arr) >= INBOX_SHOW_MAX ||
                    (k > 0 && read + (uint64_t)c[k].size > INBOX_READ_MAX))
                        break;
                read += (uint64_t)c[k].size;
                if (inbox_entry(ib, c[k].name, now, &e) == 0)
                        json_array_append_new(arr, e);
        }
        if (ret_more)
                *ret_more = n - k;
        for (i = 0; i < n; i++)
                free(c[i].name);
        free(c);
        n = json_array_size(arr);
        if (n > 1) {
                v = malloc(n * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                json_array_foreach(arr, i, e)
                        v[i] = json_incref(e);
                qsort(v, n, sizeof(*v), entry_cmp);
                json_array_clear(arr);
                for (i = 0; i < n; i++)
                        json_array_append_new(arr, v[i]);
                free(v);
        }
        *ret = TAKE_PTR(arr);
        return 0;
}

int inbox_watch(struct inbox *ib, int ifd)
{
        char parent[PATH_MAX];
        char *slash;
        int wd;

        if (ib->fd >= 0) {
                wd = inotify_add_watch(ifd, ib->dir, INBOX_DIR_EVENTS);
                ib->wd_parent = false;
        } else {
                snprintf(parent, sizeof(parent), "%s", ib->dir);
                slash = strrchr(parent, '/');
                if (slash)
                        *slash = '\0';
                wd = inotify_add_watch(ifd, parent, INBOX_PARENT_EVENTS);
                ib->wd_parent = true;
        }
        if (wd < 0)
                return -errno;
        ib->wd = wd;
        return 0;
}

int inbox_event(struct inbox *ib, int ifd, const struct inotify_event *ev)
{
        if (ev->mask & IN_Q_OVERFLOW)
                return 1;
        if (ev->wd != ib->wd)
                return 0;
        if (ib->wd_parent) {
                if (!ev->len || strcmp(ev->name, "handoffs") || inbox_reopen(ib) <= 0)
                        return 0;
                inotify_rm_watch(ifd, ib->wd);
                ib->wd = -1;
                return inbox_watch(ib, ifd) < 0 ? 0 : 1;
        }
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
                /* handoffs/ itself went: wait for the next one */
                inbox_done(ib);
                inotify_rm_watch(ifd, ib->wd);
                ib->wd = -1;
                inbox_watch(ib, ifd);
                return 1;
        }
        return ev->len && inbox_name(ev->name);
}

void inbox_print(FILE *f, const json_t *e, bool as_json)
{
        if (as_json) {
                _cleanup_free_ char *s = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
                fprintf(f, "%s\n", s ? s : "{}");
                return;
        }
        inbox_text(f, e);
        fputc('\n', f);
}

void inbox_text(FILE *f, const json_t *e)
{
        fprintf(f, "%s from %s, %llds old, %llds left: %s",
                esc_line(json_string_value(json_object_get(e, "handoff_id"))),
                esc_line(json_string_value(json_object_get(e, "from_agent"))) ?: "?",
                (long long)json_integer_value(json_object_get(e, "age_s")),
                (long long)json_integer_value(json_object_get(e, "seconds_left")),
                esc_line(json_string_value(json_object_get(e, "reason"))) ?: "");
}
