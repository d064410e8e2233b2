/* What a power cut or a crash leaves in handoff/ beside a move the
 * daemon made (the source name of a claim, a rejection or an outbox/
 * entry whose removal was not yet durable), and a file's further names
 * once one of them is kept (sp->kept): each goes after a few look-ups,
 * never a listing of a state directory. */
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
#include "store.h"
#include "store_doc.h"
#include "store_int.h"

static bool same_inode(int dirfd, const char *name, const struct stat *a)
{
        struct stat b;

        return fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
               b.st_dev == a->st_dev && b.st_ino == a->st_ino;
}

bool store_find_link(int dirfd, const char *name, const struct stat *a, char *found, size_t n)
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

static struct spool_kept *kept_find(struct spool *sp, const struct stat *a)
{
        for (size_t i = 0; i < SPOOL_KEPT_MAX; i++)
                if (sp->kept.slot[i].ino == a->st_ino && sp->kept.slot[i].dev == a->st_dev)
                        return &sp->kept.slot[i];
        return NULL;
}

void store_kept_note(struct spool *sp, dev_t dev, ino_t ino, enum spool_dir dir,
                     const char *name, bool synced)
{
        struct spool_kept *k = kept_find(sp, &(struct stat) { .st_dev = dev, .st_ino = ino });

        if (strlen(name) > NAME_MAX)
                return;
        if (!k) {
                k = &sp->kept.slot[sp->kept.next];
                sp->kept.next = (sp->kept.next + 1) % SPOOL_KEPT_MAX;
        }
        *k = (struct spool_kept) { .dev = dev, .ino = ino, .dir = dir, .synced = synced };
        memcpy(k->name, name, strlen(name) + 1);
}

/* handoff/name goes, its other link in dir synced first. */
static bool drop_beside(struct spool *sp, const char *name, enum spool_dir dir, bool *synced)
{
        if (!*synced && store_sync_dir(sp, dir) < 0)
                return false;
        *synced = true;
        return store_remove(sp, SD_HANDOFF, name) == 0;
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
        store_kept_note(sp, a->st_dev, a->st_ino, dir, other, true);
        (void) store_flush(sp);
        return true;
}

static bool leftover_stat(struct spool *sp, const char *name, struct stat *a)
{
        return fstatat(sp->fd[SD_HANDOFF], name, a, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISREG(a->st_mode) && a->st_nlink >= 2;
}

/* handoff/name was moved to rejected/dst, and a crash may have come
 * between the move and its outcome (store_reject_from()): the outcome
 * again, from the reason.  Told twice, it is one receipt (receipt.c
 * writes the one a final outcome owes, once). */
static void reject_outcome_again(struct spool *sp, const char *name, const char *dst)
{
        char rsn[NAME_MAX + 16];
        struct store_reason o;

        if (!sp->relay.outcome || layout_suffixed(dst, LAYOUT_REASON, rsn, sizeof(rsn)) < 0 ||
            store_reason_load(sp->fd[SD_REJECTED], rsn, &o) < 0)
                return;
        sp->relay.outcome(sp->relay.ctx, o.id[0] ? o.id : NULL, name, "rejected", o.reason,
                          o.detail, hd_now_usec());
}

bool store_drop_claim_leftover(struct spool *sp, const char *name)
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
        /* store_reject_from()'s names for it: the first whose item was
         * free then, so none is missing before it. */
        store_reject_base(name, base, sizeof(base));
        for (unsigned n = 0; n < STORE_REJECT_NAMES; n++) {
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

bool store_drop_id_leftover(struct spool *sp, const char *name, const char *id)
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

bool store_drop_archived_leftover(struct spool *sp, const char *id)
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
            store_remove(sp, SD_CLAIMED, name) == 0) {
                (void) store_remove(sp, SD_CLAIMED, mname);
                log_info("Removed claimed/%s, left beside its archive by a power cut", name);
                (void) store_flush(sp);
                done = true;
        }
        json_decref(m);
        return done;
}

bool store_drop_tmp_twin(struct spool *sp, enum spool_dir in, const char *name)
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
                    store_remove(sp, SD_TMP, de->d_name) == 0)
                        done = true;
        closedir(d);
        if (done)
                (void) store_flush(sp);
        return done;
}
