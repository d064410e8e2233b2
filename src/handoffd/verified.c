/* What each big claimed record says (sp->verified).  A sweep looks at
 * every claimed item: reading each record at every look costs items x
 * size.  A record is the daemon's own file, written once at the claim and
 * never changed (no producer holds it), so its inode and size stand for
 * its bytes: per id, they and what the look needs (the agents, the
 * accepted time: struct verified_entry).  A record the daemon did not
 * write (an earlier version's claimed item, the producer's inode) is
 * never cached: it is verified at each look until it is converted
 * (item_legacy.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"
#include "verified.h"

/* Only a record this large is remembered: below it, reading it again
 * costs about what the entry saves, and a backlog of small items would
 * hold an entry each; above it, an entry is a small part of the bytes it
 * stands for. */
#define VERIFIED_MIN_SIZE (64 * 1024)

static bool copy(char *dst, size_t n, const char *src)
{
        return src && xsnprintf(dst, n, "%s", src) >= 0;
}

void verified_store(struct spool *sp, const char *id, const struct stat *st, const json_t *rec)
{
        struct verified_entry v = {
                .dev = st->st_dev, .ino = st->st_ino, .size = st->st_size, .gen = sp->sweep_gen,
        }, *e;

        if (st->st_size < VERIFIED_MIN_SIZE ||
            !copy(v.from, sizeof(v.from), json_string_value(json_object_get(rec, "from_agent"))) ||
            !copy(v.to, sizeof(v.to), json_string_value(json_object_get(rec, "to_agent"))) ||
            !copy(v.accepted_at, sizeof(v.accepted_at),
                  json_string_value(json_object_get(rec, "accepted_at"))))
                return;
        e = dict_put(&sp->verified, id, NULL);
        if (e)
                *e = v;
}

json_t *verified_lookup(struct spool *sp, const char *id, const struct stat *st)
{
        struct verified_entry *e = dict_get(&sp->verified, id);

        if (!e || e->dev != st->st_dev || e->ino != st->st_ino || e->size != st->st_size)
                return NULL;
        e->gen = sp->sweep_gen;
        return json_pack("{s:s, s:s, s:s}", "from_agent", e->from, "to_agent", e->to,
                         "accepted_at", e->accepted_at);
}

void verified_forget(struct spool *sp, const char *id)
{
        dict_del(&sp->verified, id);
}

void verified_forget_older(struct spool *sp, uint64_t gen)
{
        struct verified_entry *e, *nx;

        DICT_FOREACH_SAFE(e, nx, &sp->verified)
                if (e->gen < gen)
                        dict_remove(&sp->verified, e);
}
