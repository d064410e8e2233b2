/* Retention; see retention.h.  An item and its sidecar (".outcome" in
 * archive/, ".reason" in rejected/) go together.  The age of an item is
 * taken from its ctime, which the move into the directory set. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "retention.h"

struct entry {
        char *name;
        int64_t t;      /* usec */
        uint64_t bytes;
};

static int entry_cmp(const void *a, const void *b)
{
        const struct entry *x = a, *y = b;
        if (x->t != y->t)
                return x->t < y->t ? -1 : 1;
        return strcmp(x->name, y->name);
}

static bool has_suffix(const char *s, const char *suf)
{
        size_t l = strlen(s), m = strlen(suf);
        return l > m && !strcmp(s + l - m, suf);
}

static int64_t st_ctime_usec(const struct stat *st)
{
        return (int64_t)st->st_ctim.tv_sec * 1000000LL + st->st_ctim.tv_nsec / 1000;
}

/* Items of dirfd (names not ending in suffix, not dotfiles), oldest first. */
static int list_items(int dirfd, const char *suffix, struct entry **ret, size_t *ret_n)
{
        struct entry *e = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *d;

        d = opendir_at(dirfd);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                struct stat st, ss;
                char side[NAME_MAX + 16];
                if (de->d_name[0] == '.' || (suffix && has_suffix(de->d_name, suffix)))
                        continue;
                if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (n == cap) {
                        struct entry *t = realloc(e, (cap = cap ? cap * 2 : 64) * sizeof(*e));
                        if (!t)
                                break;
                        e = t;
                }
                e[n].name = strdup(de->d_name);
                if (!e[n].name)
                        break;
                e[n].t = st_ctime_usec(&st);
                e[n].bytes = (uint64_t)st.st_size;
                if (suffix) {
                        snprintf(side, sizeof(side), "%s%s", de->d_name, suffix);
                        if (fstatat(dirfd, side, &ss, AT_SYMLINK_NOFOLLOW) == 0)
                                e[n].bytes += (uint64_t)ss.st_size;
                }
                n++;
        }
        closedir(d);
        if (n > 1)
                qsort(e, n, sizeof(*e), entry_cmp);
        *ret = e;
        *ret_n = n;
        return 0;
}

static unsigned prune(struct spool *sp, enum spool_dir dir, const char *suffix,
                      uint64_t max_items, int64_t max_age_s, uint64_t max_bytes,
                      int64_t now, int64_t floor)
{
        struct entry *e = NULL;
        size_t n = 0;
        uint64_t total = 0, count;
        unsigned removed = 0;

        if (!max_items && !max_age_s && !max_bytes)
                return 0;
        if (list_items(sp->fd[dir], suffix, &e, &n) < 0)
                return 0;
        for (size_t i = 0; i < n; i++)
                total += e[i].bytes;
        count = n;
        for (size_t i = 0; i < n && removed < RETENTION_BATCH; i++) {
                bool over = (max_items && count > max_items) ||
                            (max_bytes && total > max_bytes) ||
                            (max_age_s && now - e[i].t > max_age_s * 1000000LL);
                if (!over)
                        break;  /* oldest first: the rest are younger */
                if (e[i].t > floor)
                        break;  /* a replayed id must still be recognised */
                if (unlinkat(sp->fd[dir], e[i].name, 0) < 0 && errno != ENOENT) {
                        log_warning_errno(errno, "Cannot remove %s/%s",
                                          spool_dir_names[dir], e[i].name);
                        continue;
                }
                if (suffix) {
                        char side[NAME_MAX + 16];
                        snprintf(side, sizeof(side), "%s%s", e[i].name, suffix);
                        unlinkat(sp->fd[dir], side, 0);
                }
                count--;
                total -= e[i].bytes;
                removed++;
        }
        for (size_t i = 0; i < n; i++)
                free(e[i].name);
        free(e);
        if (removed)
                log_info("Retention removed %u item(s) from %s/", removed,
                         spool_dir_names[dir]);
        return removed;
}

void retention_run(struct spool *sp, int64_t now)
{
        const struct config *c = sp->cfg;
        /* Younger than this, a replay of the id may still be fresh: it was
         * issued at most max_clock_skew after the claim and stays fresh for
         * max_window after issue. */
        int64_t window = (c->max_window + c->max_clock_skew) * 1000000LL;
        int64_t floor = now - window;

        sp->st.archived_pruned += prune(sp, SD_ARCHIVE, ".outcome", c->archive_max_items,
                                        c->archive_max_age, c->archive_max_bytes, now, floor);
        sp->st.rejected_pruned += prune(sp, SD_REJECTED, ".reason", c->rejected_max_items,
                                        c->rejected_max_age, 0, now, floor);
        /* ids/: a marker older than the window guards nothing. */
        prune(sp, SD_IDS, NULL, 0, c->max_window + c->max_clock_skew, 0, now, floor);
}
