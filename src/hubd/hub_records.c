/* The record of accepted ids: what the hub accepted under each handoff_id
 * (SHA-256 of the bytes, the two agents), so that a retry gets the same
 * answer and another document under the id is duplicate_id.
 *
 * The records are kept in memory and in one journal, state_dir/accepted.log,
 * a line per change appended with one write():
 *
 *   + ID HEX FROM TO TIME     accepted (FROM, TO "-" when unknown)
 *   - ID                      withdrawn (its drop lost a race)
 *
 * With fsync = yes a record is synced before its POST goes on; the POSTs
 * that append while one thread syncs share the next sync (a group commit).
 * A torn last line after a crash is skipped.  At start the journal is read
 * (and an older hub's one-file-per-id records taken in), then written anew
 * with the live records only; the same happens when a prune finds it
 * mostly dead.  A record lives max_window + max_clock_skew + 60 seconds:
 * past that no document under its id can be fresh. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "hub.h"
#include "hub_records.h"
#include "util.h"

#define JOURNAL "accepted.log"
#define JOURNAL_TMP ".accepted.log.tmp"
#define LINE_MAX_LEN 512
#define MIN_BUCKETS 1024

struct rec {
        struct rec *hnext;              /* in its bucket */
        struct rec *prev, *next;        /* oldest first */
        int64_t t;                      /* accepted, unix seconds */
        struct hub_record r;
        char id[];
};

struct hub_records {
        pthread_mutex_t lock;
        pthread_cond_t synced_cv;
        int fd;                 /* the journal, O_APPEND */
        bool sync;
        struct rec **buckets;
        size_t nbuckets, n;
        struct rec *oldest, *newest;
        uint64_t lines;         /* in the journal, live or not */
        uint64_t written, synced;       /* appends made, and made durable */
        bool syncing;
};

static size_t bucket_of(const struct hub_records *s, const char *id)
{
        return fnv1a(id, strlen(id), FNV_BASIS) & (s->nbuckets - 1);
}

static struct rec *find(struct hub_records *s, const char *id)
{
        struct rec *e;

        for (e = s->buckets[bucket_of(s, id)]; e; e = e->hnext)
                if (!strcmp(e->id, id))
                        return e;
        return NULL;
}

static void unlink_rec(struct hub_records *s, struct rec *e)
{
        struct rec **pp = &s->buckets[bucket_of(s, e->id)];

        while (*pp != e)
                pp = &(*pp)->hnext;
        *pp = e->hnext;
        if (e->prev)
                e->prev->next = e->next;
        else
                s->oldest = e->next;
        if (e->next)
                e->next->prev = e->prev;
        else
                s->newest = e->prev;
        s->n--;
        free(e);
}

static int grow(struct hub_records *s)
{
        size_t nb = s->nbuckets * 2;
        struct rec **b = calloc(nb, sizeof(*b));
        struct rec *e;

        if (!b)
                return -ENOMEM;
        free(s->buckets);
        s->buckets = b;
        s->nbuckets = nb;
        for (e = s->oldest; e; e = e->next) {
                size_t i = bucket_of(s, e->id);

                e->hnext = b[i];
                b[i] = e;
        }
        return 0;
}

/* id's record set to r at t, replacing any; kept in time order (a record
 * set again moves to the end). */
static int put(struct hub_records *s, const char *id, const struct hub_record *r, int64_t t)
{
        size_t len = strlen(id);
        struct rec *e = find(s, id), *n;

        if (e)
                unlink_rec(s, e);
        if (s->n >= s->nbuckets && grow(s) < 0)
                return -ENOMEM;
        n = malloc(sizeof(*n) + len + 1);
        if (!n)
                return -ENOMEM;
        n->t = t;
        n->r = *r;
        memcpy(n->id, id, len + 1);
        n->hnext = s->buckets[bucket_of(s, id)];
        s->buckets[bucket_of(s, id)] = n;
        n->next = NULL;
        n->prev = s->newest;
        if (s->newest)
                s->newest->next = n;
        else
                s->oldest = n;
        s->newest = n;
        s->n++;
        return 0;
}

static int format_put(char *buf, size_t n, const char *id, const struct hub_record *r, int64_t t)
{
        return xsnprintf(buf, n, "+ %s %s %s %s %lld\n", id, r->hex, r->from[0] ? r->from : "-",
                         r->to[0] ? r->to : "-", (long long)t);
}

/* The two agents of a record, when both are names ("-": unknown). */
static void set_agents(struct hub_record *r, const char *from, const char *to)
{
        if (hd_agent_valid(from) && hd_agent_valid(to)) {
                memcpy(r->from, from, strlen(from) + 1);
                memcpy(r->to, to, strlen(to) + 1);
        }
}

/* One journal line into the table; a line that does not parse is skipped. */
static void replay_line(struct hub_records *s, char *line)
{
        char id[LINE_MAX_LEN], hex[LINE_MAX_LEN], from[LINE_MAX_LEN], to[LINE_MAX_LEN];
        struct hub_record r = { 0 };
        long long t;
        struct rec *e;

        if (line[0] == '-' && sscanf(line, "- %511s", id) == 1) {
                e = find(s, id);
                if (e)
                        unlink_rec(s, e);
                return;
        }
        if (sscanf(line, "+ %511s %511s %511s %511s %lld", id, hex, from, to, &t) != 5 ||
            !hd_id_valid(id) || strlen(hex) != HUB_HASH_HEX - 1)
                return;
        memcpy(r.hex, hex, HUB_HASH_HEX);
        set_agents(&r, from, to);
        (void)put(s, id, &r, t);
}

static int replay(struct hub_records *s, int state_fd)
{
        _cleanup_close_ int fd = openat(state_fd, JOURNAL, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_fclose_ FILE *f = NULL;
        char line[LINE_MAX_LEN];

        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        f = fdopen(fd, "r");
        if (!f)
                return -errno;
        TAKE_FD(fd);
        while (fgets(line, sizeof(line), f)) {
                size_t l = strlen(line);

                if (l == 0 || line[l - 1] != '\n')
                        continue;       /* torn, or too long for a record */
                replay_line(s, line);
        }
        return ferror(f) ? -EIO : 0;
}

/* An older hub's record: state_dir/ID, "HEX FROM TO\n", its mtime the time. */
static void take_old(struct hub_records *s, int state_fd, const char *id, const struct stat *st)
{
        _cleanup_close_ int fd = openat(state_fd, id, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        char buf[LINE_MAX_LEN], from[LINE_MAX_LEN], to[LINE_MAX_LEN];
        struct hub_record r = { 0 };
        ssize_t n;

        if (fd < 0)
                return;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < HUB_HASH_HEX - 1)
                return;
        buf[n] = '\0';
        memcpy(r.hex, buf, HUB_HASH_HEX - 1);
        if (buf[HUB_HASH_HEX - 1] == ' ' && sscanf(buf + HUB_HASH_HEX, "%511s %511s", from, to) == 2)
                set_agents(&r, from, to);
        if (!find(s, id))
                (void)put(s, id, &r, st->st_mtime);
}

/* The live records, oldest first, into a new journal that replaces the
 * old one; then fd is the new one. */
static int rewrite(struct hub_records *s, int state_fd)
{
        _cleanup_close_ int fd = -1;
        _cleanup_fclose_ FILE *f = NULL;
        char line[LINE_MAX_LEN];
        struct rec *e;
        int r;

        fd = openat(state_fd, JOURNAL_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        f = fdopen(fd, "w");
        if (!f)
                return -errno;
        TAKE_FD(fd);
        for (e = s->oldest; e; e = e->next) {
                r = format_put(line, sizeof(line), e->id, &e->r, e->t);
                if (r < 0)
                        return r;
                if (fputs(line, f) == EOF)
                        return -EIO;
        }
        if (fflush(f) == EOF || (s->sync && fsync(fileno(f)) < 0))
                return -errno;
        if (renameat(state_fd, JOURNAL_TMP, state_fd, JOURNAL) < 0)
                return -errno;
        if (s->sync && (r = fsync_dir(state_fd)) < 0)
                return r;
        fd = openat(state_fd, JOURNAL, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (s->fd >= 0)
                close(s->fd);
        s->fd = TAKE_FD(fd);
        s->lines = s->n;
        s->synced = s->written;
        return 0;
}

static int64_t keep_s(const struct hub *h)
{
        return h->cfg->max_window + h->cfg->max_clock_skew + 60;
}

/* The records from before cutoff dropped: those at the head of the list
 * (it is in time order once started); all of them when all is set (at
 * start, where an older hub's files come in no order). */
static void drop_old(struct hub_records *s, int64_t cutoff, bool all)
{
        struct rec *e, *next;

        for (e = s->oldest; e; e = next) {
                next = e->next;
                if (e->t < cutoff)
                        unlink_rec(s, e);
                else if (!all)
                        break;
        }
}

int hub_records_open(struct hub *h, int64_t now_s)
{
        struct hub_records *s = calloc(1, sizeof(*s));
        DIR *d;
        struct dirent *de;
        struct stat st;
        int r;

        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->synced_cv, NULL);
        s->fd = -1;
        s->sync = h->cfg->fsync;
        s->nbuckets = MIN_BUCKETS;
        s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
        h->records = s;
        if (!s->buckets)
                return -ENOMEM;
        r = replay(s, h->state_fd);
        if (r < 0)
                return r;
        /* an older hub's records, one file per id: taken in, then removed
         * once the journal holding them is written */
        d = opendir_at(h->state_fd);
        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (hd_id_valid(de->d_name) &&
                    fstatat(h->state_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISREG(st.st_mode))
                        take_old(s, h->state_fd, de->d_name, &st);
        drop_old(s, now_s - keep_s(h), true);
        r = rewrite(s, h->state_fd);
        if (r == 0) {
                rewinddir(d);
                while ((de = readdir(d)))
                        if (hd_id_valid(de->d_name) &&
                            fstatat(h->state_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                            S_ISREG(st.st_mode))
                                unlinkat(h->state_fd, de->d_name, 0);
        }
        closedir(d);
        return r;
}

void hub_records_close(struct hub *h)
{
        struct hub_records *s = h->records;

        if (!s)
                return;
        while (s->oldest)
                unlink_rec(s, s->oldest);
        if (s->fd >= 0)
                close(s->fd);
        free(s->buckets);
        pthread_cond_destroy(&s->synced_cv);
        pthread_mutex_destroy(&s->lock);
        free(s);
        h->records = NULL;
}

int hub_record_get(struct hub *h, const char *id, struct hub_record *ret)
{
        struct hub_records *s = h->records;
        struct rec *e;
        int found = 0;

        pthread_mutex_lock(&s->lock);
        e = find(s, id);
        if (e) {
                *ret = e->r;
                found = 1;
        }
        pthread_mutex_unlock(&s->lock);
        return found;
}

/* line appended; with fsync = yes, returns once it is durable.  Under
 * s->lock, which it may let go while it waits or syncs. */
static int append_locked(struct hub_records *s, const char *line)
{
        size_t len = strlen(line);
        uint64_t mine;
        ssize_t n;

        if (s->fd < 0)
                return -EBADF;
        n = write(s->fd, line, len);
        if (n < 0)
                return -errno;
        if ((size_t)n != len)
                return -EIO;    /* a torn line: skipped by the next replay */
        s->lines++;
        mine = ++s->written;
        if (!s->sync)
                return 0;
        while (s->synced < mine) {
                uint64_t upto;
                int fd, r = 0;

                if (s->syncing) {
                        pthread_cond_wait(&s->synced_cv, &s->lock);
                        continue;
                }
                /* this sync covers every line written before it starts */
                s->syncing = true;
                upto = s->written;
                fd = s->fd;
                pthread_mutex_unlock(&s->lock);
                if (fdatasync(fd) < 0)
                        r = -errno;
                pthread_mutex_lock(&s->lock);
                s->syncing = false;
                if (r == 0 && upto > s->synced)
                        s->synced = upto;
                pthread_cond_broadcast(&s->synced_cv);
                if (r < 0)
                        return r;
        }
        return 0;
}

int hub_record_put(struct hub *h, const char *id, const struct hub_record *r, int64_t now_s)
{
        struct hub_records *s = h->records;
        char line[LINE_MAX_LEN];
        int q;

        q = format_put(line, sizeof(line), id, r, now_s);
        if (q < 0)
                return q;
        pthread_mutex_lock(&s->lock);
        q = put(s, id, r, now_s);
        if (q == 0)
                q = append_locked(s, line);
        pthread_mutex_unlock(&s->lock);
        return q;
}

int hub_record_drop(struct hub *h, const char *id)
{
        struct hub_records *s = h->records;
        char line[LINE_MAX_LEN];
        struct rec *e;
        int q;

        q = xsnprintf(line, sizeof(line), "- %s\n", id);
        if (q < 0)
                return q;
        pthread_mutex_lock(&s->lock);
        e = find(s, id);
        if (e)
                unlink_rec(s, e);
        q = e ? append_locked(s, line) : 0;
        pthread_mutex_unlock(&s->lock);
        return q;
}

int hub_records_prune(struct hub *h, int64_t now_s)
{
        struct hub_records *s = h->records;
        size_t before;
        int r = 0;

        if (!s)
                return 0;
        pthread_mutex_lock(&s->lock);
        /* a sync under way holds s->fd: the rewrite waits for it */
        while (s->syncing)
                pthread_cond_wait(&s->synced_cv, &s->lock);
        before = s->n;
        drop_old(s, now_s - keep_s(h), false);
        /* mostly dead lines: written anew */
        if (s->lines > 4096 && s->lines > 2 * (uint64_t)s->n)
                r = rewrite(s, h->state_fd);
        before -= s->n;
        pthread_mutex_unlock(&s->lock);
        if (r < 0)
                hub_log("Failed to rewrite %s in [hub] state_dir: %s", JOURNAL, strerror(-r));
        return (int)before;
}

size_t hub_records_count(struct hub *h)
{
        struct hub_records *s = h->records;
        size_t n;

        if (!s)
                return 0;
        pthread_mutex_lock(&s->lock);
        n = s->n;
        pthread_mutex_unlock(&s->lock);
        return n;
}
