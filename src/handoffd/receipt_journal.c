/* SPOOL/receipts/journal, the receipts' one file (see receipt_journal.h).
 *
 * A record is one line: its kind and fields separated by single spaces,
 * then a space and the FNV-1a 64 of everything before that space in 16
 * lower-case hex digits, then "\n".  Only the last field may hold spaces;
 * no field holds a newline (a receipt is canonical JSON: its control
 * characters are escaped).  The file only grows between rewrites, so
 * what a power cut can spoil is its end after the last sync: a line
 * without its newline, or with a sum that does not match, and whatever
 * follows it, none of which was synced.  The read stops there and cuts
 * the file back, so that the next append starts a whole line. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "receipt_journal.h"
#include "store.h"
#include "util.h"

#define RJ_READ_MAX ((size_t)1 << 30)
#define RJ_SUM_LEN 16

static const struct {
        const char *word;
        unsigned n;             /* fields */
} kinds[_RJ_MAX] = {
        [RJ_OWE] = { "owe", 2 },
        [RJ_OUT] = { "out", 4 },
        [RJ_PUB] = { "pub", 2 },
        [RJ_SENT] = { "sent", 2 },
        [RJ_DONE] = { "done", 1 },
        [RJ_RES] = { "res", 2 },
};

static int format(struct sbuf *b, const struct rj_rec *rec)
{
        size_t start = b->len;
        char sum[RJ_SUM_LEN + 3];

        if ((unsigned)rec->kind >= _RJ_MAX)
                return -EINVAL;
        sb_puts(b, kinds[rec->kind].word);
        for (unsigned i = 0; i < kinds[rec->kind].n; i++) {
                const char *f = rec->f[i];
                bool last = i + 1 == kinds[rec->kind].n;
                if (!f || !f[0] || strchr(f, '\n') || (!last && strchr(f, ' ')))
                        return -EINVAL;
                sb_put(b, " ", 1);
                sb_puts(b, f);
        }
        if (b->err)
                return b->err;
        snprintf(sum, sizeof(sum), " %016" PRIx64 "\n",
                 fnv1a(b->buf + start, b->len - start, FNV_BASIS));
        sb_puts(b, sum);
        return b->err;
}

/* line (len bytes, no newline) as a record whose fields point into it
 * (spaces replaced by NULs); false: not a whole record. */
static bool parse(char *line, size_t len, struct rj_rec *rec)
{
        char want[RJ_SUM_LEN + 1];

        if (len < RJ_SUM_LEN + 2 || line[len - RJ_SUM_LEN - 1] != ' ')
                return false;
        size_t body = len - RJ_SUM_LEN - 1;
        snprintf(want, sizeof(want), "%016" PRIx64, fnv1a(line, body, FNV_BASIS));
        if (memcmp(want, line + body + 1, RJ_SUM_LEN))
                return false;
        line[body] = '\0';
        char *sp = strchr(line, ' ');
        if (!sp)
                return false;
        *sp = '\0';
        for (rec->kind = 0; rec->kind < _RJ_MAX; rec->kind++)
                if (!strcmp(line, kinds[rec->kind].word))
                        break;
        if (rec->kind == _RJ_MAX)
                return false;
        char *p = sp + 1;
        for (unsigned i = 0; i < kinds[rec->kind].n; i++) {
                rec->f[i] = p;
                if (i + 1 == kinds[rec->kind].n)
                        break;
                if (!(sp = strchr(p, ' ')))
                        return false;
                *sp = '\0';
                p = sp + 1;
        }
        for (unsigned i = 0; i < kinds[rec->kind].n; i++)
                if (!rec->f[i][0])
                        return false;
        return true;
}

int rj_open(struct rjournal *j, int dir_fd, bool sync, rj_apply_fn apply, void *ctx)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, off = 0;
        int q;

        *j = (struct rjournal){ .dir_fd = dir_fd, .fd = -1, .sync = sync };
        /* the temp file of a rewrite a crash interrupted: the old journal
         * stands */
        DIR *d = opendir_at(dir_fd);
        struct dirent *de;
        while (d && (de = readdir(d)))
                if (!strncmp(de->d_name, "." RJ_NAME ".", strlen(RJ_NAME) + 2))
                        (void) store_journal_remove(dir_fd, de->d_name, false);
        if (d)
                closedir(d);
        j->fd = openat(dir_fd, RJ_NAME, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (j->fd < 0)
                return -errno;
        q = read_all(j->fd, RJ_READ_MAX, 0, &buf, &len);
        if (q < 0)
                return q;
        while (off < len) {
                char *nl = memchr(buf + off, '\n', len - off);
                struct rj_rec rec = { 0 };
                if (!nl || !parse(buf + off, (size_t)(nl - (buf + off)), &rec))
                        break;
                q = apply(ctx, &rec);
                if (q < 0)
                        return q;
                j->n_rec++;
                off = (size_t)(nl - buf) + 1;
        }
        j->size = (off_t)off;
        if (off < len) {
                log_notice("Relay: receipts/journal: %zu bytes after its last whole record "
                           "(a power cut in an append) dropped", len - off);
                if (ftruncate(j->fd, (off_t)off) < 0)
                        return -errno;
                if (sync && fdatasync(j->fd) < 0)
                        return -errno;
        }
        return 0;
}

int rj_append(struct rjournal *j, const struct rj_rec *rec)
{
        struct sbuf b = { 0 };
        _cleanup_free_ char *line = NULL;
        size_t len;
        int q;

        if (j->into)
                return format(j->into, rec) < 0 ? -EINVAL : (j->n_rec++, 0);
        q = format(&b, rec);
        len = b.len;
        if (q < 0) {
                free(b.buf);
                return q;
        }
        q = sb_take(&b, &line);
        if (q < 0)
                return q;
        for (;;) {
                ssize_t w = write(j->fd, line, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w == (ssize_t)len)
                        break;
                /* A line cut short (a full disk) would end the journal at
                 * the next read, and every record after it with it. */
                q = w < 0 ? -errno : -ENOSPC;
                if (w > 0 && ftruncate(j->fd, j->size) < 0)
                        log_warning_errno(-errno, "Relay: cannot cut receipts/journal back "
                                          "after a short write: %m");
                return q;
        }
        j->size += (off_t)len;
        j->n_rec++;
        j->dirty = true;
        return 0;
}

int rj_sync(struct rjournal *j)
{
        if (!j->dirty)
                return 0;
        if (j->sync && fdatasync(j->fd) < 0)
                return -errno;
        j->dirty = false;
        return 0;
}

int rj_rewrite(struct rjournal *j, rj_emit_fn emit, void *ctx)
{
        struct sbuf b = { 0 };
        struct rjournal nj = { .dir_fd = j->dir_fd, .fd = -1, .sync = j->sync, .into = &b };
        _cleanup_free_ char *data = NULL;
        size_t len;
        int fd, q;

        q = emit(ctx, &nj);
        len = b.len;
        if (q < 0) {
                free(b.buf);
                return q;
        }
        q = sb_take(&b, &data);
        if (q < 0)
                return q;
        /* The new file whole on disk before its name replaces the old, and
         * its name before anything is appended to it. */
        q = store_journal_replace(j->dir_fd, RJ_NAME, data, len, j->sync);
        if (q < 0)
                return q;
        fd = openat(j->dir_fd, RJ_NAME, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        close(j->fd);
        j->fd = fd;
        j->size = (off_t)len;
        j->n_rec = nj.n_rec;
        j->dirty = false;
        return 0;
}

void rj_close(struct rjournal *j)
{
        if (j->fd >= 0)
                close(j->fd);
        j->fd = -1;
}
