/* Waits that hold no libmicrohttpd thread: ?wait=claimed, CancelTask, a
 * blocking SendMessage, and A2A's streams.  A request that waits has its
 * connection suspended and handed to one watcher thread, which looks
 * again when inotify says a file it cares about moved (handoff/ left,
 * cancel/ answered, an item into claimed/, archive/ or rejected/, its
 * outcome or result beside it), at its tick when it has one, and at its
 * deadline; then the connection is resumed and a pool thread makes the
 * answer (hub_wait_ops.finish).  A sleeping wait on a pool thread held
 * every other connection of that thread: 16 waits from one token stalled
 * every other token's POST and /healthz.
 *
 * A stream stays in the watcher's hands while it is open: its writer
 * parks it when it has nothing to send, the watcher resumes it as it
 * would a wait, the writer sends what came and parks it again.
 *
 * The waits are bounded: max_connections in all (each is a connection),
 * max_waits_per_token of one token, streams counted with them; a wait
 * beyond them is answered at once, as it stands.  Without inotify (its
 * limits) every wait looks again each HUB_WAIT_TICK_USEC instead. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "hub.h"
#include "util.h"

struct hub_waits {
        struct hub *h;
        pthread_t thread;
        pthread_mutex_t lock;
        TAILQ_HEAD(, hub_wait) list;    /* armed, not yet resumed */
        unsigned n;
        unsigned max, max_per_token;
        int ifd;                        /* inotify; -1: ticks alone */
        int wd[_HUB_WAIT_ON_MAX];       /* the watch of each directory, -1: none */
        int efd;                        /* eventfd: a new wait, or stop */
        bool stopping;
};

static void watch_path(struct hub_waits *w, enum hub_wait_on on, const char *path,
                       uint32_t mask)
{
        w->wd[on] = -1;
        if (w->ifd >= 0 && path)
                w->wd[on] = inotify_add_watch(w->ifd, path, mask | IN_ONLYDIR);
}

static void watch_dir(struct hub_waits *w, enum hub_wait_on on, int dirfd, uint32_t mask)
{
        char path[64];

        w->wd[on] = -1;
        if (dirfd >= 0 && xsnprintf(path, sizeof(path), "/proc/self/fd/%d", dirfd) >= 0)
                watch_path(w, on, path, mask);
}

/* spool_dir/sub, watched (the hub holds no descriptor of it). */
static void watch_spool(struct hub_waits *w, enum hub_wait_on on, const char *sub,
                        uint32_t mask)
{
        char path[PATH_MAX];

        w->wd[on] = -1;
        if (xsnprintf(path, sizeof(path), "%s/%s", w->h->cfg->spool_dir, sub) >= 0)
                watch_path(w, on, path, mask);
}

/* An event's name concerns w: its own file, or an answer ".WORD.NAME" to
 * it; with name_in, any name holding it (an archive's "TS-...-ID.json"
 * and its sidecars).  One too many only costs a look. */
static bool names_it(const struct hub_wait *w, const char *ev)
{
        size_t l = strlen(ev), n = strlen(w->name);

        if (w->name_in)
                return strstr(ev, w->name) != NULL;
        return !strcmp(ev, w->name) ||
               (l > n + 1 && ev[l - n - 1] == '.' && !strcmp(ev + l - n, w->name));
}

/* Whether each of the directories x cares about is watched. */
static bool watched(const struct hub_waits *w, const struct hub_wait *x)
{
        if (w->ifd < 0)
                return false;
        for (int on = 0; on < _HUB_WAIT_ON_MAX; on++)
                if ((x->dirs & HUB_WAIT_DIR(on)) && w->wd[on] < 0)
                        return false;
        return true;
}

/* Under the lock: each wait due a look (new, named by an event, at its
 * tick, everyone's after an overflow) looks; those ready or past their
 * deadline move to *out. */
static void look_all(struct hub_waits *w, const char *names, size_t names_len,
                     const int *ons, bool all, int64_t now, struct hub_wait_list *out)
{
        struct hub_wait *x, *next;

        for (x = TAILQ_FIRST(&w->list); x; x = next) {
                bool named = all, due;
                next = TAILQ_NEXT(x, link);
                /* a stream being written: its writer looks before it parks */
                if (x->ops->stream && !x->parked)
                        continue;
                /* names: NUL-separated, ons[i] the directory of the i-th */
                for (size_t off = 0, i = 0; !named && off < names_len; i++) {
                        named = ons[i] >= 0 && (x->dirs & HUB_WAIT_DIR(ons[i])) &&
                                names_it(x, names + off);
                        off += strlen(names + off) + 1;
                }
                due = named || x->fresh || now >= x->deadline || (x->tick && now >= x->next_look);
                if (!due)
                        continue;
                x->named = named;
                x->fresh = false;
                x->ready = x->ops->look(w->h, x);
                /* at the stop now is INT64_MAX: no next look */
                if (x->tick)
                        x->next_look = now > INT64_MAX - x->tick ? INT64_MAX : now + x->tick;
                if (!x->ready && now < x->deadline)
                        continue;
                if (x->ops->stream) {
                        x->parked = false;      /* held until its connection closes */
                } else {
                        TAILQ_REMOVE(&w->list, x, link);
                        x->armed = false;
                        w->n--;
                }
                TAILQ_INSERT_TAIL(out, x, out_link);
        }
}

/* The next time anything is due: a poll timeout in ms (-1: none). */
static int next_due(struct hub_waits *w, int64_t now)
{
        int64_t due = INT64_MAX;
        struct hub_wait *x;

        TAILQ_FOREACH(x, &w->list, link) {
                if (x->ops->stream && !x->parked)
                        continue;
                if (x->fresh)
                        return 0;
                if (x->deadline < due)
                        due = x->deadline;
                if (x->tick && x->next_look < due)
                        due = x->next_look;
        }
        if (due == INT64_MAX)
                return -1;
        return due <= now ? 0 : (int)((due - now + 999) / 1000);
}

#define EV_NAMES_MAX 64

static void *watcher(void *arg)
{
        struct hub_waits *w = arg;
        char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));

        for (;;) {
                struct pollfd p[2] = { { .fd = w->efd, .events = POLLIN },
                                       { .fd = w->ifd, .events = POLLIN } };
                char names[EV_NAMES_MAX * (NAME_MAX + 1)];
                int ons[EV_NAMES_MAX];
                size_t names_len = 0, k = 0;
                struct hub_wait_list out = TAILQ_HEAD_INITIALIZER(out);
                struct hub_wait *x;
                bool all = false, stop;
                uint64_t one;
                int timeout;

                pthread_mutex_lock(&w->lock);
                timeout = next_due(w, mono_usec());
                pthread_mutex_unlock(&w->lock);
                if (poll(p, w->ifd >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR)
                        timeout = 10;   /* cannot happen; no busy loop if it does */
                if (p[0].revents)
                        (void)!read(w->efd, &one, sizeof(one));
                if (w->ifd >= 0 && p[1].revents) {
                        ssize_t n;
                        while ((n = read(w->ifd, buf, sizeof(buf))) > 0) {
                                for (char *q = buf; q < buf + n;) {
                                        const struct inotify_event *ev = (const void *)q;
                                        size_t l = ev->len ? strlen(ev->name) : 0;
                                        q += sizeof(*ev) + ev->len;
                                        if (ev->mask & IN_Q_OVERFLOW || k == EV_NAMES_MAX) {
                                                all = true;
                                                continue;
                                        }
                                        if (!l)
                                                continue;
                                        memcpy(names + names_len, ev->name, l + 1);
                                        names_len += l + 1;
                                        ons[k] = -1;
                                        for (int on = 0; on < _HUB_WAIT_ON_MAX; on++)
                                                if (w->wd[on] >= 0 && w->wd[on] == ev->wd)
                                                        ons[k] = on;
                                        k++;
                                }
                        }
                }
                pthread_mutex_lock(&w->lock);
                stop = w->stopping;
                /* at a stop every wait ends now, as it stands */
                look_all(w, names, names_len, ons, all, stop ? INT64_MAX : mono_usec(), &out);
                pthread_mutex_unlock(&w->lock);
                /* Outside the lock: libmicrohttpd's own is taken in there.
                 * Each is suspended until this resume: its connection
                 * cannot close (and x be freed) before. */
                while ((x = TAILQ_FIRST(&out))) {
                        TAILQ_REMOVE(&out, x, out_link);
                        x->resume(x->resume_arg);
                }
                if (stop)
                        return NULL;
        }
}

int hub_waits_start(struct hub *h, struct hub_waits **ret)
{
        struct hub_waits *w = calloc(1, sizeof(*w));
        const struct config_hub *ch = &h->cfg->hub;

        if (!w)
                return -ENOMEM;
        w->h = h;
        pthread_mutex_init(&w->lock, NULL);
        TAILQ_INIT(&w->list);
        w->max = (unsigned)ch->max_connections;
        w->max_per_token = (unsigned)ch->max_waits_per_token;
        w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->efd < 0) {
                free(w);
                return -errno;
        }
        w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        watch_dir(w, HUB_WAIT_ON_HANDOFF, h->handoff_fd, IN_MOVED_FROM | IN_DELETE);
        watch_dir(w, HUB_WAIT_ON_CANCEL, h->cancel_fd, IN_MOVED_TO);
        /* an A2A task's state: where its item went, and what was written
         * beside it (outcome, result, reason: each renamed into place) */
        watch_dir(w, HUB_WAIT_ON_CLAIMED, h->claimed_fd,
                  IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE);
        watch_spool(w, HUB_WAIT_ON_ARCHIVE, "archive", IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE);
        watch_spool(w, HUB_WAIT_ON_REJECTED, "rejected", IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE);
        if (w->ifd >= 0 && w->wd[HUB_WAIT_ON_HANDOFF] < 0)
                hub_log("warning: no inotify watch on handoff/ (%s): ?wait=claimed looks "
                        "again every %d ms", strerror(errno), HUB_WAIT_TICK_USEC / 1000);
        if (pthread_create(&w->thread, NULL, watcher, w)) {
                closep(&w->ifd);
                close(w->efd);
                free(w);
                return -EAGAIN;
        }
        *ret = w;
        return 0;
}

void hub_waits_stop(struct hub_waits *w)
{
        uint64_t one = 1;

        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stopping = true;
        pthread_mutex_unlock(&w->lock);
        (void)!write(w->efd, &one, sizeof(one));
        pthread_join(w->thread, NULL);
}

void hub_waits_free(struct hub_waits *w)
{
        if (!w)
                return;
        closep(&w->ifd);
        close(w->efd);
        pthread_mutex_destroy(&w->lock);
        free(w);
}

/* Is there room for x, under w's lock: not stopping, within the bound in
 * all and of x's token? */
static bool room_locked(const struct hub_waits *w, const struct hub_wait *x)
{
        const struct hub_wait *y;
        unsigned mine = 0;

        TAILQ_FOREACH(y, &w->list, link)
                mine += !strcmp(y->agent, x->agent);
        return !w->stopping && w->n < w->max && mine < w->max_per_token;
}

int hub_waits_add(struct hub_waits *w, struct hub_wait *x, void (*suspend)(void *),
                  void (*resume)(void *), void *arg)
{
        uint64_t one = 1;

        if (!w)
                return -EBUSY;
        pthread_mutex_lock(&w->lock);
        if (!room_locked(w, x)) {
                pthread_mutex_unlock(&w->lock);
                return -EBUSY;
        }
        /* Suspended before the watcher can see it: a resume that came
         * first would be lost, and the connection with it. */
        suspend(arg);
        x->resume = resume;
        x->resume_arg = arg;
        x->fresh = true;        /* the watcher's first look, after its watch is up */
        x->ready = false;
        x->armed = true;
        if (!watched(w, x))
                x->tick = HUB_WAIT_TICK_USEC;
        x->next_look = 0;
        TAILQ_INSERT_TAIL(&w->list, x, link);
        w->n++;
        pthread_mutex_unlock(&w->lock);
        (void)!write(w->efd, &one, sizeof(one));
        return 0;
}

int hub_waits_hold(struct hub_waits *w, struct hub_wait *x)
{
        if (!w || !x->ops->stream)
                return -EBUSY;
        pthread_mutex_lock(&w->lock);
        if (!room_locked(w, x)) {
                pthread_mutex_unlock(&w->lock);
                return -EBUSY;
        }
        x->armed = true;
        x->parked = false;      /* its writer parks it (hub_waits_park()) */
        x->fresh = false;
        x->ready = false;
        if (!watched(w, x))
                x->tick = HUB_WAIT_TICK_USEC;
        x->next_look = 0;
        TAILQ_INSERT_TAIL(&w->list, x, link);
        w->n++;
        pthread_mutex_unlock(&w->lock);
        return 0;
}

int hub_waits_park(struct hub_waits *w, struct hub_wait *x, void (*suspend)(void *),
                   void (*resume)(void *), void *arg)
{
        uint64_t one = 1;

        if (!w)
                return -ESHUTDOWN;
        pthread_mutex_lock(&w->lock);
        if (w->stopping || !x->armed) {
                pthread_mutex_unlock(&w->lock);
                return -ESHUTDOWN;
        }
        /* as in hub_waits_add(): suspended before the watcher may resume */
        suspend(arg);
        x->resume = resume;
        x->resume_arg = arg;
        x->parked = true;
        /* What changed while it was written is looked at now. */
        x->fresh = true;
        x->ready = false;
        pthread_mutex_unlock(&w->lock);
        (void)!write(w->efd, &one, sizeof(one));
        return 0;
}

void hub_waits_forget(struct hub_waits *w, struct hub_wait *x)
{
        if (!w || !x)
                return;
        pthread_mutex_lock(&w->lock);
        if (x->armed) {
                TAILQ_REMOVE(&w->list, x, link);
                x->armed = false;
                w->n--;
        }
        pthread_mutex_unlock(&w->lock);
}

unsigned hub_waits_count(struct hub_waits *w)
{
        unsigned n;

        if (!w)
                return 0;
        pthread_mutex_lock(&w->lock);
        n = w->n;
        pthread_mutex_unlock(&w->lock);
        return n;
}
