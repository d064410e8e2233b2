/* The metrics textfile; see metrics.h.  Written with hd_write_atomic so the
 * collector never reads half a file. */
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
                n++;
        }
        closedir(d);
        return n;
}

int metrics_write(struct spool *sp, int64_t now)
{
        const char *path = sp->cfg->metrics_textfile;
        const struct spool_stats *s = &sp->st;
        char dir[PATH_MAX], *base, *buf = NULL;
        size_t len = 0;
        FILE *f;
        int dfd, r;

        if (!path)
                return 0;
        f = open_memstream(&buf, &len);
        if (!f)
                return -ENOMEM;
        fprintf(f, "# HELP handoffd_items Items per spool state directory.\n"
                   "# TYPE handoffd_items gauge\n");
        fprintf(f, "handoffd_items{state=\"handoff\"} %ld\n", count_items(sp->fd[SD_HANDOFF], NULL));
        fprintf(f, "handoffd_items{state=\"claimed\"} %ld\n", count_items(sp->fd[SD_CLAIMED], LAYOUT_DELIVERED));
        fprintf(f, "handoffd_items{state=\"archive\"} %ld\n", count_items(sp->fd[SD_ARCHIVE], LAYOUT_OUTCOME));
        fprintf(f, "handoffd_items{state=\"rejected\"} %ld\n", count_items(sp->fd[SD_REJECTED], LAYOUT_REASON));
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
        C("overflow", s->overflows);
        C("rescan", s->rescans);
        C("error", s->errors);
#undef C
        fprintf(f, "# HELP handoffd_rejected_total Rejections since start, by reason.\n"
                   "# TYPE handoffd_rejected_total counter\n");
        for (int i = 1; i < _HD_R_MAX; i++)
                fprintf(f, "handoffd_rejected_total{reason=\"%s\"} %llu\n",
                        hd_reason_name((hd_reason)i), (unsigned long long)s->rejected[i]);
        fprintf(f, "# HELP handoffd_up_seconds Seconds since the daemon started.\n"
                   "# TYPE handoffd_up_seconds gauge\n"
                   "handoffd_up_seconds %lld\n",
                (long long)((now - s->started_usec) / 1000000));
        fprintf(f, "# HELP handoffd_watch_ok 1 while the watch on handoff/ holds.\n"
                   "# TYPE handoffd_watch_ok gauge\n"
                   "handoffd_watch_ok %d\n", s->watch_ok ? 1 : 0);
        if (sp->relay.metrics)
                sp->relay.metrics(sp->relay.ctx, f, now);
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
        return r;
}
