/* A line of handoff-a2a (a2a_out.c's helper) and what it does to its
 * item.  The line is "id op outcome task state text", six tab-separated
 * fields: op "send" or "get", the one the item has in flight (answers
 * come in the order of the requests); outcome "ok" (the server took it:
 * state is its task's), "final" (refused, or a task the server no longer
 * knows) or "retry" (unreachable, 5xx); "-" for a field not given.  Every
 * field is checked before anything moves: the helper parses the server's
 * bytes, and the daemon trusts none of them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "a2a_reply.h"
#include "a2a_item.h"
#include "log.h"
#include "util.h"

static bool field_ok(const char *s, size_t max, bool spaces)
{
        size_t n = 0;

        for (; s[n]; n++)
                if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] >= 0x7f ||
                    (!spaces && s[n] == ' '))
                        return false;
        return n > 0 && n <= max;
}

static const char *const end_states[] = {
        "completed", "failed", "canceled", "rejected", "input_required", "auth_required",
};
static const char *const run_states[] = { "submitted", "working", "unknown" };

static const char *state_of(const char *s, bool *final)
{
        for (size_t i = 0; i < ELEMENTSOF(end_states); i++)
                if (!strcmp(s, end_states[i])) {
                        *final = true;
                        return end_states[i];
                }
        for (size_t i = 0; i < ELEMENTSOF(run_states); i++)
                if (!strcmp(s, run_states[i])) {
                        *final = false;
                        return run_states[i];
                }
        return NULL;
}

int a2a_reply(struct a2a_out *a, struct a2a_remote_st *r, char *line, int64_t now)
{
        char *f[6], *p = line;
        struct a2a_item *it;
        bool final = false;
        const char *state = NULL;

        for (size_t i = 0; i < 6; i++) {
                f[i] = p;
                p = i < 5 ? strchr(p, '\t') : NULL;
                if (i < 5 && !p)
                        return -EPROTO;
                if (p)
                        *p++ = '\0';
        }
        if (strchr(f[5], '\t') || !field_ok(f[0], NAME_MAX, false) ||
            !field_ok(f[3], A2A_TASK_MAX, false) || !field_ok(f[5], 300, true))
                return -EPROTO;
        it = a2a_item_find(a, f[0]);
        /* adopt, checked, resend: a send that asked ListTasks first */
        bool adopt = !strcmp(f[1], "adopt");
        bool send = adopt || !strcmp(f[1], "send") || !strcmp(f[1], "checked") ||
                    !strcmp(f[1], "resend");
        if (!it || strcmp(it->remote, r->name) ||
            (send ? it->st != AI_SENDING : strcmp(f[1], "get") || it->st != AI_GETTING))
                return -EPROTO; /* answers come in the order of the requests */
        if (strcmp(f[4], "-") && !(state = state_of(f[4], &final)))
                return -EPROTO;
        const char *text = strcmp(f[5], "-") ? f[5] : "";
        if (adopt && (strcmp(f[2], "ok") || !state || !strcmp(f[3], "-")))
                return -EPROTO;
        r->inflight--;
        if (!strcmp(f[1], "resend")) {
                r->list_tasks = 0;
                r->resent_unchecked++;
        } else if (adopt || !strcmp(f[1], "checked")) {
                r->list_tasks = 1;
        }
        if (adopt) {
                /* The server has it from an earlier try: followed, not
                 * sent again; its end (and artifacts) come by GetTask. */
                snprintf(it->task, sizeof(it->task), "%s", f[3]);
                int q = a2a_item_task_record(a, it);
                if (q < 0)
                        spool_error(a->sp, q, "Cannot record the A2A task of %s", it->id);
                r->adopted++;
                a->st.followed++;
                log_info("A2A remote %s already has %s as task %s (%s): following it, not "
                         "sent again", it->remote, it->id, it->task, state);
                it->tries = 0;
                it->st = AI_FOLLOW;
                it->state = state;
                it->next = now;
                return 0;
        }
        if (!strcmp(f[2], "ok") && state) {
                if (send) {
                        a->st.sent++;
                        /* The server is back: what waits for it goes now. */
                        for (size_t i = 0; i < a->n_items; i++)
                                if (!a->items[i].gone && a->items[i].st == AI_UNSENT &&
                                    !strcmp(a->items[i].remote, it->remote))
                                        a->items[i].next = 0;
                        if (strcmp(f[3], "-"))
                                snprintf(it->task, sizeof(it->task), "%s", f[3]);
                }
                if (final || !it->task[0]) {
                        a2a_item_archived(a, it, final ? state : "completed", text, now);
                        return 0;
                }
                if (send) {
                        int q = a2a_item_task_record(a, it);
                        if (q < 0)
                                spool_error(a->sp, q, "Cannot record the A2A task of %s", it->id);
                        a->st.followed++;
                        log_info("A2A remote %s took %s as task %s (%s); following it",
                                 it->remote, it->id, it->task, state);
                        it->tries = 0;
                }
                it->st = AI_FOLLOW;
                it->state = state;
                it->next = now + a2a_item_backoff(++it->tries);
                return 0;
        }
        if (!strcmp(f[2], "final") && !state) {
                if (!send) {
                        /* The server no longer knows its task: an end too. */
                        a2a_item_archived(a, it, "unknown", text, now);
                        return 0;
                }
                char detail[400];
                snprintf(detail, sizeof(detail), "A2A remote %.64s refused it: %.300s", it->remote, text);
                a2a_item_remote_error(a, it->remote, text, now);
                a2a_item_rejected(a, it, HD_R_REMOTE_REJECTED, detail, now);
                return 0;
        }
        if (!strcmp(f[2], "retry") && !state) {
                if (strcmp(r->last_error, text))
                        log_warning("A2A remote %s: %s %s: %s; retrying", it->remote,
                                    send ? "SendMessage of" : "GetTask of", it->id, text);
                a2a_item_remote_error(a, it->remote, text, now);
                a->st.retries++;
                it->st = send ? AI_UNSENT : AI_FOLLOW;
                it->next = now + a2a_item_backoff(++it->tries);
                return 0;
        }
        return -EPROTO;
}
