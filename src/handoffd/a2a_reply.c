/* A line of handoff-a2a (a2a_out.c's helper) and what it does to its
 * item.  The line is "id op outcome task state text result", seven
 * tab-separated fields: op "get", or for a send "send", "adopt" (the
 * server listed a task of ours: followed, not sent), "checked" (listed
 * none: sent) or "resend" (no ListTasks: sent again), the one the item
 * has in flight (answers come in the order of the requests); outcome
 * "ok" (the server took it: state is its task's), "final" (refused, or
 * a task the server no longer knows), "retry" (unreachable, 5xx) or
 * "token" (401, 403: retried too); result the task's artifacts as JSON;
 * "-" for a field not given.  Every
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

static const char *const run_states[] = { "submitted", "working", "unknown" };

static const char *state_of(const char *s, bool *final, enum a2a_end *end)
{
        if (a2a_end_from_state(s, end) == 0) {
                *final = true;
                return a2a_end_names[*end];
        }
        for (size_t i = 0; i < ELEMENTSOF(run_states); i++)
                if (!strcmp(s, run_states[i])) {
                        *final = false;
                        return run_states[i];
                }
        return NULL;
}

/* The artifacts field: "-", or {"text"?: string, "data"?: object} as
 * handoff-a2a writes it (ASCII JSON), parsed within the line's bound.
 * 0 with *ret (NULL for "-"), or -EPROTO. */
static int result_of(const char *s, json_t **ret)
{
        hd_limits lim = { .max_size = A2A_RESULT_LINE_MAX, .max_depth = HD_DEFAULT_MAX_DEPTH };
        _cleanup_json_ json_t *doc = NULL;
        size_t n = strlen(s);
        hd_verdict v;
        const char *k;
        json_t *x;

        *ret = NULL;
        if (!strcmp(s, "-"))
                return 0;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7f)
                        return -EPROTO;
        if (n > A2A_RESULT_LINE_MAX || hd_parse(s, n, &lim, &doc, &v) < 0 || !json_is_object(doc))
                return -EPROTO;
        json_object_foreach(doc, k, x)
                if (!(!strcmp(k, "text") && json_is_string(x)) &&
                    !(!strcmp(k, "data") && json_is_object(x)))
                        return -EPROTO;
        *ret = TAKE_PTR(doc);
        return 0;
}

int a2a_reply(struct a2a_out *a, struct a2a_remote_st *r, char *line, int64_t now)
{
        _cleanup_json_ json_t *result = NULL;
        char *f[7], *p = line;
        struct a2a_item *it;
        bool final = false;
        const char *state = NULL;
        enum a2a_end end = A2A_END_COMPLETED;

        for (size_t i = 0; i < 7; i++) {
                f[i] = p;
                p = i < 6 ? strchr(p, '\t') : NULL;
                if (i < 6 && !p)
                        return -EPROTO;
                if (p)
                        *p++ = '\0';
        }
        if (strchr(f[6], '\t') || !field_ok(f[0], NAME_MAX, false) ||
            !field_ok(f[3], A2A_TASK_MAX, false) || !field_ok(f[5], 300, true) ||
            result_of(f[6], &result) < 0)
                return -EPROTO;
        it = a2a_item_find(a, f[0]);
        /* adopt, checked, resend: a send that asked ListTasks first */
        bool adopt = !strcmp(f[1], "adopt");
        bool send = adopt || !strcmp(f[1], "send") || !strcmp(f[1], "checked") ||
                    !strcmp(f[1], "resend");
        if (!it || strcmp(it->remote, r->name) ||
            (send ? it->st != AI_SENDING : strcmp(f[1], "get") || it->st != AI_GETTING))
                return -EPROTO; /* answers come in the order of the requests */
        if (strcmp(f[4], "-") && !(state = state_of(f[4], &final, &end)))
                return -EPROTO;
        const char *text = strcmp(f[5], "-") ? f[5] : "";
        if (adopt && (strcmp(f[2], "ok") || !state || !strcmp(f[3], "-")))
                return -EPROTO;
        r->inflight--;
        if (strcmp(f[2], "token"))
                r->token_refused_usec = 0;      /* any other answer: the token passed */
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
                        a2a_item_archived(a, it, final ? end : A2A_END_COMPLETED, text, result, now);
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
                it->next = now + a2a_item_backoff(++it->tries, A2A_FOLLOW_BACKOFF_MAX_USEC);
                return 0;
        }
        if (!strcmp(f[2], "final") && !state) {
                if (!send) {
                        /* The server no longer knows its task (restarted
                         * with its store in memory?): an end too, and the
                         * result is lost, so said at warning. */
                        log_warning("A2A remote %s no longer knows task %s of %s: %s", it->remote,
                                    it->task, it->id, text);
                        a2a_item_archived(a, it, A2A_END_UNKNOWN, text, NULL, now);
                        return 0;
                }
                char detail[400];
                snprintf(detail, sizeof(detail), "A2A remote %.64s refused it: %.300s", it->remote, text);
                a2a_item_remote_error(a, it->remote, text, now);
                a2a_item_rejected(a, it, HD_R_REMOTE_REJECTED, detail, now);
                return 0;
        }
        if ((!strcmp(f[2], "retry") || !strcmp(f[2], "token")) && !state) {
                bool token = !strcmp(f[2], "token");
                if (token && !r->token_refused_usec) {
                        r->token_refused_usec = now;
                        log_error("A2A remote %s refuses the token (%s): %s waits, retried",
                                  it->remote, text, it->id);
                } else if (strcmp(r->last_error, text)) {
                        log_warning("A2A remote %s: %s %s: %s; retrying", it->remote,
                                    send ? "SendMessage of" : "GetTask of", it->id, text);
                }
                a2a_item_remote_error(a, it->remote, text, now);
                a->st.retries++;
                it->st = send ? AI_UNSENT : AI_FOLLOW;
                it->next = now + a2a_item_backoff(++it->tries, send ? A2A_BACKOFF_MAX_USEC
                                                                    : A2A_FOLLOW_BACKOFF_MAX_USEC);
                return 0;
        }
        return -EPROTO;
}
