/* What is dirty and the sync rounds that make the moves durable (a
 * move's destination synced before its source), the names that leave
 * handoff/ only then (sp->leaving), and spent/, where the producers'
 * files of claims go until the reaper frees them.  The steps and the
 * crash windows: handoffd(8), "Durability and crash windows". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents.h"
#include "files.h"
#include "layout.h"
#include "log.h"
#include "store.h"
#include "store_int.h"

/* Agents' handoffs/ synced together by store_flush(); more, one by one. */
#define SPOOL_FLUSH_AGENTS_MAX 16
/* Entries of spent/ the reaper cannot remove, reported one by one. */
#define SPOOL_SPENT_SKIPPED_MAX 64

static bool same_ino(const struct stat *st, const struct spool_ino *was)
{
        return st->st_dev == was->dev && st->st_ino == was->ino;
}

/* What a move by name took from handoff/name to to/dst (st) goes back
 * there; the name taken again meanwhile, under a dotfile name no decision
 * looks at: either way it is still its owner's, in her directory. */
static void put_back(struct spool *sp, enum spool_dir to, const char *dst, const char *name,
                     const struct stat *st)
{
        const char *what = S_ISDIR(st->st_mode) ? "a directory" : "a file";
        char alt[NAME_MAX + 1], q[300];

        log_quote(name, q, sizeof(q));
        store_dirty(sp, to);
        store_dirty(sp, SD_HANDOFF);
        if (renameat2(sp->fd[to], dst, sp->fd[SD_HANDOFF], name, RENAME_NOREPLACE) == 0) {
                log_notice("Returned %s to handoff/: %s swapped in under its name after the look, "
                           "not what was decided on", q, what);
                return;
        }
        snprintf(alt, sizeof(alt), ".returned.%llu", (unsigned long long)st->st_ino);
        if (renameat2(sp->fd[to], dst, sp->fd[SD_HANDOFF], alt, RENAME_NOREPLACE) == 0) {
                log_notice("Returned %s to handoff/%s: %s swapped in under its name after the look, "
                           "not what was decided on", q, alt, what);
                return;
        }
        spool_error(sp, errno, "Cannot return %s/%s (%s swapped in for %s) to handoff/",
                    spool_dir_names[to], dst, what, q);
}

/* handoff/name has just been moved by name to to/dst (linked: a link was
 * made there).  Linux cannot move a file by its descriptor, and between the
 * look and the move the name's owner may swap in another file or a
 * directory of hers (renameat2(RENAME_EXCHANGE) on her own names in the
 * sticky handoff/).  What arrived must be the inode decided on (was; NULL:
 * any) and not a directory: no state directory holds one, since the reaper
 * and retention remove files only.  Otherwise the move is undone: our link
 * removed, or the renamed one put back. 0 if it is what was decided on;
 * -ENOENT if was has left the name; -EISDIR if was is a directory. */
static int arrived_as(struct spool *sp, const char *name, const struct spool_ino *was,
                      enum spool_dir to, const char *dst, bool linked, const struct stat *st)
{
        if (!S_ISDIR(st->st_mode) && (!was || same_ino(st, was)))
                return 0;
        if (linked) {
                if (unlinkat(sp->fd[to], dst, 0) < 0)
                        return -errno;
        } else {
                put_back(sp, to, dst, name, st);
        }
        return S_ISDIR(st->st_mode) && (!was || same_ino(st, was)) ? -EISDIR : -ENOENT;
}

int store_arrived(struct spool *sp, const char *name, const struct spool_ino *was,
                  enum spool_dir to, const char *dst, bool linked)
{
        struct stat st;

        if (fstatat(sp->fd[to], dst, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        return arrived_as(sp, name, was, to, dst, linked, &st);
}

/* handoff/name goes if it is still the file was: names get reused.  0,
 * or -ENOENT when the name did not hold was (it is left as it is). */
int store_leave_name(struct spool *sp, const char *name, const struct spool_ino *was, bool spent)
{
        char sname[32];
        struct stat st;
        int r;

        /* A claim's producer file (spent) moves to spent/, named by its
         * inode, which is unique while it lives.  It is not unlinked:
         * the unlink would free the inode (a move's other link keeps it),
         * and on ext4 inodes freed in a burst make the next creations
         * dearer (the allocator skips inodes freed lately).
         * store_reap_spent() frees them once intake is quiet.  The move
         * is not synced: a power cut that undoes it brings the file back
         * to handoff/, where its record makes it a claim's leftover, and
         * one kept in both places is known by its link in spent/.  It is
         * moved first and looked at after: arrived_as() judges whatever
         * else the name held by then.  Every daemon on the spool
         * empties spent/ (store_reap_spent(), without a lock), so what the
         * move took may be gone before the look: not known then, and as
         * claimed.  Withdrawn, the claim would lose the item: the
         * producer's name is gone, and with it her file. */
        if (spent && xsnprintf(sname, sizeof(sname), "%llu", (unsigned long long)was->ino) >= 0) {
                if (renameat2(sp->fd[SD_HANDOFF], name, sp->fd[SD_SPENT], sname,
                              RENAME_NOREPLACE) == 0) {
                        store_dirty(sp, SD_HANDOFF);
                        if (fstatat(sp->fd[SD_SPENT], sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                return 0;
                        r = arrived_as(sp, name, was, SD_SPENT, sname, false, &st);
                        if (r == -ENOENT)
                                return r;
                        if (r < 0)
                                return 0;       /* what arrived is not known: as claimed */
                        sp->spent.waiting = true;
                        sp->spent.at = mono_usec();
                        return 0;
                }
                if (errno == ENOENT)
                        return -ENOENT;
        }
        /* By name, if still was: what a swap brings here instead is a
         * file of the name's owner (sticky handoff/); a directory is not
         * unlinked. */
        if (fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !same_ino(&st, was))
                return -ENOENT;
        (void) store_remove(sp, SD_HANDOFF, name);
        return 0;
}

int store_remove(struct spool *sp, enum spool_dir dir, const char *name)
{
        if (unlinkat(sp->fd[dir], name, 0) < 0)
                return -errno;
        store_dirty(sp, dir);
        return 0;
}

/* What store_take() linked elsewhere, and the producers' files of
 * claims (store_drop_source()), leave handoff/ now that the other
 * directories are synced. */
static void leave_handoff(struct spool *sp)
{
        struct leaving_entry *e, *nx;

        DICT_FOREACH_SAFE(e, nx, &sp->leaving) {
                (void) store_leave_name(sp, dict_key(e), &e->was, e->spent);
                dict_remove(&sp->leaving, e);
        }
}

/* spent/name cannot be removed (err), so it is not a producer's file: it
 * is a directory an earlier version's move by name let a swap bring here,
 * or one the file system keeps.  Leave it there and say so once.  A reaper
 * that stopped at it would leave everything after it in spent/ for good. */
static void spent_skip(struct spool *sp, const char *name, int err)
{
        if (dict_get(&sp->spent.skipped, name))
                return;
        if (dict_count(&sp->spent.skipped) >= SPOOL_SPENT_SKIPPED_MAX) {
                if (!dict_get(&sp->spent.skipped, ""))
                        log_warning("More entries of spent/ cannot be freed; not reported one by one");
                (void)dict_put(&sp->spent.skipped, "", NULL);
                return;
        }
        (void)dict_put(&sp->spent.skipped, name, NULL);
        log_warning_errno(err, "Cannot free spent/%s, not a producer's file; left there for the "
                          "operator, the rest is freed", name);
}

int store_reap_spent(struct spool *sp, int64_t budget_usec, bool *ret_more)
{
        int64_t t0 = mono_usec();
        struct dirent *de;
        bool more = false;
        int r = 0;
        DIR *d;

        d = opendir_at(sp->fd[SD_SPENT]);
        if (!d)
                return -errno;
        for (;;) {
                errno = 0;
                de = readdir(d);
                if (!de) {
                        r = -errno;
                        break;
                }
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (mono_usec() - t0 > budget_usec) {
                        more = true;
                        break;
                }
                if (unlinkat(sp->fd[SD_SPENT], de->d_name, 0) < 0 && errno != ENOENT)
                        spent_skip(sp, de->d_name, errno);
        }
        closedir(d);
        if (r < 0)
                return r;
        if (!more)
                sp->spent.waiting = false;
        *ret_more = more;
        return 0;
}

bool store_leaving(struct spool *sp, const char *name, const struct stat *st)
{
        const struct leaving_entry *e = dict_get(&sp->leaving, name);

        return e && same_ino(st, &e->was);
}

size_t store_leaving_count(const struct spool *sp)
{
        return dict_count(&sp->leaving);
}

void store_dirty(struct spool *sp, enum spool_dir dir)
{
        sp->dirty[dir] = true;
}

void store_dirty_agent(struct agent_rt *a)
{
        a->dirty = true;
}

bool store_agent_take_dirty(struct agent_rt *a)
{
        bool was = a->dirty;

        a->dirty = false;
        return was;
}

/* handoff/name, the inode (dev, ino), leaves in store_flush(); spent:
 * a claim's producer file (leave_name()).  Not noted (no memory): the
 * name stays in handoff/, where the next look finds it moved already. */
void store_leaving_note(struct spool *sp, const char *name, dev_t dev, ino_t ino, bool spent)
{
        struct leaving_entry *e = dict_put(&sp->leaving, name, NULL);

        if (e)
                *e = (struct leaving_entry){ .was = { .dev = dev, .ino = ino }, .spent = spent };
}

/* The round of a directory's sync: a move is a change in two
 * directories, and the one it goes to is synced before the one it leaves
 * (claims leave handoff/ for claimed/, claimed/ is left for archive/ and
 * rejected/, outbox/ likewise after the PubAck or the expiry), so a power
 * cut between the two leaves the item in both, never in neither.  Every
 * sync of a directory a move leaves takes its turn here: a sync of
 * claimed/ alone (a publish after a restart, a leftover's other link)
 * would make an archive's removal from claimed/ durable before its
 * arrival in archive/. */
static int sync_round(enum spool_dir d)
{
        return d == SD_HANDOFF ? 2 : d == SD_CLAIMED || d == SD_OUTBOX ? 1 : 0;
}

/* Back-off of a failed directory sync: 1 s, 2 s, 4 s ... at most a minute. */
#define SYNC_BACKOFF_MIN_USEC 1000000LL
#define SYNC_BACKOFF_MAX_USEC (60 * 1000000LL)

/* One directory a round syncs: a spool directory (agent NULL) or an
 * agent's handoffs/. */
struct sync_target {
        enum spool_dir dir;
        struct agent_rt *agent;
};

static bool *target_failed(struct spool *sp, const struct sync_target *t)
{
        return t->agent ? &t->agent->sync_failed : &sp->sync_fail.dir[t->dir];
}

static bool *target_dirty(struct spool *sp, const struct sync_target *t)
{
        return t->agent ? &t->agent->dirty : &sp->dirty[t->dir];
}

static void target_name(const struct sync_target *t, char *buf, size_t n)
{
        if (t->agent)
                snprintf(buf, n, "the handoffs/ of %s", t->agent->cfg->name);
        else
                snprintf(buf, n, "%s/", spool_dir_names[t->dir]);
}

static bool any_failed(const struct spool *sp)
{
        if (sp->sync_fail.files)
                return true;
        for (int i = 0; i < _SD_MAX; i++)
                if (sp->sync_fail.dir[i])
                        return true;
        for (size_t i = 0; i < sp->n_agents; i++)
                if (sp->agents[i].sync_failed)
                        return true;
        return false;
}

/* After the rounds: a new failure said once, a failed retry backed off
 * unsaid, the recovery said once; the retry is a deadline of the daemon's
 * timer (whose sweep ends in store_flush()). */
static void sync_settle(struct spool *sp, int err, const char *first, int64_t now)
{
        struct spool_sync_fail *f = &sp->sync_fail;

        if (err < 0 && f->err == 0) {
                f->err = err;
                f->tries = 1;
                f->backoff = SYNC_BACKOFF_MIN_USEC;
                snprintf(f->what, sizeof(f->what), "%s", first);
                spool_error(sp, err, "Cannot fsync %s: what it holds is not durable, and the "
                            "syncs after it wait (the moves stay undone on disk in their "
                            "sources); trying again, backing off to 60 s", first);
        } else if (err < 0) {
                f->tries++;
                f->backoff = f->backoff * 2 > SYNC_BACKOFF_MAX_USEC ? SYNC_BACKOFF_MAX_USEC
                                                                   : f->backoff * 2;
        } else if (f->err && !any_failed(sp)) {
                log_notice("fsync of %s succeeded again after %u failed tries", f->what, f->tries);
                *f = (struct spool_sync_fail){ 0 };
                return;
        }
        if (err < 0)
                f->retry_at = now + f->backoff;
        if (f->err)
                deadline_note(&sp->due, f->retry_at);
}

int store_sync_later(struct spool *sp, enum spool_dir dir, int fd)
{
        struct spool_later *l = &sp->later;
        int r = 0;

        if (fd < 0)
                return 0;
        if (sp->cfg->fsync && l->n < SPOOL_LATER_MAX) {
                l->fd[l->n] = fd;
                l->dir[l->n++] = (unsigned char)dir;
                return 0;
        }
        if (sp->cfg->fsync && fsync(fd) < 0)
                r = -errno;
        close(fd);
        return r;
}

/* The files of store_sync_later(), synced together before any directory
 * of the rounds: a name the rounds make durable is never an empty file
 * after a power cut.  Those that fail stay for the retry (held until it
 * is due) and hold the rounds; the rest are closed.  0 or the first
 * -errno, its file's directory named in first. */
static int flush_files(struct spool *sp, bool due, char *first, size_t n_first, int *tried)
{
        struct spool_later *l = &sp->later;
        int rets[SPOOL_LATER_MAX];
        size_t keep = 0;
        int r = 0;

        if (l->n == 0)
                return 0;
        if (sp->sync_fail.files && !due)
                return sp->sync_fail.err;
        *tried += (int)l->n;
        (void)fsync_many_at(l->fd, NULL, l->n, rets);
        for (size_t i = 0; i < l->n; i++) {
                if (rets[i] == 0) {
                        close(l->fd[i]);
                        continue;
                }
                if (r == 0) {
                        r = rets[i];
                        snprintf(first, n_first, "a file in %s/", spool_dir_names[l->dir[i]]);
                }
                l->fd[keep] = l->fd[i];
                l->dir[keep++] = l->dir[i];
        }
        l->n = keep;
        sp->sync_fail.files = keep > 0;
        return r;
}

/* Sync the dirty directories of rounds 0..last, each round's together
 * (fsync_many_at(): they share the device's flushes), and the agents'
 * handoffs/ (with agents) with round 0.  With leave, the producers' names
 * that wait for their moves' syncs leave handoff/ before its round.  A
 * directory whose fsync fails stays dirty, and the rounds after it do not
 * run: their syncs would make a move's removal from its source durable
 * before its arrival.  Until its retry is due, a failed directory is not
 * tried again and holds its round back as a failure would. */
static int flush_rounds(struct spool *sp, int last, bool leave, bool agents)
{
        struct sync_target t[SPOOL_FLUSH_AGENTS_MAX + _SD_MAX];
        int fds[SPOOL_FLUSH_AGENTS_MAX + _SD_MAX], rets[SPOOL_FLUSH_AGENTS_MAX + _SD_MAX];
        int64_t now = hd_now_usec();
        bool due = sp->sync_fail.err == 0 || now >= sp->sync_fail.retry_at;
        char first[NAME_MAX + 16] = "";
        int r = 0, tried = 0;

        if (!sp->cfg->fsync) {
                /* nothing to sync: the names that wait for it go at once */
                for (size_t i = 0; i < sp->later.n; i++)
                        close(sp->later.fd[i]);     /* fsync turned off by a reload */
                sp->later.n = 0;
                sp->sync_fail.files = false;
                if (leave && last >= 2)
                        leave_handoff(sp);
                for (size_t i = 0; agents && i < sp->n_agents; i++)
                        sp->agents[i].dirty = false;
                for (int i = 0; i < _SD_MAX; i++)
                        if (sync_round(i) <= last)
                                sp->dirty[i] = false;
                return 0;
        }
        r = flush_files(sp, due, first, sizeof(first), &tried);
        for (int round = 0; round <= last && r == 0; round++) {
                size_t n = 0;
                bool held = false;

                if (round == 2 && leave)
                        leave_handoff(sp);
                for (size_t i = 0; round == 0 && agents && i < sp->n_agents; i++) {
                        struct agent_rt *a = &sp->agents[i];

                        if (!a->dirty)
                                continue;
                        if (a->sync_failed && !due) {
                                held = true;
                                continue;
                        }
                        if (n == SPOOL_FLUSH_AGENTS_MAX) {
                                /* beyond the array, one by one */
                                struct sync_target one = { .agent = a };
                                int q = fsync_dir(a->handoffs_fd);

                                tried++;
                                a->dirty = a->sync_failed = q < 0;
                                if (q < 0 && r == 0) {
                                        r = q;
                                        target_name(&one, first, sizeof(first));
                                }
                                continue;
                        }
                        t[n] = (struct sync_target){ .agent = a };
                        fds[n++] = a->handoffs_fd;
                }
                for (int i = 0; i < _SD_MAX; i++) {
                        if (sync_round(i) != round || !sp->dirty[i])
                                continue;
                        if (sp->sync_fail.dir[i] && !due) {
                                held = true;
                                continue;
                        }
                        t[n] = (struct sync_target){ .dir = (enum spool_dir)i };
                        fds[n++] = sp->fd[i];
                }
                if (n > 0) {
                        tried += (int)n;
                        (void)fsync_many_at(fds, NULL, n, rets);
                }
                for (size_t k = 0; k < n; k++) {
                        *target_dirty(sp, &t[k]) = *target_failed(sp, &t[k]) = rets[k] < 0;
                        if (rets[k] < 0 && r == 0) {
                                r = rets[k];
                                target_name(&t[k], first, sizeof(first));
                        }
                }
                if (r == 0 && held)
                        r = sp->sync_fail.err;
        }
        /* Only a try changes the back-off; a held round leaves it as it is. */
        if (tried > 0 || r == 0)
                sync_settle(sp, first[0] ? r : 0, first, now);
        else if (sp->sync_fail.err)
                deadline_note(&sp->due, sp->sync_fail.retry_at);
        return r;
}

int store_sync_dir(struct spool *sp, enum spool_dir dir)
{
        if (!sp->cfg->fsync)
                return 0;
        sp->dirty[dir] = true;
        return flush_rounds(sp, sync_round(dir), false, false);
}

int store_flush(struct spool *sp)
{
        int r = 0, q;

        if (sp->relay.flush && (q = sp->relay.flush(sp->relay.ctx)) < 0)
                r = q;
        q = flush_rounds(sp, 2, r == 0, true);
        if (r == 0 && q == 0 && sp->relay.synced)
                sp->relay.synced(sp->relay.ctx);
        return r < 0 ? r : q;
}
