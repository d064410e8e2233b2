/* Retention; see retention.h.  An item and its sidecars (".outcome" and
 * an agent's ".result" in archive/, ".reason" in rejected/) go together; a name that looks like a
 * sidecar but has no item beside it (a file a producer named "x.reason",
 * rejected under that name, or one left by a crash) is an item itself, so
 * it is counted and pruned.  The age of an item is taken from its ctime,
 * which the move into the directory set.
 *
 * A run removes RETENTION_BATCH items plus as many as arrived since the
 * last run, so pruning keeps up with a flood without one mass delete. */
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
#include "layout.h"
#include "log.h"
#include "util.h"
#include "retention.h"
#include "store.h"
#include "store_doc.h"

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

static int64_t st_ctime_usec(const struct stat *st)
{
        return (int64_t)st->st_ctim.tv_sec * 1000000LL + st->st_ctim.tv_nsec / 1000;
}

/* Items of dirfd (not sidecars, not dotfiles), oldest first. */
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
                if (de->d_name[0] == '.' || (suffix && layout_is_sidecar_at(dirfd, de->d_name, suffix)))
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
                e[n].bytes = st_bytes(&st);
                if (suffix && layout_suffixed(de->d_name, suffix, side, sizeof(side)) == 0 &&
                    fstatat(dirfd, side, &ss, AT_SYMLINK_NOFOLLOW) == 0)
                        e[n].bytes += st_bytes(&ss);
                if (suffix && !strcmp(suffix, LAYOUT_OUTCOME) &&
                    layout_suffixed(de->d_name, LAYOUT_RESULT, side, sizeof(side)) == 0 &&
                    fstatat(dirfd, side, &ss, AT_SYMLINK_NOFOLLOW) == 0)
                        e[n].bytes += st_bytes(&ss);
                n++;
        }
        closedir(d);
        if (n > 1)
                qsort(e, n, sizeof(*e), entry_cmp);
        *ret = e;
        *ret_n = n;
        return 0;
}

/* A rejection that names no handoff_id was never authenticated: it guards
 * no replay and may go before the window has passed.  Nor does a copy
 * rejected as duplicate_id: its id is remembered already (claimed/, ids/,
 * outbox/), and copies of one valid handoff must not fill rejected/ for
 * the whole window. */
static bool guards_id(int dirfd, const char *name, const char *suffix)
{
        char side[NAME_MAX + 16];
        struct store_reason o;

        if (!suffix || layout_suffixed(name, suffix, side, sizeof(side)) < 0)
                return true;
        if (store_reason_load(dirfd, side, &o) < 0)
                return spool_exists_at(dirfd, side);  /* unreadable: keep it */
        if (!strcmp(o.reason, hd_reason_name(HD_R_DUPLICATE_ID)))
                return false;
        return o.id[0] != '\0';
}

static unsigned prune(struct spool *sp, enum spool_dir dir, const char *suffix,
                      uint64_t max_items, int64_t max_age_s, uint64_t max_bytes,
                      int64_t now, int64_t floor, uint64_t batch, bool early_unauth)
{
        struct entry *e = NULL;
        size_t n = 0;
        uint64_t total = 0, count, looked = 0;
        unsigned removed = 0;

        /* rejected/ is listed anyway: status shows its count and bytes. */
        if (!max_items && !max_age_s && !max_bytes && dir != SD_REJECTED)
                return 0;
        if (list_items(sp->fd[dir], suffix, &e, &n) < 0)
                return 0;
        for (size_t i = 0; i < n; i++)
                total += e[i].bytes;
        count = n;
        for (size_t i = 0; i < n && removed < batch; i++) {
                bool over = (max_items && count > max_items) ||
                            (max_bytes && total > max_bytes) ||
                            (max_age_s && now - e[i].t > max_age_s * 1000000LL);
                if (!over)
                        break;  /* oldest first: the rest are younger */
                if (e[i].t > floor) {
                        /* A replayed id must still be recognised; what
                         * names none may go (at most batch looks a run). */
                        if (!early_unauth || ++looked > batch)
                                break;
                        if (guards_id(sp->fd[dir], e[i].name, suffix))
                                continue;
                }
                int q = store_prune(sp, dir, e[i].name);
                if (q < 0 && q != -ENOENT) {
                        log_warning_errno(q, "Cannot remove %s/%s",
                                          spool_dir_names[dir], e[i].name);
                        continue;
                }
                if (suffix) {
                        char side[NAME_MAX + 16];
                        if (layout_suffixed(e[i].name, suffix, side, sizeof(side)) == 0)
                                (void) store_prune(sp, dir, side);
                        /* archive/'s other sidecar: the agent's result */
                        if (!strcmp(suffix, LAYOUT_OUTCOME) &&
                            layout_suffixed(e[i].name, LAYOUT_RESULT, side, sizeof(side)) == 0)
                                (void) store_prune(sp, dir, side);
                }
                count--;
                total -= e[i].bytes;
                removed++;
        }
        for (size_t i = 0; i < n; i++)
                free(e[i].name);
        free(e);
        if (dir == SD_REJECTED) {
                sp->st.rejected_items = count;
                sp->st.rejected_bytes = total;
        }
        if (removed)
                log_info("Retention removed %u item(s) from %s/", removed,
                         spool_dir_names[dir]);
        return removed;
}

/* Younger than this, a replay of the id may still be fresh: it was issued
 * at most max_clock_skew after the claim and stays fresh for max_window
 * after issue. */
static int64_t replay_floor(const struct config *c, int64_t now)
{
        return now - (c->max_window + c->max_clock_skew) * 1000000LL;
}

/* Keep up with what came since the last run, and catch up. */
static uint64_t batch_now(struct spool *sp, struct retention *rt)
{
        uint64_t arrived = sp->st.consumed + sp->st.expired + sp->st.canceled, batch;

        for (int i = 0; i < _HD_R_MAX; i++)
                arrived += sp->st.rejected[i];
        batch = RETENTION_BATCH + (arrived - rt->arrived);
        rt->arrived = arrived;
        return batch;
}

static void prune_rejected(struct spool *sp, struct retention *rt, int64_t now, uint64_t batch)
{
        const struct config *c = sp->cfg;

        sp->st.rejected_pruned += prune(sp, SD_REJECTED, LAYOUT_REASON, c->rejected_max_items,
                                        c->rejected_max_age, c->rejected_max_bytes, now,
                                        replay_floor(c, now), batch, true);
        rt->pruned_at = now;
        sp->retention_due = false;
}

void retention_run(struct spool *sp, struct retention *rt, int64_t now)
{
        const struct config *c = sp->cfg;
        int64_t floor = replay_floor(c, now);
        uint64_t batch = batch_now(sp, rt);

        sp->st.archived_pruned += prune(sp, SD_ARCHIVE, LAYOUT_OUTCOME, c->archive_max_items,
                                        c->archive_max_age, c->archive_max_bytes, now, floor,
                                        batch, false);
        prune_rejected(sp, rt, now, batch);
        /* ids/: a marker older than the window guards nothing. */
        prune(sp, SD_IDS, NULL, 0, c->max_window + c->max_clock_skew, 0, now, floor,
              batch, false);
}

void retention_rejected_due(struct spool *sp, struct retention *rt, struct deadline *dl,
                            int64_t now)
{
        if (!sp->retention_due)
                return;
        if (now - rt->pruned_at < RETENTION_SOON_USEC) {
                /* too soon after the last run: at the sweep after it */
                deadline_note(dl, rt->pruned_at + RETENTION_SOON_USEC);
                return;
        }
        prune_rejected(sp, rt, now, batch_now(sp, rt));
}
