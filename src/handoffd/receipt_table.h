/* The receipts' keyed tables (receipt_table.c): what a host owes, what it
 * has to publish, what it awaits, each entry a struct with named fields in
 * a string-keyed hash table.  Private to receipt*.c. */
#ifndef HD_RECEIPT_TABLE_H
#define HD_RECEIPT_TABLE_H

#include <stdbool.h>
#include <stddef.h>

struct rentry {
        struct rentry *next;
        /* owed: the origin host; sent: the archive name; queued: the
         * signed receipt's bytes, len of them */
        char *val;
        size_t len;
        /* queued: the origin host (its subject) and whether it is
         * published with its PubAck still to come */
        char origin[72];
        bool busy;
        char key[];     /* the handoff_id; queued: its Nats-Msg-Id ID:OUTCOME */
};

struct rtab {
        struct rentry **b;
        size_t nb, n;
};

struct rentry *rtab_get(const struct rtab *t, const char *key);
/* key -> a copy of val (len bytes, NUL-terminated), replacing what key
 * held; the entry in *ret (may be NULL).  0 or -ENOMEM. */
int rtab_put(struct rtab *t, const char *key, const char *val, size_t len, struct rentry **ret);
/* true: key was there. */
bool rtab_del(struct rtab *t, const char *key);
/* Every entry marked busy goes. */
void rtab_del_busy(struct rtab *t);
void rtab_free(struct rtab *t);

#define rtab_foreach(t, i, e) \
        for ((i) = 0; (i) < (t)->nb; (i)++) for ((e) = (t)->b[i]; (e); (e) = (e)->next)

#endif
