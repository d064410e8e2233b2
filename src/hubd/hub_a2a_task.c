/* A2A tasks: the Task of a handoff as the
 * spool holds it (items_status()), the result its agent reported being
 * the task's artifact.  The hub keeps no task state of its own.
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

/* The task of a result: COMPLETED, or FAILED with the agent's reason; its
 * words, if any, the artifact. */
static json_t *task_of_result(const char *id, const char *ctx, const char *st, const json_t *res)
{
        bool failed = !strcmp(a2a_str(res, "status") ?: "", "failed");
        json_t *t = a2a_task_new(id, ctx, failed ? "TASK_STATE_FAILED" : "TASK_STATE_COMPLETED", st,
                                 failed ? "failed" : NULL, failed ? a2a_str(res, "reason") : NULL,
                                 a2a_str(res, "recorded_at"));

        /* its history went through WORKING (a2a_task_history()) */
        if (t && json_object_set_new(json_object_get(t, "metadata"), "handoffResult",
                                     json_string(failed ? "failed" : "completed")) < 0) {
                json_decref(t);
                return NULL;
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

/* The task t of agent's, from the spool.  0 with *ret; -ENOENT when the spool no
 * longer holds it.  The spool's lookup goes state by state while the
 * daemon moves the item on (handoff/ to claimed/ to archive/), and may
 * find it in none: looked for again, and a task whose document is kept
 * and whose handoff may still be valid is SUBMITTED, not unknown, since
 * SendMessage said it exists. */
int a2a_task_lookup(struct hub *h, const char *agent, const struct a2a_kept *t, json_t **ret)
{
        _cleanup_json_ json_t *item = NULL;
        const struct config_agent *to = config_agent(h->cfg, t->to);
        int r = -ENOENT;

        for (int i = 0; i < 3 && r == -ENOENT; i++)
                r = hub_item_find(h, t->id, &item);
        if (r == -ENOENT && t->on_disk &&
            t->mtime.tv_sec + h->cfg->max_window + h->cfg->max_clock_skew >= time(NULL)) {
                *ret = a2a_task_new(t->id, t->ctx, "TASK_STATE_SUBMITTED", "pending", NULL, NULL,
                                    NULL);
                return *ret ? 0 : -ENOMEM;
        }
        if (r < 0)
                return r;
        json_object_set_new(item, "status", json_string(items_status(item)));
        /* the daemon rejected it: its document is no longer needed for a
         * retry (one makes it anew) nor counted against its sender */
        if (t->on_disk && !strcmp(items_status(item) ?: "", "rejected") &&
            strcmp(a2a_str(item, "reason") ?: "", "bad_a2a_id"))
                a2a_kept_rejected(h, agent, t->id);
        *ret = task_of_item(t->id, t->ctx, item, to && to->completes);
        if (*ret && a2a_task_number(*ret) < 0) {
                json_decref(*ret);
                *ret = NULL;
        }
        if (!*ret)
                return -ENOMEM;
        /* its push configs' events queued before anyone is shown it */
        r = hub_push_observe(h, agent, *ret);
        if (r < 0) {
                json_decref(*ret);
                *ret = NULL;
        }
        return r;
}

bool a2a_state_final(const char *s)
{
        return !strcmp(s, "TASK_STATE_COMPLETED") || !strcmp(s, "TASK_STATE_FAILED") ||
               !strcmp(s, "TASK_STATE_CANCELED") || !strcmp(s, "TASK_STATE_REJECTED") ||
               !strcmp(s, "TASK_STATE_INPUT_REQUIRED") || !strcmp(s, "TASK_STATE_AUTH_REQUIRED");
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
