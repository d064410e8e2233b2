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

int spool_check(struct config *cfg)
{
        _cleanup_close_ int root = -1, hd = -1;
        struct agent_rt *a;
        struct stat st;
        gid_t shared;
        size_t n, left;
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
        r = agents_open_all(cfg, shared, true, NULL, &a, &n, &left);
        if (r < 0)
                return r;
        return (int)left;
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
        sp->foreign = json_object();
        sp->failed = json_object();
        sp->seen = json_object();
        sp->leaving = json_object();
        sp->verified = json_object();
        sp->waiting = json_object();
        sp->waiting_n = json_object();
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
                 * handoff/; setgid keeps the spool's group on them, sticky
                 * keeps one producer from deleting another's (the daemon
                 * owns the directory, so it may still move them).  The
                 * same modes as systemd/handoffd.tmpfiles. */
                mode_t m = (i == SD_TMP || i == SD_HANDOFF) ? 03770 : i == SD_SPENT ? 0700 : 0750;
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
        /* Keys and agents may have changed: every item is verified again. */
        json_object_clear(sp->verified);
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
        json_decref(sp->foreign);
        json_decref(sp->unserved);
        json_decref(sp->failed);
        json_decref(sp->seen);
        json_decref(sp->leaving);
        json_decref(sp->verified);
        json_decref(sp->waiting);
        json_decref(sp->waiting_n);
        json_decref(sp->waiting_prev);
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

/* handoff/name goes if it is still the file (dev, ino): names get reused. */
static void leave_name(struct spool *sp, const char *name, json_int_t dev, json_int_t ino,
                       bool spent)
{
        char sname[32];
        struct stat st;

        if (fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            (json_int_t)st.st_dev != dev || (json_int_t)st.st_ino != ino)
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
                snprintf(sname, sizeof(sname), "%llu", (unsigned long long)st.st_ino);
                if (renameat2(sp->fd[SD_HANDOFF], name, sp->fd[SD_SPENT], sname,
                              RENAME_NOREPLACE) == 0) {
                        sp->spent_waiting = true;
                        sp->spent_at = mono_usec();
                        sp->dirty[SD_HANDOFF] = true;
                        return;
                }
        }
        if (unlinkat(sp->fd[SD_HANDOFF], name, 0) == 0)
                sp->dirty[SD_HANDOFF] = true;
}

/* What spool_move_out() linked elsewhere, and the producers' files of
 * claims (spool_drop_source()), leave handoff/ now that the other
 * directories are synced. */
static void leave_handoff(struct spool *sp)
{
        const char *name;
        json_t *e, *tmp;

        json_object_foreach_safe(sp->leaving, tmp, name, e) {
                leave_name(sp, name, json_integer_value(json_array_get(e, 0)),
                           json_integer_value(json_array_get(e, 1)),
                           json_is_true(json_array_get(e, 2)));
                json_object_del(sp->leaving, name);
        }
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
                if (unlinkat(sp->fd[SD_SPENT], de->d_name, 0) < 0 && errno != ENOENT) {
                        r = -errno;
                        break;
                }
        }
        closedir(d);
        if (r == 0)
                sp->spent_waiting = false;
        return r;
}

bool spool_leaving(struct spool *sp, const char *name, const struct stat *st)
{
        json_t *e = json_object_get(sp->leaving, name);

        return e && (json_int_t)st->st_dev == json_integer_value(json_array_get(e, 0)) &&
               (json_int_t)st->st_ino == json_integer_value(json_array_get(e, 1));
}

int spool_move_out(struct spool *sp, const char *name, enum spool_dir to, const char *dst)
{
        struct stat st;
        int r;

        if (sp->cfg->fsync) {
                if (linkat(sp->fd[SD_HANDOFF], name, sp->fd[to], dst, 0) == 0) {
                        sp->dirty[to] = true;
                        if (fstatat(sp->fd[to], dst, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                return -errno;
                        json_object_set_new(sp->leaving, name,
                                            json_pack("[I, I, b]", (json_int_t)st.st_dev,
                                                      (json_int_t)st.st_ino, 0));
                        return 0;
                }
                /* EPERM: fs.protected_hardlinks and a producer's file the
                 * daemon may not write; EXDEV, ENOSYS...: no links.  Then a
                 * rename, as without fsync. */
                if (errno == EEXIST || errno == ENOENT)
                        return -errno;
        }
        r = move_noreplace(sp->fd[SD_HANDOFF], name, sp->fd[to], dst);
        if (r == 0)
                sp->dirty[SD_HANDOFF] = sp->dirty[to] = true;
        return r;
}

void spool_drop_source(struct spool *sp, const char *name, dev_t dev, ino_t ino)
{
        if (sp->cfg->fsync)
                json_object_set_new(sp->leaving, name,
                                    json_pack("[I, I, b]", (json_int_t)dev, (json_int_t)ino, 1));
        else
                leave_name(sp, name, (json_int_t)dev, (json_int_t)ino, true);
}

int spool_flush(struct spool *sp)
{
        int fds[_SD_MAX + SPOOL_FLUSH_AGENTS_MAX], rets[_SD_MAX + SPOOL_FLUSH_AGENTS_MAX];
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
        /* A move is a change in two directories: the one it goes to is
         * synced before the one it leaves (claims leave handoff/ for
         * claimed/, claimed/ is left for archive/ and rejected/, outbox/
         * likewise after the PubAck or the expiry), so a power cut between
         * the two leaves the item in both, never in neither. */
        for (int round = 0; round < 3; round++) {
                if (round == 2 && r == 0)
                        leave_handoff(sp);
                for (int i = 0; i < _SD_MAX; i++) {
                        int want = i == SD_HANDOFF ? 2 : i == SD_CLAIMED || i == SD_OUTBOX ? 1 : 0;
                        if (want != round || !sp->dirty[i])
                                continue;
                        sp->dirty[i] = false;
                        if (sp->cfg->fsync)
                                fds[n++] = sp->fd[i];
                }
                if (n > 0 && (q = fsync_many_at(fds, NULL, n, rets)) < 0 && r == 0)
                        r = q;
                n = 0;
        }
        return r;
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
        if (name && same_inode(dirfd, name, a)) {
                snprintf(found, n, "%s", name);
                return true;
        }
        if (!(d = opendir_at(dirfd)))
                return false;
        while (!ok && (de = readdir(d)))
                if (de->d_ino == a->st_ino && de->d_name[0] != '.' &&
                    same_inode(dirfd, de->d_name, a)) {
                        snprintf(found, n, "%s", de->d_name);
                        ok = true;
                }
        closedir(d);
        return ok;
}

bool spool_drop_claim_leftover(struct spool *sp, const char *name)
{
        static const enum spool_dir next[] = { SD_CLAIMED, SD_REJECTED, SD_OUTBOX, SD_SPENT };
        static const char *const next_name[] = { "claim", "rejection", "outbox/ entry",
                                                  "claim's move to spent/" };
        char other[NAME_MAX + 1];
        struct stat a;

        if (fstatat(sp->fd[SD_HANDOFF], name, &a, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(a.st_mode) || a.st_nlink < 2)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(next); i++) {
                if (!spool_find_link(sp->fd[next[i]], name, &a, other, sizeof(other)))
                        continue;
                /* That link is on disk before this one goes. */
                if (sp->cfg->fsync && fsync_dir(sp->fd[next[i]]) < 0)
                        return false;
                if (unlinkat(sp->fd[SD_HANDOFF], name, 0) < 0)
                        return false;
                log_info("Removed handoff/%s, left beside its %s by a power cut", name,
                         next_name[i]);
                sp->dirty[SD_HANDOFF] = true;
                (void) spool_flush(sp);
                return true;
        }
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

int spool_reject_from(struct spool *sp, enum spool_dir from, const char *name,
                      hd_reason reason, const char *detail,
                      const char *handoff_id, int64_t now)
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

        for (unsigned n = 0; n < 1000; n++) {
                if (n == 0)
                        snprintf(dst, sizeof(dst), "%s", base);
                else
                        snprintf(dst, sizeof(dst), "%s~%u", base, n);
                snprintf(rsn, sizeof(rsn), "%s" LAYOUT_REASON, dst);
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
                if (sp->relay.outcome && (from == SD_HANDOFF || from == SD_CLAIMED))
                        sp->relay.outcome(sp->relay.ctx, handoff_id, from == SD_HANDOFF ? name : NULL,
                                          "rejected", hd_reason_name(reason), detail, now);
                r = from == SD_HANDOFF ? spool_move_out(sp, name, SD_REJECTED, dst) :
                    move_noreplace(sp->fd[from], name, sp->fd[SD_REJECTED], dst);
                if (r == -EEXIST)
                        continue;       /* another rejecter took dst: its reason stands */
                if (r < 0) {
                        /* Gone: unless another rejecter just put it at dst
                         * (then the reason is its), the reason is ours to
                         * take back. */
                        if (fstatat(sp->fd[SD_REJECTED], dst, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                unlinkat(sp->fd[SD_REJECTED], rsn, 0);
                        return r == -ENOENT ? IO_GONE : r;
                }
                if (from != SD_HANDOFF)
                        sp->dirty[SD_REJECTED] = sp->dirty[from] = true;
                sp->st.rejected[reason]++;
                rejected_count(sp, dst, len, now);
                char q[300];
                log_decision(LOG_NOTICE, handoff_id, NULL, "rejected", hd_reason_name(reason),
                             "Rejected %s: %s: %s", log_quote(name, q, sizeof(q)),
                             hd_reason_name(reason), detail ? detail : "");
                return 0;
        }
        return -EEXIST;
}

int spool_reject(struct spool *sp, const char *name, hd_reason reason,
                 const char *detail, const char *handoff_id, int64_t now)
{
        return spool_reject_from(sp, SD_HANDOFF, name, reason, detail, handoff_id, now);
}

int spool_reject_claimed(struct spool *sp, const char *id, hd_reason reason,
                         const char *detail, int64_t now)
{
        char name[NAME_MAX + 1];

        if (xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                return -ENAMETOOLONG;
        return spool_reject_from(sp, SD_CLAIMED, name, reason, detail, id, now);
}

