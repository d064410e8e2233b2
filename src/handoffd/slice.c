/* The sweep in slices, the look at gone bootstraps' items, and the
 * emptying of spent/: work a user can make large, never done in one
 * callback.  A sweep looks at every claimed item, and a user can make
 * that large (many items, each up to max_file_size): a slice of about
 * SLICE_USEC per loop turn, continued from an idle handle (with one
 * active the loop polls without blocking, so I/O and signals are polled
 * between slices).  The items of bootstraps gone from the agents'
 * handoffs/ are looked at the same way (slice_gone()): a burst of
 * consumes can be as large as a sweep.
 *
 * The timer that starts a sweep at the earliest deadline is never armed
 * below TIMER_FLOOR_MS: libuv runs a timer re-armed at 0 ms from its own
 * callback again in the same phase, before any I/O is polled, so a
 * deadline already past (a sweep longer than the gap to the next one)
 * would otherwise hold the loop for good. */
#include "store.h"
#include "deadline.h"
#include "lifecycle.h"
#include "log.h"
#include "service.h"
#include "slice.h"

#define TIMER_FLOOR_MS 10
#define SWEEP_MAX_MS 60000      /* retention at least once a minute */
/* Gone bootstraps remembered to look at; beyond, a sweep looks at all. */
#define GONE_MAX 4096
/* spent/ is emptied once no claim came for this long, a slice a turn:
 * the claims of a burst come far closer together, so its unlinks wait
 * until it has passed. */
#define REAP_QUIET_USEC 500000LL
/* spent/ that cannot be listed is tried again after 0.5 s, 1 s, 2 s ...
 * at most this, and reported once. */
#define REAP_BACKOFF_MAX_MS 60000

static void on_sweep_idle(uv_idle_t *h)
{
        struct daemon *d = h->data;
        bool more = false;
        int r;

        r = lifecycle_sweep_step(&d->p, hd_now_usec(), SLICE_USEC, &more);
        service_maybe_ready(d);
        if (r == 0 && more && !d->stopping)
                return;         /* the next slice at the next turn */
        uv_idle_stop(h);
        slice_arm(d);
}

void slice_sweep(struct daemon *d, bool at_start)
{
        if (lifecycle_sweep_begin(&d->p, hd_now_usec(), at_start) < 0 || d->stopping)
                return;
        d->sweep_idle.data = d;
        if (!uv_is_active((uv_handle_t *)&d->sweep_idle))
                uv_idle_start(&d->sweep_idle, on_sweep_idle);
}

/* The items of gone bootstraps, as many as a slice's time allows (at
 * least one), then one sync for them all, as a slice of the sweep: an
 * archive's outcome file is synced before its move, the directories
 * after, and a consume is acknowledged by nothing before that. */
static void on_gone_idle(uv_idle_t *h)
{
        struct daemon *d = h->data;
        int64_t t0 = mono_usec(), now = hd_now_usec();
        void *e, *nx;
        int r;

        DICT_FOREACH_SAFE(e, nx, &d->gone) {
                const char *k = dict_key(e);
                if (mono_usec() - t0 > SLICE_USEC || d->stopping)
                        break;
                r = lifecycle_bootstrap_gone(&d->p, k, now);
                if (r < 0) {
                        /* The sweep looks at it again. */
                        char q[300];
                        spool_error(d->p.sp, r, "Cannot finish the item of %s",
                                    log_quote(k, q, sizeof(q)));
                }
                dict_remove(&d->gone, e);
        }
        (void)store_flush(d->p.sp);       /* a failure said there, once */
        if (dict_count(&d->gone) == 0 || d->stopping)
                uv_idle_stop(h);
        slice_arm(d);
}

void slice_gone(struct daemon *d, const char *name)
{
        if (d->stopping)
                return;
        if (dict_count(&d->gone) >= GONE_MAX || !dict_put(&d->gone, name, NULL)) {
                slice_sweep(d, false);
                return;
        }
        d->gone_idle.data = d;
        if (!uv_is_active((uv_handle_t *)&d->gone_idle))
                uv_idle_start(&d->gone_idle, on_gone_idle);
}

static void on_deadline(uv_timer_t *t)
{
        struct daemon *d = t->data;

        /* One under way arms the timer again when it ends. */
        if (!uv_is_active((uv_handle_t *)&d->sweep_idle))
                slice_sweep(d, false);
}

/* The producers' files of claims (spent/, spool.c leave_name()) are
 * freed when intake is quiet: in a burst, freeing inodes makes creating
 * the next ones dearer.  A slice of SLICE_USEC,
 * then the next TIMER_FLOOR_MS later, so the loop keeps answering; no
 * timer while spent/ is empty (no idle wake-up). */
static void on_reap(uv_timer_t *t)
{
        struct daemon *d = t->data;
        int64_t quiet = mono_usec() - d->p.sp->spent.at;
        bool more = false;
        int r;

        if (d->stopping)
                return;
        if (quiet < REAP_QUIET_USEC) {
                uv_timer_start(t, on_reap, (uint64_t)(REAP_QUIET_USEC - quiet) / 1000 + 1, 0);
                return;
        }
        r = store_reap_spent(d->p.sp, SLICE_USEC, &more);
        if (r < 0) {
                /* What the reaper cannot remove it skips: only a listing
                 * that fails gets here (its mode, no fds).  Tried again
                 * later and later, not at each claim: said once. */
                if (d->reap_backoff_ms == 0)
                        spool_error(d->p.sp, r, "Cannot empty spent/, trying again later");
                d->reap_backoff_ms = d->reap_backoff_ms ? d->reap_backoff_ms * 2 : REAP_QUIET_USEC / 1000;
                if (d->reap_backoff_ms > REAP_BACKOFF_MAX_MS)
                        d->reap_backoff_ms = REAP_BACKOFF_MAX_MS;
                uv_timer_start(t, on_reap, d->reap_backoff_ms, 0);
                return;
        }
        if (d->reap_backoff_ms) {
                log_info("spent/ can be emptied again");
                d->reap_backoff_ms = 0;
        }
        if (more)
                uv_timer_start(t, on_reap, TIMER_FLOOR_MS, 0);
}

static void reap_arm(struct daemon *d)
{
        if (!d->p.sp->spent.waiting || d->stopping || uv_is_active((uv_handle_t *)&d->t_reap))
                return;
        uv_timer_start(&d->t_reap, on_reap, REAP_QUIET_USEC / 1000, 0);
}

/* At the earliest deadline (expiry within a second of it), and at least
 * every rescan_interval (at most a minute) for retention and the consumed
 * items inotify did not tell us about.  While a sweep is under way its
 * deadlines are still being gathered: it arms the timer when it ends. */
void slice_arm(struct daemon *d)
{
        int64_t now = hd_now_usec(), nd = d->p.deadline.next;

        if (d->p.sp->due.next && (!nd || d->p.sp->due.next < nd))
                nd = d->p.sp->due.next;
        uint64_t max = (uint64_t)d->cfg->rescan_interval * 1000, ms;

        reap_arm(d);
        if (uv_is_active((uv_handle_t *)&d->sweep_idle))
                return;
        if (max > SWEEP_MAX_MS)
                max = SWEEP_MAX_MS;
        ms = max;
        if (nd) {
                int64_t dt = nd - now;
                ms = dt <= 0 ? 0 : (uint64_t)(dt + 999) / 1000;
                if (ms > max)
                        ms = max;
        }
        if (ms < TIMER_FLOOR_MS)
                ms = TIMER_FLOOR_MS;
        if (uv_is_active((uv_handle_t *)&d->t_deadline) &&
            uv_timer_get_due_in(&d->t_deadline) <= ms)
                return;
        d->t_deadline.data = d;
        uv_timer_start(&d->t_deadline, on_deadline, ms, 0);
}
