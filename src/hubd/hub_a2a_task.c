/* A2A tasks: the Task of a handoff as the
 * spool holds it (items_status()), the result its agent reported being
 * the task's artifact.  The hub keeps no task state of its own.  A task
 * whose agent asked for input (a result input_required) and whose sender
 * answered has a handoff a turn: its state is its last turn's, its
 * events those of each turn in order, its history each turn's messages,
 * the sender's (kept in a2a.d) and the agent's (its question).
 *
 * Nor does it keep a task's events: they follow from its state, since
 * a handoff moves one way (handoff/, claimed/, archive/, its result
 * beside it) and each state the spool can hold has one history that
 * every earlier state's is the start of: SUBMITTED; then WORKING when
 * its agent reports a result (completes = yes); then each artifact; then
 * the end.  An event's generation is its place in that history, the
 * same after a restart of the hub as before. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hub.h"
#include "hub_a2a.h"
#include "hub_push.h"
#include "items.h"
#include "util.h"

/* A Task: its state, and a status message with text when there is one
 * (a reason code and its detail).  hstatus: the spool's word for it. */
json_t *a2a_task_new(const char *id, const char *ctx, const char *state,
                     const char *hstatus, const char *reason, const char *detail,
                     const char *at)
{
        json_t *t, *status, *meta;

        status = json_pack("{s:s}", "state", state);
        meta = json_pack("{s:s}", "handoffStatus", hstatus);
        t = json_pack("{s:s, s:s, s:o, s:o}", "id", id, "contextId", ctx ? ctx : "",
                      "status", status, "metadata", meta);
        if (!t || !status || !meta)
                return NULL;
        if (at)
                json_object_set_new(status, "timestamp", json_string(at));
        if (reason) {
                _cleanup_free_ char *text = NULL;
                char mid[NAME_MAX + 1];
                snprintf(mid, sizeof(mid), "%s-status", id);
                if (asprintf(&text, "%s%s%s", reason, detail && *detail ? ": " : "",
                             detail ? detail : "") < 0) {
                        json_decref(t);
                        return NULL;
                }
                json_object_set_new(meta, "reason", json_string(reason));
                json_object_set_new(status, "message",
                                    json_pack("{s:s, s:s, s:s, s:s, s:[{s:s}]}", "messageId",
                                              mid, "role", "ROLE_AGENT", "taskId", id,
                                              "contextId", ctx ? ctx : "", "parts", "text", text));
        }
        return t;
}

const char *a2a_str(const json_t *o, const char *k)
{
        return json_string_value(json_object_get(o, k));
}

/* The A2A state of what became of the handoff (items_status()): consumed
 * ends the task for an agent whose handoffs are never completed ([agent]
 * completes = no, the default); for one that reports a result (completes
 * = yes) the task is WORKING from the consume until the result comes. */
static const char *task_state(const char *st, bool completes, bool *ret_reason)
{
        *ret_reason = false;
        if (!strcmp(st, "consumed"))
                return completes ? "TASK_STATE_WORKING" : "TASK_STATE_COMPLETED";
        if (!strcmp(st, "rejected")) {
                *ret_reason = true;
                return "TASK_STATE_REJECTED";
        }
        if (!strcmp(st, "expired")) {
                *ret_reason = true;
                return "TASK_STATE_CANCELED";
        }
        if (!strcmp(st, "canceled"))
                return "TASK_STATE_CANCELED";   /* withdrawn by its sender */
        return "TASK_STATE_SUBMITTED";
}

/* The end of a task an A2A remote ran for us (a2a_out.c's remote_outcome,
 * the server's state in lower case): the same state here. */
static const char *remote_a2a_state(const char *ro, bool *ret_reason)
{
        static const struct { const char *ro, *state; bool reason; } map[] = {
                { "completed", "TASK_STATE_COMPLETED", false },
                { "failed", "TASK_STATE_FAILED", true },
                { "canceled", "TASK_STATE_CANCELED", false },
                { "rejected", "TASK_STATE_REJECTED", true },
                { "input_required", "TASK_STATE_INPUT_REQUIRED", false },
                { "auth_required", "TASK_STATE_AUTH_REQUIRED", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(map); i++)
                if (!strcmp(ro, map[i].ro)) {
                        *ret_reason = map[i].reason;
                        return map[i].state;
                }
        *ret_reason = true;     /* "unknown": the server forgot it */
        return "TASK_STATE_FAILED";
}

bool a2a_task_state_known(const char *s)
{
        static const char *const states[] = {
                "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED",
                "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED",
                "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED",
        };

        for (size_t i = 0; i < ELEMENTSOF(states); i++)
                if (!strcmp(s, states[i]))
                        return true;
        return false;
}

/* The result its agent reported (items.h "result"), as the task's one
 * artifact: a text part, a data part, or both. */
static json_t *result_artifact(const char *id, const json_t *res)
{
        const char *text = a2a_str(res, "text");
        const json_t *data = json_object_get(res, "data");
        char aid[NAME_MAX + 1];
        json_t *parts = json_array();

        if (!parts)
                return NULL;
        snprintf(aid, sizeof(aid), "%s-result", id);
        if (text)
                json_array_append_new(parts, json_pack("{s:s}", "text", text));
        if (data)
                json_array_append_new(parts, json_pack("{s:O, s:s}", "data", data, "mediaType",
                                                       "application/json"));
        return json_pack("{s:s, s:s, s:o, s:{s:s, s:s}}", "artifactId", aid, "name", "result",
                         "parts", parts, "metadata", "agent", a2a_str(res, "agent") ?: "",
                         "completedAt", a2a_str(res, "completed_at") ?: "");
}

/* The agent's question of an input_required result res of turn id: a
 * Message, its text and its data, if any. */
static json_t *question_message(const char *id, const char *ctx, const json_t *res)
{
        const json_t *data = json_object_get(res, "data");
        char mid[NAME_MAX + 1];
        json_t *m, *parts;

        snprintf(mid, sizeof(mid), "%s-question", id);
        m = json_pack("{s:s, s:s, s:s, s:s, s:[{s:s}]}", "messageId", mid, "role", "ROLE_AGENT",
                      "taskId", id, "contextId", ctx ? ctx : "", "parts", "text",
                      a2a_str(res, "text") ?: "");
        parts = json_object_get(m, "parts");
        if (m && data && json_array_append_new(parts, json_pack("{s:O, s:s}", "data", data,
                                                                "mediaType",
                                                                "application/json")) < 0) {
                json_decref(m);
                return NULL;
        }
        return m;
}

/* The task of a result: COMPLETED, FAILED with the agent's reason, or
 * INPUT_REQUIRED with its question; its words, if any, the artifact. */
static json_t *task_of_result(const char *id, const char *ctx, const char *st, const json_t *res)
{
        const char *rs = a2a_str(res, "status") ?: "";
        bool failed = !strcmp(rs, "failed"), asks = !strcmp(rs, "input_required");
        json_t *t = a2a_task_new(id, ctx, failed ? "TASK_STATE_FAILED" : asks
                                 ? "TASK_STATE_INPUT_REQUIRED" : "TASK_STATE_COMPLETED", st,
                                 failed ? "failed" : NULL, failed ? a2a_str(res, "reason") : NULL,
                                 a2a_str(res, "recorded_at"));

        /* its history went through WORKING (a2a_task_history()) */
        if (t && json_object_set_new(json_object_get(t, "metadata"), "handoffResult",
                                     json_string(failed ? "failed" : asks ? "input_required"
                                                                          : "completed")) < 0) {
                json_decref(t);
                return NULL;
        }
        if (t && asks) {
                if (json_object_set_new(json_object_get(t, "status"), "message",
                                        question_message(id, ctx, res)) < 0) {
                        json_decref(t);
                        return NULL;
                }
                return t;
        }
        if (t && (a2a_str(res, "text") || json_object_get(res, "data")) &&
            json_object_set_new(t, "artifacts", json_pack("[o]", result_artifact(id, res))) < 0) {
                json_decref(t);
                return NULL;
        }
        return t;
}

/* The task of item (hub_item_find()); completes: its agent's [agent]
 * completes now, which decides only for an item consumed before the
 * daemon recorded the setting at the consume (its outcome's
 * "completes"): a task that ended stays ended when the setting changes. */
static json_t *task_of_item(const char *id, const char *ctx, const json_t *item, bool completes)
{
        const char *st = a2a_str(item, "status") ?: "pending";
        const json_t *at_consume = json_object_get(item, "completes");

        if (json_is_boolean(at_consume))
                completes = json_is_true(at_consume);
        const char *reason = a2a_str(item, "reason"), *detail = a2a_str(item, "detail");
        const char *at = a2a_str(item, "archived_at") ?: a2a_str(item, "at");
        bool with_reason;
        const char *state;

        if (!strcmp(st, "relayed")) {
                /* the receipts of the host it went to, if one came: the
                 * result its agent reported there, or its outcome (WORKING
                 * after the consume of an agent that reports results,
                 * which the consumed receipt says) */
                const char *ro = a2a_str(item, "remote_outcome");
                const char *to = a2a_str(item, "relayed_to") ?: "";
                if (strncmp(to, "a2a:", 4) && json_object_get(item, "result"))
                        return task_of_result(id, ctx, st, json_object_get(item, "result"));
                if (!ro)
                        return a2a_task_new(id, ctx, "TASK_STATE_SUBMITTED", st, NULL, NULL, at);
                state = !strncmp(to, "a2a:", 4) ? remote_a2a_state(ro, &with_reason)
                                                : task_state(ro, json_is_true(at_consume),
                                                             &with_reason);
                return a2a_task_new(id, ctx, state, st,
                                    with_reason ? (a2a_str(item, "remote_reason") ?: ro) : NULL,
                                    a2a_str(item, "remote_detail"),
                                    a2a_str(item, "remote_at") ?: at);
        }
        if (!strcmp(st, "consumed") && json_object_get(item, "result"))
                return task_of_result(id, ctx, st, json_object_get(item, "result"));
        state = task_state(st, completes, &with_reason);
        if (with_reason && !reason)
                reason = st;
        return a2a_task_new(id, ctx, state, st, with_reason ? reason : NULL, detail, at);
}

/* Turn t of agent's task task_id, from the spool: 0 with *ret; -ENOENT
 * when the spool no longer holds it.  The spool's lookup goes state by
 * state while the daemon moves the item on (handoff/ to claimed/ to
 * archive/), and may find it in none: looked for again, and a turn whose
 * document is kept and whose handoff may still be valid is SUBMITTED,
 * not unknown, since SendMessage said it exists. */
static int turn_lookup(struct hub *h, const char *agent, const struct a2a_kept *t,
                       const char *task_id, json_t **ret)
{
        _cleanup_json_ json_t *item = NULL;
        const struct config_agent *to = config_agent(h->cfg, t->to);
        json_t *task, *m;
        int r = -ENOENT;

        for (int i = 0; i < 3 && r == -ENOENT; i++)
                r = hub_item_find(h, t->id, &item);
        if (r == -ENOENT && t->on_disk &&
            t->mtime.tv_sec + h->cfg->max_window + h->cfg->max_clock_skew >= time(NULL)) {
                task = a2a_task_new(t->id, t->ctx, "TASK_STATE_SUBMITTED", "pending", NULL, NULL,
                                    NULL);
        } else if (r < 0) {
                return r;
        } else {
                json_object_set_new(item, "status", json_string(items_status(item)));
                /* the daemon rejected it: its document is no longer needed
                 * for a retry (one makes it anew) nor counted against its
                 * sender */
                if (t->on_disk && !strcmp(items_status(item) ?: "", "rejected") &&
                    strcmp(a2a_str(item, "reason") ?: "", "bad_a2a_id"))
                        a2a_kept_rejected(h, agent, t->id);
                task = task_of_item(t->id, t->ctx, item, to && to->completes);
        }
        if (!task)
                return -ENOMEM;
        /* a later turn is a handoff of its own, shown as its task */
        m = json_object_get(json_object_get(task, "status"), "message");
        if (json_object_set_new(task, "id", json_string(task_id)) < 0 ||
            (m && json_object_set_new(m, "taskId", json_string(task_id)) < 0)) {
                json_decref(task);
                return -ENOMEM;
        }
        *ret = task;
        return 0;
}

/* A turn before the last that the spool no longer holds (pruned): it
 * asked for input, or there would be no turn after it. */
static json_t *turn_gone(const char *task_id, const struct a2a_kept *t)
{
        json_t *task = a2a_task_new(task_id, t->ctx, "TASK_STATE_INPUT_REQUIRED", "consumed",
                                    NULL, NULL, NULL);

        if (task && json_object_set_new(json_object_get(task, "metadata"), "handoffResult",
                                        json_string("input_required")) < 0) {
                json_decref(task);
                return NULL;
        }
        return task;
}

/* The events of the turns of task (v, n), one numbering (generation
 * 1, 2, ...) through them all, into *ret_hist; the last turn's task into
 * *ret; each turn's message of the agent's, if any (its question, its
 * reason) into *ret_said (one entry a turn, null where none). */
static int turns_compose(struct hub *h, const char *agent, const char *task_id,
                         const struct a2a_kept *v, size_t n, json_t **ret, json_t **ret_hist,
                         json_t **ret_said)
{
        _cleanup_json_ json_t *hist = json_array(), *said = json_array(), *last = NULL;
        json_t *ev, *body;
        size_t i, j;
        int r;

        if (!hist || !said)
                return -ENOMEM;
        for (i = 0; i < n; i++) {
                _cleanup_json_ json_t *t = NULL, *th = NULL;
                const json_t *msg;

                r = turn_lookup(h, agent, &v[i], task_id, &t);
                if (r == -ENOENT && i + 1 < n)
                        r = (t = turn_gone(task_id, &v[i])) ? 0 : -ENOMEM;
                if (r < 0)
                        return r;
                th = a2a_task_history(t);
                if (!th)
                        return -ENOMEM;
                json_array_foreach(th, j, ev) {
                        body = json_object_get(ev, "statusUpdate") ?: json_object_get(ev,
                                                                        "artifactUpdate");
                        if (json_object_set_new(json_object_get(body, "metadata"), A2A_GENERATION,
                                                json_integer((json_int_t)json_array_size(hist) +
                                                             1)) < 0 ||
                            json_array_append(hist, ev) < 0)
                                return -ENOMEM;
                }
                msg = json_object_get(json_object_get(t, "status"), "message");
                if (json_array_append_new(said, msg ? json_deep_copy(msg) : json_null()) < 0)
                        return -ENOMEM;
                json_decref(last);
                last = TAKE_PTR(t);
        }
        if (!last)
                return -ENOENT;
        if (json_object_set_new(json_object_get(last, "metadata"), A2A_GENERATION,
                                json_integer((json_int_t)json_array_size(hist))) < 0)
                return -ENOMEM;
        if (n > 1 && json_object_set_new(json_object_get(last, "metadata"), "handoffId",
                                         json_string(v[n - 1].id)) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(last);
        *ret_hist = TAKE_PTR(hist);
        if (ret_said)
                *ret_said = TAKE_PTR(said);
        return 0;
}

/* The messages of task (its turns v, n, and what the agent said in
 * each, said): the sender's message of each turn, then the agent's, the
 * last max of them into task's history. */
static int history_set(struct hub *h, const char *agent, const char *task_id,
                       const struct a2a_kept *v, size_t n, const json_t *said, int64_t max,
                       json_t *task)
{
        _cleanup_json_ json_t *all = json_array();
        size_t i, skip;

        if (!all)
                return -ENOMEM;
        for (i = 0; i < n; i++) {
                _cleanup_json_ json_t *doc = NULL;
                const json_t *agent_said = json_array_get(said, i);
                json_t *m;

                /* a document rejected or pruned: its message is gone */
                if (v[i].on_disk && a2a_kept_read(h, agent, v[i].id, &doc, NULL, NULL) == 0 &&
                    (m = json_deep_copy(json_object_get(doc, "payload")))) {
                        if (json_object_set_new(m, "taskId", json_string(task_id)) < 0 ||
                            json_array_append_new(all, m) < 0)
                                return -ENOMEM;
                }
                if (json_is_object(agent_said) && json_array_append(all, (json_t *)agent_said) < 0)
                        return -ENOMEM;
        }
        skip = max >= 0 && json_array_size(all) > (size_t)max ? json_array_size(all) - (size_t)max
                                                              : 0;
        while (skip--)
                json_array_remove(all, 0);
        return json_object_set(task, "history", all) < 0 ? -ENOMEM : 0;
}

int a2a_task_lookup_full(struct hub *h, const char *agent, const struct a2a_kept *t,
                         int64_t history, json_t **ret, json_t **ret_hist)
{
        _cleanup_free_ struct a2a_kept *v = NULL;
        _cleanup_json_ json_t *task = NULL, *hist = NULL, *said = NULL;
        const struct a2a_kept *turns = t;
        size_t n = 1;
        int r;

        /* one turn, as most tasks are: the index is not asked again */
        if (t->turns > 1) {
                r = a2a_kept_turns(agent, t->id, &v, &n);
                if (r < 0)
                        return r;
                turns = v;
        }
        r = turns_compose(h, agent, t->id, turns, n, &task, &hist, &said);
        if (r < 0)
                return r;
        if (history > 0) {
                r = history_set(h, agent, t->id, turns, n, said, history, task);
                if (r < 0)
                        return r;
        }
        /* its push configs' events queued before anyone is shown it */
        r = hub_push_observe(h, agent, task, hist);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(task);
        if (ret_hist)
                *ret_hist = TAKE_PTR(hist);
        return 0;
}

int a2a_task_lookup(struct hub *h, const char *agent, const struct a2a_kept *t, json_t **ret)
{
        return a2a_task_lookup_full(h, agent, t, 0, ret, NULL);
}

bool a2a_state_final(const char *s)
{
        return !strcmp(s, "TASK_STATE_COMPLETED") || !strcmp(s, "TASK_STATE_FAILED") ||
               !strcmp(s, "TASK_STATE_CANCELED") || !strcmp(s, "TASK_STATE_REJECTED") ||
               !strcmp(s, "TASK_STATE_INPUT_REQUIRED") || !strcmp(s, "TASK_STATE_AUTH_REQUIRED");
}

/* Whether s is INPUT_REQUIRED: the state a task takes a message in. */
bool a2a_state_asks(const char *s)
{
        return !strcmp(s, "TASK_STATE_INPUT_REQUIRED");
}

static json_t *event_meta(size_t gen)
{
        return json_pack("{s:I}", A2A_GENERATION, (json_int_t)gen);
}

/* A TaskStatusUpdateEvent of task, generation gen, status (taken). */
static json_t *status_event(const json_t *task, json_t *status, size_t gen)
{
        return json_pack("{s:{s:s, s:s, s:o, s:o}}", "statusUpdate", "taskId",
                         a2a_str(task, "id") ?: "", "contextId", a2a_str(task, "contextId") ?: "",
                         "status", status, "metadata", event_meta(gen));
}

json_t *a2a_task_history(const json_t *task)
{
        const json_t *status = json_object_get(task, "status"), *arts, *art;
        const json_t *meta = json_object_get(task, "metadata");
        const char *st = a2a_str(status, "state") ?: "TASK_STATE_SUBMITTED";
        bool worked = !strcmp(st, "TASK_STATE_WORKING") || json_object_get(meta, "handoffResult");
        json_t *h = json_array();
        size_t i;

        if (!h)
                return NULL;
        /* Only the last is the state as it is now (its status whole); the
         * ones before say their state alone. */
        if (json_array_append_new(h, status_event(task, !strcmp(st, "TASK_STATE_SUBMITTED")
                                                        ? json_deep_copy(status)
                                                        : json_pack("{s:s}", "state",
                                                                    "TASK_STATE_SUBMITTED"), 1)) < 0)
                goto fail;
        if (worked && json_array_append_new(h, status_event(task, !strcmp(st, "TASK_STATE_WORKING")
                                                                ? json_deep_copy(status)
                                                                : json_pack("{s:s}", "state",
                                                                            "TASK_STATE_WORKING"),
                                                            json_array_size(h) + 1)) < 0)
                goto fail;
        arts = json_object_get(task, "artifacts");
        json_array_foreach(arts, i, art)
                if (json_array_append_new(h, json_pack("{s:{s:s, s:s, s:O, s:b, s:o}}",
                                                       "artifactUpdate", "taskId",
                                                       a2a_str(task, "id") ?: "", "contextId",
                                                       a2a_str(task, "contextId") ?: "",
                                                       "artifact", art, "lastChunk", 1,
                                                       "metadata",
                                                       event_meta(json_array_size(h) + 1))) < 0)
                        goto fail;
        if (strcmp(st, "TASK_STATE_SUBMITTED") && strcmp(st, "TASK_STATE_WORKING") &&
            json_array_append_new(h, status_event(task, json_deep_copy(status),
                                                  json_array_size(h) + 1)) < 0)
                goto fail;
        return h;
fail:
        json_decref(h);
        return NULL;
}

int a2a_task_number(json_t *task)
{
        _cleanup_json_ json_t *h = a2a_task_history(task);

        if (!h)
                return -ENOMEM;
        return json_object_set_new(json_object_get(task, "metadata"), A2A_GENERATION,
                                   json_integer((json_int_t)json_array_size(h))) < 0
                       ? -ENOMEM : 0;
}

json_t *a2a_task_at(const json_t *task, const json_t *history, size_t gen)
{
        json_t *t, *arts = NULL, *ev;
        const json_t *status = NULL;

        if (gen >= json_array_size(history))
                return json_deep_copy(task);
        for (size_t i = 0; i < gen; i++) {
                ev = json_array_get(history, i);
                if (json_object_get(ev, "statusUpdate"))
                        status = json_object_get(json_object_get(ev, "statusUpdate"), "status");
                else if ((arts || (arts = json_array())) &&
                         json_array_append(arts, json_object_get(json_object_get(ev,
                                                                                 "artifactUpdate"),
                                                                 "artifact")) < 0)
                        goto fail;
        }
        t = json_pack("{s:s, s:s, s:O, s:o}", "id", a2a_str(task, "id") ?: "", "contextId",
                      a2a_str(task, "contextId") ?: "", "status", status, "metadata",
                      event_meta(gen));
        if (t && arts && json_object_set_new(t, "artifacts", arts) < 0) {
                json_decref(t);
                return NULL;
        }
        if (!t)
                json_decref(arts);
        return t;
fail:
        json_decref(arts);
        return NULL;
}
