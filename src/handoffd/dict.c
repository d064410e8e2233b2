/* The keyed table of dict.h: chained buckets keyed by SipHash
 * (libsodium's crypto_shorthash) under a key drawn at start, since the
 * keys are names a producer picks: no one outside can aim them at one
 * bucket.  A doubly linked list keeps the order of adding, which the
 * daemon's evictions and expiry walks follow. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "dict.h"

struct dict_node {
        struct dict_node *chain;        /* same bucket */
        struct dict_node *prev, *next;  /* order of adding */
        uint64_t hash;
        const char *key;                /* after the entry, in this allocation */
        max_align_t entry[];
};

#define NODE(e) ((struct dict_node *)((char *)(e) - offsetof(struct dict_node, entry)))

static unsigned char hash_key[crypto_shorthash_KEYBYTES];
static bool hash_key_set;

static uint64_t key_hash(const char *key)
{
        unsigned char out[crypto_shorthash_BYTES];
        uint64_t h;

        if (!hash_key_set) {
                /* idempotent: the daemon's keys called it already */
                if (sodium_init() >= 0)
                        randombytes_buf(hash_key, sizeof(hash_key));
                hash_key_set = true;
        }
        crypto_shorthash(out, (const unsigned char *)key, strlen(key), hash_key);
        memcpy(&h, out, sizeof(h));
        return h;
}

void dict_init(struct dict *d, size_t size)
{
        dict_init_drop(d, size, NULL);
}

void dict_init_drop(struct dict *d, size_t size, void (*drop)(void *e))
{
        *d = (struct dict){ .size = size, .drop = drop };
}

void dict_clear(struct dict *d)
{
        struct dict_node *n, *nx;

        for (n = d->head; n; n = nx) {
                nx = n->next;
                if (d->drop)
                        d->drop(n->entry);
                free(n);
        }
        free(d->bucket);
        dict_init_drop(d, d->size, d->drop);
}

size_t dict_count(const struct dict *d)
{
        return d->n;
}

static struct dict_node *find(const struct dict *d, const char *key, uint64_t h)
{
        if (!d->n_bucket)
                return NULL;
        for (struct dict_node *n = d->bucket[h & (d->n_bucket - 1)]; n; n = n->chain)
                if (n->hash == h && !strcmp(n->key, key))
                        return n;
        return NULL;
}

void *dict_get(const struct dict *d, const char *key)
{
        struct dict_node *n = d->n ? find(d, key, key_hash(key)) : NULL;

        return n ? n->entry : NULL;
}

/* Twice the buckets when the chains grow past one entry on average; a
 * failed allocation leaves the chains longer, nothing lost. */
static void grow(struct dict *d)
{
        size_t nb = d->n_bucket ? d->n_bucket * 2 : 16;
        struct dict_node **b;

        if (d->n < d->n_bucket)
                return;
        b = calloc(nb, sizeof(*b));
        if (!b)
                return;
        for (struct dict_node *n = d->head; n; n = n->next) {
                n->chain = b[n->hash & (nb - 1)];
                b[n->hash & (nb - 1)] = n;
        }
        free(d->bucket);
        d->bucket = b;
        d->n_bucket = nb;
}

void *dict_put(struct dict *d, const char *key, bool *added)
{
        uint64_t h = key_hash(key);
        struct dict_node *n = find(d, key, h);
        size_t kl = strlen(key) + 1;

        if (added)
                *added = !n;
        if (n)
                return n->entry;
        grow(d);
        if (!d->n_bucket)
                return NULL;
        n = calloc(1, sizeof(*n) + d->size + kl);
        if (!n)
                return NULL;
        memcpy((char *)n->entry + d->size, key, kl);
        n->key = (char *)n->entry + d->size;
        n->hash = h;
        n->chain = d->bucket[h & (d->n_bucket - 1)];
        d->bucket[h & (d->n_bucket - 1)] = n;
        n->prev = d->tail;
        if (d->tail)
                d->tail->next = n;
        else
                d->head = n;
        d->tail = n;
        d->n++;
        return n->entry;
}

void dict_remove(struct dict *d, void *e)
{
        struct dict_node *n = NODE(e), **p = &d->bucket[n->hash & (d->n_bucket - 1)];

        while (*p != n)
                p = &(*p)->chain;
        *p = n->chain;
        if (n->prev)
                n->prev->next = n->next;
        else
                d->head = n->next;
        if (n->next)
                n->next->prev = n->prev;
        else
                d->tail = n->prev;
        d->n--;
        if (d->drop)
                d->drop(n->entry);
        free(n);
}

void dict_del(struct dict *d, const char *key)
{
        void *e = dict_get(d, key);

        if (e)
                dict_remove(d, e);
}

const char *dict_key(const void *e)
{
        return NODE(e)->key;
}

void *dict_first(const struct dict *d)
{
        return d->head ? d->head->entry : NULL;
}

void *dict_next(const void *e)
{
        struct dict_node *n = NODE(e)->next;

        return n ? n->entry : NULL;
}
