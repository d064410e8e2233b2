/* The loop; see daemon.h.  inotify is a hint, never the truth: watch
 * first, then scan; rescan on IN_Q_OVERFLOW and on a timer. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control.h"
#include "daemon.h"
#include "files.h"
#include "intake.h"
#include "lifecycle.h"
#include "log.h"
#include "notify.h"
#include "relay.h"
#include "slice.h"

#define CHUNK 256               /* names decided per loop turn, at most
                                 * INTAKE_BATCH_MAX_USEC of deciding */
#define PENDING_MAX (2 * CHUNK) /* then inotify is read no further: its
                                 * events wait in the kernel's queue */
#define REWATCH_MAX 10          /* per minute, then give up: never spin */
#define STATUS_COALESCE_MS 1000 /* STATUS= at most once a second */
#define READY_WAIT_USEC 10000000 /* READY=1 at most this long after the
                                 * first scan for the first sweep */

static int rewatch(struct daemon *d);
static void stop(struct daemon *d, int code);
static void on_idle(uv_idle_t *h);
static void on_retry(uv_timer_t *t);
static void on_inotify(uv_poll_t *h, int status, int events);

static void status_text(struct daemon *d, char *buf, size_t n)
{
        const struct spool_stats *s = &d->sp->st;
        uint64_t rej = 0;

        for (int i = 0; i < _HD_R_MAX; i++)
                rej += s->rejected[i];
        snprintf(buf, n, "claimed %llu, consumed %llu, expired %llu, rejected %llu, pending %zu%s",
                 (unsigned long long)s->claimed, (unsigned long long)s->consumed,
                 (unsigned long long)s->expired, (unsigned long long)rej,
                 json_object_size(d->pending), s->watch_ok ? "" : ", watch lost");
}

static void status_notify(struct daemon *d)
{
        status_text(d, d->status_sent, sizeof(d->status_sent));
        (void)notify_sendf("STATUS=%s", d->status_sent);
}

static void on_status_timer(uv_timer_t *t)
{
        status_notify(t->data);
}

/* STATUS= follows the counts, at most once a second, and only when they
 * changed: an idle daemon is not woken for it (this check runs only when
 * the loop woke up for something else). */
static void on_status_check(uv_check_t *h)
{
        struct daemon *d = h->data;
        char now[sizeof(d->status_sent)];

        if (uv_is_active((uv_handle_t *)&d->t_status))
                return;
        status_text(d, now, sizeof(now));
        if (strcmp(now, d->status_sent) != 0)
                uv_timer_start(&d->t_status, on_status_timer, STATUS_COALESCE_MS, 0);
}

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
        d->sp->st.watch_ok = true;
        return 0;
}

/* Watch the handoffs/ directories we hold open, not their paths: a path
 * may have been swapped for a link since we opened it.  A watch that
 * fails is reported and left out (the sweep still notices consumed
 * bootstraps); it never stops the others. */
static void watch_agents(struct daemon *d)
{
        char path[64];

        for (size_t i = 0; i < d->sp->n_agents; i++) {
                struct agent_rt *a = &d->sp->agents[i];
                snprintf(path, sizeof(path), "/proc/self/fd/%d", a->handoffs_fd);
                a->wd = inotify_add_watch(d->ifd, path,
                                          IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR |
                                          IN_EXCL_UNLINK);
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

        if (fstat(d->sp->fd[SD_HANDOFF], &a) < 0 || a.st_nlink == 0)
                return true;
        if (fstatat(d->sp->root_fd, "handoff", &b, AT_SYMLINK_NOFOLLOW) < 0)
                return true;
        return a.st_ino != b.st_ino || a.st_dev != b.st_dev;
}

static void queue_name(struct daemon *d, const char *name)
{
        json_object_set_new_nocheck(d->pending, name, json_null());
        if (!uv_is_active((uv_handle_t *)&d->idle) && !d->stopping)
                uv_idle_start(&d->idle, on_idle);
}

/* A rescan reads handoff/ as the loop goes, a chunk of names a turn
 * (scan_more), so a backlog of any size costs a chunk of memory.  Asked
 * again while one runs, it starts over from the top: what arrived before
 * the request is then seen, what was decided meanwhile is gone (IO_GONE)
 * or left (foreign_fresh) when seen again. */
int daemon_rescan(struct daemon *d, const char *why)
{
        d->sp->st.rescans++;
        /* Opened again, not rewound: handoff/ may be a new directory. */
        if (d->scan)
                closedir(d->scan);
        d->scan = opendir_at(d->sp->fd[SD_HANDOFF]);
        if (!d->scan)
                return spool_error(d->sp, -errno, "Cannot list handoff/ (%s)", why);
        log_debug("Rescan (%s): %zu name(s) pending", why, json_object_size(d->pending));
        if (!d->stopping)
                uv_idle_start(&d->idle, on_idle);
        return 0;
}

/* The next names of the running rescan, while the pending set has room. */
static void scan_more(struct daemon *d)
{
        struct dirent *de;

        while (d->scan && json_object_size(d->pending) < CHUNK) {
                errno = 0;
                de = readdir(d->scan);
                if (!de) {
                        if (errno)
                                spool_error(d->sp, -errno, "Cannot list handoff/");
                        closedir(d->scan);
                        d->scan = NULL;
                        break;
                }
                if (de->d_name[0] != '.')
                        json_object_set_new_nocheck(d->pending, de->d_name, json_null());
        }
}

/* Read inotify again once the pending set has room. */
static void inotify_resume(struct daemon *d)
{
        if (!d->ipoll_paused || json_object_size(d->pending) >= CHUNK || d->stopping)
                return;
        if (uv_poll_start(&d->ipoll, UV_READABLE, on_inotify) == 0)
                d->ipoll_paused = false;
}

/* Decide about up to max pending names. */
static void drain(struct daemon *d, size_t max)
{
        char *names[CHUNK];
        int outcomes[CHUNK];
        const char *k;
        json_t *v;
        size_t n = 0;
        int64_t now = hd_now_usec();

        json_object_foreach(d->pending, k, v) {
                if (n == max || n == CHUNK)
                        break;
                char *s = strdup(k);
                if (!s)
                        break;  /* out of memory: the rest stays pending */
                names[n++] = s;
        }
        for (size_t i = 0; i < n; i++)
                json_object_del(d->pending, names[i]);
        intake_batch(d->sp, names, n, now, outcomes);
        for (size_t i = 0; i < n; i++) {
                if (outcomes[i] == IO_SKIPPED) {
                        queue_name(d, names[i]);        /* the batch's time was up */
                } else if (outcomes[i] < 0) {
                        json_object_set_new_nocheck(d->retry, names[i], json_null());
                } else if (outcomes[i] == IO_DEFERRED || outcomes[i] == IO_BUSY) {
                        /* Looked at again by the retry timer. */
                        json_object_set_new_nocheck(d->retry, names[i], json_null());
                }
                free(names[i]);
        }
        if (json_object_size(d->retry) > 0 && !uv_is_active((uv_handle_t *)&d->t_retry)) {
                if (d->retry_backoff_ms == 0)
                        d->retry_backoff_ms = 1000;
                uv_timer_start(&d->t_retry, on_retry, d->retry_backoff_ms, 0);
        }
        slice_arm(d);
}

static void warn_config(void *userdata, const char *msg)
{
        (void)userdata;
        log_warning("%s", msg);
}

static void mark_ready(struct daemon *d)
{
        config_warnings(d->cfg, warn_config, NULL);
        d->ready = true;
        log_info("handoffd %s ready: spool %s, %zu agent(s), fsync %s", HD_VERSION_STRING,
                 d->cfg->spool_dir, d->cfg->n_agents, d->cfg->fsync ? "on" : "off");
        (void)notify_send("READY=1");
        status_notify(d);
}

/* READY=1 once the first scan is drained and recovery (the first sweep)
 * is done, or once that has run READY_WAIT_USEC: a large spool does not
 * keep the daemon from serving (the sweep goes on meanwhile). */
void daemon_maybe_ready(struct daemon *d)
{
        if (d->ready || d->stopping || json_object_size(d->pending) > 0 || d->scan)
                return;
        if (d->sp->sweep.dir && d->sp->sweep.at_start &&
            uv_hrtime() / 1000 - d->started_usec < READY_WAIT_USEC)
                return;
        mark_ready(d);
}

static void on_idle(uv_idle_t *h)
{
        struct daemon *d = h->data;

        scan_more(d);
        drain(d, CHUNK);
        inotify_resume(d);
        if ((json_object_size(d->pending) == 0 && !d->scan) || d->stopping) {
                uv_idle_stop(h);
                daemon_maybe_ready(d);
        }
}

static void on_retry(uv_timer_t *t)
{
        struct daemon *d = t->data;
        const char *k;
        json_t *v;
        size_t had = json_object_size(d->retry);
        uint64_t errors_before = d->sp->st.errors;

        json_object_foreach(d->retry, k, v)
                json_object_set_new_nocheck(d->pending, k, json_null());
        json_object_clear(d->retry);
        /* One batch here; the idle handle drains the rest, a turn at a
         * time, so the loop keeps answering. */
        drain(d, CHUNK);
        if (json_object_size(d->pending) > 0 && !d->stopping)
                uv_idle_start(&d->idle, on_idle);
        /* Back off while the fault lasts (ENOSPC, EIO, EMFILE): no busy loop. */
        if (d->sp->st.errors > errors_before && had > 0) {
                d->retry_backoff_ms = d->retry_backoff_ms ? d->retry_backoff_ms * 2 : 1000;
                if (d->retry_backoff_ms > 60000)
                        d->retry_backoff_ms = 60000;
        } else {
                d->retry_backoff_ms = 1000;
        }
        if (json_object_size(d->retry) > 0) {
                uv_timer_stop(&d->t_retry);
                uv_timer_start(&d->t_retry, on_retry, d->retry_backoff_ms, 0);
        }
}

static void on_rescan(uv_timer_t *t)
{
        struct daemon *d = t->data;

        if (watch_lost(d) && rewatch(d) < 0) {
                stop(d, 1);
                return;
        }
        daemon_rescan(d, "periodic");
}


static void on_watchdog(uv_timer_t *t)
{
        (void)t;
        (void)notify_send("WATCHDOG=1");
}

static int rewatch(struct daemon *d)
{
        int64_t now = hd_now_usec();
        int fd, r;

        d->sp->st.watch_ok = false;
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
        bool created = mkdirat(d->sp->root_fd, "handoff", 0700) == 0;
        if (!created && errno != EEXIST)
                return log_error_errno(errno, "Cannot re-create handoff/");
        fd = openat(d->sp->root_fd, "handoff", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return log_error_errno(errno, "Cannot open handoff/");
        /* The mode spool_open() gives it, whatever the umask. */
        if (created && fchmod(fd, 03770) < 0)
                log_warning_errno(errno, "Cannot set the mode of handoff/");
        close(d->sp->fd[SD_HANDOFF]);
        d->sp->fd[SD_HANDOFF] = fd;
        r = watch_handoff(d);
        if (r < 0)
                return log_error_errno(r, "Cannot watch handoff/");
        return daemon_rescan(d, "re-watch");
}

static void stop(struct daemon *d, int code)
{
        if (d->stopping)
                return;
        d->stopping = true;
        d->exit_code = code;
        (void)notify_send("STOPPING=1");
        uv_stop(&d->loop);
}

static void on_inotify(uv_poll_t *h, int status, int events)
{
        struct daemon *d = h->data;
        char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool overflow = false, lost = false, later = false;
        int64_t now = hd_now_usec();
        uint64_t t0 = uv_hrtime();

        (void)events;
        if (status < 0) {
                log_error("inotify poll failed: %s", uv_strerror(status));
                stop(d, 1);
                return;
        }
        for (;;) {
                /* Enough to decide for now: the rest waits in the
                 * kernel (an overflow there is a rescan), read again
                 * once the set has room (inotify_resume). */
                if (json_object_size(d->pending) >= PENDING_MAX) {
                        uv_poll_stop(&d->ipoll);
                        d->ipoll_paused = true;
                        break;
                }
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
                                        queue_name(d, ev->name);
                                continue;
                        }
                        for (size_t i = 0; i < d->sp->n_agents; i++) {
                                struct agent_rt *a = &d->sp->agents[i];
                                if (ev->wd != a->wd || ev->len == 0)
                                        continue;
                                if (!(ev->mask & (IN_DELETE | IN_MOVED_FROM)))
                                        continue;
                                /* Past a slice's time: the sweep looks. */
                                if (uv_hrtime() - t0 > SLICE_USEC * 1000ULL) {
                                        later = true;
                                        continue;
                                }
                                int r = lifecycle_bootstrap_gone(d->sp, a, ev->name, now);
                                if (r < 0) {
                                        /* The sweep looks at it again. */
                                        char q[300];
                                        spool_error(d->sp, r, "Cannot finish the item of %s",
                                                    log_quote(ev->name, q, sizeof(q)));
                                }
                        }
                }
        }
        if (lost) {
                if (rewatch(d) < 0) {
                        stop(d, 1);
                        return;
                }
        }
        if (later)
                slice_sweep(d, false);
        if (overflow) {
                d->sp->st.overflows++;
                log_warning("inotify queue overflowed: rescanning");
                daemon_rescan(d, "overflow");
                slice_sweep(d, false);
        }
        slice_arm(d);
}

static void on_signal(uv_signal_t *h, int sig)
{
        struct daemon *d = h->data;
        struct config *nc = NULL;
        char *err = NULL;
        int r;

        if (sig == SIGTERM || sig == SIGINT) {
                log_info("Received %s, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
                stop(d, 0);
                return;
        }
        /* SIGHUP: re-read config and keys; a bad new config keeps the old. */
        (void)notify_sendf("RELOADING=1\nMONOTONIC_USEC=%llu",
                           (unsigned long long)(uv_hrtime() / 1000));
        r = config_load(d->config_path, true, &nc, &err);
        if (r < 0) {
                log_error("Reload failed, keeping the running configuration: %s",
                          err ? err : strerror(-r));
                free(err);
        } else if (strcmp(nc->spool_dir, d->cfg->spool_dir)) {
                log_error("Reload refused: [spool] dir changed (%s -> %s); restart to move the spool",
                          d->cfg->spool_dir, nc->spool_dir);
                config_free(nc);
        } else {
                for (size_t i = 0; i < d->sp->n_agents; i++)
                        if (d->sp->agents[i].wd >= 0)
                                inotify_rm_watch(d->ifd, d->sp->agents[i].wd);
                r = spool_set_config(d->sp, nc);
                if (r < 0) {
                        log_error_errno(r, "Reload failed, keeping the running configuration");
                        config_free(nc);
                        watch_agents(d);
                } else {
                        config_free(d->cfg);
                        d->cfg = nc;
                        watch_agents(d);
                        control_set_config(d->ctl, nc);
                        json_object_clear(d->sp->foreign);
                        log_info("Reloaded %s", d->config_path);
                        daemon_rescan(d, "reload");
                }
        }
        (void)notify_send("READY=1");
        status_notify(d);
}

static void close_cb(uv_handle_t *h, void *arg)
{
        (void)arg;
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

/* Takes cfg (a reload replaces it). */
int daemon_run(const char *config_path, struct config *cfg)
{
        struct daemon d = { 0 };
        uint64_t wd_usec = 0;
        int r;

        d.config_path = config_path;
        d.cfg = cfg;
        d.ifd = -1;
        d.pending = json_object();
        d.retry = json_object();
        d.started_usec = uv_hrtime() / 1000;
        r = uv_loop_init(&d.loop);
        if (r < 0)
                return log_error_errno(r, "Cannot create the event loop");

        r = spool_open(cfg, &d.sp);
        if (r < 0)
                goto out;
        d.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (d.ifd < 0) {
                r = log_error_errno(errno, "Cannot create an inotify instance");
                goto out;
        }
        /* Watch first, then scan: a file arriving in between is seen twice
         * at worst, never missed. */
        r = watch_handoff(&d);
        if (r < 0) {
                log_error_errno(r, "Cannot watch %s/handoff", cfg->spool_dir);
                goto out;
        }
        watch_agents(&d);

        /* uv_idle_init and uv_timer_init only fill in the handle: they
         * return 0.  A poll and a signal handle need the kernel. */
        (void)uv_idle_init(&d.loop, &d.idle);
        (void)uv_idle_init(&d.loop, &d.sweep_idle);
        (void)uv_timer_init(&d.loop, &d.t_rescan);
        (void)uv_timer_init(&d.loop, &d.t_deadline);
        (void)uv_timer_init(&d.loop, &d.t_retry);
        (void)uv_timer_init(&d.loop, &d.t_watchdog);
        (void)uv_timer_init(&d.loop, &d.t_status);
        r = uv_poll_init(&d.loop, &d.ipoll, d.ifd);
        if (r == 0)
                r = uv_signal_init(&d.loop, &d.sig_hup);
        if (r == 0)
                r = uv_signal_init(&d.loop, &d.sig_term);
        if (r == 0)
                r = uv_signal_init(&d.loop, &d.sig_int);
        if (r < 0) {
                log_error_errno(r, "Cannot set up the event loop");
                goto out;
        }
        d.ipoll.data = d.idle.data = d.t_rescan.data = d.t_deadline.data = &d;
        d.t_retry.data = d.t_watchdog.data = d.t_status.data = d.sweep_idle.data = &d;
        d.sig_hup.data = d.sig_term.data = d.sig_int.data = &d;

        r = control_open(&d.loop, cfg, d.sp, &d.ctl);
        if (r < 0)
                goto out;
        /* Before the first scan: outbox/ is indexed, then filled. */
        r = relay_start(&d.loop, d.sp, &d.relay);
        if (r < 0)
                goto out;

        r = uv_poll_start(&d.ipoll, UV_READABLE, on_inotify);
        if (r == 0)
                r = uv_signal_start(&d.sig_hup, on_signal, SIGHUP);
        if (r == 0)
                r = uv_signal_start(&d.sig_term, on_signal, SIGTERM);
        if (r == 0)
                r = uv_signal_start(&d.sig_int, on_signal, SIGINT);
        if (r < 0) {
                log_error_errno(r, "Cannot watch for inotify events and signals");
                goto out;
        }
        uv_timer_start(&d.t_rescan, on_rescan, (uint64_t)cfg->rescan_interval * 1000,
                       (uint64_t)cfg->rescan_interval * 1000);
        /* only with a service manager to tell: no check, no wake-up */
        if (notify_enabled()) {
                (void)uv_check_init(&d.loop, &d.status_check);  /* fills in the handle */
                d.status_check.data = &d;
                (void)uv_check_start(&d.status_check, on_status_check); /* fails only without a callback */
                uv_unref((uv_handle_t *)&d.status_check);
        }
        if (notify_watchdog_usec(&wd_usec) > 0)
                uv_timer_start(&d.t_watchdog, on_watchdog, 0, wd_usec / 2000 ? wd_usec / 2000 : 1);

        /* Recovery and the first scan, a slice of each a turn; READY=1
         * when the scan is drained (in the loop, so a SIGTERM during a
         * long first scan is heard), whatever recovery has left to do. */
        slice_sweep(&d, true);
        r = daemon_rescan(&d, "start");
        if (r < 0)
                goto out;
        daemon_maybe_ready(&d);
        slice_arm(&d);

        uv_run(&d.loop, UV_RUN_DEFAULT);
        r = d.exit_code ? -EIO : 0;
        log_info("Stopped");
out:
        relay_stop(d.relay);
        control_close(d.ctl);
        uv_walk(&d.loop, close_cb, NULL);
        uv_run(&d.loop, UV_RUN_DEFAULT);
        uv_loop_close(&d.loop);
        relay_free(d.relay);
        if (d.ifd >= 0)
                close(d.ifd);
        spool_close(d.sp);
        config_free(d.cfg);     /* ours: a reload may have replaced it */
        if (d.scan)
                closedir(d.scan);
        json_decref(d.pending);
        json_decref(d.retry);
        return r;
}
