/* The watch and the intake's side of the loop.  inotify is a hint, never
 * the truth: watch first, then scan; rescan on IN_Q_OVERFLOW and on a
 * timer.  The names to decide wait in d->pending, a queue per owner of
 * the file (pending.c), and are decided a chunk a loop turn, the owners
 * in turns (intake_batch()), so the loop keeps answering and no sender's
 * flood holds up another's handoffs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents.h"
#include "decide.h"
#include "files.h"
#include "intake.h"
#include "layout.h"
#include "log.h"
#include "completion.h"
#include "pending.h"
#include "service.h"
#include "slice.h"
#include "watch.h"

#define CHUNK 256               /* names decided per loop turn, at most
                                 * INTAKE_BATCH_MAX_USEC of deciding; and
                                 * names a rescan reads per turn */
/* A rescan for the names left out (an owner's queue was full) once this
 * few are queued: each pass reads the whole directory, so not at once. */
#define RESCAN_LEFT_OUT_BELOW (PENDING_OWNER_MAX / 2)
/* Descriptors left to the rest of the daemon before names may hold any. */
#define WATCH_FDS_OWN 256
#define REWATCH_MAX 10          /* per minute, then give up: never spin */

static int rewatch(struct daemon *d);
static void on_idle(uv_idle_t *h);
static void on_retry(uv_timer_t *t);
static void on_inotify(uv_poll_t *h, int status, int events);

static int watch_handoff(struct daemon *d)
{
        char path[PATH_MAX];

        if (xsnprintf(path, sizeof(path), "%s/handoff", d->cfg->spool_dir) < 0)
                return -ENAMETOOLONG;
        d->wd_handoff = inotify_add_watch(d->ifd, path,
                                          IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF |
                                          IN_MOVE_SELF | IN_ATTRIB | IN_ONLYDIR |
                                          IN_DONT_FOLLOW | IN_EXCL_UNLINK);
        if (d->wd_handoff < 0)
                return -errno;
        d->p.sp->st.watch_ok = true;
        return 0;
}

/* Watch the handoffs/ directories we hold open, not their paths: a path
 * may have been swapped for a link since we opened it.  A watch that
 * fails is reported and left out (the sweep still notices consumed
 * bootstraps); it never stops the others. */
void watch_agents(struct daemon *d)
{
        char path[64];

        for (size_t i = 0; i < d->p.sp->n_agents; i++) {
                struct agent_rt *a = &d->p.sp->agents[i];
                snprintf(path, sizeof(path), "/proc/self/fd/%d", a->handoffs_fd);
                a->wd = inotify_add_watch(d->ifd, path,
                                          IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                          IN_ONLYDIR | IN_EXCL_UNLINK);
                if (a->wd < 0)
                        log_warning_errno(errno, "Cannot watch '%s/handoffs' of agent %s; "
                                          "the sweep looks at it instead",
                                          a->cfg->state_dir, a->cfg->name);
        }
}

/* Is handoff/ still the directory we watch?  IN_DELETE_SELF only comes
 * when the inode goes, and our own fd keeps it: a removed directory shows
 * as a link count of 0 (IN_ATTRIB tells us to look), one moved away as a
 * different inode under the name. */
static bool watch_lost(struct daemon *d)
{
        struct stat a, b;

        if (fstat(d->p.sp->fd[SD_HANDOFF], &a) < 0 || a.st_nlink == 0)
                return true;
        if (fstatat(d->p.sp->root_fd, "handoff", &b, AT_SYMLINK_NOFOLLOW) < 0)
                return true;
        return a.st_ino != b.st_ino || a.st_dev != b.st_dev;
}

/* handoff/name in its owner's queue.  Its owner is read here, before
 * anything of it is: the turn it waits for is its owner's, whatever it
 * holds.  While there is room (pending_may_hold()) that look is the
 * decision's open, kept with the name: opened as decide.c opens it, one
 * fstat for the owner and the decision.  One that cannot be looked at
 * goes in a queue of its own (the decision will say why); one gone needs
 * no decision.  One queued already stays as it is, unless an event says
 * it changed (changed): then its decision reads what it holds by then. */
static void pend(struct daemon *d, const char *name, bool changed)
{
        char sender[PENDING_SENDER_MAX + 1];
        struct pending_look look = { .fd = -1 };
        int hfd = d->p.sp->fd[SD_HANDOFF];
        struct stat st;
        hd_verdict v;

        if (changed ? pending_again(d->pending, name) : pending_queued(d->pending, name))
                return;
        if (pending_may_hold(d->pending) && decide_opens(&d->p, name)) {
                int r = hd_open_at(hfd, name, &look.fd, &v);
                if (r == -ENOENT)
                        return;
                if (r == 0 && fstat(look.fd, &look.st) == 0) {
                        pending_sender_fd(d->pending, look.fd, look.st.st_uid, sender);
                        (void)pending_add_look(d->pending, name, look.st.st_uid, sender, &look);
                        return;
                }
                /* Not opened (a symlink, unreadable...): as without room. */
                if (look.fd >= 0)
                        close(look.fd);
        }
        if (fstatat(hfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        return;
                st.st_uid = (uid_t)-1;
        }
        /* the hub's files: the token's turn (pending.c) */
        pending_sender(d->pending, hfd, name, st.st_uid, sender);
        /* Left out (its owner's queue is full): a rescan brings it. */
        (void)pending_add(d->pending, name, st.st_uid, sender);
}

/* written: the event is IN_CLOSE_WRITE, the same file written in place
 * (the relay's own, closed after the flush synced it at fsync = yes):
 * the look it is queued with stays, its stat read anew. */
static void queue_name(struct daemon *d, const char *name, bool written)
{
        if (!(written && pending_rewritten(d->pending, name)))
                pend(d, name, true);
        if (!uv_is_active((uv_handle_t *)&d->idle) && !d->stopping)
                uv_idle_start(&d->idle, on_idle);
}

/* A rescan reads handoff/ as the loop goes, a chunk of names a turn
 * (scan_more), each queued for its owner; a backlog of any size costs at
 * most PENDING_OWNER_MAX names per owner.  Asked again while one runs,
 * it starts over from the top: what arrived before the request is then
 * seen, what was decided meanwhile is gone (IO_GONE) or left
 * (foreign_fresh) when seen again. */
int watch_rescan(struct daemon *d, const char *why)
{
        d->p.sp->st.rescans++;
        pending_rescan(d->pending);
        pending_hub_user(d->pending, d->cfg->hub.state_dir);
        /* Opened again, not rewound: handoff/ may be a new directory. */
        if (d->scan)
                closedir(d->scan);
        d->scan = opendir_at(d->p.sp->fd[SD_HANDOFF]);
        if (!d->scan)
                return spool_error(d->p.sp, -errno, "Cannot list handoff/ (%s)", why);
        log_debug("Rescan (%s): %zu name(s) pending", why, pending_size(d->pending));
        if (!d->stopping)
                uv_idle_start(&d->idle, on_idle);
        return 0;
}

/* The next names of the running rescan, a chunk a turn: all of them
 * (each owner's queue takes what it has room for), so a name of one
 * owner is never read only after every name of another. */
static void scan_more(struct daemon *d)
{
        struct dirent *de;

        for (size_t k = 0; d->scan && k < CHUNK; k++) {
                errno = 0;
                de = readdir(d->scan);
                if (!de) {
                        if (errno)
                                spool_error(d->p.sp, -errno, "Cannot list handoff/");
                        closedir(d->scan);
                        d->scan = NULL;
                        break;
                }
                if (de->d_name[0] != '.')
                        pend(d, de->d_name, false);
        }
}

/* Names left out while their owner's queue was full: once it has room
 * again, another pass over handoff/ finds them. */
static void rescan_left_out(struct daemon *d)
{
        if (!d->scan && pending_left_out(d->pending) &&
            pending_size(d->pending) < RESCAN_LEFT_OUT_BELOW && !d->stopping)
                watch_rescan(d, "names left out");
}

/* Decide about up to max pending names, the owners in turns. */
static void drain(struct daemon *d, size_t max)
{
        struct pending_name *taken[CHUNK];
        struct pending_look *looks[CHUNK];
        char *names[CHUNK];
        int outcomes[CHUNK];
        size_t n;
        int64_t now = hd_now_usec();

        n = pending_take(d->pending, taken, max < CHUNK ? max : CHUNK);
        for (size_t i = 0; i < n; i++) {
                names[i] = taken[i]->name;
                looks[i] = &taken[i]->look;
        }
        intake_batch_looks(&d->p, names, looks, n, now, outcomes);
        /* Not looked at (the batch's time was up): first again, last one
         * first, so the next batch begins where this one stopped. */
        for (size_t i = n; i-- > 0;)
                if (outcomes[i] == IO_SKIPPED)
                        pending_put_back(d->pending, TAKE_PTR(taken[i]));
        for (size_t i = 0; i < n; i++) {
                if (!taken[i])
                        continue;
                /* A system error, or deferred or busy: looked at again by
                 * the retry timer. */
                if (outcomes[i] < 0 || outcomes[i] == IO_DEFERRED || outcomes[i] == IO_BUSY)
                        (void)dict_put(&d->retry, names[i], NULL);
                pending_done(d->pending, taken[i]);
        }
        if (dict_count(&d->retry) > 0 && !uv_is_active((uv_handle_t *)&d->t_retry)) {
                if (d->retry_backoff_ms == 0)
                        d->retry_backoff_ms = 1000;
                uv_timer_start(&d->t_retry, on_retry, d->retry_backoff_ms, 0);
        }
        slice_arm(d);
}

static void on_idle(uv_idle_t *h)
{
        struct daemon *d = h->data;

        scan_more(d);
        drain(d, CHUNK);
        rescan_left_out(d);
        if ((pending_size(d->pending) == 0 && !d->scan) || d->stopping) {
                uv_idle_stop(h);
                service_maybe_ready(d);
        }
}

static void on_retry(uv_timer_t *t)
{
        struct daemon *d = t->data;
        size_t had = dict_count(&d->retry);
        uint64_t errors_before = d->p.sp->st.errors;

        for (void *e = dict_first(&d->retry); e; e = dict_next(e))
                pend(d, dict_key(e), false);
        dict_clear(&d->retry);
        /* One batch here; the idle handle drains the rest, a turn at a
         * time, so the loop keeps answering. */
        drain(d, CHUNK);
        if (pending_size(d->pending) > 0 && !d->stopping)
                uv_idle_start(&d->idle, on_idle);
        /* Back off while the fault lasts (ENOSPC, EIO, EMFILE): no busy loop. */
        if (d->p.sp->st.errors > errors_before && had > 0) {
                d->retry_backoff_ms = d->retry_backoff_ms ? d->retry_backoff_ms * 2 : 1000;
                if (d->retry_backoff_ms > 60000)
                        d->retry_backoff_ms = 60000;
        } else {
                d->retry_backoff_ms = 1000;
        }
        if (dict_count(&d->retry) > 0) {
                uv_timer_stop(&d->t_retry);
                uv_timer_start(&d->t_retry, on_retry, d->retry_backoff_ms, 0);
        }
}

static void on_rescan(uv_timer_t *t)
{
        struct daemon *d = t->data;

        if (watch_lost(d) && rewatch(d) < 0) {
                service_stop(d, 1);
                return;
        }
        watch_rescan(d, "periodic");
}

static int rewatch(struct daemon *d)
{
        int64_t now = hd_now_usec();
        int fd, r;

        d->p.sp->st.watch_ok = false;
        if (now - d->rewatch_window_start > 60 * 1000000LL) {
                d->rewatch_window_start = now;
                d->rewatch_count = 0;
        }
        if (++d->rewatch_count > REWATCH_MAX)
                return log_error_errno(-ELOOP, "handoff/ keeps disappearing; giving up");
        log_warning("handoff/ disappeared; creating and watching it again");
        if (d->wd_handoff >= 0)
                inotify_rm_watch(d->ifd, d->wd_handoff);
        d->wd_handoff = -1;
        bool created = mkdirat(d->p.sp->root_fd, "handoff", 0700) == 0;
        if (!created && errno != EEXIST)
                return log_error_errno(errno, "Cannot re-create handoff/");
        fd = openat(d->p.sp->root_fd, "handoff", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return log_error_errno(errno, "Cannot open handoff/");
        /* The mode spool_open() gives it, whatever the umask. */
        if (created && fchmod(fd, 03770) < 0)
                log_warning_errno(errno, "Cannot set the mode of handoff/");
        close(d->p.sp->fd[SD_HANDOFF]);
        d->p.sp->fd[SD_HANDOFF] = fd;
        r = watch_handoff(d);
        if (r < 0)
                return log_error_errno(r, "Cannot watch handoff/");
        return watch_rescan(d, "re-watch");
}

static void on_inotify(uv_poll_t *h, int status, int events)
{
        struct daemon *d = h->data;
        char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool overflow = false, lost = false, later = false;
        uint64_t t0 = uv_hrtime();

        (void)events;
        if (status < 0) {
                log_error("inotify poll failed: %s", uv_strerror(status));
                service_stop(d, 1);
                return;
        }
        for (;;) {
                /* Read for at most a slice; the poll is level-triggered,
                 * so the rest comes at the next turn.  Never leave the
                 * queue unread for long: another sender's name would wait
                 * behind a flood in the kernel, and an overflow there
                 * costs a rescan. */
                if (uv_hrtime() - t0 > SLICE_USEC * 1000ULL)
                        break;
                ssize_t n = read(d->ifd, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                log_error_errno(errno, "Cannot read inotify events");
                        break;
                }
                if (n == 0)
                        break;
                /* Room for one more event was left: the queue was empty,
                 * and the poll tells when it is not (no read to EAGAIN). */
                bool drained = (size_t)n <= sizeof(buf) - sizeof(struct inotify_event) - NAME_MAX - 1;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;
                        p += sizeof(*ev) + ev->len;
                        if (ev->mask & IN_Q_OVERFLOW) {
                                overflow = true;
                                continue;
                        }
                        if (ev->wd == d->wd_handoff) {
                                if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))
                                        lost = true;
                                else if ((ev->mask & IN_ATTRIB) && ev->len == 0)
                                        lost = lost || watch_lost(d);
                                else if (ev->len > 0 && ev->name[0] && !(ev->mask & IN_ATTRIB))
                                        queue_name(d, ev->name, ev->mask == IN_CLOSE_WRITE);
                                else if (ev->len > 0 && ev->name[0])
                                        /* its mode or links changed: its
                                         * decision looks anew */
                                        (void)pending_again(d->pending, ev->name);
                                continue;
                        }
                        /* A bootstrap gone: its item is looked at in the
                         * idle turns, as handoff/ names are decided, not
                         * here (an archive and its syncs each).  A name
                         * arriving: an agent's result (completion.c),
                         * taken by the sweep once the slice is spent. */
                        for (size_t i = 0; i < d->p.sp->n_agents; i++) {
                                struct agent_rt *a = &d->p.sp->agents[i];
                                if (ev->wd != a->wd || ev->len == 0)
                                        continue;
                                if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
                                        slice_gone(d, ev->name);
                                        continue;
                                }
                                /* Our own bootstraps arrive here too (a
                                 * claim's publish): only a result's name
                                 * is one to take, or to leave to a sweep. */
                                if (!(ev->mask & IN_MOVED_TO) ||
                                    layout_classify(ev->name) != LK_RESULT)
                                        continue;
                                if (uv_hrtime() - t0 > SLICE_USEC * 1000ULL) {
                                        d->p.results->due = true;
                                        later = true;
                                        continue;
                                }
                                int r = completion_arrived(&d->p, a, ev->name, hd_now_usec());
                                if (r < 0) {
                                        char q[300];
                                        spool_error(d->p.sp, r, "Cannot take the result %s",
                                                    log_quote(ev->name, q, sizeof(q)));
                                }
                        }
                }
                if (drained)
                        break;
        }
        if (lost) {
                if (rewatch(d) < 0) {
                        service_stop(d, 1);
                        return;
                }
        }
        if (later)
                slice_sweep(d, false);
        if (overflow) {
                d->p.sp->st.overflows++;
                log_warning("inotify queue overflowed: rescanning");
                watch_rescan(d, "overflow");
                slice_sweep(d, false);
        }
        slice_arm(d);
}

int watch_open(struct daemon *d)
{
        struct rlimit rl;
        int r;

        /* Names queued with their file open: half of what the descriptor
         * limit leaves past the daemon's own (clients, the relay, syncs). */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 2 * WATCH_FDS_OWN)
                pending_hold_max(d->pending, rl.rlim_cur == RLIM_INFINITY ? PENDING_LOOKS_MAX :
                                 (size_t)(rl.rlim_cur - WATCH_FDS_OWN) / 2);

        d->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (d->ifd < 0)
                return log_error_errno(errno, "Cannot create an inotify instance");
        r = watch_handoff(d);
        if (r < 0)
                return log_error_errno(r, "Cannot watch %s/handoff", d->cfg->spool_dir);
        watch_agents(d);
        return 0;
}

void watch_agents_drop(struct daemon *d)
{
        for (size_t i = 0; i < d->p.sp->n_agents; i++)
                if (d->p.sp->agents[i].wd >= 0)
                        inotify_rm_watch(d->ifd, d->p.sp->agents[i].wd);
}

int watch_start(struct daemon *d)
{
        int r = uv_poll_start(&d->ipoll, UV_READABLE, on_inotify);

        if (r < 0)
                return r;
        uv_timer_start(&d->t_rescan, on_rescan, (uint64_t)d->cfg->rescan_interval * 1000,
                       (uint64_t)d->cfg->rescan_interval * 1000);
        return 0;
}
