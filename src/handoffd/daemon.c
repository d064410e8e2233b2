/* The daemon (daemon.h): sets up the loop and its parts (loop.h), runs
 * it, and reloads the configuration on SIGHUP. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "a2a_out.h"
#include "agents.h"
#include "cancel.h"
#include "completion.h"
#include "control.h"
#include "daemon.h"
#include "decide.h"
#include "delivery.h"
#include "foreign.h"
#include "intake.h"
#include "lifecycle.h"
#include "lock.h"
#include "log.h"
#include "parts.h"
#include "notify.h"
#include "pending.h"
#include "relay.h"
#include "service.h"
#include "slice.h"
#include "watch.h"

int daemon_config_load(const char *path, struct config **ret, char **err)
{
        struct config *c = NULL;
        int r;

        r = config_load(path, true, &c, err);
        if (r < 0)
                return r;
        r = config_relay_keys(c, NULL, NULL, err);
        if (r == 0)
                r = config_a2a_tokens_check(c, err);
        if (r < 0) {
                config_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

/* The hub's state_dir is its user's (handoff-hubd(8)); the daemon may
 * stat it without reading it. */
static uid_t hub_uid_of(const struct config *cfg)
{
        struct stat st;

        if (stat(cfg->hub.state_dir ?: CONFIG_HUB_STATE_DIR_DEFAULT, &st) < 0 ||
            !S_ISDIR(st.st_mode))
                return (uid_t)-1;
        return st.st_uid;
}

int daemon_parts_open(struct config *cfg, struct parts *ret)
{
        struct parts p = { .check_item = lifecycle_check };
        int r;

        dict_init(&p.unserved, sizeof(struct unserved_entry));
        foreign_init(&p.foreign);
        verified_init(&p.verified);
        relayed_init(&p.relayed);
        p.quota = (struct quota){ .recount = true, .hub_uid = hub_uid_of(cfg) };
        r = decide_memo_new(&p.decide);
        if (r == 0)
                r = delivery_new(&p.delivery);
        if (r == 0)
                r = lifecycle_new(&p.lc);
        if (r == 0)
                r = completion_new(&p.results);
        if (r == 0)
                r = spool_open(cfg, &p.unserved, &p.sp);
        if (r < 0) {
                daemon_parts_close(&p);
                return r;
        }
        *ret = p;
        return 0;
}

void daemon_parts_close(struct parts *p)
{
        cancel_free(p);
        completion_free(p->results);
        lifecycle_free(p->lc);
        delivery_free(p->delivery);
        decide_memo_free(p->decide);
        verified_clear(&p->verified);
        relayed_clear(&p->relayed);
        foreign_clear(&p->foreign);
        dict_clear(&p->unserved);
        spool_close(p->sp);
        *p = (struct parts){ 0 };
}

int daemon_parts_set_config(struct parts *p, struct config *cfg)
{
        int r = spool_set_config(p->sp, cfg, &p->unserved);

        if (r < 0)
                return r;
        p->quota.hub_uid = hub_uid_of(cfg);
        /* Keys and agents may have changed: every item is verified again,
         * and counted again (a limit may be new). */
        verified_clear(&p->verified);
        relayed_clear(&p->relayed);
        p->quota.recount = true;
        foreign_clear(&p->foreign);
        return 0;
}

/* SIGHUP: the config and keys read again; a bad new config keeps the
 * old, and so does one that moves the spool. */
static void reload(struct daemon *d)
{
        struct config *nc = NULL;
        char *err = NULL;
        int r;

        char why[512];

        r = daemon_config_load(d->config_path, &nc, &err);
        if (r < 0) {
                snprintf(why, sizeof(why), "%s", err ? err : strerror(-r));
                log_error("Reload failed, keeping the running configuration: %s", why);
                free(err);
                control_reload_failed(d->ctl, why);
                return;
        }
        if (strcmp(nc->spool_dir, d->cfg->spool_dir)) {
                snprintf(why, sizeof(why), "[spool] dir changed (%s -> %s); restart to move the spool",
                         d->cfg->spool_dir, nc->spool_dir);
                log_error("Reload refused: %s", why);
                control_reload_failed(d->ctl, why);
                config_free(nc);
                return;
        }
        watch_agents_drop(d);
        r = daemon_parts_set_config(&d->p, nc);
        if (r < 0) {
                log_error_errno(r, "Reload failed, keeping the running configuration");
                snprintf(why, sizeof(why), "%s", strerror(-r));
                control_reload_failed(d->ctl, why);
                config_free(nc);
                watch_agents(d);
                return;
        }
        config_free(d->cfg);
        d->cfg = nc;
        watch_agents(d);
        control_set_config(d->ctl, nc);
        r = a2a_out_reload(&d->loop, d->p.sp, &d->a2a);
        if (r < 0)
                log_error_errno(r, "Reload: cannot start the A2A sender; handoffs to A2A "
                                "remotes wait in handoff/");
        log_info("Reloaded %s: %zu agent(s) served, %zu out of service",
                 d->config_path, d->p.sp->n_agents,
                 dict_count(&d->p.unserved));
        watch_rescan(d, "reload");
}

static void on_signal(uv_signal_t *h, int sig)
{
        struct daemon *d = h->data;

        if (sig == SIGTERM || sig == SIGINT) {
                log_info("Received %s, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
                service_stop(d, 0);
                return;
        }
        (void)notify_sendf("RELOADING=1\nMONOTONIC_USEC=%llu",
                           (unsigned long long)(uv_hrtime() / 1000));
        reload(d);
        (void)notify_send("READY=1");
        service_status(d);
}

/* The id bytes of every handoff, which a daemon alone on its spool takes
 * with the first claim of a burst (lock.h), go this long after: held
 * over its batches, they cost no system call a batch but the look
 * whether it is still alone; and another daemon that starts waits at most
 * this, and a batch. */
#define IDS_KEEP_MS 50

static void on_ids(uv_timer_t *t)
{
        struct daemon *d = t->data;

        lock_idle(d->p.sp->lock_fd);
}

/* What the loop logged goes out this long after its first line (log.c). */
#define LOG_FLUSH_MS 50

static void on_log(uv_timer_t *t)
{
        (void)t;
        log_flush();
}

/* Before the loop polls: the lines logged and the id region, if a batch
 * took it, have their timers. */
static void on_log_prepare(uv_prepare_t *h)
{
        struct daemon *d = h->data;

        if (log_pending() && !uv_is_active((uv_handle_t *)&d->t_log))
                uv_timer_start(&d->t_log, on_log, LOG_FLUSH_MS, 0);
        if (d->p.sp && lock_ids_held(d->p.sp->lock_fd) &&
            !uv_is_active((uv_handle_t *)&d->t_ids))
                uv_timer_start(&d->t_ids, on_ids, IDS_KEEP_MS, 0);
}

static void close_cb(uv_handle_t *h, void *arg)
{
        (void)arg;
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

/* The loop's handles, all pointing at d.  uv_idle_init and uv_timer_init
 * only fill in the handle: they return 0.  A poll and a signal handle
 * need the kernel. */
static int handles_init(struct daemon *d)
{
        int r;

        (void)uv_idle_init(&d->loop, &d->idle);
        (void)uv_idle_init(&d->loop, &d->sweep_idle);
        (void)uv_idle_init(&d->loop, &d->gone_idle);
        (void)uv_timer_init(&d->loop, &d->t_rescan);
        (void)uv_timer_init(&d->loop, &d->t_deadline);
        (void)uv_timer_init(&d->loop, &d->t_retry);
        (void)uv_timer_init(&d->loop, &d->t_watchdog);
        (void)uv_timer_init(&d->loop, &d->t_status);
        (void)uv_timer_init(&d->loop, &d->t_reap);
        (void)uv_timer_init(&d->loop, &d->t_log);
        uv_unref((uv_handle_t *)&d->t_log);
        (void)uv_timer_init(&d->loop, &d->t_ids);
        d->t_ids.data = d;
        uv_unref((uv_handle_t *)&d->t_ids);
        (void)uv_prepare_init(&d->loop, &d->log_prepare);
        d->log_prepare.data = d;
        (void)uv_prepare_start(&d->log_prepare, on_log_prepare);
        uv_unref((uv_handle_t *)&d->log_prepare);
        r = uv_poll_init(&d->loop, &d->ipoll, d->ifd);
        if (r == 0)
                r = uv_signal_init(&d->loop, &d->sig_hup);
        if (r == 0)
                r = uv_signal_init(&d->loop, &d->sig_term);
        if (r == 0)
                r = uv_signal_init(&d->loop, &d->sig_int);
        if (r < 0)
                return log_error_errno(r, "Cannot set up the event loop");
        d->ipoll.data = d->idle.data = d->t_rescan.data = d->t_deadline.data = d;
        d->t_retry.data = d->t_watchdog.data = d->t_status.data = d->sweep_idle.data = d;
        d->t_reap.data = d->gone_idle.data = d;
        d->sig_hup.data = d->sig_term.data = d->sig_int.data = d;
        return 0;
}

/* The spool, its cancel requests and the watch on it, before the loop's
 * handles (the inotify fd is the poll's). */
static int open_spool(struct daemon *d)
{
        int r;

        r = daemon_parts_open(d->cfg, &d->p);
        if (r < 0)
                return r;
        /* Before the first claim: an item whose sender asked to cancel it
         * meanwhile is never published. */
        r = cancel_open(&d->p, hd_now_usec());
        if (r < 0)
                return log_error_errno(r, "Cannot read cancel/");
        /* Watch first, then scan: a file arriving in between is seen twice
         * at worst, never missed. */
        return watch_open(d);
}

/* The control socket, the relay and the A2A sender: before the first
 * scan, so outbox/ is indexed, then filled. */
static int open_parts(struct daemon *d)
{
        int r;

        r = control_open(&d->loop, d->cfg, &d->p, &d->ctl);
        if (r == 0)
                r = relay_start(&d->loop, &d->p, &d->relay);
        if (r == 0)
                r = a2a_out_start(&d->loop, d->p.sp, &d->a2a);
        return r;
}

/* inotify events, cancel requests and signals heard from now on. */
static int listen_all(struct daemon *d)
{
        int r;

        r = watch_start(d);
        if (r == 0)
                r = cancel_watch(&d->p, &d->loop);
        if (r == 0)
                r = uv_signal_start(&d->sig_hup, on_signal, SIGHUP);
        if (r == 0)
                r = uv_signal_start(&d->sig_term, on_signal, SIGTERM);
        if (r == 0)
                r = uv_signal_start(&d->sig_int, on_signal, SIGINT);
        if (r < 0)
                return log_error_errno(r, "Cannot watch for inotify events and signals");
        return 0;
}

/* Recovery and the first scan, a slice of each a turn; READY=1 when the
 * scan is drained (in the loop, so a SIGTERM during a long first scan is
 * heard), whatever recovery has left to do. */
static int first_scan(struct daemon *d)
{
        int r;

        slice_sweep(d, true);
        r = watch_rescan(d, "start");
        if (r < 0)
                return r;
        service_maybe_ready(d);
        slice_arm(d);
        return 0;
}

/* Everything daemon_run() set up, in reverse; the config is ours (a
 * reload may have replaced it). */
static void teardown(struct daemon *d)
{
        relay_stop(d->relay);
        a2a_out_stop(d->a2a);
        control_close(d->ctl);
        uv_walk(&d->loop, close_cb, NULL);
        uv_run(&d->loop, UV_RUN_DEFAULT);
        uv_loop_close(&d->loop);
        relay_free(d->relay);
        a2a_out_free(d->a2a);
        if (d->ifd >= 0)
                close(d->ifd);
        daemon_parts_close(&d->p);
        config_free(d->cfg);
        if (d->scan)
                closedir(d->scan);
        pending_free(d->pending);
        dict_clear(&d->retry);
        dict_clear(&d->gone);
        log_flush();
}

/* Takes cfg (a reload replaces it). */
int daemon_run(const char *config_path, struct config *cfg)
{
        struct daemon d = { 0 };
        int r;

        d.config_path = config_path;
        d.cfg = cfg;
        d.ifd = -1;
        dict_init(&d.retry, 0);
        dict_init(&d.gone, 0);
        d.started_usec = uv_hrtime() / 1000;
        r = pending_new(&d.pending);
        if (r == 0)
                r = uv_loop_init(&d.loop);
        if (r < 0) {
                pending_free(d.pending);
                config_free(cfg);
                return log_error_errno(r, "Cannot set up the event loop");
        }

        r = open_spool(&d);
        if (r == 0)
                r = handles_init(&d);
        if (r == 0)
                r = open_parts(&d);
        if (r == 0)
                r = listen_all(&d);
        if (r == 0) {
                service_start(&d);
                r = first_scan(&d);
        }
        if (r == 0) {
                uv_run(&d.loop, UV_RUN_DEFAULT);
                r = d.exit_code ? -EIO : 0;
                log_info("Stopped");
        }
        teardown(&d);
        return r;
}
