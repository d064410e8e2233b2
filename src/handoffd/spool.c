/* The spool as storage: its state directories and the agents' directories
 * (opened relative to held fds, refused when a link or group-writable),
 * listing, moves into rejected/ with the reason files, the replay memory
 * ids/, the directory syncs, and the status record of system errors.  It
 * decides nothing and calls no module above it: intake.c, delivery.c and
 * lifecycle.c make the decisions and call down here. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "layout.h"
#include "lock.h"
#include "log.h"
#include "spool.h"

/* Agents' handoffs/ synced together by spool_flush(); more, one by one. */
#define SPOOL_FLUSH_AGENTS_MAX 16
/* rejected/NAME, NAME~1 ... NAME~999: a rejection's names. */
#define SPOOL_REJECT_NAMES 1000
/* Entries of spent/ the reaper cannot remove, reported one by one. */
#define SPOOL_SPENT_SKIPPED_MAX 64

const char *const spool_dir_names[_SD_MAX] = {
        [SD_TMP] = "tmp",
        [SD_HANDOFF] = "handoff",
        [SD_CLAIMED] = "claimed",
        [SD_ARCHIVE] = "archive",
        [SD_REJECTED] = "rejected",
        [SD_IDS] = "ids",
        [SD_BATON] = "baton",
        [SD_OUTBOX] = "outbox",
        [SD_SPENT] = "spent",
        [SD_QUOTA] = "quota",
        [SD_CANCEL] = "cancel",
};


int spool_error(struct spool *sp, int err, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        int n;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        n = snprintf(sp->st.last_error, sizeof(sp->st.last_error), "%.*s",
                     (int)sizeof(sp->st.last_error) - 1, msg);
        if (err && n >= 0 && (size_t)n < sizeof(sp->st.last_error))
                snprintf(sp->st.last_error + n, sizeof(sp->st.last_error) - (size_t)n,
                         ": %s", strerror(err < 0 ? -err : err));
        sp->st.last_error_usec = hd_now_usec();
        sp->st.errors++;
        return log_error_errno(err, "%s", msg);
}

static void agents_close(struct spool *sp)
{
        for (size_t i = 0; i < sp->n_agents; i++)
                agent_rt_close(&sp->agents[i]);
        free(sp->agents);
        sp->agents = NULL;
        sp->n_agents = 0;
}

/* Open every agent of cfg.  On failure the agents in use stay as they
 * were. */
static int agents_open(struct spool *sp, struct config *cfg)
{
        _cleanup_json_ json_t *unserved = json_object();
        struct agent_rt *a;
        struct stat st;
        size_t n;
        int r;

        if (!unserved)
                return -ENOMEM;
        if (fstat(sp->fd[SD_HANDOFF], &st) < 0)
                return log_error_errno(errno, "Cannot stat '%s/handoff'", cfg->spool_dir);
        r = agents_open_all(cfg, st.st_gid, false, unserved, &a, &n, NULL);
        if (r < 0)
                return r;
        agents_close(sp);
        sp->agents = a;
        sp->n_agents = n;
        json_decref(sp->unserved);
        sp->unserved = json_incref(unserved);
        return 0;
}

int spool_check(struct config *cfg, struct agents_count *ret)
{
        _cleanup_close_ int root = -1, hd = -1;
        struct agent_rt *a;
        struct stat st;
        gid_t shared;
        size_t n;
        int r;

        /* The spool's group: that of handoff/, or the one the start would
         * give it (the spool's if setgid, else ours). */
        r = open_dir_look(AT_FDCWD, cfg->spool_dir, &root);
        if (r == -ELOOP || r == -ENOTDIR)
                return log_error_errno(r, "Cannot open spool '%s'", cfg->spool_dir);
        if (r == 0)
                r = open_dir_look(root, spool_dir_names[SD_HANDOFF], &hd);
        if (r == 0 && fstat(hd, &st) == 0)
                shared = st.st_gid;
        else if (root >= 0 && fstat(root, &st) == 0 && (st.st_mode & S_ISGID))
                shared = st.st_gid;
        else
                shared = getegid();
        return agents_open_all(cfg, shared, true, NULL, &a, &n, ret);
}

static bool dir_is_empty_at(int dirfd)
{
        struct dirent *de;
        bool empty = true;
        DIR *d = opendir_at(dirfd);

        if (!d)
                return false;
        while (empty && (de = readdir(d)))
                empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
        closedir(d);
        return empty;
}

int spool_open(struct config *cfg, struct spool **ret)
{
        struct spool *sp;
        int r;

        sp = calloc(1, sizeof(*sp));
        if (!sp)
                return -ENOMEM;
        sp->root_fd = sp->lock_fd = -1;
        for (int i = 0; i < _SD_MAX; i++)
                sp->fd[i] = -1;
        dict_init(&sp->foreign, sizeof(struct foreign_entry));
        dict_init(&sp->seen, sizeof(struct seen_entry));
        dict_init(&sp->dirs, sizeof(ino_t));
        dict_init(&sp->leaving, sizeof(struct leaving_entry));
        dict_init(&sp->spent_skipped, 0);
        dict_init(&sp->verified, sizeof(struct verified_entry));
        dict_init(&sp->results_recent, sizeof(struct result_recent));
        sp->failed = json_object();
        if (!sp->failed) {
                r = -ENOMEM;
                goto fail;
        }
        sp->quota_recount = true;
        sp->cfg = cfg;
        sp->st.started_usec = hd_now_usec();
        r = open_dir_at(AT_FDCWD, cfg->spool_dir, 0750, &sp->root_fd, NULL);
        if (r < 0) {
                log_error_errno(r, "Cannot open spool '%s'", cfg->spool_dir);
                goto fail;
        }
        r = lock_open(sp->root_fd, &sp->lock_fd);
        if (r < 0) {
                log_error_errno(r, "Cannot open '%s/.lock'", cfg->spool_dir);
                goto fail;
        }
        for (int i = 0; i < _SD_MAX; i++) {
                /* Producers (group members) create files in tmp/ and
                 * handoff/, senders their cancel requests in cancel/;
                 * setgid keeps the spool's group on them, sticky keeps
                 * one producer from deleting another's (the daemon owns
                 * the directory, so it may still move them).  The same
                 * modes as systemd/handoffd.tmpfiles. */
                mode_t m = (i == SD_TMP || i == SD_HANDOFF || i == SD_CANCEL) ? 03770 :
                           (i == SD_SPENT || i == SD_QUOTA) ? 0700 : 0750;
                r = open_dir_at(sp->root_fd, spool_dir_names[i], m, &sp->fd[i], NULL);
                if (r < 0) {
                        log_error_errno(r, "Cannot open '%s/%s'", cfg->spool_dir,
                                        spool_dir_names[i]);
                        goto fail;
                }
        }
        r = agents_open(sp, cfg);
        if (r < 0)
                goto fail;
        /* What spent/ holds from before: reaped once the loop runs. */
        sp->spent_waiting = !dir_is_empty_at(sp->fd[SD_SPENT]);
        *ret = sp;
        return 0;
fail:
        spool_close(sp);
        return r;
}

int spool_set_config(struct spool *sp, struct config *cfg)
{
        int r = agents_open(sp, cfg);
        if (r < 0)
                return r;
        sp->cfg = cfg;
        /* Keys and agents may have changed: every item is verified again,
         * and counted again (a limit may be new). */
        dict_clear(&sp->verified);
        sp->quota_recount = true;
        return 0;
}

void spool_close(struct spool *sp)
{
        if (!sp)
                return;
        agents_close(sp);
        for (int i = 0; i < _SD_MAX; i++)
                if (sp->fd[i] >= 0)
                        close(sp->fd[i]);
        if (sp->root_fd >= 0)
                close(sp->root_fd);
        if (sp->lock_fd >= 0)
                close(sp->lock_fd);
        dict_clear(&sp->foreign);
        json_decref(sp->unserved);
        json_decref(sp->failed);
        dict_clear(&sp->seen);
        dict_clear(&sp->dirs);
        dict_clear(&sp->leaving);
        dict_clear(&sp->spent_skipped);
        dict_clear(&sp->verified);
        dict_clear(&sp->results_recent);
        if (sp->sweep.dir)
                closedir(sp->sweep.dir);
        free(sp);
}

struct agent_rt *spool_agent(struct spool *sp, const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < sp->n_agents; i++)
                if (!strcmp(sp->agents[i].cfg->name, name))
                        return &sp->agents[i];
        return NULL;
}

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
        sp->dirty[to] = sp->dirty[SD_HANDOFF] = true;
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

/* handoff/name has just been moved to to/dst by name (linked: a link made
 * there).  Linux moves no file by its descriptor, and between the look
 * and the move the name's owner may swap in another file or a directory
 * of hers (renameat2(RENAME_EXCHANGE) on her own names in the sticky
 * handoff/): what arrived must be the inode decided on (was; NULL: any),
 * and never a directory, which no state directory holds (the reaper and
 * retention remove files; a directory stays for good).  Else it is undone:
 * our link removed, a renamed one put back.  0: it is what was decided on;
 * -ENOENT: was has left the name; -EISDIR: was is a directory. */
static int move_arrived(struct spool *sp, const char *name, const struct spool_ino *was,
                        enum spool_dir to, const char *dst, bool linked)
{
        struct stat st;

        if (fstatat(sp->fd[to], dst, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode) && (!was || same_ino(&st, was)))
                return 0;
        if (linked) {
                if (unlinkat(sp->fd[to], dst, 0) < 0)
                        return -errno;
        } else {
                put_back(sp, to, dst, name, &st);
        }
        return S_ISDIR(st.st_mode) && (!was || same_ino(&st, was)) ? -EISDIR : -ENOENT;
}

/* handoff/name goes if it is still the file was: names get reused. */
static void leave_name(struct spool *sp, const char *name, const struct spool_ino *was, bool spent)
{
        char sname[32];
        struct stat st;

        if (fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !same_ino(&st, was))
                return;
        /* A claim's (spent): moved to spent/ (named by its inode, unique
         * while it lives), not unlinked: the unlink would free the inode
         * (a move's other link keeps it), and freeing inodes in a burst
         * makes the next creations dearer on ext4 without a journal (the
         * allocator skips inodes freed in the last minute, reading their
         * table blocks: recently_deleted(), 3x the floor's start-up with a
         * 100k backlog), so spool_reap_spent() frees them once intake is
         * quiet.  Not synced: a move lost by a power cut brings the file
         * back to handoff/, where its record makes it a claim's leftover;
         * one kept in both is recognised by its link in spent/. */
        if (spent) {
                if (xsnprintf(sname, sizeof(sname), "%llu", (unsigned long long)st.st_ino) >= 0 &&
                    renameat2(sp->fd[SD_HANDOFF], name, sp->fd[SD_SPENT], sname,
                              RENAME_NOREPLACE) == 0) {
                        sp->dirty[SD_HANDOFF] = true;
                        if (move_arrived(sp, name, was, SD_SPENT, sname, false) < 0)
                                return;
                        sp->spent_waiting = true;
                        sp->spent_at = mono_usec();
                        return;
                }
        }
        /* By name too: what a swap brings here instead is a file of the
         * name's owner (sticky handoff/), a directory is not unlinked. */
        if (unlinkat(sp->fd[SD_HANDOFF], name, 0) == 0)
                sp->dirty[SD_HANDOFF] = true;
}

/* What spool_move_out() linked elsewhere, and the producers' files of
 * claims (spool_drop_source()), leave handoff/ now that the other
 * directories are synced. */
static void leave_handoff(struct spool *sp)
{
        struct leaving_entry *e, *nx;

        DICT_FOREACH_SAFE(e, nx, &sp->leaving) {
                leave_name(sp, dict_key(e), &e->was, e->spent);
                dict_remove(&sp->leaving, e);
        }
}

/* spent/name cannot be removed (err): not a producer's file (a directory
 * an earlier version's move by name let a swap bring here, or one the
 * file system keeps).  Left there and said once: a reaper that stopped
 * at it would leave everything after it in spent/ for good. */
static void spent_skip(struct spool *sp, const char *name, int err)
{
        if (dict_get(&sp->spent_skipped, name))
                return;
        if (dict_count(&sp->spent_skipped) >= SPOOL_SPENT_SKIPPED_MAX) {
                if (!dict_get(&sp->spent_skipped, ""))
                        log_warning("More entries of spent/ cannot be freed; not reported one by one");
                (void)dict_put(&sp->spent_skipped, "", NULL);
                return;
        }
        (void)dict_put(&sp->spent_skipped, name, NULL);
        log_warning_errno(err, "Cannot free spent/%s, not a producer's file; left there for the "
                          "operator, the rest is freed", name);
}

int spool_reap_spent(struct spool *sp, int64_t budget_usec)
{
        int64_t t0 = mono_usec();
        struct dirent *de;
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
                        r = 1;
                        break;
                }
                if (unlinkat(sp->fd[SD_SPENT], de->d_name, 0) < 0 && errno != ENOENT)
                        spent_skip(sp, de->d_name, errno);
        }
        closedir(d);
        if (r == 0)
                sp->spent_waiting = false;
        return r;
}

bool spool_leaving(struct spool *sp, const char *name, const struct stat *st)
{
        const struct leaving_entry *e = dict_get(&sp->leaving, name);

        return e && same_ino(st, &e->was);
}

/* handoff/name, the inode (dev, ino), leaves in spool_flush(); spent:
 * a claim's producer file (leave_name()).  Not noted (no memory): the
 * name stays in handoff/, where the next look finds it moved already. */
static void leaving_note(struct spool *sp, const char *name, dev_t dev, ino_t ino, bool spent)
{
        struct leaving_entry *e = dict_put(&sp->leaving, name, NULL);

        if (e)
                *e = (struct leaving_entry){ .was = { .dev = dev, .ino = ino }, .spent = spent };
}

/* spool_move_out(); link_first: a link, the name in handoff/ left until
 * the next spool_flush(), where one can be made. */
static int move_out(struct spool *sp, const char *name, const struct spool_ino *was,
                    enum spool_dir to, const char *dst, bool link_first)
{
        struct stat st;
        int r;

        /* What is plainly not to be moved is not, without a move and a
         * return (move_arrived() settles a swap after this look). */
        if (fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (was && !same_ino(&st, was))
                return -ENOENT;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (link_first) {
                if (linkat(sp->fd[SD_HANDOFF], name, sp->fd[to], dst, 0) == 0) {
                        r = move_arrived(sp, name, was, to, dst, true);
                        if (r < 0)
                                return r;
                        sp->dirty[to] = true;
                        if (fstatat(sp->fd[to], dst, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                return -errno;
                        leaving_note(sp, name, st.st_dev, st.st_ino, false);
                        return 0;
                }
                /* EPERM: fs.protected_hardlinks and a producer's file the
                 * daemon may not write, or a directory; EXDEV, ENOSYS...:
                 * no links.  Then a rename, as without fsync. */
                if (errno == EEXIST || errno == ENOENT)
                        return -errno;
        }
        r = move_noreplace(sp->fd[SD_HANDOFF], name, sp->fd[to], dst);
        if (r < 0)
                return r;
        sp->dirty[SD_HANDOFF] = sp->dirty[to] = true;
        return move_arrived(sp, name, was, to, dst, false);
}

int spool_move_out(struct spool *sp, const char *name, const struct spool_ino *was,
                   enum spool_dir to, const char *dst)
{
        return move_out(sp, name, was, to, dst, sp->cfg->fsync);
}

void spool_drop_source(struct spool *sp, const char *name, dev_t dev, ino_t ino)
{
        struct spool_ino was = { .dev = dev, .ino = ino };

        if (sp->cfg->fsync)
                leaving_note(sp, name, dev, ino, true);
        else
                leave_name(sp, name, &was, true);
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

/* The dirty directories of rounds 0..last, each round's together
 * (fsync_many_at(): they share the device's flushes), the first n of fds
 * (the agents' handoffs/) with round 0; leave: the producers' names that
 * wait for their moves' syncs leave handoff/ before its round.  fds has
 * room for n + _SD_MAX. */
static int flush_rounds(struct spool *sp, int last, bool leave, int *fds, size_t n)
{
        int rets[SPOOL_FLUSH_AGENTS_MAX + _SD_MAX];
        int r = 0, q;

        for (int round = 0; round <= last; round++, n = 0) {
                if (round == 2 && leave && r == 0)
                        leave_handoff(sp);
                for (int i = 0; i < _SD_MAX; i++) {
                        if (sync_round(i) != round || !sp->dirty[i])
                                continue;
                        sp->dirty[i] = false;
                        if (sp->cfg->fsync)
                                fds[n++] = sp->fd[i];
                }
                if (n > 0 && (q = fsync_many_at(fds, NULL, n, rets)) < 0 && r == 0)
                        r = q;
        }
        return r;
}

int spool_sync_dir(struct spool *sp, enum spool_dir dir)
{
        if (!sp->cfg->fsync)
                return 0;
        int fds[_SD_MAX];

        sp->dirty[dir] = true;
        return flush_rounds(sp, sync_round(dir), false, fds, 0);
}

int spool_flush(struct spool *sp)
{
        int fds[_SD_MAX + SPOOL_FLUSH_AGENTS_MAX];
        size_t n = 0;
        int r = 0, q;

        if (sp->relay.flush && (q = sp->relay.flush(sp->relay.ctx)) < 0)
                r = q;
        /* The dirty directories are synced together (fsync_many_at()), so
         * they share the device's flushes; beyond the array, one by one. */
        for (size_t i = 0; i < sp->n_agents; i++)
                if (sp->agents[i].dirty) {
                        sp->agents[i].dirty = false;
                        if (!sp->cfg->fsync)
                                continue;
                        if (n < SPOOL_FLUSH_AGENTS_MAX)
                                fds[n++] = sp->agents[i].handoffs_fd;
                        else if ((q = fsync_dir(sp->agents[i].handoffs_fd)) < 0 && r == 0)
                                r = q;
                }
        q = flush_rounds(sp, 2, r == 0, fds, n);
        return r < 0 ? r : q;
}

static bool same_inode(int dirfd, const char *name, const struct stat *a)
{
        struct stat b;

        return fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
               b.st_dev == a->st_dev && b.st_ino == a->st_ino;
}

bool spool_find_link(int dirfd, const char *name, const struct stat *a, char *found, size_t n)
{
        struct dirent *de;
        bool ok = false;
        DIR *d;

        if (dirfd < 0)
                return false;
        if (name && same_inode(dirfd, name, a))
                return xsnprintf(found, n, "%s", name) >= 0;
        if (!(d = opendir_at(dirfd)))
                return false;
        while (!ok && (de = readdir(d)))
                if (de->d_ino == a->st_ino && de->d_name[0] != '.' &&
                    same_inode(dirfd, de->d_name, a))
                        ok = xsnprintf(found, n, "%s", de->d_name) >= 0;
        closedir(d);
        return ok;
}

/* A name that can live in rejected/: unsafe bytes become '_'. */
static void name_sanitize(const char *in, char *out, size_t n)
{
        size_t o = 0;

        for (; *in && o + 1 < n && o < 200; in++) {
                unsigned char c = (unsigned char)*in;
                out[o++] = (c < 0x21 || c == 0x7f || c == '/' || c >= 0x80) ? '_' : (char)c;
        }
        out[o] = '\0';
        if (o == 0 || !strcmp(out, ".") || !strcmp(out, ".."))
                snprintf(out, n, "unnamed");
        if (out[0] == '.')
                out[0] = '_';
}

static struct spool_kept *kept_find(struct spool *sp, const struct stat *a)
{
        for (size_t i = 0; i < SPOOL_KEPT_MAX; i++)
                if (sp->kept[i].ino == a->st_ino && sp->kept[i].dev == a->st_dev)
                        return &sp->kept[i];
        return NULL;
}

/* The file (dev, ino) is kept as dir/name: its further names in handoff/
 * go by kept_find().  The oldest entry makes room. */
static void kept_note(struct spool *sp, dev_t dev, ino_t ino, enum spool_dir dir,
                      const char *name, bool synced)
{
        struct spool_kept *k = kept_find(sp, &(struct stat) { .st_dev = dev, .st_ino = ino });

        if (strlen(name) > NAME_MAX)
                return;
        if (!k) {
                k = &sp->kept[sp->kept_next];
                sp->kept_next = (sp->kept_next + 1) % SPOOL_KEPT_MAX;
        }
        *k = (struct spool_kept) { .dev = dev, .ino = ino, .dir = dir, .synced = synced };
        memcpy(k->name, name, strlen(name) + 1);
}

/* handoff/name goes, its other link in dir synced first. */
static bool drop_beside(struct spool *sp, const char *name, enum spool_dir dir, bool *synced)
{
        if (!*synced && spool_sync_dir(sp, dir) < 0)
                return false;
        *synced = true;
        if (unlinkat(sp->fd[SD_HANDOFF], name, 0) < 0)
                return false;
        sp->dirty[SD_HANDOFF] = true;
        return true;
}

/* dir/other is a's other link, where the daemon put it: handoff/name
 * goes, a power cut's leftover; further names of a go as kept. */
static bool drop_leftover(struct spool *sp, const char *name, const struct stat *a,
                          enum spool_dir dir, const char *other, const char *what)
{
        bool synced = false;
        char q[300];

        if (!drop_beside(sp, name, dir, &synced))
                return false;
        log_info("Removed handoff/%s, left beside its %s by a power cut",
                 log_quote(name, q, sizeof(q)), what);
        kept_note(sp, a->st_dev, a->st_ino, dir, other, true);
        (void) spool_flush(sp);
        return true;
}

static bool leftover_stat(struct spool *sp, const char *name, struct stat *a)
{
        return fstatat(sp->fd[SD_HANDOFF], name, a, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISREG(a->st_mode) && a->st_nlink >= 2;
}

/* handoff/name was moved to rejected/dst, and a crash may have come
 * between the move and its outcome (spool_reject_from()): the outcome
 * again, from the reason.  Told twice, it is one receipt (receipt.c
 * writes the one a final outcome owes, once). */
static void reject_outcome_again(struct spool *sp, const char *name, const char *dst)
{
        char rsn[NAME_MAX + 16];
        _cleanup_json_ json_t *o = NULL;
        hd_verdict v;

        if (!sp->relay.outcome || layout_suffixed(dst, LAYOUT_REASON, rsn, sizeof(rsn)) < 0 ||
            hd_load_at(sp->fd[SD_REJECTED], rsn, NULL, &o, &v) < 0)
                return;
        sp->relay.outcome(sp->relay.ctx, json_string_value(json_object_get(o, "handoff_id")), name,
                          "rejected", json_string_value(json_object_get(o, "reason")),
                          json_string_value(json_object_get(o, "detail")), hd_now_usec());
}

bool spool_drop_claim_leftover(struct spool *sp, const char *name)
{
        char other[NAME_MAX + 1], base[NAME_MAX + 1], q[300];
        struct spool_kept *k;
        struct stat a, b;

        if (!leftover_stat(sp, name, &a))
                return false;
        k = kept_find(sp, &a);
        if (k && same_inode(sp->fd[k->dir], k->name, &a)) {
                if (!drop_beside(sp, name, k->dir, &k->synced))
                        return false;
                if (k->dropped++ == 0)
                        log_info("Removed handoff/%s, another name of the file kept as %s/%s; "
                                 "its further names go without a line",
                                 log_quote(name, q, sizeof(q)), spool_dir_names[k->dir], k->name);
                return true;
        }
        snprintf(other, sizeof(other), "%llu", (unsigned long long)a.st_ino);
        if (same_inode(sp->fd[SD_SPENT], other, &a))
                return drop_leftover(sp, name, &a, SD_SPENT, other, "claim's move to spent/");
        /* spool_reject_from()'s names for it: the first whose item was
         * free then, so none is missing before it. */
        name_sanitize(name, base, sizeof(base));
        for (unsigned n = 0; n < SPOOL_REJECT_NAMES; n++) {
                if (n == 0)
                        snprintf(other, sizeof(other), "%s", base);
                else if (xsnprintf(other, sizeof(other), "%s~%u", base, n) < 0)
                        break;
                if (fstatat(sp->fd[SD_REJECTED], other, &b, AT_SYMLINK_NOFOLLOW) < 0)
                        break;
                if (b.st_dev == a.st_dev && b.st_ino == a.st_ino) {
                        reject_outcome_again(sp, name, other);
                        return drop_leftover(sp, name, &a, SD_REJECTED, other, "rejection");
                }
        }
        return false;
}

bool spool_drop_id_leftover(struct spool *sp, const char *name, const char *id)
{
        static const enum spool_dir in[] = { SD_OUTBOX, SD_CLAIMED };
        static const char *const what[] = { "outbox/ entry", "claim" };
        char other[NAME_MAX + 1];
        struct stat a;

        if (!id || !hd_id_valid(id) || xsnprintf(other, sizeof(other), "%s.json", id) < 0 ||
            !leftover_stat(sp, name, &a))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(in); i++)
                if (same_inode(sp->fd[in[i]], other, &a))
                        return drop_leftover(sp, name, &a, in[i], other, what[i]);
        return false;
}

bool spool_drop_archived_leftover(struct spool *sp, const char *id)
{
        char name[NAME_MAX + 1], mname[NAME_MAX + 1], buf[4096];
        struct stat a, b;
        const char *as;
        json_t *m;
        ssize_t n;
        bool done = false;
        int fd;

        if (xsnprintf(name, sizeof(name), "%s.json", id) < 0 ||
            layout_suffixed(id, LAYOUT_DELIVERED, mname, sizeof(mname)) < 0)
                return false;
        fd = openat(sp->fd[SD_CLAIMED], mname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
                return false;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return false;
        buf[n] = '\0';
        m = json_loads(buf, 0, NULL);
        as = json_string_value(json_object_get(m, "archive_as"));
        if (as && hd_name_safe(as) &&
            fstatat(sp->fd[SD_CLAIMED], name, &a, AT_SYMLINK_NOFOLLOW) == 0 &&
            fstatat(sp->fd[SD_ARCHIVE], as, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(a.st_mode) && a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
            unlinkat(sp->fd[SD_CLAIMED], name, 0) == 0) {
                unlinkat(sp->fd[SD_CLAIMED], mname, 0);
                log_info("Removed claimed/%s, left beside its archive by a power cut", name);
                sp->dirty[SD_CLAIMED] = true;
                (void) spool_flush(sp);
                done = true;
        }
        json_decref(m);
        return done;
}

bool spool_drop_tmp_twin(struct spool *sp, enum spool_dir in, const char *name)
{
        struct stat a, b;
        struct dirent *de;
        bool done = false;
        DIR *d;
        int fd;

        if (fstatat(sp->fd[in], name, &a, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(a.st_mode) || a.st_nlink != 2)
                return false;
        fd = openat(sp->fd[SD_TMP], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return false;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return false;
        }
        while (!done && (de = readdir(d)))
                if (de->d_ino == a.st_ino &&
                    fstatat(sp->fd[SD_TMP], de->d_name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
                    b.st_dev == a.st_dev && b.st_ino == a.st_ino &&
                    unlinkat(sp->fd[SD_TMP], de->d_name, 0) == 0)
                        done = true;
        closedir(d);
        if (done) {
                sp->dirty[SD_TMP] = true;
                (void) spool_flush(sp);
        }
        return done;
}

bool spool_exists_at(int dirfd, const char *name)
{
        struct stat st;

        return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int spool_list(struct spool *sp, enum spool_dir d, json_t *set)
{
        struct dirent *de;
        DIR *dir;

        dir = opendir_at(sp->fd[d]);
        if (!dir)
                return -errno;
        while ((de = readdir(dir)))
                if (de->d_name[0] != '.')
                        json_object_set_new_nocheck(set, de->d_name, json_null());
        closedir(dir);
        return 0;
}


int spool_id_mark(struct spool *sp, const char *id)
{
        int fd;

        if (!id || !hd_id_valid(id))
                return 0;
        fd = openat(sp->fd[SD_IDS], id,
                    O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0640);
        if (fd < 0)
                return -errno;
        close(fd);
        sp->dirty[SD_IDS] = true;
        return 0;
}

bool spool_id_remembered(struct spool *sp, const char *id)
{
        struct stat st;

        return fstatat(sp->fd[SD_IDS], id, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool spool_id_claimed(struct spool *sp, const char *id)
{
        char claimed[NAME_MAX + 1];
        struct stat st;

        if (xsnprintf(claimed, sizeof(claimed), "%s.json", id) < 0)
                return false;
        return fstatat(sp->fd[SD_CLAIMED], claimed, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool spool_id_seen(struct spool *sp, const char *id)
{
        return spool_id_remembered(sp, id) || spool_id_claimed(sp, id);
}

/* rejected/ grew by dst and its reason of len bytes: past a bound of
 * [retention], retention runs within a second (lifecycle.c sweep_end())
 * rather than at the next rescan_interval, so that a flood of rejections
 * does not hold rejected_max_bytes over its bound for that long. */
static void rejected_count(struct spool *sp, const char *dst, size_t len, int64_t now)
{
        const struct config *c = sp->cfg;
        struct stat st;

        sp->st.rejected_items++;
        sp->st.rejected_bytes += len;
        if (fstatat(sp->fd[SD_REJECTED], dst, &st, AT_SYMLINK_NOFOLLOW) == 0)
                sp->st.rejected_bytes += st_bytes(&st);
        if (sp->retention_due)
                return;
        if ((c->rejected_max_items && sp->st.rejected_items > c->rejected_max_items) ||
            (c->rejected_max_bytes && sp->st.rejected_bytes > c->rejected_max_bytes)) {
                sp->retention_due = true;
                deadline_note(&sp->deadline, now + RETENTION_SOON_USEC);
        }
}

int spool_archive_from(struct spool *sp, enum spool_dir dir, const char *src, int64_t at_s,
                       const char *from, const char *to, const char *id, const char *buf,
                       size_t len, char *name, size_t n)
{
        char side[NAME_MAX + 16];
        int q;

        for (unsigned k = 0; k < LAYOUT_ARCHIVE_TRIES; k++) {
                q = layout_archive_name(at_s, from, to, id, k, name, n);
                if (q == 0)
                        q = layout_suffixed(name, LAYOUT_OUTCOME, side, sizeof(side));
                if (q < 0)
                        return q;
                /* Taken: another item's, whose .outcome must stay its own. */
                if (spool_exists_at(sp->fd[SD_ARCHIVE], name))
                        continue;
                /* Synced before the move (fsync = yes), as item.c's: a
                 * power cut must not leave the archived item's outcome
                 * empty. */
                q = write_atomic(sp->fd[SD_ARCHIVE], side, buf, len, 0640,
                                 sp->cfg->fsync ? WRITE_SYNC_FILE : 0);
                if (q < 0)
                        return q;
                q = move_noreplace(sp->fd[dir], src, sp->fd[SD_ARCHIVE], name);
                if (q == -EEXIST)
                        continue;
                if (q < 0) {
                        unlinkat(sp->fd[SD_ARCHIVE], side, 0);
                        return q;
                }
                sp->dirty[SD_ARCHIVE] = sp->dirty[dir] = true;
                return 0;
        }
        return -EEXIST;
}

static int reject_from(struct spool *sp, enum spool_dir from, const char *name,
                       const struct spool_ino *was, hd_reason reason, const char *detail,
                       const char *handoff_id, int64_t now, enum item_outcome *ret)
{
        char base[NAME_MAX + 1], dst[NAME_MAX + 1], rsn[NAME_MAX + 16];
        char at[HD_TIME_MAX];
        _cleanup_free_ char *buf = NULL;
        json_t *o;
        size_t len;
        struct stat st;
        int r;

        name_sanitize(name, base, sizeof(base));
        hd_time_format(now, at, sizeof(at));
        /* Relayed here: the reason says from where, or an operator reads
         * a bad_mac without knowing that the sender's key is another
         * host's (handoffd(8) RELAY). */
        char origin[80], rdetail[HD_DETAIL_MAX + 160];
        if (from == SD_HANDOFF && sp->relay.origin &&
            sp->relay.origin(sp->relay.ctx, name, origin, sizeof(origin))) {
                snprintf(rdetail, sizeof(rdetail), "came through the relay from host %s: %s", origin,
                         detail ? detail : "");
                detail = rdetail;
        } else {
                origin[0] = '\0';
        }
        o = json_pack("{s:s, s:s, s:s, s:s}", "reason", hd_reason_name(reason),
                      "detail", detail ? detail : "", "at", at, "name", base);
        if (!o)  /* a detail that is no UTF-8 must not keep a file here */
                o = json_pack("{s:s, s:s, s:s, s:s}", "reason", hd_reason_name(reason),
                              "detail", "(detail not printable)", "at", at, "name", base);
        if (!o)
                return -ENOMEM;
        if (handoff_id && hd_id_valid(handoff_id))
                json_object_set_new(o, "handoff_id", json_string(handoff_id));
        if (origin[0])
                json_object_set_new(o, "relayed_from", json_string(origin));
        r = hd_canon_dump(o, NULL, &buf, &len);
        json_decref(o);
        if (r < 0)
                return r;

        for (unsigned n = 0; n < SPOOL_REJECT_NAMES; n++) {
                /* base is 200 characters at most: "~999", the .reason and
                 * its temp name fit */
                r = n == 0 ? xsnprintf(dst, sizeof(dst), "%s", base)
                           : xsnprintf(dst, sizeof(dst), "%s~%u", base, n);
                if (r >= 0)
                        r = layout_suffixed(dst, LAYOUT_REASON, rsn, sizeof(rsn));
                if (r < 0)
                        return r;
                /* A .reason without its item is what a crash between the
                 * two steps below leaves: its name is free to reuse. */
                if (fstatat(sp->fd[SD_REJECTED], dst, &st, AT_SYMLINK_NOFOLLOW) == 0)
                        continue;
                /* The reason first: an item in rejected/ always has one. */
                r = write_atomic(sp->fd[SD_REJECTED], rsn, buf, len, 0640,
                                 sp->cfg->fsync ? WRITE_SYNC_FILE : 0);
                if (r < 0)
                        return r;
                /* The id is remembered before the item shows in rejected/,
                 * as archive() does: a replay is known at every moment. */
                if (handoff_id && (r = spool_id_mark(sp, handoff_id)) < 0)
                        return r;
                /* The outcome goes out before the move from claimed/ (the
                 * caller holds the id's lock: nothing else moves it), so
                 * a crash between never loses it.  From handoff/ only
                 * once the move is made: another daemon may have claimed
                 * the file meanwhile, and then the move finds it gone.
                 * With the relay the move is a link (the relay's own
                 * files can always be linked), the name in handoff/ left
                 * until the next spool_flush(): a crash before the
                 * outcome leaves it beside its rejection, and
                 * spool_drop_claim_leftover() tells it then. */
                if (sp->relay.outcome && from == SD_CLAIMED)
                        sp->relay.outcome(sp->relay.ctx, handoff_id, NULL, "rejected",
                                          hd_reason_name(reason), detail, now);
                r = from == SD_HANDOFF
                    ? move_out(sp, name, was, SD_REJECTED, dst, sp->cfg->fsync || sp->relay.outcome)
                    : move_noreplace(sp->fd[from], name, sp->fd[SD_REJECTED], dst);
                if (r == -EEXIST)
                        continue;       /* another rejecter took dst: its reason stands */
                if (r < 0) {
                        /* Gone: unless another rejecter just put it at dst
                         * (then the reason is its), the reason is ours to
                         * take back. */
                        if (fstatat(sp->fd[SD_REJECTED], dst, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                unlinkat(sp->fd[SD_REJECTED], rsn, 0);
                        if (r != -ENOENT)
                                return r;
                        *ret = IO_GONE;
                        return 0;
                }
                if (from != SD_HANDOFF)
                        sp->dirty[SD_REJECTED] = sp->dirty[from] = true;
                if (sp->relay.outcome && from == SD_HANDOFF)
                        sp->relay.outcome(sp->relay.ctx, handoff_id, name, "rejected",
                                          hd_reason_name(reason), detail, now);
                /* Its other names in handoff/ go as this file's
                 * (spool_drop_claim_leftover()): one rejection a file. */
                if (from == SD_HANDOFF && was && reason == HD_R_HARDLINK)
                        kept_note(sp, was->dev, was->ino, SD_REJECTED, dst, false);
                sp->st.rejected[reason]++;
                rejected_count(sp, dst, len, now);
                char q[300];
                log_decision(LOG_NOTICE, handoff_id, NULL, "rejected", hd_reason_name(reason),
                             "Rejected %s: %s: %s", log_quote(name, q, sizeof(q)),
                             hd_reason_name(reason), detail ? detail : "");
                *ret = IO_REJECTED;
                return 0;
        }
        return -EEXIST;
}

int spool_reject_from(struct spool *sp, enum spool_dir from, const char *name,
                      const struct spool_ino *was, hd_reason reason, const char *detail,
                      const char *handoff_id, int64_t now)
{
        enum item_outcome o;
        int r = reject_from(sp, from, name, was, reason, detail, handoff_id, now, &o);

        return r < 0 ? r : o == IO_GONE ? IO_GONE : 0;
}

int spool_reject_handoff(struct spool *sp, const char *name, const struct spool_ino *was,
                         hd_reason reason, const char *detail, const char *handoff_id,
                         int64_t now, enum item_outcome *ret)
{
        return reject_from(sp, SD_HANDOFF, name, was, reason, detail, handoff_id, now, ret);
}

int spool_reject(struct spool *sp, const char *name, const struct spool_ino *was,
                 hd_reason reason, const char *detail, const char *handoff_id, int64_t now)
{
        return spool_reject_from(sp, SD_HANDOFF, name, was, reason, detail, handoff_id, now);
}

int spool_reject_claimed(struct spool *sp, const char *id, hd_reason reason,
                         const char *detail, int64_t now)
{
        char name[NAME_MAX + 1];

        if (xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                return -ENAMETOOLONG;
        return spool_reject_from(sp, SD_CLAIMED, name, NULL, reason, detail, id, now);
}

