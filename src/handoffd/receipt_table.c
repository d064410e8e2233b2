/* The receipts' keyed tables: chained hashing on the key's FNV-1a, the
 * bucket array doubled when it holds as many entries as buckets. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "receipt_table.h"
#include "util.h"

static size_t slot(const struct rtab *t, const char *key)
{
        return (size_t)(fnv1a(key, strlen(key), FNV_BASIS) & (t->nb - 1));
}

struct rentry *rtab_get(const struct rtab *t, const char *key)
{
        if (!t->nb)
                return NULL;
        for (struct rentry *e = t->b[slot(t, key)]; e; e = e->next)
                if (!strcmp(e->key, key))
                        return e;
        return NULL;
}

static int grow(struct rtab *t)
{
        size_t nb = t->nb ? 2 * t->nb : 64;
        struct rentry **b = calloc(nb, sizeof(*b));
        struct rtab n = { .b = b, .nb = nb, .n = t->n };

        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < t->nb; i++)
                for (struct rentry *e = t->b[i], *next; e; e = next) {
                        next = e->next;
                        size_t s = slot(&n, e->key);
                        e->next = b[s];
                        b[s] = e;
                }
        free(t->b);
        *t = n;
        return 0;
}

int rtab_put(struct rtab *t, const char *key, const char *val, size_t len, struct rentry **ret)
{
        struct rentry *e = rtab_get(t, key);
        char *v = malloc(len + 1);

        if (!v)
                return -ENOMEM;
        memcpy(v, val, len);
        v[len] = '\0';
        if (!e) {
                if (t->n >= t->nb && grow(t) < 0) {
                        free(v);
                        return -ENOMEM;
                }
                size_t k = strlen(key);
                e = calloc(1, sizeof(*e) + k + 1);
                if (!e) {
                        free(v);
                        return -ENOMEM;
                }
                memcpy(e->key, key, k + 1);
                size_t s = slot(t, key);
                e->next = t->b[s];
                t->b[s] = e;
                t->n++;
        }
        free(e->val);
        e->val = v;
        e->len = len;
        if (ret)
                *ret = e;
        return 0;
}

bool rtab_del(struct rtab *t, const char *key)
{
        if (!t->nb)
                return false;
        for (struct rentry **p = &t->b[slot(t, key)]; *p; p = &(*p)->next)
                if (!strcmp((*p)->key, key)) {
                        struct rentry *e = *p;
                        *p = e->next;
                        free(e->val);
                        free(e);
                        t->n--;
                        return true;
                }
        return false;
}

void rtab_del_busy(struct rtab *t)
{
        for (size_t i = 0; i < t->nb; i++)
                for (struct rentry **p = &t->b[i]; *p;) {
                        struct rentry *e = *p;
                        if (!e->busy) {
                                p = &e->next;
                                continue;
                        }
                        *p = e->next;
                        free(e->val);
                        free(e);
                        t->n--;
                }
}

void rtab_free(struct rtab *t)
{
        for (size_t i = 0; i < t->nb; i++)
                for (struct rentry *e = t->b[i], *next; e; e = next) {
                        next = e->next;
                        free(e->val);
                        free(e);
                }
        free(t->b);
        *t = (struct rtab){ 0 };
}
