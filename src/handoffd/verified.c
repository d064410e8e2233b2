/* What each big claimed record says (struct verified).  A sweep looks at
 * every claimed item, and reading every record at every look costs items x
 * size.  A record is the daemon's own file: it is written once at the
 * claim, no producer holds it, and it never changes.  So its inode and size
 * stand for its bytes, and per id we keep them with what a look needs (the
 * agents and the accepted time: struct verified_entry), from the claim
 * that writes it (delivery_write()), or after a start from the first look
 * that reads it.  A record the
 * daemon did not write (an earlier version's item, still the producer's
 * inode) is never cached: it is verified at each look until item_legacy.c
 * converts it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "handoff.h"
#include "util.h"
#include "verified.h"

/* Only a record this large is remembered: below it, reading it again
 * costs about what the entry saves, and a backlog of small items would
 * hold an entry each; above it, an entry is a small part of the bytes it
 * stands for. */
#define VERIFIED_MIN_SIZE (64 * 1024)

void verified_init(struct verified *vc)
{
        *vc = (struct verified){ 0 };
        dict_init(&vc->items, sizeof(struct verified_entry));
}

void verified_clear(struct verified *vc)
{
        dict_clear(&vc->items);
}

bool verified_worth(size_t size)
{
        return size >= VERIFIED_MIN_SIZE;
}

int verified_record_parse(const json_t *rec, struct handoff *ret, int64_t *ret_accepted)
{
        const char *acc = json_string_value(json_object_get(rec, "accepted_at"));
        int r = handoff_from_record(rec, ret);

        if (r < 0)
                return r;
        if (!acc || hd_time_parse(acc, ret_accepted) < 0)
                *ret_accepted = 0;
        return 0;
}

void verified_store_record(struct verified *vc, const struct stat *st, const json_t *rec)
{
        struct handoff h = { 0 };
        int64_t acc;

        if (!verified_worth((size_t)st->st_size) || verified_record_parse(rec, &h, &acc) < 0)
                return;
        verified_store(vc, st, &h, acc);
        handoff_clear(&h);
}

void verified_store(struct verified *vc, const struct stat *st, const struct handoff *h,
                    int64_t accepted_usec)
{
        struct verified_entry v = {
                .dev = st->st_dev, .ino = st->st_ino, .size = st->st_size, .gen = vc->gen,
                .accepted_usec = accepted_usec,
        }, *e;

        if (st->st_size < VERIFIED_MIN_SIZE || xsnprintf(v.from, sizeof(v.from), "%s", h->from) < 0 ||
            xsnprintf(v.to, sizeof(v.to), "%s", h->to) < 0 ||
            xsnprintf(v.kid, sizeof(v.kid), "%s", h->kid) < 0)
                return;
        e = dict_put(&vc->items, h->id, NULL);
        if (e)
                *e = v;
}

bool verified_lookup(struct verified *vc, const char *id, const struct stat *st,
                     struct handoff *ret, int64_t *ret_accepted)
{
        struct verified_entry *e = dict_get(&vc->items, id);
        struct handoff h = { 0 };

        if (!e || e->dev != st->st_dev || e->ino != st->st_ino || e->size != st->st_size ||
            xsnprintf(h.id, sizeof(h.id), "%s", id) < 0)
                return false;
        e->gen = vc->gen;
        memcpy(h.from, e->from, sizeof(h.from));
        memcpy(h.to, e->to, sizeof(h.to));
        memcpy(h.kid, e->kid, sizeof(h.kid));
        *ret = h;
        *ret_accepted = e->accepted_usec;
        return true;
}

void verified_forget(struct verified *vc, const char *id)
{
        dict_del(&vc->items, id);
}

void verified_forget_older(struct verified *vc, uint64_t gen)
{
        struct verified_entry *e, *nx;

        DICT_FOREACH_SAFE(e, nx, &vc->items)
                if (e->gen < gen)
                        dict_remove(&vc->items, e);
}
