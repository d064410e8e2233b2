/* outbox/ in the storage: an item's copy there, the take's note of the
 * producer's file it leaves in handoff/, and the archive that carries
 * the note into ids/.  outbox_dir.c says when; this file does it.
 *
 * The note, outbox/.<id>.src ("src DEV INO"), is written before the
 * copy.  The archive copies it into ids/<id> with an "archived" line
 * before the item's move, and removes it after.  A producer's file whose
 * id is seen already then goes as the take's leftover when ids/<id>
 * names it and it has not changed since (store_id_source_is()).  A note
 * whose item left outbox/ another way (an expiry, a power cut's
 * recovery) is swept by store_outbox_sweep().  Steps and crash windows:
 * handoffd(8), "Durability and crash windows". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "store.h"
#include "util.h"

#define SRC_SUFFIX ".src"

static int note_name(const char *id, char *buf, size_t n)
{
        return xsnprintf(buf, n, ".%s" SRC_SUFFIX, id);
}

/* Is handoff/name (src) what a take of doc left: outbox/dst is the
 * daemon's, holds doc, and was written after the producer last wrote
 * hers?  A copy written since is a replay (duplicate_id). */
static bool take_leftover(struct spool *sp, const struct stat *src, const char *dst,
                          const json_t *doc)
{
        hd_limits lim = { .max_size = STORE_OUTBOX_MAX(sp), .max_depth = HD_DEFAULT_MAX_DEPTH };
        _cleanup_json_ json_t *have = NULL;
        hd_verdict vd;
        struct stat st;

        if (fstatat(sp->fd[SD_OUTBOX], dst, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
            src->st_mtim.tv_sec > st.st_mtim.tv_sec ||
            (src->st_mtim.tv_sec == st.st_mtim.tv_sec && src->st_mtim.tv_nsec > st.st_mtim.tv_nsec))
                return false;
        if (hd_load_at(sp->fd[SD_OUTBOX], dst, &lim, &have, &vd) < 0)
                return false;
        return json_equal(have, (json_t *)doc);
}

int store_outbox_take(struct spool *sp, const char *name, const struct stat *was,
                      const char *id, const json_t *doc, const char *buf, size_t len,
                      const char *dst, bool *ret_leftover)
{
        char side[NAME_MAX + 1], note[64];
        int r, nl;

        *ret_leftover = false;
        /* was: the file that verified, as decide_claim() looked at it
         * under the id's lock just now.  A swap since is a new file: the
         * producer's name leaves only with was's inode
         * (store_drop_source()), and the new one is looked at anew. */
        if (!S_ISREG(was->st_mode))
                return -EISDIR;
        /* The note first: a kill between it and the copy leaves a note
         * without its item, which the next outbox scan sweeps. */
        nl = snprintf(note, sizeof(note), "src %llu %llu\n", (unsigned long long)was->st_dev,
                      (unsigned long long)was->st_ino);
        if (note_name(id, side, sizeof(side)) >= 0)
                (void) store_note_write_later(sp, SD_OUTBOX, side, note, (size_t)nl);
        /* Never over a name there: of two takes of one id only one wins.
         * main.c's umask 027 keeps 0640, as claimed/'s records.  Synced
         * with the batch's other takes before outbox/ is (the intake's
         * store_flush(), in this loop turn, before the publish). */
        int fd = -1;
        r = write_linked_fd(sp->fd[SD_OUTBOX], dst, buf, len, 0640, WRITE_MODE_KEPT,
                            sp->cfg->fsync ? &fd : NULL);
        if (r == 0)
                r = store_sync_later(sp, SD_OUTBOX, fd);
        if (r == -EEXIST && take_leftover(sp, was, dst, doc)) {
                (void) store_drop_source(sp, name, was->st_dev, was->st_ino);
                *ret_leftover = true;
                return -ENOENT;
        }
        if (r < 0)
                return r;
        store_dirty(sp, SD_OUTBOX);
        (void) store_drop_source(sp, name, was->st_dev, was->st_ino);
        return 0;
}

int store_outbox_load(struct spool *sp, const char *name, int64_t now, json_t **ret,
                      hd_verdict *vd, int64_t *ret_at)
{
        hd_limits lim = { .max_size = STORE_OUTBOX_MAX(sp), .max_depth = HD_DEFAULT_MAX_DEPTH };
        struct stat st;
        int r;

        r = hd_load_at(sp->fd[SD_OUTBOX], name, &lim, ret, vd);
        if (r < 0)
                return r;
        *ret_at = fstatat(sp->fd[SD_OUTBOX], name, &st, AT_SYMLINK_NOFOLLOW) == 0
                ? (int64_t)st.st_ctim.tv_sec * 1000000LL + st.st_ctim.tv_nsec / 1000 : now;
        return 0;
}

/* ids/<id> made (or rewritten) with text. */
static int id_note(struct spool *sp, const char *id, const char *text, size_t len)
{
        int fd, r;

        if (!id || !hd_id_valid(id))
                return 0;
        fd = openat(sp->fd[SD_IDS], id,
                    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0640);
        if (fd < 0)
                return -errno;
        r = write(fd, text, len) == (ssize_t)len ? 0 : -EIO;
        close(fd);
        store_dirty(sp, SD_IDS);
        return r;
}

/* The take's note of id into note (n bytes, NUL-terminated): its length,
 * or 0 when there is none to trust. */
static size_t note_read(struct spool *sp, const char *side, char *note, size_t n)
{
        ssize_t nn = -1;
        int fd = openat(sp->fd[SD_OUTBOX], side, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

        if (fd >= 0) {
                nn = read(fd, note, n - 1);
                close(fd);
        }
        if (nn <= 0 || nn >= (ssize_t)n - 1 || strncmp(note, "src ", 4))
                return 0;
        note[nn] = '\0';
        return (size_t)nn;
}

int store_outbox_archive(struct spool *sp, const char *id, int64_t at_s, const char *from,
                         const char *to, const char *buf, size_t len,
                         const struct spool_ino *was, char *name, size_t n)
{
        char src[NAME_MAX + 1], side[NAME_MAX + 1], note[96];
        size_t nn = 0;
        int q;

        q = xsnprintf(src, sizeof(src), "%s.json", id);
        if (q >= 0)
                q = note_name(id, side, sizeof(side));
        if (q < 0)
                return q;
        /* The note goes into ids/ before the move: a kill between the two
         * leaves the item in outbox/, sent again, and its producer's
         * name, dropped as the leftover it is.  After the move, the name
         * is known by the note.  The take's own (was) is what its file
         * says; after a restart the file is read. */
        if (was) {
                int l = snprintf(note, sizeof(note), "src %llu %llu\n",
                                 (unsigned long long)was->dev, (unsigned long long)was->ino);
                nn = l > 0 && (size_t)l < sizeof(note) - 16 ? (size_t)l : 0;
        } else {
                nn = note_read(sp, side, note, sizeof(note) - 16);
        }
        /* The id remembered in ids/: its note there, which marks it too,
         * or an empty mark. */
        if (nn > 0) {
                memcpy(note + nn, "archived\n", 10);
                q = id_note(sp, id, note, nn + 9);
        }
        if (nn == 0 || q < 0)
                q = store_id_mark(sp, id);
        if (q < 0)
                return q;
        q = store_archive_from(sp, SD_OUTBOX, src, at_s, from, to, id, buf, len, name, n);
        if (q == 0 && nn > 0)
                (void) store_remove(sp, SD_OUTBOX, side);
        return q;
}

void store_outbox_sweep(struct spool *sp)
{
        DIR *d = opendir_at(sp->fd[SD_OUTBOX]);
        struct dirent *de;
        char item[NAME_MAX + 1];
        size_t l;

        if (!d)
                return;
        while ((de = readdir(d))) {
                l = strlen(de->d_name);
                if (de->d_name[0] != '.' || l < 6 || strcmp(de->d_name + l - 4, SRC_SUFFIX) ||
                    l - 5 + 5 > NAME_MAX)
                        continue;
                memcpy(item, de->d_name + 1, l - 5);
                memcpy(item + l - 5, ".json", 6);
                if (faccessat(sp->fd[SD_OUTBOX], item, F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
                    errno == ENOENT)
                        (void) store_remove(sp, SD_OUTBOX, de->d_name);
        }
        closedir(d);
}
