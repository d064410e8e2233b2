/* What was verified of each claimed item (sp->verified; issue 24.1).  A
 * sweep looks at every claimed item; reading and verifying each at every
 * look cost O(items x size) (200 items of 1 MiB of reals: 4 s a sweep,
 * which starved the loop).  An item is verified when it may have changed:
 * its agents and a hash of the verified bytes are kept per id with the
 * inode, its size and its change time (which its owner cannot set), and
 * written into its marker (delivery.c) so a restart need not verify it
 * again either.  A look at an unchanged item costs a stat; at one whose
 * change time moved, or is too young to trust, a read and a hash. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "files.h"
#include "layout.h"
#include "util.h"
#include "verified.h"

/* A change to the inode shows in its ctime, which its owner cannot set;
 * but the kernel's clock for it is coarse (a tick), so a write in the
 * same tick as our stat would keep it: only a ctime this old when it was
 * recorded stands for the bytes (a younger one: the bytes are hashed
 * again at each look, a millisecond a MiB, until it is this old). */
#define CACHE_SETTLE_NSEC (200 * 1000000LL)
#define HASH_LEN crypto_generichash_BYTES

/* Only a document this large is remembered: below it, reading and
 * verifying it again costs about what the entry saves (tens of
 * microseconds), and an entry costs about 1.3 kB of memory, which 12,000
 * small claimed items made 15.6 MB (tests/e2e/test_daemon_backlog.py);
 * above it, an entry is at most 2% of the bytes it stands for. */
#define VERIFIED_MIN_SIZE (64 * 1024)

static int64_t st_ns(const struct timespec *t)
{
        return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* The entry: [dev, ino, size, ctime ns (0: not settled), sweep gen, from,
 * to, hash of the verified bytes (hex)]. */
enum { C_DEV, C_INO, C_SIZE, C_CTIME, C_GEN, C_FROM, C_TO, C_HASH };

static void bytes_hash(const char *buf, size_t len, char hex[2 * HASH_LEN + 1])
{
        unsigned char h[HASH_LEN];

        crypto_generichash(h, sizeof(h), (const unsigned char *)buf, len, NULL, 0);
        sodium_bin2hex(hex, 2 * HASH_LEN + 1, h, sizeof(h));
}

static bool settled(const struct stat *st)
{
        struct timespec now;

        return clock_gettime(CLOCK_REALTIME, &now) == 0 &&
               st_ns(&now) - st_ns(&st->st_ctim) >= CACHE_SETTLE_NSEC;
}

/* These bytes (buf, the inode st) verified as doc: remember whose they are. */
void verified_store(struct spool *sp, const char *id, const struct stat *st,
                        const char *buf, size_t len, const json_t *doc)
{
        const char *from = json_string_value(json_object_get(doc, "from_agent"));
        const char *to = json_string_value(json_object_get(doc, "to_agent"));
        char hex[2 * HASH_LEN + 1];

        if (!from || !to || len < VERIFIED_MIN_SIZE)
                return;
        bytes_hash(buf, len, hex);
        json_object_set_new_nocheck(sp->verified, id,
                json_pack("[I, I, I, I, I, s, s, s]", (json_int_t)st->st_dev,
                          (json_int_t)st->st_ino, (json_int_t)st->st_size,
                          (json_int_t)(settled(st) ? st_ns(&st->st_ctim) : 0),
                          (json_int_t)sp->sweep_gen, from, to, hex));
}

void verified_claimed(struct spool *sp, const char *id, int fd, const char *buf, size_t len,
                   const json_t *doc)
{
        struct stat st;

        if (fstat(fd, &st) == 0)
                verified_store(sp, id, &st, buf, len, doc);
}

json_t *verified_record(struct spool *sp, const char *id)
{
        json_t *e = json_object_get(sp->verified, id);

        if (!e)
                return NULL;
        return json_pack("{s:O, s:O, s:O}", "from_agent", json_array_get(e, C_FROM),
                         "to_agent", json_array_get(e, C_TO), "b2", json_array_get(e, C_HASH));
}

/* What the marker (our own file) says was verified, as an entry for
 * claimed/<id>.json (st): after a restart an item need not be verified
 * again while it holds those bytes. */
static json_t *cache_from_marker(struct spool *sp, const char *id, const struct stat *st)
{
        hd_limits lim = { .max_size = 65536 };
        _cleanup_json_ json_t *m = NULL;
        char mname[NAME_MAX + 1];
        const char *from, *to, *h;
        json_t *vr, *e;
        hd_verdict v;

        if (st->st_size < VERIFIED_MIN_SIZE ||
            layout_suffixed(id, LAYOUT_DELIVERED, mname, sizeof(mname)) < 0 ||
            hd_load_at(sp->fd[SD_CLAIMED], mname, &lim, &m, &v) < 0)
                return NULL;
        vr = json_object_get(m, "verified");
        from = json_string_value(json_object_get(vr, "from_agent"));
        to = json_string_value(json_object_get(vr, "to_agent"));
        h = json_string_value(json_object_get(vr, "b2"));
        if (!from || !to || !h || strlen(h) != 2 * HASH_LEN)
                return NULL;
        e = json_pack("[I, I, I, I, I, s, s, s]", (json_int_t)st->st_dev, (json_int_t)st->st_ino,
                      (json_int_t)-1, (json_int_t)0, (json_int_t)sp->sweep_gen, from, to, h);
        if (e)
                json_object_set_new_nocheck(sp->verified, id, e);
        return e;
}

static json_t *cache_doc(json_t *e)
{
        return json_pack("{s:O, s:O}", "from_agent", json_array_get(e, C_FROM),
                         "to_agent", json_array_get(e, C_TO));
}

/* The verified item's from/to, if claimed/<id>.json (fd, st) still holds
 * the bytes verified; NULL if it must be read and verified. */
json_t *verified_lookup(struct spool *sp, const char *id, int fd, const struct stat *st)
{
        json_t *e = json_object_get(sp->verified, id);
        _cleanup_free_ char *buf = NULL;
        char hex[2 * HASH_LEN + 1];
        size_t len;
        hd_verdict v;

        if (!e)
                e = cache_from_marker(sp, id, st);
        if (!e)
                return NULL;
        if (!S_ISREG(st->st_mode) || st->st_nlink != 1 ||
            json_integer_value(json_array_get(e, C_DEV)) != (json_int_t)st->st_dev ||
            json_integer_value(json_array_get(e, C_INO)) != (json_int_t)st->st_ino) {
                json_object_del(sp->verified, id);
                return NULL;
        }
        json_array_set_new(e, C_GEN, json_integer((json_int_t)sp->sweep_gen));
        if (json_integer_value(json_array_get(e, C_SIZE)) == (json_int_t)st->st_size &&
            json_integer_value(json_array_get(e, C_CTIME)) == (json_int_t)st_ns(&st->st_ctim))
                return cache_doc(e);
        /* Changed, or too recently to tell: are these the bytes verified? */
        if (lseek(fd, 0, SEEK_SET) < 0 ||
            read_fd_stat(fd, st, id, sp->cfg->max_file_size, &buf, &len, &v) < 0)
                return NULL;
        bytes_hash(buf, len, hex);
        if (strcmp(hex, json_string_value(json_array_get(e, C_HASH)))) {
                json_object_del(sp->verified, id);
                return NULL;
        }
        json_array_set_new(e, C_SIZE, json_integer((json_int_t)st->st_size));
        json_array_set_new(e, C_CTIME, json_integer((json_int_t)(settled(st) ? st_ns(&st->st_ctim) : 0)));
        return cache_doc(e);
}

void verified_forget(struct spool *sp, const char *id)
{
        json_object_del(sp->verified, id);
}

void verified_forget_older(struct spool *sp, uint64_t gen)
{
        const char *k;
        void *tmp;
        json_t *v;

        json_object_foreach_safe(sp->verified, tmp, k, v)
                if ((uint64_t)json_integer_value(json_array_get(v, C_GEN)) < gen)
                        json_object_del(sp->verified, k);
}
