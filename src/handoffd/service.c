/* What the service manager is told, through notify.c: READY=1 once the
 * start is done far enough, STATUS= following the counts (at most once a
 * second, and never waking an idle daemon for it), WATCHDOG=1, and
 * STOPPING=1 at the stop.  The metrics textfile follows the counts the
 * same way (metrics.c). */
#include <stdio.h>
#include <string.h>

#include "lifecycle.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "pending.h"
#include "service.h"

#define STATUS_COALESCE_MS 1000 /* STATUS= at most once a second */
#define READY_WAIT_USEC 10000000 /* READY=1 at most this long after the
                                 * first scan for the first sweep */

static void status_text(struct daemon *d, char *buf, size_t n)
{
        const struct spool_stats *s = &d->p.sp->st;
        uint64_t rej = 0;

        for (int i = 0; i < _HD_R_MAX; i++)
                rej += s->rejected[i];
        snprintf(buf, n, "claimed %llu, consumed %llu, expired %llu, rejected %llu, pending %zu%s",
                 (unsigned long long)s->claimed, (unsigned long long)s->consumed,
                 (unsigned long long)s->expired, (unsigned long long)rej,
                 pending_size(d->pending), s->watch_ok ? "" : ", watch lost");
}

void service_status(struct daemon *d)
{
        status_text(d, d->status_sent, sizeof(d->status_sent));
        (void)notify_sendf("STATUS=%s", d->status_sent);
}

static void on_status_timer(uv_timer_t *t)
{
        service_status(t->data);
}

/* A service manager to tell STATUS= (NOTIFY_SOCKET, read once). */
static bool status_on;

static void on_metrics_timer(uv_timer_t *t)
{
        struct daemon *d = t->data;
        int r = metrics_refresh(d->p.sp, hd_now_usec());

        /* said once, not once a second; the housekeeping run says it too */
        if (r < 0 && !d->metrics_failed)
                log_warning_errno(r, "Cannot write the metrics textfile %s",
                                  d->cfg->metrics_textfile);
        d->metrics_failed = r < 0;
}

/* STATUS= and the metrics textfile follow the counts, each at most once a
 * second, and only when they changed: an idle daemon is not woken for
 * them (this check runs only when the loop woke up for something else). */
static void on_status_check(uv_check_t *h)
{
        struct daemon *d = h->data;
        char now[sizeof(d->status_sent)];
        int64_t t, due;

        if (status_on && !uv_is_active((uv_handle_t *)&d->t_status)) {
                status_text(d, now, sizeof(now));
                if (strcmp(now, d->status_sent) != 0)
                        uv_timer_start(&d->t_status, on_status_timer, STATUS_COALESCE_MS, 0);
        }
        if (d->cfg->metrics_textfile && !uv_is_active((uv_handle_t *)&d->t_metrics)) {
                t = hd_now_usec();
                if (metrics_changed(d->p.sp, t, &due))
                        uv_timer_start(&d->t_metrics, on_metrics_timer,
                                       due > t ? (uint64_t)(due - t + 999) / 1000 : 0, 0);
        }
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
        /* an agent of the config may be out of service (agents.c) */
        log_info("handoffd %s ready: spool %s, %zu agent(s) served, %zu out of service, fsync %s",
                 HD_VERSION_STRING, d->cfg->spool_dir, d->p.sp->n_agents,
                 dict_count(&d->p.unserved), d->cfg->fsync ? "on" : "off");
        (void)notify_send("READY=1");
        service_status(d);
}

/* READY=1 once the first scan is drained and recovery (the first sweep)
 * is done, or once that has run READY_WAIT_USEC: a large spool does not
 * keep the daemon from serving (the sweep goes on meanwhile). */
void service_maybe_ready(struct daemon *d)
{
        if (d->ready || d->stopping || pending_size(d->pending) > 0 || d->scan)
                return;
        if (d->p.lc->sweep.dir && d->p.lc->sweep.at_start &&
            uv_hrtime() / 1000 - d->started_usec < READY_WAIT_USEC)
                return;
        mark_ready(d);
}

static void on_watchdog(uv_timer_t *t)
{
        (void)t;
        (void)notify_send("WATCHDOG=1");
}

void service_start(struct daemon *d)
{
        uint64_t wd_usec = 0;

        /* Looks after each wake-up, never wakes the loop itself; the
         * textfile may be set by a reload. */
        status_on = notify_enabled();
        (void)uv_timer_init(&d->loop, &d->t_metrics);          /* fills in the handle */
        d->t_metrics.data = d;
        (void)uv_check_init(&d->loop, &d->status_check);
        d->status_check.data = d;
        (void)uv_check_start(&d->status_check, on_status_check); /* fails only without a callback */
        uv_unref((uv_handle_t *)&d->status_check);
        if (notify_watchdog_usec(&wd_usec) > 0)
                uv_timer_start(&d->t_watchdog, on_watchdog, 0, wd_usec / 2000 ? wd_usec / 2000 : 1);
}

void service_stop(struct daemon *d, int code)
{
        if (d->stopping)
                return;
        d->stopping = true;
        d->exit_code = code;
        (void)notify_send("STOPPING=1");
        uv_stop(&d->loop);
}
