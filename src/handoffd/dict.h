/* A keyed table of the daemon's state (dict.c): string key -> a typed
 * entry of a fixed size, in the order the keys were added.  The model is
 * OpenSMTPD's dict; the entry and its key are one allocation, so an
 * entry costs one malloc however many fields it has. */
#ifndef HD_DICT_H
#define HD_DICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dict_node;

struct dict {
        struct dict_node **bucket;
        size_t n_bucket;        /* 0: none yet */
        size_t n;
        size_t size;            /* of an entry */
        struct dict_node *head, *tail;  /* the order of adding */
        void (*drop)(void *e);  /* NULL: the entry owns nothing */
};

/* An empty table whose entries are size bytes (0: a set of keys). */
void dict_init(struct dict *d, size_t size);
/* As dict_init(), with drop(e) called on each entry as it goes
 * (dict_remove, dict_del, dict_clear): what the entry's fields own is
 * freed there and nowhere else. */
void dict_init_drop(struct dict *d, size_t size, void (*drop)(void *e));
/* Every entry dropped and freed; the table stays usable. */
void dict_clear(struct dict *d);

size_t dict_count(const struct dict *d);
/* The entry of key, or NULL. */
void *dict_get(const struct dict *d, const char *key);
/* The entry of key: the one there (fields and place kept), or a new one,
 * zeroed, last in order (*added true).  NULL: out of memory. */
void *dict_put(struct dict *d, const char *key, bool *added);
void dict_del(struct dict *d, const char *key);
/* e, an entry of d, removed and freed. */
void dict_remove(struct dict *d, void *e);

/* The key of an entry. */
const char *dict_key(const void *e);
/* In the order of adding; dict_next() of an entry must be taken before
 * that entry is removed. */
void *dict_first(const struct dict *d);
void *dict_next(const void *e);

#define DICT_FOREACH_SAFE(e, nx, d) \
        for ((e) = dict_first(d); (e) && ((nx) = dict_next(e), 1); (e) = (nx))

#endif
