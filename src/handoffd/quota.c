/* The inbox quota (issue 24.9): a member of group handoff could flood an
 * agent with valid handoffs, each waiting in its handoffs/ for the resume
 * window.  [spool] max_waiting bounds the claimed items waiting for one
 * agent, max_waiting_per_sender those of one sender; one more is rejected
 * as inbox_full, its id not remembered (a retry once there is room is no
 * replay).
 *
 * Counted in memory, never by listing directories per handoff, and only
 * while a limit is set: sp->waiting maps each claimed id to its (agent,
 * sender) pair, noted at the claim and at each look of the sweep, dropped
 * when the item is archived or rejected.  A pair is one JSON array
 * [agent, from, n] shared by its ids (an id costs a table entry, about
 * 150 bytes); sp->waiting_n is agent -> {"": total, from: pair}.  A sweep
 * begins with the ids set aside (sp->waiting_prev); what its looks do not
 * note again was archived by another daemon, and is dropped at its end. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "quota.h"

static bool quota_on(const struct spool *sp)
{
        return sp->cfg->max_waiting || sp->cfg->max_waiting_per_sender;
}

/* The pair's count and its agent's total, by d. */
static void pair_add(struct spool *sp, json_t *pair, json_int_t d)
{
        const char *agent = json_string_value(json_array_get(pair, 0));
        const char *from = json_string_value(json_array_get(pair, 1));
        json_t *a = json_object_get(sp->waiting_n, agent);
        json_int_t n = json_integer_value(json_array_get(pair, 2)) + d;
        json_int_t total;

        if (!a)
                return;
        json_array_set_new(pair, 2, json_integer(n > 0 ? n : 0));
        if (n <= 0)
                json_object_del(a, from);
        total = json_integer_value(json_object_get(a, "")) + d;
        if (total > 0)
                json_object_set_new(a, "", json_integer(total));
        else
                json_object_clear(a);
}

static json_t *pair_get(struct spool *sp, const char *agent, const char *from)
{
        json_t *a = json_object_get(sp->waiting_n, agent), *p;

        if (!a) {
                a = json_object();
                if (!a || json_object_set_new(sp->waiting_n, agent, a) < 0)
                        return NULL;
        }
        p = json_object_get(a, from);
        if (p)
                return p;
        p = json_pack("[s, s, i]", agent, from, 0);
        if (!p || json_object_set_new(a, from, p) < 0)
                return NULL;
        return p;
}

void quota_note(struct spool *sp, const char *id, const char *agent, const char *from)
{
        json_t *e, *p;

        if (!agent || !id || !quota_on(sp))
                return;
        if (!from || !hd_agent_valid(from))
                from = "(invalid)";
        e = json_object_get(sp->waiting, id);
        if (!e && sp->waiting_prev && (e = json_object_get(sp->waiting_prev, id))) {
                /* seen again by this sweep: kept */
                json_object_set_nocheck(sp->waiting, id, e);
                json_object_del(sp->waiting_prev, id);
        }
        if (e && !strcmp(json_string_value(json_array_get(e, 0)) ?: "", agent) &&
            !strcmp(json_string_value(json_array_get(e, 1)) ?: "", from))
                return;
        if (e)
                quota_forget(sp, id);
        p = pair_get(sp, agent, from);
        if (!p || json_object_set_nocheck(sp->waiting, id, p) < 0)
                return;
        pair_add(sp, p, 1);
}

void quota_forget(struct spool *sp, const char *id)
{
        json_t *w[2] = { sp->waiting, sp->waiting_prev };

        for (int i = 0; i < 2; i++) {
                json_t *e = w[i] ? json_object_get(w[i], id) : NULL;
                if (!e)
                        continue;
                pair_add(sp, e, -1);
                json_object_del(w[i], id);
        }
}

void quota_sweep_begin(struct spool *sp)
{
        json_t *n = json_object();

        if (!n || sp->waiting_prev) {   /* one under way: it goes on */
                json_decref(n);
                return;
        }
        sp->waiting_prev = sp->waiting;
        sp->waiting = n;
}

void quota_sweep_end(struct spool *sp)
{
        const char *k;
        json_t *e;

        if (!sp->waiting_prev)
                return;
        json_object_foreach(sp->waiting_prev, k, e)
                pair_add(sp, e, -1);
        json_decref(sp->waiting_prev);
        sp->waiting_prev = NULL;
}

size_t quota_waiting(struct spool *sp, const char *agent)
{
        return (size_t)json_integer_value(json_object_get(json_object_get(sp->waiting_n, agent), ""));
}

int quota_check(struct spool *sp, const char *agent, const char *from, hd_verdict *v)
{
        const struct config *c = sp->cfg;
        json_t *a = json_object_get(sp->waiting_n, agent);
        uint64_t total = (uint64_t)json_integer_value(json_object_get(a, ""));
        uint64_t mine = from ? (uint64_t)json_integer_value(json_array_get(json_object_get(a, from), 2)) : 0;

        if (c->max_waiting_per_sender && mine >= c->max_waiting_per_sender) {
                v->reason = HD_R_INBOX_FULL;
                snprintf(v->detail, sizeof(v->detail),
                         "%llu handoffs from %s already wait for %s (max_waiting_per_sender)",
                         (unsigned long long)mine, from, agent);
                return -EBADMSG;
        }
        if (c->max_waiting && total >= c->max_waiting) {
                v->reason = HD_R_INBOX_FULL;
                snprintf(v->detail, sizeof(v->detail),
                         "%llu handoffs already wait for %s (max_waiting)",
                         (unsigned long long)total, agent);
                return -EBADMSG;
        }
        return 0;
}
