/* The daemon's loop and what its parts share: one libuv loop, a raw
 * inotify fd in a uv_poll_t, signals, timers (rescan, deadlines, retry,
 * watchdog), the control socket.  daemon.c sets it up and handles the
 * signals; watch.c the inotify watch, the rescans and the pending names;
 * slice.c the sweep; service.c what the service manager is told and the
 * stop.  The callbacks decode events and call plain functions of intake,
 * lifecycle and control. */
#ifndef HD_LOOP_H
#define HD_LOOP_H

#include <dirent.h>
#include <stdbool.h>
#include <uv.h>

#include "config.h"
#include "parts.h"
#include "spool.h"

struct control;
struct pending;

struct daemon {
        uv_loop_t loop;
        const char *config_path;
        struct config *cfg;
        struct parts p;         /* the storage and the modules' state (parts.h) */

        int ifd;                /* inotify */
        int wd_handoff;
        uv_poll_t ipoll;
        uv_signal_t sig_hup, sig_term, sig_int;
        uv_timer_t t_rescan, t_deadline, t_retry, t_watchdog, t_status;
        uv_timer_t t_reap;      /* spent/ emptied once intake is quiet (slice.c) */
        uv_timer_t t_ids;       /* the id region a burst keeps, let go (lock.h) */
        uv_timer_t t_log;       /* the plain log lines buffered, written (log.c) */
        uint64_t reap_backoff_ms;/* spent/ cannot be listed: the next try, 0: none */
        uv_idle_t idle;         /* drains the pending set in chunks */
        uv_idle_t sweep_idle;   /* a sweep under way, a slice a turn (slice.c) */
        uv_idle_t gone_idle;    /* the items of gone bootstraps, a slice a turn */
        struct dict gone;       /* bootstrap names gone, to look at: a set */
        uv_check_t status_check;/* after each wake-up: did the counts change? */
        uv_timer_t t_metrics;   /* the metrics textfile, after a change (service.c) */
        bool metrics_failed;    /* its last write failed (said once) */
        uv_prepare_t log_prepare;/* before each poll: t_log and t_ids armed */
        char status_sent[192];  /* the last STATUS= sent */

        struct pending *pending;/* names in handoff/ to decide about (pending.h) */
        DIR *scan;              /* a rescan of handoff/ under way */
        struct dict retry;      /* names that hit a system error: a set */
        uint64_t retry_backoff_ms;
        unsigned rewatch_count;
        int64_t rewatch_window_start;

        struct control *ctl;
        struct relay *relay;    /* NULL: relay off */
        struct a2a_out *a2a;    /* NULL: no A2A remote */
        bool ready, stopping;
        uint64_t started_usec;  /* monotonic (uv_hrtime) */
        int exit_code;
};

#endif
