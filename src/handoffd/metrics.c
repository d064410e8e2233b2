/* The metrics textfile; see metrics.h.  Written with hd_write_atomic so the
 * collector never reads half a file: in full (every directory listed) at
 * each housekeeping run, and, between those, within a second of a change
 * of the figures (service.c), listing only handoff/ and claimed/: archive/
 * and rejected/ may hold many thousands of names, which a listing a
 * second would make the daemon's main cost. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "layout.h"
#include "metrics.h"
#include "util.h"

static long count_items(int dirfd, const char *skip_suffix)
{
        struct dirent *de;
        long n = 0;
        DIR *d;

        d = opendir_at(dirfd);
        if (!d)
                return -1;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                if (skip_suffix && layout_has_suffix(de->d_name, skip_suffix))
                        continue;
                /* archive/'s other sidecar, an agent's result */
                if (skip_suffix && !strcmp(skip_suffix, LAYOUT_OUTCOME) &&
                    layout_has_suffix(de->d_name, LAYOUT_RESULT))
                        continue;
                n++;
        }
        closedir(d);
        return n;
}

/* The counts of archive/ and rejected/, as the last full write listed
 * them, and what the file last said: one spool per daemon. */
static struct {
        bool listed;
        long archive, rejected;
        uint64_t fingerprint;   /* of the figures last written */
        int64_t written_usec;   /* when (wall clock, as now) */
} last;

/* What changes with what the daemon does: its counters, the watch, the
 * relay's figures.  Not the uptime, not the directory counts. */
static void metrics_figures(struct spool *sp, FILE *f, int64_t now)
{
        const struct spool_stats *s = &sp->st;

        fprintf(f, "# HELP handoffd_events_total Decisions since the daemon started.\n"
                   "# TYPE handoffd_events_total counter\n");
#define C(name, v) fprintf(f, "handoffd_events_total{event=\"" name "\"} %llu\n", (unsigned long long)(v))
        C("claimed", s->claimed);
        C("delivered", s->delivered);
        C("recovered", s->recovered);
        C("retried", s->retried);
        C("consumed", s->consumed);
        C("expired", s->expired);
        C("canceled", s->canceled);
        C("completed", s->completed);
        C("failed", s->failed);
        C("result_refused", s->results_refused);
        C("overflow", s->overflows);
        C("rescan", s->rescans);
        C("error", s->errors);
#undef C
        fprintf(f, "# HELP handoffd_rejected_total Rejections since start, by reason.\n"
                   "# TYPE handoffd_rejected_total counter\n");
        for (int i = 1; i < _HD_R_MAX; i++)
                fprintf(f, "handoffd_rejected_total{reason=\"%s\"} %llu\n",
                        hd_reason_name((hd_reason)i), (unsigned long long)s->rejected[i]);
        fprintf(f, "# HELP handoffd_watch_ok 1 while the watch on handoff/ holds.\n"
                   "# TYPE handoffd_watch_ok gauge\n"
                   "handoffd_watch_ok %d\n", s->watch_ok ? 1 : 0);
        if (sp->relay.metrics)
                sp->relay.metrics(sp->relay.ctx, f, now);
        if (sp->a2a.metrics)
                sp->a2a.metrics(sp->a2a.ctx, f, now);
}

/* The figures' fingerprint; items left for other agents and deferred
 * ones count too: they change handoff/ without a counter of the file. */
static int metrics_fingerprint(struct spool *sp, int64_t now, uint64_t *ret)
{
        char *buf = NULL;
        size_t len = 0;
        uint64_t h = FNV_BASIS;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                return -ENOMEM;
        metrics_figures(sp, f, now);
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        h = fnv1a(buf, len, h);
        h = fnv1a(&sp->st.left, sizeof(sp->st.left), h);
        h = fnv1a(&sp->st.deferred, sizeof(sp->st.deferred), h);
        free(buf);
        *ret = h;
        return 0;
}

bool metrics_changed(struct spool *sp, int64_t now, int64_t *ret_due)
{
        uint64_t fp;

        if (!sp->cfg->metrics_textfile || metrics_fingerprint(sp, now, &fp) < 0 ||
            (last.listed && fp == last.fingerprint))
                return false;
        *ret_due = last.written_usec + METRICS_MIN_INTERVAL_USEC;
        return true;
}

/* Write the textfile; list: count archive/ and rejected/ too (else as
 * the last full write counted them). */
static int metrics_put(struct spool *sp, int64_t now, bool list)
{
        const char *path = sp->cfg->metrics_textfile;
        const struct spool_stats *s = &sp->st;
        char dir[PATH_MAX], *base, *buf = NULL;
        uint64_t fp;
        size_t len = 0;
        FILE *f;
        int dfd, r;

        if (!path)
                return 0;
        r = metrics_fingerprint(sp, now, &fp);
        if (r < 0)
                return r;
        if (list || !last.listed) {
                last.archive = count_items(sp->fd[SD_ARCHIVE], LAYOUT_OUTCOME);
                last.rejected = count_items(sp->fd[SD_REJECTED], LAYOUT_REASON);
                last.listed = true;
        }
        f = open_memstream(&buf, &len);
        if (!f)
                return -ENOMEM;
        fprintf(f, "# HELP handoffd_items Items per spool state directory (archive and rejected: "
                   "counted every rescan_interval).\n"
                   "# TYPE handoffd_items gauge\n");
        fprintf(f, "handoffd_items{state=\"handoff\"} %ld\n", count_items(sp->fd[SD_HANDOFF], NULL));
        fprintf(f, "handoffd_items{state=\"claimed\"} %ld\n", count_items(sp->fd[SD_CLAIMED], LAYOUT_DELIVERED));
        fprintf(f, "handoffd_items{state=\"archive\"} %ld\n", last.archive);
        fprintf(f, "handoffd_items{state=\"rejected\"} %ld\n", last.rejected);
        fprintf(f, "# HELP handoffd_up_seconds Seconds since the daemon started, when this file was written.\n"
                   "# TYPE handoffd_up_seconds gauge\n"
                   "handoffd_up_seconds %lld\n",
                (long long)((now - s->started_usec) / 1000000));
        fprintf(f, "# HELP handoffd_metrics_written_seconds When the daemon wrote this file (Unix time).\n"
                   "# TYPE handoffd_metrics_written_seconds gauge\n"
                   "handoffd_metrics_written_seconds %lld\n", (long long)(now / 1000000));
        metrics_figures(sp, f, now);
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        base = xsnprintf(dir, sizeof(dir), "%s", path) < 0 ? NULL : strrchr(dir, '/');
        if (!base) {
                free(buf);
                return -EINVAL;
        }
        *base++ = '\0';
        dfd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                r = -errno;
                free(buf);
                return r;
        }
        r = hd_write_atomic(dfd, base, buf, len, 0644, false);
        close(dfd);
        free(buf);
        /* failed or not, not again before the interval */
        last.fingerprint = fp;
        last.written_usec = now;
        return r;
}

int metrics_write(struct spool *sp, int64_t now)
{
        return metrics_put(sp, now, true);
}

int metrics_refresh(struct spool *sp, int64_t now)
{
        return metrics_put(sp, now, false);
}
