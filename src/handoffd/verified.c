/* What each big claimed record says (sp->verified).  A sweep looks at
 * every claimed item; reading each record at every look cost
 * O(items x size) (200 records of 1 MiB: seconds a sweep, issue 24.1).
 * A record is the daemon's own file, written once at the claim and never
 * changed (issue 25: no producer holds it), so its inode stands for its
 * bytes: per id, the inode, its size and what the look needs (the
 * agents, the accepted time).  A record the daemon did not write (an
 * earlier version's claimed item, the producer's inode) is never
 * cached: it is verified at each look until it is converted (item.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "verified.h"

/* Only a record this large is remembered: below it, reading it again
 * costs about what the entry saves (tens of microseconds), and an entry
 * costs about 1 kB of memory, which 12,000 small claimed items made 15
 * MB (tests/e2e/test_daemon_backlog.py); above it, an entry is at most
 * 2% of the bytes it stands for. */
#define VERIFIED_MIN_SIZE (64 * 1024)

/* The entry: [dev, ino, size, sweep gen, from, to, accepted_at]. */
enum { C_DEV, C_INO, C_SIZE, C_GEN, C_FROM, C_TO, C_ACC };

void verified_store(struct spool *sp, const char *id, const struct stat *st, const json_t *rec)
{
        const char *from = json_string_value(json_object_get(rec, "from_agent"));
        const char *to = json_string_value(json_object_get(rec, "to_agent"));
        const char *acc = json_string_value(json_object_get(rec, "accepted_at"));

        if (!from || !to || !acc || st->st_size < VERIFIED_MIN_SIZE)
                return;
        json_object_set_new_nocheck(sp->verified, id,
                json_pack("[I, I, I, I, s, s, s]", (json_int_t)st->st_dev,
                          (json_int_t)st->st_ino, (json_int_t)st->st_size,
                          (json_int_t)sp->sweep_gen, from, to, acc));
}

json_t *verified_lookup(struct spool *sp, const char *id, const struct stat *st)
{
        json_t *e = json_object_get(sp->verified, id);

        if (!e || json_integer_value(json_array_get(e, C_DEV)) != (json_int_t)st->st_dev ||
            json_integer_value(json_array_get(e, C_INO)) != (json_int_t)st->st_ino ||
            json_integer_value(json_array_get(e, C_SIZE)) != (json_int_t)st->st_size)
                return NULL;
        json_array_set_new(e, C_GEN, json_integer((json_int_t)sp->sweep_gen));
        return json_pack("{s:O, s:O, s:O}", "from_agent", json_array_get(e, C_FROM),
                         "to_agent", json_array_get(e, C_TO),
                         "accepted_at", json_array_get(e, C_ACC));
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
