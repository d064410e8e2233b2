/* Sidecars and small files of the daemon's own beside the items: the
 * .outcome, .reason and .result files, the A2A task record, the replay
 * memory ids/; each written under a temp name and renamed over
 * (write_atomic()), synced with fsync = yes before anything that names
 * it.  Steps: handoffd(8), "Durability and crash windows". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agents.h"
#include "util.h"
#include "files.h"
#include "layout.h"
#include "log.h"
#include "store.h"
#include "store_int.h"

int store_side_write(struct spool *sp, enum spool_dir dir, const char *name, const void *buf,
                     size_t len)
{
        int r = write_atomic(sp->fd[dir], name, buf, len, 0640,
                             (sp->cfg->fsync ? WRITE_SYNC_FILE : 0) | WRITE_MODE_KEPT);

        if (r == 0)
                store_dirty(sp, dir);
        return r;
}

int store_side_write_later(struct spool *sp, enum spool_dir dir, const char *name,
                           const void *buf, size_t len)
{
        int fd = -1;
        int r = write_atomic_fd(sp->fd[dir], name, buf, len, 0640, WRITE_MODE_KEPT,
                                sp->cfg->fsync ? &fd : NULL);

        if (r < 0)
                return r;
        store_dirty(sp, dir);
        return store_sync_later(sp, dir, fd);
}

int store_note_write_later(struct spool *sp, enum spool_dir dir, const char *name,
                           const void *buf, size_t len)
{
        int fd = -1;
        int r = write_direct_fd(sp->fd[dir], name, buf, len, 0640, WRITE_MODE_KEPT,
                                sp->cfg->fsync ? &fd : NULL);

        if (r < 0)
                return r;
        store_dirty(sp, dir);
        return store_sync_later(sp, dir, fd);
}

int store_side_rename(struct spool *sp, enum spool_dir dir, const char *from, const char *to)
{
        if (renameat(sp->fd[dir], from, sp->fd[dir], to) < 0)
                return -errno;
        store_dirty(sp, dir);
        return 0;
}

/* ids/<id>, a regular file shorter than size, read into buf (its stat in
 * *m): its length, or -1 (none, or not such a file). */
static ssize_t id_note_read(struct spool *sp, const char *id, struct stat *m, char *buf,
                            size_t size)
{
        ssize_t n = 0;
        int fd;

        if (!id || !hd_id_valid(id))
                return -1;
        fd = openat(sp->fd[SD_IDS], id, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
                return -1;
        if (fstat(fd, m) < 0 || !S_ISREG(m->st_mode) || m->st_size >= (off_t)size)
                n = -1;
        else if (m->st_size > 0)
                n = read(fd, buf, size - 1);
        close(fd);
        if (n >= 0)
                buf[n] = '\0';
        return n;
}

/* The relay's note of an archived item: "src DEV INO\narchived\n". */
static bool note_archived(const char *buf)
{
        return !strncmp(buf, "src ", 4) && strstr(buf, "\narchived\n");
}

bool store_id_source_is(struct spool *sp, const char *id, const struct stat *st)
{
        unsigned long long dev, ino;
        char buf[128];
        struct stat m;

        if (id_note_read(sp, id, &m, buf, sizeof(buf)) <= 0)
                return false;
        /* the producer's file, not changed since the take noted it, of an
         * item that was relayed and archived (after a power cut that lost
         * the take's copy, the note alone would drop the only copy) */
        return note_archived(buf) && sscanf(buf, "src %llu %llu", &dev, &ino) == 2 &&
               dev == (unsigned long long)st->st_dev && ino == (unsigned long long)st->st_ino &&
               (st->st_ctim.tv_sec < m.st_mtim.tv_sec ||
                (st->st_ctim.tv_sec == m.st_mtim.tv_sec && st->st_ctim.tv_nsec <= m.st_mtim.tv_nsec));
}

bool store_id_archived(struct spool *sp, const char *id, struct stat *m)
{
        char buf[128];
        ssize_t n = id_note_read(sp, id, m, buf, sizeof(buf));

        return n == 0 || (n > 0 && note_archived(buf));
}

int store_id_mark(struct spool *sp, const char *id)
{
        int fd;

        if (!id || !hd_id_valid(id))
                return 0;
        fd = openat(sp->fd[SD_IDS], id,
                    O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0640);
        if (fd < 0)
                return -errno;
        close(fd);
        store_dirty(sp, SD_IDS);
        return 0;
}

/* An agent's handoffs/: the daemon's names there (.pending.NAME, the
 * bootstrap NAME, .expire.NAME, .cancel.NAME).  What a consumer takes
 * is hers; the rest only the daemon changes. */

int store_boot_write(struct spool *sp, struct agent_rt *a, const char *name, const void *buf,
                     size_t len, bool sync, struct stat *ret_st, int *ret_fd)
{
        unsigned fl = (sync && sp->cfg->fsync ? WRITE_SYNC_FILE : 0) | WRITE_MODE_KEPT |
                      WRITE_EXCL;
        _cleanup_close_ int fd = -1;
        int r = write_direct_fd(a->handoffs_fd, name, buf, len, 0640, fl,
                                ret_st || ret_fd ? &fd : NULL);

        if (r < 0)
                return r;
        if (ret_st && fstat(fd, ret_st) < 0)
                *ret_st = (struct stat){ 0 };   /* written all the same */
        if (ret_fd) {
                *ret_fd = TAKE_FD(fd);
        } else if (ret_st) {
                if (close(TAKE_FD(fd)) < 0 && errno != EINTR) {
                        r = -errno;                     /* as write_direct() */
                        unlinkat(a->handoffs_fd, name, 0);
                        return r;
                }
        }
        store_dirty_agent(a);
        return 0;
}

int store_boot_remove(struct spool *sp, struct agent_rt *a, const char *name)
{
        (void)sp;
        if (unlinkat(a->handoffs_fd, name, 0) < 0)
                return -errno;
        store_dirty_agent(a);
        return 0;
}

int store_boot_rename(struct spool *sp, struct agent_rt *a, const char *from, const char *to)
{
        (void)sp;
        if (renameat(a->handoffs_fd, from, a->handoffs_fd, to) < 0)
                return -errno;
        store_dirty_agent(a);
        return 0;
}

int store_boot_sync(struct spool *sp, struct agent_rt *a)
{
        return sp->cfg->fsync ? fsync_dir(a->handoffs_fd) : 0;
}

/* Our own temp files (".NAME.XXXXXX" from hd_write_atomic) left in a
 * directory by a crash, at start.  When another daemon runs on the same
 * spool it may be writing one right now: then only those a minute old. */
#define TEMP_MIN_AGE_S 60
static void remove_temps(int dirfd, bool sole)
{
        struct dirent *de;
        DIR *d;

        d = opendir_at(dirfd);
        if (!d)
                return;
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                if (n[0] != '.' || !strcmp(n, ".") || !strcmp(n, ".."))
                        continue;
                /* A consumer's, not ours; or records of deliveries and
                 * expiries in flight: the sweep reads and finishes them
                 * (or removes them as orphans). */
                if (layout_classify(n) != LK_DOT)
                        continue;
                struct stat st;
                if (fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    (!sole && st.st_mtime > time(NULL) - TEMP_MIN_AGE_S))
                        continue;
                if (unlinkat(dirfd, n, 0) == 0)
                        log_info("Removed temp file '%s' left by a crash", n);
        }
        closedir(d);
}

void store_remove_temps(struct spool *sp, bool sole)
{
        static const int dirs[] = { SD_CLAIMED, SD_ARCHIVE, SD_REJECTED, SD_IDS, SD_BATON };

        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
                remove_temps(sp->fd[dirs[i]], sole);
        for (size_t i = 0; i < sp->n_agents; i++)
                remove_temps(sp->agents[i].handoffs_fd, sole);
}

int store_boot_note(struct spool *sp, struct agent_rt *a, const char *name, const void *buf,
                    size_t len)
{
        (void)sp;
        return write_atomic(a->handoffs_fd, name, buf, len, 0640, WRITE_MODE_KEPT);
}

int store_boot_drop(struct spool *sp, struct agent_rt *a, const char *name)
{
        (void)sp;
        if (unlinkat(a->handoffs_fd, name, 0) == 0)
                return 0;
        if (errno == EISDIR && unlinkat(a->handoffs_fd, name, AT_REMOVEDIR) == 0)
                return 0;
        return -errno;
}

int store_count_link(struct spool *sp, const char *anchor, const char *name)
{
        return linkat(sp->fd[SD_QUOTA], anchor, sp->fd[SD_QUOTA], name, 0) == 0 ? 0 : -errno;
}

int store_count_remove(struct spool *sp, const char *name)
{
        return unlinkat(sp->fd[SD_QUOTA], name, 0) == 0 ? 0 : -errno;
}

int store_cancel_answer(struct spool *sp, const char *name, const char *answer)
{
        if (!answer)
                return unlinkat(sp->fd[SD_CANCEL], name, 0) == 0 ? 0 : -errno;
        return renameat(sp->fd[SD_CANCEL], name, sp->fd[SD_CANCEL], answer) == 0 ? 0 : -errno;
}

int store_cancel_forget(struct spool *sp, const char *name, bool dir)
{
        return unlinkat(sp->fd[SD_CANCEL], name, dir ? AT_REMOVEDIR : 0) == 0 ? 0 : -errno;
}

int store_prune(struct spool *sp, enum spool_dir dir, const char *name)
{
        return unlinkat(sp->fd[dir], name, 0) == 0 ? 0 : -errno;
}


int store_put_handoff(struct spool *sp, const char *prefix, const char *name, const void *data,
                      size_t len)
{
        char tmp[NAME_MAX + 1], rnd[17];
        size_t off = 0;
        int fd, q;

        q = name_hex(rnd, 8);
        if (q < 0)
                return q;
        if (xsnprintf(tmp, sizeof(tmp), "%s%s.%s", prefix, name, rnd) < 0)
                return -ENAMETOOLONG;
        fd = openat(sp->fd[SD_TMP], tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (fd < 0)
                return -errno;
        while (off < len) {
                ssize_t w = write(fd, (const char *)data + off, len - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        q = -errno;
                        goto fail;
                }
                off += (size_t)w;
        }
        if (sp->cfg->fsync)
                write_start(fd);
        else
                /* Closed in tmp/, before the move: a close after it is an
                 * IN_CLOSE_WRITE in handoff/, which tells the intake the
                 * name changed, and it drops the look it took at the move
                 * (three more calls an item).  With fsync, the flush
                 * syncs it first (watch.c keeps the look then). */
                close(TAKE_FD(fd));
        q = move_noreplace(sp->fd[SD_TMP], tmp, sp->fd[SD_HANDOFF], name);
        if (q == -EEXIST) {
                if (fd >= 0)
                        close(fd);
                (void) store_prune(sp, SD_TMP, tmp);
                return 0;
        }
        if (q < 0)
                goto fail;
        store_dirty(sp, SD_HANDOFF);
        store_dirty(sp, SD_TMP);
        /* synced with the batch's others before handoff/ (the caller's
         * store_flush()): a name the flush makes durable holds its bytes */
        q = store_sync_later(sp, SD_HANDOFF, fd);
        return q < 0 ? q : 1;
fail:
        if (fd >= 0)
                close(fd);
        (void) store_prune(sp, SD_TMP, tmp);
        return q;
}

/* The relay's receipts/ (not a state directory of enum spool_dir: the
 * relay opens it), its journal a sidecar of the store's like the rest. */
int store_journal_replace(int dir_fd, const char *name, const void *data, size_t len, bool sync)
{
        return write_atomic(dir_fd, name, data, len, 0640,
                            (sync ? WRITE_SYNC_FILE | WRITE_SYNC_DIR : 0) | WRITE_MODE_KEPT);
}

int store_journal_remove(int dir_fd, const char *name, bool dir)
{
        return unlinkat(dir_fd, name, dir ? AT_REMOVEDIR : 0) == 0 ? 0 : -errno;
}
