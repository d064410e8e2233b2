/* The image of powercutfs: the records of what a disk would hold after a
 * power cut, their sync, and the cut that writes them beside BACKING and
 * swaps them in.  See pcimage.h; the model is powercutfs.c's header. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pcimage.h"

#define HASH_SIZE 4096

struct entry {
        char *name;
        size_t rec;
};

/* One inode as the image holds it. */
struct rec {
        mode_t mode;
        uid_t uid;
        gid_t gid;
        struct timespec mtime;
        char *data;        /* regular file: bytes at the last sync; symlink: target */
        size_t len;
        struct entry *ents; /* directory: entries at the last sync */
        size_t n_ents;
        size_t made;       /* during a cut: 1 + index in made_paths once created */
};

struct live {
        ino_t ino;
        size_t rec;
        struct live *next;
};

int root_fd = -1;
char *backing;
size_t n_recs, root_rec;
bool cut_done;
unsigned long n_fsync, n_fsyncdir, n_ops;

static struct rec *recs;
static size_t cap_recs;
static struct live *live[HASH_SIZE];

static void *xrealloc(void *p, size_t n)
{
        void *q = realloc(p, n ? n : 1);
        if (!q) {
                perror("powercutfs: realloc");
                abort();
        }
        return q;
}

static size_t rec_new(const struct stat *st)
{
        if (n_recs == cap_recs) {
                cap_recs = cap_recs ? 2 * cap_recs : 256;
                recs = xrealloc(recs, cap_recs * sizeof(*recs));
        }
        memset(&recs[n_recs], 0, sizeof(recs[0]));
        recs[n_recs].mode = st->st_mode;
        recs[n_recs].uid = st->st_uid;
        recs[n_recs].gid = st->st_gid;
        recs[n_recs].mtime = st->st_mtim;
        return n_recs++;
}

static struct live **live_slot(ino_t ino)
{
        struct live **l = &live[ino % HASH_SIZE];
        while (*l && (*l)->ino != ino)
                l = &(*l)->next;
        return l;
}

/* The record of a live inode, made when the image has none yet. */
size_t rec_of(const struct stat *st)
{
        struct live **l = live_slot(st->st_ino);
        if (*l)
                return (*l)->rec;
        *l = xrealloc(NULL, sizeof(**l));
        (*l)->ino = st->st_ino;
        (*l)->next = NULL;
        (*l)->rec = rec_new(st);
        return (*l)->rec;
}

/* The record of st's inode, its mode and owner as they are now (what an
 * fsync of it makes durable, with its bytes or entries). */
static size_t rec_sync_meta(const struct stat *st)
{
        size_t i = rec_of(st);
        recs[i].mode = st->st_mode;
        recs[i].uid = st->st_uid;
        recs[i].gid = st->st_gid;
        return i;
}

/* A new inode got this number: whatever the image holds under the old
 * record stays there, the new file gets a record of its own. */
void live_forget(ino_t ino)
{
        struct live **l = live_slot(ino), *x = *l;
        if (x) {
                *l = x->next;
                free(x);
        }
}

void forget_at(const char *rel)
{
        struct stat st;
        if (fstatat(root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0)
                live_forget(st.st_ino);
}

static int read_all(int fd, char **out, size_t *len)
{
        size_t cap = 4096, n = 0;
        char *b = xrealloc(NULL, cap);
        for (;;) {
                if (n == cap)
                        b = xrealloc(b, cap *= 2);
                ssize_t k = pread(fd, b + n, cap - n, (off_t)n);
                if (k < 0) {
                        int e = errno;
                        free(b);
                        return -e;
                }
                if (k == 0)
                        break;
                n += (size_t)k;
        }
        *out = b;
        *len = n;
        return 0;
}

/* fsync of a file: its bytes and attributes as they are now. */
int sync_file(int fd)
{
        struct stat st;
        char p[64], *data;
        size_t len;
        int rfd, r;

        if (fstat(fd, &st) < 0)
                return -errno;
        size_t i = rec_sync_meta(&st);
        recs[i].mtime = st.st_mtim;
        if (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode))
                return 0;
        /* the caller's fd may be write-only: read through a fresh one */
        snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
        rfd = open(p, O_RDONLY | O_CLOEXEC);
        if (rfd < 0)
                return -errno;
        r = read_all(rfd, &data, &len);
        close(rfd);
        if (r < 0)
                return r;
        free(recs[i].data);
        recs[i].data = data;
        recs[i].len = len;
        n_fsync++;
        return 0;
}

static void ents_free(struct rec *r)
{
        for (size_t k = 0; k < r->n_ents; k++)
                free(r->ents[k].name);
        free(r->ents);
        r->ents = NULL;
        r->n_ents = 0;
}

/* fsync of a directory: its entries as they are now.  An entry new to the
 * image brings its inode as created (mode, owner), not its bytes. */
static int snapshot_entry(int dfd, const char *name, struct stat *st, bool initial)
{
        size_t i = rec_of(st);
        if (S_ISLNK(st->st_mode) && !recs[i].data) {
                char buf[4096];
                ssize_t n = readlinkat(dfd, name, buf, sizeof(buf));
                if (n >= 0) {
                        recs[i].data = xrealloc(NULL, (size_t)n);
                        memcpy(recs[i].data, buf, (size_t)n);
                        recs[i].len = (size_t)n;
                }
        }
        if (initial) {
                /* at mount everything is on disk */
                if (S_ISREG(st->st_mode)) {
                        int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                        if (fd >= 0) {
                                free(recs[i].data);
                                if (read_all(fd, &recs[i].data, &recs[i].len) < 0) {
                                        recs[i].data = NULL;
                                        recs[i].len = 0;
                                }
                                close(fd);
                        }
                } else if (S_ISDIR(st->st_mode)) {
                        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd >= 0) {
                                sync_dir(fd, true);
                                close(fd);
                        }
                }
        }
        return (int)i;
}

int sync_dir(int dfd, bool initial)
{
        struct stat st;
        struct dirent *de;
        DIR *d;
        int fd;

        if (fstat(dfd, &st) < 0)
                return -errno;
        size_t me = rec_sync_meta(&st);
        fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        struct entry *ents = NULL;
        size_t n = 0, cap = 0;
        while ((de = readdir(d))) {
                struct stat est;
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (fstatat(dfd, de->d_name, &est, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                size_t i = (size_t)snapshot_entry(dfd, de->d_name, &est, initial);
                if (n == cap)
                        ents = xrealloc(ents, (cap = cap ? 2 * cap : 16) * sizeof(*ents));
                ents[n].name = strdup(de->d_name);
                ents[n].rec = i;
                n++;
        }
        closedir(d);
        ents_free(&recs[me]);
        recs[me].ents = ents;
        recs[me].n_ents = n;
        if (!initial)
                n_fsyncdir++;
        return 0;
}

/* ---- the cut: build the image beside BACKING, swap it in ---- */

static char **made_paths;
static size_t n_made;

static int build(const char *path, size_t i)
{
        struct rec *r = &recs[i];
        int fd;

        if (r->made)
                return link(made_paths[r->made - 1], path) < 0 ? -errno : 0;
        made_paths = xrealloc(made_paths, (n_made + 1) * sizeof(*made_paths));
        made_paths[n_made++] = strdup(path);
        r->made = n_made;
        if (S_ISDIR(r->mode)) {
                if (mkdir(path, 0700) < 0)
                        return -errno;
                for (size_t k = 0; k < r->n_ents; k++) {
                        char *p;
                        if (asprintf(&p, "%s/%s", path, r->ents[k].name) < 0)
                                return -ENOMEM;
                        int e = build(p, r->ents[k].rec);
                        free(p);
                        if (e < 0)
                                return e;
                }
        } else if (S_ISREG(r->mode)) {
                fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                if (fd < 0)
                        return -errno;
                if (r->len && write(fd, r->data, r->len) != (ssize_t)r->len) {
                        close(fd);
                        return -EIO;
                }
                close(fd);
        } else if (S_ISLNK(r->mode)) {
                char *t = strndup(r->data ? r->data : "", r->len);
                int e = symlink(t, path);
                free(t);
                if (e < 0)
                        return -errno;
                return 0;
        } else {
                /* sockets, fifos: their node, as mknod made it */
                if (mknod(path, r->mode, 0) < 0)
                        return -errno;
        }
        if (lchown(path, r->uid, r->gid) < 0) {
                /* not root: keep ours */
        }
        if (chmod(path, r->mode & 07777) < 0)
                return -errno;
        struct timespec ts[2] = { r->mtime, r->mtime };
        utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
        return 0;
}

static int rm_rf(const char *path)
{
        char *cmd;
        /* the old tree is ours alone now; rm knows every corner case */
        if (asprintf(&cmd, "rm -rf -- '%s'", path) < 0)
                return -ENOMEM;
        int r = system(cmd);
        free(cmd);
        return r == 0 ? 0 : -EIO;
}

int do_cut(void)
{
        char *nw, *old;
        int r;

        if (asprintf(&nw, "%s.cut-new", backing) < 0 || asprintf(&old, "%s.cut-old", backing) < 0)
                return -ENOMEM;
        rm_rf(nw);
        rm_rf(old);
        r = build(nw, root_rec);
        if (r >= 0 && (rename(backing, old) < 0 || rename(nw, backing) < 0))
                r = -errno;
        if (r >= 0)
                rm_rf(old);
        fprintf(stderr, "powercutfs: cut: %s (%zu records, %lu file syncs, %lu directory syncs, %lu ops)\n",
                r < 0 ? strerror(-r) : "image written", n_recs, n_fsync, n_fsyncdir, n_ops);
        free(nw);
        free(old);
        cut_done = true;
        return r;
}
