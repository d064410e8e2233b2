/* The sidecars' documents (store_doc.h): their keys are spelled here
 * alone, in the writer and the reader of each. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_doc.h"
#include "util.h"

static const char *str(const json_t *o, const char *key)
{
        return json_string_value(json_object_get(o, key));
}

static bool copy(char *dst, size_t n, const char *src)
{
        return src && xsnprintf(dst, n, "%s", src) >= 0;
}

static int dump(json_t *o, char **ret_buf, size_t *ret_len)
{
        int r;

        if (!o)
                return -ENOMEM;
        r = hd_canon_dump(o, NULL, ret_buf, ret_len);
        json_decref(o);
        return r;
}

int store_outcome_dump(const struct store_outcome *o, char **ret_buf, size_t *ret_len)
{
        char at[HD_TIME_MAX], acc[HD_TIME_MAX] = "";
        json_t *d;

        hd_time_format(o->archived_usec, at, sizeof(at));
        if (o->accepted_usec)
                hd_time_format(o->accepted_usec, acc, sizeof(acc));
        d = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "handoff_id", o->id, "outcome",
                      o->outcome, "from_agent", o->from, "to_agent", o->to, "archived_at", at,
                      "accepted_at", acc);
        if (!d)
                return -ENOMEM;
        if (o->relayed_to[0] &&
            (json_object_set_new(d, "relayed_to", json_string(o->relayed_to)) < 0 ||
             json_object_set_new(d, "duplicate", json_boolean(o->duplicate)) < 0))
                goto oom;
        if (o->completes >= 0 &&
            json_object_set_new(d, "completes", json_boolean(o->completes)) < 0)
                goto oom;
        if (o->remote_outcome[0] &&
            (json_object_set_new(d, "remote_outcome", json_string(o->remote_outcome)) < 0 ||
             json_object_set_new(d, "remote_host", json_string(o->relayed_to)) < 0 ||
             json_object_set_new(d, "remote_at", json_string(at)) < 0 ||
             json_object_set_new(d, "remote_detail", json_string(o->remote_detail ?: "")) < 0 ||
             json_object_set_new(d, "a2a_task", json_string(o->a2a_task ?: "")) < 0))
                goto oom;
        return dump(d, ret_buf, ret_len);
oom:
        json_decref(d);
        return -ENOMEM;
}

int store_outcome_load(int dirfd, const char *name, struct store_outcome *ret)
{
        hd_limits lim = { .max_size = 65536 };
        _cleanup_json_ json_t *d = NULL;
        struct store_outcome o = { .completes = -1 };
        const char *at, *acc, *rt;
        hd_verdict v;
        int r;

        r = hd_load_at(dirfd, name, &lim, &d, &v);
        if (r < 0)
                return r;
        at = str(d, "archived_at");
        acc = str(d, "accepted_at");
        rt = str(d, "relayed_to");
        if (!copy(o.id, sizeof(o.id), str(d, "handoff_id")) ||
            !copy(o.outcome, sizeof(o.outcome), str(d, "outcome")) ||
            !at || hd_time_parse(at, &o.archived_usec) < 0)
                return -EBADMSG;
        /* Written by every version: kept as "" when missing. */
        (void) copy(o.from, sizeof(o.from), str(d, "from_agent"));
        (void) copy(o.to, sizeof(o.to), str(d, "to_agent"));
        if (rt)
                (void) copy(o.relayed_to, sizeof(o.relayed_to), rt);
        if (acc && *acc && hd_time_parse(acc, &o.accepted_usec) < 0)
                o.accepted_usec = 0;
        o.duplicate = json_is_true(json_object_get(d, "duplicate"));
        if (json_is_boolean(json_object_get(d, "completes")))
                o.completes = json_is_true(json_object_get(d, "completes"));
        (void) copy(o.remote_outcome, sizeof(o.remote_outcome), str(d, "remote_outcome"));
        *ret = o;
        return 0;
}

int store_outcome_load_relayed(int dirfd, const char *name, const char *host, json_t **ret)
{
        json_t *side = NULL;
        hd_verdict v;
        int r;

        r = hd_load_at(dirfd, name, NULL, &side, &v);
        if (r < 0)
                return r;
        if (strcmp(str(side, "outcome") ?: "", "relayed") ||
            strcmp(str(side, "relayed_to") ?: "", host)) {
                json_decref(side);
                return -ENOMSG;
        }
        *ret = side;
        return 0;
}

int store_outcome_add_end(json_t *side, const struct store_remote_end *e,
                          bool (*is_final)(const char *outcome), int64_t now, bool *ret_dup)
{
        char at[HD_TIME_MAX];
        json_t *seen = json_object_get(side, "remote_outcomes"), *x;
        size_t i;

        *ret_dup = false;
        json_array_foreach(seen, i, x)
                if (!strcmp(json_string_value(x) ?: "", e->outcome)) {
                        *ret_dup = true;
                        return 0;
                }
        if (!json_is_array(seen)) {
                seen = json_array();
                if (!seen || json_object_set_new(side, "remote_outcomes", seen) < 0)
                        return -ENOMEM;
        }
        if (json_array_append_new(seen, json_string(e->outcome)) < 0)
                return -ENOMEM;
        const char *cur = str(side, "remote_outcome");
        if (cur && is_final(cur))
                return 0;
        hd_time_format(now, at, sizeof(at));
        if (json_object_set_new(side, "remote_outcome", json_string(e->outcome)) < 0 ||
            json_object_set_new(side, "remote_host", json_string(e->host)) < 0 ||
            json_object_set_new(side, "remote_at", json_string(e->at)) < 0 ||
            json_object_set_new(side, "remote_reason", json_string(e->reason ?: "")) < 0 ||
            json_object_set_new(side, "remote_detail", json_string(e->detail ?: "")) < 0 ||
            json_object_set_new(side, "receipt_at", json_string(at)) < 0)
                return -ENOMEM;
        if (e->completes >= 0 &&
            json_object_set_new(side, "completes", json_boolean(e->completes)) < 0)
                return -ENOMEM;
        return 0;
}

int store_reason_dump(const char *base, hd_reason reason, const char *detail, const char *origin,
                      const char *handoff_id, int64_t now, char **ret_buf, size_t *ret_len)
{
        json_t *o;
        char at[HD_TIME_MAX];

        hd_time_format(now, at, sizeof(at));
        o = json_pack("{s:s, s:s, s:s, s:s}", "reason", hd_reason_name(reason),
                      "detail", detail ? detail : "", "at", at, "name", base);
        if (!o)  /* a detail that is no UTF-8 must not keep a file here */
                o = json_pack("{s:s, s:s, s:s, s:s}", "reason", hd_reason_name(reason),
                              "detail", "(detail not printable)", "at", at, "name", base);
        if (!o)
                return -ENOMEM;
        if (handoff_id && hd_id_valid(handoff_id))
                json_object_set_new(o, "handoff_id", json_string(handoff_id));
        if (origin[0])
                json_object_set_new(o, "relayed_from", json_string(origin));
        return dump(o, ret_buf, ret_len);
}

int store_reason_load(int dirfd, const char *name, struct store_reason *ret)
{
        hd_limits lim = { .max_size = 65536 };
        _cleanup_json_ json_t *d = NULL;
        struct store_reason s = { 0 };
        const char *id;
        hd_verdict v;
        int r;

        r = hd_load_at(dirfd, name, &lim, &d, &v);
        if (r < 0)
                return r;
        if (!copy(s.reason, sizeof(s.reason), str(d, "reason")))
                return -EBADMSG;
        (void) copy(s.detail, sizeof(s.detail), str(d, "detail"));
        id = str(d, "handoff_id");
        if (id && !copy(s.id, sizeof(s.id), id))
                return -EBADMSG;
        *ret = s;
        return 0;
}

int store_refusal_dump(const char *id, const char *reason, const char *detail, int64_t now,
                       char **ret_buf, size_t *ret_len)
{
        char at[HD_TIME_MAX];

        hd_time_format(now, at, sizeof(at));
        return dump(json_pack("{s:s, s:s, s:s, s:s}", "handoff_id", id, "reason", reason,
                              "detail", detail, "at", at),
                    ret_buf, ret_len);
}

int store_result_dump(const char *id, const char *agent, const char *status, int64_t at,
                      const json_t *result, char **ret_buf, size_t *ret_len)
{
        char t[HD_TIME_MAX];

        hd_time_format(at, t, sizeof(t));
        return dump(json_pack("{s:s, s:s, s:s, s:s, s:O}", "handoff_id", id, "agent", agent,
                              "status", status, "recorded_at", t, "result", result),
                    ret_buf, ret_len);
}

int store_result_check(const json_t *doc, const char *id, const char *status)
{
        if (!json_is_object(doc) || strcmp(str(doc, "handoff_id") ?: "", id) ||
            strcmp(str(doc, "status") ?: "", status) || !str(doc, "agent") ||
            !str(doc, "recorded_at") || !json_is_object(json_object_get(doc, "result")))
                return -EBADMSG;
        return 0;
}

int store_result_load(int dirfd, const char *name, size_t max, json_t **ret, char *at, size_t n)
{
        hd_limits lim = { .max_size = max, .max_depth = HD_DEFAULT_MAX_DEPTH };
        _cleanup_json_ json_t *d = NULL;
        json_t *res;
        hd_verdict v;
        int r;

        r = hd_load_at(dirfd, name, &lim, &d, &v);
        if (r < 0)
                return r;
        res = json_object_get(d, "result");
        if (!res)
                return -EBADMSG;
        if (!copy(at, n, str(d, "recorded_at")))
                (void) copy(at, n, "?");
        *ret = json_incref(res);
        return 0;
}
